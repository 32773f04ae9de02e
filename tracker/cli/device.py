"""``tracker device``: what a measurement on a device of this machine records, before a campaign."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from tracker.cli.options import Allocator, FormatOption, OutputFormat, device_name, emit_json, option_values, reads_only

app = typer.Typer(help="This machine's devices: what a measurement on each records, its mode, what moves it.",
                  no_args_is_help=True)


@app.command("show", help="What a measurement on DEVICE records here, measuring nothing.\n\nIts device mode, each "
                           "telemetry metric measured (with its reading now) or absent (and why), the memory cap it "
                           "would get, and what moves measurements on this machine. Reads; changes nothing.")
@reads_only
def show(
    device: Annotated[str, typer.Argument(callback=device_name, help="cpu, cuda or cuda:N (CUDA device N).")] = "cpu",
    threads: Annotated[Optional[int], typer.Option("--threads", help="CPU threads of the mode; default: torch's.")] = None,
    allocator: Annotated[Optional[Allocator], typer.Option(
        "--allocator", help="The C allocator of the mode (system or retain); default: the C library's own.")] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """``tracker.profile.inventory.device_report``, as a table or JSON."""
    from tracker.environment import cuda_index
    from tracker.profile.inventory import PROBE_INTERVAL_S, device_report
    from tracker.profile.modes import validate_threads

    if threads is not None:
        with option_values():
            validate_threads(threads)
    report = device_report(device, threads=threads, allocator=allocator.value if allocator else None)
    if fmt is OutputFormat.json:
        emit_json(report)
        return
    size = f", {report['memory_mb']:,} MB" if report["memory_mb"] else ""
    cores = f", {report['cores']} CPU cores" if device == "cpu" else ""
    typer.echo(f"device {device}: {report['name'] or 'unnamed'}{size}{cores}")
    others = [f"{g['device']} {g['name']}" for g in report["cuda_devices"] if cuda_index(g["device"]) != cuda_index(device)]
    if others:
        typer.echo(f"other devices: {', '.join(others)}")
    typer.echo(f"mode {report['mode']['id']} (what each run here records): {report['mode']['description']}")
    typer.echo("always measured:")
    width = max(len(m) for m in [*report["always"], *report["measured"], *report["absent"]]) + 2
    for metric, how in report["always"].items():
        typer.echo(f"  {metric:<{width}}{how}")
    typer.echo(f"telemetry measured (every {PROBE_INTERVAL_S * 1000:g} ms; the reading now, idle):")
    for metric, m in report["measured"].items():
        now = m["no_reading"] if m["now"] is None else f"{m['now']:.4g}" + (f" ({m['of']})" if "of" in m else "")
        typer.echo(f"  {metric:<{width}}{m['source']}: {now}")
    if report["absent"]:
        typer.echo("telemetry absent (a run here lacks it, never holds a zero):")
        for metric, why in report["absent"].items():
            typer.echo(f"  {metric:<{width}}{why}")
    retain = "available" if report["allocator_retain"] else "not available (no glibc mallopt)"
    typer.echo(f"--memory-limit-mb: a {report['memory_cap']} cap; --allocator retain: {retain}")
    if report["notes"]:
        typer.echo("what moves measurements here (tracker reads these, and sets none):")
        for line in report["notes"]:
            typer.echo(f"  - {line}")
