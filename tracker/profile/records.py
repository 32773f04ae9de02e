"""Measurements into run records: network or training runs, layer runs nested under them,
failed runs with their reason, and the ``mode`` run that describes a device mode once."""

from __future__ import annotations

from typing import Any

from tracker.console import counted
from tracker.log.record import FAILURE_MESSAGE_TAG, LAYERS_METRIC, SYSTEM_PREFIX, RunRecord, now_ms
from tracker.log.samples import SAMPLES_ARTIFACT, samples_json
from tracker.profile.network import NetworkSpec
from tracker.profile.probe import PROBE_TAG, probe_metrics, probe_record
from tracker.profile.stats import HOST_BOUND_SHARE, Stopping, Summary, host_share, summarize
from tracker.profile.tensors import TENSOR_PEAK_VERSION
from tracker.zoo.spec import shape_text

#: Share of the machine's CPU (%) that other processes took during a measurement from which its
#: run's description and ``profile``'s output say so: they competed with it for cores, caches and
#: memory bandwidth.
OTHERS_CPU_NOTE_PCT = 10.0
#: The machine's CPU use over a window (its ``cpu_util_pct``, the measurement's and others') from
#: which no core was idle: whatever other processes took there, they took from the measurement.
SATURATED_CPU_PCT = 95.0
#: ... and the smaller share of others that is said there (since 0.9.21). A measurement whose threads
#: fill every core loses to any work beside it, at every barrier of its thread pool: on an H200's
#: host of 16 cores (2026-11-30), squeezenet1_1 at batch 1 on 16 threads took 626 ms (±69 %, its speed
#: probe 56 ms) while others took 6.4 % of the machine (one core) and the machine 100 %, unsaid under
#: the 10 % above.
SATURATED_OTHERS_NOTE_PCT = 5.0


def beside_other_work(metrics: dict[str, float]) -> bool:
    """Whether a run was measured while other processes took ``OTHERS_CPU_NOTE_PCT`` or more of the
    CPU, or ``SATURATED_OTHERS_NOTE_PCT`` of a machine left no core idle (``saturated``; its
    ``cpu_util_others_pct``: a run without one was not seen to be)."""
    others = metrics.get("cpu_util_others_pct")
    return others is not None and (others >= OTHERS_CPU_NOTE_PCT
                                   or others >= SATURATED_OTHERS_NOTE_PCT and saturated(metrics))


def saturated(metrics: dict[str, float]) -> bool:
    """Whether no core of the machine was idle over the window (its ``cpu_util_pct``)."""
    busy = metrics.get("cpu_util_pct")
    return busy is not None and busy >= SATURATED_CPU_PCT


#: How a count of runs measured beside other work says what that is (campaign run, searchspace run).
OTHER_WORK_RULE = (f"{OTHERS_CPU_NOTE_PCT:g} % or more of the CPU ({SATURATED_OTHERS_NOTE_PCT:g} % where no core "
                   "was left idle)")


def other_work_said(metrics: dict[str, float], machine: str = "the machine's") -> str:
    """What other processes took beside a measurement (where ``beside_other_work``), as its notes and
    description say it: "12 % of the machine's CPU", and where that is under ``OTHERS_CPU_NOTE_PCT``,
    that no core was left idle."""
    others = metrics["cpu_util_others_pct"]
    return f"{others:.0f} % of {machine} CPU{' (no core left idle)' if others < OTHERS_CPU_NOTE_PCT else ''}"


def other_work_note(figures: dict[str, Any], slower: str) -> str:
    """The note line of a measurement taken beside other work (where ``beside_other_work``): a network's,
    a training job's or a mapping's figures, ``slower`` saying what of it may be slower."""
    took = other_work_said(figures, "this machine's")
    return (f"note: other processes took {took} while it was measured: they compete for its cores, caches and "
            f"memory, so {slower} (tracker device show; the run keeps cpu_util_others_pct)")


