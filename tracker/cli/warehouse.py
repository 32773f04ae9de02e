"""``tracker warehouse``, ``tracker sql`` and ``tracker views``: the DuckDB warehouse."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from tracker.cli.options import (FormatOption, OutputFormat, emit_json, exit_interrupted, option_values, reads_only,
                                 path_of, says_when_interrupted, state)
from tracker.console import counted

if TYPE_CHECKING:
    from tracker.warehouse.query import ExportProgress

app = typer.Typer(help="The DuckDB warehouse of runs: load it from the tracking store, export it.", no_args_is_help=True)

WarehouseOption = Annotated[
    Optional[Path],
    typer.Option("--warehouse", "-w", metavar="FILE", parser=path_of("the DuckDB file, or leave --warehouse out"), help="DuckDB file. Default: TRACKER_WAREHOUSE, else warehouse.duckdb in the embedded store's folder (runs/); for a server, runs/warehouse-HOST-PORT.duckdb."),
]


class ExportFormat(str, Enum):
    parquet = "parquet"
    csv = "csv"
    json = "json"


EXPORT_NAMES = {ExportFormat.parquet: "Parquet", ExportFormat.csv: "CSV", ExportFormat.json: "JSON"}


class QueryFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    parquet = "parquet"


def load_stopped(path: Path, first: bool) -> str:
    """What an interrupted load of the warehouse at ``path`` (``first``: none was there) left: a load
    is one transaction, and a first load leaves none ("is as it was before it" of a warehouse that
    was not, until 0.9.6)."""
    return f"the load stopped; {f'no warehouse was made at {path}' if first else f'the warehouse {path} is as it was before it'}"


@app.command("load")
def load_cmd(
    ctx: typer.Context,
    warehouse: WarehouseOption = None,
    full: Annotated[bool, typer.Option("--full", help="Reload every run instead of only what changed.")] = False,
    backend_store_uri: Annotated[
        Optional[str],
        typer.Option("--backend-store-uri", envvar="TRACKER_BACKEND_STORE_URI",
                     help="Database behind a tracking server (postgresql://...), read directly instead of through its API."),
    ] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Load new, finished and deleted runs from the tracking store into the warehouse."""
    from tracker.settings import resolve_location, warehouse_path
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    path = warehouse_path(warehouse, state(ctx).tracking_uri)
    first = not path.exists()
    try:
        report = load(path, open_source(resolve_location(state(ctx).tracking_uri), backend_store_uri), full=full)
    except KeyboardInterrupt:  # said as a load's ("what was logged before is kept" until 0.9.4): one transaction
        exit_interrupted(f"interrupted: {load_stopped(path, first)}")
    if fmt is OutputFormat.json:
        emit_json({"warehouse": str(path), **report.to_dict()})
        return
    typer.echo(
        f"{report.mode} load from {report.source} into {path}: {counted(report.runs_total, 'run')} in the store, "
        f"{report.runs_changed} loaded, {report.runs_deleted} removed, "
        + (f"{counted(report.descriptions_added, 'network description')} read" if report.mode == "full"
           else counted(report.descriptions_added, "new network description"))
        + f", {report.seconds:.2f} s"
    )
    if report.node_rows_recounted:  # after an upgrade (unsaid until 0.9.25): the fingerprints to train again
        from tracker.describe.features import NODE_ROWS_VERSION

        was = report.node_rows_version_before
        typer.echo(f"note: node rows {'of a tracker before 0.8.0' if was is None else f'version {was}'} counted again "
                   f"as this tracker's version {NODE_ROWS_VERSION}: a fingerprint learnt from the old ones says so in "
                   "tracker predict (tracker fingerprint list marks it); train it again on this warehouse")


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    folder: Annotated[str, typer.Argument(help="Folder to write NAME.parquet (or .csv, .json) files into.",
                                          metavar="FOLDER")],
    warehouse: WarehouseOption = None,
    fmt: Annotated[ExportFormat, typer.Option(
        "--format", help="parquet, csv (a header row) or json (an object a line).")] = ExportFormat.parquet,
) -> None:
    """Write every table and view of the warehouse as Parquet (or CSV, or JSON) files."""
    from tracker.errors import OptionError
    from tracker.settings import warehouse_path
    from tracker.warehouse.query import ExportProgress, export

    if not folder.strip():  # "" was the current folder, 41 files written there (until 0.9.4); status 2 (1 until 0.9.10)
        raise OptionError(f"FOLDER {folder!r} names no folder: give the folder to write the {EXPORT_NAMES[fmt]} files "
                          "into (. for this one)")
    progress = ExportProgress()
    try:
        written = export(warehouse_path(warehouse, state(ctx).tracking_uri), Path(folder), fmt.value, progress)
    except KeyboardInterrupt:  # main's "what was logged before is kept" until 0.9.10, of a command that logs nothing
        exit_interrupted(f"interrupted: {export_stopped(progress, EXPORT_NAMES[fmt], folder)}")
    typer.echo(f"wrote {counted(len(written), EXPORT_NAMES[fmt] + ' file')} to {folder}")


def export_stopped(progress: ExportProgress, kind: str, folder: str) -> str:
    """What an interrupted export (``progress``) of ``kind`` files into ``folder`` left: the files
    it wrote, each whole, of how many."""
    done = len(progress.written)
    if progress.total is None:
        return f"the export stopped before it wrote a file into {folder}"
    if done >= progress.total:
        return f"all {counted(done, kind + ' file')} were written to {folder} before it stopped"
    return (f"the export stopped; {done} of {counted(progress.total, kind + ' file')} written to {folder}, each whole; "
            "run the same command again to write them all")


