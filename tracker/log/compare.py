"""``tracker runs compare A B``: two measurement runs side by side, after pyperf's ``compare_to``.

Before any figure, what could make the comparison meaningless is said: the configurations'
differences (network, batch size, device, mode: usually what is being compared) and the
environments' (``env.*`` tags such as the CPU model, torch version and kernel settings, and the
tracker version): two results from different environments are shown with that warning, as
pyperf does.

Latency is judged three ways, the first that applies giving the verdict:

1. The drift-aware 95 % CIs of the two medians overlap: *not significant*.
   Where either run has no CI and neither has samples (an imported run, a training job logged
   before tracker 0.7.3), the change is *not judged*.
2. Both runs kept their raw samples (``tracker.log.samples``): a two-sided Mann-Whitney U test
   on their *block* medians (consecutive samples of one block are not independent; blocks are)
   at ``ALPHA``; a p-value above it: *not significant*.
3. Repeats of either configuration in the experiment (``profile network --again``, campaign
   ``repeats``) lie as far apart as the change, both as a factor (max / min of the repeats, the
   larger of B/A and A/B), or further: *within drift* (a CI covers its own window
   only; on a shared machine two windows minutes apart can differ by more than either's CI).

Otherwise the change is *significant*. A change is said in per cent (``+12.3 %``) while the ratio B/A
is within 1/1000 and 1000, and past that as the ratio itself in powers of ten (``1e+600x``), as
pyperf's ``compare_to`` says a change as a ratio (``console.change``): a percentage was ``+inf %``, or
some 300 digits, or ``-100.0 %`` for a B far from nothing, until 0.9.14; in JSON since 0.9.15 as
``ratio_log10`` beside ``change_rel`` (:func:`change_said`). Other metrics (throughput, peak memory, power, energy,
utilisation, page faults) are single values per run: shown with their change, no verdict. A
metric one run lacks is absent there, never zero.

Where both runs timed the speed probe (``tracker.profile.probe``, since 0.9.10 here), the machine's
speed is compared as well: how far the probe moved, and the latency change at the machine's speed
(latency over probe), with a warning where the machine moved by more than ``PROBE_MOVED_REL``: on
a shared machine two runs minutes apart can differ by its speed alone.

Where both runs hold more, it is compared too: their layer runs (nested under them, matched by
layer name; the ``TOP`` that moved most, each marked where the two layers' CIs do not overlap),
and their torch.profiler operator tables (``--trace``: matched by operator, self time per
iteration on the table's time basis) and, traced on a GPU, their kernels (device time).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tracker.console import float_ratio, ratio_log10, relative_change
from tracker.errors import DamagedArtifactError, TrackerError, first_line
from tracker.log.record import KEY_TAG, KIND_TAG
from tracker.log.samples import SAMPLES_ARTIFACT, Samples, read_samples
from tracker.log.store import is_run_id_prefix
from tracker.profile.trace import TRACE_TAG, normalized

#: Significance level of the block-median test.
ALPHA = 0.05
#: Metrics shown besides latency, where a run has them.
METRICS = ("latency_ms", "latency_p90_ms", "latency_p99_ms", "throughput_per_s", "peak_mem_mb", "network_mem_mb",
           "tensor_peak_mb",  # a CPU step's tensors at most (since 0.9.31)
           "energy_per_iter_j", "power_w", "cpu_util_pct", "cpu_util_others_pct", "gpu_util_pct",
           "page_faults_per_iter_count", "host_share_pct", "speed_probe_ms",  # the machine's speed (0.9.10)
           "step_time_ms", "data_wait_frac")  # a training job's step and its wait for data (since 0.9.1)
#: How far the machine's speed may move between two runs (their speed probes' medians, relative) before a
#: comparison warns that a latency change may be the machine's: the probe's own median moves by a few per
#: cent between brackets of one measurement on a quiet machine.
PROBE_MOVED_REL = 0.05
#: Parameters that make a configuration (differences are shown, not warned about). Since 0.9.1 a
#: memory cap (two runs apart by it alone read as one configuration) and a training job's loader
#: settings and dataset (two jobs apart by their prefetch factor listed no difference); since 0.9.8 its
#: dataset's folder (two folders of one name listed none).
CONFIGURATION = ("model", "model_hash", "batch_size", "input_size", "input_shape", "phase", "device", "precision", "mode",
                 "memory_limit_mb", "dataset", "data_path", "num_workers", "prefetch_factor", "num_epochs", "max_steps",
                 "layer_index", "layer_name", "op_type")  # a layer's own (two layers read as one shape apart until 0.9.4)
#: What a run's environment is: its env.* tags and these.
ENVIRONMENT_TAGS = ("tracker.version",)
#: Kinds with a latency to compare.
MEASURED_KINDS = ("network", "training", "layer")
#: Shortest run id prefix taken (``runs list`` shows 12 characters).
MIN_PREFIX = 6
#: Layers and operators listed: those whose time moved most.
TOP = 10


@dataclass
class Side:
    run_id: str
    name: str
    kind: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    samples: Samples | None
    repeat_medians: list[float]  # latency medians of every FINISHED run of its configuration
    layers: dict[str, dict[str, Any]] | None = None  # layer name -> op_type, latency_ms, latency_ci_rel
    ops: dict[str, Any] | None = None  # the torch.profiler operator table (trace/ops.json), if traced
    status: str = "FINISHED"  # KILLED: interrupted, compared on what it kept (a training job's steps)
    deleted: bool = False  # deleted in the store (found by its id): compared, and said (unsaid until 0.9.4)
    samples_unreadable: str | None = None  # why its samples artifact could not be read (judged without it)
    ops_unreadable: str | None = None  # why its operator table could not be read (compared without it; unsaid until 0.9.16)

    def environment(self) -> dict[str, str]:
        return {k: v for k, v in self.tags.items() if k.startswith("env.") or k in ENVIRONMENT_TAGS}


def check_run_reference(ref: str) -> None:
    """A TrackerError unless ``ref`` is of a run id's form: 32 characters, or a prefix of at least
    ``MIN_PREFIX`` hex digits (what is in the store is asked after)."""
    given, ref = ref, ref.strip().lower()
    if len(ref) != 32 and (len(ref) < MIN_PREFIX or not is_run_id_prefix(ref)):
        raise TrackerError(f"{given.strip()!r} is not a run id: give a run id or its first {MIN_PREFIX} characters or more "
                           "(tracker runs list shows them)")


def preferred(matches: list[tuple[str, str]]) -> list[str]:
    """The run ids of (run id, kind) ``matches`` a reference names: a network's layer runs (the many) only
    where nothing else matched."""
    return [rid for rid, kind in matches if kind != "layer"] or [rid for rid, kind in matches if kind == "layer"]


def resolve_in_sql(store: Any, experiment: Any, ref: str,
                   kinds: tuple[str, ...] | None) -> tuple[Any, Path] | None:
    """The run ``ref`` names read in SQL (``SqlStore.shown_run``) and the folder of its artifacts, where the
    store is a database, ``ref`` names exactly one run as :func:`resolve_run`'s first lookup finds it (its full
    id, of any experiment, or a prefix of one of the experiment's active runs of ``kinds``, every kind where None,
    its layer runs only where nothing else matches) and its artifacts lie in a folder here; else None (MLflow's
    lookup answers, and says what it does not find). A reference not of a run id's form is the error it always
    was. ``runs show`` and ``runs compare`` read so (since 0.9.34)."""
    if getattr(store, "shown_run", None) is None:
        return None
    from tracker.log.inspect import artifact_folder

    check_run_reference(ref)
    rid = ref.strip().lower()
    if len(rid) != 32:
        found = preferred(store.runs_with_prefix(experiment, rid, kinds))
        if len(found) != 1:
            return None
        rid = found[0]
    shown = store.shown_run(rid)
    folder = None if shown is None else artifact_folder(shown.artifact_uri)
    return None if folder is None else (shown, folder)


def resolve_run(client: Any, store: Any, experiment: Any, ref: str,
                kinds: tuple[str, ...] | None = MEASURED_KINDS) -> Any:
    """The run a full id or a unique prefix (of at least ``MIN_PREFIX`` characters) names,
    looked up among the experiment's runs of ``kinds`` (measurement runs unless told; every run,
    tracker's or not, where None): in the store's own index (one query on a database; a scan of
    run ids through a tracking server), then read whole."""
    check_run_reference(ref)  # said as given ("...ee8xx" of "...ee8XX" until 0.9.4)
    ref = ref.strip().lower()
    if len(ref) == 32:
        try:
            return client.get_run(ref)
        except Exception:  # noqa: BLE001 - MLflow raises its own exception for an unknown id
            if sent := _sent_as(client, ref):  # the id a run had in the outbox
                return client.get_run(sent[0])
            raise TrackerError(f"no run {ref} in this store") from None
    found = preferred(store.runs_with_prefix(experiment, ref, kinds))
    others: list[Any] = []  # the other experiments, listed where this one has no such run (below: it has none)
    if not found:  # in another experiment, as a full id is found (until 0.9.1: "no run", for the id profile printed)
        from tracker.log.search import every_experiment

        # every page of them (until 0.9.8 the newest 1000: a store of more left its oldest unsearched)
        others = [e for e in every_experiment(client) if str(e.experiment_id) != str(experiment.experiment_id)]
        found = preferred([m for e in others for m in store.runs_with_prefix(e, ref, kinds)])
    if not found:  # the id it had in the outbox, which the command that measured it printed (unfound until 0.9.2)
        found = _sent_as(client, ref)
    if not found:  # a deleted run (MLflow's soft delete), as its full id is found (unfound until 0.9.2); of any
        # experiment, every page (until 0.9.8 the current experiment's first 1000 deleted runs only, then those of
        # the newest 1000 experiments only)
        found = preferred(_deleted_with_prefix(client, ref, kinds))
    if not found and kinds == MEASURED_KINDS:  # a run of another kind (a mode run, say): said as that (until 0.9.2, "no run")
        from tracker.log.inspect import KINDS  # a fingerprint's run too, in any experiment (until 0.9.8: this one's
        # runs of the record kinds only, the rest "no measurement run")

        rest = tuple(k for k in KINDS if k not in kinds)
        other = next((hit for e in (experiment, *others) for hit in store.runs_with_prefix(e, ref, rest)), None)
        # a run tracker did not make (a user's own MLflow script's), as its full id is (until 0.9.13, "no measurement run")
        other = other or next((hit for e in (experiment, *others) for hit in store.runs_with_prefix(e, ref, None)
                               if hit[1] not in kinds), None)
        if other is not None:
            what = f"a {other[1]} run" if other[1] else "not a tracker run"
            raise TrackerError(f"run {other[0][:12]} is {what}, not a measurement: give a "
                               f"{', '.join(kinds[:-1])} or {kinds[-1]} run")
    if not found:
        what = "measurement run" if kinds == MEASURED_KINDS else "run"
        raise TrackerError(f"no {what} whose id starts with {ref} in experiment {experiment.name!r} or any other")
    if len(found) > 1:
        raise TrackerError(f"{ref} names {len(found)} runs ({', '.join(rid[:12] for rid in found[:4])}"
                           f"{', ...' if len(found) > 4 else ''}): give more of its id")
    return client.get_run(found[0])


def _deleted_with_prefix(client: Any, ref: str, kinds: tuple[str, ...] | None) -> list[tuple[str, str]]:
    """(run id, kind) of the deleted runs of ``kinds`` (of any kind, or none, where None) whose id
    starts with ``ref``, in every experiment of the store (a deleted one's too), read page by page,
    a few experiments a search."""
    from mlflow.entities import ViewType

    from tracker.log.inspect import SEARCH_MOST
    from tracker.log.search import every_experiment, runs_of

    experiments = [str(e.experiment_id) for e in every_experiment(client, ViewType.ALL)]
    return sorted((r.info.run_id, r.data.tags.get(KIND_TAG, ""))
                  for r in runs_of(client, experiments, "", ViewType.DELETED_ONLY, SEARCH_MOST)
                  if r.info.run_id.startswith(ref) and (kinds is None or r.data.tags.get(KIND_TAG) in kinds))


def _sent_as(client: Any, ref: str) -> list[str]:
    """The ids on a tracking server of the runs whose id in the outbox (the one the command that
    measured them printed, while the server was unreachable) starts with ``ref``: their tag
    ``tracker.write`` is ``BATCH/OUTBOX_ID``."""
    from tracker.log.outbox import WRITE_TAG
    from tracker.log.search import every_experiment, runs_of

    if not is_run_id_prefix(ref):
        return []
    experiments = [str(e.experiment_id) for e in every_experiment(client)]
    runs = runs_of(client, experiments, f"tags.`{WRITE_TAG}` LIKE '%/{ref}%'")
    return [r.info.run_id for r in runs if r.data.tags.get(WRITE_TAG, "").rpartition("/")[2].startswith(ref)]


@dataclass(frozen=True)
class _Run:
    """A run as a comparison reads it, from MLflow's client or in SQL."""

    run_id: str
    name: str
    status: str
    lifecycle_stage: str
    experiment_id: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]


