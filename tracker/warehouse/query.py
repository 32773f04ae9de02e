"""Read-only queries on the warehouse, its views listed, and export to Parquet."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from tracker.errors import QueryError, StoreError, first_paragraph, interrupted
from tracker.warehouse.load import connect, connect_loaded, interruptible
from tracker.warehouse.tables import TABLES


def statement_count(sql: str) -> int | None:
    """How many statements ``sql`` holds, as DuckDB's own parser reads it, with no warehouse opened: 0
    for blank, semicolons, or comments alone (``-- best runs``); None for SQL it cannot parse, left to
    the query to say."""
    if not sql.replace(";", " ").strip():
        return 0
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        return len(con.extract_statements(sql))
    except duckdb.Error:
        return None
    finally:
        con.close()


#: DuckDB's integer types whose Arrow export does not hold their values (duckdb-python#568): a UHUGEINT past
#: 2**127 - 1 comes back negative (exported as a signed decimal128: 2**128 - 1 read -1), a BIGNUM (an integer
#: past 128 bits, a literal of 40 digits or more) as its internal bytes (written as hex until 0.9.13).
WIDE_INTEGERS = ("UHUGEINT", "BIGNUM")
#: The field metadata of a result's column of whole numbers given as their digits (:func:`_exactly`).
WHOLE_DIGITS = b"tracker.whole_digits"


def _exactly(relation: Any) -> tuple[Any, dict[int, Any]]:
    """``relation`` with each integer of a type in :data:`WIDE_INTEGERS` given as its text, exact, in a
    list, struct or map as in a plain column (the rest of a list or struct as it is: until 0.9.14 such a
    column was its text whole, ``"[340282366920938463463374607431768211455, 5]"``), and the DuckDB types
    of the columns so given, by their places (:func:`_marked` marks their whole numbers)."""
    types = list(relation.types)
    texts = {i: _wide_as_text(kind) for i, kind in enumerate(types)}
    texts = {i: text for i, text in texts.items() if text}
    if not texts:
        return relation, {}
    picks = [f'#{i + 1}::{texts[i]} AS "{name.replace(chr(34), chr(34) * 2)}"' if i in texts else f"#{i + 1}"
             for i, name in enumerate(relation.columns)]
    return relation.project(", ".join(picks)), {i: types[i] for i in texts}


def _wide_as_text(kind: Any) -> str | None:
    """The SQL type of DuckDB's type ``kind`` with each integer of :data:`WIDE_INTEGERS` in it VARCHAR (in
    a list, an array, a struct or a map; a union that holds one is VARCHAR whole); None where it holds none."""
    name = str(kind)
    if name in WIDE_INTEGERS:
        return "VARCHAR"
    if not any(wide in name for wide in WIDE_INTEGERS):
        return None
    children = [child for _, child in kind.children]
    if kind.id == "list":
        inner = _wide_as_text(children[0])
        return f"{inner}[]" if inner else None
    if kind.id == "array":
        inner = _wide_as_text(children[0])
        return f"{inner}[{kind.children[1][1]}]" if inner else None
    if kind.id in ("struct", "map"):
        inner = [_wide_as_text(child) for child in children]
        if not any(inner):  # a field named UHUGEINT, say
            return None
        said = [text or str(child) for text, child in zip(inner, children)]
        if kind.id == "map":
            return f"MAP({said[0]}, {said[1]})"
        names = ['"' + n.replace('"', '""') + '"' for n, _ in kind.children]
        return "STRUCT(" + ", ".join(f"{n} {t}" for n, t in zip(names, said)) + ")"
    return "VARCHAR" if kind.id == "union" and any(map(_wide_as_text, children)) else None


def _marked(field: Any, kind: Any) -> Any:
    """Arrow's ``field`` of a column of DuckDB's type ``kind`` that :func:`_exactly` gave as text, each
    field in it that holds a wide integer's digits marked :data:`WHOLE_DIGITS` (in a list, a struct or a
    map too: :func:`column_values` reads them as numbers, Parquet keeps the mark)."""
    import pyarrow as pa

    if str(kind) in WIDE_INTEGERS:
        return field.with_metadata({**(field.metadata or {}), WHOLE_DIGITS: b"1"})
    t, children = field.type, [child for _, child in kind.children] if kind.id in ("list", "array", "struct", "map") else []
    if kind.id == "list" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        inner = _marked(t.value_field, children[0])
        return field.with_type(pa.list_(inner) if pa.types.is_list(t) else pa.large_list(inner))
    if kind.id == "array" and pa.types.is_fixed_size_list(t):
        return field.with_type(pa.list_(_marked(t.value_field, children[0]), t.list_size))
    if kind.id == "map" and pa.types.is_map(t):
        return field.with_type(pa.map_(_marked(t.key_field, children[0]), _marked(t.item_field, children[1]),
                                       keys_sorted=t.keys_sorted))
    if kind.id == "struct" and pa.types.is_struct(t):
        return field.with_type(pa.struct([_marked(t.field(i), child) for i, child in enumerate(children)]))
    return field


def column_values(field: Any, column: Any) -> list[Any]:
    """A result's column (Arrow's ``field`` and ``column``) as Python's values, each whole number given
    as its digits (a field marked :data:`WHOLE_DIGITS`: a wide integer, in a list, struct or map too) an
    int, exactly, which JSON and a CSV cell's JSON text write as a number and the table as its digits."""
    values = column.to_pylist()
    return [_whole(v, field) for v in values] if _holds_whole(field) else values


