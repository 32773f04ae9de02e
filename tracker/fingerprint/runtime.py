"""What a registered fingerprint needs to answer, and nothing of tracker: the one module a
version carries with it, so that MLflow loads and serves it where tracker is not installed.

``fingerprint train`` logs a copy of this file with each version (MLflow's ``code_paths``, as
``tracker_fingerprint_runtime.py``) beside the boosters and their spec. The version's model code
(``served_model.py``) imports the installed tracker's copy when there is one, so that ``tracker
predict`` and MLflow answer with the same functions, and the logged copy where there is none:
``mlflow models serve`` in an environment of the version's own requirements (mlflow, lightgbm,
numpy, pandas), a Docker image of ``mlflow models build-docker``, a notebook without tracker.

Hence its rules: the standard library at import and numpy, pandas, lightgbm, scikit-learn and
scipy (only to fit a trend) and mlflow inside the functions that need them; no import of
tracker, except that its error derives from tracker's ``TrackerError`` where tracker is
installed (the CLI then reports it in one line) and from ``ValueError`` where it is not. The
PythonModel subclass, which needs mlflow, is made on first use (``runtime.FingerprintModel``),
so that tracker's dataset, layer and trend modules import the targets, the layer model and the
trend from here without importing mlflow.
No ``from __future__ import annotations``: MLflow reads ``predict``'s type hint as an object.
"""

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from tracker.errors import TrackerError as _ErrorBase
except ImportError:  # this module's logged copy, where tracker is not installed
    _ErrorBase = ValueError  # type: ignore[assignment,misc]
try:
    from tracker.decode import loads_json
except ImportError:  # there too, or a tracker before 0.9.15 (0.9.15's reader was imported unguarded at first, and
    # the copy did not import where tracker is not installed: a version served there did not load)

    def loads_json(text: str | bytes) -> Any:
        """``json.loads``, its every failure a ValueError (JSON nested past the recursion limit a RecursionError)."""
        try:
            return json.loads(text)
        except RecursionError:
            raise ValueError("JSON nested too deeply to read") from None


#: Targets a fingerprint can learn, with their units (all modelled on a log scale).
TARGETS = {"latency_ms": "ms", "peak_mem_mb": "MB", "network_mem_mb": "MB", "tensor_peak_mb": "MB", "power_w": "W",
           "energy_per_iter_j": "J", "gpu_util_pct": "%"}
#: Targets that cannot exceed a value: a prediction (exp of the log-scale model) is capped there.
CEILINGS = {"gpu_util_pct": 100.0}


def capped(target: str, values: Any) -> Any:
    """Predicted ``values`` of ``target`` held at its ceiling, if it has one: the one place both
    ``tracker predict`` (Champion.predict) and the held-out evaluation in training cap them."""
    import numpy as np

    ceiling = CEILINGS.get(target)
    return values if ceiling is None else np.minimum(values, ceiling)


#: A peak memory's floor, by phase: the bytes a configuration's own tensors hold at once, from
#: its description (columns of measurement_features). The weights, and in inference the
#: activations alive at once at the fullest point of a forward pass (the input, a layer's inputs
#: and output, and what later layers still read); in training every activation autograd keeps
#: from the forward pass to the backward pass (all alive as the forward pass ends). Trees answer
#: past the largest batch they learnt as at that batch; a peak below this floor is one no device
#: can reach. A version records the columns of its floor (spec key and tag).
MEMORY_FLOOR_COLUMNS = {"inference": ("weight_bytes", "batch_live_activation_bytes"),
                        "training": ("weight_bytes", "batch_kept_activation_bytes")}
#: The floor of versions trained by tracker 0.7.8, which record only that they keep one (spec
#: ``memory_floor: true``, no tag ``memory_floor_columns``): in inference the largest activation.
FIRST_MEMORY_FLOOR_COLUMNS = {"inference": ("weight_bytes", "batch_largest_activation_bytes"),
                              "training": ("weight_bytes", "batch_kept_activation_bytes")}


def floor_columns(phase: str, recorded: Any = None) -> tuple[str, ...] | None:
    """The columns of a floor: those a version ``recorded`` (a list), 0.7.8's where it recorded only
    ``True``, this tracker's for ``phase`` where it recorded nothing (a version being trained)."""
    if isinstance(recorded, (list, tuple)):
        return tuple(str(c) for c in recorded)
    return (FIRST_MEMORY_FLOOR_COLUMNS if recorded is True else MEMORY_FLOOR_COLUMNS).get(phase)


def memory_floor_mb(rows: Any, phase: str, columns: tuple[str, ...] | None = None) -> Any:
    """Each row's peak-memory floor in MB, the sum of ``columns`` (by default
    :data:`MEMORY_FLOOR_COLUMNS`'s for ``phase``; NaN where a column is NULL), or None where the
    phase has none or ``rows`` lack its columns."""
    columns = columns or MEMORY_FLOOR_COLUMNS.get(phase)
    if columns is None or any(c not in rows.columns for c in columns):
        return None
    return sum(rows[c].to_numpy(float) for c in columns) / 2**20


def floored(values: Any, rows: Any, phase: str, columns: tuple[str, ...] | None = None) -> Any:
    """Predicted peak memories ``values`` raised to their rows' floor where they fall below it (a
    floor unknown leaves its value as it is): the one place ``tracker predict``, MLflow's
    serving and the held-out evaluation in training apply it, for a version that keeps it."""
    import numpy as np

    floor = memory_floor_mb(rows, phase, columns)
    return values if floor is None else np.fmax(values, floor)


class FingerprintError(_ErrorBase):
    """A fingerprint cannot be trained or used (no data, no model for a target)."""


class UnreadableTagError(FingerprintError):
    """A tag of a registered version that predict reads cannot be read (edited by hand): predict refuses
    the version, and a new version that train registers takes its place as champion."""

    def __init__(self, message: str, tag: str, value: str) -> None:
        super().__init__(message)
        self.tag, self.value = tag, value


