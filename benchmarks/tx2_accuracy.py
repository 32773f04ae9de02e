"""Fingerprint accuracy on perf4sight's own Jetson TX2 data, against its published result.

Imports ``../shared/datasets/perf4sight-tx2/`` into a temporary embedded store (the real
``tracker import perf4sight`` path), loads it into a DuckDB warehouse and reads the
``measurement_features`` view, exactly the rows ``tracker fingerprint train`` fits. Then, for
training memory (``peak_mem_mb``: perf4sight's ``mem_used``) and training latency, with the
fingerprints' network-level model (log target; LightGBM alone, or LightGBM on what a power-law
or an additive trend leaves, chosen as ``tracker fingerprint train`` chooses, by families (or
networks) held out within the training rows;
``network_model_chosen`` lists each choice, ``lgbm_alone_*`` what LightGBM alone scores) and
perf4sight's ExtraTrees (300 trees) on the same rows:

- perf4sight's protocol: fit on resnet50 pruned 0, 30, 50, 70, 90 %, score the other 14
  resnet50 levels; accuracy = 100 - MAPE (perf4sight publishes memory 95, latency 91);
- leave one network out: fit on five families (every pruning level), predict the sixth.

Targets (LightGBM): protocol accuracy >= 99 (memory) and >= 98 (latency); leave-one-out MAPE
<= 6 % (memory) and <= 10 % (latency) on each of the six networks.

How far the data itself allows: ``feature_fit_protocol_accuracy`` fits the test rows themselves
from features alone (at each batch size, log(target) on log FLOPs and log activation bytes over
all 19 resnet50 levels, test levels included): what each test network does beyond what those
features say of it is left over, in-sample. ``smooth_oracle_protocol_accuracy`` is what an oracle reaches
on the protocol's test rows when it is *fitted on those very rows*: each test network's own
curve in batch size (``min(ceiling, max(floor, a + b * batch))``: a floor, then linear, up to a
ceiling, where the TX2's memory readings saturate near 6,200 MB), times a factor per batch size
shared by all test networks (the batch effects a model could learn from other networks). What
that in-sample fit misses is row-to-row scatter that no smooth curve of batch size follows.
``neighbour_interpolation_protocol_accuracy`` is the plainest predictor that does not see the
test rows: at each test row's batch size, log(target) interpolated linearly in log(FLOPs)
between the two training levels that bracket the network (resnet50's latency and memory fall
smoothly with pruning). It is a yardstick, not a bound (a model may read more than FLOPs):
how far the neighbours alone get. ``neighbour_interpolation_rows`` counts the rows it could
score (a batch size at which fewer than two training levels were measured has no neighbours).
``repeat_spread_pct`` is the data's own noise: where perf4sight measured one network at one
batch size more than once (the duplicate rows its import collapses), the median and the 90th
percentile of (max - min) / mean, and how many such pairs there are.
``fit_verdicts_leave_one_out``: whether a training step fits, as ``tracker predict`` says it, on
every configuration perf4sight tried (passed or failed) of each family left out: the share of
failures and of passes flagged "may not fit" (peak predicted above the largest learnt from) and
"would not fit" (above the board's 7,859 MB); ``largest_batch``: ``tracker predict --largest-batch``
against perf4sight's own out-of-memory boundary (see ``largest_batches``).
Last line: {"protocol_accuracy": {...}, "leave_one_out_mape_pct": {...}, "published": {...}, ...}
"""

import os
import sys

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "perf4sight-tx2"
TRAIN_LEVELS = (0, 30, 50, 70, 90)
PUBLISHED = {"peak_mem_mb": 95.0, "latency_ms": 91.0}
PROTOCOL_TARGET = {"peak_mem_mb": 99.0, "latency_ms": 98.0}
LOO_TARGET_PCT = {"peak_mem_mb": 6.0, "latency_ms": 10.0}