class _ClientRuns:
    """What a comparison reads of a store beside its two runs, through MLflow's client."""

    def __init__(self, client: Any, uri: str) -> None:
        self.client, self.uri = client, uri

    def has_samples(self, run_id: str) -> bool:
        return any(a.path == SAMPLES_ARTIFACT for a in self.client.list_artifacts(run_id, SAMPLES_ARTIFACT.split("/")[0]))

    def artifact(self, run_id: str, path: str) -> bytes:
        from tracker.log.artifacts import artifact_bytes

        return artifact_bytes(self.uri, run_id, path)

    def repeats(self, run: _Run, key: str, kind: str) -> list[dict[str, float]]:
        found = self.client.search_runs([run.experiment_id], f"tags.`{KEY_TAG}` = '{key}' AND tags.`{KIND_TAG}` = "
                                        f"'{kind}' AND attributes.status = 'FINISHED'", max_results=REPEATS_READ)
        return [r.data.metrics for r in found]

    def layers(self, run: _Run) -> list[tuple[str, dict[str, str], dict[str, float]]]:
        from tracker.log.inspect import layer_runs

        return [(r.info.run_id, r.data.params, r.data.metrics) for r in layer_runs(self.client, run.experiment_id,
                                                                                    run.run_id)]


class _FolderRuns:
    """The same read in SQL from a database store, and from the runs' artifact folders here (since 0.9.34)."""

    def __init__(self, store: Any, folders: dict[str, Path]) -> None:
        self.store, self.folders = store, folders

    def has_samples(self, run_id: str) -> bool:
        return (self.folders[run_id] / SAMPLES_ARTIFACT).exists()

    def artifact(self, run_id: str, path: str) -> bytes:
        from tracker.log.inspect import folder_bytes

        return folder_bytes(self.folders[run_id], path)

    def repeats(self, run: _Run, key: str, kind: str) -> list[dict[str, float]]:
        return [r.metrics for r in self.store.finished_runs_of(run.experiment_id, key, kind, REPEATS_READ)]

    def layers(self, run: _Run) -> list[tuple[str, dict[str, str], dict[str, float]]]:
        found = self.store.finished_layer_runs(run.experiment_id, run.run_id)  # in layer order, as layer_runs sorts
        return [(r.run_id, r.params, r.metrics) for r in sorted(found, key=lambda r: int(r.params.get("layer_index", 0)))]


