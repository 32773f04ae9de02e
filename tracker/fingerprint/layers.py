"""The layer-level fingerprint, after nn-Meter: predict each layer, sum over the network.

A LightGBM regressor of ``log(latency_ms / work)`` of one module call (its work: FLOPs,
elementwise ops and bytes, ``runtime.LAYER_WORK``; of ``log(latency_ms)`` until 0.9.12), fitted on the rows of the
``layer_features`` view (layer runs joined with their module's node features). A network
is predicted from the sum of its module calls by a calibration fitted on the training
networks' measured layers (``calibration``): a factor on the sum, a cost per call and a cost per
MB the calls write (the functional ops, the dispatch between layers and the memory traffic that
isolated layers do not see); with fewer than ``MIN_CALIBRATION_CONFIGS`` configurations, the
factor alone, the median of whole-network latency over the sum of its isolated layers. Each sum
is paired with the whole-network latency of the measurements that ran those layers (the rows'
``network_latency_ms``, since 0.9.11). The
same view serves prediction: the new network's module calls are inserted as layer runs of
an unmeasured configuration in a scratch warehouse (see ``dataset.configuration_rows``).
The fitted model (``LayerModel``) and its inputs live in ``runtime``, which a registered
version carries, so that it answers where tracker is not installed; fitting it lives here.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from tracker.fingerprint.runtime import (  # with the layer model's inputs (served alone too)
    LAYER_WORK,
    LAYER_WORK_FLOOR,
    FingerprintError,
    LayerModel,
    call_sums,
    layer_matrix,
    layer_work,
)

LAYER_VIEW = "layer_features"
#: The labels: per layer, the median of its configuration's repeated measurements (training only).
LAYER_LABEL_VIEW = "layer_labels"
#: The labels over the named experiments' measurements alone (a table macro; ``LAYER_LABEL_VIEW`` is it
#: over every experiment's): what ``load_layer_rows`` learns from with experiments named (since 0.9.10;
#: every experiment's layers before, whatever the network labels were taken over).
LAYER_LABELS_MACRO = "layer_labels_of"
#: The measurement whose layers stand for each configuration: its latest that ran them (since 0.9.11; the
#: latest measurement before, so that one measured whole only later had no layers to learn from).
LAYER_MEASUREMENTS_VIEW = "latest_layer_measurements"
#: What a layer-level model learns from (a version's ``layer_view_sha256`` digests them, its
#: ``layer_model`` folder carries them).
LAYER_VIEWS = (LAYER_VIEW, LAYER_LABEL_VIEW, LAYER_LABELS_MACRO, LAYER_MEASUREMENTS_VIEW)
#: Every row and every column in each tree: the fit does not depend on a seed. With rows and columns
#: sampled (0.8 each) the held-out share within +-10 % on cpu-forty (retaining mode) moved from
#: 89.2 to 91.7 % between five seeds; without, it is 91.7 % (MAPE 4.3 %).
LAYER_PARAMS = {"n_estimators": 600, "learning_rate": 0.05, "num_leaves": 31, "min_child_samples": 3,
                "subsample": 1.0, "colsample_bytree": 1.0, "verbose": -1, "random_state": 0, "n_jobs": 1}


def load_layer_rows(warehouse: Path, phase: str, device: str, speed_reference_ms: float | None = None,
                    experiments: Collection[str] = (), configs: Collection[str] | None = None) -> Any:
    """Measured layer rows of one phase and device (possibly none; ``device`` matches as in
    ``dataset.load_rows``): those of each configuration's latest measurement that ran its layers
    (``parent_run_id``; ``config_run_id`` the configuration's latest measurement, its network row),
    each layer's latency the median over its configuration's repeats that ran it (``label_repeats`` of
    them), and ``network_latency_ms`` the whole network's median over those same repeats, in the layers'
    unit: what the calibration pairs the sum of the layers with (since 0.9.11: the network's label
    before, over its repeats without layers too, and a configuration measured again whole only had no
    layer rows at all). ``speed_reference_ms``: the network
    labels were put at that probe time (``dataset.at_reference_speed``), and so are the layers (each
    one's median of latency over probe times it) where every repeat of every layer timed the probe, of
    this tracker's version (since 0.9.11), as for the network labels; else every layer stays as
    measured (one network's sum of layers in two units, some put at the reference and some not, until
    it was released). ``experiments``: each
    layer's median over the measurements of those experiments alone, as ``dataset.load_rows`` takes the
    network labels (since 0.9.10: the layers of every experiment before, which the calibration then
    paired with the named experiments' network latencies); ``label_experiments`` and ``label_run_ids``
    (the layer runs) say what each label came from. ``configs``: the layers of those configurations alone
    (their ``config_run_id``s), taken before the layers are put at the reference speed, so that whether they
    can be is asked of them alone (since 0.9.12: of every layer of the phase and device before, a network
    left out with --exclude or measured in another mode included). Where a ``speed_reference_ms`` is given
    and the layers stay as measured, attrs ``as_measured_why`` says why in a line (how many layer labels
    have measurements without a probe or with another version's: ``dataset.unprobed_why``; since 0.9.12,
    said nowhere before); else it is None."""
    import duckdb

    from tracker.fingerprint.dataset import fully_probed, network_probed, older_views, unprobed_why
    from tracker.warehouse.load import connect_loaded

    if experiments:  # layer_labels' medians, over the named experiments' measurements alone (its macro)
        labels, extra = f"{LAYER_LABELS_MACRO}($experiments)", ", l.label_experiments, l.label_run_ids"
        params = {"experiments": sorted(set(experiments))}
    else:
        labels, extra, params = LAYER_LABEL_VIEW, "", {}
    con = connect_loaded(warehouse)
    try:
        rows = con.sql(
            f"SELECT f.* REPLACE (l.latency_ms AS latency_ms), l.repeats AS label_repeats, "
            f"l.latency_probe_ratio AS label_probe_ratio, l.probed_repeats AS label_probed_repeats, "
            "l.network_latency_ms, l.network_probe_ratio AS label_network_probe_ratio, "
            "l.network_probed_repeats AS label_network_probed_repeats, l.speed_probe_version AS label_speed_probe_version, "
            f"l.network_speed_probe_version AS label_network_speed_probe_version{extra} "
            f"FROM {LAYER_VIEW} f JOIN {labels} l USING (run_id) "
            "WHERE f.phase = $phase AND (f.device = $device OR f.device_name = $device OR f.mode = $device) "
            "AND l.latency_ms > 0 AND isfinite(l.latency_ms) ORDER BY f.parent_run_id, f.layer_index",
            params={"phase": phase, "device": device, **params},
        ).df()
    except duckdb.Error as exc:
        if (older := older_views(warehouse, exc, LAYER_LABELS_MACRO if experiments else None)) is not None:
            raise older from None
        if isinstance(exc, duckdb.BinderException) and "network_latency_ms" in str(exc):  # views of 0.9.10 or before
            from tracker.console import shell_word

            raise FingerprintError(f"the warehouse {warehouse} has the layer labels of an older tracker, without "
                                   "network_latency_ms, which the layer level reads since 0.9.11 (a load by tracker "
                                   f"0.9.11 or later makes them): tracker warehouse load -w {shell_word(warehouse)}") from None
        raise
    finally:
        con.close()
    if configs is not None:
        rows = rows[rows["config_run_id"].isin(set(configs))].copy()
    why = None
    if speed_reference_ms is not None and not fully_probed(rows):
        why = unprobed_why(rows, "layer label", none_timed=True)
    elif speed_reference_ms is not None:
        rows["latency_ms"] = rows["label_probe_ratio"].astype(float) * speed_reference_ms
        # the whole network in the same unit, where each measurement that ran the layers timed its probe, of this
        # tracker's version (else unknown, and the configuration is left out of the calibration: never one unit
        # against another)
        probed = network_probed(rows)
        rows["network_latency_ms"] = (rows["label_network_probe_ratio"].astype(float) * speed_reference_ms).where(probed)
    rows.attrs["as_measured_why"] = why
    return rows


def measured_whole(layer_rows: Any) -> dict[str, float]:
    """Per measurement that ran the layers of ``layer_rows`` (``parent_run_id``), the whole network's
    latency over the same repeats as its layers' labels (their ``network_latency_ms``), where known:
    what the calibration pairs each sum of layers with (since 0.9.11: the configuration's network label
    before, the median over its repeats measured whole only too)."""
    if layer_rows.empty:
        return {}
    whole = layer_rows.groupby("parent_run_id", sort=False)["network_latency_ms"].median().dropna()
    return {str(k): float(v) for k, v in whole.items()}


def training_layer_rows(warehouse: Path, frame: Any, phase: str, device: str) -> Any:
    """The layer rows of the configurations of ``frame`` (``train.training_rows``; a row's ``config_run_id``
    is its ``run_id``), labelled as its network labels are: over the measurements of the experiments it
    was taken over (attrs ``experiments``; every experiment's layers until 0.9.10, while the network labels
    were the named experiments') and at its reference speed (attrs ``speed_reference_ms``), so that the
    calibration pairs each sum of layers with the latency of the whole network measured with them."""
    return load_layer_rows(warehouse, phase, device, frame.attrs.get("speed_reference_ms"),
                           frame.attrs.get("experiments", ()), configs=frame["run_id"])


#: Fewest training configurations with layer runs for the calibration's terms per call and per
#: MB written (three coefficients); with fewer, the factor alone (the median ratio), as before.
MIN_CALIBRATION_CONFIGS = 10


def fit(layer_rows: Any, network_latency: dict[str, float] | None = None) -> LayerModel:
    """Fit on measured layers; ``network_latency`` maps parent run id to its whole-network latency
    (by default :func:`measured_whole`: that of the measurements that ran the layers).

    Each call's latency is learnt over its work (``runtime.LAYER_WORK``: log(latency / work)). The
    calibration from the sum of a network's isolated layers to its whole latency is fitted on
    the measured layers: ``factor * sum + per_call_ms * calls + per_out_mb_ms * MB written``,
    non-negative, least squares on the relative error (``calibration``)."""
    import numpy as np
    from lightgbm import LGBMRegressor

    work = {**LAYER_WORK, "floor": LAYER_WORK_FLOOR}
    per_work = np.log(layer_rows["latency_ms"].to_numpy(float)) - np.log(layer_work(layer_rows, work))
    model = LGBMRegressor(**LAYER_PARAMS).fit(layer_matrix(layer_rows), per_work)
    return LayerModel(model.booster_, *calibration(layer_rows, network_latency), work=work)


def calibration(layer_rows: Any, network_latency: dict[str, float] | None = None) -> tuple[float, float, float]:
    """(factor, per_call_ms, per_out_mb_ms) from the measured layers of the configurations whose
    whole latency is known (``network_latency`` by parent run id; by default :func:`measured_whole`,
    the whole network measured with the layers). On the 40 networks of cpu-forty (retaining allocator,
    one thread) the whole network took 1.07 to 1.81 times its isolated layers: a fixed ratio missed by
    8.9 %, the three terms by 4.4 % (each network left out in turn, measured layer sums)."""
    import numpy as np
    import pandas as pd

    if network_latency is None:
        network_latency = measured_whole(layer_rows)
    codes, parents = pd.factorize(layer_rows["parent_run_id"], sort=False)
    sums, calls, out_mb = call_sums(codes, len(parents), layer_rows["latency_ms"].to_numpy(float), layer_rows)
    whole = np.array([network_latency.get(p, np.nan) for p in parents], dtype=float)
    keep = np.isfinite(whole) & (whole > 0) & (sums > 0)
    if keep.sum() < MIN_CALIBRATION_CONFIGS:
        return (float(np.median(whole[keep] / sums[keep])) if keep.any() else 1.0), 0.0, 0.0
    from scipy.optimize import nnls

    terms = np.c_[sums, calls, out_mb][keep]
    coef, _ = nnls(terms / whole[keep, None], np.ones(int(keep.sum())))
    if coef[0] <= 0:  # the layers' own latencies carry no weight: not a calibration of them
        return float(np.median(whole[keep] / sums[keep])), 0.0, 0.0
    return float(coef[0]), float(coef[1]), float(coef[2])


def out_of_fold(layer_rows: Any, frame: Any, groups: Any) -> Any:
    """Held-out layer-sum predictions for the rows of ``frame`` whose configuration has layer runs
    (the layer rows' ``config_run_id`` is the row's ``run_id``), else NaN. Each fold's calibration
    pairs the sums of layers with the whole networks measured with them (:func:`measured_whole`).

    The folds are the network-level model's (``train.group_folds`` on the same ``groups``),
    so both levels hold out the same networks.
    """
    import numpy as np

    from tracker.fingerprint.train import group_folds, map_folds

    pred = np.full(len(frame), np.nan)
    run_ids = frame["run_id"].to_numpy()
    if len(set(groups[np.isin(run_ids, layer_rows["config_run_id"])])) < 2:
        return pred
    whole = measured_whole(layer_rows)
    config_of = dict(zip(layer_rows["parent_run_id"], layer_rows["config_run_id"]))
    layer_group = layer_rows["config_run_id"].map(dict(zip(run_ids, groups))).to_numpy()
    held_out = [(np.isin(layer_group, groups[test_idx]), test_idx) for _, test_idx in group_folds(groups)]
    held_out = [(held, test_idx) for held, test_idx in held_out if held.any() and not held.all()]

    def sums(fold: tuple[Any, Any]) -> Any:
        held = fold[0]
        return fit(layer_rows[~held], whole).network_latency(layer_rows[held])

    for (_, test_idx), fold_sums in zip(held_out, map_folds(sums, held_out)):
        fold_sums = fold_sums.rename(index=config_of)  # by the measurement that ran the layers: by configuration
        idx = test_idx[np.isin(run_ids[test_idx], fold_sums.index)]
        pred[idx] = fold_sums.loc[run_ids[idx]].to_numpy()
    return pred