def fit_predict(make, x, y, train, test, groups, chosen: list, fitted: list | None = None):
    """Fit on ``train`` rows, predict ``test`` rows. ``make`` None: the fingerprints' own choice,
    ``select_network_model`` by networks held out *within the training rows* (the test rows
    play no part in it), appended to ``chosen``. ``fitted``: the fitted model is appended to it."""
    import numpy as np

    from tracker.fingerprint.train import NETWORK_MODELS, select_network_model

    if make is None:
        # perf4sight's TX2 ran out of memory (its failures): a memory target's readings saturate
        saturates = "batch_kept_activation_bytes" in x.columns
        name, _, _, _ = select_network_model(x[train].reset_index(drop=True), y[train], *(g[train] for g in groups),
                                             saturates=saturates)
        chosen.append(name)
        make = NETWORK_MODELS[name]
    model = make().fit(x[train], np.log(y[train]))
    if fitted is not None:
        fitted.append(model)
    return np.exp(model.predict(x[test]))


def protocol_split(frame):
    """perf4sight's protocol as two boolean masks over ``frame``'s rows: (train, test) = resnet50
    at TRAIN_LEVELS, and resnet50 at every other level."""
    import numpy as np

    from tracker.fingerprint.dataset import family

    resnet = (frame["model"].map(family) == "resnet50").to_numpy()
    trained = np.isin(frame["model"].str.rsplit("_", n=1).str[1].astype(int).to_numpy(), TRAIN_LEVELS)
    return resnet & trained, resnet & ~trained


def evaluate(frame, target: str, make, chosen: list, fitted: dict | None = None) -> tuple[float, dict[str, float]]:
    """Protocol accuracy and leave-one-family-out MAPE; ``fitted`` gets each left-out family's
    model and the largest target value it learnt from."""
    from tracker.fingerprint.dataset import family, feature_columns
    from tracker.fingerprint.train import scores

    features = feature_columns(list(frame.columns), target)
    x = frame[features].astype(float).reset_index(drop=True)
    y = frame[target].to_numpy(float)
    families = frame["model"].map(family).to_numpy()
    train, test = protocol_split(frame)
    nets = (frame["model_hash"].to_numpy(), families)
    accuracy = 100.0 - scores(y[test], fit_predict(make, x, y, train, test, nets, chosen))["mape_pct"]
    loo = {}
    for f in sorted(set(families)):
        models: list = []
        loo[f] = scores(y[families == f], fit_predict(make, x, y, families != f, families == f, nets, chosen,
                                                      models))["mape_pct"]
        if fitted is not None:
            fitted[f] = (models[0], float(y[families != f].max()))
    return accuracy, loo


def _hinge(p, bs):
    """A floor ``p[0]``, then the line ``p[1] + p[2] * bs``, held under the ceiling ``p[3]``."""
    import numpy as np

    return np.minimum(p[3], np.maximum(p[0], p[1] + p[2] * bs))


def smooth_oracle(frame, target: str) -> float:
    """100 - MAPE of the in-sample smooth fit of the protocol's test rows (see the docstring)."""
    import numpy as np
    from scipy.optimize import least_squares

    rows = frame[protocol_split(frame)[1]]
    bs = rows["batch_size"].to_numpy(float)
    y = rows[target].to_numpy(float)
    nets = rows["model"].to_numpy()
    factor = np.ones(len(y))
    fit = np.zeros(len(y))
    for _ in range(5):  # alternate: per-network curves, then the shared per-batch factors
        for net in set(nets):
            m = nets == net
            yb, xb = y[m] / factor[m], bs[m]
            p0 = (yb.min(), yb.min() / 2, (yb.max() - yb.min()) / max(xb.max(), 1.0), 1.01 * yb.max())
            p = least_squares(lambda p: (_hinge(p, xb) - yb) / yb, p0, loss="soft_l1", f_scale=0.02).x
            fit[m] = _hinge(p, xb)
        ratio = y / fit
        factor = np.array([np.median(ratio[bs == b]) for b in bs])
    return float(100 - 100 * np.mean(np.abs(fit * factor - y) / y))


#: What ``feature_fit`` regresses on, per batch size: the work of a network as its features say it.
FEATURE_FIT = ("flops", "activation_bytes")


