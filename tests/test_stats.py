"""The stopping rule and the statistics, on synthetic samples with known answers."""

import json
import math
import queue
import random
import statistics
import threading
import time

import pytest

from tracker.errors import TrackerError
from tracker.log.samples import read_samples, samples_json
from tracker.profile.stats import HOST_BOUND_SHARE, Stopping, median_ci, stop_reason, summarize, warmed_up
from tracker.profile.timing import measure


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time() -> None:
    rng = random.Random(1)
    true_median = math.exp(0.0)  # lognormal(0, 0.5) has median exactly 1
    trials, covered = 2000, 0
    for _ in range(trials):
        samples = sorted(rng.lognormvariate(0.0, 0.5) for _ in range(40))
        lo, hi = median_ci(samples)
        covered += lo <= true_median <= hi
    assert 0.92 <= covered / trials <= 0.99


def test_summary_is_derived_from_the_raw_samples() -> None:
    samples = [5.0, 1.0, 3.0, 2.0, 4.0, 100.0, 3.0, 2.5]
    s = summarize(samples)
    assert s.n == 8 and s.median == statistics.median(samples) and s.max == 100.0 and s.min == 1.0
    assert s.ci_low <= s.median <= s.ci_high and s.iqr > 0
    assert 0 < summarize([2.0] * 10).ci_rel < 1e-6  # known to the clock's step (exactly 0 until 0.9.6)


def test_precise_samples_stop_on_precision_and_noisy_ones_on_the_cap() -> None:
    rule = Stopping(target_ci_rel=0.02, time_cap_s=1.0, min_samples=10)
    rng = random.Random(0)
    quiet = [10 + rng.gauss(0, 0.05) for _ in range(10)]
    assert stop_reason(quiet, 0.1, rule) == "precision"
    noisy = [rng.lognormvariate(0, 1.0) for _ in range(10)]
    assert stop_reason(noisy, 0.1, rule) is None
    assert stop_reason(noisy, 1.5, rule) == "time_cap"
    assert stop_reason(noisy[:3], 5.0, rule) is None  # never stop before a CI exists
    assert stop_reason(noisy, 0.1, Stopping(max_samples=10)) == "max_samples"


def test_warm_up_ends_once_two_windows_agree() -> None:
    cold = [50.0, 30.0, 20.0, 15.0, 12.0, 11.0, 10.5, 10.2, 10.1, 10.0]
    assert not warmed_up(cold)
    assert warmed_up(cold + [10.0, 10.1, 9.9, 10.0, 10.05])


def test_measure_runs_warm_up_then_samples_and_says_why_it_stopped() -> None:
    calls = []
    timing = measure(lambda: calls.append(1), Stopping(target_ci_rel=0.5, time_cap_s=0.5, min_samples=10))
    assert timing.stop_reason in ("precision", "time_cap")
    assert len(calls) == len(timing.samples_ms) + len(timing.warmup_ms)
    assert len(timing.samples_ms) >= 10 and len(timing.warmup_ms) >= 2


@pytest.mark.parametrize("kwargs", [{"target_ci_rel": 0}, {"target_ci_rel": 1.5}, {"time_cap_s": -1}, {"min_samples": 2}])
def test_nonsense_rules_are_refused(kwargs) -> None:
    with pytest.raises(ValueError):
        Stopping(**kwargs)


def _drifting(rng: random.Random, n: int, phi: float = 0.95, sd: float = 0.02) -> list[float]:
    """Latency around 10 ms whose level wanders slowly (AR(1)), like a shared machine's."""
    level = rng.gauss(0, sd / math.sqrt(1 - phi * phi))
    out = []
    for _ in range(n):
        level = phi * level + rng.gauss(0, sd)
        out.append(10 * (1 + level) * (1 + rng.gauss(0, 0.01)))
    return out


