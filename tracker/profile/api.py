"""Library entry points for profiling: plan a configuration, skip it if measured, else
measure it in a child process and log what came back (a measurement or a failure)."""

from __future__ import annotations

import contextlib
import json
import math
import tempfile
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tracker.console import decimal_number, whole_number
from tracker.describe import described_json, spec_json
from tracker.log.logger import RunLogger
from tracker.log.record import (CHILD_NOTE_TAG, DESCRIPTION_ARTIFACT, FAILURE_MESSAGE_TAG, FAILURE_REASON_TAG,
                                LAYERS_METRIC, REPEAT_KEY_TAG, TIMEOUT_TAG, RunRecord, config_key, now_ms)
from tracker.profile.network import NetworkSpec, check_format
from tracker.profile.stats import MIN_SAMPLES, Stopping

if TYPE_CHECKING:
    from tracker.zoo.spec import ModelRef


@dataclass(frozen=True)
class Planned:
    """A configuration, fully identified before anything runs."""

    spec: NetworkSpec
    ref: str  # what the user named: zoo name or spec file
    model_hash: str
    mode_id: str
    threads: int | None
    keys: dict[str, Any] = field(hash=False, compare=False)
    #: a spec file's network as planning read it (None for a zoo name): the child builds this,
    #: not the file, so an edit made meanwhile cannot be measured under the planned description
    network_spec: dict[str, Any] | None = field(default=None, hash=False, compare=False)
    #: the C allocator setting the child applies (modes.ALLOCATORS; None: the C library's default)
    allocator: str | None = None
    #: the memory cap it is measured under (MB of growth, a smaller device; None: none) and its kind
    #: (``memcap.planned_kind``): both part of ``keys``, so a capped configuration is another one
    memory_limit_mb: float | None = None
    memory_cap: str | None = None

    @property
    def config_key(self) -> str:
        return config_key({"kind": "training" if self.spec.phase == "training" else "network", **self.keys})


#: The folder of a run's artifacts that holds the file of a network of your own (``FILE.py:NAME``)
#: as it was measured, under its own name, and the modules beside it that it imports: as they lay
#: (until 0.7.8 the file was ``network.py``, and a module beside it of that name was lost)
MODULE_SOURCE_FOLDER = "description"

#: The telemetry of a network run that ``profile`` reports with its latency, where measured: the
#: device's power (NVML, RAPL, tegrastats), energy per iteration, how busy the GPU and CPU were (and
#: how much of the CPU other processes took), and
#: the clock the GPU's SMs ran at (NVML).
TELEMETRY_SHOWN = ("power_w", "energy_per_iter_j", "gpu_util_pct", "cpu_util_pct", "cpu_util_others_pct",
                   "gpu_sm_clock_mhz", "gpu_sm_clock_min_mhz")


