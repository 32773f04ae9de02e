"""The layer-level fingerprint, after nn-Meter: predict each layer, sum over the network.

A LightGBM regressor of ``log(latency_ms)`` of one module call, fitted on the rows of the
``layer_features`` view (layer runs joined with their module's node features). A network
is predicted as the sum of its module calls times a calibration factor: the median, over
the training networks, of whole-network latency over the sum of its isolated layers (the
functional ops and the overhead between layers that isolated layers do not see). The
same view serves prediction: the new network's module calls are inserted as layer runs of
an unmeasured configuration in a scratch warehouse (see ``dataset.configuration_rows``).
The fitted model (``LayerModel``) and its inputs live in ``runtime``, which a registered
version carries, so that it answers where tracker is not installed; fitting it lives here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracker.fingerprint.runtime import LayerModel, layer_matrix  # with the layer model's inputs (served alone too)

LAYER_VIEW = "layer_features"
#: The labels: per layer, the median of its configuration's repeated measurements (training only).
LAYER_LABEL_VIEW = "layer_labels"
LAYER_PARAMS = {"n_estimators": 600, "learning_rate": 0.05, "num_leaves": 31, "min_child_samples": 3,
                "subsample": 0.8, "subsample_freq": 1, "colsample_bytree": 0.8, "verbose": -1, "random_state": 0,
                "n_jobs": 1}


def load_layer_rows(warehouse: Path, phase: str, device: str) -> Any:
    """Measured layer rows of one phase and device (possibly none; ``device`` matches as in
    ``dataset.load_rows``); each layer's latency is the median over its configuration's repeats
    (``label_repeats`` of them), as the network labels are."""
    from tracker.warehouse.load import connect

    con = connect(warehouse, read_only=True)
    try:
        return con.sql(
            f"SELECT f.* REPLACE (l.latency_ms AS latency_ms), l.repeats AS label_repeats "
            f"FROM {LAYER_VIEW} f JOIN {LAYER_LABEL_VIEW} l USING (run_id) "
            "WHERE f.phase = $phase AND (f.device = $device OR f.device_name = $device OR f.mode = $device) "
            "AND l.latency_ms > 0 ORDER BY f.parent_run_id, f.layer_index",
            params={"phase": phase, "device": device},
        ).df()
    finally:
        con.close()


def fit(layer_rows: Any, network_latency: dict[str, float]) -> LayerModel:
    """Fit on measured layers; ``network_latency`` maps parent run id to its whole-network latency."""
    import numpy as np
    from lightgbm import LGBMRegressor

    model = LGBMRegressor(**LAYER_PARAMS).fit(layer_matrix(layer_rows), np.log(layer_rows["latency_ms"].to_numpy(float)))
    sums = layer_rows.groupby("parent_run_id")["latency_ms"].sum()
    ratios = [network_latency[p] / s for p, s in sums.items() if p in network_latency and s > 0]
    return LayerModel(model.booster_, float(np.median(ratios)) if ratios else 1.0)


def out_of_fold(layer_rows: Any, frame: Any, groups: Any) -> Any:
    """Held-out layer-sum predictions for the rows of ``frame`` whose run has layer runs, else NaN.

    The folds are the network-level model's (``train.group_folds`` on the same ``groups``),
    so both levels hold out the same networks.
    """
    import numpy as np

    from tracker.fingerprint.train import group_folds

    pred = np.full(len(frame), np.nan)
    run_ids = frame["run_id"].to_numpy()
    if len(set(groups[np.isin(run_ids, layer_rows["parent_run_id"])])) < 2:
        return pred
    latency = dict(zip(run_ids, frame["latency_ms"]))
    layer_group = layer_rows["parent_run_id"].map(dict(zip(run_ids, groups))).to_numpy()
    for _, test_idx in group_folds(groups):
        held = np.isin(layer_group, groups[test_idx])
        if held.all() or not held.any():
            continue
        sums = fit(layer_rows[~held], latency).network_latency(layer_rows[held])
        idx = test_idx[np.isin(run_ids[test_idx], sums.index)]
        pred[idx] = sums.loc[run_ids[idx]].to_numpy()
    return pred