def test_blocks_widen_the_ci_when_the_machine_drifts() -> None:
    rng = random.Random(5)
    trials, naive, aware = 300, 0, 0
    for _ in range(trials):
        samples = _drifting(rng, 400)
        s1, s20 = summarize(samples), summarize(samples, block_n=20)
        naive += s1.ci_low <= 10 <= s1.ci_high
        aware += s20.ci_low <= 10 <= s20.ci_high
    # Independent-sample CIs cover the true median about a third of the time here; blocks
    # longer than the drift's memory bring it most of the way back.
    assert naive / trials < 0.5 and aware / trials > naive / trials + 0.25
    rule = Stopping(target_ci_rel=0.02, time_cap_s=10.0)
    regimes = [level * (1 + rng.gauss(0, 0.002)) for level in (9.0, 10.0, 11.0, 10.5) for _ in range(50)]
    assert stop_reason(regimes, 1.0, rule, block_n=5) is None  # sees the regimes and keeps sampling
    iid = [10 + rng.gauss(0, 0.1) for _ in range(200)]
    assert summarize(iid, block_n=5).ci_rel == pytest.approx(summarize(iid).ci_rel, rel=0.5)
    assert stop_reason(iid, 1.0, rule, block_n=5) == "precision"


def test_too_few_blocks_never_stop_on_precision() -> None:
    flat = [10.0] * 30
    assert stop_reason(flat, 0.1, Stopping(min_blocks=8), block_n=5) is None  # 6 blocks
    assert stop_reason(flat + [10.0] * 10, 0.1, Stopping(min_blocks=8), block_n=5) == "precision"


def test_block_size_is_about_block_s_of_work() -> None:
    rule = Stopping(block_s=0.1)
    assert rule.block_size(5.0) == 20 and rule.block_size(250.0) == 1 and rule.block_size(0.0) == 1


def test_a_wide_drift_interval_never_reaches_below_zero() -> None:
    two_regimes = [1.0] * 5 + [30.0] * 5  # two blocks far apart: a very wide t-interval
    s = summarize(two_regimes, block_n=5)
    assert s.ci_low == 0.0 and s.ci_high > s.max


def test_the_layer_rule_is_looser_capped_and_on_shorter_blocks() -> None:
    from tracker.profile.stats import LAYER_BLOCK_S, LAYER_MIN_CI_REL, LAYER_TIME_CAP_S

    layers = Stopping(target_ci_rel=0.02, time_cap_s=10.0).for_layers()
    assert layers.target_ci_rel == LAYER_MIN_CI_REL and layers.time_cap_s == LAYER_TIME_CAP_S
    assert layers.block_s == LAYER_BLOCK_S < Stopping().block_s
    # a 1 ms layer: blocks of about 5 samples, so its floor is min_blocks x 5 samples, not 30 x 8
    assert layers.block_size(1.0) == round(1000 * LAYER_BLOCK_S) and Stopping().block_size(1.0) == 30
    assert Stopping(block_s=0.001).for_layers().block_s == 0.001  # a rule already finer keeps its blocks
    assert Stopping(target_ci_rel=0.1).for_layers().target_ci_rel == 0.1


def test_tail_latency_needs_samples_beyond_it() -> None:
    """p90 and p99 are reported from 20 and 200 samples on (TAIL_BEYOND = 2 beyond them), between
    the median and the largest sample; with fewer they are absent, not the maximum."""
    from tracker.profile.stats import TAIL_BEYOND, tail_quantile

    assert TAIL_BEYOND == 2
    ordered = [float(v) for v in range(1, 21)]  # 1..20 ms
    assert tail_quantile(ordered[:19], 0.90) is None and tail_quantile(ordered, 0.90) == pytest.approx(18.1)
    assert tail_quantile(ordered, 0.99) is None
    s = summarize([float(v % 50) + 1 for v in range(200)])
    assert s.p99 is not None and s.median <= s.p90 <= s.p99 <= s.max
    few = summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert few.p90 is None and few.p99 is None