@dataclass
class ProfileResult:
    network: RunRecord
    layers: list[RunRecord]
    reused: bool
    #: torch.profiler's operator table and what it was taken over (``tracker.profile.trace``), when traced
    trace: dict[str, Any] | None = None
    #: logged to the outbox (a server down, a store that could not take it), not yet in the store
    in_outbox: bool = False

    def as_dict(self) -> dict:
        m = self.network.metrics
        out = {
            "run_id": self.network.run_id,
            "model": self.network.params.get("model"),
            "batch_size": int(self.network.params.get("batch_size", 0)),
            "input_size": int(self.network.params["input_size"]) if "input_size" in self.network.params else None,
            # a network of your own whose input is not images: one input's shape (and token ids)
            **({"input_shape": self.network.params["input_shape"]} if "input_shape" in self.network.params else {}),
            **({"input_vocab": int(self.network.params["input_vocab"])} if "input_vocab" in self.network.params else {}),
            "phase": self.network.params.get("phase"),
            "device": self.network.params.get("device"),
            "dtype": self.network.params.get("precision", "float32"),  # the number format it ran in (--dtype)
            "mode": self.network.params.get("mode"),  # the device mode it ran in, e.g. cpu-t1
            "status": self.network.status,
            "reused": self.reused,
            "latency_ms": m.get("latency_ms"),
            "ci_rel": m.get("latency_ci_rel"),
            "samples": int(m["samples_count"]) if "samples_count" in m else None,
            "throughput_per_s": m.get("throughput_per_s"),
            "peak_mem_mb": m.get("peak_mem_mb"),
            "stop_reason": self.network.tags.get("tracker.stop_reason"),
        }
        if "network_mem_mb" in m:  # on a CPU, what the network added to the process (since 0.9.0)
            out["network_mem_mb"] = m["network_mem_mb"]
        if "tensor_peak_mb" in m:  # on a CPU, its tensors' own peak over a step (since 0.9.31)
            out["tensor_peak_mb"] = m["tensor_peak_mb"]
        for tail in ("latency_p90_ms", "latency_p99_ms"):  # where it had samples enough to tell
            if tail in m:
                out[tail] = m[tail]
        if "page_faults_per_iter_count" in m:  # memory the C allocator took afresh from the kernel, per iteration
            out["page_faults_per_iter_count"] = m["page_faults_per_iter_count"]
        if "host_share_pct" in m:  # on a device: how much of each iteration the host's launching took
            out["host_share_pct"] = m["host_share_pct"]
        if "speed_probe_ms" in m:  # the machine's speed beside the window (tracker.profile.probe, since 0.9.9)
            out["speed_probe_ms"] = m["speed_probe_ms"]
        for name in TELEMETRY_SHOWN:  # where this machine measured them (absent, never zero, where not)
            if name in m:
                out[name] = m[name]
        if self.in_outbox:  # waits for `tracker sync` (said only on stderr until 0.9.5)
            out["in_outbox"] = True
        if CHILD_NOTE_TAG in self.network.tags:  # what its run says of how its child ended (unsaid until 0.9.8)
            out["child_note"] = self.network.tags[CHILD_NOTE_TAG]
        if self.network.status != "FINISHED":
            out["failure_reason"] = self.network.tags.get(FAILURE_REASON_TAG)
            if FAILURE_MESSAGE_TAG in self.network.tags:  # what ended it, in a line (0.8.5)
                out["failure_message"] = self.network.tags[FAILURE_MESSAGE_TAG]
        if "memory_limit_mb" in self.network.params:  # measured under a memory cap (tracker.profile.memcap)
            out["memory_limit_mb"] = float(self.network.params["memory_limit_mb"])
            out["memory_cap"] = self.network.tags.get("tracker.memory_cap")
            if "memory_cap_used_mb" in m:  # how far its memory rose under a resident or device cap
                out["memory_cap_used_mb"] = m["memory_cap_used_mb"]
        if self.layers:
            out["sum_of_layers_ratio"] = m.get("sum_of_layers_ratio")
            out["layers"] = [
                {
                    "run_id": r.run_id,
                    "index": int(r.params["layer_index"]),
                    "name": r.params["layer_name"],
                    "kind": r.params.get("layer_kind", "module"),
                    "op_type": r.params["op_type"],
                    "latency_ms": r.metrics["latency_ms"],
                    "ci_rel": r.metrics["latency_ci_rel"],
                    **({"host_share_pct": r.metrics["host_share_pct"]} if "host_share_pct" in r.metrics else {}),
                }
                for r in self.layers
            ]
        if self.trace is not None:
            out["trace"] = self.trace
        return out


def _description(ref: str, input_size: int) -> tuple[str, str, str]:
    """(network name, description hash, description JSON) of a zoo name or spec file, the file
    as it is now (an edited spec file is described again)."""
    from tracker.zoo import resolve

    model_ref = resolve(ref)
    return described_json(model_ref.name, spec_json(model_ref.spec), input_size)


def describe_early(ref: str | ModelRef, input_size: int | None = None) -> None:
    """Describe now, as its plans will (the description is kept for them), a network that may not
    build or run: one of your own (``FILE.py:NAME``), or any at an input size not its own. Code that
    cannot build it, or a network that cannot run on that input, is then one line before a store is
    made or anything is measured, not a campaign ended halfway. Other networks: nothing. ``ref``:
    its name, or the ``zoo.ModelRef`` a caller resolved already (a file is then not read again)."""
    from tracker.zoo import resolve
    from tracker.zoo.spec import check_input_size

    model_ref = resolve(ref) if isinstance(ref, str) else ref
    check_input_size(model_ref, input_size)
    if input_size is not None or model_ref.is_own:
        described_json(model_ref.name, spec_json(model_ref.spec), input_size or model_ref.input_size)