#: The telemetry summary's energy over the window, which a run keeps per iteration (``energy_per_iter_j``).
ENERGY_KEY = "energy_j"
#: Telemetry summary keys -> metric names of the schemas.
TELEMETRY_METRICS = {
    "cpu_util_pct": "cpu_util_pct",
    "cpu_util_others_pct": "cpu_util_others_pct",
    "gpu_util_pct": "gpu_util_pct",
    "gpu_mem_used_peak_mb": "gpu_mem_used_mb",
    "gpu_sm_clock_mhz": "gpu_sm_clock_mhz",
    "gpu_sm_clock_min_mhz": "gpu_sm_clock_min_mhz",
    "power_w": "power_w",
    "cpu_power_w": "cpu_power_w",
    "gpu_power_w": "gpu_power_w",
    "board_power_w": "board_power_w",
    "proc_rss_peak_mb": "proc_rss_peak_mb",
    # the private memory of the measuring process's children at its peak: a training job's loader
    # workers (since 0.9.2; beside the job's peak_mem_mb, its main process's)
    "children_mem_peak_mb": "workers_mem_peak_mb",
    "sys_mem_used_peak_mb": "sys_mem_used_peak_mb",
    "telemetry_samples_count": "telemetry_samples_count",
}
LAYER_TELEMETRY = ("cpu_util_pct", "gpu_util_pct", "power_w", "cpu_power_w", "gpu_power_w", "board_power_w", "telemetry_samples_count")


def _configuration(spec: NetworkSpec, model_hash: str, mode: str) -> dict[str, Any]:
    """The fields of a configuration: both its identity and the first params of its run."""
    return {
        "model": spec.model,
        "model_hash": model_hash,
        "batch_size": spec.batch_size,
        # images: their size, and their channels where not 3 only (every configuration of 3-channel
        # images keeps the key it always had); else one input's shape, and how many token ids
        **({"input_size": spec.input_size} if spec.input_shape is None else {"input_shape": shape_text(spec.input_shape)}),
        **({"in_channels": spec.in_channels} if spec.in_channels != 3 and spec.input_shape is None else {}),
        **({"input_vocab": spec.input_vocab} if spec.input_vocab else {}),
        "phase": spec.phase,
        "device": spec.device,
        "precision": spec.precision,
        "mode": mode,
    }


def key_fields(spec: NetworkSpec, model_hash: str, mode: str, versions: dict[str, str], **extra: Any) -> dict[str, Any]:
    """What makes two measurements the same configuration."""
    return {
        **_configuration(spec, model_hash, mode),
        "software": versions,
        **extra,
    }


def kind_of(spec: NetworkSpec) -> str:
    return "training" if spec.phase == "training" else "network"


def timing_summary(timing: dict[str, Any]) -> Summary:
    return summarize(timing["samples_ms"], int(timing.get("block_n", 1)))


def spread_metrics(s: Summary) -> dict[str, float]:
    """The latency figures of a summary of samples: median, spread, CI and tails, each where the
    samples can tell it (a training job's iterations take them as a network run's do)."""
    return {
        "latency_ms": s.median,
        "latency_mean_ms": s.mean,
        "latency_min_ms": s.min,
        "latency_max_ms": s.max,
        # one sample has no spread and no interval to tell (its IQR was 0 until 0.9.1)
        **({"latency_iqr_ms": s.iqr, "latency_std_ms": s.std, "latency_ci_low_ms": s.ci_low,
            "latency_ci_high_ms": s.ci_high, "latency_ci_rel": s.ci_rel} if s.n > 1 else {}),
        **({"latency_blocks_count": float(s.blocks)} if s.blocks else {}),  # absent: no drift-aware CI
        **({"latency_p90_ms": s.p90} if s.p90 is not None else {}),  # absent with too few samples to tell
        **({"latency_p99_ms": s.p99} if s.p99 is not None else {}),
    }


def timing_metrics(timing: dict[str, Any], s: Summary) -> dict[str, float]:
    """Metrics of a timing and its summary (``timing_summary(timing)``, derived once by the caller)."""
    return {
        **spread_metrics(s),
        "samples_count": float(s.n),
        "warmup_count": float(len(timing["warmup_ms"])),
        "measure_time_s": float(timing["elapsed_s"]),
        **({"host_share_pct": 100.0 * share} if (share := timing_host_share(timing)) is not None else {}),
    }


def timing_host_share(timing: dict[str, Any]) -> float | None:
    """The share of a device timing's iterations its host spent issuing the step (``host_ms``, kept
    on a device since tracker 0.8.4); None on a CPU and in older timings."""
    return host_share(timing["host_ms"], timing["samples_ms"]) if timing.get("host_ms") else None


def bound_by_host(metrics: dict[str, float]) -> bool:
    """Whether a device measurement was bound by its host: its host spent ``HOST_BOUND_SHARE`` or more of
    its iterations launching the work (its ``host_share_pct``; a run without one, a CPU's, was not split)."""
    share = metrics.get("host_share_pct")
    return share is not None and share >= 100.0 * HOST_BOUND_SHARE


