"""The log-log trend under the network-level booster: what it fits, how it is stored, and
that it extrapolates where trees alone cannot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracker.fingerprint.train import lgbm
from tracker.fingerprint.runtime import TREND_FEATURES, Trend
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
    from tracker.fingerprint.train import NETWORK_MODELS, select_network_model

    rng = np.random.default_rng(2)
    x, log_y = _frame(rng, 120, (1e8, 1e10))
    y = np.exp(log_y)
    networks = np.repeat(np.arange(30), 4)
    by_family, mape, split, _ = select_network_model(x, y, networks, networks % 3)
    assert split == "family" and set(mape) == set(NETWORK_MODELS) and by_family == min(mape, key=mape.get)
    assert by_family == "trend+lgbm"  # a pure power law: the trend carries over, trees alone do not
    _, _, split, held = select_network_model(x, y, networks, networks % 2)
    assert split == "network" and len(held) == len(y)