@lru_cache(maxsize=256)
def _graph_artifact(name: str, network_spec_json: str | None, input_size: int) -> str:
    """The graph artifact of :func:`described_json`'s description, made once per process (a campaign
    logs it with each configuration of the network)."""
    from tracker.describe.graph import Description

    return Description.from_json(json.loads(described_json(name, network_spec_json, input_size)[2])).graph_artifact()


def plan(ref: str, batch_size: int, phase: str = "inference", device: str = "cpu", threads: int | None = None,
         precision: str = "float32", input_size: int | None = None, allocator: str | None = None,
         memory_limit_mb: float | None = None) -> Planned:
    from tracker.environment import software_versions
    from tracker.profile.modes import read_mode
    from tracker.profile.records import key_fields
    from tracker.zoo import resolve
    from tracker.zoo.spec import check_input_size

    check_format(precision, phase, device)
    model_ref = resolve(ref)  # a spec file is read once, here: described and measured as read
    check_input_size(model_ref, input_size)
    size = input_size or model_ref.input_size
    name, model_hash, _ = described_json(model_ref.name, spec_json(model_ref.spec), size)
    spec = NetworkSpec(model=name, batch_size=batch_size, input_size=size, device=device, precision=precision, phase=phase,
                       in_channels=model_ref.in_channels, input_shape=model_ref.input_shape,
                       input_vocab=model_ref.input_vocab)
    mode = read_mode(device, threads=threads, allocator=allocator)
    cap: dict[str, Any] = {}
    counts: dict[str, str] = {}
    if memory_limit_mb:  # under a memory cap: another configuration than without, or under another cap
        from tracker.profile.memcap import cap_counts, planned_kind
        from tracker.profile.network import imports_own_code

        cap = {"memory_limit_mb": float(memory_limit_mb), "memory_cap": planned_kind(device)}
        counts = cap_counts(imports_own_code(phase, precision))  # since 0.9.6
    keys = key_fields(spec, model_hash, mode.mode_id, software_versions(), **cap, **counts)
    return Planned(spec, ref, model_hash, mode.mode_id, threads, keys, model_ref.spec, allocator, **cap)


def ensure_mode_logged(logger: RunLogger, device: str, threads: int | None, allocator: str | None = None) -> str:
    """Log the ``mode`` run describing this device mode, once per experiment; its mode id."""
    from tracker.environment import threads_tags
    from tracker.profile.modes import mode_record, read_mode

    mode = read_mode(device, threads=threads, allocator=allocator)
    record = mode_record(mode)
    record.tags.update(threads_tags(threads))
    if record.config_key not in logger.measured(kind="mode"):
        logger.log([record])
    return mode.mode_id


def keep_own_code(record: RunRecord, spec: dict[str, Any] | None) -> None:
    """The code of the network of your own that ``spec``'s network runs (its own, or the one it was
    pruned from: :func:`tracker.zoo.spec.own_code_spec`), as measured (as planned, not the file as it
    may be now), and the modules beside it that it imports, each at its file's path (blocks.conv:
    blocks/conv.py): artifacts of ``record``, which its description names. Other networks: nothing."""
    from tracker.zoo.spec import call_text, own_code_spec

    own = own_code_spec(spec)
    if own is None:
        return
    beside_files = {f"{name.replace('.', '/')}.py": text for name, text in (own.get("modules") or {}).items()}
    record.artifacts.update({f"{MODULE_SOURCE_FOLDER}/{path}": text for path, text in beside_files.items()})
    file = Path(own["file"]).name
    record.artifacts[f"{MODULE_SOURCE_FOLDER}/{file}"] = own["source"]
    beside = f" (with {', '.join(beside_files)} beside it, which it imports)" if beside_files else ""
    whose = "A network of your own" if own is spec else f"{spec['name']}, pruned from a network of your own"
    called = own["callable"] + (call_text(own["args"], own["kwargs"]) if "args" in own else "")
    record.description = (f"{record.description or ''} {whose}, {file}:{called}: "
                          f"its code as measured is the artifact {MODULE_SOURCE_FOLDER}/{file}{beside}.").strip()


