"""Device time of adaptive stopping vs PerfSeer's fixed windows, and whether they agree.

PerfSeer warms up for a fixed 30 s and samples for 30 s per configuration. Here the fixed
windows are scaled down to 5 s + 5 s (said in the output as fixed_warmup_s/fixed_sample_s).
Adaptive: warm up until two windows agree, then sample until the drift-aware 95 % CI of the
median is within 2 % (time cap 10 s). Both run in this process on the same networks at one
batch size (default 1). Each network is measured fixed, adaptive, fixed again: the adaptive
median is compared with the mean of the two fixed medians, and the two fixed medians with each
other (``fixed_repeat_diff_rel``: how far this machine itself moves between two 10 s windows,
the floor under any agreement). ``fixed_stretch_diff_rel`` is a finer floor: the fixed windows'
samples cut into consecutive stretches as long as that network's adaptive measurement, the
furthest stretch median from the fixed median (how far any measurement of the adaptive's length
can land on this machine, whatever its stopping rule). Only one fixed pass per network counts
towards the device time.
Targets: at least 10x less device time; medians within 3 %.
Usage: python benchmarks/profiling_cost.py [cpu|cuda] [BATCH] [THREADS] [ALLOCATOR]  (default cpu, batch 1;
every timed call on cuda is bracketed by a synchronisation, in both ways of measuring). On a
GPU, batch 1 of these small networks is bound by the host launching kernels; a larger batch
puts the work on the device. ``adaptive_host_share`` says which: the share of each iteration
the host spent launching it (near 1: host-bound, the latency moves with the host CPU's speed).
THREADS is the torch intra-op thread count, the CPU mode both ways measure in (printed as
``threads``). On cpu it defaults to ``CPU_THREADS`` = 1: on a 2-vCPU VM a measurement on
both vCPUs shares them with the OS and the host (our reading of why, not verified), and across
runs two 10 s fixed windows of one network differed by up to 5 to 39 % at both vCPUs, and by up to
2 to 6 % at one thread. ``all`` uses torch's default (every core), to see that. On cuda the
default is torch's.
ALLOCATOR is the C allocator mode both ways measure in (``system``, the default, or ``retain``:
freed memory kept for reuse, ``tracker.profile.modes.apply_allocator``; printed as ``allocator``).
With glibc's defaults squeezenet1_1 and mobilenet_v3_small take over a thousand page faults per
iteration at batch 1 here, and what a page fault costs on a VM moves with the host.
Last line: {"fixed_device_s": ..., "adaptive_device_s": ..., "ratio": ..., "max_median_diff_rel": ..., ...}
"""

import os
import sys

# benchmarks/logging.py is named like the stdlib module: keep this folder behind the standard
# library on the import path (measuring_mode is found there, logging is not).
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))

import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

from measuring_mode import measuring_mode  # noqa: E402

NETWORKS = ("squeezenet1_1", "mobilenet_v3_small", "shufflenet_v2_x0_5", "resnet18")
FIXED_WARMUP_S = 5.0
FIXED_SAMPLE_S = 5.0
TARGET_RATIO = 10.0
TARGET_DIFF = 0.03
CPU_THREADS = 1


def fixed_window(fn: Callable[[], None], sync: Callable[[], None]) -> tuple[float, float, list[float]]:
    """PerfSeer's way: warm up for a fixed time, then sample for a fixed time (median, device
    seconds, the samples in ms)."""
    start = time.perf_counter()
    while time.perf_counter() - start < FIXED_WARMUP_S:
        fn()
    sync()
    samples = []
    t_end = time.perf_counter() + FIXED_SAMPLE_S
    while time.perf_counter() < t_end:
        t0 = time.perf_counter_ns()
        fn()
        sync()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(samples), time.perf_counter() - start, samples


def stretch_medians(samples: list[float], stretch_s: float) -> list[float]:
    """Medians of consecutive stretches of ``samples`` (ms) lasting ``stretch_s`` each (a last,
    shorter stretch is dropped)."""
    out, chunk, total = [], [], 0.0
    for s in samples:
        chunk.append(s)
        total += s
        if total >= stretch_s * 1000:
            out.append(statistics.median(chunk))
            chunk, total = [], 0.0
    return out


