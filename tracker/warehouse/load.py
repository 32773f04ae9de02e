"""Loading runs from a tracking store into the DuckDB warehouse, incrementally.

A load compares a snapshot of the store (run id, status, end time, lifecycle stage of
every run: one cheap query) with what the warehouse holds:

- runs that are new, or whose status or end time changed (a RUNNING run that finished),
  are read in full (params, tags, latest metrics) and replace their old rows;
- runs deleted in MLflow (lifecycle stage ``deleted``, or gone) are removed;
- everything else is not read at all.

Each load is one DuckDB transaction: a load that fails leaves the warehouse as it was.
The network descriptions of new model hashes are read from their runs' artifacts into
``network_nodes`` (one row per node, the features of ``tracker.describe.features``), and the
operator table of each new traced run (``profile --trace``) into ``trace_ops``, and on a GPU its
kernels into ``trace_kernels``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.console import shell_word
from tracker.decode import loads_json
from tracker.describe.features import NODE_ROWS_VERSION
from tracker.errors import SchemaError, StoreError, first_paragraph, interrupted, os_reason, sigint_handled
from tracker.log.schema import KINDS
from tracker.settings import usable_warehouse
from tracker.warehouse import tables
from tracker.warehouse.source import DatabaseSource, Source


@dataclass(frozen=True)
class LoadReport:
    source: str
    mode: str  # full or incremental
    runs_total: int
    runs_changed: int
    runs_deleted: int
    descriptions_added: int
    seconds: float
    # node rows another version had computed, counted again by this one (since 0.9.25), and that version (None:
    # before 0.8.0, which recorded none): fingerprints learnt from them say so in tracker predict
    node_rows_recounted: bool = False
    node_rows_version_before: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


#: Where a DuckDB database file says what it is (its header's magic bytes).
DUCKDB_MAGIC = (8, b"DUCK")


def is_duckdb_file(path: Path) -> bool:
    """Whether ``path`` is a DuckDB database, or nothing yet (a warehouse to make): not a file of
    something else (an empty one included)."""
    offset, magic = DUCKDB_MAGIC
    try:
        with path.open("rb") as fh:
            return fh.read(offset + len(magic))[offset:] == magic
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return True  # nothing there (DuckDB makes it), or a folder (DuckDB's own error says so)
    except OSError:
        return True  # unreadable: DuckDB's own error says why


def connect(path: Path, read_only: bool = False) -> Any:
    import duckdb

    usable_warehouse(path)
    if read_only and not path.exists():
        raise StoreError(f"no warehouse at {path}: run `tracker warehouse load` first")
    if not is_duckdb_file(path):  # DuckDB's own words for a small one: "Cannot launch in-memory database"
        raise StoreError(f"{path} is not a DuckDB database: a warehouse is the file `tracker warehouse load` makes")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot open warehouse {path}: {os_reason(exc)}") from None
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as exc:
        import re

        if held := re.search(r"Could not set lock on file .*?held in (.+?) \(PID (\d+)\)", str(exc)):
            # DuckDB's own words pointed at "the -readonly parameter in the CLI" (until 0.9.4)
            raise StoreError(f"cannot open warehouse {path}: another process has it open ({held[1]}, pid {held[2]}: "
                             f"a tracker sql, a load, a report?); try again when it ends") from None
        raise StoreError(f"cannot open warehouse {path}: {first_paragraph(str(exc))}") from None
    return con


def connect_loaded(path: Path) -> Any:
    """The warehouse at ``path``, read-only, for what reads its tables and views (the fingerprints,
    ``views``, a report): a DuckDB file that ``tracker warehouse load`` never loaded is one line
    (a CatalogException's traceback, or an empty list of views, until 0.9.4). ``tracker sql``
    takes any DuckDB file, with :func:`connect`."""
    con = connect(path, read_only=True)
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = 'runs'"
                       ).fetchall()[0][0]:  # fetchall: a result left unfinished holds the connection
        con.close()
        raise StoreError(f"{path} is a DuckDB database that tracker never loaded (it has no runs table): "
                         f"tracker warehouse load -w {shell_word(path)}")
    return con


def recorded_node_rows_version(con: Any, tables: Collection[str]) -> int | None:
    """The ``NODE_ROWS_VERSION`` that computed the warehouse's node rows, of its ``tables`` (their names);
    None where it keeps none (before 0.8.0, or never loaded)."""
    if "node_rows_version" not in tables:
        return None
    return con.execute("SELECT max(version) FROM node_rows_version").fetchall()[0][0]


def _node_rows_before(con: Any) -> tuple[int | None] | None:
    """Where the warehouse holds node rows another ``NODE_ROWS_VERSION`` computed, that version, in a tuple (None
    in it: before 0.8.0, which recorded none); else None (this version's rows, or none at all)."""
    tables = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables "
                                             "WHERE table_schema = 'main'").fetchall()}
    if "network_nodes" not in tables or not con.execute("SELECT count(*) FROM network_nodes").fetchall()[0][0]:
        return None
    recorded = recorded_node_rows_version(con, tables)
    return None if recorded == NODE_ROWS_VERSION else (recorded,)