def job_for(p: Planned, rule: Stopping, layers: bool, layer_rule: Stopping | None) -> dict[str, Any]:
    return {
        "model": p.ref,
        "network_spec": p.network_spec,
        "batch_size": p.spec.batch_size,
        "input_size": p.spec.input_size,
        "device": p.spec.device,
        "precision": p.spec.precision,
        "phase": p.spec.phase,
        "threads": p.threads,
        "allocator": p.allocator,
        "layers": layers,
        "rule": asdict(rule),
        "layer_rule": asdict(layer_rule or rule),
        "memory_limit_mb": p.memory_limit_mb,
    }


def reused_result(logger: RunLogger, existing: RunRecord) -> ProfileResult:
    """A configuration measured before, reused: said to wait in the outbox where it does."""
    return ProfileResult(existing, [], reused=True, in_outbox=existing.run_id in logger.outboxed)


def has_layers(record: RunRecord) -> bool:
    """Whether a network run was measured with its layers (they add ``sum_of_layers_ms``)."""
    return LAYERS_METRIC in record.metrics


#: A wait for the device longer than this (seconds) means another process held it: whether this
#: configuration is still to be measured is asked again.
WAITED_S = 0.05
#: What a measuring child takes before it warms up (seconds, about: torch's first run of the network on
#: this VM, its start from the zygote, under other work): with the warm-up and time caps, the least
#: time limit (``--timeout``) a configuration that needs them all can finish within; a timeout under it
#: says so (until 0.9.1, "no result within 2 s" alone, for a measurement of a 0.3 s time cap).
CHILD_START_S = 2.0


def measurement_takes_s(rule: Stopping) -> float:
    """The longest a measurement under ``rule`` may take before any layers: its warm-up and sampling
    caps and its child's start (``CHILD_START_S``), the least time limit it can finish within."""
    return rule.warmup_cap_s + rule.time_cap_s + CHILD_START_S


def repeat_label(repeat_key: str) -> str:
    """What a repeat's run name adds: a campaign's round (``KEY#r2``: ``repeat 2``), a trace taken
    of one measured before (``KEY#trace``, ``profile --trace``'s ``KEY#trace-HEX``: ``traced``), or
    ``--again`` (``again``): ASCII digits alone after its ``r`` (isdigit took ``r٣`` and ``r²`` until 0.9.14)."""
    suffix = repeat_key.rpartition("#")[2]
    if suffix[:1] == "r" and whole_number(suffix[1:]) is not None:
        return f"repeat {suffix[1:]}"
    return "traced" if suffix == "trace" or suffix.startswith("trace-") else "again"