def main() -> None:
    device, batch_size, allocator = measuring_mode("profiling_cost", CPU_THREADS)
    import torch

    from tracker.profile.stats import Stopping
    from tracker.profile.timing import device_sync, measure
    from tracker.zoo import build_model

    sync = device_sync(device)
    rule = Stopping(target_ci_rel=0.02, time_cap_s=10.0)
    rows = []
    for name in NETWORKS:
        model = build_model(name).to(device)
        x = torch.randn(batch_size, 3, 224, 224, device=device)

        def fn(model=model, x=x) -> None:
            with torch.inference_mode():
                model(x)

        first_median, fixed_s, first = fixed_window(fn, sync)
        adaptive = measure(fn, rule, sync, split_host=device != "cpu")
        second_median, _, second = fixed_window(fn, sync)
        fixed_median = (first_median + second_median) / 2
        a_median = adaptive.summary.median
        stretches = stretch_medians(first, adaptive.elapsed_s) + stretch_medians(second, adaptive.elapsed_s)
        rows.append({
            "network": name,
            "adaptive_median_ms": round(a_median, 4),
            "adaptive_ci_rel": round(adaptive.summary.ci_rel, 4),
            "fixed_median_ms": round(fixed_median, 4),
            "median_diff_rel": round(abs(a_median - fixed_median) / fixed_median, 4),
            "fixed_repeat_diff_rel": round(abs(first_median - second_median) / fixed_median, 4),
            # None where the adaptive measurement outlasted a fixed window (its time cap is 10 s)
            "fixed_stretch_diff_rel": round(max(abs(m - fixed_median) for m in stretches) / fixed_median, 4)
            if stretches else None,
            "fixed_stretches": len(stretches),
            "adaptive_device_s": round(adaptive.elapsed_s, 3),
            "adaptive_samples": adaptive.summary.n,
            "adaptive_stop": adaptive.stop_reason,
            # on a GPU: the share of each iteration the host spent launching it (near 1: the device
            # waited on the host, and the latency follows the host's speed); None on cpu
            "adaptive_host_share": round(adaptive.host_share, 3) if adaptive.host_share is not None else None,
            "fixed_device_s": round(fixed_s, 3),
            "fixed_samples": len(first),
        })
        print(json.dumps(rows[-1]))
    fixed_total = sum(r["fixed_device_s"] for r in rows)
    adaptive_total = sum(r["adaptive_device_s"] for r in rows)
    worst = max(r["median_diff_rel"] for r in rows)
    print(json.dumps({
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "networks": len(rows),
        "batch_size": batch_size,
        "threads": torch.get_num_threads(),
        "allocator": allocator,
        "fixed_warmup_s": FIXED_WARMUP_S,
        "fixed_sample_s": FIXED_SAMPLE_S,
        "fixed_note": "PerfSeer uses 30 s + 30 s; scaled down to 5 s + 5 s here",
        "fixed_device_s": round(fixed_total, 2),
        "adaptive_device_s": round(adaptive_total, 2),
        "ratio": round(fixed_total / adaptive_total, 1),
        "ratio_vs_perfseer_30s": round(6 * fixed_total / adaptive_total, 1),
        "max_median_diff_rel": worst,
        "max_fixed_repeat_diff_rel": max(r["fixed_repeat_diff_rel"] for r in rows),
        "max_fixed_stretch_diff_rel": max((r["fixed_stretch_diff_rel"] for r in rows
                                           if r["fixed_stretch_diff_rel"] is not None), default=None),
        **({"adaptive_host_share": {r["network"]: r["adaptive_host_share"] for r in rows}} if device != "cpu" else {}),
        "meets_target": fixed_total / adaptive_total >= TARGET_RATIO and worst <= TARGET_DIFF,
    }))


if __name__ == "__main__":
    main()
