"""Statistics derived from raw timing samples, and the adaptive stopping rule.

What was measured (a frozen spec) is kept apart from the samples; every figure here is
derived from the raw samples, never accumulated on the fly. The thresholds are named.

The 95 % confidence interval of the median is distribution-free: with n sorted samples,
the ranks j, k = n/2 -/+ Z * sqrt(n) / 2 (normal approximation of the binomial) bound
the median with ~95 % coverage, whatever the shape of the latency distribution.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

CI_Z = 1.96  # two-sided 95 %
#: Fewest samples from which a CI of the median is reported (ranks 1..n must bracket it).
MIN_SAMPLES_FOR_CI = 6
#: Warm-up ends when the medians of two consecutive windows agree within this ratio.
WARMUP_WINDOW = 5
WARMUP_STABLE_REL = 0.05


@dataclass(frozen=True)
class Stopping:
    """When to stop sampling: precision reached, time cap hit, or sample budget spent."""

    target_ci_rel: float = 0.02
    time_cap_s: float = 10.0
    min_samples: int = 10
    max_samples: int = 100_000
    warmup_cap_s: float = 3.0
    warmup_min: int = 2

    def __post_init__(self) -> None:
        if not 0 < self.target_ci_rel < 1:
            raise ValueError(f"target precision must be between 0 and 1, got {self.target_ci_rel}")
        if self.time_cap_s <= 0:
            raise ValueError(f"time cap must be positive, got {self.time_cap_s}")
        if self.min_samples < MIN_SAMPLES_FOR_CI:
            raise ValueError(f"min_samples must be at least {MIN_SAMPLES_FOR_CI}")


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    min: float
    max: float
    std: float
    iqr: float
    ci_low: float
    ci_high: float

    @property
    def ci_rel(self) -> float:
        """Relative half-width of the 95 % CI of the median."""
        if self.median <= 0:
            return math.inf
        return (self.ci_high - self.ci_low) / (2 * self.median)


def median_ci(sorted_samples: list[float], z: float = CI_Z) -> tuple[float, float]:
    """Distribution-free CI of the median from sorted samples (order-statistic ranks)."""
    n = len(sorted_samples)
    if n < MIN_SAMPLES_FOR_CI:
        return (sorted_samples[0], sorted_samples[-1]) if n else (math.nan, math.nan)
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)  # 1-based rank floor(...) -> 0-based
    hi = min(n - 1, math.ceil(n / 2 + half))
    return sorted_samples[lo], sorted_samples[hi]


def summarize(samples: list[float]) -> Summary:
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    n = len(ordered)
    q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive") if n > 1 else (ordered[0],) * 3
    lo, hi = median_ci(ordered)
    return Summary(
        n=n,
        median=statistics.median(ordered),
        mean=statistics.fmean(ordered),
        min=ordered[0],
        max=ordered[-1],
        std=statistics.stdev(ordered) if n > 1 else 0.0,
        iqr=q3 - q1,
        ci_low=lo,
        ci_high=hi,
    )


def warmed_up(samples: list[float], window: int = WARMUP_WINDOW, rel: float = WARMUP_STABLE_REL) -> bool:
    """True when the last two windows of warm-up samples have medians within ``rel``."""
    if len(samples) < 2 * window:
        return False
    last = statistics.median(samples[-window:])
    prev = statistics.median(samples[-2 * window : -window])
    return abs(last - prev) <= rel * max(last, 1e-12)


def stop_reason(samples: list[float], elapsed_s: float, rule: Stopping) -> str | None:
    """Why sampling should stop now, or None to go on."""
    n = len(samples)
    if n >= rule.min_samples and summarize(samples).ci_rel <= rule.target_ci_rel:
        return "precision"
    if n >= rule.max_samples:
        return "max_samples"
    if elapsed_s >= rule.time_cap_s and n >= MIN_SAMPLES_FOR_CI:
        return "time_cap"
    return None
