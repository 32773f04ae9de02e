"""The registered form of a fingerprint: an MLflow pyfunc model that answers in the target's unit.

A registered version is what MLflow users load and serve without tracker's CLI::

    mlflow.pyfunc.load_model("models:/latency_ms-inference-cpu@champion").predict(rows)
    mlflow models serve -m models:/latency_ms-inference-cpu@champion --env-manager local

``rows`` are rows of the ``measurement_features`` view (the columns the version's ``features``
tag lists; others are ignored). The answer is the target in its unit (ms, MB, W, J, %): the
exponential of the booster's log-scale output, plus the log-log trend when the version has one,
held at the target's ceiling. ``tracker predict`` loads this same object
(``unwrap_python_model``), so the MLflow path and tracker's own share the same functions
(:func:`network_values`, :func:`layer_sums`, :func:`combined`). A version whose ``method`` is
``layer`` or ``blend`` also holds its layer-level model: a row that carries the optional column
``layers`` (the network's module calls, each a record of ``LAYER_INPUTS``, as ``tracker predict
--features`` prints them) is predicted as ``tracker predict`` predicts it; a row without it gets
the network-level part.

Format history (the version tag ``format``; pyperf-style, unknown formats are refused):

- 1 (no tag): a bare LightGBM flavour fitted on log(target); the trend in a version tag.
  MLflow served it as log(target). Still read by ``tracker predict``.
- 2: this pyfunc; the booster, its spec (``fingerprint.json``: target, features, trend, layer
  calibration) and, for a layer or blend version, the layer booster are its artifacts.

This module imports MLflow and pandas at the top: it is imported only to train or to load a fingerprint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd

from tracker.fingerprint.dataset import TARGETS, FingerprintError, capped
from tracker.fingerprint.layers import LAYER_INPUTS, PREDICT_THREADS, LayerModel

#: The format written by this tracker, and those it reads.
FORMAT = 2
KNOWN_FORMATS = (1, 2)
#: Artifact names inside the logged model.
BOOSTER = "booster"
SPEC = "spec"
LAYER_BOOSTER = "layer_booster"
#: The optional input column of a layer or blend version: each row's module calls.
LAYERS = "layers"
#: The file MLflow runs to build the model on load (models from code: nothing pickled).
MODEL_CODE = Path(__file__).with_name("served_model.py")


def network_values(booster: Any, features: list[str], trend: Any, rows: Any) -> Any:
    """The network-level prediction (in the target's unit, not capped) for the rows of a
    DataFrame holding ``features``: exp(booster + trend)."""
    import numpy as np

    missing = [f for f in features if f not in rows.columns]
    if missing:
        raise FingerprintError(f"rows lack the feature column(s) {', '.join(missing[:5])}"
                               f"{' ...' if len(missing) > 5 else ''} (columns of the measurement_features view)")
    x = rows[features].to_numpy(dtype=float, na_value=np.nan)
    log_values = booster.predict(x, num_threads=PREDICT_THREADS)
    if trend is not None:
        log_values = log_values + trend(rows)
    return np.exp(log_values)


def layer_sums(layer: LayerModel, column: Any) -> Any:
    """The layer-level latency of each row whose ``layers`` entry lists its module calls (records
    of ``LAYER_INPUTS``, or that list as a JSON string); NaN for a row without one."""
    import numpy as np

    records: list[dict[str, Any]] = []
    parents: list[int] = []
    for i, calls in enumerate(column):
        if isinstance(calls, str):
            try:
                calls = json.loads(calls)
            except ValueError:
                raise FingerprintError(f"row {i}: {LAYERS} is not JSON (expected a list of module calls)") from None
        if calls is None or (isinstance(calls, float) and calls != calls):
            continue
        if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
            raise FingerprintError(f"row {i}: {LAYERS} must be a list of module calls, each an object of "
                                   f"{', '.join(LAYER_INPUTS)}")
        records.extend(calls)
        parents.extend([i] * len(calls))
    if not records:
        return np.full(len(column), np.nan)
    frame = pd.DataFrame.from_records(records)
    missing = [c for c in LAYER_INPUTS if c not in frame.columns]
    if missing:
        raise FingerprintError(f"module calls in {LAYERS} lack {', '.join(missing)}")
    frame["parent_run_id"] = parents
    return layer.network_latency(frame).reindex(range(len(column))).to_numpy(float)


def combined(method: str, values: Any, summed: Any) -> Any:
    """A layer or blend version's prediction from its network-level ``values`` and the layer sums
    (NaN where a configuration has no module calls: the network level stands)."""
    import numpy as np

    summed = np.where(np.isnan(summed), values, summed)
    return summed if method == "layer" else np.sqrt(values * summed)


def spec_json(target: str, phase: str, device: str, features: list[str], method: str, network_model: str,
              trend: Any, layer: LayerModel | None = None) -> str:
    """The spec logged beside the booster: what the model predicts and from which columns."""
    return json.dumps({"format": FORMAT, "target": target, "unit": TARGETS[target], "phase": phase,
                       "device": device, "features": features, "method": method, "network_model": network_model,
                       "trend": None if trend is None else json.loads(trend.to_json()),
                       "layer": None if layer is None else {"factor": layer.factor, "inputs": LAYER_INPUTS}},
                      indent=2)


def signature(features: list[str], with_layers: bool = False) -> Any:
    """The model's MLflow signature: the feature columns in (and, ``with_layers``, the optional
    ``layers``), one double out. The columns are typed ``any``: the view's integer columns arrive
    as int64, or as float64 where a query meets a NULL, and MLflow refuses int64 where a schema
    says double; the model itself reads them as floats."""
    from mlflow.models.signature import ModelSignature
    from mlflow.types.schema import AnyType, ColSpec, Schema

    columns = [ColSpec(AnyType(), f) for f in features]
    if with_layers:
        columns.append(ColSpec(AnyType(), LAYERS, required=False))
    return ModelSignature(inputs=Schema(columns), outputs=Schema([ColSpec("double")]))


def version_format(tags: dict[str, str]) -> int | str:
    """A registered version's format from its tags (no ``format`` tag: 1), as written when it is
    not a number."""
    text = tags.get("format", "1")
    return int(text) if text.isdigit() else text


def model_format(tags: dict[str, str], where: str) -> int:
    """The format of a registered version from its tags; one this tracker does not read is a clear error."""
    found = version_format(tags)
    if found not in KNOWN_FORMATS:
        raise FingerprintError(f"{where} has format {str(found)!r}, which this tracker does not read "
                               f"(it reads {', '.join(map(str, KNOWN_FORMATS))}); upgrade tracker")
    return int(found)


class FingerprintModel(mlflow.pyfunc.PythonModel):
    """A fingerprint as MLflow serves it: rows of measurement_features in, the target in its unit out."""

    booster: Any = None
    trend: Any = None
    layer: LayerModel | None = None
    spec: dict[str, Any] = {}

    def load_context(self, context: Any) -> None:
        import lightgbm

        from tracker.fingerprint.trend import Trend

        spec = json.loads(Path(context.artifacts[SPEC]).read_text())
        if spec.get("format") not in KNOWN_FORMATS or spec.get("target") not in TARGETS:
            raise FingerprintError(f"fingerprint spec of format {spec.get('format')!r} for target "
                                   f"{spec.get('target')!r} is not one this tracker reads; upgrade tracker")
        self.spec = spec
        self.booster = lightgbm.Booster(model_file=context.artifacts[BOOSTER])
        self.trend = None if spec["trend"] is None else Trend.from_json(json.dumps(spec["trend"]))
        if spec.get("layer"):
            self.layer = LayerModel(lightgbm.Booster(model_file=context.artifacts[LAYER_BOOSTER]),
                                    float(spec["layer"]["factor"]))

    @property
    def features(self) -> list[str]:
        return list(self.spec["features"])

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> Any:
        """The target, in its unit, for each row of ``model_input``. (MLflow reads the hint: a
        DataFrame is one it validates nothing against; the signature comes from the input example.)"""
        rows = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        values = network_values(self.booster, self.features, self.trend, rows)
        if self.layer is not None and LAYERS in rows.columns:
            values = combined(self.spec["method"], values, layer_sums(self.layer, rows[LAYERS]))
        return capped(self.spec["target"], values)
