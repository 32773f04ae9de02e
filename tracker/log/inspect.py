"""Reading the store back for people: summary and run listings (through MLflow's client; a database
store's default listing and its runs shown in SQL)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from tracker.errors import TrackerError, first_line
from tracker.log.logger import RunLogger
from tracker.log.schema import KINDS as RECORD_KINDS
from tracker.settings import redacted

#: The kinds of run a store holds: those tracker logs through its record schema, and
#: ``fingerprint``, the run ``fingerprint train`` logs with each model version (through MLflow).
KINDS: tuple[str, ...] = (*RECORD_KINDS, "fingerprint")


def store_info(logger: RunLogger) -> dict[str, Any]:
    """What ``store info`` says of the store and its experiment; a database store's read in SQL
    (since 0.9.33), a server's through MLflow's client."""
    info: dict[str, Any] = {"tracking_uri": redacted(logger.location.uri)}  # a database's password as *** (since 0.9.2)
    if logger.location.artifact_root:
        info["artifact_root"] = logger.location.artifact_root
    schema_version = getattr(logger.store, "schema_version", None)
    if schema_version is not None:  # a tracking server keeps its schema to itself
        info["schema_version"] = schema_version()
    from tracker.log.relocate import old_roots

    moved = old_roots(logger.location)
    if moved:  # see tracker store relocate
        info["moved_from"] = ", ".join(str(p.parent) for p in sorted(moved))
    info["experiment"] = logger.experiment.name
    info["experiment_id"] = logger.experiment.experiment_id
    store = logger.store
    if hasattr(store, "count_runs") and hasattr(store, "experiment_names"):
        names, count = store.experiment_names(), store.count_runs(logger.experiment)
    else:
        from mlflow.tracking import MlflowClient

        from tracker.log.search import every_experiment

        client = MlflowClient(logger.location.uri)
        names = [e.name for e in every_experiment(client)]  # every page (the newest 1000 until 0.9.8)
        count = _count(client, logger.experiment.experiment_id)
    info["experiments"] = len(names)
    info["experiment_names"] = sorted(names, key=str.lower)  # a list (one string until 0.9.4: "a, b" read as two)
    info["runs_in_experiment"] = count
    return info


def run_metrics(run: Any) -> dict[str, float]:
    """A run's metrics (MLflow's run) as tracker shows them (runs list, show and compare): a value at or
    past the largest float is infinite. MLflow's SQL store keeps an infinity (``log_metric("x",
    float("inf"))`` in a user's script) as the largest float, +-1.797e308, which was shown as that number,
    309 digits in a table, until 0.9.13; JSON writes it null, as it does NaN."""
    return shown_metrics(run.data.metrics)


def shown_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """Metrics as :func:`run_metrics` shows them, from a dict of them (a run read in SQL)."""
    import math
    import sys

    most = sys.float_info.max
    return {k: math.copysign(math.inf, v) if isinstance(v, float) and abs(v) >= most else v
            for k, v in metrics.items()}


#: The most runs MLflow returns from one search (``max_results``); more are read page by page.
SEARCH_MOST = 50_000


def _count(client: Any, experiment_id: str, flt: str = "") -> int:
    """How many runs of the experiment the filter matches, counted page by page (SEARCH_MOST a page)."""
    total, token = 0, None
    while True:
        page = client.search_runs([experiment_id], filter_string=flt, max_results=SEARCH_MOST, page_token=token)
        total += len(page)
        token = page.token
        if not token:
            return total


#: The run statuses MLflow keeps (``runs list --status``).
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")


#: ``runs list``'s order: newest first; runs started together (a network's layers, logged in
#: one batch) by name, so that layers come in their order (000, 001, ...).
NEWEST_FIRST = ["attributes.start_time DESC", "attributes.run_name ASC"]


def list_runs(logger: RunLogger, kind: str | None = None, limit: int = 50,
              status: str | None = None, where: str | None = None, order_by: str | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` runs of the experiment (of one kind, one status; layer runs, the
    children of a network's run, only with ``kind`` given or a ``where`` naming the parent), each with why it
    failed where it did (``failure_reason``, and the tail of its measuring child's stderr).
    ``where``: an MLflow search filter too (``params.model = 'resnet18' AND metrics.latency_ms < 20``),
    and ``order_by`` one of MLflow's orderings (``metrics.latency_ms ASC``) instead of newest first
    (since 0.9.1); a filter MLflow cannot read is one line."""
    from tracker.log.record import PARENT_TAG

    check_list_options(kind, status, where, order_by)
    # a network's layer runs are its children, listed by --kind layer (or a --where naming the
    # parent), as the MLflow UI folds nested runs under their parent; before 0.9.4 they were listed
    # too, and a network's hundred layers hid it and every older run
    children = kind is not None or (where is not None and "parentrunid" in where.lower())
    newest = getattr(logger.store, "newest_runs", None)
    if newest is not None and not (where and where.strip()) and not (order_by and order_by.strip()):
        # the default listing of a database store: read in SQL, as MLflow's search would give it (since 0.9.33)
        return [_listed(r.run_id, r.name, r.status, r.tags, r.params, r.metrics)
                for r in newest(logger.experiment, limit, kind=kind, status=status.upper() if status else None,
                                children=children)]
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    flt = " AND ".join(([f"tags.`tracker.kind` = '{kind}'"] if kind else [])
                       + ([] if children else [f"tags.`{PARENT_TAG}` IS NULL"])
                       + ([f"attributes.status = '{status.upper()}'"] if status else [])
                       + ([f"{where.strip()}"] if where and where.strip() else []))
    client = MlflowClient(logger.location.uri)
    runs: list[Any] = []
    token = None
    try:
        while len(runs) < limit:  # in pages of at most MLflow's most (a --limit of 50000 was refused until 0.9.6)
            page = client.search_runs([logger.experiment.experiment_id], filter_string=flt,
                                      max_results=min(SEARCH_MOST, limit - len(runs)),
                                      order_by=[order_by.strip()] if order_by else NEWEST_FIRST, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                break
    except MlflowException as exc:  # what MLflow's own parsing let through, and its search refused
        given = [x for x, value in (("--where", where), ("--order-by", order_by)) if value]
        raise TrackerError(_unsearchable(" or ".join(given) if given else "the search", exc)) from None
    return [_listed(r.info.run_id, r.info.run_name, r.info.status, r.data.tags, r.data.params, r.data.metrics)
            for r in runs]


def _listed(run_id: str, name: str, status: str, tags: dict[str, str], params: dict[str, str],
            metrics: dict[str, float]) -> dict[str, Any]:
    """A run as ``runs list`` gives it."""
    return {
        "run_id": run_id,
        "kind": tags.get("tracker.kind", ""),
        "name": name,
        "status": status,
        "parent_run_id": tags.get("mlflow.parentRunId"),
        "params": dict(params),
        "metrics": shown_metrics(metrics),
        "failure_reason": tags.get("tracker.failure_reason"),
        "stderr_tail": tags.get("tracker.stderr_tail"),
    }


def _unsearchable(option: str, exc: Any) -> str:
    return (f"{option}: MLflow cannot search by it: {first_line(exc.message)} (its syntax: "
            "params.model = 'resnet18' AND metrics.latency_ms < 20; order: metrics.latency_ms ASC)")


def check_list_options(kind: str | None, status: str | None, where: str | None, order_by: str | None) -> None:
    """A TrackerError naming the first of ``runs list``'s ``--kind``, ``--status``, ``--where`` and
    ``--order-by`` that cannot be searched by, read without the store."""
    if kind is not None and kind not in KINDS:
        raise TrackerError(f"unknown run kind {kind!r}: expected one of {', '.join(KINDS)}")
    if status is not None and status.upper() not in RUN_STATUSES:
        raise TrackerError(f"unknown run status {status!r}: expected one of {', '.join(RUN_STATUSES)}")
    _check_search(where, order_by)


def _check_search(where: str | None, order_by: str | None) -> None:
    """Each of ``--where`` and ``--order-by`` read by MLflow's own parser before the search, so that
    the one it cannot read is named (until 0.9.8 an ordering MLflow refused, "latency_ms ASC", was
    said as --where's where both were given: the option was guessed from MLflow's message)."""
    if not (where and where.strip()) and not (order_by and order_by.strip()):
        return  # nothing to read (and MLflow not imported: a store that is not there is said at once)
    from mlflow.exceptions import MlflowException
    from mlflow.utils.search_utils import SearchUtils

    for option, value, parse in (("--where", where, SearchUtils.parse_search_filter),
                                 ("--order-by", order_by, SearchUtils.parse_order_by_for_search_runs)):
        if value and value.strip():
            try:
                parse(value.strip())
            except MlflowException as exc:
                raise TrackerError(_unsearchable(option, exc)) from None


def show_run(logger: RunLogger, ref: str) -> dict[str, Any]:
    """One run of the experiment, named by its id or a unique prefix of it, as ``runs show``
    prints it: its configuration (params), its figures (metrics), tracker's own tags, its
    environment (``env.*``), why it failed where it did (the whole stderr tail), how many layer
    runs it has, what its raw samples say (count, warm-up, stopping reason, range) and its
    artifacts (files, with sizes). A database store's run whose artifacts lie in a folder here is
    read in SQL and from that folder (since 0.9.34; :func:`_shown_in_sql`), any other through MLflow's
    client, which finds what the SQL does not look for (an id the outbox gave, a prefix of another
    experiment's run or of a deleted one) and says what it does not find."""
    if (found := _shown_in_sql(logger, ref)) is not None:
        shown, folder = found
        run = shown.run
        return _shown(run.run_id, run.name, run.status, shown.lifecycle_stage, shown.experiment_name,
                      shown.start_time_ms, shown.end_time_ms, run.params, run.metrics, run.tags, shown.layer_runs,
                      _folder_files(folder), lambda path: folder_bytes(folder, path))
    from mlflow.tracking import MlflowClient

    from tracker.log.artifacts import artifact_bytes
    from tracker.log.compare import resolve_run
    from tracker.log.record import KIND_TAG, PARENT_TAG

    client = MlflowClient(logger.location.uri)
    # any run, tracker's or not, as its full id is (a prefix of a run of the user's own MLflow script found none
    # until 0.9.13)
    run = resolve_run(client, logger.store, logger.experiment, ref, None)
    rid, tags = run.info.run_id, run.data.tags
    layers = 0
    if tags.get(KIND_TAG) in ("network", "training"):  # its layer runs: as many as the network has layers
        layers = _count(client, run.info.experiment_id, f"tags.`{PARENT_TAG}` = '{rid}' AND tags.`{KIND_TAG}` = 'layer'")
    return _shown(rid, run.info.run_name, run.info.status, run.info.lifecycle_stage,
                  _experiment_name(client, logger, run.info.experiment_id), run.info.start_time, run.info.end_time,
                  run.data.params, run.data.metrics, tags, layers, _artifact_files(client, rid),
                  lambda path: artifact_bytes(logger.location.uri, rid, path))


def _shown(rid: str, name: str, status: str, lifecycle_stage: str, experiment: str, start_time_ms: int | None,
           end_time_ms: int | None, params: dict[str, str], metrics: dict[str, float], tags: dict[str, str],
           layers: int, artifacts: dict[str, int | None], read: Callable[[str], bytes]) -> dict[str, Any]:
    """What :func:`show_run` gives of a run read either way; ``read`` reads one of its artifact files."""
    from tracker.log.record import KIND_TAG, PARENT_TAG, SYSTEM_PREFIX
    from tracker.log.samples import SAMPLES_ARTIFACT, read_samples

    samples = unreadable = None
    if SAMPLES_ARTIFACT in artifacts:
        try:
            kept = read_samples(read(SAMPLES_ARTIFACT), f"run {rid[:12]}")
        except TrackerError as exc:  # damaged, or a newer format: the run shown whole beside it (refused until 0.9.8)
            unreadable = str(exc).removeprefix(f"run {rid[:12]}: ")
        else:
            values = sorted(kept.samples_ms)
            samples = {"count": len(values), "warmup_count": len(kept.warmup_ms), "block_n": kept.block_n,
                       "stop_reason": kept.stop_reason, "min_ms": values[0] if values else None,
                       "max_ms": values[-1] if values else None}
    return {"run_id": rid, "name": name, "kind": tags.get(KIND_TAG, ""), "status": status,
            # what the MLflow UI shows beside it (since 0.9.1): its description, and whether it was deleted
            "description": tags.get("mlflow.note.content"), "deleted": lifecycle_stage == "deleted",
            "experiment": experiment, "start_time_ms": start_time_ms,
            "end_time_ms": end_time_ms, "parent_run_id": tags.get(PARENT_TAG),
            "failure_reason": tags.get("tracker.failure_reason"), "stderr_tail": tags.get("tracker.stderr_tail"),
            "params": dict(sorted(params.items())),
            "metrics": {k: v for k, v in sorted(shown_metrics(metrics).items()) if not k.startswith(SYSTEM_PREFIX)},
            "system_metrics": sorted(k.removeprefix(SYSTEM_PREFIX) for k in metrics if k.startswith(SYSTEM_PREFIX)),
            "tags": {k: v for k, v in sorted(tags.items()) if k.startswith("tracker.")
                     and k not in ("tracker.stderr_tail", "tracker.failure_reason")},
            "environment": {k.removeprefix("env."): v for k, v in sorted(tags.items()) if k.startswith("env.")},
            "layer_runs": layers, "samples": samples, "samples_unreadable": unreadable, "artifacts": artifacts}


def _shown_in_sql(logger: RunLogger, ref: str) -> tuple[Any, Path] | None:
    """The run ``ref`` names (any run, tracker's or not) read in SQL and the folder of its artifacts, where
    :func:`tracker.log.compare.resolve_in_sql` can; else None (MLflow's lookup answers)."""
    from tracker.log.compare import resolve_in_sql

    return resolve_in_sql(logger.store, logger.experiment, ref, None)


def artifact_folder(uri: str) -> Path | None:
    """The folder an artifact URI names on this machine (a path, or a ``file:`` URI); None for any other
    (a tracking server's ``mlflow-artifacts:``, a cloud bucket)."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        path = Path(unquote(parsed.path))
    elif not parsed.scheme:
        path = Path(uri)
    else:
        return None
    return path if path.is_absolute() else None


#: What MLflow's local artifact repository names a file it is still writing (and does not list).
_UPLOADING_PREFIX = ".artifact.uploading."


def _folder_files(folder: Path, under: str = "") -> dict[str, int | None]:
    """Every artifact file in a run's artifact folder, by its path, with its size in bytes: as MLflow's
    client lists a local folder's (sorted, a file it is still writing left out; none where there is no folder)."""
    files: dict[str, int | None] = {}
    here = folder / under if under else folder
    if not here.is_dir():
        return files
    for name in sorted(os.listdir(here)):
        if name.startswith(_UPLOADING_PREFIX):
            continue
        path = f"{under}/{name}" if under else name
        if (folder / path).is_dir():
            files.update(_folder_files(folder, path))
        else:
            files[path] = (folder / path).stat().st_size
    return files


def folder_bytes(folder: Path, path: str) -> bytes:
    """One artifact file of a run's folder, read whole; a :class:`DamagedArtifactError` where it cannot be
    (as :func:`tracker.log.artifacts.artifact_bytes` says it of a file MLflow cannot give)."""
    from tracker.errors import DamagedArtifactError, first_line

    if Path(path).is_absolute() or ".." in Path(path).parts:  # a path a tag gave (a trace's): the run's own files alone
        raise DamagedArtifactError(f"{path} cannot be read (not a path inside the run's artifacts)")
    try:
        return (folder / path).read_bytes()
    except OSError as exc:
        raise DamagedArtifactError(f"{path} cannot be read ({first_line(exc)}); deleted?") from None


def layer_runs(client: Any, experiment_id: str, run_id: str) -> list[Any]:
    """The FINISHED layer runs nested under a network run, in layer order (MLflow's runs): what
    ``runs compare`` matches and a reused ``profile layers`` prints."""
    from tracker.log.record import KIND_TAG, PARENT_TAG

    found = client.search_runs([experiment_id], f"tags.`{PARENT_TAG}` = '{run_id}' AND tags.`{KIND_TAG}` = 'layer' "
                               "AND attributes.status = 'FINISHED'", max_results=SEARCH_MOST)
    return sorted(found, key=lambda r: int(r.data.params.get("layer_index", 0)))


def _experiment_name(client: Any, logger: RunLogger, experiment_id: str) -> str:
    """The name of the experiment a run is in: a full run id names a run of any experiment."""
    if experiment_id == logger.experiment.experiment_id:
        return logger.experiment.name
    return client.get_experiment(experiment_id).name


def experiments_with_runs(logger: RunLogger) -> list[str]:
    """The experiments of the store that hold a run, by name (what to give ``-e`` where the
    current experiment holds none); a database store's read in SQL (since 0.9.33)."""
    if (in_sql := getattr(logger.store, "experiments_with_runs", None)) is not None:
        return in_sql()
    from mlflow.tracking import MlflowClient

    from tracker.log.search import every_experiment

    client = MlflowClient(logger.location.uri)
    return [e.name for e in every_experiment(client)
            if client.search_runs([e.experiment_id], max_results=1)]


def _artifact_files(client: Any, run_id: str, path: str | None = None) -> dict[str, int | None]:
    """Every artifact file of a run, by its path, with its size in bytes where the store says it."""
    files: dict[str, int | None] = {}
    for info in client.list_artifacts(run_id, path):
        if info.is_dir:
            files.update(_artifact_files(client, run_id, info.path))
        else:
            files[info.path] = info.file_size
    return files
