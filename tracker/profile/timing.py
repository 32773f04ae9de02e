"""Timing a callable on a device: warm up until stable, then sample adaptively.

Every timed call is bracketed by a device synchronisation (``torch.cuda.synchronize``
on CUDA; nothing to wait for on CPU), so the clock sees the work and not its launch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tracker.profile.stats import MIN_SAMPLES_FOR_CI, Stopping, Summary, stop_reason, summarize, warmed_up

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

    @property
    def summary(self) -> Summary:
        return summarize(self.samples_ms)


def device_sync(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index
        return lambda: torch.cuda.synchronize(index)
    return lambda: None


def measure(fn: Callable[[], object], rule: Stopping, sync: Callable[[], None] = lambda: None) -> Timing:
    clock = time.perf_counter_ns
    start = clock()

    def timed() -> float:
        sync()
        t0 = clock()
        fn()
        sync()
        return (clock() - t0) / 1e6

    warmup: list[float] = []
    warmup_deadline = start + rule.warmup_cap_s * 1e9
    while len(warmup) < rule.warmup_min or not (warmed_up(warmup) or clock() > warmup_deadline):
        warmup.append(timed())
    sample_start = clock()
    samples: list[float] = []
    reason = None
    while reason is None:
        samples.append(timed())
        n = len(samples)
        if n < MIN_SAMPLES_FOR_CI or (n > CHECK_EVERY_AFTER and n % CHECK_EVERY):
            continue
        reason = stop_reason(samples, (clock() - sample_start) / 1e9, rule)
    end = clock()
    return Timing(samples, warmup, reason, (end - start) / 1e9, (sample_start, end))