#: The most runs of a configuration a comparison reads to tell how far its repeats lie apart.
REPEATS_READ = 1000


def _client_run(run: Any) -> _Run:
    return _Run(run.info.run_id, run.info.run_name, run.info.status, run.info.lifecycle_stage,
                str(run.info.experiment_id), dict(run.data.params), dict(run.data.metrics), dict(run.data.tags))


def _in_sql(store: Any, experiment: Any, refs: tuple[str, str]) -> tuple[_Run, _Run, _FolderRuns] | None:
    """Both runs ``refs`` name read in SQL, and what reads the rest so, where :func:`resolve_in_sql` reads each
    (a measurement run's prefix); else None (MLflow's client reads them, and says what it does not find)."""
    runs, folders = [], {}
    for ref in refs:
        if (found := resolve_in_sql(store, experiment, ref, MEASURED_KINDS)) is None:
            return None
        shown, folder = found
        run = shown.run
        runs.append(_Run(run.run_id, run.name, run.status, shown.lifecycle_stage, shown.experiment_id, run.params,
                         run.metrics, run.tags))
        folders[run.run_id] = folder
    return runs[0], runs[1], _FolderRuns(store, folders)


def _side(reader: _ClientRuns | _FolderRuns, run: _Run) -> Side:
    from tracker.log.inspect import shown_metrics

    rid, tags, metrics = run.run_id, run.tags, shown_metrics(run.metrics)
    kind = tags.get(KIND_TAG, "")
    # An interrupted run that kept what it measured (a training job's steps) compares on those
    # (refused as "nothing measured" until 0.9.3); a failure has nothing.
    if run.status != "FINISHED" and not (run.status == "KILLED" and "latency_ms" in metrics):
        reason = tags.get("tracker.failure_reason")
        raise TrackerError(f"run {rid[:12]} is {run.status}{f' ({reason})' if reason else ''}: nothing measured to compare")
    if kind not in MEASURED_KINDS:
        what = f"a {kind} run" if kind else "not a tracker run"
        raise TrackerError(f"run {rid[:12]} is {what}, without a latency: compare network, training or layer runs")
    if "latency_ms" not in metrics:  # an import's memory alone, say: told to compare a training run it was
        # (`is a training run, without a latency: compare network, training or layer runs` until 0.9.10)
        raise TrackerError(f"run {rid[:12]} is a {kind} run that has no latency (it measured memory alone, say): nothing "
                           f"to judge a change in latency on; `tracker runs show {rid[:12]}` shows what it has")
    samples = unreadable = None
    if reader.has_samples(rid):
        try:
            samples = read_samples(reader.artifact(rid, SAMPLES_ARTIFACT), f"run {rid[:12]}")
        except DamagedArtifactError as exc:  # judged without them, and said (the comparison refused until 0.9.8)
            unreadable = str(exc).removeprefix(f"run {rid[:12]}: ")
    medians = [float(metrics["latency_ms"])]
    key = tags.get(KEY_TAG)
    if key:
        medians = [float(m["latency_ms"]) for m in map(shown_metrics, reader.repeats(run, key, kind))
                   if "latency_ms" in m] or medians
    layers: dict[str, dict[str, Any]] | None = None
    if kind != "layer":
        named: dict[str, dict[str, Any]] = {}
        for layer_id, params, layer_metrics in reader.layers(run):
            shown = shown_metrics(layer_metrics)
            if "latency_ms" not in shown:
                continue
            name = base = params.get("layer_name", layer_id)
            k = 1
            while name in named:  # a module called twice: its second call is name#2
                k += 1
                name = f"{base}#{k}"
            named[name] = {"op_type": params.get("op_type"), "latency_ms": shown["latency_ms"],
                            "latency_ci_rel": shown.get("latency_ci_rel")}
        layers = named or None
    ops, ops_unreadable = _operator_table(lambda path: reader.artifact(rid, path), tags.get(TRACE_TAG))
    return Side(rid, run.name, kind, dict(run.params), metrics, dict(tags), samples,
                medians, layers, ops, run.status, run.lifecycle_stage == "deleted", unreadable, ops_unreadable)