def measure_planned(
    logger: RunLogger,
    p: Planned,
    rule: Stopping,
    layers: bool = False,
    layer_rule: Stopping | None = None,
    timeout_s: float = 600.0,
    reuse: bool = True,
    campaign: str | None = None,
    reuse_failed: Callable[[RunRecord], bool] | None = None,
    repeat_key: str | None = None,
    trace: bool = False,
) -> ProfileResult:
    """Measure ``p`` in a child process and log it (with its layers), unless ``reuse`` finds it
    measured. ``reuse_failed``: a FAILED run answers too where it says yes to it (a
    boundary's: an out-of-memory failure, not a kill that would not come again). ``repeat_key`` marks a deliberate repeat of a configuration (see REPEAT_KEY_TAG).
    ``trace``: the child also traces a few iterations with torch.profiler after measuring
    (``tracker.profile.trace``), and the trace and its operator table are artifacts of the run."""
    from tracker.environment import gpu_tags, software_versions, threads_tags
    from tracker.profile import devicelock
    from tracker.profile.child import run_child
    from tracker.profile.memcap import CAP_TAG
    from tracker.profile.records import failed_record, layer_records, measured_record, counts_older_network_mem

    def answered() -> RunRecord | None:
        """A run logged before that answers this request, if any."""
        for status in ("FINISHED", "FAILED") if reuse_failed is not None else ("FINISHED",):
            # A whole-network run measured without its layers does not answer a request for layers: the
            # newest run measured with them does, though a whole-only one was logged after it (until
            # 0.9.23 the newest alone was read, and the layers measured again).
            existing = logger.find(p.config_key, status, LAYERS_METRIC if layers and status == "FINISHED" else None)
            if existing is not None:
                if status == "FAILED" and not reuse_failed(existing):  # type: ignore[misc]  # not None: FAILED asked
                    continue
                if status == "FINISHED" and counts_older_network_mem(existing):
                    # its network_mem_mb counted more than the network (records.NETWORK_MEM_SINCE): measured
                    # again, as a campaign does (reused until 0.9.27, and no network_mem_mb label came of it)
                    return None
                return existing
        return None

    if reuse and (existing := answered()) is not None:
        return reused_result(logger, existing)

    def log(record: RunRecord, children: list[RunRecord], payload: dict[str, Any]) -> ProfileResult:
        """Log the network run and its layer runs: the campaign on each, the repeat key on the network run."""
        for r in (record, *children):
            r.tags.update(gpu_tags(p.spec.device))  # cuda:N: GPU N's name and memory, not GPU 0's
            r.tags.update(threads_tags(p.threads))  # the measuring child's, not this process's
            if campaign:
                r.tags["tracker.campaign"] = campaign
        if p.memory_limit_mb:
            record.params["memory_limit_mb"] = p.memory_limit_mb
            record.tags[CAP_TAG] = payload.get("memory_cap", p.memory_cap)
        if repeat_key:
            record.tags[REPEAT_KEY_TAG] = repeat_key
            record.name += f" · {repeat_label(repeat_key)}"  # told apart in the UI (one name for all until 0.9.2)
        try:
            logger.log([record, *children])
        except KeyboardInterrupt as exc:  # a Ctrl-C as the server took the runs, which it took whole: what
            if getattr(exc, "logged", None) is not None:  # was logged goes with it, for its figures (since 0.9.8)
                exc.logged_result = ProfileResult(record, children, reused=False)  # type: ignore[attr-defined]
            raise
        return ProfileResult(record, children, reused=False, in_outbox=record.run_id in logger.outboxed)

    def with_description(record: RunRecord) -> None:
        """The description planning made: the child does not describe the network again (0.05 to 0.3 s
        of each child here, squeezenet1_1 to densenet121, for a description the parent already had)."""
        described = (p.spec.model, spec_json(p.network_spec), p.spec.input_size)
        record.artifacts[DESCRIPTION_ARTIFACT] = described_json(*described)[2]
        record.artifacts["description/graph.json"] = _graph_artifact(*described)
        keep_own_code(record, p.network_spec)  # a network of your own, or pruned from one: its code as measured

    job = job_for(p, rule, layers, layer_rule)
    # The device held from before the child starts until its run is logged: a process that waited for it
    # then finds the run logged, if it was of the same configuration (two campaigns of one configuration
    # each planned it before the other had measured it, and measured it twice, until 0.8.9).
    with devicelock.measuring_on(devicelock.job_devices(job)) as waited_s:
        # A campaign plans what it measures itself (reuse off), but a configuration another process
        # measured since is reused by it too: the same campaign run twice at once measured everything
        # twice until 0.9.4 (a repeat or a trace is measured again on purpose). It is asked whatever the
        # wait: two campaigns taking turns find the device free between configurations, and until 0.9.7
        # one that had not waited measured again what the other had just logged.
        if (((reuse and waited_s > WAITED_S) or (campaign and repeat_key is None and not trace))
                and (existing := answered()) is not None):
            return reused_result(logger, existing)
        start = now_ms()  # measured from when the device was this process's
        traced = None
        with tempfile.TemporaryDirectory(prefix="tracker-trace-") if trace else contextlib.nullcontext() as folder:
            if folder is not None:
                job["trace_dir"] = folder
            try:
                result = run_child(job, timeout_s=timeout_s)
            except KeyboardInterrupt as exc:  # a network measured with its layers: the network's part is kept
                if (partial := getattr(exc, "partial_payload", None)) is not None:
                    record = measured_record(p.spec, p.model_hash, p.mode_id, rule, p.keys, partial, start, p.threads,
                                             p.allocator)
                    record.tags[CHILD_NOTE_TAG] = ("interrupted while its layers were measured: the network's "
                                                   "measurement is kept, without them")
                    with_description(record)
                    exc.kept = log(record, [], partial)  # type: ignore[attr-defined]  # what a campaign counts
                raise
            if folder is not None and result.ok:  # the trace is read while its folder is there
                from tracker.profile.trace import traced_run

                traced = traced_run(result.payload)
        if not result.ok and result.reason == "killed" and result.partial is not None:
            # killed from outside (a signal another process sent) while its layers were measured: the
            # network's measurement is kept, as on a Ctrl-C (a FAILED run lost it until 0.9.4); an
            # out-of-memory or a timeout in the layers would come again, and stays a failure
            record = measured_record(p.spec, p.model_hash, p.mode_id, rule, p.keys, result.partial, start, p.threads,
                                     p.allocator)
            record.tags[CHILD_NOTE_TAG] = (f"its child was killed while its layers were measured ({result.message}): "
                                           "the network's measurement is kept, without them")
            with_description(record)
            return log(record, [], result.partial)
        if not result.ok:
            message = result.message
            takes = measurement_takes_s(rule)
            each = (layer_rule or rule).warmup_cap_s + (layer_rule or rule).time_cap_s  # a layer alone, at most
            # its layers, where asked for: as many as its network has, each measured alone after the network (a
            # hint of the network's time alone, and none past it, until 0.9.8)
            per_layer = (f", then each of its layers alone up to {each:g} s (its warm-up and sampling caps)"
                         if layers else "")
            if result.reason == "timeout" and layers and result.partial is not None:
                # the network measured, the time ran out in its layers: how many it has is the child's to know
                message = (f"{message}: the time ran out while its layers were measured, after the network's own "
                           f"measurement (which took up to {takes:g} s with its child's start){per_layer}: a network "
                           "has tens to hundreds of them; give it more (--timeout), or a lower --time-cap")
            elif result.reason == "timeout" and timeout_s < takes:
                message = (f"{message}: a time limit under what a measurement may take, its warm-up up to "
                           f"{rule.warmup_cap_s:g} s, its sampling up to {rule.time_cap_s:g} s (--time-cap, a campaign's time_cap_s) and its child's "
                           f"start about {CHILD_START_S:g} s{per_layer}; give it at least {takes:g} s "
                           f"{'and more for its layers ' if layers else ''}(--timeout, a campaign's timeout_s)")
            failed = failed_record(p.spec, p.model_hash, p.mode_id, rule, p.keys, result.reason or "crash", message,
                                   result.stderr_tail, start, p.threads, p.allocator)
            if result.reason == "timeout":  # its limit: a larger one measures it again (since 0.9.8)
                failed.tags[TIMEOUT_TAG] = f"{timeout_s:g}"
            return log(failed, [], result.payload)
        payload = result.payload
        record = measured_record(p.spec, p.model_hash, p.mode_id, rule, p.keys, payload, start, p.threads, p.allocator)
        if traced is not None:
            record.artifacts.update(traced.artifacts)
            record.tags.update(traced.tags)
        if result.message:  # it measured, but had to be killed to end, or its exit status is not known
            record.tags[CHILD_NOTE_TAG] = result.message
        with_description(record)
        logged = log(record, layer_records(record, p.spec, p.model_hash, p.mode_id, payload.get("layers", []),
                                           software_versions(), payload.get("layers_speed_probe")), payload)
        logged.trace = traced.summary if traced is not None else None
        return logged