def older_probe_views(path: Path) -> str:
    """What to say of a warehouse whose views an older tracker made, read where the speed probe's
    version is (``speed_probe_version``, since 0.9.11): a load makes them anew."""
    return (f"the warehouse {path} has the views of an older tracker, without speed_probe_version (the speed "
            "probe's version, which tracker 0.9.11 reads before it compares probes; a load by tracker 0.9.11 or later "
            f"adds it): tracker warehouse load -w {shell_word(path)}")


@contextmanager
def interruptible(con: Any) -> Iterator[None]:
    """A Ctrl-C, or a SIGTERM where the command takes it as one, stops the connection's query.
    DuckDB sees the KeyboardInterrupt that Python's own handler raises only sometimes, and then runs
    the query to its end; ``con.interrupt()`` stops it (a SIGTERM waited for the query's end, most
    times, until 0.9.4)."""
    import signal
    import threading

    def stop(signum: int, frame: Any) -> None:
        con.interrupt()
        raise KeyboardInterrupt

    term = signal.getsignal(signal.SIGTERM)
    if not callable(term) or threading.current_thread() is not threading.main_thread():
        with sigint_handled(stop):
            yield
        return

    def stop_term(signum: int, frame: Any) -> None:
        con.interrupt()
        term(signum, frame)  # the command's own: Terminated, its status 143

    signal.signal(signal.SIGTERM, stop_term)
    try:
        with sigint_handled(stop):
            yield
    finally:
        signal.signal(signal.SIGTERM, term)


def ensure_tables(con: Any) -> bool:
    """Create what is missing. A table generated from schemas/ whose columns differ from this
    version's (a warehouse made before a field was added) is dropped and made again; returns
    whether that happened, in which case every run must be loaded again (a full load)."""
    remade = False
    existing = dict(con.execute(
        "SELECT table_name, list(column_name ORDER BY ordinal_position) FROM information_schema.columns "
        "WHERE table_schema = 'main' GROUP BY table_name").fetchall())
    for name, want in tables.generated_columns().items():
        have = existing.get(name)
        if have and have != want:
            con.execute(f'DROP TABLE "{name}"')
            remade = True
    recorded = recorded_node_rows_version(con, existing)
    if "network_nodes" in existing and recorded != NODE_ROWS_VERSION:
        remade = True  # node rows another version's features computed: every network is described again
    if existing and not {"trace_ops", "trace_kernels"} <= existing.keys():
        remade = True  # a warehouse from before traces (or their kernels): traced runs get their rows
    for ddl in tables.all_ddl():
        con.execute(ddl)
    if recorded != NODE_ROWS_VERSION:
        con.execute("DELETE FROM node_rows_version")
        con.execute("INSERT INTO node_rows_version VALUES (CAST(? AS INTEGER))", [NODE_ROWS_VERSION])
    return remade