def _holds_whole(field: Any) -> bool:
    """Whether ``field`` is, or holds, one marked :data:`WHOLE_DIGITS`."""
    t = field.type
    return bool((field.metadata or {}).get(WHOLE_DIGITS)) or any(_holds_whole(t.field(i)) for i in range(t.num_fields))


def _whole(value: Any, field: Any) -> Any:
    """``value`` of Arrow's ``field`` with the digits of each field marked :data:`WHOLE_DIGITS` in it an int."""
    import pyarrow as pa

    t = field.type
    if value is None:
        return None
    if (field.metadata or {}).get(WHOLE_DIGITS):
        return int(value)
    if pa.types.is_map(t):  # its entries, pairs
        return [(_whole(k, t.key_field), _whole(v, t.item_field)) for k, v in value]
    if pa.types.is_struct(t):
        return {name: _whole(v, t.field(name)) for name, v in value.items()}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_whole(v, t.value_field) for v in value]
    return value


def query(path: Path, sql: str, params: Mapping[str, str] | None = None) -> Any:
    """Run one query on the warehouse opened read-only; an Arrow table of the result, its columns
    named apart (a second ``run_id`` of a join is ``run_id_1``, as DuckDB names them in Parquet:
    until 0.9.1 the JSON, CSV and table outputs showed the first column's values under both).
    ``params`` are bound to the query's ``$NAME`` parameters, as text that DuckDB casts where the
    query compares it (``batch_size = $bs``), never pasted into the SQL."""
    import duckdb

    if not sql.replace(";", " ").strip():
        raise QueryError('the query is empty: give one SQL statement, e.g. "SELECT * FROM latest_measurements"')
    con = connect(path, read_only=True)
    try:
        # No file reached from a query: read-only kept the warehouse's own tables, not a COPY ... TO
        # over the warehouse file or any other (until 0.9.3), nor ATTACH, read_csv or an INSTALL
        con.execute("SET enable_external_access = false")
        with interruptible(con):
            statements = con.extract_statements(sql)
            if not statements:  # a comment alone: "(0 rows)" until 0.9.4, where ";" was refused
                raise QueryError('the query is empty (a comment alone): give one SQL statement, e.g. '
                                 '"SELECT * FROM latest_measurements"')
            if len(statements) > 1:  # DuckDB would run them all and answer the last
                raise QueryError(f"the query holds {len(statements)} statements: tracker sql runs one; give each to "
                                 "a tracker sql of its own")
            relation = con.sql(sql, params=dict(params)) if params else con.sql(sql)
            if relation is None:  # a statement without rows (SET, PRAGMA ...)
                import pyarrow as pa

                return pa.table({})
            relation, wide = _exactly(relation)
            table = relation.to_arrow_table()
            if wide:  # their digits, which JSON and CSV write as numbers (column_values)
                import pyarrow as pa

                table = table.cast(pa.schema([_marked(f, wide[i]) if i in wide else f
                                              for i, f in enumerate(table.schema)]))
    except Exception as exc:
        if interrupted(exc):  # DuckDB's "Query interrupted" (a RuntimeError): a Ctrl-C, said as one by the caller
            raise KeyboardInterrupt from None
        if isinstance(exc, duckdb.Error):
            line = _parameter_line(str(exc)) or _older_warehouse(con, str(exc)) or first_paragraph(str(exc))
            if params and "STRING_LITERAL" in line:  # a --param in arithmetic, which text is not
                name = next(iter(params)) if len(params) == 1 else "NAME"  # the one given, else no guess at which
                line += f" (a --param is text: cast it where a number is meant, ${name}::INTEGER)"
            raise QueryError(line) from None
        raise
    finally:
        con.close()
    return table.rename_columns(distinct_names(table.column_names))