def _operator_table(read: Callable[[str], bytes], path: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """A traced run's operator table (its artifact at ``path``, the trace tag's), or none and why it
    cannot be read: gone from its artifacts, not JSON, or not a table. The runs are then compared
    without it, and said so (silently until 0.9.16: the operators' section was missing, unexplained)."""
    if not path:
        return None, None
    from tracker.decode import Undecodable, loads_json

    try:
        text = read(path)
    except DamagedArtifactError as exc:
        return None, str(exc)
    try:
        table = loads_json(text)
        if not isinstance(table, dict) or not isinstance(table.get("ops"), list):
            raise ValueError("not an operator table")
        ops = normalized(table)
        compare_ops(ops, ops)  # read as a comparison reads it: each row as it should be
        compare_kernels(ops, ops)
    except (Undecodable, ValueError, TypeError, KeyError, AttributeError) as exc:
        return None, f"{path}: {first_line(exc)}; cut short or edited?"
    return ops, None


def compare_layers(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], top: int = TOP) -> dict[str, Any]:
    """Layers of two network runs matched by name: their sums, and the ``top`` whose latency moved
    most (``apart``: the two layers' 95 % CIs do not overlap)."""
    both = sorted(set(a) & set(b))
    rows = []
    for name in both:
        la, lb = a[name], b[name]
        ma, mb = float(la["latency_ms"]), float(lb["latency_ms"])
        ca, cb = float(la.get("latency_ci_rel") or 0.0), float(lb.get("latency_ci_rel") or 0.0)
        rows.append({"layer": name, "op_type": la.get("op_type") or lb.get("op_type"), "a_ms": ma, "b_ms": mb,
                     "change_ms": mb - ma, **change_said(ma, mb),
                     "apart": ma * (1 + ca) < mb * (1 - cb) or mb * (1 + cb) < ma * (1 - ca)})
    rows.sort(key=lambda r: -abs(r["change_ms"]))
    return {"matched": len(both), "only_a": len(set(a) - set(b)), "only_b": len(set(b) - set(a)),
            "sum_a_ms": sum(r["a_ms"] for r in rows), "sum_b_ms": sum(r["b_ms"] for r in rows),
            "apart": sum(r["apart"] for r in rows), "top": rows[:top]}


