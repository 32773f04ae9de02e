"""The CUDA code paths, run for real through the CLI on a fresh store (issues 4, 7 and 8).

First a start-up probe, in a fresh process: how long the imports take and, on a GPU, the CUDA
context and a first convolution (every command pays these; about 20 s a command on the H200).
Then each step is one `tracker` command in its own process, as a user would type it, on a
temporary folder store: `device show` (what the runs will record, whose mode must be the first
run's), a peak memory's floor against torch's own peak (FLOOR_PROBE, in a fresh process: every
ratio at most 1), whole-network inference and training at two batch sizes and inference in bfloat16
(every run with its speed probe; the first run's system metrics
must hold NVML's power over its window on a GPU), the layer
profiler, the memory boundary (doubling until CUDA runs out of memory, which must end one
measurement and not the command; then again under an 8 GB cap on the GPU's memory, which must
fit a smaller batch), a torch.profiler trace (operators ranked by their kernels' time), a repeat of a configuration (`--again`), a training job and a
detection training job on cuda, a multi-network mapping split between cpu and cuda, a small cuda
campaign, then the warehouse load, `device speed` (the probe alone, against the warehouse's
median), SQL over what was logged, and fingerprints of the device's
inference latency and, where NVML measured them, its power and GPU utilisation, each then used by
`tracker predict` on a network never measured. What is checked: every command exits 0, GPU runs carry
cuda memory, NVML power and energy where NVML reads them, and the failed boundary run is
FAILED with its error. On a GPU host a CPU measurement is taken too: its power_w must not hold
the idle GPU's power (it is RAPL's, or absent).

Usage: python benchmarks/gpu_paths.py [cpu|cuda] [OUT_DIR] [STEP,STEP...]  (cpu: a dry run of the
same steps here, shorter). Writes each step's stdout/stderr under OUT_DIR (default: a temporary
folder). With a list of steps, only those run (a lease too short for all of them runs the new
ones) with the steps they need (``NEEDS``), and only their checks count in all_ok; a name that
is no step is one line and a non-zero exit.
Last line: {"device": ..., "steps": {...: {"rc": ..., "s": ...}}, "checks": {...}, "all_ok": ...}
"""

import os
import sys

# benchmarks/logging.py is named like the stdlib module: keep this folder off the import path.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import json  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def training_toml(path: Path, model: str, device: str, data: Path, fmt: str, batch: int, steps: int,
                  workers: int, size: int) -> Path:
    path.write_text(
        f'model = "{model}"\n\n[training]\nnum_epochs = 1\nbatch_size = {batch}\nprefetch_factor = 2\n'
        f'num_workers = {workers}\ndevice = "{device}"\nmax_steps = {steps}\nlearning_rate = 0.005\n\n'
        f'[data]\npath = "{data}"\nformat = "{fmt}"\nimage_size = {size}\non_error = "skip"\n')
    return path


def campaign_toml(path: Path, device: str, nets: list[str], batches: list[int]) -> Path:
    path.write_text(
        '[campaign]\nname = "gpu-paths"\ndescription = "a small campaign on one device"\n\n'
        f'[networks]\nzoo = {json.dumps(nets)}\n\n'
        f'[measure]\nbatch_sizes = {json.dumps(batches)}\nphases = ["inference", "training"]\n'
        f'devices = ["{device}"]\nprecision = 0.02\ntime_cap_s = 3.0\n')  # 5 s took the H200 call past 600 s
    return path