def _older_warehouse(con: Any, message: str) -> str | None:
    """A column the query names that no table or view of the warehouse has, where this tracker's views or
    typed tables have it (``tensor_peak_mb`` in a warehouse 0.9.30 loaded): said as a load to make, where
    DuckDB's binder listed the columns it has (since 0.9.31)."""
    missing = re.search(r'Referenced column "([^"]+)" not found', message)
    if missing is None:
        return None
    name = missing.group(1)
    if con.execute("SELECT count(*) FROM duckdb_columns() WHERE column_name = ?", [name]).fetchone()[0]:
        return None  # the warehouse has it, elsewhere than the query looked
    from tracker.log.schema import KINDS
    from tracker.warehouse.tables import typed_columns
    from tracker.warehouse.views import read_sql_files

    word = re.compile(rf"\b{re.escape(name)}\b")
    if not (any(word.search(v.body) for v in read_sql_files())
            or any(c == name for kind in KINDS for c, _, _ in typed_columns(kind))):
        return None
    return (f"no column {name} in this warehouse, which an older tracker loaded: this tracker's views have it; "
            "run `tracker warehouse load` to load it anew")


def _parameter_line(message: str) -> str | None:
    """DuckDB's word on parameters given and asked for, said in ``--param``'s terms."""
    missing = re.search(r"Values were not provided for the following parameters: (.+)", message)
    if missing:
        names = [n.strip() for n in missing.group(1).split(",")]
        if all(n.isdigit() for n in names):  # ? or $1: positional, which --param cannot give
            return "the query has positional parameters (? or $1): name them ($bs) and give --param bs=VALUE"
        return "the query's " + ", ".join(f"${n}" for n in names) + " not given: add " + " ".join(
            f"--param {n}=VALUE" for n in names)
    if re.search(r"Parameter/argument count mismatch for prepared statement\. Expected 0,", message):
        return "the query has no parameter ($NAME): leave out --param"
    excess = re.search(r"identifiers of the excess parameters: (.+)", message)
    if excess:
        names = [n.strip() for n in excess.group(1).split(",")]
        return ", ".join(f"--param {n}" for n in names) + ": the query has no " + ", ".join(f"${n}" for n in names)
    return None


def parse_params(given: Sequence[str]) -> dict[str, str]:
    """``--param NAME=VALUE`` options as a map; one that is not NAME=VALUE, or a name given twice, refused."""
    params: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        name = name.strip().lstrip("$")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise QueryError(f"--param {item!r}: give NAME=VALUE, NAME a parameter of the query ($NAME) such as bs")
        if same := [n for n in params if n.lower() == name.lower()]:  # $bs and $BS are one parameter to DuckDB
            raise QueryError(f"--param {name} is given twice" if same[0] == name else
                             f"--param {same[0]} and --param {name} are one parameter (SQL names ignore case): give one")
        params[name] = value
    return params


def distinct_names(names: list[str]) -> list[str]:
    """Column names with each repeat suffixed ``_1``, ``_2`` ... (one not already taken)."""
    taken, out = set(names), []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            n = 1
            while f"{name}_{n}" in taken:
                n += 1
            name = f"{name}_{n}"
            taken.add(name)
        seen.add(name)
        out.append(name)
    return out


def _plain(value: Any, finite: bool = True) -> Any:
    """A value JSON and CSV can hold: NaN and infinities are null (absent: not valid JSON) where
    ``finite``, bytes their hex, and nested lists and structs JSON in a CSV cell. Where ``finite`` (JSON),
    a DECIMAL or a HUGEINT (DuckDB's ``sum`` of integers, a literal such as ``1.5``), which arrive as
    Python's Decimal, is a number: a whole one (no digits after the point) an int, exactly, another a
    float (a string, ``"187"``, until 0.9.12); a CSV cell keeps its digits as written."""
    if finite and isinstance(value, float) and not math.isfinite(value):
        return None
    if finite and isinstance(value, Decimal):
        return _decimal_number(value) if value.is_finite() else None
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {k: _plain(v, finite) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, finite) for v in value]
    return value