def compare_ops(a: dict[str, Any], b: dict[str, Any], top: int = TOP) -> dict[str, Any] | None:
    """Two torch.profiler operator tables matched by operator: self time per iteration on their
    common time basis, the ``top`` that moved most (an operator one run lacks counts as 0 there:
    it did not run); None where the two were taken on different bases (CPU against GPU)."""
    if a.get("time_basis") != b.get("time_basis"):
        return None
    basis = a["time_basis"]
    ta = {o["op"]: float(o.get(basis) or 0.0) for o in a.get("ops", [])}
    tb = {o["op"]: float(o.get(basis) or 0.0) for o in b.get("ops", [])}
    return {"time_basis": basis, "operators": [len(ta), len(tb)], "total_a_ms": sum(ta.values()),
            "total_b_ms": sum(tb.values()), "top": _moved_most(ta, tb, "op", top)}


def compare_kernels(a: dict[str, Any], b: dict[str, Any], top: int = TOP) -> dict[str, Any] | None:
    """Two GPU traces' kernel tables matched by kernel name: device time per iteration, the
    ``top`` that moved most, and each trace's busy time; None unless both traces have kernels."""
    if not (a.get("kernels") and b.get("kernels")):
        return None
    ta = {k["kernel"]: float(k["self_device_ms"]) for k in a["kernels"]}
    tb = {k["kernel"]: float(k["self_device_ms"]) for k in b["kernels"]}
    return {"kernels": [len(ta), len(tb)], "busy_a_ms": sum(ta.values()), "busy_b_ms": sum(tb.values()),
            "traced_iteration_ms": [a.get("traced_iteration_ms"), b.get("traced_iteration_ms")],
            "top": _moved_most(ta, tb, "kernel", top)}