def profile_network(
    logger: RunLogger,
    ref: str,
    batch_size: int,
    rule: Stopping,
    phase: str = "inference",
    device: str = "cpu",
    threads: int | None = None,
    layers: bool = False,
    layer_rule: Stopping | None = None,
    timeout_s: float = 600.0,
    memory_limit_mb: float | None = None,
    reuse: bool = True,
    again: bool = False,
    allocator: str | None = None,
    trace: bool = False,
    input_size: int | None = None,
    dtype: str = "float32",
) -> ProfileResult:
    """Measure one configuration (and its layers) in a child process and log it, unless measured;
    ``again``: measure it anyway, as a repeat (a new run with its own repeat key), with its layers
    if the run it repeats had them (layer_labels takes each layer's median over the repeats).
    ``trace``: with torch.profiler's trace of a few iterations after the measurement (see
    ``measure_planned``); a trace comes with a measurement, so a configuration measured before is
    measured again, as a repeat."""
    import uuid

    p = plan(ref, batch_size, phase=phase, device=device, threads=threads, allocator=allocator,
             memory_limit_mb=memory_limit_mb, input_size=input_size, precision=dtype)
    ensure_mode_logged(logger, device, threads, allocator)
    more = rule.min_samples > MIN_SAMPLES  # a run measured to fewer samples than asked does not answer
    latest = logger.find(p.config_key, "FINISHED") if again or trace or more else None
    if latest is not None and not (again or trace) and rule.min_samples <= asked_samples(latest):
        latest = None  # it was measured to as many: reused below
    # a trace of a configuration measured before is a repeat, and so is one asked for more samples
    # (--min-samples 200 reused a run of 192 without a word until 0.9.6)
    again = again or latest is not None
    # a traced repeat named as a campaign's is (`· traced`; `· again` until 0.9.6), its key its own
    repeat_key = f"{p.config_key}#{'trace-' if trace else ''}{uuid.uuid4().hex[:12]}" if again else None
    if again and not layers and p.spec.phase == "inference":
        layers = latest is not None and has_layers(latest)
    result = measure_planned(logger, p, rule, layers, layer_rule, timeout_s, reuse and not again,
                             repeat_key=repeat_key, trace=trace)
    if result.reused and layers and has_layers(result.network):  # its layers as they were logged
        result.layers = stored_layers(logger, result.network)
    return result