#: The store's runs (``snapshot``) the warehouse lacks, or holds as they were before a change.
CHANGED_SQL = ("SELECT s.run_id FROM snapshot s LEFT JOIN runs w ON w.run_id = s.run_id WHERE s.lifecycle_stage = 'active' "
               "AND (w.run_id IS NULL OR w.status IS DISTINCT FROM s.status OR w.end_time_ms IS DISTINCT FROM s.end_time_ms "
               "OR w.change_token IS DISTINCT FROM s.change_token)")
#: The warehouse's runs the store no longer has (deleted).
GONE_SQL = ("SELECT w.run_id FROM runs w LEFT JOIN snapshot s ON s.run_id = w.run_id "
            "WHERE s.run_id IS NULL OR s.lifecycle_stage <> 'active'")


def unloaded(path: Path, source: DatabaseSource, kinds_aside: tuple[str, ...] = ("fingerprint",)) -> tuple[int, int]:
    """What a load of ``source`` into the warehouse at ``path`` would change, counted without
    loading: the runs it lacks or holds out of date, and the runs deleted from the store since;
    runs of ``kinds_aside`` (the fingerprints' own) not counted."""
    try:
        snapshot = source.snapshot()
        con = connect(path, read_only=True)
        try:
            con.register("snapshot", snapshot)
            changed = [r[0] for r in con.execute(CHANGED_SQL).fetchall()]
            kinds = source.tag_values(changed, "tracker.kind") if changed else {}
            marks = ", ".join("?" * len(kinds_aside))
            gone = con.execute(f"SELECT count(*) FROM runs WHERE run_id IN ({GONE_SQL}) AND coalesce(kind, '') NOT IN "
                               f"({marks})", list(kinds_aside)).fetchall()[0][0]
        finally:
            con.close()
    finally:
        source.close()
    return sum(kinds.get(run_id) not in kinds_aside for run_id in changed), gone