#: Timed in a fresh process: the imports a tracker command pays, then (cuda) the CUDA context and
#: a first convolution (cuDNN's libraries load then).
STARTUP_PROBE = """
import json, sys, time
t = {}
t0 = time.perf_counter(); import torch; t["import_torch_s"] = time.perf_counter() - t0
t0 = time.perf_counter(); import torchvision; t["import_torchvision_s"] = time.perf_counter() - t0
t0 = time.perf_counter(); import mlflow; t["import_mlflow_s"] = time.perf_counter() - t0
t0 = time.perf_counter(); import tracker.cli.app, tracker.profile.api; t["import_tracker_s"] = time.perf_counter() - t0
if sys.argv[1] == "cuda":
    # what the tracker process pays to ask whether there is a GPU: NVML's count, or CUDA's (which
    # starts the driver: without persistence mode, seconds), before the context the child makes
    t0 = time.perf_counter(); import pynvml; pynvml.nvmlInit(); pynvml.nvmlDeviceGetCount(); pynvml.nvmlShutdown()
    t["nvml_count_s"] = time.perf_counter() - t0
    t0 = time.perf_counter(); torch.cuda.is_available(); t["cuda_is_available_s"] = time.perf_counter() - t0
    t0 = time.perf_counter(); torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
    t["cuda_context_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    conv = torch.nn.Conv2d(3, 8, 3).cuda(); conv(torch.zeros(1, 3, 32, 32, device="cuda")); torch.cuda.synchronize()
    t["first_conv_s"] = time.perf_counter() - t0
print(json.dumps({k: round(v, 3) for k, v in t.items()}))
"""

#: A peak memory's floor (fingerprint.runtime.MEMORY_FLOOR_COLUMNS) against what torch holds at
#: once, in a fresh process: the weights and live activations of an inference pass, and the
#: weights and kept activations of a training step's forward and backward, at batch 8 and 224 px
#: (vit_b_16 takes only that size). On cuda, torch's peak allocated bytes; on cpu (a dry run),
#: the CPU allocator's bytes from the profiler's memory events (as tests/test_describe.py does).
#: A floor above a peak (ratio over 1) would make fingerprints keep no floor on that device.
FLOOR_PROBE = """
import json, sys
import torch
from tracker.describe import describe
from tracker.describe.features import aggregates
from tracker.zoo import build_model

device, batch, out = sys.argv[1], 8, {}


def allocated(run):
    if device == "cuda":
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        run(); torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()
    from torch.profiler import ProfilerActivity, profile
    held = torch.nn.utils.parameters_to_vector(model.parameters()).numel() * 4 + x.numel() * 4
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    peak = held
    for e in sorted((e for e in prof.events() if e.name == "[memory]" or e.self_cpu_memory_usage),
                    key=lambda e: e.time_range.start):
        held += e.cpu_memory_usage if e.name == "[memory]" else e.self_cpu_memory_usage
        peak = max(peak, held)
    return peak


for name in ("resnet18", "mobilenet_v3_small", "densenet121", "vit_b_16"):
    model = build_model(name).to(device)
    x = torch.randn(batch, 3, 224, 224, device=device)
    a = aggregates(describe(name, 224), batch)

    def infer():
        with torch.no_grad():
            model.eval()(x)

    def train():
        model.train()(x).sum().backward()

    infer(); train()  # lazily built state (cuDNN's, oneDNN's) and the gradients' memory, once
    model.zero_grad(set_to_none=True)
    rows = {}
    for phase, run, kept in (("inference", infer, "live_activation_bytes"), ("training", train, "kept_activation_bytes")):
        peak = allocated(run)
        floor = a["weight_bytes"] + a[kept]
        rows[phase] = {"floor_mb": round(floor / 2**20, 1), "peak_mb": round(peak / 2**20, 1),
                       "ratio": round(floor / peak, 3)}
        model.zero_grad(set_to_none=True)
    out[name] = rows
    del model, x
print(json.dumps(out))
"""


def step_names(gpu: bool, big: int) -> list[str]:
    """Every step main() may run, in order (those of a GPU only on cuda)."""
    names = ["device_show", "memory_floor", "network_b1", f"network_b{big}", f"train_step_b{big}", f"bfloat16_b{big}",
             "own_network", "token_ids",
             *(["cuda0_alias", "cpu_on_gpu_host"] if gpu else []), "layers", "again", "trace", "compare", "show_b1",
             "boundary", *(["capped_boundary"] if gpu else []), "synth_images", "synth_boxes", "training_job",
             "detection_job", "mapping", "campaign", "warehouse_load", "device_speed", "sql_measurements", "sql_failed",
             "sql_repeats"]
    return names + [f"fingerprint_{t}" for t in ("latency_ms", "peak_mem_mb", "power_w", "gpu_util_pct")] + [
        "predict", "largest_batch"]