def feature_fit(frame, target: str) -> tuple[float, int]:
    """100 - MAPE on the protocol's test rows of a fit that *sees them*: at each batch size,
    least squares of log(target) on log FLOPs and log activation bytes over every resnet50 level
    (training and test rows together). What it misses is what each network does beyond what
    those features say of it, fitted in-sample; and how many rows it scored (a batch size with no
    more levels than parameters plus one is skipped)."""
    import numpy as np

    train, test = protocol_split(frame)
    rows = frame[train | test].assign(test=test[train | test])
    errors = []
    for _, g in rows.groupby("batch_size"):
        a = np.c_[np.ones(len(g)), np.log(g[list(FEATURE_FIT)].to_numpy(float))]
        if len(g) <= a.shape[1] + 1 or not g["test"].any():
            continue
        coef, *_ = np.linalg.lstsq(a, np.log(g[target].to_numpy(float)), rcond=None)
        fitted = np.exp(a @ coef)
        y = g[target].to_numpy(float)
        errors += list((np.abs(fitted - y) / y)[g["test"].to_numpy()])
    return float(100 - 100 * np.mean(errors)), len(errors)


def neighbour_interpolation(frame, target: str) -> tuple[float, int]:
    """100 - MAPE of interpolating each protocol test row between its bracketing training
    levels at the same batch size (see the docstring), and how many rows it scored."""
    import numpy as np

    train_rows, test_rows = protocol_split(frame)
    train, test = frame[train_rows], frame[test_rows]
    errors = []
    for bs, flops, y in zip(test["batch_size"], test["flops"], test[target]):
        known = train[train["batch_size"] == bs].sort_values("flops")
        if len(known) < 2:
            continue
        guess = np.exp(np.interp(np.log(float(flops)), np.log(known["flops"].to_numpy(float)),
                                 np.log(known[target].to_numpy(float))))
        errors.append(abs(guess - float(y)) / float(y))
    return float(100 - 100 * np.mean(errors)), len(errors)


def demand(model, x):
    """log(peak) a model predicts for a memory verdict: a hinge trend's demand, not held under its
    ceiling (the readings saturate near the board's limit; what a configuration needs does not)."""
    from tracker.fingerprint.trend import TrendBoosted

    return model.predict(x, saturated=False) if isinstance(model, TrendBoosted) else model.predict(x)


def fit_verdicts(fitted: dict, features: list[str]) -> dict:
    """How well the memory fingerprint tells whether a training step fits on the TX2, each family
    left out in turn: every configuration of the left-out family that perf4sight tried (memory row
    passed or failed, mostly out of memory), its peak predicted by the model of the other five
    (features from the same SQL as ``tracker predict``), flagged as ``tracker predict`` flags it:
    above the largest peak learnt from ("may not fit"), above the board's memory ("would not fit")."""
    import numpy as np

    from tracker.fingerprint.dataset import configuration_rows, family
    from tracker.imports.perf4sight import DEVICE, environment, read_configs, read_descriptions

    descriptions = read_descriptions(DATA)
    capacities: set[float] = set()
    configs = read_configs(DATA, capacities)
    board_mb = float(environment(capacities)["env.memory_total_mb"])
    tried = {(n, bs): bool(c.memory) for (n, bs), c in configs.items()
             if n in descriptions and (c.memory or c.memory_failed)}
    counts = {k: 0 for k in ("may_hit", "may_false", "would_hit", "would_false")}
    for fam, (model, largest_mb) in fitted.items():
        names = sorted({n for n, _ in tried if family(n) == fam})
        sizes = sorted({bs for n, bs in tried if family(n) == fam})
        rows, _ = configuration_rows([descriptions[n] for n in names], sizes, "training", DEVICE)
        predicted = np.exp(demand(model, rows[features].astype(float)))
        for (name, bs), peak_mb in zip([(n, b) for n in names for b in sizes], predicted):
            if (name, bs) not in tried:
                continue
            failed = not tried[(name, bs)]
            for flag, above in (("may", peak_mb > largest_mb), ("would", peak_mb > board_mb)):
                if above:
                    counts[f"{flag}_{'hit' if failed else 'false'}"] += 1
    failed = sum(not ok for ok in tried.values())
    passed = len(tried) - failed
    boundary = largest_batches(fitted, features, descriptions, tried)

    def pct(a: int, b: int) -> float | None:
        return round(100 * a / b, 1) if b else None

    return {"configurations": len(tried), "failed": failed, "board_memory_mb": board_mb,
            "may_not_fit": {"failures_flagged_pct": pct(counts["may_hit"], failed),
                            "passes_flagged_pct": pct(counts["may_false"], passed)},
            "would_not_fit": {"failures_flagged_pct": pct(counts["would_hit"], failed),
                              "passes_flagged_pct": pct(counts["would_false"], passed)},
            "largest_batch": boundary}