def load(path: Path, source: Source, full: bool = False) -> LoadReport:
    """Bring the warehouse at ``path`` up to date with ``source``; ``full`` reloads everything."""
    import duckdb

    from tracker.warehouse.views import create_views

    t0 = time.perf_counter()
    con, failed, new_file = None, True, False
    try:
        snapshot = source.snapshot()
        new_file = not path.exists()
        con = connect(path)
        with interruptible(con):  # a Ctrl-C stops the query DuckDB is in, and the load
            con.execute("BEGIN TRANSACTION")
            before = _node_rows_before(con)
            remade = ensure_tables(con)
            con.register("snapshot", snapshot)
            empty = con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 0
            mode = "full" if (full or empty or remade) else "incremental"
            if mode == "full":
                for name in tables.TABLES:
                    if name != "loads":
                        con.execute(f"DELETE FROM {name}")
                con.execute("CREATE OR REPLACE TEMP TABLE changed AS SELECT run_id FROM snapshot WHERE lifecycle_stage = 'active'")
                con.execute("CREATE OR REPLACE TEMP TABLE gone (run_id VARCHAR)")
            else:
                con.execute(f"CREATE OR REPLACE TEMP TABLE changed AS {CHANGED_SQL}")
                con.execute(f"CREATE OR REPLACE TEMP TABLE gone AS {GONE_SQL}")
            changed = con.execute("SELECT count(*) FROM changed").fetchall()[0][0]
            deleted = con.execute("SELECT count(*) FROM gone").fetchall()[0][0]
            if mode == "incremental" and (changed or deleted):
                for name in tables.TABLES:
                    if name not in ("loads", "network_nodes", "network_descriptions"):
                        con.execute(f"DELETE FROM {name} WHERE run_id IN (SELECT run_id FROM changed UNION ALL SELECT run_id FROM gone)")
            added = 0
            if changed:
                ids = None if mode == "full" else [r[0] for r in con.execute("SELECT run_id FROM changed").fetchall()]
                detail = source.details(ids)
                _insert_details(con, detail)
                _check_formats(con)
                added = _load_descriptions(con, source)
                _load_traces(con, source)
            con.unregister("snapshot")
            seconds = time.perf_counter() - t0
            report = LoadReport(source.name, mode, snapshot.num_rows, changed, deleted, added, round(seconds, 3),
                                node_rows_recounted=before is not None and bool(changed),
                                node_rows_version_before=None if before is None else before[0])
            con.execute("INSERT INTO loads VALUES (now(), ?, ?, ?, ?, ?, ?, ?)",
                        [report.source, mode, report.runs_total, changed, deleted, added, report.seconds])
            create_views(con)
            con.execute("COMMIT")
        failed = False
    except BaseException as exc:
        try:
            if con is not None:
                con.execute("ROLLBACK")
        except Exception:
            pass
        if interrupted(exc):  # a Ctrl-C, which DuckDB may have turned into an error: nothing was changed
            raise KeyboardInterrupt from None
        if isinstance(exc, duckdb.Error):  # nothing was changed: the warehouse is as it was
            raise StoreError(f"warehouse load into {path} failed, nothing changed: {first_paragraph(str(exc))}") from None
        raise
    finally:
        if con is not None:
            con.close()
        source.close()
        if failed and new_file:  # a first load that did not finish leaves no empty warehouse behind
            for leftover in (path, path.with_name(path.name + ".wal")):
                with suppress(OSError):  # never made (a file where its folder should be): nothing to remove
                    leftover.unlink(missing_ok=True)
    return report


def _check_formats(con: Any) -> None:
    """A SchemaError naming a run whose record format (its ``tracker.schema`` tag) this tracker does
    not read, a newer tracker's say: loud, as pyperf is, where until 0.9.2 it was loaded as if known.
    Raised inside the load's transaction, so nothing of the load is kept."""
    from tracker.log.schema import schema_tag_problem

    rows = con.execute("SELECT r.run_id, t.value, k.value FROM runs r JOIN tags t ON t.run_id = r.run_id AND t.key = "
                       "'tracker.schema' LEFT JOIN tags k ON k.run_id = r.run_id AND k.key = 'tracker.kind' "
                       "WHERE r.run_id IN (SELECT run_id FROM changed) ORDER BY r.run_id").fetchall()
    for run_id, tag, kind in rows:
        # checked against the run's kind, and as tracker writes it: layer/1 on a network run, or network/01,
        # loaded without a word until 0.9.7
        if (problem := schema_tag_problem(tag, kind)) is not None:
            reason, newer = problem
            hint = "a newer tracker logged it? upgrade this one" if newer else "a tag set by hand? set it as tracker writes it"
            raise SchemaError(f"run {run_id}: {reason}; nothing was loaded ({hint})")