def asked_samples(record: RunRecord) -> int:
    """The fewest samples a logged run was measured to (its ``min_samples``; the default where a run lacks it, or
    its param is no finite number in ASCII: float() took ``٣`` as 3, and int() of ``inf`` raised, until 0.9.14)."""
    value = decimal_number(str(record.params.get("min_samples", MIN_SAMPLES)))
    return int(value) if value is not None and math.isfinite(value) else MIN_SAMPLES


def stored_layers(logger: RunLogger, network: RunRecord) -> list[RunRecord]:
    """The FINISHED layer runs nested under a logged network run, in layer order (a configuration
    measured with its layers before, read back when asked for again)."""
    from mlflow.tracking import MlflowClient

    from tracker.log.inspect import layer_runs
    from tracker.log.logger import as_record
    from tracker.log.outbox import spooled_children

    spooled = spooled_children(logger.location.uri, network.run_id)
    if spooled is not None:  # measured while the server was down: its layers wait with it
        return [as_record(r) for r in spooled]
    layers = []
    for run in layer_runs(MlflowClient(logger.location.uri), logger.experiment.experiment_id, network.run_id):
        record = RunRecord(kind="layer", name=run.info.run_name, params=dict(run.data.params), metrics=dict(run.data.metrics))
        record.tags, record.status, record.run_id = dict(run.data.tags), run.info.status, run.info.run_id  # type: ignore[assignment]
        layers.append(record)
    return layers


@dataclass
class Boundary:
    """The largest batch size that fits, after perf4sight's till_first_fail (plus an optional bisection)."""

    largest_ok: int | None
    first_failed: int | None
    failure_reason: str | None
    results: list[ProfileResult]

    def as_dict(self) -> dict[str, Any]:
        runs = [r.as_dict() for r in self.results]
        return {
            "largest_ok_batch_size": self.largest_ok,
            "first_failed_batch_size": self.first_failed,
            "failure_reason": self.failure_reason,
            **{k: runs[0][k] for k in ("memory_limit_mb", "memory_cap") if runs and k in runs[0]},
            "runs": runs,
        }