def test_layers_do_not_inherit_a_networks_min_samples() -> None:
    """--min-samples is for a network's tail latency; its layers (no tail metrics) keep the default."""
    from tracker.profile.stats import MIN_SAMPLES

    assert Stopping(min_samples=200).for_layers().min_samples == MIN_SAMPLES
    assert Stopping(min_samples=8).for_layers().min_samples == 8


class _Device:
    """An asynchronous worker, as a GPU is to its host: ``launch`` queues work and returns at
    once, the worker runs it in order, ``synchronize`` waits until it has all run."""

    def __init__(self) -> None:
        self.work: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            seconds = self.work.get()
            time.sleep(seconds)
            self.work.task_done()

    def launch(self, seconds: float) -> None:
        self.work.put(seconds)

    def synchronize(self) -> None:
        self.work.join()


def test_a_device_measurement_tells_the_hosts_part_from_the_devices() -> None:
    from tracker.profile.records import host_bound_note, layer_records, timing_metrics, timing_summary

    device = _Device()
    rule = Stopping(target_ci_rel=0.05, time_cap_s=1.0, min_samples=10)

    # The host's part sleeps (as a host waits on a driver's call) so that the worker, a thread of this
    # process, runs beside it and not only once the host lets go of the GIL.
    def device_bound() -> None:  # launches 8 ms of device work in 0.2 ms
        time.sleep(0.0002)
        device.launch(0.008)

    def host_bound() -> None:  # 8 ms launching pieces of no length, which the device runs as they come
        for _ in range(8):
            time.sleep(0.001)
            device.launch(0.0)

    waits = measure(device_bound, rule, device.synchronize, split_host=True)
    launches = measure(host_bound, rule, device.synchronize, split_host=True)
    for t in (waits, launches):
        assert t.host_ms is not None and len(t.host_ms) == len(t.samples_ms)
        assert all(0 < h <= s for h, s in zip(t.host_ms, t.samples_ms))
    assert waits.host_share < 0.3 and launches.host_share > HOST_BOUND_SHARE, (waits.host_share, launches.host_share)
    assert measure(device_bound, rule, device.synchronize).host_ms is None  # asked for only on a device
    # into metrics, the description's note, layer runs and the samples artifact
    for t, bound in ((waits, False), (launches, True)):
        timing = {"samples_ms": t.samples_ms, "warmup_ms": t.warmup_ms, "stop_reason": t.stop_reason,
                  "elapsed_s": t.elapsed_s, "block_n": t.block_n, "host_ms": t.host_ms}
        metrics = timing_metrics(timing, timing_summary(timing))
        assert metrics["host_share_pct"] == pytest.approx(100 * t.host_share)
        assert ("bound by the host's CPU" in host_bound_note(metrics)) is bound
        kept = read_samples(samples_json(timing), "run")
        assert kept.host_ms == pytest.approx(t.host_ms, abs=1e-6) and kept.samples_ms == pytest.approx(t.samples_ms, abs=1e-6)
        del timing["host_ms"]
        assert "host_share_pct" not in timing_metrics(timing, timing_summary(timing))  # absent, never zero
        assert read_samples(samples_json(timing), "run").host_ms is None
    layer = {"index": 0, "name": "conv1", "op_type": "Conv2d", "input_shape": "1x3x8x8", "output_shape": "1x4x8x8",
             "timing": {"samples_ms": launches.samples_ms, "warmup_ms": [], "stop_reason": "precision", "elapsed_s": 1.0,
                        "block_n": launches.block_n, "host_ms": launches.host_ms}}
    from tracker.log.record import RunRecord
    from tracker.profile.network import NetworkSpec

    parent = RunRecord(kind="network", name="n", metrics={"latency_ms": 1.0})
    spec = NetworkSpec(model="m", batch_size=1, input_size=8, device="cuda", precision="float32", phase="inference")
    (record,) = layer_records(parent, spec, "h", "cuda0", [layer], {})
    assert record.metrics["host_share_pct"] == pytest.approx(100 * launches.host_share)
    broken = json.loads(samples_json(layer["timing"]))
    broken["host_ms"] = broken["host_ms"][:-1]
    with pytest.raises(TrackerError, match="host parts for"):
        read_samples(json.dumps(broken), "run")


