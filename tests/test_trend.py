"""The trends under the network-level booster (a power law, an additive sum): what they fit,
how they are stored, and that they extrapolate where trees alone cannot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracker.fingerprint.train import lgbm
from tracker.fingerprint.runtime import ADDITIVE_FEATURES, MEMORY_ADDITIVE_FEATURES, TREND_FEATURES, Trend
from tracker.fingerprint.trend import TrendBoosted


def _frame(rng: np.random.Generator, n: int, flops_range: tuple[float, float]) -> tuple[pd.DataFrame, np.ndarray]:
    bs = rng.choice([1, 2, 4, 8, 16], n).astype(float)
    flops = 10 ** rng.uniform(*np.log10(flops_range), n)
    params = 10 ** rng.uniform(5, 7, n)
    x = pd.DataFrame({"batch_size": bs, "batch_flops": flops * bs, "batch_saved_activation_bytes": flops * bs / 50,
                      "batch_activation_bytes": flops * bs / 40, "params": params, "nodes": rng.integers(10, 200, n)})
    log_y = -18.0 + 0.9 * np.log1p(x["batch_flops"].to_numpy()) + 0.05 * np.log1p(params)
    return x, log_y


def test_trend_recovers_a_power_law_and_round_trips_through_json() -> None:
    x, log_y = _frame(np.random.default_rng(0), 300, (1e8, 1e10))
    trend = Trend.fit(x, log_y)
    assert np.max(np.abs(trend(x) - log_y)) < 0.01
    assert Trend.from_json(trend.to_json()) == trend
    holes = x.assign(params=np.nan)  # a description without a parameter count: finite, not NaN
    assert np.isfinite(trend(holes)).all() and np.isfinite(Trend.fit(holes, log_y)(holes)).all()
    with pytest.raises(ValueError, match="unknown trend kind 'spline'"):
        Trend.from_json('{"kind": "spline", "intercept": 0, "coef": [], "features": []}')
    assert set(TREND_FEATURES) <= set(x.columns)


def test_trend_boosted_extrapolates_beyond_the_networks_it_saw() -> None:
    rng = np.random.default_rng(1)
    x, log_y = _frame(rng, 300, (1e8, 1e9))
    big, big_log_y = _frame(rng, 50, (1e10, 3e10))  # ten times more work than any training row
    trees = lgbm().fit(x, log_y)
    boosted = TrendBoosted().fit(x, log_y)
    err_trees = np.median(np.abs(np.exp(trees.predict(big) - big_log_y) - 1))
    err_boosted = np.median(np.abs(np.exp(boosted.predict(big) - big_log_y) - 1))
    assert err_trees > 0.5 and err_boosted < 0.1, (err_trees, err_boosted)
    assert boosted.booster_ is boosted.model.booster_


def test_candidates_are_compared_on_held_out_families_when_there_are_three() -> None:
    from tracker.fingerprint.train import network_candidates, select_network_model

    rng = np.random.default_rng(2)
    x, log_y = _frame(rng, 120, (1e8, 1e10))
    y = np.exp(log_y)
    networks = np.repeat(np.arange(30), 4)
    by_family, mape, split, _ = select_network_model(x, y, networks, networks % 3)
    assert split == "family" and set(mape) == set(network_candidates(x.columns)) and by_family == min(mape, key=mape.get)
    assert by_family == "trend+lgbm"  # a pure power law: the trend carries over, trees alone do not
    _, _, split, held = select_network_model(x, y, networks, networks % 2)
    assert split == "network" and len(held) == len(y)


def test_a_trend_is_kept_only_where_it_beats_lightgbm_alone_by_the_margin() -> None:
    from tracker.fingerprint.train import SELECTION_MARGIN, chosen_candidate

    assert SELECTION_MARGIN == 0.05
    assert chosen_candidate({"lgbm": 10.0, "trend+lgbm": 9.6, "additive+lgbm": 9.7}) == "lgbm"  # 4 %: not shown
    assert chosen_candidate({"lgbm": 10.0, "trend+lgbm": 9.6, "additive+lgbm": 9.4}) == "additive+lgbm"
    assert chosen_candidate({"lgbm": 10.0, "trend+lgbm": 9.0, "additive+lgbm": 9.4}) == "trend+lgbm"
    assert chosen_candidate({"lgbm": 8.0, "trend+lgbm": 8.0, "additive+lgbm": 12.0}) == "lgbm"  # a tie
    assert chosen_candidate({"lgbm": 8.0, "trend+lgbm": 30.0, "additive+lgbm": 12.0}) == "lgbm"


def _additive(x: pd.DataFrame) -> np.ndarray:
    """A training step's memory in MB, as the TX2's goes: a fixed part (the CUDA context), the
    weights with their gradients and momentum, and the saved activations of each sample."""
    return 1400.0 + 16e-6 * x["params"].to_numpy() + 1.2e-6 * x["batch_saved_activation_bytes"].to_numpy()


def test_a_memory_targets_additive_trend_sums_the_weights_and_the_kept_activations() -> None:
    from tracker.fingerprint.dataset import MEMORY_FEATURES, feature_columns

    x, _ = _frame(np.random.default_rng(5), 300, (1e8, 1e10))
    x = x.assign(batch_kept_activation_bytes=x["batch_saved_activation_bytes"] * 0.7,
                 batch_largest_activation_bytes=x["batch_activation_bytes"] / 20)
    y = 1400.0 + 16e-6 * x["params"].to_numpy() + 1.1e-6 * x["batch_kept_activation_bytes"].to_numpy()
    trend = Trend.fit(x, np.log(y), "additive")
    assert trend.features == MEMORY_ADDITIVE_FEATURES and np.max(np.abs(np.exp(trend(x)) / y - 1)) < 0.01
    assert Trend.from_json(trend.to_json()) == trend
    # rows without the memory features (a latency target's) get the work terms
    assert Trend.fit(x.drop(columns=["batch_kept_activation_bytes"]), np.log(y), "additive").features == ADDITIVE_FEATURES
    columns = [*x.columns, "kept_activation_bytes", "latency_ms", "model"]
    assert MEMORY_FEATURES <= set(feature_columns(columns, "peak_mem_mb"))
    assert not MEMORY_FEATURES & set(feature_columns(columns, "latency_ms"))
    assert "batch_flops" in feature_columns(columns, "latency_ms") and "model" not in feature_columns(columns)


def test_additive_trend_recovers_a_fixed_cost_plus_work_and_round_trips_through_json() -> None:
    x, _ = _frame(np.random.default_rng(3), 300, (1e8, 1e10))
    y = _additive(x)
    trend = Trend.fit(x, np.log(y), "additive")
    assert trend.kind == "additive" and trend.features == ADDITIVE_FEATURES and set(ADDITIVE_FEATURES) <= set(x.columns)
    assert np.max(np.abs(np.exp(trend(x)) / y - 1)) < 0.01
    assert trend.intercept == pytest.approx(1400.0, rel=0.02) and min(trend.coef) >= 0
    assert Trend.from_json(trend.to_json()) == trend
    assert 0 < trend.floor <= y.min() / 2 + 1e-9
    holes = x.assign(params=np.nan)  # a missing figure counts as 0: finite, not NaN
    assert np.isfinite(trend(holes)).all()
    nothing = x.assign(**{f: 0.0 for f in ADDITIVE_FEATURES})
    no_fixed_part = Trend(0.0, (1.0, 1.0, 1.0, 1.0), ADDITIVE_FEATURES, "additive", 3.0)
    assert np.allclose(no_fixed_part(nothing), np.log(3.0))  # a row with no work: held at the floor, not log(0)
    # Targets no sum of the features can follow: the geometric mean, not a sum that is 0 somewhere.
    flat = Trend.fit(nothing, np.log(np.full(len(x), 7.0)), "additive")
    assert np.allclose(np.exp(flat(x)), 7.0)
    for text, message in (('{"kind": "additive", "intercept": 1, "coef": [1], "features": [], "floor": 1}',
                           "1 coefficients for 0 features"),
                          ('{"kind": "additive", "intercept": 1, "coef": [], "features": [], "floor": 0}',
                           "floor must be positive")):
        with pytest.raises(ValueError, match=message):
            Trend.from_json(text)
    with pytest.raises(ValueError, match="unknown trend kind 'spline'"):
        Trend.fit(x, np.log(y), "spline")


def test_an_additive_trend_carries_a_fixed_cost_to_batches_never_seen() -> None:
    """Learnt at batch 1 to 16, asked at 32 to 512: the power law bends the fixed part into its
    exponents and trees stop at the largest batch seen; the sum keeps both apart."""
    rng = np.random.default_rng(4)
    x, _ = _frame(rng, 300, (1e8, 1e10))
    big, _ = _frame(rng, 60, (1e8, 1e10))
    big = big.assign(**{c: big[c] * 32 for c in ("batch_size", "batch_flops", "batch_saved_activation_bytes",
                                                  "batch_activation_bytes")})
    y, big_y = _additive(x), _additive(big)
    errors = {}
    for name, model in (("trees", lgbm()), ("power law", TrendBoosted()), ("additive", TrendBoosted("additive"))):
        model.fit(x, np.log(y))
        errors[name] = float(np.median(np.abs(np.exp(model.predict(big)) / big_y - 1)))
    assert errors["additive"] < 0.01 and min(errors["trees"], errors["power law"]) > 0.05, errors


def test_additive_candidate_is_kept_where_the_target_is_a_sum() -> None:
    from tracker.fingerprint.train import select_network_model

    rng = np.random.default_rng(5)
    x, _ = _frame(rng, 120, (1e8, 1e10))
    networks = np.repeat(np.arange(30), 4)
    chosen, mape, split, _ = select_network_model(x, _additive(x), networks, networks % 3)
    assert split == "family" and chosen == "additive+lgbm" and mape["additive+lgbm"] < 1.0, mape


def test_a_version_whose_trend_kind_is_unknown_is_refused_in_one_error(tmp_path) -> None:
    """A spec written by a newer tracker (a trend of another kind) is a FingerprintError, which the
    CLI prints as one line, not a ValueError from the JSON; a known kind loads and predicts."""
    import json
    from types import SimpleNamespace

    from tracker.fingerprint import runtime

    x, log_y = _frame(np.random.default_rng(6), 60, (1e8, 1e10))
    boosted = TrendBoosted("additive").fit(x, log_y)
    boosted.booster_.save_model(str(tmp_path / "booster.txt"))
    spec = {"format": runtime.FORMAT, "target": "peak_mem_mb", "features": list(x.columns), "method": "network",
            "trend": json.loads(boosted.trend.to_json()), "layer": None}
    context = SimpleNamespace(artifacts={runtime.SPEC: str(tmp_path / "spec.json"),
                                         runtime.BOOSTER: str(tmp_path / "booster.txt")})
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    model = runtime.FingerprintModel()
    model.load_context(context)
    assert np.allclose(model.predict(None, x), np.exp(boosted.predict(x)))
    (tmp_path / "spec.json").write_text(json.dumps({**spec, "trend": {**spec["trend"], "kind": "spline"}}))
    with pytest.raises(runtime.FingerprintError, match="trend is not one this tracker reads .*'spline'"):
        runtime.FingerprintModel().load_context(context)


def test_folds_fitted_side_by_side_predict_as_folds_fitted_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Held-out folds are fitted on threads (one a core); each fold's model is the one a loop
    fits, so every candidate's and ExtraTrees' held-out predictions are the same to the bit."""
    import threading

    import tracker.fingerprint.train as train
    from tracker.fingerprint.train import NETWORK_MODELS, extra_trees, out_of_fold, out_of_fold_each

    rng = np.random.default_rng(3)
    # ten networks of four rows: five folds of two held out, as many fits as 80 rows had (half as long to fit)
    x, log_y = _frame(rng, 40, (1e8, 1e10))
    y = np.exp(log_y)
    networks = np.repeat(np.arange(10), 4)
    fitted_on: set[str] = set()
    make = NETWORK_MODELS["additive+lgbm"]

    def noted() -> object:
        fitted_on.add(threading.current_thread().name)
        return make()

    monkeypatch.setattr(train, "fold_workers", lambda: 2)
    side_by_side = {**out_of_fold_each(x, y, networks, {**NETWORK_MODELS, "noted": noted}),
                    "extra_trees": out_of_fold(x, y, networks, extra_trees)}
    assert fitted_on and all(name.startswith("tracker-fold") for name in fitted_on)
    monkeypatch.setattr(train, "fold_workers", lambda: 1)
    fitted_on.clear()
    one_at_a_time = {**out_of_fold_each(x, y, networks, {**NETWORK_MODELS, "noted": noted}),
                     "extra_trees": out_of_fold(x, y, networks, extra_trees)}
    assert fitted_on == {threading.main_thread().name}
    for name, pred in one_at_a_time.items():
        assert np.all(pred > 0) and np.array_equal(pred, side_by_side[name]), name
    assert not np.array_equal(one_at_a_time["lgbm"], one_at_a_time["extra_trees"])


