"""Statistics derived from raw timing samples, and the adaptive stopping rule.

What was measured (a frozen spec) is kept apart from the samples; every figure here is
derived from the raw samples, never accumulated on the fly. The thresholds are named.

The 95 % confidence interval of the median is distribution-free: with n sorted samples,
the ranks j, k = n/2 -/+ Z * sqrt(n) / 2 (normal approximation of the binomial) bound
the median with ~95 % coverage, whatever the shape of the latency distribution.

That interval assumes independent samples. On a shared machine they are not: latency
drifts between regimes lasting a second or more, so a few hundred milliseconds of samples
look precise and are not. The samples are therefore also cut into consecutive blocks of
``block_n`` samples (about BLOCK_S of work each; the "batch means" method, with medians),
and the CI is the wider of the order-statistic interval and a Student-t interval on the
spread of the block medians (robust: 1.4826 x MAD). Drift between blocks widens the CI,
so sampling goes on until it has seen enough of it, or the time cap says how far it got.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

CI_Z = 1.96  # two-sided 95 %
#: Fewest samples from which a CI of the median is reported (ranks 1..n must bracket it).
MIN_SAMPLES_FOR_CI = 6
#: Warm-up ends when the medians of two consecutive windows agree within this ratio.
WARMUP_WINDOW = 5
WARMUP_STABLE_REL = 0.05
#: Work per block of consecutive samples (seconds), and the fewest blocks a CI may rest on:
#: a floor of 0.24 s of sampling. Longer blocks (0.1 s) cost 3x the device time and, measured by
#: benchmarks/profiling_cost.py on a drifting VM, did not agree better with 10 s windows.
BLOCK_S = 0.03
MIN_BLOCKS = 8
#: Layer runs: the loosest precision, time cap and warm-up cap a layer's rule may have.
LAYER_MIN_CI_REL = 0.05
LAYER_TIME_CAP_S = 1.0
LAYER_WARMUP_CAP_S = 0.5
#: Layer runs' blocks: about 5 ms of work, a floor of 40 ms of sampling (and 10 ms of warm-up) per
#: layer. A network has tens to hundreds of layers, and at whole networks' 30 ms blocks the floor
#: was most of a layer profile's time: 0.27 s a layer, resnet18's 60 layers 16 s. Measured by
#: benchmarks/layer_cost.py against a 0.4 s window per layer, layer medians under 5 ms blocks
#: agree with it as closely as under 30 ms blocks (within the layer precision), at about a
#: fifth of the device time.
LAYER_BLOCK_S = 0.005
#: A tail quantile q of the latency (p90, p99) is reported only where at least this many samples
#: lie beyond it, that is from TAIL_BEYOND / (1 - q) samples on (p90: 20, p99: 200); with fewer
#: it would be the largest sample or an interpolation towards it, and is left out.
TAIL_BEYOND = 2
#: Two-sided 95 % Student-t quantiles by degrees of freedom; past the table, 2.0 (df 60).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
        18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021}


#: A latency whose 95 % CI is wider than this share of its median is too imprecise to use (a
#: disturbed measurement: the time cap came before the precision): kept in the warehouse, but
#: not learnt from (fingerprint train), not placed on a search space's frontier, and ringed in
#: the report's batch pictures. The view searchspace_candidates holds the same figure.
IMPRECISE_CI_REL = 0.25

#: A device measurement whose host spent at least this share of each iteration issuing its work
#: (``host_share``) is bound by the host: the device waited on kernel launches, so its latency
#: follows the host CPU's speed as much as the device's (on a shared host, the host's drift).
HOST_BOUND_SHARE = 0.9


def imprecise(metrics: dict[str, float], asked: float = 0.0) -> bool:
    """Whether a measurement's latency (its run's ``metrics``) is too imprecise to use: its 95 % CI
    wider than ``IMPRECISE_CI_REL`` of it, and than ``asked``, the precision it was asked for (a
    campaign of ``precision = 0.5`` asked for no better); one without a CI is not."""
    ci = metrics.get("latency_ci_rel")
    return ci is not None and ci > max(IMPRECISE_CI_REL, asked)


def host_share(host_ms: list[float], samples_ms: list[float]) -> float | None:
    """The share of the timed iterations the host spent inside the step before it waited on
    the device (the sum of the host parts over the sum of the iterations); None without both."""
    total = sum(samples_ms)
    if not host_ms or len(host_ms) != len(samples_ms) or total <= 0:
        return None
    return min(1.0, sum(host_ms) / total)


def t95(df: int) -> float:
    if df in _T95:
        return _T95[df]
    return next((v for k, v in sorted(_T95.items()) if k >= df), 2.0)


#: Fewest samples before the precision may stop sampling, unless asked for more (``--min-samples``).
MIN_SAMPLES = 10
#: The most samples a measurement takes (``Stopping.max_samples``), and so the most ``--min-samples`` (a
#: campaign's ``min_samples``) may ask for: one bound for both (a campaign took 1,000,000 until 0.9.8).
MAX_SAMPLES = 100_000
#: The precision a measurement may be asked for (``--precision``, a campaign's ``precision``): the target
#: relative half-width of the median's 95 % CI, from 0.1 % to 50 % (a campaign took 0.9 until 0.9.8).
MIN_PRECISION = 0.001
MAX_PRECISION = 0.5
#: The least time cap of a measurement's sampling, in seconds (``--time-cap``, a campaign's ``time_cap_s``: one
#: bound for both; a campaign took any above 0, 5e-324 too, until 0.9.13).
MIN_TIME_CAP_S = 0.1
#: The longest time cap (the same option and key, and searchspace's --time-cap): an hour, 360 times the default.
#: A measurement ends at MAX_SAMPLES too, but a network of 36 ms a sample or more is still sampling then, and one
#: asked a precision it never reaches sampled for days under a typo's cap (1e308, taken until 0.9.14), or was
#: killed at its --timeout and told to give it "at least 1e+308 s".
MAX_TIME_CAP_S = 3_600


@dataclass(frozen=True)
class Stopping:
    """When to stop sampling: precision reached, time cap hit, or sample budget spent."""

    target_ci_rel: float = 0.02
    time_cap_s: float = 10.0
    min_samples: int = MIN_SAMPLES
    max_samples: int = MAX_SAMPLES
    warmup_cap_s: float = 3.0
    warmup_min: int = 2
    block_s: float = BLOCK_S
    min_blocks: int = MIN_BLOCKS

    def __post_init__(self) -> None:
        if not 0 < self.target_ci_rel < 1:
            raise ValueError(f"target precision must be between 0 and 1, got {self.target_ci_rel}")
        if self.time_cap_s <= 0:
            raise ValueError(f"time cap must be positive, got {self.time_cap_s}")
        if self.min_samples < MIN_SAMPLES_FOR_CI:
            raise ValueError(f"min_samples must be at least {MIN_SAMPLES_FOR_CI}")
        if self.block_s < 0 or self.min_blocks < 2:
            raise ValueError("block_s must be >= 0 and min_blocks at least 2")

    def for_layers(self) -> Stopping:
        """The rule for layers run alone: many short runs, so looser (5 % at least), capped at 1 s,
        on shorter blocks (``LAYER_BLOCK_S`` at most), and no more samples asked for than
        ``MIN_SAMPLES`` (a network's ``--min-samples`` is for its tail latency, which layers lack)."""
        return replace(self, target_ci_rel=max(self.target_ci_rel, LAYER_MIN_CI_REL),
                       time_cap_s=min(self.time_cap_s, LAYER_TIME_CAP_S), warmup_cap_s=LAYER_WARMUP_CAP_S,
                       block_s=min(self.block_s, LAYER_BLOCK_S), min_samples=min(self.min_samples, MIN_SAMPLES))

    def block_size(self, sample_ms: float) -> int:
        """Samples per block for iterations of about ``sample_ms``: about ``block_s`` of work."""
        if sample_ms <= 0 or not math.isfinite(sample_ms):
            return 1
        cap = max(1, self.max_samples // (4 * self.min_blocks))  # room for several times min_blocks
        return max(1, min(cap, round(1000.0 * self.block_s / sample_ms)))


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
    #: samples per block and full blocks the drift-aware part of the CI rests on
    block_n: int = 1
    blocks: int = 0
    #: tail latency (90th and 99th percentiles); None with too few samples to tell (TAIL_BEYOND)
    p90: float | None = None
    p99: float | None = None

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


def block_medians(samples: list[float], block_n: int) -> list[float]:
    """Medians of consecutive full blocks of ``block_n`` samples, in time order."""
    k = len(samples) // block_n
    return [statistics.median(samples[i * block_n : (i + 1) * block_n]) for i in range(k)]


def drift_half_width(samples: list[float], block_n: int) -> tuple[float, int]:
    """Half-width of a 95 % t-interval from the spread of block medians, and the block count."""
    medians = block_medians(samples, block_n)
    k = len(medians)
    if k < 2:
        return math.inf, k
    centre = statistics.median(medians)
    mad = statistics.median(abs(m - centre) for m in medians)
    spread = max(1.4826 * mad, 0.0)
    return t95(k - 1) * spread / math.sqrt(k), k


def tail_quantile(ordered: list[float], q: float) -> float | None:
    """The ``q`` quantile of sorted samples (linear interpolation between order statistics), or
    None where fewer than ``TAIL_BEYOND`` samples would lie beyond it."""
    n = len(ordered)
    if n < math.ceil(TAIL_BEYOND / (1.0 - q) - 1e-9):
        return None
    pos = q * (n - 1)
    i = int(pos)
    return ordered[i] + (ordered[min(i + 1, n - 1)] - ordered[i]) * (pos - i)


#: The clock's step (ms), where samples give no finer one: time.perf_counter_ns counts nanoseconds.
CLOCK_STEP_MS = 1e-6


def resolution(ordered: list[float]) -> float:
    """The finest step between sorted samples' distinct values (ms): how finely they were timed;
    :data:`CLOCK_STEP_MS` where they are all one value."""
    gaps = [b - a for a, b in zip(ordered, ordered[1:]) if b > a]
    return min(gaps) if gaps else CLOCK_STEP_MS


def summarize(samples: list[float], block_n: int = 1) -> Summary:
    """Figures of raw samples in time order; ``block_n`` > 1 makes the CI drift-aware."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    n = len(ordered)
    q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive") if n > 1 else (ordered[0],) * 3
    lo, hi = median_ci(ordered)
    median = statistics.median(ordered)
    blocks = 0
    if block_n > 1 or n >= MIN_BLOCKS:
        half, blocks = drift_half_width(samples, block_n)
        if math.isfinite(half) and half > max(median - lo, hi - median):
            lo, hi = max(median - half, 0.0), median + half  # a latency is never negative
    if n >= MIN_SAMPLES_FOR_CI and hi - lo < (step := resolution(ordered)):
        # samples that take a few values of the clock's steps (a layer of 2 us timed in 10 ns steps):
        # the median is known to a step, not exactly (a CI of exactly 0 was stored until 0.9.6)
        lo, hi = min(lo, max(median - step / 2, 0.0)), max(hi, median + step / 2)
    return Summary(
        n=n,
        median=median,
        mean=statistics.fmean(ordered),
        min=ordered[0],
        max=ordered[-1],
        std=statistics.stdev(ordered) if n > 1 else 0.0,
        iqr=q3 - q1,
        ci_low=lo,
        ci_high=hi,
        block_n=block_n,
        blocks=blocks,
        p90=tail_quantile(ordered, 0.90),
        p99=tail_quantile(ordered, 0.99),
    )


def warmed_up(samples: list[float], window: int = WARMUP_WINDOW, rel: float = WARMUP_STABLE_REL) -> bool:
    """True when the last two windows of warm-up samples have medians within ``rel``."""
    if len(samples) < 2 * window:
        return False
    last = statistics.median(samples[-window:])
    prev = statistics.median(samples[-2 * window : -window])
    return abs(last - prev) <= rel * max(last, 1e-12)


def stop_reason(samples: list[float], elapsed_s: float, rule: Stopping, block_n: int = 1) -> str | None:
    """Why sampling should stop now, or None to go on."""
    n = len(samples)
    enough = n >= rule.min_samples and n // block_n >= rule.min_blocks
    if enough and summarize(samples, block_n).ci_rel <= rule.target_ci_rel:
        return "precision"
    if n >= rule.max_samples:
        return "max_samples"
    if elapsed_s >= rule.time_cap_s and n >= MIN_SAMPLES_FOR_CI:
        return "time_cap"
    return None


#: Samples at or under which a Mann-Whitney U test without ties reads its p-value from U's exact distribution
#: (either side); past it, or with ties, from the normal approximation. SciPy's ``method="auto"`` rule.
MWU_EXACT_MAX = 8


def mann_whitney_p(x: list[float], y: list[float]) -> float:
    """The two-sided p-value of the Mann-Whitney U test of ``x`` against ``y`` (each at least one value), as
    ``scipy.stats.mannwhitneyu(x, y, alternative="two-sided")`` gives it (since 0.9.35; importing SciPy's
    stats took 1 s of a `runs compare`'s 1.5): the exact distribution of U where a side has at most
    ``MWU_EXACT_MAX`` values and none ties, else the normal approximation with its tie correction and a
    continuity correction of 1/2."""
    n1, n2 = len(x), len(y)
    if any(v != v for v in (*x, *y)):  # a NaN: no order to rank by (SciPy's p is NaN too)
        return math.nan
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    n = n1 + n2
    r1, ties, i = 0.0, [], 0
    while i < n:  # average ranks over runs of equal values
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        r1 += rank * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        ties.append(j - i + 1)
        i = j + 1
    u1 = r1 - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    if (n1 <= MWU_EXACT_MAX or n2 <= MWU_EXACT_MAX) and all(t == 1 for t in ties):
        return min(1.0, 2 * _u_at_least(int(u), n1, n2))
    tie_term = sum(t**3 - t for t in ties)
    s = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    numerator = u - n1 * n2 / 2 - 0.5
    if s == 0:  # every value the same: U at its mean, p 1
        return 1.0
    return min(1.0, 2 * 0.5 * math.erfc(numerator / s / math.sqrt(2)))


def _u_at_least(u: int, n1: int, n2: int) -> float:
    """P(U >= u) under the null hypothesis, samples of ``n1`` and ``n2`` values without ties: the share of the
    C(n1 + n2, n1) orderings whose U is at least ``u``, counted exactly."""
    small, large = sorted((n1, n2))
    # ways[k]: the orderings of the small side's values among the large side's whose U is k, the coefficients of
    # the Gaussian binomial [small + large, small], built one value of the small side at a time
    ways = [1]
    for m in range(1, small + 1):
        ways = _gaussian_binomial(m, large, ways)
    total = math.comb(n1 + n2, n1)
    return sum(ways[u:]) / total


def _gaussian_binomial(m: int, large: int, previous: list[int]) -> list[int]:
    """The counts of U for ``m`` values among ``large``, from those for ``m - 1``: the Gaussian binomial
    [large + m, m]'s coefficients, by [a, m] = [a - 1, m - 1] * (1 - q^a) / (1 - q^m)."""
    a = large + m
    counts = [0] * (m * large + 1)
    # multiply by (1 - q^a): subtract the counts shifted by a
    product = previous + [0] * (len(counts) + m - len(previous))
    for k in range(len(product) - 1, a - 1, -1):
        product[k] -= product[k - a]
    # divide by (1 - q^m): c[k] = product[k] + c[k - m]
    for k in range(len(counts)):
        counts[k] = product[k] + (counts[k - m] if k >= m else 0)
    return counts
