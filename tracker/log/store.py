"""Tracking stores: where run records are written, and the choice of writer by URI.

- ``SqlStore`` writes straight into an MLflow database (the embedded SQLite file, or any
  database MLflow supports) through MLflow's own SQLAlchemy table definitions, many runs
  per transaction.
- ``RestStore`` writes to an MLflow tracking server over its REST API, batched and
  concurrent.

Both produce runs that ``MlflowClient.search_runs`` and the MLflow UI cannot tell apart
from runs logged through MLflow's client.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tracker.log.record import KEY_TAG, FinalRecord
from tracker.settings import StoreLocation


@dataclass(frozen=True)
class Experiment:
    experiment_id: str
    name: str
    artifact_location: str


@dataclass(frozen=True)
class StoredRun:
    """A run read back from a store."""

    run_id: str
    name: str
    status: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]


@dataclass(frozen=True)
class ShownRun:
    """A run as ``runs show`` reads it in SQL (since 0.9.34): what MLflow's run holds beside its params,
    tags and latest metrics, its experiment's name and how many active layer runs it has."""

    run: StoredRun
    lifecycle_stage: str
    experiment_id: str
    experiment_name: str
    start_time_ms: int | None
    end_time_ms: int | None
    artifact_uri: str
    layer_runs: int


@dataclass(frozen=True)
class RegisteredVersion:
    """A registered model's version as ``fingerprint list`` reads it (from MLflow's client or in SQL)."""

    version: str
    tags: dict[str, str]
    creation_timestamp: int | None


@dataclass(frozen=True)
class RegisteredModel:
    """A registered model with its aliases (alias -> version) and its versions, in MLflow's order of
    a search (last updated first, then the newest version first)."""

    name: str
    aliases: dict[str, str]
    versions: list[RegisteredVersion]


class Store(Protocol):
    location: StoreLocation

    def experiment(self, name: str, create: bool = True) -> Experiment: ...

    def write(self, experiment: Experiment, records: list[FinalRecord], known: dict[str, str] | None = None) -> list[str]:
        """Write records (parents before children); return the run ids in record order. ``known``:
        records' ids already in the store (ours -> the store's), parents of records written now."""
        ...

    def measured_keys(
        self, experiment: Experiment, kind: str | None = None, statuses: tuple[str, ...] = ("FINISHED",),
        tag: str = KEY_TAG, having: str | None = None,
    ) -> set[str]:
        """Config keys (or the values of another key ``tag``) of the active runs of an experiment
        with these statuses (and, with ``having``, carrying that tag too)."""
        ...

    def find_run(self, experiment: Experiment, config_key: str, status: str = "FINISHED",
                 having_metric: str | None = None) -> StoredRun | None:
        """The latest active run of an experiment with this config key and status (that logged the
        metric ``having_metric``, if given)."""
        ...

    def describe_experiment(self, experiment: Experiment, text: str) -> None:
        """Set the experiment's description (its tag ``mlflow.note.content``, which the MLflow UI
        shows above its runs), replacing any."""
        ...

    def runs_with_prefix(self, experiment: Experiment, prefix: str,
                         kinds: tuple[str, ...] | None) -> list[tuple[str, str]]:
        """(run id, kind) of the experiment's active runs of these kinds whose id starts with
        ``prefix`` (lower-case hex), by id; with ``kinds`` None, of every run, tracker's or not
        (a run without tracker's kind tag, logged by MLflow itself, has kind "")."""
        ...

    def close(self) -> None: ...


def is_run_id_prefix(text: str) -> bool:
    """Whether ``text`` can begin a run id: lower-case hex, not empty (nor a SQL ``LIKE`` wildcard)."""
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def open_store(location: StoreLocation) -> Store:
    if location.is_http:
        from tracker.log.rest_store import RestStore

        return RestStore(location)
    from tracker.log.sql_store import SqlStore

    return SqlStore(location)


def write_artifacts_locally(folder: Path, artifacts: dict[str, bytes | str | Path]) -> None:
    """Put a run's artifacts into its local artifact folder."""
    import shutil

    for rel, content in artifacts.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def parent_levels(records: list[FinalRecord]) -> list[list[int]]:
    """Indices of records grouped so that every record comes after its in-batch parent."""
    index = {r.run_id: i for i, r in enumerate(records)}
    depth: dict[int, int] = {}

    def level(i: int, seen: frozenset[int] = frozenset()) -> int:
        if i in depth:
            return depth[i]
        parent = records[i].parent_id
        if parent in index and index[parent] not in seen:
            depth[i] = level(index[parent], seen | {i}) + 1
        else:
            depth[i] = 0
        return depth[i]

    levels: dict[int, list[int]] = {}
    for i in range(len(records)):
        levels.setdefault(level(i), []).append(i)
    return [levels[k] for k in sorted(levels)]