def find_boundary(
    logger: RunLogger,
    ref: str,
    rule: Stopping,
    phase: str = "training",
    device: str = "cpu",
    threads: int | None = None,
    start: int = 1,
    max_batch: int = 1024,
    search: bool = False,
    timeout_s: float = 600.0,
    memory_limit_mb: float | None = None,
    allocator: str | None = None,
    input_size: int | None = None,
    dtype: str = "float32",
) -> Boundary:
    """Double the batch size until the first failure (recorded as a FAILED run); with
    ``search``, bisect between the last size that fitted and the first that failed, and where
    ``start`` itself ran out of memory (a start taken from ``tracker predict --largest-batch`` that
    was too hopeful, say), halve it first until a size fits. A ``start`` over ``max_batch`` is a
    ConfigError, before anything is logged."""
    if start > max_batch:  # tried nothing, after logging a mode run, until 0.9.8
        from tracker.errors import ConfigError

        raise ConfigError(f"the boundary's start, batch size {start}, is over its largest, {max_batch}: "
                          "no batch size would be tried")
    if memory_limit_mb:  # TRACKER_MEMORY_CAP is read (and a bad value refused) before anything is logged
        from tracker.profile.memcap import planned_kind

        planned_kind()
    ensure_mode_logged(logger, device, threads, allocator)
    results: list[ProfileResult] = []

    def timed_out_again(record: RunRecord) -> bool:
        """A timeout under this limit or a larger one: it would come again, and ends the search as it did
        (under a smaller limit it is measured again, since 0.9.8)."""
        return record.tags.get(FAILURE_REASON_TAG) == "timeout" and not timed_out_under(record, timeout_s)

    def attempt(bs: int) -> ProfileResult:
        p = plan(ref, bs, phase=phase, device=device, threads=threads, allocator=allocator, memory_limit_mb=memory_limit_mb,
                 input_size=input_size, precision=dtype)
        # a recorded failure is an answer too, where it would come again: a resumed search does not redo
        # it. Out of memory alone is evidence of the boundary: a kill from outside (kill -9), a crash or
        # an error is measured again (until 0.9.8 any failure was reused, and a killed batch that fitted
        # was taken for one that did not)
        res = measure_planned(logger, p, rule, timeout_s=timeout_s,
                              reuse_failed=lambda r: boundary_evidence(r) or timed_out_again(r))
        results.append(res)
        return res

    ok: int | None = None
    bad: int | None = None
    reason: str | None = None
    bs = start
    while bs <= max_batch:
        res = attempt(bs)
        if res.network.status == "FINISHED":
            ok, bs = bs, bs * 2
            continue
        bad, reason = bs, res.network.tags.get(FAILURE_REASON_TAG)
        break
    if search and ok is None and bad is not None and reason == "oom":
        bs = bad // 2
        while bs >= 1:
            res = attempt(bs)
            if res.network.status == "FINISHED":
                ok = bs
                break
            bad, reason = bs, res.network.tags.get(FAILURE_REASON_TAG)
            if reason != "oom":  # another failure ends the search: it is the answer
                break
            bs //= 2
    if search and ok is not None and bad is not None and reason == "oom":
        lo, hi = ok, bad
        while hi - lo > 1:
            mid = (lo + hi) // 2
            res = attempt(mid)
            if res.network.status == "FINISHED":
                lo = mid
                continue
            hi = mid
            # another failure ends the search, as it does the doubling and the halving: it is the answer
            # (until 0.9.8 it was bisected on as out of memory, and said as "oom")
            if (reason := res.network.tags.get(FAILURE_REASON_TAG)) != "oom":
                break
        ok, bad = lo, hi
    return Boundary(ok, bad, reason, results)


def boundary_evidence(record: RunRecord) -> bool:
    """Whether a FAILED run answers a boundary's question at its batch size, reused rather than measured
    again: an out-of-memory failure (it would come again), not a kill from outside, a crash or an error (a
    timeout is not evidence, but answers where it would come again: ``timed_out_under``)."""
    return record.tags.get(FAILURE_REASON_TAG) == "oom"


def timed_out_under(record: RunRecord, timeout_s: float) -> bool:
    """Whether ``record`` is a ``timeout`` failure under a smaller time limit than ``timeout_s``: measured
    again under it, not reused (until 0.9.8 any recorded timeout was). A timeout logged before 0.9.8
    carries no limit, and answers as it did."""
    if record.tags.get(FAILURE_REASON_TAG) != "timeout":
        return False
    limit = decimal_number(record.tags.get(TIMEOUT_TAG, ""))  # in ASCII alone (float() took ٣ as 3 until 0.9.14)
    return limit is not None and limit < timeout_s