def test_figures_that_too_few_samples_cannot_give_are_absent_not_zero() -> None:
    """A timing of fewer samples than blocks need (a training job's few steps, a slow network
    under a short cap) logged ``latency_blocks_count`` 0, and one sample a ``latency_std_ms`` of 0,
    until 0.9.0: absent now; with enough samples both are there."""
    from tracker.profile.records import timing_metrics, timing_summary

    def metrics(samples: list[float], block_n: int = 1) -> dict[str, float]:
        timing = {"samples_ms": samples, "warmup_ms": [5.0], "stop_reason": "time_cap", "elapsed_s": 1.0,
                  "block_n": block_n}
        return timing_metrics(timing, timing_summary(timing))

    few, one = metrics([10.0, 11.0, 10.5]), metrics([10.0])
    assert "latency_blocks_count" not in few and few["latency_std_ms"] == pytest.approx(0.5)
    assert "latency_blocks_count" not in one and "latency_std_ms" not in one and one["latency_ms"] == 10.0
    enough = metrics([10.0 + (i % 3) * 0.1 for i in range(40)], block_n=4)
    assert enough["latency_blocks_count"] == 10 and enough["latency_std_ms"] > 0


def test_samples_in_the_clocks_steps_have_a_ci_of_a_step_not_zero() -> None:
    """A layer of about 2 us, timed in 10 ns steps, took three values: its CI was exactly 0 (until
    0.9.6), as if the median were known exactly; it is known to a step."""
    from tracker.profile.stats import CLOCK_STEP_MS

    steps = [0.00221] * 600 + [0.00222] * 300 + [0.00220] * 100
    s = summarize(steps, block_n=100)
    assert s.ci_high - s.ci_low == pytest.approx(0.00001) and s.ci_rel > 0
    alike = summarize([0.5] * 40, block_n=5)  # one value: the clock's own step
    assert alike.ci_high - alike.ci_low == pytest.approx(CLOCK_STEP_MS)
    spread = summarize([1.0 + 0.01 * (i % 7) for i in range(70)], block_n=7)  # wider than a step: as it was
    assert spread.ci_high - spread.ci_low > 0.01


def test_the_mann_whitney_p_value_is_scipys_without_importing_it() -> None:
    """``runs compare`` tests a latency change on block medians with the Mann-Whitney U test; SciPy's import
    took 1 s of its 1.5 until 0.9.35. The p-value is SciPy's (``method="auto"``): from U's exact distribution
    where a side has at most 8 values and none ties, else the normal approximation with the tie and
    continuity corrections; NaN where a value is NaN."""
    import numpy as np
    from scipy.stats import mannwhitneyu

    from tracker.profile.stats import MWU_EXACT_MAX, mann_whitney_p

    rng = np.random.default_rng(11)
    exact = 0
    for _ in range(600):
        n1, n2 = (int(v) for v in rng.integers(1, 30, 2))
        if rng.random() < 0.5:
            n1 = int(rng.integers(1, MWU_EXACT_MAX + 1))
        x, y = rng.normal(size=n1), rng.normal(size=n2) + rng.normal()
        if rng.random() < 0.3:  # ties
            x, y = np.round(x, 1), np.round(y, 1)
        exact += min(n1, n2) <= MWU_EXACT_MAX and len(set(x) | set(y)) == n1 + n2
        ours, theirs = mann_whitney_p(list(x), list(y)), float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
        assert ours == pytest.approx(theirs, rel=1e-12, abs=0), (list(x), list(y))
    assert exact > 200  # the exact distribution was read, not the approximation alone
    assert mann_whitney_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.1)  # 2 of the 20 orderings
    assert mann_whitney_p([5.0] * 3, [5.0] * 4) == 1.0  # all tied
    assert math.isnan(mann_whitney_p([1.0, math.nan], [2.0, 3.0]))