def test_scikit_learn_models_fit_one_at_a_time_beside_the_other_folds() -> None:
    """scikit-learn changes the process's warning filters around each tree's task; two of its fits
    on two fold threads could leave them empty. Its fits and predictions take turns."""
    import threading
    import time

    from tracker.fingerprint.train import OneAtATime, extra_trees

    inside, most = [0], [0]
    count = threading.Lock()

    class Slow:
        def fit(self, x: object, y: object) -> None:
            with count:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with count:
                inside[0] -= 1

        def predict(self, x: object) -> None:
            self.fit(x, None)

    models = [OneAtATime(Slow()) for _ in range(4)]
    threads = [threading.Thread(target=lambda m=m: m.fit(None, None).predict(None)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1
    assert isinstance(extra_trees(), OneAtATime)


def test_hinge_trend_saturates_at_the_largest_peak_and_round_trips_through_json() -> None:
    """A memory target's hinge trend: a floor, a line in the memory terms, a ceiling at the largest
    peak learnt (the readings of a board near its limit); its demand goes on past the ceiling."""
    import pandas as pd

    from tracker.fingerprint.runtime import Trend
    from tracker.fingerprint.train import network_candidates

    rng = np.random.default_rng(3)
    n = 300
    x = pd.DataFrame({"batch_size": rng.choice([2, 4, 8, 16, 32, 64, 128], n).astype(float),
                      "params": rng.uniform(1e6, 3e7, n), "kept": rng.uniform(1e7, 1e8, n)})
    x["batch_kept_activation_bytes"] = x["kept"] * x["batch_size"]
    x["batch_largest_activation_bytes"] = x["batch_kept_activation_bytes"] / 20
    x["batch_flops"] = x["batch_kept_activation_bytes"] * 50
    demand = 1300 + 1e-5 * x["params"] + 1e-6 * x["batch_kept_activation_bytes"]
    y = np.minimum(6200.0, np.maximum(1630.0, demand)).to_numpy()
    assert "hinge+lgbm" in network_candidates(x.columns, saturates=True)
    assert "hinge+lgbm" not in network_candidates(x.columns) and "hinge+lgbm" not in network_candidates(["batch_size"], True)
    trend = Trend.fit(x, np.log(y), "hinge")
    assert np.median(np.abs(np.exp(trend(x)) / y - 1)) < 0.02
    assert np.exp(trend(x)).max() <= 6200.0 + 1e-6
    big = x.assign(batch_kept_activation_bytes=x["batch_kept_activation_bytes"] * 10)
    assert np.exp(trend(big, saturated=False)).max() > 2 * 6200.0
    again = Trend.from_json(trend.to_json())
    assert np.allclose(again(x), trend(x)) and again.kind == "hinge"


def test_a_factored_trend_scales_the_work_per_batch_size_and_round_trips_through_json() -> None:
    """A GPU's training step: a fixed cost plus the batch's work, whose time per unit falls as the
    batch fills the device (a factor per batch size, shared by every network). The factored trend
    recovers it, where the additive trend (one cost per unit at every batch size) cannot; it is
    offered for a time target, not for a memory target (whose hinge scales per batch size)."""
    import pandas as pd

    from tracker.fingerprint.runtime import FACTORED_FEATURES
    from tracker.fingerprint.train import network_candidates

    rng = np.random.default_rng(4)
    n = 400
    x = pd.DataFrame({"batch_size": rng.choice([2, 4, 8, 16, 32, 64, 128], n).astype(float),
                      "params": rng.uniform(1e6, 3e7, n), "flops": 10 ** rng.uniform(8.5, 10, n)})
    x["activation_bytes"] = x["flops"] / 40
    x["batch_flops"] = x["flops"] * x["batch_size"]
    x["batch_activation_bytes"] = x["activation_bytes"] * x["batch_size"]
    x["batch_saved_activation_bytes"] = x["batch_activation_bytes"] / 2
    efficiency = 1 + 2 / np.sqrt(x["batch_size"].to_numpy())  # small batches cost more per sample
    y = 40 + 1e-6 * x["params"].to_numpy() + 2e-8 * efficiency * x["batch_flops"].to_numpy()
    factored = Trend.fit(x, np.log(y), "factored")
    assert factored.features == FACTORED_FEATURES and len(factored.factors) == len(factored.batches) == 7
    assert np.median(np.abs(np.exp(factored(x)) / y - 1)) < 0.01
    assert np.median(np.abs(np.exp(Trend.fit(x, np.log(y), "additive")(x)) / y - 1)) > 0.05
    # a batch size between two learnt: its factor interpolated between theirs
    between = x.assign(batch_size=48.0, batch_flops=x["flops"] * 48, batch_activation_bytes=x["activation_bytes"] * 48)
    truth = 40 + 1e-6 * x["params"] + 2e-8 * (1 + 2 / np.sqrt(48)) * between["batch_flops"]
    assert np.median(np.abs(np.exp(factored(between)) / truth - 1)) < 0.03
    again = Trend.from_json(factored.to_json())
    assert np.allclose(again(x), factored(x)) and again.kind == "factored"
    with pytest.raises(ValueError, match="one factor per batch size"):
        Trend.from_json('{"kind": "factored", "intercept": 1, "coef": [1, 1, 1], "features": '
                        '["params", "batch_flops", "batch_activation_bytes"], "batches": [2, 4], "factors": [0]}')
    assert "factored+lgbm" in network_candidates(x.columns)
    memory = [*x.columns, "batch_kept_activation_bytes", "batch_largest_activation_bytes"]
    assert "factored+lgbm" not in network_candidates(memory) and "factored+lgbm" not in network_candidates(memory, True)
