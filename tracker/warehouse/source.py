"""Where the warehouse reads runs from: the tracking database itself, or the MLflow API.

Direct reads (the fast path) go through ADBC drivers, which hand back Arrow tables that
DuckDB takes without a copy: ``adbc-driver-sqlite`` for the embedded store's SQLite file
(opened read-only, so a campaign can go on writing; in a child process, see
:mod:`tracker.warehouse.sqlite_reader`: the driver links its own SQLite, and two SQLites in one
process lose each other's locks) and ``adbc-driver-postgresql`` for the PostgreSQL database
behind a team's tracking server. DuckDB's own sqlite/postgres scanner
extensions were the other choice; they are not bundled, cannot be downloaded here, and the
PyPI packages that ship them are built for DuckDB 1.5, not the 2.0 pinned here.

When only a tracking server's URL is known, :class:`ApiSource` pages through
``MlflowClient.search_runs``: the slow fallback, with the same tables out.

Every source gives the same four Arrow tables (column names are the warehouse's):
``runs`` (run_id, experiment_id, experiment, run_name, status, lifecycle_stage,
start_time_ms, end_time_ms, artifact_uri), ``params`` and ``tags`` (run_id, key, value) and
``metrics`` (run_id, key, value, step, timestamp_ms: the latest value of each metric).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from tracker.errors import StoreError, first_line
from tracker.settings import StoreLocation, local_path, redacted

#: Run ids per ``IN (...)`` list when reading the details of changed runs.
IDS_PER_QUERY = 500

#: What the incremental load compares, per run: status, end time, stage, and a change token
#: that moves when the run is renamed or a tag or metric is added, removed or edited after it
#: ended (a note written in the UI, a tag set by hand, a metric logged late): the run's name,
#: the count and latest timestamp of its metrics (metrics are appended, never edited in place),
#: and a digest of the content of its tags (an edit that keeps a value's length, "good" to
#: "poor", moves it too). Params cannot change once logged.
SNAPSHOT_RUNS_SQL = (
    "SELECT r.run_uuid AS run_id, r.status, r.end_time AS end_time_ms, r.lifecycle_stage, "
    "COALESCE(r.name, '') || '|' || COALESCE(m.token, '') AS run_token "
    "FROM runs r "
    "LEFT JOIN (SELECT run_uuid, CAST(count(*) AS VARCHAR(20)) || ':' || CAST(max(timestamp) AS VARCHAR(20)) "
    "AS token FROM latest_metrics GROUP BY run_uuid) m ON m.run_uuid = r.run_uuid"
)
#: PostgreSQL digests each run's tags on the server (md5 of the tags in key order).
SNAPSHOT_SQL_POSTGRES = (
    "SELECT r.run_id, r.status, r.end_time_ms, r.lifecycle_stage, "
    "r.run_token || '|' || COALESCE(t.token, '') AS change_token "
    f"FROM ({SNAPSHOT_RUNS_SQL}) r "
    "LEFT JOIN (SELECT run_uuid, md5(string_agg(key || chr(31) || COALESCE(value, ''), chr(30) ORDER BY key)) "
    "AS token FROM tags GROUP BY run_uuid) t ON t.run_uuid = r.run_id"
)
#: SQLite has no digest function, and its GROUP BY and join are slower than reading the rows
#: (a third of the time at 100,000 runs): from SQLite the runs, metric timestamps and tags are
#: read as they are and SNAPSHOT_DIGEST_SQL makes the same change token in DuckDB (tags: an
#: order-free XOR of one hash per tag).
SNAPSHOT_SQLITE_SQL = {
    "snapshot_runs": "SELECT run_uuid AS run_id, status, end_time AS end_time_ms, lifecycle_stage, name FROM runs",
    "snapshot_metrics": "SELECT run_uuid AS run_id, timestamp FROM latest_metrics",
    "snapshot_tags": "SELECT run_uuid AS run_id, key, value FROM tags",
}
SNAPSHOT_DIGEST_SQL = (
    "SELECT r.run_id, r.status, r.end_time_ms, r.lifecycle_stage, "
    "COALESCE(r.name, '') || '|' || COALESCE(m.token, '') || '|' || COALESCE(CAST(t.digest AS VARCHAR), '') "
    "AS change_token "
    "FROM snapshot_runs r "
    "LEFT JOIN (SELECT run_id, CAST(count(*) AS VARCHAR) || ':' || CAST(max(timestamp) AS VARCHAR) AS token "
    "FROM snapshot_metrics GROUP BY run_id) m USING (run_id) "
    "LEFT JOIN (SELECT run_id, bit_xor(hash(key, value)) AS digest FROM snapshot_tags GROUP BY run_id) t USING (run_id)"
)
RUNS_SQL = (
    "SELECT r.run_uuid AS run_id, CAST(r.experiment_id AS VARCHAR(32)) AS experiment_id, e.name AS experiment, "
    "r.name AS run_name, r.status, r.lifecycle_stage, r.start_time AS start_time_ms, r.end_time AS end_time_ms, "
    "r.artifact_uri FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id"
)
PARAMS_SQL = "SELECT run_uuid AS run_id, key, value FROM params"
TAGS_SQL = "SELECT run_uuid AS run_id, key, value FROM tags"
METRICS_SQL = (
    "SELECT run_uuid AS run_id, key, value, step, timestamp AS timestamp_ms FROM latest_metrics WHERE is_nan = false"
)
DETAIL_SQL = {"runs": RUNS_SQL, "params": PARAMS_SQL, "tags": TAGS_SQL, "metrics": METRICS_SQL}
#: Column that carries the run id in each detail query, for the changed-runs filter.
RUN_COLUMN = {"runs": "r.run_uuid", "params": "run_uuid", "tags": "run_uuid", "metrics": "run_uuid"}


class Source(Protocol):
    """Reads runs from a tracking store."""

    name: str

    def snapshot(self) -> Any:
        """Arrow table (run_id, status, end_time_ms, lifecycle_stage, change_token) of every run."""

    def details(self, run_ids: Sequence[str] | None) -> dict[str, Any]:
        """Arrow tables runs/params/tags/metrics of these runs (all runs when None)."""

    def read_artifact(self, run_id: str, artifact_uri: str, path: str) -> str | None:
        """Text of an artifact of a run, or None where it cannot be read."""

    def close(self) -> None: ...


def _read_local(artifact_uri: str, path: str) -> str | None:
    """An artifact's text when the run's artifacts are a local folder and the file is there."""
    folder = local_path(artifact_uri)
    if folder is None:
        return None
    file = folder / path
    if not file.is_file():
        return None
    try:
        return file.read_text()
    except UnicodeDecodeError:  # damaged, not UTF-8: its rows left out, as JSON that is not read (it ended the load
        return None  # until 0.9.15)


class DatabaseSource:
    """The MLflow tables read directly through an ADBC driver (SQLite or PostgreSQL)."""

    def __init__(self, uri: str, artifact_server: str | None = None) -> None:
        self.uri = uri
        self.artifact_server = artifact_server
        self.location = StoreLocation(uri)
        self.name = uri if self.location.is_sqlite else redacted(uri)
        self._conn: Any = None

    def connect(self) -> Any:
        if self._conn is not None:
            return self._conn
        try:
            if self.location.is_sqlite:
                from tracker.warehouse.sqlite_reader import SqliteReader

                self.location.require()
                self._conn = SqliteReader(self.location.db_path, self.name)
            else:
                import adbc_driver_postgresql.dbapi as driver

                self._conn = driver.connect(_libpq_uri(self.uri))
        except StoreError:
            raise
        except Exception as exc:  # driver errors: unreachable server, bad credentials
            raise StoreError(f"cannot read tracking database {self.name}: {first_line(exc)}") from None
        return self._conn

    def _query(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if self.location.is_sqlite:
            return self.connect().query(sql, params)
        cur = self.connect().cursor()
        try:
            cur.execute(sql, list(params) if params else None)
            return cur.fetch_arrow_table()
        except Exception as exc:
            raise StoreError(f"reading {self.name} failed: {first_line(exc)}") from None
        finally:
            cur.close()

    def _placeholders(self, n: int) -> str:
        if self.location.is_sqlite:
            return ", ".join("?" * n)
        return ", ".join(f"${i}" for i in range(1, n + 1))

    def snapshot(self) -> Any:
        if not self.location.is_sqlite:
            return self._query(SNAPSHOT_SQL_POSTGRES)
        import duckdb

        read = {name: self._query(sql) for name, sql in SNAPSHOT_SQLITE_SQL.items()}
        con = duckdb.connect()
        try:
            for name, table in read.items():
                con.register(name, table)
            return con.sql(SNAPSHOT_DIGEST_SQL).to_arrow_table()
        finally:
            con.close()

    def details(self, run_ids: Sequence[str] | None) -> dict[str, Any]:
        import pyarrow as pa

        if run_ids is None:
            return {name: self._query(sql) for name, sql in DETAIL_SQL.items()}
        out: dict[str, list[Any]] = {name: [] for name in DETAIL_SQL}
        ids = list(run_ids)
        for i in range(0, len(ids), IDS_PER_QUERY):
            chunk = ids[i : i + IDS_PER_QUERY]
            for name, sql in DETAIL_SQL.items():
                joiner = " AND " if " WHERE " in sql else " WHERE "
                where = f"{joiner}{RUN_COLUMN[name]} IN ({self._placeholders(len(chunk))})"
                out[name].append(self._query(sql + where, chunk))
        return {name: pa.concat_tables(parts) if parts else self._query(DETAIL_SQL[name] + " WHERE 1 = 0")
                for name, parts in out.items()}

    def tag_values(self, run_ids: Sequence[str], key: str) -> dict[str, str]:
        """The tag ``key`` of each of these runs that has it (a run id -> its value)."""
        out: dict[str, str] = {}
        ids = list(run_ids)
        for i in range(0, len(ids), IDS_PER_QUERY):
            chunk = ids[i : i + IDS_PER_QUERY]
            marks = self._placeholders(len(chunk) + 1).split(", ")
            table = self._query(f"SELECT run_uuid, value FROM tags WHERE key = {marks[0]} AND run_uuid IN "
                                f"({', '.join(marks[1:])})", [key, *chunk])
            out.update(zip(table.column(0).to_pylist(), table.column(1).to_pylist()))
        return out

    def read_artifact(self, run_id: str, artifact_uri: str, path: str) -> str | None:
        text = _read_local(artifact_uri, path)
        if text is None and self.artifact_server:
            return _download(self.artifact_server, run_id, path)
        return text

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class ApiSource:
    """The fallback: a tracking server read through ``MlflowClient.search_runs``."""

    PAGE = 10_000

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.name = uri
        self._runs: list[Any] | None = None

    def _all_runs(self) -> list[Any]:
        if self._runs is None:
            from mlflow.entities import ViewType
            from mlflow.tracking import MlflowClient

            from tracker.log.search import every_experiment, runs_of

            client = MlflowClient(self.uri)
            try:
                # every experiment (a server's newest 1000 until 0.9.8), searched a few at a time
                names = {e.experiment_id: e.name for e in every_experiment(client, ViewType.ALL)}
                runs = list(runs_of(client, list(names), "", ViewType.ALL, self.PAGE))
            except Exception as exc:
                from tracker.log.rest_store import mlflow_http_line

                raise StoreError(mlflow_http_line(self.uri, exc)  # a 401 names the variables to set (0.9.4)
                                 or f"cannot read runs from {self.uri}: {first_line(exc)}") from None
            self._names = names
            self._runs = runs
        return self._runs

    def snapshot(self) -> Any:
        import pyarrow as pa

        runs = self._all_runs()
        return pa.table({
            "run_id": [r.info.run_id for r in runs],
            "status": [r.info.status for r in runs],
            "end_time_ms": pa.array([r.info.end_time for r in runs], pa.int64()),
            "lifecycle_stage": [r.info.lifecycle_stage for r in runs],
            "change_token": [_change_token(r) for r in runs],
        })

    def details(self, run_ids: Sequence[str] | None) -> dict[str, Any]:
        import pyarrow as pa

        wanted = None if run_ids is None else set(run_ids)
        runs = [r for r in self._all_runs() if wanted is None or r.info.run_id in wanted]
        params, tags, metrics = _long(runs, "params"), _long(runs, "tags"), _metric_rows(runs)
        kv, metric = _schemas()
        return {
            "runs": pa.table({
                "run_id": [r.info.run_id for r in runs],
                "experiment_id": [str(r.info.experiment_id) for r in runs],
                "experiment": [self._names.get(r.info.experiment_id, "") for r in runs],
                "run_name": [r.info.run_name for r in runs],
                "status": [r.info.status for r in runs],
                "lifecycle_stage": [r.info.lifecycle_stage for r in runs],
                "start_time_ms": pa.array([r.info.start_time for r in runs], pa.int64()),
                "end_time_ms": pa.array([r.info.end_time for r in runs], pa.int64()),
                "artifact_uri": [r.info.artifact_uri for r in runs],
            }),
            "params": pa.table(params, schema=kv),
            "tags": pa.table(tags, schema=kv),
            "metrics": pa.table(metrics, schema=metric),
        }

    def read_artifact(self, run_id: str, artifact_uri: str, path: str) -> str | None:
        text = _read_local(artifact_uri, path)
        return text if text is not None else _download(self.uri, run_id, path)

    def close(self) -> None:
        self._runs = None


def _change_token(run: Any) -> str:
    """The API's counterpart of the database snapshot's change token: a digest of the run's name, tags and metrics."""
    import hashlib

    state = (run.info.run_name or "", sorted(run.data.tags.items()), sorted(run.data.metrics.items()))
    return hashlib.sha256(repr(state).encode()).hexdigest()[:16]