def _cell(value: Any) -> Any:
    """A CSV cell: NaN and infinities as ``nan``, ``inf`` and ``-inf``, as DuckDB's own CSV export
    (``warehouse export``) writes them and pandas reads them back (until 0.9.6 an empty cell, read
    back as a value that is absent); a list or struct as JSON text, NaN and infinities in it as
    ``NaN``, ``Infinity`` and ``-Infinity`` (JSON has no word for them: these are the ones Python's
    ``json`` and DuckDB's JSON read back; until 0.9.8 ``null``, an absent value's); the rest as
    :func:`_plain` makes it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else "inf" if value > 0 else "-inf"
    value = _plain(value, finite=False)
    return json.dumps(value, default=_json_default) if isinstance(value, (dict, list)) else value


def _json_default(value: Any) -> Any:
    """What JSON text of a list or struct in a CSV cell writes for a value JSON has no type for: a
    DECIMAL a number (a string, ``["1.50"]``, until 0.9.13), as :func:`_plain` makes one for JSON;
    anything else (a date, a UUID) its text."""
    return _decimal_number(value) if isinstance(value, Decimal) else str(value)


def _decimal_number(value: Decimal) -> int | float:
    """A DECIMAL or HUGEINT (Python's Decimal) as a JSON number: a whole one (no digits after the point)
    an int, exactly, another a float (NaN and infinities too: :func:`_plain` makes those null first)."""
    return int(value) if value.is_finite() and value.as_tuple().exponent >= 0 else float(value)


def table_cell(value: Any) -> str:
    """A value as ``tracker sql``'s table shows it: absent empty, a float in 6 significant digits, the rest
    as its text. In a list or struct each value is shown as DuckDB shows it: a DECIMAL's digits (``[1.50]``,
    not Python's ``[Decimal('1.50')]``, until 0.9.13), a date or time as its text, an absent one NULL; a
    string quoted, a float as Python writes it."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return _nested(value) if isinstance(value, (list, dict, tuple)) else str(value)


def _nested(value: Any) -> str:
    """A value inside a list or struct (a MAP's entries are pairs) as :func:`table_cell` shows it."""
    if value is None:
        return "NULL"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_nested(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(map(_nested, value)) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_nested, value)) + ")"
    if isinstance(value, (str, bool, int, float)):
        return repr(value)
    return str(value)  # a Decimal, a date, a time, a UUID: their text, not Python's repr


def render(table: Any, fmt: str) -> str:
    """A result as JSON (a list of objects; NaN and infinities null) or CSV."""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")  # as warehouse export's (CRLF, csv's default, until 0.9.6)
        writer.writerow(table.column_names)
        writer.writerows(zip(*[[_cell(v) for v in column_values(field, column)]
                               for field, column in zip(table.schema, table.columns)]))
        return buf.getvalue()
    columns = [[_plain(v) for v in column_values(field, column)] for field, column in zip(table.schema, table.columns)]
    rows = list(zip(*columns)) if columns else []
    if fmt == "json":
        return json.dumps([dict(zip(table.column_names, row)) for row in rows], indent=2, default=str) + "\n"
    raise ValueError(fmt)


#: What a database file begins with: SQLite's header, and DuckDB's magic after its first 8 bytes.
SQLITE_HEADER = b"SQLite format 3\x00"


#: The files a database keeps beside it (SQLite's write-ahead log, its shared memory and its
#: rollback journal; DuckDB's write-ahead log), by the ending added to the database's name.
DATABASE_SIDE_FILES = ("-wal", "-shm", "-journal", ".wal")


def _is_database(path: Path) -> bool:
    """Whether ``path`` is a SQLite or DuckDB database, by its first bytes (False: nothing there, a folder)."""
    from tracker.warehouse.load import DUCKDB_MAGIC

    offset, magic = DUCKDB_MAGIC
    try:
        with path.open("rb") as fh:
            head = fh.read(max(len(SQLITE_HEADER), offset + len(magic)))
    except OSError:
        return False
    return head.startswith(SQLITE_HEADER) or head[offset:offset + len(magic)] == magic


def check_output(out: Path, warehouse: Path) -> None:
    """Refuse, before the query runs, to write a result over the warehouse or over any database
    file (a tracking store's ``mlflow.db``): ``sql -o`` wrote a table's text over either until 0.9.4,
    and every measurement in a store so written over was lost; nor over a database's side file
    (``mlflow.db-wal``: until 0.9.6 a result written there lost what was committed and not yet
    folded into the database)."""
    if out.resolve() == warehouse.resolve() or _is_database(out):
        raise QueryError(f"--output {out} is a database (a warehouse, or a tracking store's): a result is not "
                         "written over it; choose another file")
    for side in DATABASE_SIDE_FILES:
        base = out.with_name(out.name.removesuffix(side))
        if out.name.endswith(side) and base != out and (base.resolve() == warehouse.resolve() or _is_database(base)):
            raise QueryError(f"--output {out} is where the database {base.name} keeps what it has not written "
                             "into itself yet: a result is not written there; choose another file")