def _moved_most(ta: dict[str, float], tb: dict[str, float], name: str, top: int) -> list[dict[str, Any]]:
    """Times per iteration of two tables matched by ``name`` (one a table lacks counts as 0 there:
    it did not run), the ``top`` whose time moved most first."""
    rows = [{name: n, "a_ms": ta.get(n, 0.0), "b_ms": tb.get(n, 0.0), "change_ms": tb.get(n, 0.0) - ta.get(n, 0.0)}
            for n in set(ta) | set(tb)]
    rows.sort(key=lambda r: (-abs(r["change_ms"]), r[name]))
    return rows[:top]


def block_medians(s: Samples) -> list[float]:
    """Medians of the samples' full blocks (each ``block_n`` consecutive samples)."""
    n = s.block_n
    return [statistics.median(s.samples_ms[i:i + n]) for i in range(0, len(s.samples_ms) - n + 1, n)]


def _differences(a: dict[str, str], b: dict[str, str], keys: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    names = keys if keys is not None else tuple(sorted(set(a) | set(b)))
    return [{"key": k, "a": a.get(k), "b": b.get(k)} for k in names if a.get(k) != b.get(k)]


def _drift(medians: list[float]) -> float | None:
    """How far the repeats of one configuration lie apart, on the scale of a change: max / min - 1;
    None for one run."""
    if len(medians) < 2 or min(medians) <= 0:
        return None
    return max(medians) / min(medians) - 1.0


def _ci(s: Side) -> tuple[float, float]:
    """The 95 % CI of a side's median latency (ms); a layer run keeps its relative half-width only,
    ``latency_ci_rel``, taken about its median (layer runs were "not judged" until 0.9.4); NaN where
    the run has neither."""
    m = s.metrics
    if "latency_ci_low_ms" in m and "latency_ci_high_ms" in m:
        return m["latency_ci_low_ms"], m["latency_ci_high_ms"]
    if (rel := m.get("latency_ci_rel")) is not None and math.isfinite(rel):
        return m["latency_ms"] * (1.0 - rel), m["latency_ms"] * (1.0 + rel)
    return math.nan, math.nan


def change_said(a: float, b: float, prefix: str = "") -> dict[str, float | None]:
    """The change from ``a`` to ``b`` as JSON says it: ``change_rel``, the float B/A - 1, None where that
    float is not the change; and ``ratio_log10``, log10(B/A) from the logarithms, finite where the float
    overflows or underflows, absent where B/A is no ratio (a zero, a sign change, an infinity). Until 0.9.14
    latencies of 1e-300 and 1e300 ms had a change_rel inf (null in JSON) and nothing else, a throughput of
    1.7e308 and 1e-300 a change_rel -1.0, where the text said 1e+600x and 5.9e-609x."""
    said: dict[str, float | None] = {f"{prefix}change_rel": relative_change(a, b)}
    if (power := ratio_log10(a, b)) is not None:
        said[f"{prefix}ratio_log10"] = power
    return said


def _change_size(change: dict[str, Any], prefix: str = "") -> float:
    """How far a change (:func:`change_said`) went, on the scale of a drift (max / min - 1): the larger
    of B/A and A/B, minus 1, so that a fall and a rise by one factor weigh the same (until 0.9.17 it was
    abs(change_rel): a fall from 11.5 to 10 ms, -13 %, lay "within" repeats 14 % apart, where the rise
    from 10 to 11.5 ms, +15 %, did not, and a fall to a tenth within repeats 6 times apart); inf where
    B/A is no ratio (a change from or to 0) or past a float's range."""
    power = change.get(f"{prefix}ratio_log10")
    if power is None:
        return math.inf
    power = abs(power)
    return 10.0 ** power - 1.0 if power < 300 else math.inf


def latency_verdict(a: Side, b: Side) -> dict[str, Any]:
    """The latency change from ``a`` to ``b`` and whether it is significant (see the module's doc)."""
    ma, mb = a.metrics["latency_ms"], b.metrics["latency_ms"]
    ci = {s.run_id: _ci(s) for s in (a, b)}
    (la, ha), (lb, hb) = ci[a.run_id], ci[b.run_id]
    out: dict[str, Any] = {**change_said(ma, mb), "ratio": float_ratio(ma, mb)}
    key = a.tags.get(KEY_TAG)
    out["same_configuration"] = key is not None and key == b.tags.get(KEY_TAG)
    # Repeats of one configuration: their change *is* the drift, which cannot then be its yardstick.
    drifts = [] if out["same_configuration"] else [
        d for d in (_drift(a.repeat_medians), _drift(b.repeat_medians)) if d is not None]
    out["repeat_drift_rel"] = max(drifts) if drifts else None
    out["repeats"] = [len(a.repeat_medians), len(b.repeat_medians)]
    if a.samples is not None and b.samples is not None:
        from tracker.profile.stats import mann_whitney_p

        xa, xb = block_medians(a.samples), block_medians(b.samples)
        out["blocks"] = [len(xa), len(xb)]
        if len(xa) >= 2 and len(xb) >= 2:
            out["p_value"] = mann_whitney_p(list(xa), list(xb))
    with_cis = all(map(math.isfinite, (la, ha, lb, hb)))
    overlap = with_cis and la <= hb and lb <= ha
    if overlap:
        out["verdict"], out["why"] = "not significant", "the 95 % CIs of the two medians overlap"
    elif out.get("p_value") is not None and out["p_value"] >= ALPHA:
        out["verdict"] = "not significant"
        out["why"] = (f"Mann-Whitney U on {out['blocks'][0]} and {out['blocks'][1]} block medians: "
                      f"p = {out['p_value']:.3g} (>= {ALPHA})")
    elif not with_cis and out.get("p_value") is None:
        out["verdict"] = "not judged"
        out["why"] = ("A or B has neither a CI of its median nor raw samples (an imported run, a training job "
                      "from before tracker 0.7.3): nothing to test the change on")
    elif out["repeat_drift_rel"] is not None and _change_size(out) <= out["repeat_drift_rel"]:
        out["verdict"] = "within drift"
        out["why"] = (f"repeats of one configuration here lie up to {100 * out['repeat_drift_rel']:.1f} % apart, "
                      f"as far as this change or further")
    else:
        out["verdict"] = "significant"
        parts = ["the 95 % CIs do not overlap"] if with_cis else []
        if out.get("p_value") is not None:
            parts.append(f"Mann-Whitney U on block medians p = {out['p_value']:.3g}")
        if out["same_configuration"]:
            parts.append("A and B are repeats of one configuration: this is how far this machine moved between them")
        elif out["repeat_drift_rel"] is not None:
            parts.append(f"repeats lie up to {100 * out['repeat_drift_rel']:.1f} % apart")
        else:
            parts.append("no repeats of either configuration to show this machine's drift (profile --again)")
        out["why"] = "; ".join(parts)
    return out


def _busy_beside(a: Side, b: Side) -> dict[str, float | None]:
    """Each side's share of the CPU that other processes took while it was measured, where one of
    them was measured beside such work (``records.beside_other_work``): a change between the two
    may be theirs (empty otherwise)."""
    from tracker.profile.records import beside_other_work

    if not (beside_other_work(a.metrics) or beside_other_work(b.metrics)):
        return {}
    return {"a": a.metrics.get("cpu_util_others_pct"), "b": b.metrics.get("cpu_util_others_pct")}


def _host_bound(a: Side, b: Side) -> dict[str, float | None]:
    """Each side's ``host_share_pct`` where one of them was bound by its host (``records.bound_by_host``):
    a change between the two may be the host CPU's speed, not the device's (empty otherwise, and on a
    CPU, where none is kept)."""
    from tracker.profile.records import bound_by_host

    if not (bound_by_host(a.metrics) or bound_by_host(b.metrics)):
        return {}
    return {"a": a.metrics.get("host_share_pct"), "b": b.metrics.get("host_share_pct")}


def machine_speed(a: Side, b: Side) -> dict[str, Any]:
    """The machine's speed when each side was measured (its speed probe, ``tracker.profile.probe``),
    where both timed a probe of one version: how far it moved (``probe_change_rel``), the latency
    change at the machine's speed (``latency_change_rel``: of latency over probe, the unit a
    fingerprint learns in), each beside its ``*_ratio_log10`` (:func:`change_said`), and whether the
    machine moved by more than ``PROBE_MOVED_REL`` (past a float's range, it did). Probes of
    two versions are other units: only their versions are said. Empty where either has none (runs
    before tracker 0.9.9, training jobs before 0.9.11, imports, a probe that failed)."""
    from tracker.profile.probe import PROBE_TAG

    pa, pb = a.metrics.get("speed_probe_ms"), b.metrics.get("speed_probe_ms")
    if not (pa and pb and pa > 0 and pb > 0 and math.isfinite(pa) and math.isfinite(pb)):
        return {}
    versions = [a.tags.get(PROBE_TAG), b.tags.get(PROBE_TAG)]
    if versions[0] != versions[1]:
        return {"probe_versions": versions}
    moved = change_said(pa, pb, "probe_")
    at_speed = change_said(a.metrics["latency_ms"] / pa, b.metrics["latency_ms"] / pb, "latency_")
    return {**moved, **at_speed, "moved": _change_size(moved, "probe_") > PROBE_MOVED_REL}


def compare_runs(store: Any, experiment: Any, ref_a: str, ref_b: str) -> dict[str, Any]:
    """Runs ``ref_a`` and ``ref_b`` of ``experiment`` in ``store`` (``tracker.log.store``) compared
    (B against A): differences of configuration and environment, every metric both or either has,
    and the latency verdict."""
    if (in_sql := _in_sql(store, experiment, (ref_a, ref_b))) is not None:
        run_a, run_b, reader = in_sql
    else:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(store.location.uri)
        run_a, run_b = (_client_run(resolve_run(client, store, experiment, ref)) for ref in (ref_a, ref_b))
        reader = _ClientRuns(client, store.location.uri)
    if run_a.run_id == run_b.run_id:
        raise TrackerError(f"{ref_a} and {ref_b} are the same run ({run_a.run_id[:12]}): compare two runs")
    a, b = _side(reader, run_a), _side(reader, run_b)
    if (a.kind == "layer") != (b.kind == "layer"):  # a network against one of its layers (until 0.9.4: -99.9 %)
        layer, whole = (a, b) if a.kind == "layer" else (b, a)
        raise TrackerError(f"run {layer.run_id[:12]} is a layer run and {whole.run_id[:12]} a {whole.kind} run: "
                           "compare two layers, or two whole measurements")
    traced = bool(a.ops and b.ops)
    ops = compare_ops(a.ops, b.ops) if traced else None
    kernels = compare_kernels(a.ops, b.ops) if traced else None
    metrics = []
    for name in METRICS:
        va, vb = a.metrics.get(name), b.metrics.get(name)
        if va is None and vb is None:
            continue
        row: dict[str, Any] = {"metric": name, "a": va, "b": vb}
        if va is not None and vb is not None and va != 0 and not (math.isinf(va) and math.isinf(vb)):
            row.update(change_said(va, vb))  # none between two infinities (NaN, "+nan %")
        if name == "latency_ms":
            row["a_ci_rel"], row["b_ci_rel"] = a.metrics.get("latency_ci_rel"), b.metrics.get("latency_ci_rel")
        metrics.append(row)
    return {
        **{side: {"run_id": s.run_id, "name": s.name, "kind": s.kind, "mode": s.params.get("mode"),
                  "status": s.status, "deleted": s.deleted, "samples": s.samples is not None,
                  "samples_unreadable": s.samples_unreadable, "ops_unreadable": s.ops_unreadable}
           for side, s in (("a", a), ("b", b))},
        "configuration_differences": _differences(a.params, b.params, CONFIGURATION),
        "environment_differences": _differences(a.environment(), b.environment()),
        "busy_beside": _busy_beside(a, b),
        "host_bound": _host_bound(a, b),
        "metrics": metrics,
        "latency": latency_verdict(a, b),
        "machine_speed": machine_speed(a, b),
        **({"layers": compare_layers(a.layers, b.layers)} if a.layers and b.layers else {}),
        **({"operators": ops} if ops else {}),
        **({"kernels": kernels} if kernels else {}),
    }
