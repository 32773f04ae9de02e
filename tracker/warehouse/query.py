"""Read-only queries on the warehouse, its views listed, and export to Parquet."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from tracker.errors import QueryError, StoreError, first_paragraph
from tracker.warehouse.load import connect, interruptible
from tracker.warehouse.tables import TABLES


def query(path: Path, sql: str) -> Any:
    """Run one query on the warehouse opened read-only; an Arrow table of the result."""
    import duckdb

    if not sql.replace(";", " ").strip():
        raise QueryError('the query is empty: give one SQL statement, e.g. "SELECT * FROM latest_measurements"')
    con = connect(path, read_only=True)
    try:
        with interruptible(con):
            relation = con.sql(sql)
            if relation is None:  # a statement without rows (SET, PRAGMA ...)
                import pyarrow as pa

                return pa.table({})
            return relation.to_arrow_table()
    except duckdb.Error as exc:
        raise QueryError(first_paragraph(str(exc))) from None
    finally:
        con.close()


def render(table: Any, fmt: str) -> str:
    """A result as JSON (a list of objects), CSV or an aligned text table."""
    rows = table.to_pylist()
    if fmt == "json":
        return json.dumps(rows, indent=2, default=str) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(table.column_names)
        writer.writerows([[row[c] for c in table.column_names] for row in rows])
        return buf.getvalue()
    raise ValueError(fmt)


def write_parquet(table: Any, out: Path) -> None:
    import pyarrow.parquet as pq

    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out)


def list_views(path: Path) -> list[dict[str, str]]:
    con = connect(path, read_only=True)
    try:
        rows = con.execute(
            "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal AND schema_name = 'main' ORDER BY view_name"
        ).fetchall()
    finally:
        con.close()
    return [{"view": name, "comment": comment or ""} for name, comment in rows]


def export(path: Path, folder: Path) -> list[Path]:
    """Every table and view of the warehouse as ``folder/NAME.parquet``."""
    import duckdb

    con = connect(path, read_only=True)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
        ).fetchall()]
        for name in sorted(names):
            out = folder / f"{name}.parquet"
            con.execute(f"COPY (SELECT * FROM \"{name}\") TO '{_sql_path(out)}' (FORMAT parquet)")
            written.append(out)
    except duckdb.Error as exc:
        raise StoreError(f"export failed: {first_paragraph(str(exc))}") from None
    finally:
        con.close()
    missing = set(TABLES) - {p.stem for p in written}
    if missing:
        raise StoreError(f"the warehouse lacks tables {', '.join(sorted(missing))}: run `tracker warehouse load`")
    return written


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")
