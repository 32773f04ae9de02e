"""Direct writer into an MLflow SQL tracking database (the embedded store).

MLflow's client logs one run in at least three round trips and three transactions
(create, log_batch, terminate): about 15 runs/s into a local SQLite file. This writer
inserts the rows of many runs (runs, tags, params, metrics, latest_metrics) with
executemany into MLflow's own tables, a few thousand runs per transaction.

Concurrency: SQLite allows one writer at a time. Each write transaction starts with
``BEGIN IMMEDIATE`` (the write lock is taken up front, so two writers never deadlock on an
upgrade from a read lock), waits on a busy lock up to ``BUSY_TIMEOUT_S``, and the whole
transaction is retried if the lock still could not be had. WAL journalling lets readers
(the MLflow UI, the warehouse) go on while a campaign writes.
"""

from __future__ import annotations

import fcntl
import math
import os
import posixpath
import random
import shutil
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from tracker.cache import cache_dir
from tracker.console import named, shell_word
from tracker.errors import (ExperimentDeletedError, NothingLoggedError, StoreError, StoreLockedError, act_on_held_signals,
                            first_line, os_reason)
from tracker.log.record import KEY_TAG, KIND_TAG, PARENT_TAG, FinalRecord
from tracker.log.store import (Experiment, RegisteredModel, RegisteredVersion, ShownRun, StoredRun, is_run_id_prefix,
                                  write_artifacts_locally)
from tracker.settings import StoreLocation, local_path, mlflow_path, redacted

#: The alembic revision of the MLflow schema this writer was built against (MLflow 3.17.2).
SUPPORTED_SCHEMA = "dc11669786a5"
SUPPORTED_MLFLOW = "3.17.2"
BUSY_TIMEOUT_S = 60.0
#: Runs per write transaction: large enough to amortise the commit, small enough that
#: concurrent writers take turns often.
RUNS_PER_TRANSACTION = 2000
#: A write transaction locked past BUSY_TIMEOUT_S is tried again whole, up to this many times (about 20
#: minutes in all) before its runs go to the outbox.
LOCK_RETRIES = 20
#: The execution option that marks a connection's transactions as reads (``BEGIN``, not ``BEGIN IMMEDIATE``).
READ_ONLY = "tracker_read_only"
#: The stage MLflow gives a model version it deleted but keeps a row of (its ``STAGE_DELETED_INTERNAL``).
DELETED_VERSION_STAGE = "Deleted_Internal"
#: The most run ids one ``IN`` list of a query names (SQLite's limit on bound values was 999 until 3.32).
IN_MOST = 500
T = TypeVar("T")
#: A run ``r`` that is a layer run of the run ``:run`` (bound with ``:parent_tag`` and ``:kind_tag``): what
#: ``runs show`` counts and ``runs compare`` reads.
LAYER_OF_RUN = ("EXISTS (SELECT 1 FROM tags p WHERE p.run_uuid = r.run_uuid AND p.key = :parent_tag AND p.value = :run) "
                "AND EXISTS (SELECT 1 FROM tags k WHERE k.run_uuid = r.run_uuid AND k.key = :kind_tag AND k.value = 'layer')")