#: Steps that use what another step made (its files, its warehouse, its model): a list of steps
#: runs those too.
NEEDS = {"training_job": ("synth_images",), "detection_job": ("synth_boxes",),
         "sql_measurements": ("warehouse_load",), "sql_failed": ("warehouse_load",),
         "sql_repeats": ("warehouse_load",),
         # a fingerprint learns from the campaign's measurements (three networks at least), through the warehouse
         **{f"fingerprint_{t}": ("campaign", "warehouse_load", "sql_measurements")
            for t in ("latency_ms", "peak_mem_mb", "power_w", "gpu_util_pct")},
         "predict": ("campaign", "warehouse_load", "sql_measurements", "fingerprint_latency_ms")}


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    if device not in ("cpu", "cuda"):
        sys.exit(f"gpu_paths: device {device!r}: expected cpu or cuda")
    out = Path(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else Path(tempfile.mkdtemp(prefix="gpu-paths-"))
    only = {n for n in sys.argv[3].split(",") if n} if len(sys.argv) > 3 else None
    gpu = device == "cuda"
    big = 32 if gpu else 4
    known = step_names(gpu, big)
    if only is not None and (not only or only - set(known)):
        sys.exit(f"gpu_paths: steps {','.join(sorted(only - set(known))) or '(none)'}: expected some of "
                 f"{','.join(known)}")
    while only is not None and (more := {need for name in only for need in NEEDS.get(name, ())} - only):
        only |= more
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-paths-work-"))
    store = work / "runs"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    base = [sys.executable, "-m", "tracker", "--tracking-uri", str(store)]
    steps: dict[str, dict[str, object]] = {}
    outputs: dict[str, object] = {}

    def step(name: str, args: list[str], timeout_s: float = 300, expect_rc: int = 0,
             command: list[str] | None = None) -> object:
        """``tracker ARGS`` (or ``command``) in its own process; its stdout parsed as JSON where it is."""
        if only is not None and name not in only:
            return None
        t0 = time.perf_counter()
        try:
            p = subprocess.run(command or base + args, capture_output=True, text=True, timeout=timeout_s, env=env,
                               cwd=ROOT)
            rc, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, stdout, stderr = 124, str(e.stdout or ""), str(e.stderr or "")
        s = round(time.perf_counter() - t0, 1)
        (out / f"{name}.out").write_text(stdout)
        (out / f"{name}.err").write_text(stderr)
        steps[name] = {"rc": rc, "s": s, "ok": rc == expect_rc}
        if rc != expect_rc:
            steps[name]["stderr_tail"] = stderr.strip().splitlines()[-3:]
        print(json.dumps({"step": name, **steps[name]}), flush=True)
        try:
            parsed = json.loads(stdout)
        except ValueError:
            parsed = stdout
        outputs[name] = parsed
        return parsed

    # Where a command's start-up goes, in a fresh process (each step below pays it: about 20 s a
    # command on the H200, 5 s here): the imports, and on a GPU the CUDA context and cuDNN's first
    # convolution
    t0 = time.perf_counter()
    probe = subprocess.run([sys.executable, "-c", STARTUP_PROBE, device], capture_output=True, text=True, timeout=300,
                           env=env, cwd=ROOT)
    try:
        outputs["startup"] = json.loads(probe.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        outputs["startup"] = {"error": probe.stderr.strip().splitlines()[-3:]}
    outputs["startup"]["process_s"] = round(time.perf_counter() - t0, 2)
    print(json.dumps({"startup": outputs["startup"]}), flush=True)

    inf = ["--device", device, "--format", "json", "--time-cap", "5"]
    step("device_show", ["device", "show", device, "--format", "json"])  # what the runs below will record
    step("memory_floor", [], command=[sys.executable, "-c", FLOOR_PROBE, device])
    step("network_b1", ["profile", "network", "resnet18", "-b", "1", *inf])
    step(f"network_b{big}", ["profile", "network", "resnet50", "-b", str(big), *inf])
    step(f"train_step_b{big}", ["profile", "network", "mobilenet_v2", "-b", str(big), "--phase", "training", *inf])
    # the network's weights and inputs in bfloat16 (--dtype): its run says the number format it ran in
    step(f"bfloat16_b{big}", ["profile", "network", "resnet50", "-b", str(big), "--dtype", "bfloat16", *inf])
    # a network of one's own (FILE.py:NAME), grey images at another size, trained a step at a time
    own = ROOT / "experiments" / "models" / "lenet.py"
    step("own_network", ["profile", "network", f"{own}:lenet", "-b", str(big), "--phase", "training", "--input-size", "32",
                         *inf])
    # a network of one's own on token ids (INPUT_SHAPE, INPUT_VOCAB), an embedding and a transformer layer, trained
    seq = out / "seq.py"
    seq.write_text("import torch\nfrom torch import nn\n\nINPUT_SHAPE = (64,)\nINPUT_VOCAB = 1000\n\n\n"
                   "class Tagger(nn.Module):\n    def __init__(self) -> None:\n        super().__init__()\n"
                   "        self.embed = nn.Embedding(INPUT_VOCAB, 128)\n"
                   "        self.encoder = nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)\n"
                   "        self.head = nn.Linear(128, 5)\n\n"
                   "    def forward(self, ids: torch.Tensor) -> torch.Tensor:\n"
                   "        return self.head(self.encoder(self.embed(ids)).mean(dim=1))\n")
    step("token_ids", ["profile", "network", f"{seq}:Tagger", "-b", str(big), "--phase", "training", *inf])
    if gpu:  # cuda:0 is cuda: one configuration, so network_b1's run is reused, not measured again
        step("cuda0_alias", ["profile", "network", "resnet18", "-b", "1", "--device", "cuda:0", "--format", "json",
                             "--time-cap", "5"])
    if gpu:  # a CPU measurement on a GPU host: the idle GPU's power must not count in its power_w
        step("cpu_on_gpu_host", ["profile", "network", "squeezenet1_1", "-b", "1", "--device", "cpu", "--format", "json",
                                 "--time-cap", "2"])
    step("layers", ["profile", "layers", "resnet18", "-b", "1", "--device", device, "--format", "json",
                    "--time-cap", "2"], timeout_s=400)
    # A repeat of resnet18 at batch 1 (its newest run has layers, so the repeat measures them too)
    step("again", ["profile", "network", "resnet18", "-b", "1", "--again", "--device", device, "--format", "json",
                   "--time-cap", "2"], timeout_s=400)
    step("trace", ["profile", "network", "resnet18", "-b", "1", "--trace", "--device", device, "--format", "json",
                   "--time-cap", "2"], timeout_s=400)
    # resnet18 at batch 1 against resnet50 at the larger batch: both kept their raw samples
    if isinstance(outputs.get("network_b1"), dict) and isinstance(outputs.get(f"network_b{big}"), dict):
        step("compare", ["runs", "compare", str(outputs["network_b1"].get("run_id")),
                         str(outputs[f"network_b{big}"].get("run_id")), "--format", "json"])
    if isinstance(outputs.get("network_b1"), dict):  # its telemetry over the window, as system metrics
        step("show_b1", ["runs", "show", str(outputs["network_b1"].get("run_id")), "--format", "json"])
    # Doubling training batches of resnet50 until the device runs out of memory (on an 80 GB H100
    # that is past 512 at 224 px); on cpu a memory cap stands in for the device's size.
    boundary = ["profile", "boundary", "resnet50", "--phase", "training", "--device", device,
                "--format", "json", "--time-cap", "2"]
    boundary += ["--start", "256", "--max-batch", "8192"] if gpu else ["--start", "2", "--max-batch", "64",
                                                                        "--memory-limit-mb", "2500"]
    step("boundary", boundary, timeout_s=500)
    if gpu:  # the same on an 8 GB GPU: the cap is on the GPU's memory (torch's allocator), a smaller boundary
        step("capped_boundary", ["profile", "boundary", "resnet50", "--phase", "training", "--device", device,
                                 "--format", "json", "--time-cap", "2", "--start", "8", "--max-batch", "1024",
                                 "--memory-limit-mb", "8000"], timeout_s=300)
    step("synth_images", ["data", "synth", str(work / "shapes"), "--kind", "classification", "--images", "96"])
    step("synth_boxes", ["data", "synth", str(work / "boxes"), "--kind", "detection", "--images", "16"])
    step("training_job", ["profile", "training", str(training_toml(
        work / "train.toml", "resnet18", device, work / "shapes", "imagefolder", 16, 10, 2, 112)), "--format", "json"])
    step("detection_job", ["profile", "training", str(training_toml(
        work / "det.toml", "fasterrcnn_resnet50_fpn", device, work / "boxes", "coco", 2, 4, 1, 160)),
        "--format", "json"], timeout_s=400)
    mapping = "resnet18@30:cpu>cuda,mobilenet_v2:cuda" if gpu else "resnet18@30:cpu>cpu,mobilenet_v2:cpu"
    step("mapping", ["mapping", "run", "--mapping", mapping, "--duration", "3", "--warmup", "1", "--format", "json"])
    nets = ["resnet18", "mobilenet_v3_small", "squeezenet1_1"]
    step("campaign", ["campaign", "run", str(campaign_toml(work / "campaign.toml", device, nets, [1, big])),
                      "--format", "json"], timeout_s=500)
    step("warehouse_load", ["warehouse", "load"])
    # the speed probe timed alone in a measuring child, beside the warehouse's median of the probes
    # the measurements above timed in that mode (none where the warehouse was not loaded)
    step("device_speed", ["device", "speed", device, "--format", "json"])
    wh = ["--warehouse", str(store / "warehouse.duckdb"), "--format", "json"]
    rows = step("sql_measurements", ["sql", "SELECT kind, model, batch_size, phase, device, latency_ms, latency_ci_rel,"
                                     " samples_count, peak_mem_mb, power_w, energy_per_iter_j, gpu_util_pct, stop_reason, device_name,"
                                     " mode, device_memory_mb FROM measurements ORDER BY end_time", *wh])
    step("sql_failed", ["sql", "SELECT * FROM failed_runs", *wh])
    step("sql_repeats", ["sql", "SELECT * FROM measurement_repeats", *wh])

    rows = rows if isinstance(rows, list) else []
    on_device = [r for r in rows if str(r.get("device", "")).startswith(device)]
    inference = [r for r in on_device if r.get("phase") == "inference"]
    targets = ["latency_ms"] + [t for t in ("peak_mem_mb", "power_w", "gpu_util_pct") if any(r.get(t) for r in inference)]
    for target in targets:
        step(f"fingerprint_{target}", ["fingerprint", "train", "--target", target, "--device", device, "--format", "json",
                                       "--warehouse", str(store / "warehouse.duckdb")], timeout_s=300)
    step("predict", ["predict", "mobilenet_v3_large", "-b", "1", "--device", device, "--format", "json"])
    step("largest_batch", ["predict", "resnet50", "--largest-batch", "--device", device, "--format", "json"])
    on_cpu = [r for r in rows if r.get("device") == "cpu"]
    checks = {
        "all_steps_ok": all(s["ok"] for s in steps.values()),
        "startup": outputs.get("startup"),
        "measurements_on_device": len(on_device),
        "with_power_w": sum(r.get("power_w") is not None for r in on_device),
        "with_energy_per_iter_j": sum(r.get("energy_per_iter_j") is not None for r in on_device),
        "with_gpu_util_pct": sum(r.get("gpu_util_pct") is not None for r in on_device),
        "predicted": outputs["predict"].get("predictions") if isinstance(outputs.get("predict"), dict) else None,
        "zero_power_w": sum(r.get("power_w") == 0 for r in on_device),
        "cpu_measurements": len(on_cpu),
        "cpu_power_w": sorted({r.get("power_w") for r in on_cpu}, key=str),
        "device_names": sorted({str(r.get("device_name")) for r in on_device}),
        # the memory a peak is bounded by: the GPU's (NVML) on cuda, the machine's on cpu
        "device_memory_mb": sorted({r.get("device_memory_mb") for r in on_device}, key=str),
        "largest_batch": {k: outputs["largest_batch"].get(k) for k in ("limits_mb", "largest_batch", "predicted_peak_mb")}
        if isinstance(outputs.get("largest_batch"), dict) else None,
        "modes": sorted({str(r.get("mode")) for r in on_device}),
        "failed_runs": len(outputs["sql_failed"]) if isinstance(outputs.get("sql_failed"), list) else None,
        "again_layers": len(outputs["again"].get("layers") or []) if isinstance(outputs.get("again"), dict) else None,
        "repeats": [{k: r.get(k) for k in ("model", "batch_size", "phase", "repeats", "min_latency_ms",
                                           "max_latency_ms", "repeat_spread_rel", "max_ci_rel")}
                    for r in outputs["sql_repeats"]] if isinstance(outputs.get("sql_repeats"), list) else None,
    }
    for key in ("network_b1", f"network_b{big}", f"train_step_b{big}", f"bfloat16_b{big}"):
        if isinstance(outputs.get(key), dict):
            o = outputs[key]
            checks[key] = {k: o.get(k) for k in ("latency_ms", "ci_rel", "samples", "peak_mem_mb", "stop_reason", "power_w",
                                                 "gpu_util_pct", "gpu_sm_clock_mhz", "gpu_sm_clock_min_mhz",
                                                 "speed_probe_ms", "host_share_pct", "dtype")}
            # a CPU run's share of its peak that is the network's (0.9.0): absent on a GPU, whose peak is its own
            checks[key]["has_network_mem_mb"] = "network_mem_mb" in o
    if isinstance(outputs.get("cpu_on_gpu_host"), dict):
        checks["cpu_on_gpu_host"] = {k: outputs["cpu_on_gpu_host"].get(k) for k in ("peak_mem_mb", "network_mem_mb",
                                                                                      "power_w", "status")}
    if isinstance(outputs.get("training_job"), dict):  # a job keeps its iterations' spread (0.9.0)
        checks["training_job"] = {k: outputs["training_job"].get(k) for k in (
            "status", "steps", "set_up_steps", "median_step_ms", "latency_ms", "data_wait_fraction", "peak_mem_mb",
            "host_share_pct", "speed_probe_ms")}
    if isinstance(outputs.get("device_speed"), dict):  # the probe alone, against the measurements' median
        checks["device_speed"] = {k: v for k, v in outputs["device_speed"].items() if not isinstance(v, (list, dict))}
    if isinstance(outputs.get("device_show"), dict):  # what device show foretold, against network_b1's run
        d, b1 = outputs["device_show"], outputs.get("network_b1") if isinstance(outputs.get("network_b1"), dict) else {}
        checks["device_show"] = {"name": d.get("name"), "sources": d.get("telemetry_sources"),
                                 "measured": sorted(d.get("measured") or {}), "absent": d.get("absent"),
                                 "memory_cap": d.get("memory_cap"), "notes": d.get("notes"),
                                 "mode_matches_network_b1": d.get("mode", {}).get("id") == b1.get("mode")}
    if isinstance(outputs.get("show_b1"), dict):
        checks["system_metrics_b1"] = outputs["show_b1"].get("system_metrics")
    if isinstance(outputs.get("memory_floor"), dict):  # the floor against torch's own peak, per network and phase
        checks["memory_floor"] = outputs["memory_floor"]
    if isinstance(outputs.get("own_network"), dict):
        checks["own_network"] = {k: outputs["own_network"].get(k) for k in ("model", "input_size", "status", "latency_ms",
                                                                              "peak_mem_mb", "device")}
    if isinstance(outputs.get("token_ids"), dict):
        checks["token_ids"] = {k: outputs["token_ids"].get(k) for k in ("model", "input_shape", "input_vocab", "status",
                                                                          "latency_ms", "peak_mem_mb", "device")}
    if gpu:
        checks["cuda0_reused"] = isinstance(outputs.get("cuda0_alias"), dict) and outputs["cuda0_alias"].get("reused") is True
    if isinstance(outputs.get("trace"), dict):  # on a GPU the operators are ranked by their kernels' time
        t = outputs["trace"].get("trace") or {}
        checks["trace"] = {"time_basis": t.get("time_basis"), "operators": t.get("operators"),
                           "device_busy_ms": t.get("device_busy_ms"), "kernel_count": t.get("kernel_count"),
                           "traced_iteration_ms": t.get("traced_iteration_ms"), "artifacts": t.get("artifacts"),
                           "top": [(o.get("op"), o.get("self_device_ms", o.get("self_cpu_ms"))) for o in t.get("ops", [])[:5]],
                           "error": t.get("error")}
    if isinstance(outputs.get("compare"), dict):
        c = outputs["compare"]
        checks["compare"] = {"samples": [c["a"]["samples"], c["b"]["samples"]], "verdict": c["latency"]["verdict"],
                             "ratio": c["latency"]["ratio"], "p_value": c["latency"].get("p_value"),
                             "environment_differences": c["environment_differences"]}
    for key in ("boundary", "capped_boundary"):
        if isinstance(outputs.get(key), dict):
            checks[key] = {k: v for k, v in outputs[key].items() if not isinstance(v, (list, dict))}
    if gpu:  # under an 8 GB cap on the GPU's memory a smaller batch fits than on the whole GPU
        capped, whole = checks.get("capped_boundary") or {}, checks.get("boundary") or {}
        checks["device_cap_smaller"] = (capped.get("memory_cap") == "device" and capped.get("failure_reason") == "oom"
                                        and (capped.get("largest_ok_batch_size") or 0)
                                        < (whole.get("largest_ok_batch_size") or 0))
    ran = steps.keys()
    # each check counts where the steps it reads ran (all of them, without a list of steps)
    conditions = [
        ("trace" not in ran or (checks.get("trace") or {}).get("artifacts") is not None),
        ("compare" not in ran or (checks.get("compare") or {}).get("samples") == [True, True]),
        ("device_show" not in ran or "network_b1" not in ran
         or (checks.get("device_show") or {}).get("mode_matches_network_b1") is True),
        ("own_network" not in ran or (checks.get("own_network") or {}).get("status") == "FINISHED"),
        ("token_ids" not in ran or (checks.get("token_ids") or {}).get("status") == "FINISHED"),
        # every measurement times the speed probe beside its window (0.9.9), a training job too (0.9.12)
        all(k not in ran or (checks.get(k) or {}).get("speed_probe_ms") is not None
            for k in ("network_b1", f"network_b{big}", "training_job")),
        (f"bfloat16_b{big}" not in ran or (checks.get(f"bfloat16_b{big}") or {}).get("dtype") == "bfloat16"),
        ("memory_floor" not in ran or bool(checks.get("memory_floor")) and all(
            r["ratio"] <= 1 for phases in checks["memory_floor"].values() for r in phases.values())),
    ]
    if gpu:
        conditions += [
            checks["zero_power_w"] == 0,
            ("capped_boundary" not in ran or "boundary" not in ran or checks["device_cap_smaller"]),
            ("cuda0_alias" not in ran or "network_b1" not in ran or checks["cuda0_reused"]),
            ("device_show" not in ran or "nvml" in ((checks.get("device_show") or {}).get("sources") or [])),
            ("show_b1" not in ran or "gpu_power_w" in (checks.get("system_metrics_b1") or [])),
            ("network_b1" not in ran or not (checks.get("network_b1") or {}).get("has_network_mem_mb")),
            ("cpu_on_gpu_host" not in ran or (checks.get("cpu_on_gpu_host") or {}).get("network_mem_mb") is not None),
            ("trace" not in ran or (checks.get("trace") or {}).get("time_basis") == "self_device_ms"),
        ]
    print(json.dumps({"device": device, "out": str(out), "only": sorted(only) if only is not None else None,
                      "steps": {k: {"rc": v["rc"], "s": v["s"]} for k, v in steps.items()},
                      "checks": checks, "all_ok": checks["all_steps_ok"] and bool(steps) and all(conditions)}))


if __name__ == "__main__":
    main()