def _schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    kv = pa.schema([("run_id", pa.string()), ("key", pa.string()), ("value", pa.string())])
    metric = pa.schema([("run_id", pa.string()), ("key", pa.string()), ("value", pa.float64()),
                        ("step", pa.int64()), ("timestamp_ms", pa.int64())])
    return kv, metric


def _long(runs: list[Any], what: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"run_id": [], "key": [], "value": []}
    for r in runs:
        for k, v in getattr(r.data, what).items():
            out["run_id"].append(r.info.run_id)
            out["key"].append(k)
            out["value"].append(v)
    return out


def _metric_rows(runs: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"run_id": [], "key": [], "value": [], "step": [], "timestamp_ms": []}
    for r in runs:
        for k, v in r.data.metrics.items():
            out["run_id"].append(r.info.run_id)
            out["key"].append(k)
            out["value"].append(float(v))
            out["step"].append(0)
            out["timestamp_ms"].append(r.info.end_time or r.info.start_time or 0)
    return out


def _download(server: str, run_id: str, path: str) -> str | None:
    from tracker.log.artifacts import downloaded

    try:
        with downloaded(server, run_id, path) as local:
            return local.read_text()
    except Exception:
        return None


def _libpq_uri(uri: str) -> str:
    """SQLAlchemy's ``postgresql+driver://`` is libpq's ``postgresql://``."""
    scheme, _, rest = uri.partition("://")
    return f"postgresql://{rest}" if scheme.startswith("postgresql") else uri


