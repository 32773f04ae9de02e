"""A log-log trend under the network-level booster: trees cannot extrapolate, a power law can.

Latency and memory grow with batch size, FLOPs, activations and parameters roughly as
power laws. Trees only interpolate between the networks they saw, so a network larger or
smaller than all of them is predicted at the edge of the training range. ``TrendBoosted``
fits a ridge regression of log(target) on the logs of a few size features first, then
LightGBM on what the trend leaves (the residual in log space). ``train`` keeps it only
where it beats LightGBM alone on the same held-out networks (``select_network_model``).

The trend is a handful of numbers, stored as JSON beside the booster (a model version tag).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: Size features of the measurement_features view the trend is a power law of.
TREND_FEATURES = ("batch_size", "batch_flops", "batch_saved_activation_bytes", "batch_activation_bytes", "params")
#: Ridge penalty on the standardised log features: barely more than least squares, enough
#: to stay defined when two features are collinear (one family of networks, say).
TREND_ALPHA = 1e-3


def _logs(x: Any, features: tuple[str, ...]) -> Any:
    """log1p of the features; a missing value (a description without that figure) counts as 0."""
    import numpy as np

    return np.log1p(np.nan_to_num(x[list(features)].to_numpy(float), nan=0.0).clip(min=0))


@dataclass(frozen=True)
class Trend:
    intercept: float
    coef: tuple[float, ...]
    features: tuple[str, ...] = TREND_FEATURES

    def __call__(self, x: Any) -> Any:
        """log(target) the trend predicts for the rows of ``x`` (a DataFrame with ``features``)."""
        import numpy as np

        return self.intercept + _logs(x, self.features) @ np.asarray(self.coef)

    @classmethod
    def fit(cls, x: Any, log_y: Any) -> Trend:
        import numpy as np
        from sklearn.linear_model import Ridge

        ridge = Ridge(alpha=TREND_ALPHA).fit(_logs(x, TREND_FEATURES), log_y)
        return cls(float(ridge.intercept_), tuple(float(c) for c in ridge.coef_))

    def to_json(self) -> str:
        return json.dumps({"kind": "loglinear", "features": list(self.features), "intercept": self.intercept,
                           "coef": list(self.coef)})

    @classmethod
    def from_json(cls, text: str) -> Trend:
        data = json.loads(text)
        if data.get("kind") != "loglinear":
            raise ValueError(f"unknown trend kind {data.get('kind')!r}")
        return cls(float(data["intercept"]), tuple(float(c) for c in data["coef"]), tuple(data["features"]))


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