def _insert_details(con: Any, detail: dict[str, Any]) -> None:
    con.register("src_runs", detail["runs"])
    con.register("src_params", detail["params"])
    con.register("src_tags", detail["tags"])
    con.register("src_metrics", detail["metrics"])
    # Only active runs of the changed set (a detail read may see a run deleted meanwhile). Every
    # column cast: a read with no rows has no types to infer from (SQLite through ADBC gives an
    # empty column as BIGINT), as where no run logged a metric (a store of failed runs alone).
    for table in ("params", "tags"):
        con.execute(f"INSERT INTO {table} SELECT CAST(run_id AS VARCHAR), CAST(key AS VARCHAR), CAST(value AS VARCHAR) "
                    f"FROM src_{table} WHERE CAST(run_id AS VARCHAR) IN (SELECT run_id FROM changed)")
    # MLflow's SQL store keeps an infinite metric (logged by a user's own script) as the largest float:
    # infinite here, as runs list shows it (that float, a label of 1.8e308 MB to train on, until 0.9.13)
    con.execute(
        "INSERT INTO metrics SELECT CAST(run_id AS VARCHAR), CAST(key AS VARCHAR), "
        "CASE WHEN abs(CAST(value AS DOUBLE)) >= $most THEN sign(CAST(value AS DOUBLE)) * CAST('inf' AS DOUBLE) "
        "ELSE CAST(value AS DOUBLE) END, CAST(step AS BIGINT), CAST(timestamp_ms AS BIGINT) "
        "FROM src_metrics WHERE CAST(run_id AS VARCHAR) IN (SELECT run_id FROM changed)", {"most": sys.float_info.max}
    )
    con.execute(
        """
        INSERT INTO runs
        SELECT r.run_id, r.experiment_id, r.experiment, r.run_name, t.kind,
               TRY_CAST(split_part(t.schema_tag, '/', 2) AS INTEGER), r.status, t.failure_reason, t.parent_run_id,
               t.config_key, t.campaign, t.source,
               make_timestamp(CAST(r.start_time_ms AS BIGINT) * 1000),
               CASE WHEN r.end_time_ms IS NULL THEN NULL ELSE make_timestamp(CAST(r.end_time_ms AS BIGINT) * 1000) END,
               CAST(r.start_time_ms AS BIGINT), CAST(r.end_time_ms AS BIGINT), r.artifact_uri, t.description_artifact,
               s.change_token
        FROM src_runs r
        LEFT JOIN snapshot s USING (run_id)
        LEFT JOIN (
            SELECT run_id,
                   any_value(value) FILTER (WHERE key = 'tracker.kind') AS kind,
                   any_value(value) FILTER (WHERE key = 'tracker.schema') AS schema_tag,
                   any_value(value) FILTER (WHERE key = 'tracker.failure_reason') AS failure_reason,
                   any_value(value) FILTER (WHERE key = 'mlflow.parentRunId') AS parent_run_id,
                   any_value(value) FILTER (WHERE key = 'tracker.config_key') AS config_key,
                   any_value(value) FILTER (WHERE key = 'tracker.campaign') AS campaign,
                   any_value(value) FILTER (WHERE key = 'tracker.source') AS source,
                   any_value(value) FILTER (WHERE key = 'tracker.description') AS description_artifact
            FROM tags WHERE run_id IN (SELECT run_id FROM changed) GROUP BY run_id
        ) t USING (run_id)
        WHERE r.run_id IN (SELECT run_id FROM changed)
        """
    )
    for name in ("src_runs", "src_params", "src_tags", "src_metrics"):
        con.unregister(name)
    con.execute(tables.environment_insert())
    # Only the kinds the changed runs are of: each insert pivots every changed run's params, metrics
    # and tags before it keeps its own kind's (about 40 ms a kind in a store of 8,000 runs), and a
    # store usually holds a few of the eight kinds (every kind's insert ran, empty or not, until 0.9.17)
    present = {kind for (kind,) in con.execute(
        "SELECT DISTINCT kind FROM runs WHERE run_id IN (SELECT run_id FROM changed)").fetchall()}
    for kind in KINDS:
        if kind in present:
            con.execute(tables.typed_insert(kind))


