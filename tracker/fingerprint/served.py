"""The registered form of a fingerprint: an MLflow pyfunc model that answers in the target's unit.

A registered version is what MLflow users load and serve without tracker's CLI::

    mlflow.pyfunc.load_model("models:/latency_ms-inference-cpu@champion").predict(rows)
    mlflow models serve -m models:/latency_ms-inference-cpu@champion --env-manager local

tracker need not be installed where they do: the model (tracker.fingerprint.runtime's
FingerprintModel) comes with a copy of its runtime, and its requirements are mlflow, lightgbm,
numpy and pandas (see ``runtime``). Tracker is what makes the rows of a network never run:
``tracker predict --features`` prints them.

``rows`` are rows of the ``measurement_features`` view (the columns the version's ``features``
tag lists; others are ignored). The answer is the target in its unit (ms, MB, W, J, %): the
exponential of the booster's log-scale output, plus the log-log trend when the version has one,
held at the target's ceiling. ``tracker predict`` loads this same object
(``unwrap_python_model``), so the MLflow path and tracker's own share the same functions
(runtime's ``network_values``, ``layer_sums``, ``combined``). A version whose ``method`` is
``layer`` or ``blend`` also holds its layer-level model: a row that carries the optional column
``layers`` (the network's module calls, each a record of ``LAYER_INPUTS``, as ``tracker predict
--features`` prints them) is predicted as ``tracker predict`` predicts it; a row without it gets
the network-level part.

Format history (the version tag ``format``; pyperf-style, unknown formats are refused):

- 1 (no tag): a bare LightGBM flavour fitted on log(target); the trend in a version tag.
  MLflow served it as log(target). Still read by ``tracker predict``.
- 2: this pyfunc; the booster, its spec (``fingerprint.json``: target, features, trend, layer
  calibration) and, for a layer or blend version, the layer booster are its artifacts. Versions
  logged since the runtime moved to its own module also carry it as code (``code_paths``), so
  they load without tracker; the earlier ones load where tracker is installed. The format is the
  same: what the artifacts hold and how a row is answered did not change.
- 3: a layer-level calibration with a cost per call and per MB written besides its factor.
- 4: a layer booster that reads a module call's class (``kind``; see ``runtime.KINDS``).

Importing this module imports no MLflow (``FingerprintModel``, which does, is made when first asked for).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracker.fingerprint.runtime import (
    FORMAT,
    KNOWN_FORMATS,
    LAYER_INPUTS,
    LAYERS,
    TARGETS,
    FingerprintError,
    LayerModel,
)


def __getattr__(name: str) -> Any:
    """``FingerprintModel``, which the model code of versions logged before runtime.py imports from
    here, made on first use (it imports MLflow, which reading a version's format needs not)."""
    if name == "FingerprintModel":
        from tracker.fingerprint.runtime import FingerprintModel

        return FingerprintModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: The file MLflow runs to build the model on load (models from code: nothing pickled).
MODEL_CODE = Path(__file__).with_name("served_model.py")
#: The runtime a version carries as its code (``code_paths``), there a top-level module of this name.
RUNTIME_CODE = Path(__file__).with_name("runtime.py")
RUNTIME_MODULE = "tracker_fingerprint_runtime"


def spec_json(target: str, phase: str, device: str, features: list[str], method: str, network_model: str,
              trend: Any, layer: LayerModel | None = None, floor_columns: tuple[str, ...] = ()) -> str:
    """The spec logged beside the booster: what the model predicts and from which columns, and
    whether it raises a peak memory to its floor (``runtime.floored``): the floor's columns, or
    false (tracker 0.7.8 wrote true, and its columns were those of ``FIRST_MEMORY_FLOOR_COLUMNS``)."""
    return json.dumps({"format": FORMAT, "target": target, "unit": TARGETS[target], "phase": phase,
                       "device": device, "features": features, "method": method, "network_model": network_model,
                       "memory_floor": list(floor_columns) or False,
                       "trend": None if trend is None else json.loads(trend.to_json()),
                       "layer": None if layer is None else {**layer.calibration(), "inputs": LAYER_INPUTS}},
                      indent=2)


def signature(features: list[str], with_layers: bool = False, optional: tuple[str, ...] = ()) -> Any:
    """The model's MLflow signature: the feature columns in (and, ``with_layers``, the optional
    ``layers``; the ``optional`` columns, such as a memory floor's that are no feature, which
    MLflow would otherwise drop before the model sees them), one double out. The columns are
    typed ``any``: the view's integer columns arrive as int64, or as float64 where a query meets
    a NULL, and MLflow refuses int64 where a schema says double; the model itself reads them as
    floats."""
    from mlflow.models.signature import ModelSignature
    from mlflow.types.schema import AnyType, ColSpec, Schema

    columns = [ColSpec(AnyType(), f) for f in features]
    columns += [ColSpec(AnyType(), c, required=False) for c in optional if c not in features]
    if with_layers:
        columns.append(ColSpec(AnyType(), LAYERS, required=False))
    return ModelSignature(inputs=Schema(columns), outputs=Schema([ColSpec("double")]))


def made_by_train(tags: dict[str, str]) -> bool:
    """Whether a registered version is a fingerprint ``fingerprint train`` registered: it has the
    ``features`` tag ``tracker predict`` makes its rows by; a version registered otherwise (MLflow's
    own ``register_model``) has not."""
    return "features" in tags


#: The largest number a registered version can have: MLflow keeps it in a 64-bit integer column.
MAX_VERSION = 2**63 - 1
#: What :func:`version_number` takes, as an error says it.
VERSION_RULE = f"a whole number of at least 1, in digits 0-9, at most {MAX_VERSION}"


def version_number(text: str) -> int | None:
    """A registered version's number as given (``predict --use NAME/2``, ``fingerprint promote NAME 2``),
    or None where ``text`` is not :data:`VERSION_RULE`. Until 0.9.13 each command checked it with isdigit,
    which takes digits that int does not (``²``: a ValueError's traceback) and digits of other scripts
    (``٣``, promoted as version 3), and a number past 64 bits was a traceback of SQLite's (predict)."""
    from tracker.console import whole_number

    number = whole_number(text)
    return number if number is not None and 1 <= number <= MAX_VERSION else None


def version_format(tags: dict[str, str]) -> int | str:
    """A registered version's format from its tags (no ``format`` tag: 1), as written when it is
    not a whole number in ASCII digits (one in others, ``²``, was a traceback until 0.9.13: isdigit took it,
    int did not)."""
    from tracker.console import whole_number

    text = tags.get("format", "1")
    found = whole_number(text)
    return text if found is None else found


def model_format(tags: dict[str, str], where: str) -> int:
    """The format of a registered version from its tags; one this tracker does not read is a clear error."""
    found = version_format(tags)
    if found not in KNOWN_FORMATS:
        raise FingerprintError(f"{where} has format {str(found)!r}, which this tracker does not read "
                               f"(it reads {', '.join(map(str, KNOWN_FORMATS))}); upgrade tracker")
    return int(found)
