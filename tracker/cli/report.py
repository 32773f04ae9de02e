"""``tracker report DIR``: pictures of the warehouse, written to a folder and logged on their runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracker.cli.options import FormatOption, OutputFormat, emit_json, state
from tracker.cli.warehouse import WarehouseOption
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
    from tracker.errors import ConfigError
    from tracker.report.build import build_report, report_counts
    from tracker.settings import resolve_location, warehouse_path

    if not folder_text.strip():  # "" was the current folder, written into (until 0.9.6)
        raise ConfigError("no folder named: give the folder to write the pictures into (. for this one)")
    folder = Path(folder_text)
    location = resolve_location(state(ctx).tracking_uri)
    path = warehouse_path(warehouse, state(ctx).tracking_uri)
    if load:
        from tracker.warehouse.load import load as load_warehouse
        from tracker.warehouse.source import open_source

        load_warehouse(path, open_source(location))
    result = build_report(path, folder, location.uri, log=log)
    if fmt is OutputFormat.json:
        emit_json(result.to_dict())
        return
    d = result.to_dict()
    kinds = ", ".join(f"{n} {k}" for k, n in d["by_kind"].items()) or "nothing to draw yet"
    typer.echo(f"{counted(d['pictures'], 'picture')} in {folder} ({kinds}; {report_counts(d)}). Open {d['index']}")
    for line in result.log_errors:
        typer.echo(f"not logged: {line}", err=True)