def host_bound_note(metrics: dict[str, float]) -> str:
    """A description's sentence for a measurement bound by its host (``bound_by_host``), else ''."""
    if not bound_by_host(metrics):
        return ""
    return (f" The host spent {metrics['host_share_pct']:.0f} % of each iteration launching its work, the device "
            "waiting on it: this latency is bound by the host's CPU more than by the device, and moves with the host's speed.")


def telemetry_metrics(telemetry: dict[str, float], iterations: int, keys: tuple[str, ...] | None = None) -> dict[str, float]:
    out = {TELEMETRY_METRICS[k]: float(v) for k, v in telemetry.items() if k in TELEMETRY_METRICS and (keys is None or k in keys)}
    if ENERGY_KEY in telemetry and iterations:
        out["energy_per_iter_j"] = float(telemetry[ENERGY_KEY]) / iterations
    if not telemetry.get("telemetry_samples_count"):
        out.pop("telemetry_samples_count", None)
    return out


def base_params(spec: NetworkSpec, model_hash: str, mode: str, rule: Stopping) -> dict[str, Any]:
    return {
        **_configuration(spec, model_hash, mode),
        "target_ci_rel": rule.target_ci_rel,
        "time_cap_s": rule.time_cap_s,
        "min_samples": rule.min_samples,
    }


#: The input resolution most networks take: a run at another says it in its name
USUAL_INPUT_SIZE = 224


def run_name(spec: NetworkSpec, threads: int | None = None, allocator: str | None = None) -> str:
    """``resnet18 · bs8 · inference · cpu``; ``· 64px`` after the batch where the input is not 224
    pixels square, so runs of one network at two sizes are told apart in a list, the mode's settings
    that were asked for after the device (``cpu · t1 · retain``: ``--threads 1 --allocator retain``;
    since 0.8.9, so that runs in two modes are told apart in the UI's list), and the number format
    last where it is not float32 (``· bfloat16``)."""
    if spec.input_shape is not None:  # not images: one input's shape
        size = f" · {shape_text(spec.input_shape, spec.input_vocab)}"
    else:
        size = f" · {spec.input_size}px" if spec.input_size != USUAL_INPUT_SIZE else ""
    dtype = f" · {spec.precision}" if spec.precision != "float32" else ""  # --dtype (0.8.5)
    settings = (f" · t{threads}" if threads else "") + (f" · {allocator}" if allocator and allocator != "system" else "")
    return f"{spec.model} · bs{spec.batch_size}{size} · {spec.phase} · {spec.device}{settings}{dtype}"


def _inputs(spec: NetworkSpec) -> str:
    """What one iteration takes, as a description says it: ``4 images of 224x224`` (or their shape)."""
    if spec.input_shape is not None:
        return f"{spec.batch_size} inputs of shape {shape_text(spec.input_shape, spec.input_vocab)}"
    return f"{counted(spec.batch_size, 'image')} of {spec.input_size}x{spec.input_size}"


#: The first trackers whose ``network_mem_mb`` counts the network's own memory alone, as this one's does, by
#: number format: before, it also counted what the network's first build left behind in the process (0.9.26,
#: ``measure.build_once``), and in int8 its float self, which torch.ao's quantization kept (0.9.27,
#: ``network.quantized_int8``). The warehouse's labelled_measurements (``network_mem_current``) holds the same.
NETWORK_MEM_SINCE: dict[str, tuple[int, ...]] = {"float": (0, 9, 26), "int8": (0, 9, 27)}


def network_mem_since_said() -> str:
    """``0.9.26 (0.9.27 in int8)``: the first trackers whose ``network_mem_mb`` counts what this one's does."""
    since = {fmt: ".".join(map(str, numbers)) for fmt, numbers in NETWORK_MEM_SINCE.items()}
    return f"{since['float']} ({since['int8']} in int8)"


def version_numbers(text: str | None) -> tuple[int, ...] | None:
    """``0.9.27`` of ``0.9.27.dev1`` as numbers to compare; None where the text does not start with two or more
    (as labelled_measurements reads a version)."""
    import re

    found = re.match(r"[0-9]+(?:[.][0-9]+)+", text or "")
    return tuple(int(n) for n in found.group(0).split(".")) if found else None


def counts_older_network_mem(record: RunRecord) -> bool:
    """Whether ``record``'s ``network_mem_mb`` was measured by a tracker before ``NETWORK_MEM_SINCE`` (its
    ``tracker.version`` tag; one without a tag, or with one that is not numbers, too), which counted more
    than this tracker's; False where it has no such figure (a GPU run, an import)."""
    if "network_mem_mb" not in record.metrics:
        return False
    numbers = version_numbers(record.tags.get("tracker.version"))
    since = NETWORK_MEM_SINCE["int8" if str(record.params.get("precision")) == "int8" else "float"]
    return numbers is None or numbers < since