def largest_batches(fitted: dict, features: list[str], descriptions: dict, tried: dict) -> dict:
    """``tracker predict --largest-batch`` (under the largest peak learnt from) for every network of
    each left-out family that failed somewhere, against perf4sight's own boundary: the largest batch
    size that ran and the smallest above it that failed. ``within``: between the two (perf4sight's
    sizes are 2, 4, 8, ... 64, 70, 80, ... 256, so the boundary is known to lie between them);
    ``under``: below the largest that ran (safe, capacity left unused); ``over``: at or above the
    first that failed (it would run out of memory). ``ratio_to_largest_ran``: median and range of
    predicted over largest that ran."""
    import numpy as np

    from tracker.fingerprint.dataset import configuration_rows, family
    from tracker.fingerprint.predict import largest_under
    from tracker.fingerprint.runtime import floored
    from tracker.imports.perf4sight import DEVICE

    verdicts = {"within": 0, "under": 0, "over": 0}
    ratios = []
    for fam, (model, largest_mb) in fitted.items():
        for name in sorted({n for n, _ in tried if family(n) == fam}):
            ran = [bs for (n, bs), ok in tried.items() if n == name and ok]
            if not ran:
                continue
            failed_above = [bs for (n, bs), ok in tried.items() if n == name and not ok and bs > max(ran)]
            if not failed_above:
                continue

            def peak_mb(sizes: list[int], name: str = name) -> list[float]:
                rows, _ = configuration_rows([descriptions[name]], sizes, "training", DEVICE)
                # raised to the floor of the network's own tensors, as tracker predict raises it
                return list(floored(np.exp(demand(model, rows[features].astype(float))), rows, "training"))

            predicted = largest_under(peak_mb, largest_mb, 4096) or 0
            low, high = max(ran), min(failed_above)
            verdicts["within" if low <= predicted < high else "under" if predicted < low else "over"] += 1
            ratios.append(predicted / low)
    return {"networks": sum(verdicts.values()), **verdicts,
            "ratio_to_largest_ran": {"median": round(float(np.median(ratios)), 2),
                                     "min": round(float(np.min(ratios)), 2), "max": round(float(np.max(ratios)), 2)}}


#: Each target's column in perf4sight's CSVs, and the folder it lies in.
RAW_COLUMNS = {"peak_mem_mb": ("memory", "mem_used"), "latency_ms": ("latency", "latency")}


def repeat_spread(target: str) -> dict[str, float]:
    """How far perf4sight's repeated measurements of one network at one batch size lie apart."""
    import numpy as np
    import pandas as pd

    folder, column = RAW_COLUMNS[target]
    spreads = []
    for path in sorted((DATA / folder).glob("*-gt.csv")):
        rows = pd.read_csv(path, sep="|")
        rows = rows[rows["passed"].astype(str) == "True"]
        for _, values in rows.groupby("bs")[column]:
            if len(values) > 1:
                spreads.append(float((values.max() - values.min()) / values.mean()))
    if not spreads:
        return {"pairs": 0}
    return {"pairs": len(spreads), "median_pct": round(100 * float(np.median(spreads)), 3),
            "p90_pct": round(100 * float(np.quantile(spreads, 0.9)), 3)}


