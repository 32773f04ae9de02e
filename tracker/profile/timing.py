"""Timing a callable on a device: warm up until stable, then sample adaptively.

Every timed call is bracketed by a device synchronisation (``torch.cuda.synchronize``
on CUDA; nothing to wait for on CPU), so the clock sees the work and not its launch. On a
device, ``split_host`` also times each iteration's host part (the step's call, before the
closing synchronisation waits for the device): how much of the latency the host's launching
of kernels made (``Timing.host_share``).
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from tracker.profile.stats import (
    MIN_SAMPLES_FOR_CI,
    WARMUP_WINDOW,
    Stopping,
    Summary,
    host_share,
    stop_reason,
    summarize,
    warmed_up,
)

#: Stop-rule checks cost a sort; past this many samples check only every CHECK_EVERY.
CHECK_EVERY_AFTER = 200
CHECK_EVERY = 20


@dataclass(frozen=True)
class Timing:
    samples_ms: list[float]
    warmup_ms: list[float]
    stop_reason: str
    elapsed_s: float
    #: perf_counter_ns bounds of the sampling window (warm-up excluded), for telemetry
    window_ns: tuple[int, int] = (0, 0)
    #: samples per block of the drift-aware CI (see stats)
    block_n: int = 1
    #: minor page faults of this process over the sampling window (every thread's: the
    #: telemetry sampler's too, a handful), None where getrusage does not count them
    minor_faults: int | None = None
    #: each sample's host part (ms: the step's call until it returned, before the device was
    #: waited on), where asked (``split_host``); None on a CPU, where the host is the device
    host_ms: list[float] | None = None

    @property
    def summary(self) -> Summary:
        return summarize(self.samples_ms, self.block_n)

    @property
    def host_share(self) -> float | None:
        return host_share(self.host_ms, self.samples_ms) if self.host_ms is not None else None


def device_sync(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index
        return lambda: torch.cuda.synchronize(index)
    return lambda: None


def measure(fn: Callable[[], object], rule: Stopping, sync: Callable[[], None] = lambda: None,
            split_host: bool = False) -> Timing:
    clock = time.perf_counter_ns
    start = clock()
    host: list[float] | None = [] if split_host else None

    def timed() -> float:
        sync()
        t0 = clock()
        fn()
        if host is not None:
            host.append((clock() - t0) / 1e6)
        sync()
        return (clock() - t0) / 1e6

    # Warm-up ends when two consecutive windows agree; a window is at least one block of work,
    # so that fast networks are judged on a stretch of time and not on a few milliseconds.
    warmup: list[float] = []
    warmup_deadline = start + rule.warmup_cap_s * 1e9
    window = WARMUP_WINDOW
    while len(warmup) < rule.warmup_min or not (warmed_up(warmup, window) or clock() > warmup_deadline):
        warmup.append(timed())
        if len(warmup) % WARMUP_WINDOW == 0:
            window = max(WARMUP_WINDOW, rule.block_size(statistics.median(warmup[-WARMUP_WINDOW:])))
    block_n = rule.block_size(statistics.median(warmup[-WARMUP_WINDOW:]))
    faults_start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    if host is not None:
        host.clear()  # the sampling window's iterations alone, as the samples
    sample_start = clock()
    samples: list[float] = []
    reason = None
    checked = 0
    while reason is None:
        samples.append(timed())
        n = len(samples)
        step = block_n if n <= CHECK_EVERY_AFTER else max(block_n, CHECK_EVERY)
        if n < MIN_SAMPLES_FOR_CI or n - checked < step:
            continue
        checked = n
        reason = stop_reason(samples, (clock() - sample_start) / 1e9, rule, block_n)
    end = clock()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_start
    return Timing(samples, warmup, reason, (end - start) / 1e9, (sample_start, end), block_n,
                  faults if faults_start or faults else None, host)