@says_when_interrupted("interrupted: the warehouse, opened read-only, is as it was")
def sql(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="One SQL statement, e.g. \"SELECT * FROM latest_measurements\".")],
    warehouse: WarehouseOption = None,
    fmt: Annotated[Optional[QueryFormat], typer.Option(
        "--format", help="table, json, csv, or parquet (needs --output). Default: the --output file's suffix (.csv, .json, "
        ".parquet), else table.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE", parser=path_of("the file to write the result to"), help="Write the result to this file.")] = None,
    param: Annotated[Optional[list[str]], typer.Option(
        "--param", metavar="NAME=VALUE", help="A value for the query's $NAME, bound, not pasted into the SQL "
        "(repeatable): 'WHERE batch_size = $bs' --param bs=8.")] = None,
) -> None:
    """Run a SQL query on the warehouse, opened read-only."""
    from tracker.errors import OptionError, QueryError, os_reason
    from tracker.settings import warehouse_path
    from tracker.warehouse.query import (check_output, parse_params, query as run_query, render,
                                         statement_count, write_parquet)

    count = statement_count(query)
    if count == 0:  # as the query would refuse it, but a usage error, status 2 (1 until 0.9.10; a
        # comment alone, `sql -- "-- best runs"`, 1 until 0.9.11, and said only once a warehouse was there)
        what = "is empty" if not query.replace(";", " ").strip() else "holds no statement, only comments"
        raise OptionError(f"QUERY {query!r} {what}: give one SQL statement, e.g. \"SELECT * FROM latest_measurements\"")
    if count is not None and count > 1:  # as the query would refuse it (DuckDB would run them all and answer the
        # last), but a usage error, status 2 (1 until 0.9.11, said only once a warehouse was there)
        raise OptionError(f"QUERY holds {count} statements: tracker sql runs one; give each to a tracker sql of its "
                          "own")
    with option_values():  # --param, --output and --format as given: usage errors, status 2 (1 until 0.9.8)
        params = parse_params(param or [])
    files = {f.value for f in QueryFormat} - {"table"}
    suffix = output.suffix.lower().lstrip(".") if output is not None else ""
    if fmt is None:  # a file's suffix says its format (a table went into out.csv until 0.9.1)
        if output is not None and suffix not in files:  # the table's text went into out.xlsx until 0.9.4
            raise OptionError(f"--output {output}: tracker writes {', '.join(f'.{f}' for f in sorted(files))} files; "
                             "for another name say which (--format csv, json, parquet, or table for the table's text)")
        fmt = QueryFormat(suffix) if suffix in files else QueryFormat.table
    elif suffix in files and suffix != fmt.value:
        # CSV went into out.parquet without a word until 0.9.6
        raise OptionError(f"--output {output} with --format {fmt.value}: its suffix says {suffix}; give a file "
                         f"name ending .{fmt.value}, or leave --format out")
    if fmt is QueryFormat.parquet and output is None:
        raise OptionError("--format parquet writes a file: give --output FILE.parquet")
    path = warehouse_path(warehouse, state(ctx).tracking_uri)
    if output is not None:
        check_output(output, path)
    try:
        table = run_query(path, query, params)
    except KeyboardInterrupt:  # said as a query's, not as a measurement's ("what was logged before is kept")
        exit_interrupted("interrupted: the query stopped; the warehouse, opened read-only, is as it was")
    if fmt is QueryFormat.parquet:
        write_parquet(table, output)
        typer.echo(f"wrote {counted(table.num_rows, 'row')} to {output}")
        return
    if fmt is QueryFormat.table:
        text = _table_text(table)
    else:
        text = render(table, fmt.value)
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text)
        except OSError as exc:
            raise QueryError(f"cannot write {output}: {os_reason(exc)}") from None
        typer.echo(f"wrote {counted(table.num_rows, 'row')} to {output}")
    else:
        sys.stdout.write(text)


@reads_only
def views(ctx: typer.Context, warehouse: WarehouseOption = None, fmt: FormatOption = OutputFormat.table) -> None:
    """List the warehouse's SQL views with what each one is."""
    from tracker.settings import warehouse_path
    from tracker.warehouse.query import list_views

    rows = list_views(warehouse_path(warehouse, state(ctx).tracking_uri))
    if fmt is OutputFormat.json:
        emit_json(rows)
        return
    for row in rows:
        typer.echo(f"{row['view']}\n    {row['comment']}")


def _table_text(table) -> str:  # noqa: ANN001
    from rich.console import Console
    from rich.table import Table

    from rich.text import Text

    from tracker.warehouse.query import column_values, table_cell

    out = Table()
    for name in table.column_names:
        out.add_column(Text(name))
    cells = [[table_cell(v) for v in column_values(field, column)] for field, column in zip(table.schema, table.columns)]
    for row in zip(*cells):  # Text: a value is shown as it is, never read as Rich markup ("[/]", ":x:")
        out.add_row(*(Text(v) for v in row))
    # as wide as its widest values need: an id or a path is never cut (it was at 16 characters a column)
    needed = sum(max([len(n), *(len(line) for v in col for line in v.splitlines() or [""])]) + 3
                 for n, col in zip(table.column_names, cells)) + 1
    console = Console(file=None, width=max(80, needed), record=True, emoji=False, highlight=False)
    with console.capture() as cap:
        console.print(out)
    return cap.get() + f"({counted(table.num_rows, 'row')})\n"