def main() -> None:
    from tracker.fingerprint.dataset import feature_columns, load_rows
    from tracker.fingerprint.train import extra_trees, lgbm
    from tracker.imports.perf4sight import DEVICE, import_perf4sight
    from tracker.log.logger import RunLogger
    from tracker.settings import resolve_location
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    if not DATA.is_dir():
        sys.exit(f"perf4sight data not found at {DATA}")
    result: dict = {"protocol_accuracy": {}, "baseline_protocol_accuracy": {}, "smooth_oracle_protocol_accuracy": {},
                    "neighbour_interpolation_protocol_accuracy": {}, "neighbour_interpolation_rows": {},
                    "leave_one_out_mape_pct": {},
                    "baseline_leave_one_out_mape_pct": {}, "published": PUBLISHED, "network_model_chosen": {},
                    "lgbm_alone_protocol_accuracy": {}, "lgbm_alone_leave_one_out_mape_pct": {}}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        logger = RunLogger(str(Path(tmp, "runs")), experiment="perf4sight-tx2")
        stats = import_perf4sight(logger, DATA)
        logger.close()
        load(Path(tmp, "w.duckdb"), open_source(resolve_location(str(Path(tmp, "runs")))))
        result["import_and_load_s"] = round(time.perf_counter() - t0, 1)
        result["imported"] = stats
        for target in PUBLISHED:
            frame = load_rows(Path(tmp, "w.duckdb"), target, "training", DEVICE)
            chosen: list = []
            fitted: dict = {}
            acc, loo = evaluate(frame, target, None, chosen, fitted)
            if target == "peak_mem_mb":
                result["fit_verdicts_leave_one_out"] = fit_verdicts(fitted, feature_columns(list(frame.columns), target))
            base_acc, base_loo = evaluate(frame, target, extra_trees, [])
            lgbm_acc, lgbm_loo = evaluate(frame, target, lgbm, [])
            result["network_model_chosen"][target] = chosen
            result["lgbm_alone_protocol_accuracy"][target] = round(lgbm_acc, 2)
            result["lgbm_alone_leave_one_out_mape_pct"][target] = {k: round(v, 2) for k, v in lgbm_loo.items()}
            result["protocol_accuracy"][target] = round(acc, 2)
            result["baseline_protocol_accuracy"][target] = round(base_acc, 2)
            result["smooth_oracle_protocol_accuracy"][target] = round(smooth_oracle(frame, target), 2)
            fit_acc, fit_rows = feature_fit(frame, target)
            result.setdefault("feature_fit_protocol_accuracy", {})[target] = round(fit_acc, 2)
            result.setdefault("feature_fit_rows", {})[target] = fit_rows
            neighbour_acc, neighbour_rows = neighbour_interpolation(frame, target)
            result["neighbour_interpolation_protocol_accuracy"][target] = round(neighbour_acc, 2)
            result["neighbour_interpolation_rows"][target] = neighbour_rows
            result["leave_one_out_mape_pct"][target] = {k: round(v, 2) for k, v in loo.items()}
            result["baseline_leave_one_out_mape_pct"][target] = {k: round(v, 2) for k, v in base_loo.items()}
            result[f"{target}_rows"] = len(frame)
            result.setdefault("repeat_spread_pct", {})[target] = repeat_spread(target)
            print(f"{target}: protocol accuracy {acc:.2f} (ExtraTrees {base_acc:.2f}, perf4sight published "
                  f"{PUBLISHED[target]:.0f}); leave-one-network-out MAPE "
                  + ", ".join(f"{k} {v:.1f} %" for k, v in loo.items()), file=sys.stderr)
    result["beats_published"] = all(result["protocol_accuracy"][t] > PUBLISHED[t] for t in PUBLISHED)
    result["meets_target"] = all(
        result["protocol_accuracy"][t] >= PROTOCOL_TARGET[t]
        and max(result["leave_one_out_mape_pct"][t].values()) <= LOO_TARGET_PCT[t] for t in PUBLISHED)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