def open_source(location: StoreLocation, backend_store_uri: str | None = None) -> Source:
    """The fastest source for a store: its database when reachable, else the MLflow API."""
    if backend_store_uri and not location.is_http:
        from tracker.errors import TrackerError, TrackingUriError
        from tracker.settings import redacted, resolve_location

        option = f"--backend-store-uri (TRACKER_BACKEND_STORE_URI) {redacted(backend_store_uri)}"  # its password
        try:  # never said (until 0.9.6 it was, here), and a bad one said as this option's, not --tracking-uri's
            backend = resolve_location(backend_store_uri).uri
        except TrackerError as exc:  # one malformed on its face a usage error, status 2, as --tracking-uri's (1 until 0.9.10)
            raise (TrackingUriError if isinstance(exc, TrackingUriError) else StoreError)(f"{option}: {exc}") from None
        # the store's own database is read already; another's runs would go into this store's warehouse,
        # and the next load without it would put this store's back (until 0.9.1)
        if backend != location.uri:
            raise StoreError(f"{option} is the database behind a tracking server, for loading that server's runs; this "
                             f"store is {redacted(location.uri)}, read directly: to load another store, give it as "
                             "--tracking-uri")
        backend_store_uri = None
    if backend_store_uri:
        return DatabaseSource(backend_store_uri, artifact_server=location.uri if location.is_http else None)
    if location.uri.startswith(("sqlite:", "postgresql")):
        return DatabaseSource(location.uri)
    if location.is_http:
        location.require()  # an unreachable server: one line now, not MLflow's retries for minutes
        return ApiSource(location.uri)
    raise StoreError(f"cannot load runs from {location.uri}")
