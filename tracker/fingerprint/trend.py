"""A log-log trend under the network-level booster: trees cannot extrapolate, a power law can.

Latency and memory grow with batch size, FLOPs, activations and parameters roughly as
power laws. Trees only interpolate between the networks they saw, so a network larger or
smaller than all of them is predicted at the edge of the training range. ``TrendBoosted``
fits a ridge regression of log(target) on the logs of a few size features first, then
LightGBM on what the trend leaves (the residual in log space). ``train`` keeps it only
where it beats LightGBM alone on the same held-out networks (``select_network_model``).

The trend is a handful of numbers, stored as JSON beside the booster (a model version tag).
``Trend`` itself lives in ``runtime``, which a registered version carries.
"""

from __future__ import annotations

from typing import Any

from tracker.fingerprint.runtime import Trend  # the fitted trend, which a version carries (served alone too)


class TrendBoosted:
    """A log-log trend plus LightGBM on its residual; fits and predicts on the log scale."""

    def __init__(self) -> None:
        self.trend: Trend | None = None
        self.model: Any = None

    def fit(self, x: Any, log_y: Any) -> TrendBoosted:
        from tracker.fingerprint.train import lgbm

        self.trend = Trend.fit(x, log_y)
        self.model = lgbm().fit(x, log_y - self.trend(x))
        return self

    def predict(self, x: Any) -> Any:
        assert self.trend is not None, "fit first"
        return self.trend(x) + self.model.predict(x)

    @property
    def booster_(self) -> Any:
        return self.model.booster_