def tensor_peak_tags(metrics: dict[str, float], payload: dict[str, Any]) -> dict[str, str]:
    """What a run's ``tensor_peak_mb`` counts (tag ``tracker.tensor_peak``, its version), or why a CPU run has
    none (``tracker.tensor_peak_error``: the step under the counting failed; the measurement stands)."""
    if "tensor_peak_mb" in metrics:
        return {"tracker.tensor_peak": str(TENSOR_PEAK_VERSION)}
    if payload.get("tensor_peak_error"):
        return {"tracker.tensor_peak_error": str(payload["tensor_peak_error"])[:500]}
    return {}


def measured_record(
    spec: NetworkSpec, model_hash: str, mode: str, rule: Stopping, keys: dict[str, Any], payload: dict[str, Any], start_ms: int,
    threads: int | None = None, allocator: str | None = None,
) -> RunRecord:
    """The network (inference) or training run of a successful child (``threads``, ``allocator``:
    the mode's settings asked for, which its name says)."""
    timing = payload["timing"]
    s = timing_summary(timing)
    metrics = timing_metrics(timing, s)
    n = int(metrics["samples_count"])
    metrics["throughput_per_s"] = spec.batch_size * 1000.0 / metrics["latency_ms"]
    if "minor_faults" in timing:
        metrics["page_faults_per_iter_count"] = timing["minor_faults"] / n
    memory = payload.get("memory", {})
    if "cuda_max_allocated_mb" in memory:
        metrics["peak_mem_mb"] = memory["cuda_max_allocated_mb"]
        metrics["cuda_max_allocated_mb"] = memory["cuda_max_allocated_mb"]
        metrics["cuda_max_reserved_mb"] = memory["cuda_max_reserved_mb"]
    elif "peak_rss_mb" in memory:
        metrics["peak_mem_mb"] = memory["peak_rss_mb"]
        if "network_mem_mb" in memory:  # the part of that peak the network added (since 0.9.0)
            metrics["network_mem_mb"] = memory["network_mem_mb"]
    if "memory_cap_used_mb" in memory:  # how much of a resident or device memory cap it used (tracker.profile.memcap)
        metrics["memory_cap_used_mb"] = memory["memory_cap_used_mb"]
    if "tensor_peak_mb" in memory:  # on a CPU, the tensors' own peak over one step (tracker.profile.tensors)
        metrics["tensor_peak_mb"] = memory["tensor_peak_mb"]
    metrics.update(telemetry_metrics(payload.get("telemetry", {}), n))
    probe_figures, probe_tags = probe_record(payload)
    metrics.update(probe_figures)
    record = RunRecord(
        kind=kind_of(spec),
        name=run_name(spec, threads, allocator),
        params=base_params(spec, model_hash, mode, rule),
        metrics=metrics,
        tags={"tracker.stop_reason": timing["stop_reason"], "tracker.source": "measured",
              **probe_tags},
        key_fields=keys,
        description=(
            f"{spec.model} {spec.phase} at batch {spec.batch_size} ({_inputs(spec)}) on {spec.device} ({mode}): median "
            f"{s.median:.3f} ms ±{100 * s.ci_rel:.1f}% (95% CI of the median) from {s.n} samples after "
            f"{len(timing['warmup_ms'])} warm-up iterations; stopped on {timing['stop_reason']}."
        ),
        start_time_ms=start_ms,
        end_time_ms=now_ms(),
    )
    record.artifacts[SAMPLES_ARTIFACT] = samples_json(timing, payload.get("speed_probe"))  # every figure above derives from them
    record.tags.update(tensor_peak_tags(metrics, payload))
    record.description += host_bound_note(metrics)
    if beside_other_work(metrics):  # said where the UI shows the run
        record.description += (f" Other processes took {other_work_said(metrics)} "
                               "over the window: this may be slower than the machine alone would run it.")
    add_system_metrics(record, payload.get("telemetry_series"))
    return record


def add_system_metrics(record: RunRecord, series: dict[str, Any] | None) -> None:
    """The telemetry series of a measurement window (``TelemetrySampler.series_json``) as the
    run's system metrics: a history ``system/NAME`` each, its step the milliseconds since the
    window's start, stamped from the window's wall-clock start (MLflow's System metrics tab)."""
    if not series or not series.get("series"):
        return
    record.series_start_ms = int(series["start_ms"])
    for name, points in series["series"].items():
        if points:
            record.history[SYSTEM_PREFIX + name] = [(int(t_ms), float(v)) for t_ms, v in points]


