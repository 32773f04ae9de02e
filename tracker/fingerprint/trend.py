"""A trend under the network-level booster: trees cannot extrapolate, a trend can.

Latency and memory grow with batch size, FLOPs, activations and parameters. Trees only
interpolate between the networks they saw, so a network larger or smaller than all of them
is predicted at the edge of the training range, and one between two pruning levels as one of
them. ``TrendBoosted`` fits a trend of a few size features first, then LightGBM on what the
trend leaves (the residual in log space). Two kinds: a power law (a ridge regression of
log(target) on the logs of the features) and an additive one (a fixed cost plus non-negative
costs per unit of work, fitted on the relative error), which keeps a floor such as the CUDA
context's memory or a launch overhead apart from what grows with the batch. ``train`` keeps
one only where it beats LightGBM alone on the same held-out networks (``select_network_model``).

The trend is a handful of numbers, stored as JSON beside the booster (a model version tag).
``Trend`` itself lives in ``runtime``, which a registered version carries.
"""

from __future__ import annotations

from typing import Any

from tracker.fingerprint.runtime import Trend  # the fitted trend, which a version carries (served alone too)


class TrendBoosted:
    """A trend (``loglinear`` or ``additive``, see ``Trend``) plus LightGBM on its residual;
    fits and predicts on the log scale."""

    def __init__(self, kind: str = "loglinear") -> None:
        self.kind = kind
        self.trend: Trend | None = None
        self.model: Any = None

    def fit(self, x: Any, log_y: Any) -> TrendBoosted:
        from tracker.fingerprint.train import lgbm

        self.trend = Trend.fit(x, log_y, self.kind)
        self.model = lgbm().fit(x, log_y - self.trend(x))
        return self

    def predict(self, x: Any, saturated: bool = True) -> Any:
        """log(target); ``saturated`` False: a hinge trend's demand, past its ceiling (see ``Trend``)."""
        assert self.trend is not None, "fit first"
        return self.trend(x, saturated) + self.model.predict(x)

    @property
    def booster_(self) -> Any:
        return self.model.booster_
