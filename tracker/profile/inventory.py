"""What a measurement on a device of this machine will record, before a campaign is started
(``tracker device show``), after pyperf's ``system show``.

For one device (``cpu``, ``cuda``, ``cuda:N``):

- the device mode a run there records (``modes.read_mode``, as ``profile`` reads it);
- each telemetry metric a run can carry, *measured* (with its reading now, from the real
  sampler run for ``PROBE_WINDOW_S``, as a measurement runs it) or *absent* with why: a run
  here would lack it, never hold a zero in its place;
- which memory cap ``--memory-limit-mb`` would get (``memcap.planned_kind``) and whether the C
  allocator can keep freed memory (``--allocator retain``);
- notes on what moves measurements here: a governor that lets the clock follow the load, other
  work on the CPU, a virtual machine, every core measuring, the C library's default allocator, a
  GPU without persistence mode. tracker reads these and changes none of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: Seconds the telemetry sampler runs to see what it reads (the machine idle but for it).
PROBE_WINDOW_S = 0.5
#: The sampler's interval, as a measurement's default.
PROBE_INTERVAL_S = 0.02
#: Load average per core above which other work is said to share the CPU with measurements.
BUSY_LOAD_PER_CORE = 0.5
#: Cores up to which measuring on every one is noted (the OS and the telemetry thread share them).
FEW_CORES = 4
CPUINFO = Path("/proc/cpuinfo")

#: Telemetry metrics of a run, with what reads them; the sampler summary's key each comes from is
#: the one ``records`` turns into it (``summary_key``).
TELEMETRY = {
    "cpu_util_pct": "psutil", "cpu_util_others_pct": "psutil", "sys_mem_used_peak_mb": "psutil",
    "proc_rss_peak_mb": "psutil", "cpu_power_w": "rapl", "gpu_util_pct": "nvml", "gpu_mem_used_mb": "nvml",
    "gpu_power_w": "nvml", "gpu_sm_clock_mhz": "nvml", "board_power_w": "tegrastats", "power_w": "power",
    "energy_per_iter_j": "power",
}
#: The measurement's own figures, always there: how each is taken, by device kind.
ALWAYS = {
    "cpu": {
        "latency_ms": "wall clock (perf_counter_ns) around each iteration, its median, spread and samples",
        "peak_mem_mb": "the measuring child's peak resident memory from its built network on (getrusage)",
        "page_faults_per_iter_count": "the child's minor page faults per iteration (getrusage)",
        "tensor_peak_mb": "the most bytes of tensors alive at once over one more step (a TorchDispatchMode; "
                          "not in int8)",
    },
    "cuda": {
        "latency_ms": "wall clock around each iteration, the device synchronised before and after it",
        "peak_mem_mb": "torch's peak allocated CUDA memory (cuda_max_allocated_mb; reserved beside it)",
        "host_share_pct": "wall clock of each iteration's call before its closing synchronisation, over the whole",
    },
}


def summary_key(metric: str) -> str:
    """The key of the sampler's summary a run's telemetry metric is made of (``records``'
    ``TELEMETRY_METRICS``; an energy per iteration is the window's energy over its iterations)."""
    from tracker.profile.records import ENERGY_KEY, TELEMETRY_METRICS

    if metric == "energy_per_iter_j":
        return ENERGY_KEY
    return next(key for key, name in TELEMETRY_METRICS.items() if name == metric)


def rapl_reason(root: Path | None = None) -> str | None:
    """Why CPU package power cannot be read here (None where it can): no powercap, no RAPL
    package domain, or its energy counters not readable by this user."""
    from tracker.profile.telemetry import POWERCAP_ROOT, rapl_package_domains, rapl_packages

    root = POWERCAP_ROOT if root is None else root
    if rapl_package_domains(root):
        return None
    if not root.is_dir():
        return f"no RAPL: {root} is absent (a virtual machine, or a CPU or kernel without it)"
    domains = rapl_packages(root)
    if not domains:
        return f"no RAPL package domain under {root}"
    return (f"RAPL's energy counters ({domains[0] / 'energy_uj'}) are not readable by this user (root only since "
            "Linux 5.10); made readable, CPU power is measured")


def nvml_reason() -> str | None:
    """Why NVML cannot be opened here (None where it can): its message, in one line."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no library, no driver
        return f"NVML cannot start ({str(exc).strip() or type(exc).__name__}): no NVIDIA driver here"
    try:
        pynvml.nvmlShutdown()
    except Exception:
        pass
    return None


def cuda_devices() -> list[dict[str, Any]]:
    """The CUDA devices NVML sees, as this process numbers them (``CUDA_VISIBLE_DEVICES``
    renumbers), each with its name and memory; none without an NVIDIA driver."""
    from tracker.environment import gpu_tags, nvml_info, visible_cuda_entries

    count = int(nvml_info().get("env.gpu_count", 0))
    if (entries := visible_cuda_entries()) is not None:
        count = min(count, len(entries))
    out = []
    for k in range(count):
        tags = gpu_tags(f"cuda:{k}")
        if tags:
            memory = tags.get("env.gpu_memory_total_mb")
            out.append({"device": f"cuda:{k}", "name": tags["env.gpu_name"],
                        "memory_mb": int(memory) if memory else None})
    return out


def hypervisor() -> bool:
    """Whether this is a virtual machine, as its CPU says (the ``hypervisor`` flag)."""
    try:
        return any(line.startswith("flags") and " hypervisor" in line for line in CPUINFO.read_text().splitlines())
    except OSError:
        return False


def _power_source(summary: dict[str, float]) -> str:
    """What a run's total power and energy come from: the board, else the GPU and the CPU, else either."""
    if "board_power_w" in summary:
        return "tegrastats"
    return " + ".join(source for key, source in (("gpu_power_w", "nvml"), ("cpu_power_w", "rapl")) if key in summary)


def _absent_reason(metric: str, source: str, sources: list[str], reasons: dict[str, str]) -> str:
    """Why a telemetry metric is absent from a measurement on ``device``."""
    if source == "power":
        return "no power reading on this device (cpu_power_w, gpu_power_w, board_power_w: see each)"
    if source in reasons:
        return reasons[source]
    if source in sources:
        return f"{source} is read here, but gave no {metric} in a {PROBE_WINDOW_S:g} s window (not supported by the device)"
    return f"{source} gives none here"


def notes(facts: dict[str, Any]) -> list[str]:
    """What moves measurements on this machine, from what ``device_report`` read (``facts``):
    each a line saying what it is and what would hold it still. Nothing is changed."""
    out = []
    governor, cores = facts.get("governor"), facts.get("cores") or 1
    if governor is None:
        out.append("no CPU frequency governor to read (a virtual machine, or no cpufreq): the host sets the clock; "
                   "repeats of a configuration (a campaign's repeats, profile --again) show how far it moves")
    elif governor != "performance":
        out.append(f"the CPU frequency governor is {governor!r}: the clock follows the load, so a short measurement "
                   "may start before it rises; 'performance' holds it (cpupower frequency-set -g performance)")
    if (load := facts.get("load_1min")) is not None and load > BUSY_LOAD_PER_CORE * cores:
        out.append(f"load average {load:.2f} over the last minute on {cores} cores: other work shares the CPU with "
                   "what is measured")
    if facts.get("hypervisor"):
        out.append("a virtual machine (the CPU's hypervisor flag): its host's other guests move measurements; "
                   "measure repeats to see by how much")
    if facts.get("device") == "cpu" and facts.get("threads") == cores and cores <= FEW_CORES:
        out.append(f"torch measures on all {cores} cores, which the OS and tracker's telemetry thread share: "
                   f"--threads {max(1, cores - 1)} (a mode of its own) leaves one to them")
    if facts.get("allocator") in (None, "system") and facts.get("retain_available"):
        out.append("the C library's allocator gives freed memory back to the kernel: a network whose activations "
                   "outgrow its thresholds takes page faults every iteration; --allocator retain keeps it for reuse, "
                   "as a deployment's jemalloc or tcmalloc would (a mode of its own)")
    if facts.get("gpu_persistence") == "disabled":
        out.append("the GPU's persistence mode is disabled: the driver is set up again for each measuring child "
                   "(seconds on a large GPU); nvidia-smi -pm 1 keeps it loaded")
    return out


def device_report(device: str = "cpu", threads: int | None = None, allocator: str | None = None,
                  window_s: float = PROBE_WINDOW_S) -> dict[str, Any]:
    """What a measurement on ``device`` records here, and what moves it (see the module's text).
    ``threads`` and ``allocator`` are the mode's, as ``profile`` takes them (None: torch's
    threads, the C library's allocator)."""
    import time

    from tracker.environment import cpu_governor, cpu_model, cuda_index, memory_total_mb
    from tracker.profile.device import check_device
    from tracker.profile.memcap import planned_kind
    from tracker.profile.modes import allocator_available, describe_mode, read_mode, validate_allocator
    from tracker.profile.telemetry import TelemetrySampler, board_rail_reason

    check_device(device)
    if allocator is not None:
        validate_allocator(allocator)
    index = cuda_index(device)
    gpus = cuda_devices()
    mode = read_mode(device, threads=threads, allocator=allocator)
    with TelemetrySampler(interval_s=PROBE_INTERVAL_S, gpu_index=index) as sampler:
        time.sleep(window_s)
    summary, sources = sampler.summary(), list(sampler.sources)

    reasons: dict[str, str] = {}
    if "rapl" not in sources:
        reasons["rapl"] = rapl_reason() or "RAPL could not be opened"
    if "nvml" not in sources:
        if index is not None:
            reasons["nvml"] = nvml_reason() or f"NVML cannot read {device}"
        elif gpus or "tegrastats" in sources:  # a Jetson's GR3D load too (marked measured, of the idle GPU, until 0.9.8)
            reasons["nvml"] = "read for a measurement on a CUDA device only (an idle GPU's load and power are not the CPU's)"
        else:
            reasons["nvml"] = "no NVIDIA GPU here"
    if "tegrastats" not in sources:
        reasons["tegrastats"] = sampler.source_errors.get("tegrastats") or "no tegrastats on the PATH (a Jetson's)"
    measured, absent = {}, {}
    for metric, source in TELEMETRY.items():
        key = summary_key(metric)
        if key in summary:
            if source == "power":
                source = _power_source(summary)
            elif source not in sources and "tegrastats" in sources:  # a Jetson's GPU load, where NVML is not
                source = "tegrastats"
            if metric == "energy_per_iter_j":  # no reading of its own: the probe runs no iteration
                measured[metric] = {"source": source, "now": None, "no_reading": "per iteration of a measurement"}
            else:
                measured[metric] = {"source": source, "now": summary[key]}
                if metric == "proc_rss_peak_mb":  # the probe's process is this command, not a measuring child
                    measured[metric]["of"] = "this command's own process; a run reads its measuring child's"
        elif metric == "cpu_util_others_pct" and "psutil" in sources:
            # this process has children (a zygote it started), a measuring child has none
            here = "no reading here (this process has children); a measuring child, which has none, reads it"
            measured[metric] = {"source": source, "now": None, "no_reading": here}
        elif metric == "board_power_w" and (no_rail := board_rail_reason(sampler.samples)) is not None:
            absent[metric] = no_rail  # "gave no board_power_w ... (not supported by the device)" until 0.9.8
        else:
            absent[metric] = _absent_reason(metric, source, sources, reasons)
    kind = "cpu" if index is None else "cuda"
    here = next((g for g in gpus if g["device"] == f"cuda:{index}"), None)
    if index is not None and here is None:  # no NVML (a Jetson): CUDA says what the device is
        import torch

        props = torch.cuda.get_device_properties(index)
        here = {"device": f"cuda:{index}", "name": props.name, "memory_mb": int(props.total_memory) >> 20}
    cores = os.cpu_count() or 1
    facts = {"device": kind, "governor": cpu_governor(), "cores": cores,
             "load_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None, "hypervisor": hypervisor(),
             "threads": mode.params.get("cpu_threads"), "allocator": allocator,
             "retain_available": allocator_available("retain"), "gpu_persistence": mode.params.get("gpu_persistence")}
    return {
        "device": device,
        "name": (here or {}).get("name") if index is not None else cpu_model(),
        "memory_mb": (here or {}).get("memory_mb") if index is not None else memory_total_mb(),
        "cores": cores,
        "cuda_devices": gpus,
        "mode": {"id": mode.mode_id, "params": mode.params, "description": describe_mode(mode)},
        "always": ALWAYS[kind],
        "telemetry_sources": sources,
        "measured": measured,
        "absent": absent,
        "memory_cap": planned_kind(device),
        "allocator_retain": facts["retain_available"],
        "notes": notes(facts),
    }