class SqlStore:
    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        self._engine: Any = None
        self._tables: Any = None

    # -- connection -------------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        """The SQLite file (only asked for when ``location.is_sqlite``)."""
        path = self.location.db_path
        assert path is not None, "db_path of a store that is not SQLite"
        return path

    @property
    def name(self) -> str:
        """The store as messages name it: a database's password as ``***``."""
        return redacted(self.location.uri)

    @property
    def artifact_root(self) -> str:
        """The folder the experiments this store makes keep their artifacts in (a real path): an
        embedded store's ``artifacts/``; for a database written directly (no server), MLflow's own
        default, ``./mlruns`` in the current folder, as ``mlflow.set_tracking_uri`` gives it (the
        assertion of a store that is not SQLite until 0.9.3)."""
        if self.location.artifact_root:
            return self.location.artifact_root
        return str(self.db_path.parent / "artifacts") if self.location.is_sqlite else os.path.abspath("mlruns")

    def engine(self) -> Any:
        if self._engine is None:
            self._engine = self._make_engine()
            self._check_schema()
        return self._engine

    def _make_engine(self) -> Any:
        import sqlalchemy
        from sqlalchemy import event
        from sqlalchemy.pool import NullPool

        if not self.location.is_sqlite:
            try:
                return sqlalchemy.create_engine(self.location.uri, pool_pre_ping=True)
            except Exception as exc:  # bad URL, missing driver
                raise StoreError(f"cannot open tracking database {self.name}: "
                                 f"{str(exc).replace(self.location.uri, self.name)}") from None
        try:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            if not self.db_path.exists() or self.db_path.stat().st_size == 0:
                self._initialize()
        except OSError as exc:  # a file where a folder should be, no permission, a full disk
            raise StoreError(f"cannot make a tracking store in {self.db_path.parent}: {os_reason(exc)}") from None
        engine = sqlalchemy.create_engine(
            self.location.uri,
            connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
            poolclass=NullPool,
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            # a write takes the lock up front; a read (:meth:`_reading`) does not, and reads beside a
            # writer in WAL mode (until 0.9.7 a read took the write lock too, and waited on a writer)
            conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(READ_ONLY) else "BEGIN IMMEDIATE")

        return engine

    @contextmanager
    def _init_lock(self) -> Iterator[None]:
        lock_path = self.db_path.with_suffix(".init.lock")
        with open(lock_path, "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _initialize(self) -> None:
        """Create a new embedded store (once, under a lock): a copy of the empty schema MLflow's
        migrations made (:func:`schema_template`), else the migrations themselves. MLflow then
        opens it as it opens any store: it checks the schema and makes the Default experiment,
        whose artifact location is this store's."""
        import sqlite3

        with self._init_lock():
            if self.db_path.exists() and self.db_path.stat().st_size > 0:
                return
            from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

            Path(self.artifact_root).mkdir(parents=True, exist_ok=True)
            template = schema_template()
            if template is not None:
                partial = self.db_path.with_name(f".{self.db_path.name}.{os.getpid()}.new")
                shutil.copyfile(template, partial)
                os.replace(partial, self.db_path)
            try:
                SqlAlchemyStore(self.location.uri, mlflow_path(self.artifact_root))
            except Exception:
                if template is None:
                    raise
                self.db_path.unlink()  # a template MLflow refused: its own migrations instead
                SqlAlchemyStore(self.location.uri, mlflow_path(self.artifact_root))
            with sqlite3.connect(self.db_path) as conn:
                conn.execute("PRAGMA journal_mode = WAL")

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        """A connection of the open store whose transactions only read: not the write lock's. A store
        that cannot be read now (its folder made read-only, or gone, since it was opened) is one
        StoreError (a traceback until 0.9.7)."""
        import sqlalchemy

        try:
            with self.engine().connect() as conn:
                yield conn.execution_options(**{READ_ONLY: True})
        except sqlalchemy.exc.OperationalError as exc:
            raise StoreError(f"cannot read tracking store {self.name}: {first_line(exc.orig)}") from None

    def reading(self) -> Any:
        """A connection whose transactions only read (see :meth:`_reading`), for code outside the store."""
        return self._reading()

    def schema_version(self) -> str:
        self.engine()
        return self._read_schema_version()

    def _read_schema_version(self) -> str:
        import sqlalchemy

        with self._engine.connect() as conn:  # its errors said by _check_schema
            return str(conn.execution_options(**{READ_ONLY: True}).execute(
                sqlalchemy.text("SELECT version_num FROM alembic_version")).scalar())

    def _migrate(self) -> str:
        """Make MLflow's tables in an empty database (its own migrations); the schema version made."""
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        try:
            SqlAlchemyStore(self.location.uri, mlflow_path(self.artifact_root)).engine.dispose()
        except Exception as exc:  # noqa: BLE001 - a database that refuses the tables (rights): one line
            raise StoreError(f"cannot make MLflow's tables in the empty database {self.name}: "
                             f"{first_line(exc).replace(self.location.uri, self.name)}") from None
        return self._read_schema_version()

    def _check_schema(self) -> None:
        import sqlalchemy

        try:
            version = self._read_schema_version()
        except sqlalchemy.exc.OperationalError as exc:
            if not self.location.is_sqlite:  # a PostgreSQL server that cannot be reached, or refuses
                raise StoreError(f"cannot open tracking database {self.name}: {first_line(exc.orig)}") from None
            folder = self.db_path.parent
            if "unable to open" in str(exc.orig) and self.db_path.is_file() and not os.access(folder, os.W_OK):
                raise StoreError(f"cannot open tracking store {self.db_path}: its folder {folder} is not writable, and "
                                 "SQLite writes its journal beside the store even to read it (a read-only copy: "
                                 "copy the folder somewhere writable)") from None
            reason = str(exc.orig)
            if "readonly database" in reason:  # "is not an MLflow tracking store" until 0.9.4
                raise StoreError(f"cannot open tracking store {self.db_path}: it is read-only to this user ({reason}), "
                                 "and SQLite writes beside the store even to read it (a read-only copy: copy the "
                                 "folder somewhere writable)") from None
            if "locked" in reason or "disk I/O" in reason or "full" in reason:  # "is not an MLflow store" until 0.9.2
                raise StoreError(f"cannot read tracking store {self.db_path} ({reason}: another process holds it, or "
                                 "its disk is full)") from None
            raise StoreError(f"{self.location.uri} is not an MLflow tracking store ({reason})") from None
        except sqlalchemy.exc.ProgrammingError as exc:
            if self.location.is_sqlite or "alembic_version" not in str(exc):
                raise StoreError(f"cannot read tracking database {self.name}: {first_line(exc.orig)}") from None
            # An empty database: MLflow's migrations make its tables, as MLflow's own client does (until
            # 0.9.3 each command failed on it, in lines with its password; `fingerprint list` made them).
            version = self._migrate()
        except sqlalchemy.exc.SQLAlchemyError as exc:  # exc.orig: the driver's message, without SQLAlchemy's link line
            raise StoreError(f"cannot read tracking database {self.name}: "
                             f"{first_line(getattr(exc, 'orig', None) or exc)}") from None
        if version != SUPPORTED_SCHEMA:
            raise StoreError(
                f"tracking store schema version {version} is not supported: tracker writes "
                f"schema {SUPPORTED_SCHEMA} (MLflow {SUPPORTED_MLFLOW}); "
                f"migrate the store with {upgrade_command(self.location.uri)} using that MLflow"
            )

    def tables(self) -> Any:
        """The five tables a run's rows go to, as the database itself defines them (reflected: MLflow's
        models would import all of MLflow, about 2 s here, for five table definitions; the schema
        version was checked when the store was opened)."""
        if self._tables is None:
            import sqlalchemy

            metadata = sqlalchemy.MetaData()
            names = ("runs", "tags", "params", "metrics", "latest_metrics")
            with self._reading() as conn:
                metadata.reflect(bind=conn, only=names)
            self._tables = {name: metadata.tables[name] for name in names}
        return self._tables

    def transaction(self, work: Callable[[Any], T], attempts: int = LOCK_RETRIES) -> T:
        """Run ``work(conn)`` in one write transaction, retried whole while the database is locked
        (``attempts`` waits of ``BUSY_TIMEOUT_S`` in all; then :class:`StoreLockedError`)."""
        import sqlalchemy

        for attempt in range(attempts):
            try:
                with self.engine().begin() as conn:
                    return work(conn)
            except sqlalchemy.exc.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise StoreError(f"write to {self.name} failed: {first_line(exc.orig)}") from None
                # nothing of it written: a Ctrl-C held meanwhile (RunLogger.log's signals_deferred) acts
                # here, not after up to LOCK_RETRIES more waits
                act_on_held_signals()
                time.sleep(random.uniform(0.05, 0.5) * (attempt + 1))
        raise StoreLockedError(f"{self.name} stayed locked; nothing more was written")

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # -- experiments ------------------------------------------------------------------
    def experiment(self, name: str, create: bool = True) -> Experiment:
        import sqlalchemy

        query = sqlalchemy.text(
            "SELECT experiment_id, artifact_location, lifecycle_stage FROM experiments WHERE name = :name"
        )
        with self._reading() as conn:
            row = conn.execute(query, {"name": name}).first()
        if row is None and create:
            self._create_experiment(name)
            with self._reading() as conn:
                row = conn.execute(query, {"name": name}).first()
        if row is None:
            with self._reading() as conn:
                names = [r[0] for r in conn.execute(sqlalchemy.text(
                    "SELECT name FROM experiments WHERE lifecycle_stage = 'active'"))]
            raise NothingLoggedError(f"no experiment named {name!r} in {self.name} "
                                     f"(experiments: {named(sorted(names, key=str.lower)) or 'none'})")
        if row.lifecycle_stage != "active":
            raise ExperimentDeletedError(f"experiment {name!r} is deleted; restore it in the MLflow UI or pick another "
                                         "name")
        return Experiment(str(row.experiment_id), name, row.artifact_location)

    def describe_experiment(self, experiment: Experiment, text: str) -> None:
        import sqlalchemy

        from tracker.log.record import NOTE_TAG

        with self.engine().begin() as conn:  # one transaction: the old description or the new, never none
            conn.execute(sqlalchemy.text("DELETE FROM experiment_tags WHERE experiment_id = :id AND key = :key"),
                         {"id": int(experiment.experiment_id), "key": NOTE_TAG})
            conn.execute(sqlalchemy.text("INSERT INTO experiment_tags (key, value, experiment_id) VALUES (:key, :value, :id)"),
                         {"id": int(experiment.experiment_id), "key": NOTE_TAG, "value": text})

    def _create_experiment(self, name: str) -> None:
        from mlflow.exceptions import MlflowException
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        store = SqlAlchemyStore(self.location.uri, mlflow_path(self.artifact_root))
        try:
            store.create_experiment(name)
        except MlflowException as exc:
            if "already exists" not in str(exc):  # a concurrent writer made it first
                raise StoreError(f"cannot create experiment {name!r}: {exc.message}") from None
        finally:
            store.engine.dispose()

    # -- runs -------------------------------------------------------------------------
    def write(self, experiment: Experiment, records: list[FinalRecord], known: dict[str, str] | None = None) -> list[str]:
        """Write the records, each batch of runs in one transaction (``known``: unused here, where a
        record's id is its run's)."""
        artifact_uris = {r.run_id: run_artifact_uri(experiment.artifact_location, r.run_id) for r in records}
        # Artifacts land first: a run row never points at files that are not there.
        for r in records:
            if r.artifacts:
                self._write_artifacts(artifact_uris[r.run_id], r.artifacts)
        tables = self.tables()
        for start in range(0, len(records), RUNS_PER_TRANSACTION):
            chunk = records[start : start + RUNS_PER_TRANSACTION]
            rows = _rows(chunk, int(experiment.experiment_id), artifact_uris)

            def insert(conn: Any, rows: dict[str, list[dict]] = rows) -> None:
                for name in ("runs", "tags", "params", "metrics", "latest_metrics"):
                    if rows[name]:
                        conn.execute(tables[name].insert(), rows[name])

            self.transaction(insert)
            if start + RUNS_PER_TRANSACTION < len(records):
                act_on_held_signals()  # between transactions, each whole: a large batch stops at a Ctrl-C
        return [r.run_id for r in records]

    def _write_artifacts(self, artifact_uri: str, artifacts: dict[str, bytes | str | Path]) -> None:
        folder = local_path(artifact_uri)
        if folder is not None:
            write_artifacts_locally(folder, artifacts)
            return
        import tempfile

        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        if artifact_uri.startswith("mlflow-artifacts:"):  # a server's own: MLflow's traceback until 0.9.3
            raise StoreError(f"the experiment keeps its artifacts on its tracking server ({artifact_uri}): log through "
                             f"the server (--tracking-uri http://HOST:PORT), not into its database {self.name}")
        with tempfile.TemporaryDirectory() as tmp:
            write_artifacts_locally(Path(tmp), artifacts)
            get_artifact_repository(artifact_uri).log_artifacts(tmp)

    def measured_keys(
        self, experiment: Experiment, kind: str | None = None, statuses: tuple[str, ...] = ("FINISHED",),
        tag: str = KEY_TAG, having: str | None = None,
    ) -> set[str]:
        import sqlalchemy

        sql = (
            "SELECT k.value FROM tags k JOIN runs r ON r.run_uuid = k.run_uuid "
            "WHERE r.experiment_id = :exp AND r.status IN :statuses AND r.lifecycle_stage = 'active' "
            "AND k.key = :tag"
        )
        args: dict[str, Any] = {"exp": int(experiment.experiment_id), "statuses": list(statuses), "tag": tag}
        if kind:
            sql += (
                " AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid "
                "AND t.key = 'tracker.kind' AND t.value = :kind)"
            )
            args["kind"] = kind
        if having:
            sql += " AND EXISTS (SELECT 1 FROM tags h WHERE h.run_uuid = r.run_uuid AND h.key = :having)"
            args["having"] = having
        query = sqlalchemy.text(sql).bindparams(sqlalchemy.bindparam("statuses", expanding=True))
        with self._reading() as conn:
            return {row[0] for row in conn.execute(query, args)}

    def runs_with_prefix(self, experiment: Experiment, prefix: str,
                         kinds: tuple[str, ...] | None) -> list[tuple[str, str]]:
        import sqlalchemy

        if not is_run_id_prefix(prefix):  # no LIKE wildcard reaches the query
            raise ValueError(f"not a run id prefix: {prefix!r}")
        # every run, with tracker's kind tag or not (a run of the user's own MLflow script), where kinds is None
        sql = ("SELECT r.run_uuid, COALESCE(k.value, '') FROM runs r "
               "LEFT JOIN tags k ON k.run_uuid = r.run_uuid AND k.key = :kind_tag "
               "WHERE r.experiment_id = :exp AND r.lifecycle_stage = 'active' AND r.run_uuid LIKE :pattern")
        args: dict[str, Any] = {"kind_tag": KIND_TAG, "exp": int(experiment.experiment_id), "pattern": prefix + "%"}
        if kinds is not None:
            sql += " AND k.value IN :kinds"
            args["kinds"] = list(kinds)
        query = sqlalchemy.text(sql + " ORDER BY r.run_uuid")
        if kinds is not None:
            query = query.bindparams(sqlalchemy.bindparam("kinds", expanding=True))
        with self._reading() as conn:
            return [(str(row[0]), str(row[1])) for row in conn.execute(query, args)]

    def experiment_names(self) -> list[str]:
        """The names of the store's active experiments (``store info``; MLflow's search, unimported)."""
        import sqlalchemy

        with self._reading() as conn:
            query = sqlalchemy.text("SELECT name FROM experiments WHERE lifecycle_stage = 'active'")
            return [str(row[0]) for row in conn.execute(query)]

    def registered_models(self) -> list[RegisteredModel]:
        """Every registered model of the store, by name, with its aliases and its versions (those MLflow
        has not deleted), each with its tags, as MLflow's searches give them (``fingerprint list``, since
        0.9.33 without importing MLflow: 3.4 s before, on the demo's store)."""
        import sqlalchemy

        with self._reading() as conn:
            names = [str(row[0]) for row in conn.execute(sqlalchemy.text("SELECT name FROM registered_models ORDER BY name"))]
            aliases: dict[str, dict[str, str]] = {name: {} for name in names}
            for name, alias, version in conn.execute(sqlalchemy.text(
                    "SELECT name, alias, version FROM registered_model_aliases ORDER BY name, alias")):
                aliases.setdefault(name, {})[alias] = str(version)
            tags: dict[tuple[str, str], dict[str, str]] = {}
            for name, version, key, value in conn.execute(sqlalchemy.text(
                    "SELECT name, version, key, value FROM model_version_tags")):
                tags.setdefault((name, str(version)), {})[key] = value
            versions: dict[str, list[RegisteredVersion]] = {name: [] for name in names}
            for name, version, created in conn.execute(sqlalchemy.text(
                    "SELECT name, version, creation_time FROM model_versions WHERE current_stage != :deleted "
                    "ORDER BY last_updated_time DESC, name, version DESC"), {"deleted": DELETED_VERSION_STAGE}):
                versions.setdefault(name, []).append(RegisteredVersion(
                    str(version), tags.get((name, str(version)), {}), None if created is None else int(created)))
        return [RegisteredModel(name, aliases[name], versions[name]) for name in names]

    def experiments_with_runs(self) -> list[str]:
        """The names of the active experiments that hold an active run, in MLflow's order of experiments
        (newest first, then by id): what ``runs list`` names where the current experiment holds none."""
        import sqlalchemy

        with self._reading() as conn:
            query = sqlalchemy.text(
                "SELECT e.name FROM experiments e WHERE e.lifecycle_stage = 'active' AND EXISTS (SELECT 1 FROM runs r "
                "WHERE r.experiment_id = e.experiment_id AND r.lifecycle_stage = 'active') "
                "ORDER BY e.creation_time DESC, e.experiment_id")
            return [str(row[0]) for row in conn.execute(query)]

    def count_runs(self, experiment: Experiment) -> int:
        """How many active runs the experiment holds (``store info``: MLflow's search read every one
        of them, whole, to count them, 6.5 s of the demo store's 5,500 until 0.9.33)."""
        import sqlalchemy

        with self._reading() as conn:
            query = sqlalchemy.text("SELECT COUNT(*) FROM runs WHERE experiment_id = :exp AND lifecycle_stage = 'active'")
            return int(conn.execute(query, {"exp": int(experiment.experiment_id)}).scalar())

    def newest_runs(self, experiment: Experiment, limit: int, kind: str | None = None, status: str | None = None,
                    children: bool = False) -> list[StoredRun]:
        """The newest ``limit`` active runs of an experiment, as MLflow's search orders ``runs list``'s
        default (:data:`tracker.log.inspect.NEWEST_FIRST`: start time newest first, then name, then id;
        a missing one last), of one ``kind`` and ``status`` where given, a network's layer runs (its
        children) only with ``children``; each with its params, tags and latest metrics (a NaN one as
        NaN, as MLflow reads ``is_nan``). Read in SQL (since 0.9.33): MLflow's client takes about 2.5 s
        to import here, three quarters of ``runs list``."""
        import sqlalchemy

        sql = "SELECT r.run_uuid, r.name, r.status FROM runs r WHERE r.experiment_id = :exp AND r.lifecycle_stage = 'active'"
        args: dict[str, Any] = {"exp": int(experiment.experiment_id), "limit": int(limit)}
        if kind is not None:
            sql += (" AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = :kind_tag "
                    "AND t.value = :kind)")
            args |= {"kind_tag": KIND_TAG, "kind": kind}
        if not children:
            sql += " AND NOT EXISTS (SELECT 1 FROM tags p WHERE p.run_uuid = r.run_uuid AND p.key = :parent_tag)"
            args["parent_tag"] = PARENT_TAG
        if status is not None:
            sql += " AND r.status = :status"
            args["status"] = status
        sql += (" ORDER BY CASE WHEN r.start_time IS NULL THEN 1 ELSE 0 END, r.start_time DESC, "
                "CASE WHEN r.name IS NULL THEN 1 ELSE 0 END, r.name, r.run_uuid LIMIT :limit")
        with self._reading() as conn:
            return _stored_runs(conn, conn.execute(sqlalchemy.text(sql), args).all())

    def finished_runs_of(self, experiment_id: str, config_key: str, kind: str, limit: int) -> list[StoredRun]:
        """The active FINISHED runs of one configuration (tag ``tracker.config_key``) and kind in an experiment,
        newest first, at most ``limit``: the repeats ``runs compare`` reads, as MLflow's search gives them."""
        import sqlalchemy

        sql = ("SELECT r.run_uuid, r.name, r.status FROM runs r WHERE r.experiment_id = :exp "
               "AND r.lifecycle_stage = 'active' AND r.status = 'FINISHED' "
               "AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = :key_tag AND t.value = :key) "
               "AND EXISTS (SELECT 1 FROM tags k WHERE k.run_uuid = r.run_uuid AND k.key = :kind_tag AND k.value = :kind) "
               "ORDER BY CASE WHEN r.start_time IS NULL THEN 1 ELSE 0 END, r.start_time DESC, r.run_uuid LIMIT :limit")
        args = {"exp": int(experiment_id), "key_tag": KEY_TAG, "key": config_key, "kind_tag": KIND_TAG, "kind": kind,
                "limit": int(limit)}
        with self._reading() as conn:
            return _stored_runs(conn, conn.execute(sqlalchemy.text(sql), args).all())

    def finished_layer_runs(self, experiment_id: str, parent_id: str) -> list[StoredRun]:
        """The active FINISHED layer runs a run is the parent of (``runs compare`` reads them), in no order."""
        import sqlalchemy

        sql = ("SELECT r.run_uuid, r.name, r.status FROM runs r WHERE r.experiment_id = :exp "
               "AND r.lifecycle_stage = 'active' AND r.status = 'FINISHED' "
               f"AND {LAYER_OF_RUN}")
        args = {"exp": int(experiment_id), "parent_tag": PARENT_TAG, "run": parent_id, "kind_tag": KIND_TAG}
        with self._reading() as conn:
            return _stored_runs(conn, conn.execute(sqlalchemy.text(sql), args).all())

    def shown_run(self, run_id: str) -> ShownRun | None:
        """The run of this id, of any experiment, active or deleted, as MLflow's ``get_run`` reads it, with
        its experiment's name and how many active layer runs name it their parent (a network or training
        run's); None where the store has no such run. ``runs show`` reads it so (since 0.9.34: through
        MLflow's client, 3.4 to 3.7 s on the demo's store, most of it MLflow's import)."""
        import sqlalchemy

        with self._reading() as conn:
            row = conn.execute(sqlalchemy.text(
                "SELECT r.run_uuid, r.name, r.status, r.lifecycle_stage, r.experiment_id, r.start_time, r.end_time, "
                "r.artifact_uri, e.name AS experiment_name FROM runs r JOIN experiments e "
                "ON e.experiment_id = r.experiment_id WHERE r.run_uuid = :run"), {"run": run_id}).first()
            if row is None:
                return None
            [run] = _stored_runs(conn, [row])
            tags = run.tags
            layers = 0
            if tags.get(KIND_TAG) in ("network", "training"):
                layers = int(conn.execute(sqlalchemy.text(
                    "SELECT COUNT(*) FROM runs r WHERE r.experiment_id = :exp AND r.lifecycle_stage = 'active' "
                    f"AND {LAYER_OF_RUN}"),
                    {"exp": row.experiment_id, "parent_tag": PARENT_TAG, "kind_tag": KIND_TAG, "run": row.run_uuid}
                ).scalar())
        return ShownRun(run, row.lifecycle_stage, str(row.experiment_id), row.experiment_name,
                        None if row.start_time is None else int(row.start_time),
                        None if row.end_time is None else int(row.end_time), row.artifact_uri or "", layers)

    def find_run(self, experiment: Experiment, config_key: str, status: str = "FINISHED",
                 having_metric: str | None = None) -> StoredRun | None:
        import sqlalchemy

        # a metric asked for: a clause of its own (PostgreSQL cannot type a parameter that is only tested for NULL)
        having = ("AND EXISTS (SELECT 1 FROM latest_metrics m WHERE m.run_uuid = r.run_uuid AND m.key = :metric) "
                  if having_metric is not None else "")
        find = sqlalchemy.text(
            "SELECT r.run_uuid, r.name, r.status FROM runs r JOIN tags k ON k.run_uuid = r.run_uuid "
            "WHERE r.experiment_id = :exp AND r.status = :status AND r.lifecycle_stage = 'active' "
            f"AND k.key = 'tracker.config_key' AND k.value = :key {having}ORDER BY r.start_time DESC LIMIT 1"
        )
        asked = {"exp": int(experiment.experiment_id), "key": config_key, "status": status}
        with self._reading() as conn:
            row = conn.execute(find, asked | ({"metric": having_metric} if having_metric is not None else {})).first()
            if row is None:
                return None
            [run] = _stored_runs(conn, [row])
        return run


def _stored_runs(conn: Any, found: list[Any]) -> list[StoredRun]:
    """The runs of rows ``found`` (run_uuid, name, status), in their order, each with its params, tags and
    latest metrics (a NaN one as NaN, as MLflow reads ``is_nan``), read ``IN_MOST`` runs a query."""
    import sqlalchemy

    ids = [row.run_uuid for row in found]
    params: dict[str, dict[str, str]] = {i: {} for i in ids}
    tags: dict[str, dict[str, str]] = {i: {} for i in ids}
    metrics: dict[str, dict[str, float]] = {i: {} for i in ids}
    for start in range(0, len(ids), IN_MOST):
        chunk = {"runs": ids[start:start + IN_MOST]}
        for table, into in (("params", params), ("tags", tags)):
            query = sqlalchemy.text(f"SELECT run_uuid, key, value FROM {table} WHERE run_uuid IN :runs")
            for run, key, value in conn.execute(query.bindparams(sqlalchemy.bindparam("runs", expanding=True)), chunk):
                into[run][key] = value
        query = sqlalchemy.text("SELECT run_uuid, key, value, is_nan FROM latest_metrics WHERE run_uuid IN :runs")
        for run, key, value, is_nan in conn.execute(query.bindparams(sqlalchemy.bindparam("runs", expanding=True)),
                                                    chunk):
            metrics[run][key] = math.nan if is_nan else float(value)
    return [StoredRun(row.run_uuid, row.name, row.status, params[row.run_uuid], metrics[row.run_uuid],
                      tags[row.run_uuid]) for row in found]


def schema_template() -> Path | None:
    """An SQLite file holding MLflow's tables at ``SUPPORTED_SCHEMA`` and nothing else (no
    experiment), made once per MLflow version by MLflow's own migrations. Creating a store by
    migrations takes about 1.4 s; copying this takes milliseconds. None where it cannot be made
    or read (no writable cache, another MLflow): stores are then migrated as before."""
    import sqlite3

    try:
        import mlflow

        path = cache_dir() / f"mlflow-{mlflow.__version__}-{SUPPORTED_SCHEMA}-empty.db"
        if not path.is_file():
            import sqlalchemy
            from mlflow.store.db.utils import _initialize_tables

            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.{os.getpid()}.new")
            partial.unlink(missing_ok=True)
            engine = sqlalchemy.create_engine(f"sqlite:///{partial}")
            try:
                _initialize_tables(engine)
            finally:
                engine.dispose()
            os.replace(partial, path)  # whole or not at all, whoever else makes it at once
            _drop_other_templates(path)
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            (experiments,) = conn.execute("SELECT count(*) FROM experiments").fetchone()
        conn.close()
        return path if (version, experiments) == (SUPPORTED_SCHEMA, 0) else None
    except Exception:  # a cache that cannot be written or read is only a slower new store
        return None


def _drop_other_templates(kept: Path) -> None:
    """Remove the templates of other MLflow versions or schemas beside ``kept`` (one is made per
    version: an upgraded MLflow leaves the old one unused) and partial ones a killed process left
    (``.NAME.PID.new``, where that process is gone). A file that cannot be removed stays: ``kept``
    is whole already, and the next template made tries again."""
    stale = [other for other in kept.parent.glob("mlflow-*-empty.db") if other != kept]
    for partial in kept.parent.glob(".mlflow-*-empty.db.*.new"):
        pid = partial.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            stale.append(partial)
    for path in stale:
        with suppress(OSError):
            path.unlink(missing_ok=True)


def _rows(records: list[FinalRecord], experiment_id: int, artifact_uris: dict[str, str]) -> dict[str, list[dict]]:
    """The rows MLflow's SqlAlchemyStore would hold for these runs, table by table."""
    rows: dict[str, list[dict]] = {t: [] for t in ("runs", "tags", "params", "metrics", "latest_metrics")}
    for r in records:
        rows["runs"].append(
            {
                "run_uuid": r.run_id,
                "name": r.name,
                "source_type": "UNKNOWN",
                "source_name": "",
                "entry_point_name": "",
                "user_id": r.tags.get("mlflow.user", "unknown"),
                "status": r.status,
                "start_time": r.start_time_ms,
                "end_time": r.end_time_ms,
                "deleted_time": None,
                "source_version": "",
                "lifecycle_stage": "active",
                "artifact_uri": artifact_uris[r.run_id],
                "experiment_id": experiment_id,
            }
        )
        rows["tags"].extend({"key": k, "value": v, "run_uuid": r.run_id} for k, v in r.tags.items())
        rows["params"].extend({"key": k, "value": v, "run_uuid": r.run_id} for k, v in r.params.items())
        seen: set[tuple] = set()
        for key, value, ts, step in r.metric_points():
            pk = (key, ts, step, value)
            if pk in seen:  # MLflow's primary key collapses identical points
                continue
            seen.add(pk)
            rows["metrics"].append(
                {"key": key, "value": value, "timestamp": ts, "step": step, "is_nan": False, "run_uuid": r.run_id}
            )
        for key, (value, ts, step) in r.latest_metrics().items():
            rows["latest_metrics"].append(
                {"key": key, "value": value, "timestamp": ts, "step": step, "is_nan": False, "run_uuid": r.run_id}
            )
    return rows


def run_artifact_uri(location: str, run_id: str) -> str:
    """Where a run of the experiment whose artifacts lie at ``location`` keeps its own, as MLflow
    says it (``append_to_uri_path(location, run_id, "artifacts")``); a local folder's, the
    embedded store's, joined here without importing MLflow."""
    if location.startswith("/") and not any(c in location for c in "?#"):  # a path: no scheme, no query
        return posixpath.join(location, run_id, "artifacts")
    from mlflow.utils.uri import append_to_uri_path

    return append_to_uri_path(location, run_id, "artifacts")


def upgrade_command(uri: str) -> str:
    """The ``mlflow db upgrade`` command for the store at ``uri``, quoted for a shell, a database's
    password as ``***`` (it was printed whole until 0.9.9) with a word saying what to put there."""
    shown = redacted(uri)
    return f"`mlflow db upgrade {shell_word(shown)}`" + (" (its password where *** stands)" if shown != uri else "")