def write_parquet(table: Any, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        pq.write_table(table, out)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:  # an INTERVAL, say
        raise QueryError(f"cannot write this result as Parquet: {first_paragraph(str(exc))} (cast the column, or "
                         "--format csv)") from None


def list_views(path: Path) -> list[dict[str, str]]:
    con = connect_loaded(path)
    try:
        rows = con.execute(
            "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal AND schema_name = 'main' ORDER BY view_name"
        ).fetchall()
    finally:
        con.close()
    return [{"view": name, "comment": comment or ""} for name, comment in rows]


#: What ``export`` writes each table and view as: DuckDB's COPY options, by format.
EXPORT_FORMATS = {"parquet": "FORMAT parquet", "csv": "FORMAT csv, HEADER true", "json": "FORMAT json"}


@dataclass
class ExportProgress:
    """How far an export went, kept by its caller, so that a Ctrl-C can say it: ``total``, the
    tables and views to write (None before they are read), and ``written``, those written whole."""
    total: int | None = None
    written: list[Path] = field(default_factory=list)


def _file_state(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def export(path: Path, folder: Path, fmt: str = "parquet", progress: ExportProgress | None = None) -> list[Path]:
    """Every table and view of the warehouse as ``folder/NAME.parquet`` (or ``.csv``, with a header
    row, or ``.json``, an object a line). DuckDB writes each file whole or not at all (over an older
    file, beside it first, then in its place): a file counts as written (``progress.written``) once it
    is there anew, a Ctrl-C in the moment after DuckDB finished it included."""
    import duckdb

    if fmt not in EXPORT_FORMATS:
        raise QueryError(f"--format {fmt}: export writes {', '.join(EXPORT_FORMATS)}")

    progress = ExportProgress() if progress is None else progress
    written = progress.written
    con = connect(path, read_only=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
        ).fetchall()]
        if missing := set(TABLES) - set(names):  # before a file is written (after the others until 0.9.4)
            raise StoreError(f"the warehouse lacks tables {', '.join(sorted(missing))}: run `tracker warehouse load`")
        # a folder where a file goes: said before any is written (after 33 of 41 until 0.9.6)
        if blocked := [folder / f"{name}.{fmt}" for name in sorted(names) if (folder / f"{name}.{fmt}").is_dir()]:
            raise StoreError(f"{blocked[0]} is a folder, where export writes a file; move it away")
        progress.total = len(names)
        # a Ctrl-C stops the COPY DuckDB is in through con.interrupt(): until 0.9.15 DuckDB ran a slow view's
        # COPY to its end (seconds, minutes) before the export took the signal, most times
        with interruptible(con):
            for name in sorted(names):
                out = folder / f"{name}.{fmt}"
                before = _file_state(out)
                try:
                    con.execute(f"COPY ({_export_select(con, name, fmt)}) TO '{_sql_path(out)}' "
                                f"({EXPORT_FORMATS[fmt]})")
                finally:  # a Ctrl-C just after DuckDB put the file in place: written all the same
                    if _file_state(out) not in (None, before):
                        written.append(out)
    except (duckdb.Error, RuntimeError) as exc:
        if interrupted(exc):  # DuckDB's error for a Ctrl-C in a query ("Query interrupted"): a Ctrl-C, said as one
            raise KeyboardInterrupt from None
        if not isinstance(exc, duckdb.Error):
            raise
        raise StoreError(f"export failed: {first_paragraph(str(exc))}") from None
    finally:
        con.close()
    return written


def _export_select(con: Any, name: str, fmt: str) -> str:
    """What export writes of a table or view: all of it; in JSON, a NaN or an infinity as null, as
    ``sql --format json`` writes it (DuckDB writes NaN and Infinity, which JSON has not: until 0.9.6
    a file no JSON reader took)."""
    if fmt != "json":
        return f'SELECT * FROM "{name}"'
    floats = [r[0] for r in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = ? "
        "AND data_type IN ('DOUBLE', 'FLOAT')", [name]).fetchall()]
    if not floats:
        return f'SELECT * FROM "{name}"'
    quoted = ['"' + c.replace('"', '""') + '"' for c in floats]
    return (f'SELECT * REPLACE ({", ".join(f"CASE WHEN isfinite({q}) THEN {q} END AS {q}" for q in quoted)}) '
            f'FROM "{name}"')


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")
