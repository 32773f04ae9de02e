"""``tracker device``: what a measurement on a device of this machine records, before a campaign."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from tracker.cli.options import Allocator, FormatOption, OutputFormat, device_name, emit_json, option_values, reads_only

#: The device and mode a command of this group reads, as ``profile`` takes them.
DeviceArgument = Annotated[str, typer.Argument(callback=device_name, help="cpu, cuda or cuda:N (CUDA device N).")]
ThreadsOption = Annotated[Optional[int], typer.Option("--threads", help="CPU threads of the mode; default: torch's.")]
AllocatorOption = Annotated[Optional[Allocator], typer.Option(
    "--allocator", help="The C allocator of the mode (system or retain); default: the C library's own.")]


def _checked(threads: int | None) -> None:
    """``--threads`` within this machine's CPUs: a usage error otherwise."""
    from tracker.profile.modes import validate_threads

    if threads is not None:
        with option_values():
            validate_threads(threads)


app = typer.Typer(help="This machine's devices: what a measurement on each records, its mode, what moves it.",
                  no_args_is_help=True)


@app.command("show", help="What a measurement on DEVICE records here, measuring nothing.\n\nIts device mode, each "
                           "telemetry metric measured (with its reading now) or absent (and why), the memory cap it "
                           "would get, and what moves measurements on this machine. Reads; changes nothing.")
@reads_only
def show(
    device: DeviceArgument = "cpu",
    threads: ThreadsOption = None,
    allocator: AllocatorOption = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """``tracker.profile.inventory.device_report``, as a table or JSON."""
    from tracker.environment import cuda_index
    from tracker.profile.inventory import PROBE_INTERVAL_S, device_report

    _checked(threads)
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


@app.command("speed", help="The machine's speed now: the speed probe every measurement times beside its window, "
                            "timed alone.\n\nIn the mode a measurement with these settings runs in, holding the device "
                            "as a measurement does; beside the median of the warehouse's measurements in that mode. "
                            "Its figure is what tracker predict --speed-probe-ms takes. Logs nothing.")
@reads_only
def speed(
    ctx: typer.Context,
    device: DeviceArgument = "cpu",
    threads: ThreadsOption = None,
    allocator: AllocatorOption = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """``tracker.profile.probe.speed_now``, beside ``measured_speed`` of the store's warehouse."""
    from tracker.cli.options import state
    from tracker.console import shell_line
    from tracker.profile.probe import measured_speed, speed_now
    from tracker.settings import warehouse_path

    _checked(threads)
    warehouse = warehouse_path(None, state(ctx).location().uri)
    now = speed_now(device, threads, allocator.value if allocator else None)
    usual = measured_speed(warehouse, now["mode"])
    now["warehouse"] = {"path": str(warehouse), **usual} if usual else None
    if usual:
        now["slower_than_usual_rel"] = now["speed_probe_ms"] / usual["speed_probe_ms"] - 1.0
    if fmt is OutputFormat.json:
        emit_json(now)
        return
    low, high = now["quartiles_ms"]
    typer.echo(f"speed probe on {device} in mode {now['mode']}: {now['speed_probe_ms']:.4g} ms (median of "
               f"{now['speed_probe_count']} runs; quartiles {low:.4g} to {high:.4g} ms; higher is slower)")
    if usual:
        change = now["slower_than_usual_rel"]
        how = (f"the probe takes {100 * change:.1f} % longer now: this machine is slower than usual" if change >= 0 else
               f"the probe takes {100 * -change:.1f} % less time now: this machine runs {1 / (1 + change):.3g} times as "
               "fast as usual")
        typer.echo(f"the warehouse's {usual['measurements']:,} measurements in this mode: median {usual['speed_probe_ms']:.4g} ms; "
                   + how)
    else:
        typer.echo(f"the warehouse ({warehouse}) holds no measurement in this mode with a speed probe to compare with")
    # the fingerprints of the device (registered by device, as `fingerprint train --device cpu` names them); one
    # learnt in this mode alone is named by the mode (--device cpu-t1) in predict instead
    typer.echo(f"predict at this speed (a fingerprint of mode {now['mode']}): tracker "
               + shell_line("predict", "MODEL", "--device", device, "--speed-probe-ms", f"{now['speed_probe_ms']:.4g}"))
