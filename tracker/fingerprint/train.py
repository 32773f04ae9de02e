"""Training, grouped evaluation, registration and the champion alias of fingerprints.

A fingerprint is a LightGBM regressor of one target (``latency_ms``, ``peak_mem_mb``, ...)
for one phase and device, fitted on ``log(target)`` over the columns of the
``measurement_features`` view. Evaluation never splits rows at random: whole networks are
held out (grouped K-fold by network, and again by family), and the same split scores
perf4sight's approach (ExtraTrees, 300 trees) as the baseline.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator

from tracker.console import counted, shell_word
from tracker.decode import loads_json
from tracker.describe.features import NODE_ROWS_VERSION
from tracker.errors import interrupted, sigint_handled
from tracker.fingerprint.dataset import (
    LABEL_VIEW,
    LABELLED_VIEW,
    LABELS_MACRO,
    MEMORY_TARGETS,
    TARGETS,
    FingerprintError,
    at_reference_speed,
    family,
    feature_columns,
    load_rows,
    memory_limits,
    older_said,
    speed_reference_ms,
    trained_ranges,
    unprobed_why,
    view_hash,
    view_sql,
)
from tracker.fingerprint.layers import LAYER_LABEL_VIEW, LAYER_LABELS_MACRO, LAYER_VIEW, LAYER_VIEWS
from tracker.fingerprint.runtime import LAYER_FEATURES, MEMORY_FLOOR_COLUMNS, capped, floored, memory_floor_mb
from tracker.profile.probe import PROBE_VERSION
from tracker.profile.stats import IMPRECISE_CI_REL

EXPERIMENT = "fingerprints"
CHAMPION = "champion"
FOLDS = 5
#: Tuned for small data (tens of networks): tiny leaves and bins, half the features per
#: tree. On perf4sight's TX2 protocol this lifts LightGBM from 96.9/92.7 to about 98/95
#: (memory/latency accuracy; benchmarks/tx2_accuracy.py).
LGBM_PARAMS = {"n_estimators": 500, "learning_rate": 0.05, "num_leaves": 31, "min_child_samples": 2,
               "min_data_in_bin": 1, "subsample": 0.8, "subsample_freq": 1, "colsample_bytree": 0.5,
               "reg_lambda": 1.0, "verbose": -1, "random_state": 0, "n_jobs": 1}


def registered_name(target: str, phase: str, device: str, dtype: str = "float32") -> str:
    """``latency_ms-inference-cpu``; a fingerprint of another number format than float32 ends with
    it (``latency_ms-inference-cpu-bfloat16``, since 0.8.5)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in device)
    return f"{target}-{phase}-{safe}" + (f"-{dtype}" if dtype != "float32" else "")


def scores(y: Any, yhat: Any) -> dict[str, Any]:
    """MAPE and RMSPE in percent, and the share of predictions within +-10 % (nn-Meter's)."""
    import numpy as np

    rel = (np.asarray(yhat, float) - np.asarray(y, float)) / np.asarray(y, float)
    return {"mape_pct": float(100 * np.mean(np.abs(rel))), "rmspe_pct": float(100 * math.sqrt(np.mean(rel**2))),
            "within_10pct": float(100 * np.mean(np.abs(rel) <= 0.10)), "rows": len(rel)}  # a count (20.0 until 0.9.4)


def lgbm() -> Any:
    from lightgbm import LGBMRegressor

    return LGBMRegressor(**LGBM_PARAMS)