def _load_descriptions(con: Any, source: Source) -> int:
    """Node rows of every model hash that has a description artifact and no rows yet."""
    from tracker.describe.graph import Description

    wanted = con.execute(
        """
        SELECT DISTINCT ON (p.value) p.value AS model_hash, r.run_id, r.artifact_uri, r.description_artifact
        FROM runs r JOIN params p ON p.run_id = r.run_id AND p.key = 'model_hash'
        WHERE r.run_id IN (SELECT run_id FROM changed) AND r.description_artifact IS NOT NULL
          AND p.value NOT IN (SELECT model_hash FROM network_descriptions)
        ORDER BY p.value, r.end_time_ms
        """
    ).fetchall()
    added = 0
    columns = node_columns(con)
    for model_hash, run_id, artifact_uri, artifact in wanted:
        text = source.read_artifact(run_id, artifact_uri or "", artifact)
        if text is None:
            continue
        try:
            desc = Description.from_json(loads_json(text))
        except (ValueError, KeyError, TypeError):
            continue  # a broken artifact leaves this network without nodes, not the load
        insert_description(con, desc, model_hash, run_id, node_table(columns, desc, model_hash))
        added += 1
    return added


def _load_traces(con: Any, source: Source) -> None:
    """Operator rows (and on a GPU kernel rows) of every changed run that was traced (tag
    ``tracker.trace``: the artifact of its operator table, ``tracker.profile.trace``)."""
    from tracker.profile.trace import TRACE_TAG, normalized

    wanted = con.execute(
        "SELECT r.run_id, r.artifact_uri, t.value FROM runs r JOIN tags t ON t.run_id = r.run_id AND t.key = $tag "
        "WHERE r.run_id IN (SELECT run_id FROM changed) ORDER BY r.run_id", {"tag": TRACE_TAG}).fetchall()
    for run_id, artifact_uri, artifact in wanted:
        text = source.read_artifact(run_id, artifact_uri or "", artifact)
        if text is None:
            continue
        try:
            table = normalized(loads_json(text))
            basis, iterations = str(table["time_basis"]), int(table["iterations"])
            rows = [(run_id, str(op["op"]), float(op["calls_per_iter"]), float(op["self_cpu_ms"]),
                     float(op["cpu_total_ms"]), _number(op.get("self_device_ms")), _number(op.get("share_pct")),
                     basis, iterations) for op in table["ops"]]
            kernels = [(run_id, str(k["kernel"]), float(k["calls_per_iter"]), float(k["self_device_ms"]),
                        _number(k.get("share_pct")), iterations) for k in table.get("kernels", [])]
        except (ValueError, KeyError, TypeError):
            continue  # a broken artifact leaves this run without operator rows, not the load
        if rows:
            con.executemany("INSERT INTO trace_ops VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        if kernels:
            con.executemany("INSERT INTO trace_kernels VALUES (?, ?, ?, ?, ?, ?)", kernels)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def insert_description(con: Any, desc: Any, model_hash: str, run_id: str | None, nodes: Any) -> None:
    """One network's node rows (its :func:`node_table`) and its description row."""
    insert_nodes(con, nodes)
    con.execute(
        "INSERT INTO network_descriptions VALUES (?, ?, ?, ?, ?, ?, ?)",
        [model_hash, desc.name, *(desc.image or (None, None)), len(desc.nodes), len(desc.edges), run_id],
    )


def node_columns(con: Any) -> list[str]:
    """The columns of ``network_nodes`` in order (read once by a caller that makes many node tables)."""
    return [c[0] for c in con.execute("DESCRIBE network_nodes").fetchall()]


def node_table(columns: list[str], desc: Any, model_hash: str) -> Any:
    """A network's rows of ``network_nodes`` (features at batch size 1): an Arrow table of its
    ``columns`` (:func:`node_columns`), in order."""
    import pyarrow as pa

    from tracker.describe.features import node_rows

    rows = node_rows(desc, batch_size=1)
    return pa.table({"model_hash": [model_hash] * len(rows), "model": [desc.name] * len(rows),
                     **{c: [r[c] for r in rows] for c in columns[2:]}})


def insert_nodes(con: Any, nodes: Any) -> None:
    """Appends a :func:`node_table` to ``network_nodes`` (nothing registered on the connection: an
    unregister after a failed insert would fail too, in the aborted transaction, and hide why)."""
    con.from_arrow(nodes).insert_into("network_nodes")