class UnloadableModelError(FingerprintError):
    """A registered version whose model files cannot be read (gone from the store's artifacts, or damaged):
    predict refuses the version, ``promote`` too, and a new version that train registers takes its place as
    champion (``why``: what of its files, in a few words)."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


#: The format written by this tracker, and those it reads.
#: 3 (tracker 0.5.0, stop 44): a layer-level model's calibration has a cost per call and per MB written
#: besides its factor; a tracker that reads 2 would drop them, so it refuses 3.
#: 4 (stop 45): a layer booster may read a module call's ``kind`` (``kind_code``); a tracker that
#: reads 3 would give it one column too few, so it refuses 4.
#: 5 (tracker 0.9.12): a layer booster may learn a module call's latency over its work (the layer
#: model's ``work``); a tracker that reads 4 would take that ratio for the latency, so it refuses 5.
FORMAT = 5
KNOWN_FORMATS = (1, 2, 3, 4, 5)
#: Artifact names inside the logged model.
BOOSTER = "booster"
SPEC = "spec"
LAYER_BOOSTER = "layer_booster"
#: The optional input column of a layer or blend version: each row's module calls.
LAYERS = "layers"
#: Threads a booster predicts with: the rows of a few configurations, for which starting
#: OpenMP threads costs more than it saves.
PREDICT_THREADS = 1
#: Threads the layer booster predicts a network's module calls with (a hundred rows or more, 600
#: trees): two halve its time here (4.1 to 2.0 ms for mobilenet_v3_large's 168 calls).
LAYER_PREDICT_THREADS = 2
#: Categories of ``tracker.describe`` in a fixed order: the code is a feature.
CATEGORIES = ("conv", "dwconv", "gconv", "linear", "norm", "act", "pool", "elementwise", "concat", "other")
#: The numbers of a module call the layer booster reads as they are.
LAYER_NUMBERS = ["layer_batch_size", "in_channels", "out_channels", "out_h", "kernel_h", "stride_h",
                 "groups", "layer_weight_bytes", "layer_batch_flops", "layer_batch_elementwise_ops",
                 "layer_batch_bytes", "layer_batch_out_bytes"]
#: What a module call brings to the layer model (layer_matrix makes category_code of category,
#: kind_code of kind and the padded-channel ratios of the channels): the records of the ``layers``
#: input of a served layer-level version.
LAYER_INPUTS = ["category", "kind", *LAYER_NUMBERS]
#: Module classes whose cost differs within their category, in a fixed order (the code is a
#: feature; new ones go last): an activation's arithmetic (a comparison or clamp, against an
#: exponential: SiLU took 2.4 times the time the layer model gave it while SiLU and ReLU were one
#: category), and pooling's kind. Piecewise-linear activations come first and those computing an
#: exponential, a tanh or an erf after them, so a split between the two holds for a kind the model
#: never saw but knows the place of. Any other class is ``len(KINDS)``; a missing kind is NaN.
KINDS = ("Identity", "ReLU", "ReLU6", "LeakyReLU", "PReLU", "Hardtanh", "Hardsigmoid", "Hardswish",
         "Sigmoid", "Tanh", "SiLU", "ELU", "SELU", "CELU", "GELU", "Softplus", "Mish", "Softmax",
         "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d")
#: Channels a CPU kernel works on at once: an AVX-512 register holds 16 float32, and oneDNN lays
#: channels out in blocks of it, so 40 channels cost about as much as 48 (a pruned network's odd
#: widths). Held out by network on cpu-forty (retaining mode), the ratios took the pruned resnet18s
#: from 10.1 to 6.0 % MAPE and the layer level from 81.7 to 88.3 % within +-10 %.
CHANNEL_BLOCK = 16
#: The layer booster's columns. Those added later come last: a booster fitted before them has the
#: first ``num_feature()`` (``layer_matrix``), so older versions predict as they were fitted.
LAYER_FEATURES = ["category_code", *LAYER_NUMBERS, "in_channels_pad_ratio", "out_channels_pad_ratio", "kind_code"]
#: The inputs each derived column is made of (the others are inputs themselves).
DERIVED_FROM = {"category_code": "category", "kind_code": "kind", "in_channels_pad_ratio": "in_channels",
                "out_channels_pad_ratio": "out_channels"}


def layer_inputs(features: int | None = None) -> list[str]:
    """The inputs (of ``LAYER_INPUTS``) that the first ``features`` columns of the layer booster
    are made of: a version fitted before ``kind`` was an input does not need it."""
    used = {DERIVED_FROM.get(f, f) for f in LAYER_FEATURES[:features]}
    return [c for c in LAYER_INPUTS if c in used]


def layer_matrix(frame: Any, features: int | None = None) -> Any:
    """The layer booster's matrix of module calls (a DataFrame of float columns); ``features``:
    the first that many columns of ``LAYER_FEATURES`` (a booster's ``num_feature()``), default all."""
    import pandas as pd

    names = LAYER_FEATURES[:features]
    return pd.DataFrame(layer_array(frame, features), columns=names, index=frame.index)


def layer_array(frame: Any, features: int | None = None) -> Any:
    """``layer_matrix``'s values as one float array, made column by column (a DataFrame's columns
    added one at a time cost about a millisecond a prediction)."""
    import numpy as np

    names = LAYER_FEATURES[:features]
    derived = {}
    if "category_code" in names:
        codes = {c: i for i, c in enumerate(CATEGORIES)}
        derived["category_code"] = [codes.get(c, len(CATEGORIES) - 1) for c in frame["category"]]
    if "kind_code" in names:
        kinds = {k: i for i, k in enumerate(KINDS)}
        derived["kind_code"] = [kinds.get(k, len(KINDS)) if isinstance(k, str) else np.nan for k in frame["kind"]]
    for side in ("in", "out"):
        if f"{side}_channels_pad_ratio" in names:
            channels = frame[f"{side}_channels"].to_numpy(float)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.ceil(channels / CHANNEL_BLOCK) * CHANNEL_BLOCK / channels
            derived[f"{side}_channels_pad_ratio"] = np.where(channels > 0, ratio, np.nan)
    out = np.empty((len(frame), len(names)))
    for j, name in enumerate(names):
        out[:, j] = derived[name] if name in derived else frame[name].to_numpy(float, na_value=np.nan)
    return out


@dataclass
class LayerModel:
    """A network's latency from its module calls: ``factor`` times the sum of the calls' predicted
    latencies, plus ``per_call_ms`` per call and ``per_out_mb_ms`` per MB the calls write (the
    batch's outputs): what a layer timed alone does not see of its place in the network (the
    dispatch between calls, functional ops, activations written to memory rather than to cache).
    Versions of format 2 and before carry the factor alone (the other two are 0)."""

    booster: Any  # lightgbm.Booster
    factor: float  # whole network over the sum of its isolated layers (with the two terms below: their weight)
    per_call_ms: float = 0.0
    per_out_mb_ms: float = 0.0
    #: What the booster learnt each call's latency over (``LAYER_WORK``'s weights of a call's work, and
    #: its ``floor``): it predicts log(latency / work). None: log(latency) itself (format 4 and before).
    work: dict[str, float] | None = None

    def call_latency(self, layer_rows: Any) -> Any:
        """Predicted latency of each module call of ``layer_rows`` (ms, an array)."""
        import numpy as np

        log_ms = self.booster.predict(layer_array(layer_rows, self.booster.num_feature()), num_threads=LAYER_PREDICT_THREADS)
        return np.exp(log_ms if self.work is None else log_ms + np.log(layer_work(layer_rows, self.work)))

    def network_latency(self, layer_rows: Any) -> Any:
        """Predicted latency of each parent configuration (a Series indexed by parent_run_id)."""
        import pandas as pd

        each = self.call_latency(layer_rows)
        codes, parents = pd.factorize(layer_rows["parent_run_id"], sort=False)
        return pd.Series(self.calibrate(*call_sums(codes, len(parents), each, layer_rows)), index=parents)

    def calibrate(self, sum_ms: Any, calls: Any, out_mb: Any) -> Any:
        """Whole-network latency from the sum of the calls' latencies, their count and the MB they write."""
        return self.factor * sum_ms + self.per_call_ms * calls + self.per_out_mb_ms * out_mb

    def calibration(self) -> dict[str, float]:
        """The calibration as written in a version's spec (and ``calibration.json``)."""
        return {"factor": self.factor, "per_call_ms": self.per_call_ms, "per_out_mb_ms": self.per_out_mb_ms,
                **({"work": dict(self.work)} if self.work is not None else {})}

    @classmethod
    def from_calibration(cls, booster: Any, calibration: dict[str, Any]) -> "LayerModel":
        """From a spec's ``layer`` (or ``calibration.json``); one written before the terms: factor alone;
        one written before ``work`` (format 4 and before): a booster of log latency itself."""
        work = calibration.get("work")
        if work is not None and (not isinstance(work, dict) or set(work) != {*LAYER_WORK, "floor"}):
            raise FingerprintError(f"fingerprint spec's layer work {work!r} is not one this tracker reads "
                                   f"(expected weights of {', '.join(LAYER_WORK)} and a floor); upgrade tracker or retrain")
        return cls(booster, float(calibration["factor"]), float(calibration.get("per_call_ms", 0.0)),
                   float(calibration.get("per_out_mb_ms", 0.0)),
                   None if work is None else {k: float(v) for k, v in work.items()})


#: A module call's work, what the layer booster learns its latency over (since 0.9.12): each FLOP one
#: unit, each elementwise op four, each byte moved a quarter, at least ``LAYER_WORK_FLOOR``. The trees then
#: learn a call's time per unit of work, by its kind and shape, which holds for sizes between and beyond
#: those they saw; they learnt the latency itself before, and a size they had not seen took the latency
#: of the nearest they had (maximum pooling at batch 4 30 % short on cpu-forty). Held out by network on
#: cpu-forty (retaining mode, batch 1 and 4, labels at the median speed) the layer level went from 4.78 %
#: (87.5 % within +-10 %) to 4.24 % (96.2 %); other weights are in docs/fingerprints.md ("the layer model's work").
LAYER_WORK = {"layer_batch_flops": 1.0, "layer_batch_elementwise_ops": 4.0, "layer_batch_bytes": 0.25}
#: The least work a call is counted (in FLOPs): a call of next to none (a flatten, an identity) costs its
#: dispatch whatever it does.
LAYER_WORK_FLOOR = 1000.0


def layer_work(layer_rows: Any, weights: dict[str, float]) -> Any:
    """Each module call's work, by ``weights`` (``LAYER_WORK``'s columns and a ``floor``): an unknown part none."""
    import numpy as np

    total = np.full(len(layer_rows), float(weights["floor"]))
    for column, weight in weights.items():
        if column != "floor":
            total += weight * np.nan_to_num(layer_rows[column].to_numpy(float, na_value=np.nan), nan=0.0)
    return total


def call_sums(codes: Any, parents: int, latency_ms: Any, layer_rows: Any) -> tuple[Any, Any, Any]:
    """Per parent configuration (``codes`` from factorising the rows' parent_run_id): the sum of
    ``latency_ms`` over its calls, their count and the MB they write (``layer_batch_out_bytes``)."""
    import numpy as np

    out_mb = np.nan_to_num(layer_rows["layer_batch_out_bytes"].to_numpy(float), nan=0.0) / 1e6
    return (np.bincount(codes, weights=latency_ms, minlength=parents), np.bincount(codes, minlength=parents).astype(float),
            np.bincount(codes, weights=out_mb, minlength=parents))


#: Size features of the measurement_features view the trend is a power law of.
TREND_FEATURES = ("batch_size", "batch_flops", "batch_saved_activation_bytes", "batch_activation_bytes", "params")
#: Ridge penalty on the standardised log features: barely more than least squares, enough
#: to stay defined when two features are collinear (one family of networks, say).
TREND_ALPHA = 1e-3
#: Size features of the view an additive trend is a sum of: a fixed part (the intercept and the
#: weights) and a part per sample (work and activations times the batch size).
ADDITIVE_FEATURES = ("params", "batch_flops", "batch_activation_bytes", "batch_saved_activation_bytes")
#: Those of a memory target (rows that carry the memory features): the weights, what autograd
#: keeps per sample, and the largest activation per sample (the backward pass's transient buffers).
MEMORY_ADDITIVE_FEATURES = ("params", "batch_kept_activation_bytes", "batch_largest_activation_bytes", "batch_flops")


#: A memory term summed where the rows carry it (since 0.9.34, tensor_peak_mb's: dataset.LIVE_TARGETS): the
#: activation bytes alive at once at the fullest point of a forward pass, the tensors' peak in inference.
LIVE_ADDITIVE_FEATURE = "batch_live_activation_bytes"


def additive_features(columns: Any) -> tuple[str, ...]:
    """The terms an additive trend sums for rows with these columns: the memory terms where the
    rows carry them (a memory target's features), the live activation bytes too where they carry
    those, else the work terms. A version records its trend's terms, which it reads back."""
    carried = set(columns)
    if not set(MEMORY_ADDITIVE_FEATURES) <= carried:
        return ADDITIVE_FEATURES
    return MEMORY_ADDITIVE_FEATURES + ((LIVE_ADDITIVE_FEATURE,) if LIVE_ADDITIVE_FEATURE in carried else ())


#: What a factored trend is a sum of: a fixed part (the intercept and the weights) and the work
#: and activations of the batch, scaled by a factor per batch size.
FACTORED_FEATURES = ("params", "batch_flops", "batch_activation_bytes")

#: The kinds of trend a version may carry (its JSON's ``kind``).
TREND_KINDS = ("loglinear", "additive", "hinge", "factored")
#: A hinge trend's smoothing of its batch factors: the penalty on the difference of neighbouring
#: batch sizes' log factors (and a tenth of it on each factor's distance from 1).
HINGE_SMOOTHING = 0.1
#: The least value a hinge trend gives (a positive target's, in its unit: MB)
HINGE_LEAST = 1e-6


def _softmin(u: Any, c: float, k: float) -> Any:
    import numpy as np

    return -k * np.logaddexp(-u / k, -c / k)


def _softmax(u: Any, f: float, k: float) -> Any:
    import numpy as np

    return k * np.logaddexp(u / k, f / k)


def _logs(x: Any, features: tuple[str, ...]) -> Any:
    """log1p of the features; a missing value (a description without that figure) counts as 0."""
    import numpy as np

    return np.log1p(_raw(x, features))


def _raw(x: Any, features: tuple[str, ...]) -> Any:
    """The features as numbers of at least 0; a missing value counts as 0."""
    import numpy as np

    return np.nan_to_num(x[list(features)].to_numpy(float), nan=0.0).clip(min=0)


def _per_batch(x: Any, features: tuple[str, ...]) -> tuple[Any, Any, Any, Any, Any]:
    """What a trend with a factor per batch size (hinge, factored) is fitted on: the rows' raw
    ``features``, each column's scale (its largest value; 1 where none is positive), their batch
    sizes, the distinct batch sizes in order and each row's index among them."""
    import numpy as np

    raw = _raw(x, features)
    scale = raw.max(axis=0)
    scale[scale <= 0] = 1.0
    batch = x["batch_size"].to_numpy(float)
    batches = np.unique(batch)
    return raw, scale, batch, batches, np.searchsorted(batches, batch)


@dataclass(frozen=True)
class Trend:
    """A smooth trend of log(target) under the network-level booster, of one of these kinds:

    - ``loglinear``: a power law, ``log(target) = intercept + coef . log1p(features)`` (ridge);
    - ``additive``: a sum with non-negative terms, ``target = intercept + coef . features``
      (fitted on the relative error), its log taken, and held at ``floor`` at least: a fixed
      cost plus costs that grow with the work, as a training step's memory is the CUDA context
      and the weights plus the saved activations of each sample, and a step's time a launch
      overhead plus the work. Unlike a power law it keeps the fixed part apart, so a network
      far smaller or larger than those seen is not scaled as if it had none.
    - ``hinge`` (memory): ``_fit_hinge``;
    - ``factored``: ``_fit_factored``, a fixed part plus the batch's work times a factor per
      batch size (``_line`` without the hinge's floor and ceiling).
    """

    intercept: float
    coef: tuple[float, ...]
    features: tuple[str, ...] = TREND_FEATURES
    kind: str = "loglinear"
    floor: float = 0.0  # additive only: the least value the sum is held at (positive); hinge: its floor
    #: hinge only: (floor's softness, ceiling, ceiling's softness); hinge and factored: the batch
    #: sizes learnt and the log factor of each on the per-sample terms
    shape: tuple[float, ...] = ()
    batches: tuple[float, ...] = ()
    factors: tuple[float, ...] = ()

    def __call__(self, x: Any, saturated: bool = True) -> Any:
        """log(target) the trend predicts for the rows of ``x`` (a DataFrame with ``features``);
        ``saturated`` False: a hinge trend's demand, not held under its ceiling (what a memory
        verdict compares with the device's memory: a reading saturates, the need does not)."""
        import numpy as np

        if self.kind == "hinge":
            return np.log(self._hinge(_raw(x, self.features), x["batch_size"].to_numpy(float), saturated=saturated))
        if self.kind == "factored":
            return np.log(np.maximum(self._line(_raw(x, self.features), x["batch_size"].to_numpy(float)), HINGE_LEAST))
        if self.kind == "additive":
            return np.log(np.maximum(self.intercept + _raw(x, self.features) @ np.asarray(self.coef), self.floor))
        return self.intercept + _logs(x, self.features) @ np.asarray(self.coef)

    @classmethod
    def fit(cls, x: Any, log_y: Any, kind: str = "loglinear") -> "Trend":
        import numpy as np

        if kind == "additive":
            return cls._fit_additive(x, np.exp(np.asarray(log_y, float)))
        if kind == "hinge":
            return cls._fit_hinge(x, np.exp(np.asarray(log_y, float)))
        if kind == "factored":
            return cls._fit_factored(x, np.exp(np.asarray(log_y, float)))
        if kind != "loglinear":
            raise ValueError(f"unknown trend kind {kind!r}: expected one of {', '.join(TREND_KINDS)}")
        from sklearn.linear_model import Ridge

        ridge = Ridge(alpha=TREND_ALPHA).fit(_logs(x, TREND_FEATURES), log_y)
        return cls(float(ridge.intercept_), tuple(float(c) for c in ridge.coef_))

    @classmethod
    def _fit_additive(cls, x: Any, y: Any) -> "Trend":
        """Non-negative least squares of the relative error (each row weighted by 1/y), on
        columns scaled to at most 1. Where the fitted sum is not positive on every training row
        (no fixed part and a row with no work), the trend is the geometric mean alone."""
        import numpy as np
        from scipy.optimize import nnls

        features = additive_features(x.columns)
        a = np.column_stack([np.ones(len(y)), _raw(x, features)])
        scale = a.max(axis=0)
        scale[scale <= 0] = 1.0
        solution, _ = nnls(a / scale / y[:, None], np.ones(len(y)))
        coef = solution / scale
        fitted = a @ coef
        if not (fitted > 0).all():
            coef = np.zeros(a.shape[1])
            coef[0] = float(np.exp(np.mean(np.log(y))))
            fitted = np.full(len(y), coef[0])
        return cls(float(coef[0]), tuple(float(c) for c in coef[1:]), features, "additive",
                   float(fitted.min()) / 2)

    def _line(self, raw: Any, batch: Any, factors: Any = None) -> Any:
        """A hinge or factored trend's line: a fixed part (the intercept and the first term, the
        weights) plus the per-sample terms times their batch size's factor (a batch size between
        those learnt interpolated in log batch size, one past them held at the nearest)."""
        import numpy as np

        coef = np.asarray(self.coef)
        if factors is None:
            factors = np.interp(np.log(np.maximum(batch, 1.0)), np.log(self.batches), self.factors)
        return self.intercept + raw[:, :1] @ coef[:1] + np.exp(factors) * (raw[:, 1:] @ coef[1:])

    def _hinge(self, raw: Any, batch: Any, factors: Any = None, saturated: bool = True) -> Any:
        """A hinge trend's value: its line (``_line``) held over a floor and under a ceiling by
        soft corners."""
        import numpy as np

        u = self._line(raw, batch, factors)
        kf, ceiling, kc = self.shape
        held = _softmax(u, self.floor, kf)
        # a soft ceiling's corner lies up to kc x log 2 under it: held above 0 (whose log a fit's
        # residuals and a prediction take) wherever a trial's corner is wider than its values
        return np.maximum(_softmin(held, ceiling, kc) if saturated else held, HINGE_LEAST)

    @classmethod
    def _fit_hinge(cls, x: Any, y: Any) -> "Trend":
        """``min(ceiling, max(floor, intercept + weights + factor(batch) * per-sample terms))`` with
        soft corners: the memory a training step reads on a device whose readings saturate (a
        Jetson's, near 6,200 of its 7,859 MB), a floor the small batches all read (the CUDA context
        and the allocator's first segments), and between them a line in the memory terms whose
        per-sample part is scaled by a factor per batch size, shared by every network (the
        allocator's and cuDNN's workspace steps), smoothed across batch sizes. The ceiling is the
        largest value learnt from; least squares of the log error, non-negative terms."""
        import numpy as np
        from scipy.optimize import least_squares

        features = additive_features(x.columns)
        raw, scale, batch, batches, at = _per_batch(x, features)
        n, nb = raw.shape[1], len(batches)
        ceiling = float(y.max())
        p0 = np.r_[0.8 * y.min(), np.full(n, y.mean() / (n + 1)), y.min(), 50.0, 100.0, np.zeros(nb)]
        lo = np.r_[np.zeros(n + 2), 1.0, 1.0, np.full(nb, -2.0)]
        hi = np.r_[np.full(n + 2, np.inf), 2000.0, 3000.0, np.full(nb, 2.0)]
        p0 = np.clip(p0, lo + 1e-9, hi - 1e-9)

        def trend(p: Any) -> "Trend":
            return cls(float(p[0]), tuple(float(c) for c in p[1:n + 1] / scale), features, "hinge", float(p[n + 1]),
                       (float(p[n + 2]), ceiling, float(p[n + 3])), tuple(float(b) for b in batches),
                       tuple(float(g) for g in p[n + 4:]))

        def residuals(p: Any) -> Any:
            g = p[n + 4:]
            fitted = trend(p)._hinge(raw, batch, g[at])
            return np.r_[np.log(fitted) - np.log(y), HINGE_SMOOTHING * np.diff(g), 0.1 * HINGE_SMOOTHING * g]

        return trend(least_squares(residuals, p0, bounds=(lo, hi), max_nfev=5000).x)

    @classmethod
    def _fit_factored(cls, x: Any, y: Any) -> "Trend":
        """``intercept + weights + factor(batch) * (batch FLOPs, batch activation bytes)``: a fixed
        cost plus the batch's work, whose cost per unit each batch size scales by a factor shared
        by every network (a GPU's small batches do not fill it; smoothed across batch sizes as the
        hinge's are). Least squares of the log error, non-negative terms."""
        import numpy as np
        from scipy.optimize import least_squares

        features = FACTORED_FEATURES
        raw, scale, batch, batches, at = _per_batch(x, features)
        n, nb = raw.shape[1], len(batches)
        p0 = np.r_[y.min() / 2, np.full(n, y.mean() / (n + 1)), np.zeros(nb)]
        lo = np.r_[np.zeros(n + 1), np.full(nb, -2.0)]
        hi = np.r_[np.full(n + 1, np.inf), np.full(nb, 2.0)]
        p0 = np.clip(p0, lo + 1e-9, hi - 1e-9)

        def trend(p: Any) -> "Trend":
            return cls(float(p[0]), tuple(float(c) for c in p[1:n + 1] / scale), features, "factored",
                       batches=tuple(float(b) for b in batches), factors=tuple(float(g) for g in p[n + 1:]))

        def residuals(p: Any) -> Any:
            g = p[n + 1:]
            fitted = np.maximum(trend(p)._line(raw, batch, g[at]), HINGE_LEAST)
            return np.r_[np.log(fitted) - np.log(y), HINGE_SMOOTHING * np.diff(g), 0.1 * HINGE_SMOOTHING * g]

        return trend(least_squares(residuals, p0, bounds=(lo, hi), max_nfev=5000).x)

    def to_json(self) -> str:
        extra = {"floor": self.floor} if self.kind in ("additive", "hinge") else {}
        if self.kind == "hinge":
            extra.update(shape=list(self.shape), batches=list(self.batches), factors=list(self.factors))
        if self.kind == "factored":
            extra.update(batches=list(self.batches), factors=list(self.factors))
        return json.dumps({"kind": self.kind, "features": list(self.features), "intercept": self.intercept,
                           "coef": list(self.coef), **extra})

    @classmethod
    def from_json(cls, text: str) -> "Trend":
        data = loads_json(text)
        if not isinstance(data, dict):  # an AttributeError, which its readers did not catch, until 0.9.15
            raise ValueError("a trend is not a JSON object")
        kind = data.get("kind")
        if kind not in TREND_KINDS:
            raise ValueError(f"unknown trend kind {kind!r}")
        coef, features = tuple(float(c) for c in data["coef"]), tuple(data["features"])
        if len(coef) != len(features):
            raise ValueError(f"{len(coef)} coefficients for {len(features)} features")
        if kind == "factored":
            batches, factors = (tuple(float(v) for v in data[k]) for k in ("batches", "factors"))
            if not batches or len(batches) != len(factors):
                raise ValueError("a factored trend needs one factor per batch size")
            return cls(float(data["intercept"]), coef, features, kind, batches=batches, factors=factors)
        if kind == "hinge":
            shape, batches, factors = (tuple(float(v) for v in data[k]) for k in ("shape", "batches", "factors"))
            if len(shape) != 3 or not batches or len(batches) != len(factors):
                raise ValueError("a hinge trend needs shape [floor softness, ceiling, ceiling softness] and one "
                                 "factor per batch size")
            return cls(float(data["intercept"]), coef, features, kind, float(data["floor"]), shape, batches, factors)
        if kind == "additive":
            floor = float(data["floor"])
            if not floor > 0:
                raise ValueError(f"an additive trend's floor must be positive, got {floor}")
            return cls(float(data["intercept"]), coef, features, kind, floor)
        return cls(float(data["intercept"]), coef, features)


def network_values(booster: Any, features: list[str], trend: Any, rows: Any, saturated: bool = True) -> Any:
    """The network-level prediction (in the target's unit, not capped) for the rows of a
    DataFrame holding ``features``: exp(booster + trend); ``saturated`` False: a hinge trend's
    demand, past its ceiling (``Trend``)."""
    import numpy as np

    missing = [f for f in features if f not in rows.columns]
    if missing:
        raise FingerprintError(f"rows lack the feature column(s) {', '.join(missing[:5])}"
                               f"{' ...' if len(missing) > 5 else ''} (columns of the measurement_features view)")
    x = rows[features].to_numpy(dtype=float, na_value=np.nan)
    log_values = booster.predict(x, num_threads=PREDICT_THREADS)
    if trend is not None:
        log_values = log_values + trend(rows, saturated=saturated)
    return np.exp(log_values)


def layer_sums(layer: LayerModel, column: Any) -> Any:
    """The layer-level latency of each row whose ``layers`` entry lists its module calls (records
    of ``LAYER_INPUTS``, or that list as a JSON string); NaN for a row without one."""
    import numpy as np
    import pandas as pd

    needed = layer_inputs(layer.booster.num_feature())  # what this version's booster reads
    records: list[dict[str, Any]] = []
    parents: list[int] = []
    for i, calls in enumerate(column):
        if isinstance(calls, str):
            try:  # nested past the recursion limit: a RecursionError, not caught here, until 0.9.15
                calls = loads_json(calls)
            except ValueError:
                raise FingerprintError(f"row {i}: {LAYERS} is not JSON (expected a list of module calls)") from None
        if calls is None or (isinstance(calls, float) and calls != calls):
            continue
        if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
            raise FingerprintError(f"row {i}: {LAYERS} must be a list of module calls, each an object of "
                                   f"{', '.join(needed)}")
        records.extend(calls)
        parents.extend([i] * len(calls))
    if not records:
        return np.full(len(column), np.nan)
    frame = pd.DataFrame.from_records(records)
    missing = [c for c in needed if c not in frame.columns]
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


@dataclass
class ReadFingerprint:
    """A registered fingerprint's artifacts, read: its spec, booster, trend and layer model."""

    spec: dict[str, Any]
    booster: Any
    trend: Trend | None
    layer: LayerModel | None

    @property
    def features(self) -> list[str]:
        return list(self.spec["features"])


#: LightGBM's model texts whose trees ``TextBooster`` walks itself (``version=`` of the header).
TEXT_VERSIONS = ("v2", "v3", "v4")
#: Objectives whose raw score is the prediction (LightGBM transforms no other's output to them): a
#: model of another, such as ``regression sqrt`` or ``poisson``, is left to LightGBM.
IDENTITY_OBJECTIVES = ("regression", "regression_l1", "huber", "fair", "quantile", "mape")
#: LightGBM's ``kZeroThreshold``: a feature value this near 0 is 0 to its trees.
ZERO_THRESHOLD = 1e-35
#: Rows times trees up to which a booster walks its trees in numpy where LightGBM's library is not loaded
#: yet: a fingerprint's few configurations (500 trees, under a millisecond) or a network's module calls (168
#: calls and 600 trees, about 20 ms here; 7 ms in LightGBM) take far less than loading the library (1.5 s,
#: scikit-learn with it); past this (about 0.2 s), or once the library is loaded anyway, it predicts.
NUMPY_CELLS = 1_000_000


#: A split's arrays in a tree of LightGBM's model text, and their numbers' type.
SPLIT_ARRAYS: dict[str, type] = {"split_feature": int, "threshold": float, "decision_type": int,
                                 "left_child": int, "right_child": int}


def _numbers_of(text: str, count: int, kind: type) -> bool:
    """Whether ``text`` is ``count`` numbers of ``kind``, separated by spaces."""
    words = text.split()
    try:
        for word in words:
            kind(word)
    except ValueError:
        return False
    return len(words) == count


class TextBooster:
    """A LightGBM booster read from its model text, its trees walked in numpy without LightGBM's library
    (since 0.9.35): ``tracker predict`` in a new process took 2.2 s, 1.5 of them importing LightGBM and the
    scikit-learn it imports. The same numbers as LightGBM's own predict, to the bit: each tree's leaf by
    LightGBM's rule for a numerical split (a NaN goes the missing value's way where the split learnt
    one, else it is 0; a value within ``ZERO_THRESHOLD`` of 0 is 0), the trees' values summed in their
    order from 0. ``parse`` reads only what it can walk so (no categorical split, no linear tree, one
    tree an iteration, a raw score that is the prediction); any other model is LightGBM's to read."""

    def __init__(self, text: str, features: int, roots: Any, split: dict[str, Any], leaf_value: Any) -> None:
        self._text = text
        self._features = features
        self._roots = roots  # a tree's first node: >= 0 a split, < 0 ~ its only leaf
        self._split = split  # feature, threshold, default_left, missing (0 none, 1 zero, 2 NaN), left, right
        self._leaf_value = leaf_value
        self._native: Any = None
        self._native_lock = threading.Lock()

    @classmethod
    def parse(cls, text: str) -> "TextBooster | None":
        """The booster of a model text; None for a whole model this reader does not walk (LightGBM's own reader
        reads it), or a text that is no model at all (LightGBM's reader says so). A model text cut short or
        damaged is a ValueError saying where: LightGBM 4.7's reader ends the process on a tree cut short
        (``terminate called without an active exception``), a core dump where tracker says a line."""
        import numpy as np

        head, tree_mark, rest = text.partition("\nTree=")
        header = dict(line.split("=", 1) if "=" in line else (line, "") for line in head.splitlines()[1:])
        if not head.startswith("tree\n") or header.get("version") not in TEXT_VERSIONS:
            return None
        trees_text, end, _ = (tree_mark.lstrip("\n") + rest).partition("\nend of trees")
        blocks = [block.strip() for block in trees_text.split("\n\n") if block.strip()]
        sizes = header.get("tree_sizes", "").split()
        if not end or not blocks or (sizes and len(sizes) != len(blocks)):
            raise ValueError(f"LightGBM model text cut short: {len(blocks)} whole or partial trees"
                             f"{f' of {len(sizes)}' if sizes else ''}{'' if end else ', no end of trees'}")
        try:
            features = int(header["max_feature_idx"]) + 1
        except (KeyError, ValueError):
            raise ValueError("LightGBM model text without a readable max_feature_idx") from None
        walkable = (header.get("num_class") == "1" and header.get("num_tree_per_iteration") == "1"
                    and header.get("objective") in IDENTITY_OBJECTIVES and "average_output" not in header)

        def damaged(i: int, why: str) -> ValueError:
            return ValueError(f"LightGBM model text damaged in tree {i} of {len(blocks)} ({why})")

        trees: list[dict[str, str]] = []
        for i, block in enumerate(blocks):
            try:
                tree = dict(line.split("=", 1) for line in block.splitlines()[1:])
                if int(tree["num_leaves"]) < 1:
                    raise ValueError("no leaf")
                for key in ("leaf_value", *(SPLIT_ARRAYS if int(tree["num_leaves"]) > 1 else ())):
                    tree[key]  # noqa: B018 (there, or a KeyError naming it)
            except KeyError as exc:
                raise damaged(i, f"no {exc}") from None
            except ValueError as exc:
                raise damaged(i, str(exc)) from None
            walkable = walkable and tree.get("num_cat", "0") == "0" and tree.get("is_linear", "0") == "0"
            trees.append(tree)
        # each array of every tree read at once (a tree at a time, 3,000 conversions of 500 trees took 50 ms)
        leaves = np.array([int(tree["num_leaves"]) for tree in trees])
        split_trees = np.flatnonzero(leaves > 1)
        arrays = {"leaf_value": (range(len(trees)), leaves, float),
                  **{key: (split_trees, leaves[split_trees] - 1, kind) for key, kind in SPLIT_ARRAYS.items()}}
        read: dict[str, Any] = {}
        for key, (which, counts, kind) in arrays.items():
            try:
                read[key] = np.array(" ".join(trees[i][key] for i in which).split(), dtype=kind)
            except ValueError:
                read[key] = np.zeros(0)  # not numbers: the tree is found below
            if len(read[key]) != counts.sum():
                bad = next((i for i, n in zip(which, counts) if not _numbers_of(trees[i][key], n, kind)), which[0])
                raise damaged(int(bad), f"{key} not {counts[list(which).index(bad)]} numbers")
        # the trees' own numbering: a child >= 0 a split of its tree, < 0 ~ a leaf of it
        split_of = np.repeat(split_trees, leaves[split_trees] - 1)  # the tree of each split
        per_split = leaves[split_of]
        feature, left, right = read["split_feature"], read["left_child"], read["right_child"]
        bad = (feature < 0) | (feature >= features)
        for child in (left, right):
            bad |= (child >= per_split - 1) | (child < -per_split)
        if bad.any():
            raise damaged(int(split_of[np.argmax(bad)]), "a split's feature or child out of range")
        kind = read["decision_type"]
        if not walkable or (kind & 1).any():  # a categorical split (num_cat says so too)
            return None
        # numbered among all trees' splits and leaves: the splits' and leaves' offsets of each tree
        split_offset = np.concatenate([[0], np.cumsum(np.maximum(leaves - 1, 0))[:-1]])
        leaf_offset = np.concatenate([[0], np.cumsum(leaves)[:-1]])
        split = {
            "feature": feature,
            "threshold": read["threshold"],
            "default_left": (kind & 2) != 0,
            "missing": (kind >> 2) & 3,
            **{side: np.where(child >= 0, child + split_offset[split_of], child - leaf_offset[split_of])
               for side, child in (("left", left), ("right", right))},
        }
        roots = np.where(leaves > 1, split_offset, ~leaf_offset)
        return cls(text, features, roots, split, read["leaf_value"])

    def num_feature(self) -> int:
        return self._features

    def num_trees(self) -> int:
        return len(self._roots)

    def model_to_string(self) -> str:
        return self._text

    def save_model(self, filename: str) -> "TextBooster":
        Path(filename).write_text(self._text)
        return self

    def predict(self, data: Any, num_threads: int = 0) -> Any:
        """The raw score of each row of ``data`` (an array or DataFrame of the booster's features), as
        ``lightgbm.Booster.predict`` gives it."""
        import sys

        import numpy as np

        x = np.asarray(data, dtype=float)
        if x.ndim != 2 or x.shape[1] != self._features:
            raise ValueError(f"The number of features in data ({x.shape[-1] if x.ndim else 0}) is not the same as it "
                             f"was in training data ({self._features})")
        if "lightgbm" in sys.modules or x.shape[0] * self.num_trees() > NUMPY_CELLS:
            return self.native().predict(x, num_threads=num_threads)
        return self.predict_in_numpy(x)

    def predict_in_numpy(self, x: Any) -> Any:
        """``predict``'s numbers, its trees walked here (``x``: a float array of the booster's features)."""
        import numpy as np

        x = np.where(np.abs(x) <= ZERO_THRESHOLD, 0.0, x)
        rows, trees = x.shape[0], self.num_trees()
        node = np.tile(self._roots, rows)  # row-major: row r's trees at r * trees ...
        value = np.empty(rows * trees)
        at_leaf = node < 0
        value[at_leaf] = self._leaf_value[~node[at_leaf]]
        where = np.flatnonzero(~at_leaf)
        node = node[where]
        s = self._split
        while where.size:
            v = x[where // trees, s["feature"][node]]
            missing, nan = s["missing"][node], np.isnan(v)
            v = np.where(nan & (missing != 2), 0.0, v)
            by_default = ((missing == 1) & (np.abs(v) <= ZERO_THRESHOLD)) | ((missing == 2) & nan)
            go_left = np.where(by_default, s["default_left"][node], v <= s["threshold"][node])
            node = np.where(go_left, s["left"][node], s["right"][node])
            done = node < 0
            value[where[done]] = self._leaf_value[~node[done]]
            where, node = where[~done], node[~done]
        # summed tree by tree from 0, as LightGBM sums them (cumsum adds in order; sum would add pairwise)
        return np.cumsum(value.reshape(rows, trees), axis=1)[:, -1] if trees else np.zeros(rows)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        """Pickled as its text, as LightGBM's booster is (a served model sent to a worker process, say)."""
        return (_walked_booster, (self._text,))

    def native(self) -> Any:
        """The same model as LightGBM's own booster, read once."""
        with self._native_lock:
            if self._native is None:
                import lightgbm

                self._native = lightgbm.Booster(model_str=self._text)
            return self._native


def _walked_booster(text: str) -> TextBooster:
    """A pickled ``TextBooster`` again."""
    booster = TextBooster.parse(text)
    if booster is None:
        raise ValueError("a pickled TextBooster's text is not one it walks")
    return booster


#: Held while a booster file is read with the process's stderr set aside (``read_booster``): two threads that
#: set it aside at once would each put back what the other had set.
_STDERR_ASIDE = threading.Lock()


def read_booster(path: str) -> Any:
    """A LightGBM booster read from its file: a ``TextBooster`` where its trees can be walked in numpy (LightGBM's
    library then not loaded; a text cut short a ValueError saying where), else LightGBM's own. There, a
    damaged file is a LightGBMError, which tracker says in its own
    line (predict, train, promote), but LightGBM's native library first writes the error to the process's stderr
    itself (``[LightGBM] [Fatal] Unknown model format ...``): a second line above tracker's (until 0.9.24). What
    the library writes while it reads is held aside, dropped with the error of a read that fails and written out
    after a read that succeeds."""
    import os
    import sys
    import tempfile

    try:  # its trees walked in numpy where they can be: LightGBM's library not loaded (TextBooster)
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # not there, or not text: LightGBM's own reader says what
        text = ""
    if text and (walked := TextBooster.parse(text)) is not None:  # a model cut short: its ValueError
        return walked
    import lightgbm

    with _STDERR_ASIDE, tempfile.TemporaryFile() as held:
        sys.stderr.flush()
        try:
            saved = os.dup(2)
        except OSError:  # no stderr to set aside (a process started without one): nothing to hold
            return lightgbm.Booster(model_file=path)
        try:
            os.dup2(held.fileno(), 2)
            try:
                booster = lightgbm.Booster(model_file=path)
            finally:
                os.dup2(saved, 2)
        finally:  # a read that failed leaves what the library wrote in ``held``: its error's own words say it
            os.close(saved)
        held.seek(0)
        if said := held.read():
            os.write(2, said)
    return booster


def read_fingerprint(artifacts: dict[str, str]) -> ReadFingerprint:
    """Read a version's artifacts (their local paths by name: ``spec``, ``booster``, and
    ``layer_booster`` for a layer or blend version), as MLflow's load or tracker's own gives them."""
    # a ValueError for a damaged spec (the version's reader says so): one nested past the recursion limit was a
    # RecursionError, and one not an object an AttributeError, each a traceback until 0.9.15
    spec = loads_json(Path(artifacts[SPEC]).read_bytes())
    if not isinstance(spec, dict):
        raise ValueError("fingerprint spec is not a JSON object")
    if spec.get("format") not in KNOWN_FORMATS or spec.get("target") not in TARGETS:
        raise FingerprintError(f"fingerprint spec of format {spec.get('format')!r} for target "
                               f"{spec.get('target')!r} is not one this tracker reads; upgrade tracker")
    booster = read_booster(artifacts[BOOSTER])
    try:
        trend = None if spec["trend"] is None else Trend.from_json(json.dumps(spec["trend"]))
    except (ValueError, KeyError, TypeError) as exc:  # a kind of trend this tracker does not know, say
        raise FingerprintError(f"fingerprint spec's trend is not one this tracker reads ({exc}); "
                               "upgrade tracker or retrain") from None
    layer = None
    if spec.get("layer"):
        layer = LayerModel.from_calibration(read_booster(artifacts[LAYER_BOOSTER]), spec["layer"])
    return ReadFingerprint(spec, booster, trend, layer)


def _model_class() -> type:
    """FingerprintModel, made on first use: it subclasses mlflow's PythonModel."""
    import mlflow.pyfunc
    import pandas as pd

    class FingerprintModel(mlflow.pyfunc.PythonModel):
        """A fingerprint as MLflow serves it: rows of measurement_features in, the target in its unit out."""

        booster: Any = None
        trend: Any = None
        layer: LayerModel | None = None
        spec: dict[str, Any] = {}

        def load_context(self, context: Any) -> None:
            read = read_fingerprint(context.artifacts)
            self.spec, self.booster, self.trend, self.layer = read.spec, read.booster, read.trend, read.layer

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
            if recorded := self.spec.get("memory_floor"):  # its columns (0.7.8: true)
                values = floored(values, rows, self.spec["phase"], floor_columns(self.spec["phase"], recorded))
            return capped(self.spec["target"], values)

    FingerprintModel.__qualname__ = "FingerprintModel"
    return FingerprintModel


def __getattr__(name: str) -> Any:
    if name == "FingerprintModel":  # made once, then an ordinary attribute of this module
        cls = globals()["FingerprintModel"] = _model_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