class OneAtATime:
    """A scikit-learn model whose ``fit`` and ``predict`` take turns with every other one in this
    process. scikit-learn runs each tree's task inside ``warnings.catch_warnings()`` and
    ``resetwarnings()``, which change the process's warning filters, not the thread's: two folds
    fitting side by side could leave the filters empty for good, after which every tree's task
    warned "``sklearn.utils.parallel.delayed`` should be used with ..." (until 0.9.6; 2,100 such
    warnings in one run of the suite). LightGBM's folds still fit beside it."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def fit(self, x: Any, y: Any) -> "OneAtATime":
        with _SKLEARN_TURN:
            self.model.fit(x, y)
        return self

    def predict(self, x: Any) -> Any:
        with _SKLEARN_TURN:
            return self.model.predict(x)


#: Held by :class:`OneAtATime` while scikit-learn fits or predicts.
_SKLEARN_TURN = threading.Lock()


def extra_trees() -> OneAtATime:
    from sklearn.ensemble import ExtraTreesRegressor

    return OneAtATime(ExtraTreesRegressor(n_estimators=300, random_state=0, n_jobs=1))  # one tree at a time


def group_folds(groups: Any) -> Iterator[tuple[Any, Any]]:
    """(train, test) row indices of the grouped K-fold every held-out score uses."""
    import numpy as np
    from sklearn.model_selection import GroupKFold

    k = min(FOLDS, len(set(groups)))
    if k < 2:
        raise FingerprintError("held-out evaluation needs measurements of at least two networks")
    return GroupKFold(n_splits=k).split(np.zeros(len(groups)), groups=groups)


#: Fewest rows a fold may be fitted on (LightGBM refuses one: "Check failed: (num_data) > (0)").
MIN_FOLD_ROWS = 2


def folds_fit(groups: Any) -> bool:
    """Whether every fold of ``group_folds(groups)`` leaves at least ``MIN_FOLD_ROWS`` rows to fit
    on: not so where two groups are all there is and one of them is a single row (a network of
    one's own measured once beside one family of many)."""
    return all(len(train_idx) >= MIN_FOLD_ROWS for train_idx, _ in group_folds(groups))


def fold_workers() -> int:
    """Threads that fit held-out folds at once: one per core this process may use, at most
    ``FOLDS``. Each fit is on one thread (LightGBM's ``n_jobs=1``, ExtraTrees' too), and
    LightGBM lets go of the GIL while it fits, so the folds of a held-out evaluation fit side by
    side (ExtraTrees' folds one at a time, :class:`OneAtATime`, beside LightGBM's). Each fold's
    model is the one a loop would fit: the predictions are the same to the bit."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(FOLDS, cores))


def map_folds(fit: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
    """``fit(task)`` of each task (one fold's fit), on ``fold_workers()`` threads, in order."""
    tasks = list(tasks)
    workers = min(fold_workers(), len(tasks))
    if workers <= 1:
        return [fit(task) for task in tasks]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tracker-fold") as pool:
        return list(pool.map(fit, tasks))


def out_of_fold(x: Any, y: Any, groups: Any, make: Callable[[], Any]) -> Any:
    """Predictions of each row by a model that never saw its group (log-scale fit)."""
    return out_of_fold_each(x, y, groups, {"": make})[""]


def out_of_fold_each(x: Any, y: Any, groups: Any, makes: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """``out_of_fold`` of each model, on the same folds, every model's folds fitted side by side."""
    import numpy as np

    tasks = [(name, train_idx, test_idx) for train_idx, test_idx in group_folds(groups) for name in makes]

    def fit(task: tuple[str, Any, Any]) -> Any:
        name, train_idx, test_idx = task
        return makes[name]().fit(x.iloc[train_idx], np.log(y[train_idx])).predict(x.iloc[test_idx])

    preds = {name: np.zeros(len(y)) for name in makes}
    for (name, _, test_idx), log_pred in zip(tasks, map_folds(fit, tasks)):
        preds[name][test_idx] = np.exp(log_pred)
    return preds


def trend_lgbm() -> Any:
    from tracker.fingerprint.trend import TrendBoosted

    return TrendBoosted()


def additive_lgbm() -> Any:
    from tracker.fingerprint.trend import TrendBoosted

    return TrendBoosted("additive")


def factored_lgbm() -> Any:
    from tracker.fingerprint.trend import TrendBoosted

    return TrendBoosted("factored")


def hinge_lgbm() -> Any:
    from tracker.fingerprint.trend import TrendBoosted

    return TrendBoosted("hinge")


#: The network-level candidates, by the name a version records (tag ``network_model``): LightGBM
#: alone, on a power-law trend, on an additive trend, on a factored one (targets other than memory:
#: a fixed cost plus the batch's work scaled per batch size), on a hinge (memory targets only: a
#: floor, a line in the memory terms scaled per batch size, a ceiling at the largest peak learnt).
NETWORK_MODELS: dict[str, Callable[[], Any]] = {"lgbm": lgbm, "trend+lgbm": trend_lgbm, "additive+lgbm": additive_lgbm,
                                                "factored+lgbm": factored_lgbm, "hinge+lgbm": hinge_lgbm}
#: Candidates offered only for a memory target (rows carrying ``MEMORY_ADDITIVE_FEATURES``) on a
#: device that ran out of memory: a ceiling at the largest peak learnt is known there to be as far
#: as the readings go (a Jetson's saturate near 6,200 of 7,859 MB); elsewhere it would hold every
#: larger batch at the largest one measured.
SATURATING_MODELS = {"hinge+lgbm"}
#: Candidates not offered for a memory target (rows carrying ``MEMORY_ADDITIVE_FEATURES``): the
#: factored trend scales the batch's work by a factor per batch size, as a GPU's time per sample
#: falls with the batch; a memory target's hinge already scales its per-sample terms so. (On
#: perf4sight's TX2 data the factored trend, offered for memory, was chosen over the hinge in
#: perf4sight's protocol and scored 97.9 against the hinge's 98.5.)
TIME_MODELS = {"factored+lgbm"}


def network_candidates(columns: Any, saturates: bool = False) -> dict[str, Callable[[], Any]]:
    """The candidates ``select_network_model`` compares for rows with these columns; ``saturates``:
    a memory target whose device ran out of memory (``memory_limits``' OOM runs)."""
    from tracker.fingerprint.runtime import MEMORY_ADDITIVE_FEATURES

    memory_rows = set(MEMORY_ADDITIVE_FEATURES) <= set(columns)
    saturating = saturates and memory_rows
    return {k: v for k, v in NETWORK_MODELS.items()
            if (saturating or k not in SATURATING_MODELS) and not (memory_rows and k in TIME_MODELS)}


#: Fewest families from which candidates are compared on whole families held out (a trend
#: must carry over to a family it never saw); with fewer, on networks held out.
SELECT_BY_FAMILY_MIN = 3


#: How much lower (relative) a trend candidate's held-out MAPE must be than LightGBM alone's for
#: the trend to be kept. With five or six families each held out once, one family moves the
#: mean by more than a few per cent; a trend that wins by less has not shown it carries over.
#: (On perf4sight's TX2 data an additive trend that won by 2 % on five families lost on the
#: sixth, squeezenet's latency, by 9.5 % against 17 %.)
SELECTION_MARGIN = 0.05


def select_network_model(x: Any, y: Any, networks: Any, families: Any,
                         saturates: bool = False) -> tuple[str, dict[str, float], str, Any]:
    """The network-level candidate with the lowest held-out MAPE, where a trend candidate must
    beat LightGBM alone by ``SELECTION_MARGIN`` (else LightGBM alone, also on a tie), every
    candidate's MAPE, the split they were compared on (``family`` or ``network``), and the
    chosen candidate's predictions held out on that split."""
    split, groups = ("family", families) if len(set(families)) >= SELECT_BY_FAMILY_MIN else ("network", networks)
    preds = out_of_fold_each(x, y, groups, network_candidates(x.columns, saturates))
    mape = {name: scores(y, p)["mape_pct"] for name, p in preds.items()}
    best = chosen_candidate(mape)
    return best, mape, split, preds[best]


def chosen_candidate(mape: dict[str, float]) -> str:
    """The candidate kept, given each one's held-out MAPE: the lowest, if it is LightGBM alone or
    beats it by ``SELECTION_MARGIN``; else LightGBM alone."""
    best = min(mape, key=lambda name: (mape[name], name != "lgbm"))
    return best if mape[best] <= (1 - SELECTION_MARGIN) * mape["lgbm"] else "lgbm"


METHODS = ("network", "layer", "blend")


def _layer_level(warehouse: Path, frame: Any, target: str, phase: str, device: str, y: Any, pred: Any,
                 networks: Any, families: Any) -> tuple[str, Any, dict[str, float], Any]:
    """nn-Meter's layer-sum against the network-level model on the same held-out networks (and,
    reported beside, the layer level held out by family, as ``family_split_mape_pct`` is for the
    network level).

    Returns the method kept (``network``, ``layer`` or ``blend``: the geometric mean of the
    two), the held-out predictions of that method (network-level where a network has no
    layer runs), the comparison and the layer model fitted on every network (or None).
    """
    import numpy as np

    from tracker.fingerprint import layers

    if target != "latency_ms":
        return "network", pred, {}, None
    # the layers of the experiments the network labels were taken over (every one's until 0.9.10)
    layer_rows = layers.training_layer_rows(warehouse, frame, phase, device)
    # where the network labels were put at the reference speed and the layers could not be: why (since 0.9.12)
    frame.attrs["layers_as_measured_why"] = None if layer_rows.empty else layer_rows.attrs.get("as_measured_why")
    if layer_rows.empty:
        return "network", pred, {}, None
    layer_pred = layers.out_of_fold(layer_rows, frame, networks)
    has = ~np.isnan(layer_pred)
    if not has.any():
        return "network", pred, {}, None
    candidates = {"network": pred[has], "layer": layer_pred[has], "blend": np.sqrt(pred[has] * layer_pred[has])}
    scored_by = {m: scores(y[has], p) for m, p in candidates.items()}
    mape = {m: s["mape_pct"] for m, s in scored_by.items()}
    method = min(METHODS, key=lambda m: mape[m])
    comparison = {"layer_networks": float(len(set(networks[has]))), "network_level_mape_on_layer_networks_pct":
                  mape["network"], "layer_level_mape_pct": mape["layer"], "blend_mape_pct": mape["blend"],
                  "layer_level_within_10pct": scored_by["layer"]["within_10pct"]}
    if len(set(families[has])) >= 2:
        by_family = layers.out_of_fold(layer_rows, frame, families)
        scored = has & ~np.isnan(by_family)
        if scored.any():
            family_scores = scores(y[scored], by_family[scored])
            comparison["layer_level_family_split_mape_pct"] = family_scores["mape_pct"]
            comparison["layer_level_family_split_within_10pct"] = family_scores["within_10pct"]
    if method == "network":
        return method, pred, comparison, None
    kept = pred.copy()
    kept[has] = candidates[method]
    # calibrated on the whole networks measured with the layers (since 0.9.11: on the network labels, the
    # median over every measurement of a configuration, those without layers too)
    model = layers.fit(layer_rows)
    return method, kept, comparison, model


@dataclass
class TrainResult:
    name: str
    version: str
    run_id: str
    evaluation: dict[str, float]
    baseline: dict[str, float]
    by_family: dict[str, dict[str, float]]
    champion: bool
    champion_reason: str
    features: list[str] = field(default_factory=list)
    method: str = "network"
    memory_floor: str | None = None  # a memory version's tag memory_floor; None for other targets
    #: latency measurements left out, their CI wider than IMPRECISE_CI_REL (said only where too few were
    #: left until 0.9.2)
    left_out_imprecise: int = 0
    #: the measurements there were before (its rows, and those left out)
    measured_rows: int = 0
    #: the speed probe's time its latency labels were put at (``dataset.at_reference_speed``); None: as measured
    speed_reference_ms: float | None = None
    #: why its latency labels stay as measured though --as-measured was not given (``dataset.unprobed_why``:
    #: measurements without a probe, or with another version's; since 0.9.11); None otherwise
    as_measured_why: str | None = None
    #: why its layer labels stay as measured where its network labels were put at the reference speed
    #: (``layers.load_layer_rows``: layers without a probe, or with another version's; since 0.9.12, said
    #: nowhere before); None otherwise
    layers_as_measured_why: str | None = None
    #: network_mem_mb configurations left out, measured only by trackers whose figure counted more than the
    #: network (``dataset.older_said``; since 0.9.27)
    left_out_older: int = 0

    def to_dict(self) -> dict[str, Any]:
        """As ``train --format json`` prints it: ``memory_floor`` a boolean and ``memory_floor_not_why``
        beside it, as ``fingerprint list`` gives them (the tag's text, ``"true"``, until 0.9.8)."""
        out = dict(self.__dict__)
        out["memory_floor"] = floor_kept(self.memory_floor)
        out["memory_floor_not_why"] = floor_not_why(self.memory_floor)
        return out


#: Fewest networks a fingerprint learns from: every held-out fold then trains on at least two
#: networks (LightGBM cannot fit a single row, and one network teaches no trend across networks).
MIN_NETWORKS = 3


def training_rows(warehouse: Path, target: str, phase: str, device: str, exclude: Collection[str] = (),
                  mode: str | None = None, dtype: str = "float32", experiments: Collection[str] = (),
                  as_measured: bool = False) -> Any:
    """The rows a fingerprint learns from: the view's rows less the networks in ``exclude`` (names;
    one that has no row, a misspelling say, is an error rather than silently kept nowhere) and,
    for latency, less measurements too imprecise to learn from (``stats.IMPRECISE_CI_REL``);
    ``experiments``: only what was measured in them, each one named having some (since 0.9.0; every
    experiment otherwise): the rows of configurations measured in them, labelled by those
    measurements alone (``load_rows``), and so are their layers' (attrs ``experiments``, which the layer
    level reads: ``layers.load_layer_rows``, since 0.9.10). A latency's labels are put at the machine's
    reference speed where every measurement timed the speed probe beside it (``dataset.at_reference_speed``;
    attrs ``speed_reference_ms``), unless ``as_measured`` (since 0.9.9); where they cannot be, attrs
    ``as_measured_why`` says why (since 0.9.11: without a probe, or with another version's)."""
    if experiments:
        frame = load_rows(warehouse, target, phase, device, mode, dtype, experiments, empty_ok=True)
        found = {e for names in frame["label_experiments"] for e in names}
        missing = sorted(set(experiments) - found)
        if missing:
            present = sorted(load_rows(warehouse, target, phase, device, mode, dtype, empty_ok=True)["experiment"].dropna().unique())
            if not present:  # none in any experiment: why, as without --from-experiment ("those that have
                # some: none", hiding a number format or a target never measured, until 0.9.4)
                load_rows(warehouse, target, phase, device, mode, dtype)
            raise FingerprintError(f"no {phase} measurement of {target} on {device!r} in experiment "
                                   f"{', '.join(map(repr, missing))}; those that have some: {', '.join(present) or 'none'}")
    else:
        frame = load_rows(warehouse, target, phase, device, mode, dtype)
    unknown = sorted(set(exclude) - set(frame["model"]))
    if unknown:
        raise FingerprintError(f"cannot leave out {', '.join(unknown)}: no {phase} measurement of {target} on "
                               f"{device!r} names {'it' if len(unknown) == 1 else 'them'} (see tracker sql 'SELECT DISTINCT model FROM measurement_features')")
    older = int(frame.attrs.get("left_out_older", 0))  # network_mem_mb only older trackers measured (0.9.27)
    imprecise = ""
    left_out = (0, len(frame))
    if target == "latency_ms":
        precise = frame["latency_ci_rel"].isna() | (frame["latency_ci_rel"] <= IMPRECISE_CI_REL)
        if dropped := int((~precise).sum()):
            imprecise = (f"; {dropped} of its {counted(len(frame), 'measurement')} left out, their 95 % CI wider than "
                         f"{100 * IMPRECISE_CI_REL:g} % of their latency (measure with a smaller --precision or a longer "
                         "--time-cap)")
        frame = frame[precise].reset_index(drop=True)
        left_out = (dropped, len(precise))
    if exclude:
        frame = frame[~frame["model"].isin(set(exclude))].reset_index(drop=True)
        if frame.empty:
            raise FingerprintError(f"no {phase} measurements of {target} on {device!r} left once "
                                   f"{', '.join(sorted(exclude))} are left out")
    names = sorted(set(frame["model"]))
    # Distinct by name and by description both: the folds hold out descriptions (model_hash), and
    # two names of one architecture share one; one name at two input sizes has two.
    distinct = min(len(names), frame["model_hash"].nunique())
    if distinct < MIN_NETWORKS:
        raise FingerprintError(f"a fingerprint needs {phase} measurements of {target} on {device!r} from at least "
                               f"{MIN_NETWORKS} networks, to hold whole networks out; the warehouse has "
                               f"{distinct} usable ({', '.join(names) or 'none'}){imprecise}"
                               # the networks left out by hand said too (unsaid until 0.9.4)
                               + (f"; --exclude left out {', '.join(sorted(exclude))}" if exclude else "")
                               + (f"; {older_said(older)}" if older else "")
                               + ": measure more (tracker campaign run) and load them (tracker warehouse load)")
    why = None
    if target == "latency_ms" and not as_measured:
        if (reference := speed_reference_ms(frame)) is not None:
            frame = at_reference_speed(frame, reference)
        else:
            why = unprobed_why(frame)
    frame.attrs["as_measured_why"] = why
    frame.attrs["left_out_imprecise"], frame.attrs["measured_rows"] = left_out
    frame.attrs["left_out_older"] = older
    frame.attrs["experiments"] = tuple(sorted(set(experiments)))
    return frame


#: Characters at most of a tag that lists names (a version's excluded networks, its experiments).
NAMES_TAG_CHARS = 500


def names_tag(names: Collection[str]) -> str:
    """``names`` for a tag: each once, sorted, comma separated; where they run past
    ``NAMES_TAG_CHARS``, the first of them and how many more (until 0.9.2 repeated, and cut mid-name)."""
    unique = sorted(set(names))
    text = ",".join(unique)
    if len(text) <= NAMES_TAG_CHARS:
        return text
    kept: list[str] = []
    for name in unique:
        if len(",".join([*kept, name])) + len(f",... ({len(unique)} in all)") > NAMES_TAG_CHARS:
            break
        kept.append(name)
    return ",".join(kept) + f",... ({len(unique)} in all)"


def learnt_runs(frame: Any) -> list[str]:
    """The runs a fingerprint learns from: each row's configuration (its latest run) or, learning from
    named experiments, the runs of theirs its label is the median of (``label_run_ids``, since 0.9.1)."""
    if "label_run_ids" in frame.columns:
        return sorted({rid for ids in frame["label_run_ids"] for rid in ids})
    return sorted(frame["run_id"])


def runs_digest(frame: Any) -> str:
    """A digest of the runs a fingerprint learns from: equal digests, equal training data."""
    return hashlib.sha256("\n".join(learnt_runs(frame)).encode()).hexdigest()[:16]


#: What MLflow's registration prints straight to stderr (not through logging) on every
#: version; the command's own summary line says it once.
_REGISTRY_CHATTER = ("Successfully registered model ", "Registered model ", "Created version ")


@contextlib.contextmanager
def _registry_chatter_dropped() -> Iterator[None]:
    """Run a registration with MLflow's progress lines dropped; anything else it writes to
    stderr (warnings, errors) is passed on."""
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stderr(buffer):
            yield
    finally:
        kept = [line for line in buffer.getvalue().splitlines(keepends=True) if not line.startswith(_REGISTRY_CHATTER)]
        sys.stderr.write("".join(kept))


def champion_version(client: Any, name: str) -> Any:
    """The registered version with the ``champion`` alias (``client``: an MlflowClient), or None."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException as exc:
        from tracker.log.rest_store import mlflow_http_line

        if mlflow_http_line(None, exc) is not None:
            raise  # a server's refusal, not "no champion": said once (every target waited out, until 0.9.4)
        return None


@dataclass
class Promotion:
    """The ``champion`` alias moved by hand: ``previous`` held it before (None: no version did)."""

    name: str
    version: str
    previous: str | None

    @property
    def moved(self) -> bool:
        return self.previous != self.version

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "previous": self.previous, "moved": self.moved}


def promote(tracking_uri: str, name: str, version: str) -> Promotion:
    """Move the ``champion`` alias of the fingerprint ``name`` to ``version`` by hand (what a
    user would otherwise do in the MLflow UI), whatever the evaluation said. Only a version
    that tracker registered (it has the ``features`` tag ``tracker predict`` needs) can be
    champion. The version records it in its tag ``promoted``."""
    from datetime import datetime, timezone

    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from tracker.fingerprint.served import VERSION_RULE, made_by_train, model_format, version_number
    from tracker.log.search import every_model_version, every_registered_model

    if (number := version_number(version)) is None:
        raise FingerprintError(f"version {version!r:.80}: expected {VERSION_RULE} (see tracker fingerprint list)")
    version = str(number)
    client = MlflowClient(tracking_uri)
    names = sorted(m.name for m in every_registered_model(client))
    if name not in names:
        raise FingerprintError(f"no fingerprint named {name!r}; registered: {', '.join(names) or 'none'}")
    found = every_model_version(client).get(name, [])  # a name with a quote in it: no filter to parse
    if int(version) not in {int(v.version) for v in found}:
        # the versions it could promote (one registered otherwise was listed too until 0.9.4)
        ours = sorted(int(v.version) for v in found if made_by_train(v.tags))
        raise FingerprintError(f"{name} has no version {version}; versions: {', '.join(map(str, ours)) or 'none'}")
    chosen = client.get_model_version(name, version)
    if not made_by_train(chosen.tags):
        raise FingerprintError(f"{name} version {version} was not registered by tracker fingerprint train "
                               "(no features tag): tracker predict could not load it")
    model_format(chosen.tags, f"{name} version {version}")  # one this tracker cannot load: refused
    from tracker.fingerprint.predict import load_champion, read_tags
    from tracker.fingerprint.runtime import UnloadableModelError, UnreadableTagError

    try:
        read_tags(name, chosen)  # one predict would refuse (promoted without a word until 0.9.23)
    except UnreadableTagError as exc:
        raise FingerprintError(f"{name} version {version} has an unreadable {exc.tag} tag {exc.value!r:.40}: tracker "
                               "predict would refuse it as champion; promote another version") from None
    try:
        load_champion(tracking_uri, name, chosen)  # a model predict cannot load (promoted without a word until 0.9.24)
    except UnloadableModelError as exc:
        raise FingerprintError(f"{name} version {version}: {exc.why}: tracker predict would refuse it as champion; "
                               "promote another version (or, where the store was moved, tracker store relocate "
                               "first)") from None
    current = champion_version(client, name)
    previous = None if current is None else str(current.version)
    if previous == version:
        return Promotion(name, version, previous)
    try:
        client.set_registered_model_alias(name, CHAMPION, version)
    except MlflowException as exc:
        raise FingerprintError(f"cannot move {CHAMPION} of {name} to version {version}: {exc.message}") from exc
    when = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    client.set_model_version_tag(name, version, "promoted",
                                 f"by hand at {when}, after version {previous}" if previous else f"by hand at {when}")
    return Promotion(name, version, previous)


@dataclass
class HeldOut:
    """What a fingerprint scores on networks it has not seen, before anything is fitted on all of
    them (``evaluate``): the method and network-level candidate kept, their held-out predictions
    and scores, ExtraTrees on the same split, and the layer model (fitted on every network) where
    the layer level or the blend is kept."""

    features: list[str]
    x: Any
    y: Any
    networks: Any
    families: Any
    pred: Any
    method: str
    network_model: str
    selection_split: str
    evaluation: dict[str, float]
    baseline: dict[str, float]
    by_family: dict[str, dict[str, float]]
    layer_model: Any = None
    memory_floor: bool = False  # its predictions are raised to their floor (memory_floor_holds)
    below_floor_runs: int = 0  # training rows measured below their floor (none, where it keeps one)


def memory_floor_holds(frame: Any, target: str, phase: str) -> tuple[bool, int]:
    """Whether a version of ``target`` keeps a peak-memory floor (``runtime.memory_floor_mb``),
    and how many of the training rows ``frame`` were measured below theirs. Only a memory target,
    and only where no row was: a description that says a network keeps more than a device held
    (one that freezes layers or recomputes activations in training, say) keeps no floor."""
    import numpy as np

    # a description's bytes are float32's: another number format's tensors are smaller (no floor, 0.8.5)
    float32 = "precision" not in frame.columns or bool((frame["precision"].fillna("float32") == "float32").all())
    floor = memory_floor_mb(frame, phase) if target in MEMORY_TARGETS and float32 else None
    if floor is None or np.isnan(floor).all():
        return False, 0
    below = int(np.sum(floor > frame[target].to_numpy(float)))  # a NaN floor is below nothing
    return below == 0, below


def floor_tag(kept: bool, below: int, dtype: str = "float32") -> str:
    """A memory version's tag ``memory_floor``: ``true`` (``tracker predict`` reads that alone), or
    why it keeps none."""
    if dtype != "float32":
        return f"false (its runs are {dtype}: a description counts float32 bytes)"
    return "true" if kept else f"false ({counted(below, 'run')} measured below it)"


def floor_kept(tag: str | None) -> bool | None:
    """Whether a memory version keeps the floor of its network's own tensors (tag ``memory_floor``:
    ``true``, or ``false (why)``); None where it does not say (a latency version, an older one)."""
    return None if tag is None else tag == "true"


def floor_not_why(tag: str | None) -> str | None:
    """Why a memory version keeps no floor, where its tag says (``false (its runs are bfloat16: ...)``)."""
    if tag is None or not tag.startswith("false ("):
        return None
    return tag.removeprefix("false (").removesuffix(")")


def evaluate(warehouse: Path, frame: Any, target: str, phase: str, device: str) -> HeldOut:
    """Hold whole networks out of the rows of ``frame`` (``training_rows``): choose the network-level
    candidate, compare it with the layer level and the blend on the same networks, and score the
    kept method, per family, and ExtraTrees beside it. Writes nothing (``train`` registers what this
    chose; ``benchmarks/cpu_accuracy.py`` prints it)."""
    features = feature_columns(list(frame.columns), target)
    x = frame[features].astype(float)
    y = frame[target].to_numpy(float)
    networks = frame["model_hash"].to_numpy()
    families = frame["model"].map(family).to_numpy()

    # a memory target whose device ran out of memory: its readings saturate (the hinge is offered)
    saturates = target in MEMORY_TARGETS and memory_limits(warehouse, list(frame["run_id"]), phase, device)[1] > 0
    network_model, candidates, selection_split, selected_pred = select_network_model(x, y, networks, families,
                                                                                     saturates)
    make = NETWORK_MODELS[network_model]
    # Held out by network; when the candidates were compared on that split, those predictions.
    pred = selected_pred if selection_split == "network" else out_of_fold(x, y, networks, make)
    method, pred, layer_eval, layer_model = _layer_level(warehouse, frame, target, phase, device, y, pred, networks,
                                                         families)
    memory_floor, below_floor = memory_floor_holds(frame, target, phase)
    if memory_floor:  # as tracker predict raises a peak memory to its floor
        pred = floored(pred, frame, phase)
    pred = capped(target, pred)  # as tracker predict caps it
    evaluation = {**scores(y, pred), **layer_eval,
                  **{f"selection_{name.replace('+', '_')}_mape_pct": v for name, v in candidates.items()}}
    if "measured_latency_ms" in frame.columns:  # labels put at the reference speed: against them as measured too
        as_measured = scores(frame["measured_latency_ms"].to_numpy(float), pred)
        evaluation["as_measured_mape_pct"] = as_measured["mape_pct"]
        evaluation["as_measured_within_10pct"] = as_measured["within_10pct"]
    baseline = scores(y, out_of_fold(x, y, networks, extra_trees))
    by_family = {f: scores(y[families == f], pred[families == f]) for f in sorted(set(families))}
    if selection_split == "family":
        evaluation["family_split_mape_pct"] = candidates[network_model]
    elif len(set(families)) >= 2 and folds_fit(families):  # else none: one family of one row cannot teach the other
        evaluation["family_split_mape_pct"] = scores(y, out_of_fold(x, y, families, make))["mape_pct"]
    return HeldOut(features, x, y, networks, families, pred, method, network_model, selection_split, evaluation,
                   baseline, by_family, layer_model, memory_floor, below_floor)


def train(warehouse: Path, target: str, phase: str, device: str, tracking_uri: str,
          exclude: Collection[str] = (), mode: str | None = None, dtype: str = "float32",
          plots: bool = True, experiments: Collection[str] = (), as_measured: bool = False) -> TrainResult:
    """Train, evaluate on held-out networks, register and maybe promote; networks named in
    ``exclude`` are left out entirely (to be predicted later as never seen). ``mode``: learn
    only that device mode's measurements, registered under ``device`` all the same (the demo's
    own, in a store where other modes were measured too). ``plots``: draw the held-out
    evaluation's pictures among the run's artifacts (``fingerprint train --no-plots`` leaves them
    out: about a second a version on a small machine, for a script that retrains often). ``as_measured``:
    a latency's labels as measured, not put at the machine's reference speed (``training_rows``)."""
    import mlflow
    import numpy as np
    from mlflow.tracking import MlflowClient

    from tracker.fingerprint.served import FORMAT, spec_json
    from tracker.log.relocate import require_here
    from tracker.log.store import open_store
    from tracker.settings import resolve_location

    # The rows first: a train that has nothing to learn from creates nothing in the store.
    frame = training_rows(warehouse, target, phase, device, exclude, mode, dtype, experiments, as_measured)
    left_out = (int(frame.attrs["left_out_imprecise"]), int(frame.attrs["measured_rows"]))
    # Through tracker's store, so an embedded store keeps the artifacts in its own folder; a
    # store moved from elsewhere is refused before anything is trained.
    location = resolve_location(tracking_uri)
    store = open_store(location)
    try:
        experiment = store.experiment(EXPERIMENT, create=True)
    finally:
        store.close()
    require_here(location, experiment.artifact_location)
    held = evaluate(warehouse, frame, target, phase, device)
    reference_ms = frame.attrs.get("speed_reference_ms")
    # what it was told to learn from, kept in the run's params and the version's tags
    told = {**({"excluded_networks": names_tag(exclude)} if exclude else {}),
            **({"experiments": names_tag(experiments)} if experiments else {})}
    features, x, y, networks, families, pred = held.features, held.x, held.y, held.networks, held.families, held.pred
    method, network_model, selection_split = held.method, held.network_model, held.selection_split
    evaluation, baseline, by_family, layer_model = held.evaluation, held.baseline, held.by_family, held.layer_model
    memory_floor = held.memory_floor
    floor_columns = MEMORY_FLOOR_COLUMNS[phase] if memory_floor else ()  # its spec, signature and tag say them
    floor_text = floor_tag(memory_floor, held.below_floor_runs, dtype) if target in MEMORY_TARGETS else None  # tag memory_floor
    make = NETWORK_MODELS[network_model]
    final = make().fit(x, np.log(y))
    trend = getattr(final, "trend", None)

    name = registered_name(target, phase, device, dtype)
    run_digest = runs_digest(frame)
    # Where the device has run out of memory, the largest peak that ran is as far as it is known to go.
    memory_mb, oom_runs = (memory_limits(warehouse, list(frame["run_id"]), phase, device, dtype) if target in MEMORY_TARGETS
                           else (None, 0))
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment_id=experiment.experiment_id)
    client = MlflowClient(tracking_uri)
    run_id: str | None = None  # the fingerprint run's, once it exists
    # MLflow writes a tracking server's run links to stdout, where `--format json` prints the result.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            with mlflow.start_run(run_name=f"{name} · {len(set(networks))} networks") as run:
                run_id = run.info.run_id
                mlflow.set_tags({"tracker.kind": "fingerprint", "fingerprint.target": target, "fingerprint.phase": phase,
                                 "fingerprint.device": device, "fingerprint.view": "measurement_features",
                                 "fingerprint.view_sha256": view_hash(), "fingerprint.runs_digest": run_digest})
                mlflow.log_params({"target": target, "unit": TARGETS[target], "phase": phase, "device": device,
                                   "rows": len(frame), "max_ci_rel": IMPRECISE_CI_REL, "networks": len(set(networks)), "features_count": len(features),
                                   "target_scale": "log", "method": method, "network_model": network_model,
                                   "labels": "at_reference_speed" if reference_ms is not None else "as_measured",
                                   "network_model_selection_split": selection_split,
                                   "split": f"GroupKFold({min(FOLDS, len(set(networks)))}) by network",
                                   **told,
                                   **{f"lgbm_{k}": v for k, v in LGBM_PARAMS.items()}})
                with tempfile.TemporaryDirectory() as tmp:
                    folder = Path(tmp)
                    (folder / "measurement_features.sql").write_text(view_sql())
                    (folder / "measurement_labels.sql").write_text(view_sql(LABEL_VIEW))
                    (folder / "labelled_measurements.sql").write_text(view_sql(LABELLED_VIEW))
                    (folder / f"{LABELS_MACRO}.sql").write_text(view_sql(LABELS_MACRO))
                    (folder / "features.json").write_text(json.dumps({"features": features, "target": target,
                                                                      "unit": TARGETS[target]}, indent=2))
                    (folder / "networks.json").write_text(json.dumps(sorted(set(networks))))
                    (folder / "runs.json").write_text(json.dumps(learnt_runs(frame)))
                    (folder / "by_family.json").write_text(json.dumps(by_family, indent=2))
                    held = frame[["model", "model_hash", "batch_size"]].assign(measured=y, predicted=pred)
                    if reference_ms is not None:  # measured: put at the reference speed; as the machine ran it, beside
                        held["measured_as_run"] = frame["measured_latency_ms"].to_numpy(float)
                    held.to_csv(folder / "heldout_predictions.csv", index=False)
                    if plots:
                        _plots(folder, name, TARGETS[target], y, pred, families, features, final)
                    if layer_model is not None:
                        (folder / "layer_model").mkdir()
                        layer_model.booster.save_model(str(folder / "layer_model" / "booster.txt"))
                        (folder / "layer_model" / "calibration.json").write_text(json.dumps(
                            {"method": method, **layer_model.calibration(), "features": LAYER_FEATURES,
                             "view": LAYER_VIEW,  # the labels of the experiments named (its tag), or every one's
                             "labels": LAYER_LABELS_MACRO if experiments else LAYER_LABEL_VIEW}, indent=2))
                        for view in LAYER_VIEWS:
                            (folder / "layer_model" / f"{view}.sql").write_text(view_sql(view))
                    mlflow.log_artifacts(str(folder), "evaluation")
                version_tags = {"heldout_mape_pct": evaluation["mape_pct"], "heldout_within_10pct": evaluation["within_10pct"],
                                "baseline_extratrees_mape_pct": baseline["mape_pct"], "view_sha256": view_hash(),
                                "runs_digest": run_digest, "features": ",".join(features), "unit": TARGETS[target],
                                "networks": str(len(set(networks))), "method": method, "network_model": network_model,
                                "format": str(FORMAT), "node_rows_version": str(NODE_ROWS_VERSION),
                                "dtype": dtype,  # the number format of its runs (0.8.5; float32 before)
                                # what its runs were measured on, for the command that measures more (0.8.9)
                                "devices": ",".join(sorted(set(frame["device"].dropna().astype(str)))),
                                **({"mode": str(frame["mode"].dropna().iloc[0])} if frame["mode"].notna().any() else {}),
                                "trained_ranges": json.dumps(trained_ranges(frame, features)),
                                **({"trend": trend.to_json()} if trend is not None else {}),
                                # to the last bit (6 digits until 0.9.10: a champion compared with a version trained again on the same
                                # runs was put at a speed a millionth off its own, and lost to its twin on that alone)
                                # and the version of the probe its runs timed (PROBE_VERSION, whatever they timed, until 0.9.11)
                                **({"speed_reference_ms": repr(float(reference_ms)),
                                    "speed_probe_version": str(frame.attrs.get("speed_probe_version", PROBE_VERSION))}
                                   if reference_ms is not None else {}),
                                **({"device_memory_mb": f"{memory_mb:.0f}"} if memory_mb is not None else {}),
                                **({"memory_floor": floor_text} if floor_text is not None else {}),
                                **({"memory_floor_columns": ",".join(floor_columns)} if floor_columns else {}),
                                **({"largest_peak_mb": f"{float(np.max(y)):.1f}", "oom_runs": str(oom_runs)}
                                   if oom_runs else {}),
                                **({"layer_view_sha256": view_hash(*LAYER_VIEWS)}
                                   if layer_model is not None else {}),
                                **told}  # what it was told to learn from (0.9.0; the run's params before)
                # The version's tags are written with it (one request, and no version without them).
                info = _log_served_model(name, final.booster_, spec_json(target, phase, device, features, method,
                                                                           network_model, trend, layer_model,
                                                                           floor_columns),
                                         x.iloc[:1], layer_model, floor_columns,
                                         {key: f"{value:.4f}" if isinstance(value, float) else str(value)
                                          for key, value in version_tags.items()})
                # Logged after the model, so they are its metrics as they are written: logged before,
                # MLflow's log_model reads each metric's history back to link it (a request a metric).
                mlflow.log_metrics({**{f"heldout_{k}": v for k, v in evaluation.items()},
                                    **{f"baseline_extratrees_{k}": v for k, v in baseline.items()}})
            version = str(info.registered_model_version)
            client.update_registered_model(name, description=(
                f"Predicts {target} ({TARGETS[target]}) of a network in the {phase} phase on device {device!r} from its "
                "description, without running it: LightGBM on log(target) over the measurement_features view. "
                "Use `tracker predict MODEL --phase ... --device ...`; the alias `champion` marks the version it loads. "
                f"A version tagged `format` 2 or {FORMAT} is an MLflow pyfunc: `mlflow.pyfunc.load_model(\"models:/{name}@champion\")` "
                "or `mlflow models serve` take rows of measurement_features (the columns of its `features` tag) and "
                f"answer {target} in {TARGETS[target]}, trend and ceiling included; a `layer` or `blend` version uses "
                "its layer-level model for rows that carry their module calls (column `layers`, from `tracker predict "
                "--features`). A version without the tag (format 1, older trackers) is a bare LightGBM "
                "model of log(target), the trend of a `trend`-tagged version not included."))
            client.update_model_version(name, version, description=(
                f"{method} model ({network_model} at network level) from {len(frame)} measurements of {len(set(networks))} "
                "networks; held out by network: "
                f"MAPE {evaluation['mape_pct']:.1f} %, {evaluation['within_10pct']:.0f} % within ±10 % "
                f"(ExtraTrees baseline {baseline['mape_pct']:.1f} %)."
                + (f" Left out of training entirely: {', '.join(sorted(exclude))}." if exclude else "")
                + (f" Through MLflow (pyfunc, serving) a row answers with the {method} prediction when it carries the "
                   "network's module calls (column `layers`, as `tracker predict --features` prints them), else with the "
                   "network-level model alone." if method != "network" else "")))
            champion, reason = _maybe_promote(client, tracking_uri, name, version, frame, y, pred, (warehouse, phase, device))
        except BaseException as exc:  # a Ctrl-C or a store error part-way: no version is left half made
            if run_id is not None:
                kept = _withdraw(client, name, run_id, interrupted(exc))
                if interrupted(exc):  # what the command says of it (``stopped_train``)
                    with contextlib.suppress(AttributeError, TypeError):
                        exc.fingerprint_run = (name, run_id, kept)  # type: ignore[attr-defined]
            raise
    return TrainResult(name, version, run.info.run_id, evaluation, baseline, by_family, champion, reason, features,
                       method, floor_text, *left_out, reference_ms, frame.attrs.get("as_measured_why"),
                       frame.attrs.get("layers_as_measured_why"), int(frame.attrs.get("left_out_older", 0)))


def stopped_train(exc: BaseException) -> str:
    """What a ``fingerprint train`` stopped by Ctrl-C (``exc``) left: nothing registered, its run (where it
    had one) KILLED; a version already champion kept; or, where the store did not answer the withdrawal, a
    version perhaps left. Main's "what was logged before is kept" until 0.9.11, where nothing was."""
    name, run_id, kept = getattr(exc, "fingerprint_run", (None, None, []))
    if run_id is None:  # stopped before its run was made (reading the warehouse, training, evaluating)
        return "nothing is registered, and no fingerprint run is logged"
    run = f"its run {run_id[:12]} (experiment {EXPERIMENT}) is logged KILLED"
    if kept is None:
        return (f"its run {run_id[:12]} (experiment {EXPERIMENT}) could not be withdrawn whole, the store did not "
                f"answer: a version of {name} it registered may be left, never compared (tracker fingerprint list)")
    if kept:  # made champion just before the Ctrl-C
        return f"version {', '.join(kept)} of {name} was made champion before it stopped, and stays registered; {run}"
    return f"nothing is registered; {run}"


def _withdraw(client: Any, name: str, run_id: str, killed: bool) -> list[str] | None:
    """Undo a train stopped between its run and its comparison with the champion: delete the
    versions the run registered (never compared, perhaps without the tags ``tracker predict``
    reads), unless one already holds the alias; delete the registered model if that leaves it
    empty; end the run KILLED (``killed``: a Ctrl-C, which waits meanwhile) or FAILED. Each
    request to a tracking server is tried once, with a short timeout: a server that is what
    failed leaves the first error to be reported, not minutes of retries. The versions of the run
    it kept (the champion); None where the store failed part way."""
    import os
    import signal

    from mlflow.entities import RunStatus

    with sigint_handled(signal.SIG_IGN) if killed else contextlib.nullcontext():  # a second Ctrl-C waits
        saved = {key: os.environ.get(key) for key in _ONE_TRY}
        os.environ.update(_ONE_TRY)
        kept: list[str] = []
        failed = False
        try:
            for version in client.search_model_versions(f"name = '{name}' and run_id = '{run_id}'"):
                if CHAMPION not in (version.aliases or []):
                    client.delete_model_version(name, version.version)
                else:
                    kept.append(str(version.version))
            if not client.search_model_versions(f"name = '{name}'"):
                client.delete_registered_model(name)
            client.set_terminated(run_id, RunStatus.to_string(RunStatus.KILLED if killed else RunStatus.FAILED))
        except Exception:  # noqa: BLE001 - the store may be what failed; the caller re-raises the first error
            failed = True
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return None if failed else kept


#: MLflow's HTTP settings while a stopped train is undone (it reads them at each request).
_ONE_TRY = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


def _log_served_model(name: str, booster: Any, spec: str, example: Any, layer_model: Any = None,
                      optional: tuple[str, ...] = (), tags: dict[str, str] | None = None) -> Any:
    """Log and register the fingerprint as tracker.fingerprint.runtime's pyfunc (the booster, the
    layer-level booster of a layer or blend version, and their spec as artifacts; a copy of the
    runtime as its code), so MLflow loads and serves it in the target's unit, tracker installed or
    not. ``tags``: the version's (and the logged model's), written as it is created."""
    import importlib.metadata

    import mlflow

    from tracker.fingerprint.runtime import BOOSTER, LAYER_BOOSTER, SPEC
    from tracker.fingerprint.served import MODEL_CODE, RUNTIME_CODE, RUNTIME_MODULE, signature

    # Named, not inferred: inferring loads the model in a child process (seconds per version).
    requirements = [f"{pkg}=={importlib.metadata.version(pkg)}" for pkg in ("mlflow", "lightgbm", "numpy", "pandas")]
    with tempfile.TemporaryDirectory() as tmp:
        files = {BOOSTER: Path(tmp) / "booster.txt", SPEC: Path(tmp) / "fingerprint.json"}
        files[BOOSTER].write_text(booster.model_to_string())
        files[SPEC].write_text(spec)
        runtime = Path(tmp) / f"{RUNTIME_MODULE}.py"  # the model code's import where tracker is not installed
        runtime.write_text(RUNTIME_CODE.read_text())
        if layer_model is not None:
            files[LAYER_BOOSTER] = Path(tmp) / "layer_booster.txt"
            files[LAYER_BOOSTER].write_text(layer_model.booster.model_to_string())
        with _registry_chatter_dropped():
            return mlflow.pyfunc.log_model(name="model", python_model=str(MODEL_CODE),
                                           artifacts={key: str(path) for key, path in files.items()},
                                           code_paths=[str(runtime)],
                                           pip_requirements=requirements, input_example=example,
                                           signature=signature(list(example.columns), layer_model is not None,
                                                               optional),
                                           registered_model_name=name, tags=tags)


def _maybe_promote(client: Any, uri: str, name: str, version: str, frame: Any, y: Any, pred: Any,
                   where: tuple[Path, str, str]) -> tuple[bool, str]:
    """Move ``champion`` to this version only if it beats the champion on the same held-out
    networks: those the champion never saw, which it predicts as it would in ``tracker
    predict`` (its own method, layer-level included, from the warehouse ``where`` =
    (path, phase, device)), against this version's held-out predictions of them. Where the
    champion has seen every network (the same measurements trained again, by a newer tracker
    say), both versions' held-out predictions of the configurations both held out (each network
    predicted by a model fitted without it) are compared on today's labels."""
    import numpy as np

    from tracker.errors import DamagedArtifactError
    from tracker.fingerprint.dataset import unmeasured_layer_rows
    from tracker.fingerprint.predict import load_champion, predicted_as_predict, read_tags
    from tracker.fingerprint.runtime import UnloadableModelError, UnreadableTagError
    from tracker.fingerprint.served import made_by_train
    from tracker.log.artifacts import artifact_bytes

    current = champion_version(client, name)
    if current is None:
        client.set_registered_model_alias(name, CHAMPION, version)
        return True, "first version"
    if not made_by_train(current.tags):  # an alias moved by hand onto a version predict cannot load (kept until 0.9.4)
        client.set_registered_model_alias(name, CHAMPION, version)
        return True, f"version {current.version}, champion, was not registered by tracker fingerprint train"

    def refused(exc: UnreadableTagError | UnloadableModelError) -> tuple[bool, str]:
        """A champion predict refuses: a tag it cannot read (edited by hand), or a model whose files cannot be
        read (gone, or damaged). This version takes its place (until 0.9.23 a tag's champion was compared on its
        labels as measured, or train failed on it, saying to retrain; until 0.9.24 a model's failed train so)."""
        client.set_registered_model_alias(name, CHAMPION, version)
        what = (f"has an unreadable {exc.tag} tag {exc.value!r:.40}" if isinstance(exc, UnreadableTagError)
                else exc.why)
        return True, f"version {current.version}, champion, {what}, which tracker predict refuses"

    try:
        read = read_tags(name, current)  # as tracker predict reads them
    except UnreadableTagError as exc:
        return refused(exc)
    champ: Any = None
    try:  # its model, as predict loads it, whichever way the two are compared (until 0.9.24 only where it
        # predicted networks it never saw: one predict refused stayed champion where it had seen them all)
        champ = load_champion(uri, name, current)
    except (UnreadableTagError, UnloadableModelError) as exc:  # a trend tag's too (format 1's)
        return refused(exc)
    except FingerprintError as exc:  # a newer tracker's format: compared where it need not be loaded, as before
        unloaded = exc
    try:
        seen = set(loads_json(artifact_bytes(uri, current.run_id, "evaluation/networks.json")))
    except (DamagedArtifactError, ValueError, TypeError):  # its artifacts are gone or unreadable (a traceback until 0.9.8)
        return False, (f"version {current.version} stays champion: the networks it learnt from cannot be read (its "
                       f"run's evaluation/networks.json), so the two cannot be compared; tracker fingerprint promote "
                       f"{shell_word(name)} {version} makes this one champion")
    networks = frame["model_hash"].to_numpy()
    unseen = np.array([n not in seen for n in networks])
    if not unseen.any():
        return _compare_held_out(client, uri, name, version, current, read, frame, y, pred)
    if champ is None:
        raise unloaded
    if any(f not in frame.columns for f in champ.features):
        client.set_registered_model_alias(name, CHAMPION, version)
        return True, f"version {current.version} used features the view no longer has"
    rows = frame[unseen].reset_index(drop=True)
    # as tracker predict answers, past the largest batch the champion learnt too (until 0.9.8 its trees' answer there)
    old = predicted_as_predict(champ, rows, (lambda r: unmeasured_layer_rows(where[0], r, where[1], where[2]))
                               if champ.layer is not None else None)
    held = len(set(networks[unseen]))
    how = f" ({champ.method}-level)" if champ.method != "network" else ""
    old, y_old, note = _in_its_units(read, frame[unseen], old, y[unseen], current.version)
    return _verdict(client, name, version, y[unseen], pred[unseen], old,
                    f"beats version {current.version}{how} on {counted(held, 'network')} it never saw",
                    f"version {current.version}{how} stays champion on {counted(held, 'unseen network')}", y_old, note)


def _in_its_units(read: dict[str, Any], rows: Any, old: Any, y: Any, champion: str = "") -> tuple[Any, Any, str]:
    """The champion's predictions ``old`` of ``rows`` and the labels to score them on, where the two
    versions' latencies are in other units (since 0.9.9): both at a reference speed of one probe version,
    its predictions put at this version's (times the ratio of the two); this one at a reference speed and
    the champion as measured, the champion scored on the latencies as measured (``measured_latency_ms``);
    else as they are (this one as measured: the champion's reference is the same machine's median speed).
    Both at a reference speed, but times of two versions of the speed probe (tags ``speed_probe_version``;
    a reference without one is taken as this tracker's): two units that no ratio puts together, so not
    rescaled but compared as measured, as a champion learnt as measured is (rescaled by the two times until
    0.9.12), and the third item says so for the verdict's reason (``champion``: the champion's version);
    else it is empty. ``read``: the champion's tags as ``read_tags`` reads them, as predict does (until 0.9.23
    read here apart, an unreadable reference taken for none)."""
    reference = rows.attrs.get("speed_reference_ms")
    theirs = read.get("speed_reference_ms")
    if reference is None:
        return old, y, ""
    if theirs is not None:
        ours_version = str(rows.attrs.get("speed_probe_version", PROBE_VERSION))
        their_version = str(read.get("speed_probe_version", PROBE_VERSION))
        if their_version == ours_version:
            return old * (reference / theirs), y, ""
        return old, rows["measured_latency_ms"].to_numpy(float), (
            f" (version {champion} learnt at the speed of speed probe version {their_version}, this one at version "
            f"{ours_version}'s: another unit, so version {champion} is scored on the latencies as measured, not rescaled)")
    return old, rows["measured_latency_ms"].to_numpy(float), ""


def _verdict(client: Any, name: str, version: str, y: Any, new: Any, old: Any, beats: str,
             stays: str, y_old: Any = None, note: str = "") -> tuple[bool, str]:
    """Move ``champion`` to ``version`` if its predictions ``new`` have a lower MAPE on ``y`` than
    the champion's ``old`` (on ``y_old`` where the champion's latencies are as measured and this
    one's at a reference speed), lower at the 0.01 point the reason gives both in (since 0.9.10);
    the reason opens with ``beats`` or ``stays``, gives both MAPEs and ends with ``note``."""
    new_mape, old_mape = scores(y, new)["mape_pct"], scores(y if y_old is None else y_old, old)["mape_pct"]
    # better as the reason says them, to 0.01 point: a twin a rounding error ahead "beat" it, "49.99 % vs 49.99 %"
    if round(new_mape, 2) < round(old_mape, 2):
        client.set_registered_model_alias(name, CHAMPION, version)
        return True, f"{beats}: MAPE {new_mape:.2f} % vs {old_mape:.2f} %{note}"
    return False, f"{stays}: {old_mape:.2f} % vs {new_mape:.2f} %{note}"


def _compare_held_out(client: Any, uri: str, name: str, version: str, current: Any, read: dict[str, Any], frame: Any,
                      y: Any, pred: Any) -> tuple[bool, str]:
    """The champion, which has seen every network of ``frame``, against this version on their
    held-out predictions (the champion's ``evaluation/heldout_predictions.csv``) of the
    configurations both held out, scored on today's labels ``y`` (``read``: its tags, ``read_tags``')."""
    import numpy as np
    import pandas as pd
    from mlflow.exceptions import MlflowException

    from tracker.log.artifacts import downloaded

    nothing = f"version {current.version} stays champion: no network it has not seen to compare on"
    try:
        with downloaded(uri, current.run_id, "evaluation/heldout_predictions.csv") as path:
            held = pd.read_csv(path, dtype={"model_hash": str})
    except (MlflowException, OSError, ValueError):  # its artifacts are gone or unreadable
        return False, nothing + " (and its held-out predictions cannot be read)"
    key = ["model_hash", "batch_size"]
    old = frame[key].merge(held[key + ["predicted"]].drop_duplicates(key), on=key, how="left")["predicted"].to_numpy(float)
    both = ~np.isnan(old)
    if not both.any():
        return False, nothing
    count = len(set(frame["model_hash"].to_numpy()[both]))
    on = f"on the {count} networks both held out (it has seen every network)"
    old, y_old, note = _in_its_units(read, frame[both], old[both], y[both], current.version)
    return _verdict(client, name, version, y[both], pred[both], old, f"beats version {current.version} {on}",
                    f"version {current.version} stays champion {on}", y_old, note)


def _plots(folder: Path, title: str, unit: str, y: Any, pred: Any, families: Any, features: list[str], model: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from tracker.report.plots import predicted_vs_measured_png

    (folder / "predicted_vs_measured.png").write_bytes(predicted_vs_measured_png(title, y, pred, families, unit))

    fams = sorted(set(families))
    errs = [100 * np.abs(pred[families == f] / y[families == f] - 1) for f in fams]
    fig, ax = plt.subplots(figsize=(max(4, 0.5 * len(fams)), 4))
    ax.boxplot(errs, tick_labels=fams)
    ax.set(ylabel="absolute error %", title="held-out error by family")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    fig.tight_layout()
    fig.savefig(folder / "error_by_family.png", dpi=110)
    plt.close(fig)

    importance = model.booster_.feature_importance(importance_type="gain")
    order = np.argsort(importance)[-20:]
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.barh([features[i] for i in order], importance[order])
    ax.set(xlabel="gain", title="feature importance")
    fig.tight_layout()
    fig.savefig(folder / "feature_importance.png", dpi=110)
    plt.close(fig)
