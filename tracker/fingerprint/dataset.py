"""What fingerprints learn from: rows of the ``measurement_features`` view.

Training reads the view from the warehouse. Prediction builds the very same view over an
in-memory warehouse holding only the new network's node rows and one unmeasured
configuration, so the features come from the same SQL both times (no train/serve skew).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from tracker.console import counted
from tracker.decode import loads_json
from tracker.fingerprint.runtime import TARGETS, FingerprintError
from tracker.settings import project_dir

VIEW = "measurement_features"
#: The labels: per configuration, the median of its repeated measurements (training only).
LABEL_VIEW = "measurement_labels"
#: Every measurement a label may be the median of, with its experiment (since 0.9.1).
LABELLED_VIEW = "labelled_measurements"
#: The labels over the named experiments' measurements alone (a table macro; ``LABEL_VIEW`` is it over
#: every experiment's): what ``load_rows`` learns from with experiments named (since 0.9.10; a twin of
#: the view's medians in Python before).
LABELS_MACRO = "measurement_labels_of"
#: Columns of the view that only a peak memory's floor reads (runtime.MEMORY_FLOOR_COLUMNS), no
#: model but a LIVE_TARGETS one's: added in 0.7.9, they leave every model's features as they were. A row's features (no
#: target named) carry them, for MLflow's pyfunc of a version that keeps a floor.
FLOOR_ONLY = {"live_activation_bytes", "batch_live_activation_bytes"}
#: Columns of the view that are not features: identities, targets and measurement quality.
NOT_FEATURES = {"run_id", "experiment", "phase", "device", "device_name", "mode", "precision", "model", "model_hash",
                "latency_ci_rel", "samples_count", "input_size", "threads", "label_repeats", "label_experiments",
                "label_run_ids", "label_probe_ratio", "label_speed_probe_ms", "label_probed_repeats",
                "label_speed_probe_version",
                "measured_latency_ms", *TARGETS}


#: Features whose span in the training rows a version records (tag ``trained_ranges``), so that a
#: prediction beyond them says so: trees do not extrapolate (past the largest batch they learnt,
#: they answer as for that batch), and a trend extrapolates only along its own features.
RANGE_FEATURES = ("batch_size", "params", "flops", "activation_bytes", "batch_flops", "batch_activation_bytes")


#: Columns that are no feature whose span a version records too: the input sizes it learnt from.
#: A network at a resolution never measured puts its layers' shapes where no network's were (on
#: the demo's fingerprints, learnt at 224 px, three unseen networks at 160 and 288 px were
#: predicted with a MAPE of 11 %, against 5 % at 224), which its FLOPs alone may not reveal.
RANGE_COLUMNS = ("input_size",)


def trained_ranges(frame: Any, features: list[str]) -> dict[str, list[float]]:
    """``{column: [min, max]}`` over the training rows, for the :data:`RANGE_FEATURES` learnt from
    and the :data:`RANGE_COLUMNS` the rows have; and, since 0.9.0, ``[0, 0]`` for each kind of
    operation none of them has (a ``*_count`` feature never above 0: grouped convolutions, say, in
    perf4sight's TX2 networks), so that a network that has one is said to be beyond what was learnt
    (a generated ResNeXt predicted from those was not)."""
    columns = [f for f in RANGE_FEATURES if f in features] + [c for c in RANGE_COLUMNS if c in frame.columns]
    out = {c: [float(frame[c].min()), float(frame[c].max())] for c in columns if frame[c].notna().any()}
    for f in features:
        if f.endswith("_count") and f in frame.columns and frame[f].notna().any() and float(frame[f].max()) == 0.0:
            out[f] = [0.0, 0.0]
    return out


def parse_ranges(text: str) -> dict[str, list[float]]:
    """A ``trained_ranges`` tag read back; ValueError naming the expected shape when it is not
    ``{feature: [min, max]}`` with two numbers, min no more than max."""
    try:
        raw = loads_json(text)
    except ValueError:
        raw = None
    out: dict[str, list[float]] = {}
    if isinstance(raw, dict):
        for feature, span in raw.items():
            if not (isinstance(span, list) and len(span) == 2
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in span)
                    and span[0] <= span[1]):
                break
            out[str(feature)] = [float(span[0]), float(span[1])]
        else:
            return out
    shown = text if len(text) <= 60 else text[:57] + "..."
    raise ValueError(f"expected a JSON object of {{feature: [min, max]}}, got {shown!r}")


def outside_ranges(ranges: dict[str, list[float]], row: Any) -> dict[str, dict[str, Any]]:
    """The features of one configuration ``row`` (a mapping) that lie outside ``ranges``, each with
    its value and the range learnt; an unknown value (NULL) is not outside anything, but for an
    input size learnt from images, a network whose input is no image is (value None)."""
    out: dict[str, dict[str, Any]] = {}
    for feature, (low, high) in ranges.items():
        try:
            value = float(row.get(feature))
        except (TypeError, ValueError):  # None or pandas' NA
            value = float("nan")
        if value != value:  # unknown: outside nothing, but an input size none is no image at all
            if feature in RANGE_COLUMNS:
                out[feature] = {"value": None, "trained": [low, high]}
            continue
        if not low <= value <= high:
            out[feature] = {"value": value, "trained": [low, high]}
    return out


def view_sql(view: str = VIEW) -> str:
    return (project_dir("sql") / f"{view}.sql").read_text()


def view_hash(*views: str) -> str:
    """Digest of what a fingerprint trains on: by default the features view and the labels view, with
    what the labels are taken over and the macro that takes them (a layer-level model's ``layer_features``,
    ``layer_labels``, ``layer_labels_of`` and, since 0.9.11, ``latest_layer_measurements`` are hashed apart:
    ``layers.LAYER_VIEWS``)."""
    return hashlib.sha256("".join(view_sql(v) for v in views or (VIEW, LABEL_VIEW, LABELLED_VIEW, LABELS_MACRO)
                                  ).encode()).hexdigest()[:16]


#: Features only the memory target learns from: the activation bytes autograd keeps for the
#: backward pass and the largest activation, times the batch size. They carry training memory to
#: networks of families never seen (perf4sight's TX2 data, one family left out in turn: the worst
#: family's MAPE falls from 11.1 to about 9 %), but a latency model reads them as a proxy of work
#: that does not carry over (TX2 latency, mobilenetv2 left out: 19.7 % becomes 26.8 %).
MEMORY_FEATURES = {"kept_activation_bytes", "batch_kept_activation_bytes", "batch_largest_activation_bytes"}
#: network_mem_mb (since 0.9.1): on a CPU, the part of the process's peak the network added (its
#: weights, activations and workspace), where peak_mem_mb is mostly the process (about 550 MB for
#: any small network at 64 px on this VM). tensor_peak_mb (since 0.9.34): on a CPU, the most bytes of the
#: network's tensors alive at once over a step (tracker.profile.tensors), the same in every process, where
#: network_mem_mb moves with where the C allocator put them (a generated network 28.9 to 48.1 MB in four runs).
MEMORY_TARGETS = {"peak_mem_mb", "network_mem_mb", "tensor_peak_mb"}
#: Targets that learn from FLOOR_ONLY's columns too (since 0.9.34): tensor_peak_mb is the tensors alive at
#: once, what the live activation bytes describe (in inference, a network's tensor peak over its weights and
#: live activations was a median 1.05 on the demo's 25 networks), and a target new in 0.9.34 has no earlier
#: version whose features to keep. Its additive trend sums them too (runtime.additive_features).
LIVE_TARGETS = {"tensor_peak_mb"}
#: What a fingerprint of tensor_peak_mb on a GPU says it lacks: there peak_mem_mb is that figure already.
TENSOR_PEAK_ON_GPU = ("; on a GPU, peak_mem_mb is the tensors' own peak (torch.cuda.max_memory_allocated, "
                      "cuda_max_allocated_mb): --target peak_mem_mb")


def feature_columns(columns: list[str], target: str | None = None) -> list[str]:
    """The columns a model of ``target`` learns from (with no target: every column a version may
    read, its floor's too)."""
    if target is None:
        skip = NOT_FEATURES
    else:
        skip = (NOT_FEATURES | (set() if target in LIVE_TARGETS else FLOOR_ONLY)
                | (set() if target in MEMORY_TARGETS else MEMORY_FEATURES))
    return [c for c in columns if c not in skip]


def memory_limits(warehouse: Path, run_ids: Sequence[str], phase: str, device: str,
                  dtype: str = "float32") -> tuple[float | None, int]:
    """What bounds a memory fingerprint's predictions, in one connection to the warehouse:

    - the largest device memory (MB, ``whole_network_runs.device_memory_mb``) the runs ``run_ids``
      recorded, None where none did (imported data without it, runs of tracker 0.5.0 and earlier):
      a prediction above it cannot fit on that device;
    - how many ``phase`` configurations on ``device`` (device, device name or mode, as
      :func:`load_rows` matches it) FAILED out of memory: reason ``oom``, or an import's failure
      that is mostly that (perf4sight's, its README says), not under a memory cap of tracker's (a
      smaller device's failure, not this one's), in the number format ``dtype`` (a bfloat16 run
      that failed says nothing of how far float32 goes). Where some did, the largest peak that ran
      marks how far the device is known to go.
    """
    from tracker.imports.perf4sight import FAILURE_REASON
    from tracker.warehouse.load import connect

    con = connect(warehouse, read_only=True)
    try:
        memory = con.execute("SELECT max(device_memory_mb) FROM whole_network_runs "
                             "WHERE run_id IN (SELECT unnest(CAST($ids AS VARCHAR[])))", {"ids": list(run_ids)}).fetchone()
        oom = con.execute(
            "SELECT count(*) FROM whole_network_runs w JOIN runs r USING (run_id) WHERE w.status = 'FAILED' "
            "AND r.failure_reason IN ('oom', $imported) AND w.memory_limit_mb IS NULL AND w.phase = $phase "
            "AND (w.device = $device OR w.device_name = $device OR w.mode = $device) "
            "AND COALESCE(w.precision, 'float32') = $dtype",
            {"imported": FAILURE_REASON, "phase": phase, "device": device, "dtype": dtype}).fetchone()
    finally:
        con.close()
    return (None if memory is None or memory[0] is None else float(memory[0])), int(oom[0])


#: torchvision's networks at several widths or versions, named with the multiplier (mnasnet0_5,
#: squeezenet1_1, shufflenet_v2_x1_5): one family each, the name before it.
_WIDTHS = re.compile(r"^(mnasnet|squeezenet|shufflenet_v2)(_x)?\d_\d+$")


def family(model: str) -> str:
    """The family of a network: its name without a pruning or index suffix (resnet50_30 -> resnet50,
    resnet18-p50-l1-s0 -> resnet18, gen-s0-0003 -> gen-s0), or a torchvision width multiplier
    (mnasnet0_5 -> mnasnet, shufflenet_v2_x1_0 -> shufflenet_v2; until 0.9.2 cut as if an index,
    mnasnet0_5 and mnasnet1_0 were two families, mnasnet0 and mnasnet1)."""
    model_ = re.sub(r"-p\d+(\.\d+)?(-[a-z]+\d*)*$", "", model)  # tracker's pruned specs: -p<pct>-<method>-s<seed>
    if width := _WIDTHS.match(model_):
        return width.group(1)
    return re.sub(r"([_-](p|pruned)?\d+(\.\d+)?)+$", "", model_) or model


def older_views(warehouse: Path, exc: Exception, macro: str | None = None) -> FingerprintError | None:
    """What to say, in one line, where a query of the labels failed on a warehouse an older tracker
    loaded (a load makes its views anew): ``macro`` (the labels macro the query called, named experiments
    only) not there (tracker 0.9.9 or before), or a view without ``speed_probe_version`` (0.9.10 or
    before), or labels without ``tensor_peak_mb`` (0.9.33 or before); None where ``exc`` is anything else.
    The network and the layer labels' queries both ask it."""
    import duckdb

    if isinstance(exc, duckdb.CatalogException) and macro is not None and macro in str(exc):
        from tracker.console import shell_word

        return FingerprintError(f"the warehouse {warehouse} has no {macro}, which learning from named experiments "
                                f"reads (a load by tracker 0.9.10 or later makes it): tracker warehouse load -w "
                                f"{shell_word(warehouse)}")
    if isinstance(exc, duckdb.BinderException) and "network_mem_current" in str(exc):
        from tracker.console import shell_word

        return FingerprintError(f"the warehouse {warehouse} has the views of an older tracker, without "
                                "network_mem_current (whether a measurement's network_mem_mb counts what this "
                                "tracker's does, which tracker 0.9.27 reads; a load by it adds it): tracker "
                                f"warehouse load -w {shell_word(warehouse)}")
    if isinstance(exc, duckdb.BinderException) and "tensor_peak_mb" in str(exc):
        from tracker.console import shell_word

        return FingerprintError(f"the warehouse {warehouse} has the views of an older tracker, whose labels have no "
                                "tensor_peak_mb (a load by tracker 0.9.34 or later adds it): tracker warehouse load -w "
                                f"{shell_word(warehouse)}")
    if isinstance(exc, duckdb.BinderException) and "speed_probe_version" in str(exc):
        from tracker.warehouse.load import older_probe_views

        return FingerprintError(older_probe_views(warehouse))
    return None


def check_node_rows(con: Any, warehouse: Path) -> None:
    """Refuse a warehouse whose node rows another ``NODE_ROWS_VERSION`` computed (a load by this tracker
    computes them again): a version learnt from them would be tagged with this tracker's version and given
    this tracker's features at predict, another description than it learnt (since 0.9.12; until then it
    learnt from them)."""
    from tracker.console import shell_word
    from tracker.describe.features import NODE_ROWS_VERSION
    from tracker.warehouse.load import recorded_node_rows_version

    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
    # none kept before 0.8.0, or no load at all: its views say what is wrong
    recorded = recorded_node_rows_version(con, tables)
    if recorded is not None and recorded != NODE_ROWS_VERSION:
        raise FingerprintError(f"the warehouse {warehouse} has node rows of another tracker's description (version "
                               f"{recorded}, this tracker's {NODE_ROWS_VERSION}), "
                               "which a fingerprint learnt from them would not be given at predict; a load by this tracker "
                               f"describes every network again: tracker warehouse load -w {shell_word(warehouse)}")


def load_rows(warehouse: Path, target: str, phase: str, device: str, mode: str | None = None,
              dtype: str = "float32", experiments: Collection[str] = (), empty_ok: bool = False) -> Any:
    """Measured rows of one target, phase and device (``device`` matches device, device_name or a
    device mode id such as ``cpu-t1-retain``); the target is the median of the configuration's
    repeats (``label_repeats`` of them). ``mode``: only the rows of that device mode. Rows of several
    device modes are refused: the same network has other latencies in each (threads, allocator,
    clocks), and no feature tells them apart. ``dtype``: only the rows measured in that number
    format (a run's ``precision``; since 0.8.5 the others are not mixed in: a network runs at
    another speed in bfloat16, and no feature tells that either). A row's ``latency_ci_rel`` and
    ``samples_count`` are those of the newest measurement its label is the median of, a measurement too
    imprecise to learn from left out of it where the configuration has a precise one (since 0.9.19;
    ``sql/measurement_labels_of.sql``): the latest run's until then.

    ``experiments``: only what was measured in them (since 0.9.1). A configuration's label is then
    the median of its measurements in those experiments alone, and its ``experiment``,
    ``latency_ci_rel`` and ``samples_count`` are those of the newest of them; ``label_experiments``
    lists the named experiments each row's label came from and ``label_run_ids`` its measurements'
    runs (what the version learnt from: its ``runs.json`` and digest). Before, a row was kept when the
    configuration's latest run was in one of them, and its label was the median over every
    experiment's repeats (a test set measured again later moved the labels learnt from).
    ``empty_ok``: no rows is an empty frame, not an error."""
    import duckdb

    from tracker.warehouse.load import connect_loaded

    if target not in TARGETS:
        raise FingerprintError(f"unknown target {target!r}: expected one of {', '.join(TARGETS)}")
    # the CI and samples of the newest measurement the label is the median of (the latest run's, without
    # experiments named, until 0.9.19: a precise repeat's label kept out of training where the newest was disturbed)
    replaced = f"l.{target} AS {target}, l.latency_ci_rel AS latency_ci_rel, l.samples_count AS samples_count"
    if experiments:  # measurement_labels' medians, over the named experiments' measurements alone (its macro)
        labels, replaced = f"{LABELS_MACRO}($experiments)", f"{replaced}, l.experiment AS experiment"
        extra, params = ", l.label_experiments, l.label_run_ids", {"experiments": sorted(set(experiments))}
    else:
        labels, extra, params = LABEL_VIEW, "", {}
    con = connect_loaded(warehouse)
    try:
        check_node_rows(con, warehouse)
        rows = (f"FROM {VIEW} f JOIN {labels} l USING (run_id) "
                f"WHERE f.phase = $phase AND (f.device = $device OR f.device_name = $device OR f.mode = $device) "
                f"AND ($mode IS NULL OR f.mode = $mode) AND COALESCE(f.precision, 'float32') = $dtype ")
        params = {"phase": phase, "device": device, "mode": mode, "dtype": dtype, **params}
        try:
            frame = con.sql(
                f"SELECT f.* REPLACE ({replaced}), l.repeats AS label_repeats{extra}, l.latency_probe_ratio AS label_probe_ratio, "
                "l.speed_probe_ms AS label_speed_probe_ms, l.probed_repeats AS label_probed_repeats, "
                f"l.speed_probe_version AS label_speed_probe_version {rows}"
                f"AND l.{target} IS NOT NULL AND l.{target} > 0 AND isfinite(l.{target}) ORDER BY f.model, f.batch_size",
                params=params,
            ).df()
            # configurations whose network_mem_mb only older trackers measured, counting more than the network
            # (labelled_measurements' network_mem_current; since 0.9.27): left out, and said
            older_count = con.sql(f"SELECT count(*) {rows}AND l.network_mem_mb IS NULL AND f.network_mem_mb > 0",
                                  params=params).fetchall()[0][0] if target == "network_mem_mb" else 0
        except duckdb.Error as exc:
            if (older := older_views(warehouse, exc, LABELS_MACRO if experiments else None)) is not None:
                raise older from None
            raise
        # where the target itself was measured, in which mode (every device and phase until 0.9.2: "no
        # inference measurements of energy_per_iter_j on 'cpu'; measured: cpu/... (inference)"), and whether
        # anything was: read only to say why there are no rows
        devices, measured = [], 0
        if frame.empty:
            devices = con.sql(f"SELECT DISTINCT device, device_name, mode, phase, COALESCE(precision, 'float32') "
                              f"FROM {VIEW} WHERE {target} IS NOT NULL AND {target} > 0 AND isfinite({target})").fetchall()
            measured = con.sql(f"SELECT count(*) FROM {VIEW}").fetchall()[0][0]
    finally:
        con.close()
    if frame.empty and not empty_ok and older_count:
        raise FingerprintError(f"no {phase} measurements of {target} on {device!r} in the warehouse that this tracker "
                               f"can learn from: {older_said(older_count)}")
    if frame.empty and not empty_ok:
        # the device's name where it is another word than the device ("jetson-tx2/jetson-tx2" until 0.9.5)
        known = ", ".join(sorted({f"{d}{f'/{n}' if n and n != d else ''} ({p}{f', mode {m}' if m else ''}"
                                  f"{'' if t == 'float32' else ', ' + t})"
                                  for d, n, m, p, t in devices}))
        where = f"device {device!r}" + (f" in mode {mode!r}" if mode else "") + (f" in {dtype}" if dtype != "float32" else "")
        raise FingerprintError(f"no {phase} measurements of {target} on {where} in the warehouse; "
                               + (f"{target} was measured on: {known}" if known else
                                  f"no measurement in it has {target} (tracker device show says what this machine "
                                  "measures)" if measured else  # a machine's want said of an empty one until 0.9.6
                                  "it holds no measurement yet: measure networks (tracker profile network, tracker "
                                  "campaign run), then tracker warehouse load")
                               + (TENSOR_PEAK_ON_GPU if target == "tensor_peak_mb" and device.startswith("cuda") else ""))
    modes = frame["mode"].fillna("(none)").value_counts()
    if len(modes) > 1:
        listed = ", ".join(f"{mode} ({counted(count, 'row')})" for mode, count in sorted(modes.items()))
        raise FingerprintError(f"the {phase} measurements of {target} on {device!r} ran in {len(modes)} device modes: "
                               f"{listed}; a fingerprint learns one: give its mode as --device")
    frame.attrs["left_out_older"] = int(older_count)
    return frame


def older_said(count: int) -> str:
    """What to say of ``count`` configurations left out of a network_mem_mb fingerprint because only
    older trackers measured them, whose figure counted more than the network (``records.NETWORK_MEM_SINCE``)."""
    from tracker.profile.records import network_mem_since_said

    return (f"{counted(count, 'configuration')} measured only by a tracker before {network_mem_since_said()}, "
            "whose network_mem_mb also counted what the network's first "
            "build (or quantization) left behind in the process, left out (a campaign run again measures them "
            "again, as profile network does)")


def speed_reference_ms(frame: Any) -> float | None:
    """The probe time a latency fingerprint's labels are put at (``at_reference_speed``): the median of
    its rows' probes, where every measurement each label is the median of timed this tracker's speed
    probe beside it (``tracker.profile.probe``, since 0.9.9; of its version, ``PROBE_VERSION``, since
    0.9.11: another version's is another unit); None where one did not (imports, older runs, a GPU's
    runs measured before, a probe of another version): their labels stay as measured
    (:func:`unprobed_why` says why)."""
    if not fully_probed(frame):
        return None
    return float(frame["label_speed_probe_ms"].median())


def _probed(rows: Any, ratio: str = "label_probe_ratio", repeats: str = "label_probed_repeats",
            version: str = "label_speed_probe_version") -> Any:
    """Per row, whether its label is the median over repeats that each timed this tracker's speed
    probe (its ``PROBE_VERSION``), and which of them say so."""
    from tracker.profile.probe import PROBE_VERSION

    timed = rows[ratio].notna() & (rows[repeats] == rows["label_repeats"])
    return timed, timed & rows[version].eq(PROBE_VERSION).fillna(False).astype(bool)


def fully_probed(rows: Any) -> bool:
    """Whether every label of ``rows`` (network rows of ``load_rows``, layer rows of
    ``layers.load_layer_rows``) is the median over repeats that each timed the speed probe, of this
    tracker's version (since 0.9.11; the version was not looked at before): only then are they put at a
    reference speed, all of them (one unit in what a model learns)."""
    if rows.empty or "label_probe_ratio" not in rows.columns:
        return False
    return bool(_probed(rows)[1].all())


def network_probed(rows: Any) -> Any:
    """Per layer row of ``layers.load_layer_rows``, whether the whole network's latency over the same
    repeats (``network_latency_ms``) is the median over repeats that each timed this tracker's probe."""
    return _probed(rows, "label_network_probe_ratio", "label_network_probed_repeats",
                   "label_network_speed_probe_version")[1]


def unprobed_why(rows: Any, noun: str = "label", none_timed: bool = False) -> str | None:
    """Why the latency labels of ``rows`` stay as measured though not asked to (``fully_probed`` false):
    how many were measured without a speed probe, and how many with a probe of another version than this
    tracker's; None where they can be put at a reference speed, and where no measurement of theirs timed a
    probe (imports, runs before 0.9.9: there was never a speed to put them at) unless ``none_timed`` (the
    layer labels of network labels that were put at one: said then too). ``noun``: what a row is called
    (``layer label`` for ``layers.load_layer_rows``' rows)."""
    from tracker.profile.probe import PROBE_VERSION

    if rows.empty or "label_probe_ratio" not in rows.columns or fully_probed(rows):
        return None
    if not none_timed and not (rows["label_probed_repeats"] > 0).any():
        return None
    timed, current = _probed(rows)
    total = counted(len(rows), noun)
    why = []
    if missing := int((~timed).sum()):
        why.append(f"{missing} of its {total} {'has' if missing == 1 else 'have'} measurements without a speed probe (runs before tracker 0.9.9, "
                   "imports, a probe that failed)")
    if other := int((timed & ~current).sum()):
        versions = sorted({int(v) for v in rows.loc[timed & ~current, "label_speed_probe_version"].dropna()})
        which = (f"speed probe version {', '.join(map(str, versions))}" if versions else
                 "speed probes of versions that differ or go unsaid")
        why.append(f"{other} of its {total} {'has' if other == 1 else 'have'} measurements that timed {which}, not this tracker's version "
                   f"{PROBE_VERSION} (another unit)")
    return "; ".join(why)


def at_reference_speed(frame: Any, reference_ms: float) -> Any:
    """``frame`` with each latency label put at the machine's reference speed: its measurements'
    median of latency over probe, times ``reference_ms``. What the machine's speed did between them
    (this VM: 17.0 ms and 22.8 ms for one network an hour apart, the probe 1.7 and 2.3 ms) is taken
    out of what a fingerprint learns; the label as measured stays, ``measured_latency_ms``."""
    frame = frame.copy()
    frame["measured_latency_ms"] = frame["latency_ms"]
    frame["latency_ms"] = frame["label_probe_ratio"].astype(float) * reference_ms
    frame.attrs["speed_reference_ms"] = reference_ms
    # the probe's version its runs timed (one, ``speed_reference_ms`` takes none else): the reference's unit
    versions = frame["label_speed_probe_version"].dropna().unique() if "label_speed_probe_version" in frame.columns else []
    if len(versions) == 1:
        frame.attrs["speed_probe_version"] = int(versions[0])
    return frame


_SCRATCH: Any = None
#: The scratch warehouse's second connection (a cursor), which reads a prediction's layer rows
#: while the first reads its feature rows.
_SCRATCH_LAYERS: Any = None
#: The columns of its network_nodes table, read once (a network new to it has its node rows made).
_SCRATCH_NODE_COLUMNS: list[str] = []
#: One prediction at a time uses the scratch warehouse (its tables hold that prediction's rows).
_SCRATCH_LOCK = threading.Lock()
#: The networks whose description and node rows the scratch warehouse holds (committed), by description
#: hash, the one predicted last last. A hash names a description's content, so its rows are the same at
#: every prediction of it: since 0.9.17 they stay for the next (a prediction wrote and rolled back its
#: networks' rows each time until 0.9.16: about 3 ms of Python and SQL on each connection, and reading
#: rows of the transaction's own cost each query more, 6 ms of the layer rows' 35 on a busy machine).
#: The views join a configuration with its own network's rows alone, so others held change no row.
_SCRATCH_NETWORKS: dict[str, None] = {}
#: The most networks held past those of the prediction under way (16 more cost a prediction about 1 ms).
SCRATCH_NETWORKS_KEPT = 8
#: Optimizer passes the scratch warehouse skips: each costs a prediction up to 1.7 ms of planning (DuckDB
#: plans its two queries again at every prediction) and saves nothing over the few rows there; the
#: rows are the same without them (since 0.9.17; 96 configurations with 13,856 layer rows took no longer).
SCRATCH_SKIPPED_OPTIMIZERS = ("join_order", "statistics_propagation", "common_subplan", "common_subexpressions",
                              "projection_pullup", "top_n_window_elimination", "duplicate_groups",
                              "projection_placement")


def _empty_warehouse(threads: int | None = None) -> Any:
    """An in-memory DuckDB with every warehouse table and view, and no rows."""
    import duckdb

    from tracker.warehouse.load import ensure_tables
    from tracker.warehouse.views import create_views

    con = duckdb.connect(":memory:", config={"threads": threads} if threads else {})
    ensure_tables(con)
    create_views(con)
    return con


def scratch_warehouse() -> Any:
    """An in-memory warehouse with every table and view, made once per process, with the two
    feature queries prepared (parsed once; DuckDB 2.0 binds and optimises a prepared statement
    again at each EXECUTE, most of a prediction's SQL time), the layer query on a second
    connection of its own (``_SCRATCH_LAYERS``) so that the two run side by side. One thread
    each: its tables hold a few networks, and starting threads costs more than it saves."""
    global _SCRATCH, _SCRATCH_LAYERS, _SCRATCH_NODE_COLUMNS
    if _SCRATCH is None:
        from tracker.warehouse.load import node_columns

        con = _empty_warehouse(threads=1)
        con.execute(f"SET disabled_optimizers = '{','.join(SCRATCH_SKIPPED_OPTIMIZERS)}'")  # both connections'
        con.execute(f"PREPARE feature_rows AS SELECT * FROM {VIEW} ORDER BY run_id")
        layers = con.cursor()
        layers.execute(f"PREPARE layer_rows AS {_LAYER_ROWS}")
        _SCRATCH, _SCRATCH_LAYERS, _SCRATCH_NODE_COLUMNS = con, layers, node_columns(con)
    return _SCRATCH


#: The configurations asked for as unmeasured runs, from lists of their run ids, batch sizes, networks'
#: names and hashes and input sizes (parameters, where a registered table cost a prediction 1.5 ms more on
#: each connection until 0.9.16).
_UNMEASURED_RUNS = ("INSERT INTO network_runs (run_id, status, config_key, model, model_hash, batch_size, input_size, "
                    "phase, device, end_time) SELECT run_id, 'FINISHED', run_id, model, model_hash, batch_size, input_size, "
                    "$phase, $device, now() FROM (SELECT unnest($run_id::VARCHAR[]) AS run_id, "
                    "unnest($batch_size::BIGINT[]) AS batch_size, unnest($model::VARCHAR[]) AS model, "
                    "unnest($model_hash::VARCHAR[]) AS model_hash, unnest($input_size::BIGINT[]) AS input_size)")
#: Every module call of a configuration's network (the warehouse's runs: the unmeasured ones alone) becomes
#: one unmeasured layer run of it.
_UNMEASURED_LAYERS = ("INSERT INTO layer_runs (run_id, status, parent_run_id, model, model_hash, layer_index, layer_name, "
                      "op_type, batch_size, phase, device) SELECT c.run_id || '-' || CAST(n.node_index AS VARCHAR), "
                      "'FINISHED', c.run_id, n.model, n.model_hash, n.node_index, COALESCE(n.module_target, n.module_name), "
                      "n.kind, c.batch_size, "
                      "$phase, $device FROM node_features n JOIN network_runs c USING (model_hash)")
_LAYER_ROWS = "SELECT * FROM layer_features ORDER BY parent_run_id, layer_index"


def configuration_rows(descriptions: Sequence[Any], batch_sizes: list[int], phase: str, device: str,
                       with_layers: bool = False, with_rows: Callable[[Any], None] | None = None) -> Any:
    """``(rows, layer_rows)`` for networks that were never run, each at each batch size: the
    view's rows (same SQL, targets left empty), network by network in the order given, batch
    sizes in the order given, and, with ``with_layers``, the ``layer_features`` rows of their
    module calls (each call one unmeasured layer run of its configuration), else None. Many
    networks in one call share one pass of the feature SQL. ``with_rows(rows)``: called with those
    rows as soon as they are read, while the layer rows are still being read (``predict_grid`` runs
    the network-level boosters there; since 0.9.17).

    The networks' description and node rows are written first where the scratch warehouse does not
    hold them (``_SCRATCH_NETWORKS``). The scratch warehouse's two connections then each write the
    configurations their query reads in a transaction of their own, rolled back after it (no run
    stays for the next prediction), the layer rows' in a thread beside the feature rows' (DuckDB lets
    go of the GIL while it binds, plans and runs a query: about 10 ms less of a layer-level
    prediction on two cores).
    """
    with _SCRATCH_LOCK:
        con = scratch_warehouse()
        configs = [(i, d, bs) for i, d in enumerate(descriptions) for bs in batch_sizes]
        run_ids = [f"predict-{i}-{bs}" for i, _, bs in configs]
        runs = {"run_id": run_ids, "batch_size": [bs for _, _, bs in configs],
                "model": [d.name for _, d, _ in configs], "model_hash": [d.description_hash for _, d, _ in configs],
                "input_size": [d.image[0] if d.image else None for _, d, _ in configs]}
        unique: dict[str, Any] = {}
        for d in descriptions:  # two names of one architecture are one network (the first named)
            unique.setdefault(d.description_hash, d)
        _hold_networks(con, unique)

        def feature_rows() -> Any:
            rows = _scratch_query(con, runs, phase, device, False)
            if len(run_ids) > 1:  # back to the order asked for ("predict-10-1" sorts before "predict-2-1")
                rows = rows.set_index("run_id", drop=False).loc[run_ids].reset_index(drop=True)
            if with_rows is not None:
                with_rows(rows)
            return rows

        if not with_layers:
            rows, layer_rows = feature_rows(), None
        else:
            layer: dict[str, Any] = {}

            def read_layers() -> None:
                try:
                    layer["rows"] = _scratch_query(_SCRATCH_LAYERS, runs, phase, device, True)
                except BaseException as exc:  # raised in the caller's thread below
                    layer["error"] = exc

            thread = threading.Thread(target=read_layers, name="tracker-layer-rows", daemon=True)
            thread.start()
            try:
                rows = feature_rows()
            finally:
                thread.join()
            if "error" in layer:
                raise layer["error"]
            layer_rows = layer["rows"]
    return rows, layer_rows


def _hold_networks(con: Any, descriptions: dict[str, Any]) -> None:
    """Makes the scratch warehouse hold the description and node rows of each of ``descriptions`` (by
    hash), committed: those it lacks are written, in one transaction with the deletion of the rows of
    the networks predicted longest ago, past ``SCRATCH_NETWORKS_KEPT`` others. A network
    whose rows the database refuses (a value past its column's type): its error, and nothing of this
    call written or deleted."""
    from tracker.warehouse.load import insert_description, node_table

    for h in descriptions:  # the latest last
        if h in _SCRATCH_NETWORKS:
            _SCRATCH_NETWORKS[h] = _SCRATCH_NETWORKS.pop(h)
    new = [h for h in descriptions if h not in _SCRATCH_NETWORKS]
    others = [h for h in _SCRATCH_NETWORKS if h not in descriptions]
    stale = others[:max(0, len(others) - SCRATCH_NETWORKS_KEPT)]
    if not new and not stale:
        return
    con.execute("BEGIN TRANSACTION")
    try:
        # the new networks' too: rows a call stopped between its commit and the bookkeeping after it
        # wrote would be counted twice
        for table in ("network_nodes", "network_descriptions"):
            con.execute(f"DELETE FROM {table} WHERE list_contains($hashes, model_hash)", {"hashes": stale + new})
        for h in new:
            insert_description(con, descriptions[h], h, None, node_table(_SCRATCH_NODE_COLUMNS, descriptions[h], h))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    for h in stale:
        del _SCRATCH_NETWORKS[h]
    _SCRATCH_NETWORKS.update(dict.fromkeys(new))


def _scratch_query(con: Any, runs: dict[str, list[Any]], phase: str, device: str, layers: bool) -> Any:
    """On one connection of the scratch warehouse, in a transaction rolled back after: ``runs`` (the
    lists ``_UNMEASURED_RUNS`` takes) as unmeasured runs (their networks' rows held already:
    ``_hold_networks``), and with ``layers`` their module calls as unmeasured layer runs; then the layer
    rows (``layers``) or the feature rows."""
    import duckdb

    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(_UNMEASURED_RUNS, {**runs, "phase": phase, "device": device})
        if not layers:
            return con.execute("EXECUTE feature_rows").df()
        con.execute(_UNMEASURED_LAYERS, {"phase": phase, "device": device})
        return con.execute("EXECUTE layer_rows").df()
    except duckdb.OutOfRangeException:  # a traceback until 0.9.5 (8.8e12 FLOPs an input times 2^20 inputs)
        largest = max(runs["batch_size"])
        raise FingerprintError(f"at batch size {largest:,} a network's work (its FLOPs or activations times the "
                               "batch) is past what a 64-bit whole number holds: predict a smaller batch size") from None
    finally:
        con.execute("ROLLBACK")  # no run stays for the next prediction


def unmeasured_layer_rows(warehouse: Path, frame: Any, phase: str, device: str) -> Any:
    """``layer_features`` rows of the configurations in ``frame`` (rows of the view) as if their
    layers had never been measured: every module call of each network, from the warehouse's
    node rows, through the same SQL that prediction uses. Lets a layer-level model predict a
    measured configuration exactly as it would predict a new one."""
    import pandas as pd

    con = _empty_warehouse()
    try:
        con.execute("ATTACH ? AS source (READ_ONLY)", [str(warehouse)])
        hashes = sorted(set(frame["model_hash"]))
        for table in ("network_descriptions", "network_nodes"):
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM source.{table} WHERE list_contains($hashes, model_hash)",
                        {"hashes": hashes})
        con.execute("DETACH source")
        runs = {c: [None if pd.isna(v) else v for v in frame[c].tolist()]  # a NULL: NaN or NA in the frame
                for c in ("run_id", "batch_size", "model", "model_hash", "input_size")}
        con.execute(_UNMEASURED_RUNS, {**runs, "phase": phase, "device": device})
        con.execute(_UNMEASURED_LAYERS, {"phase": phase, "device": device})
        return con.sql(_LAYER_ROWS).df()
    finally:
        con.close()