def failed_record(
    spec: NetworkSpec, model_hash: str, mode: str, rule: Stopping, keys: dict[str, Any], reason: str, message: str,
    stderr_tail: str, start_ms: int, threads: int | None = None, allocator: str | None = None,
) -> RunRecord:
    record = RunRecord(
        kind=kind_of(spec),
        name=run_name(spec, threads, allocator) + f" · {reason}",
        params=base_params(spec, model_hash, mode, rule),
        tags={"tracker.source": "measured"},
        key_fields=keys,
        description=f"{spec.model} {spec.phase} at batch {spec.batch_size} ({_inputs(spec)}) on {spec.device} ({mode}) "
                    f"failed: {reason}. {message}",
        start_time_ms=start_ms,
        end_time_ms=now_ms(),
    )
    if message:  # what ended it, in a line (the child's exception, or why it was stopped): profile prints it (0.8.5)
        record.tags[FAILURE_MESSAGE_TAG] = message[:500]
    return record.fail(reason, stderr_tail or message)


#: A function layer's op_type names its functions (``cat+contiguous``): at most this long.
OP_TYPE_CHARS = 250


def layer_records(
    parent: RunRecord, spec: NetworkSpec, model_hash: str, mode: str, layers: list[dict[str, Any]], versions: dict[str, str],
    speed_probe: dict[str, Any] | None = None,
) -> list[RunRecord]:
    """A layer run per measured layer; ``speed_probe``: the probe bracketing the layers' window (the
    payload's ``layers_speed_probe``), each layer's ``speed_probe_ms``."""
    probe = probe_metrics(speed_probe["samples_ms"] if speed_probe else None)
    summaries = [timing_summary(l["timing"]) for l in layers]
    total = sum(s.median for s in summaries)
    records = []
    # one start time for all: runs list orders them by name within it (000, 001, ...), where the
    # milliseconds their records were made in cut the list in two (until 0.9.4)
    recorded_ms = now_ms()
    for layer, summary in zip(layers, summaries):
        median = summary.median
        m = timing_metrics(layer["timing"], summary)
        metrics = {k: m[k] for k in ("latency_ms", "latency_iqr_ms", "latency_ci_rel", "samples_count", "host_share_pct")
                   if k in m}
        if total:
            metrics["share_of_layers_pct"] = 100.0 * median / total  # of the sum of layers, not the network's
        metrics.update(telemetry_metrics(layer.get("telemetry", {}), int(m["samples_count"]), LAYER_TELEMETRY))
        metrics.update(probe)
        records.append(
            RunRecord(
                kind="layer",
                name=f"{layer['index']:03d} {layer['name']} ({layer['op_type']})",
                parent=parent,
                start_time_ms=recorded_ms,
                params={
                    "model": spec.model,
                    "model_hash": model_hash,
                    "layer_index": layer["index"],
                    "layer_name": layer["name"],
                    "layer_kind": layer.get("kind", "module"),
                    "op_type": layer["op_type"][:OP_TYPE_CHARS],
                    "batch_size": spec.batch_size,
                    "input_shape": layer["input_shape"],
                    "output_shape": layer["output_shape"],
                    "phase": spec.phase,
                    "device": spec.device,
                    "precision": spec.precision,
                    "mode": mode,
                },
                metrics=metrics,
                tags={"tracker.stop_reason": layer["timing"]["stop_reason"], "tracker.source": "measured",
                      **({PROBE_TAG: str(speed_probe["version"])} if probe and speed_probe else {})},
                key_fields=key_fields(spec, model_hash, mode, versions, layer_index=layer["index"]),
                description=(
                    f"Layer {layer['index']} of {spec.model}, {layer['name']} ({layer['op_type'][:OP_TYPE_CHARS]}, "
                    f"{layer['input_shape']} -> {layer['output_shape']}), "
                    + ("run alone on a cached copy of its real input " if layer.get("kind", "module") == "module" else
                       "the torch functions its module called between its layers, replayed alone on cached copies "
                       "of their real inputs, ")
                    + f"at batch {spec.batch_size} on {spec.device} ({mode}): median {median:.4f} ms "
                    f"±{100 * summary.ci_rel:.1f}% from {summary.n} samples; stopped on {layer['timing']['stop_reason']}"
                    + (f"; {100.0 * median / total:.1f}% of the sum of layers." if total else ".")
                ),
            )
        )
    if layers and total:
        parent.metrics[LAYERS_METRIC] = total
        parent.metrics["sum_of_layers_ratio"] = total / parent.metrics["latency_ms"]
    return records
