"""``tracker report DIR``: pictures of the warehouse, written to a folder and logged on their runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tracker.cli.options import FormatOption, OutputFormat, emit_json, exit_interrupted, state
from tracker.cli.warehouse import WarehouseOption, load_stopped
from tracker.console import counted


def report(
    ctx: typer.Context,
    folder_text: Annotated[str, typer.Argument(metavar="FOLDER", help="Folder to write the PNG files and index.html into.")],
    warehouse: WarehouseOption = None,
    load: Annotated[bool, typer.Option("--load/--no-load", help="Load new runs into the warehouse first.")] = True,
    log: Annotated[bool, typer.Option("--log/--no-log", help="Also log each picture on the run it describes.")] = True,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Draw latency/memory vs batch size, layer breakdowns, fingerprint accuracy, data waits and Pareto frontiers."""
    from tracker.errors import OptionError, interrupted
    from tracker.report.build import ReportInterrupted, build_report, report_counts
    from tracker.settings import resolve_location, warehouse_path

    if not folder_text.strip():  # "" was the current folder, written into (until 0.9.6); status 2 (1 until 0.9.10)
        raise OptionError(f"FOLDER {folder_text!r} names no folder: give the folder to write the pictures into (. for "
                          "this one)")
    folder = Path(folder_text)
    location = resolve_location(state(ctx).tracking_uri)
    path = warehouse_path(warehouse, state(ctx).tracking_uri)
    if load:
        from tracker.warehouse.load import load as load_warehouse
        from tracker.warehouse.source import open_source

        first = not path.exists()
        try:
            load_warehouse(path, open_source(location))
        except BaseException as exc:  # a Ctrl-C (a SIGTERM) in it: said as a load's, then nothing drawn (until 0.9.8
            if not interrupted(exc):  # main's "what was logged before is kept")
                raise
            exit_interrupted(f"interrupted: {load_stopped(path, first)}, and no picture was drawn")
    try:
        result = build_report(path, folder, location.uri, log=log)
    except ReportInterrupted as stop:  # what was drawn and logged is kept (said as main's "what was logged" until 0.9.8)
        exit_interrupted(interrupted_report(stop, folder, log))
    for line in result.left_out:  # what the pictures leave out (another speed probe version's measurements), JSON or not
        typer.echo(f"note: {line}", err=True)
    if fmt is OutputFormat.json:
        emit_json(result.to_dict())
        return
    d = result.to_dict()
    kinds = ", ".join(f"{n} {k}" for k, n in d["by_kind"].items()) or "nothing to draw yet"
    typer.echo(f"{counted(d['pictures'], 'picture')} in {folder} ({kinds}; {report_counts(d)}). Open {d['index']}")
    for line in result.log_errors:
        typer.echo(f"not logged: {line}", err=True)


def interrupted_report(stop: Any, folder: Path, log: bool) -> str:
    """What a report stopped by Ctrl-C (``ReportInterrupted``) says: the pictures it drew and logged
    before it, kept (each whole, and in the folder's manifest, so that the next report neither draws
    nor logs them again)."""
    kept = [part for part in (f"{counted(stop.drawn, 'picture')} drawn whole into {folder}" if stop.drawn else "",
                              f"{counted(stop.logged, 'picture')} logged on {'its run' if stop.logged == 1 else 'their runs'}"
                              if stop.logged else "") if part]
    if not kept:
        return f"interrupted: the report stopped before it drew{' or logged' if log else ''} a picture; run the same command again"
    return f"interrupted: the report stopped; kept: {' and '.join(kept)}; run the same command again for the rest"
