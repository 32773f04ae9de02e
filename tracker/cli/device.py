"""``tracker device``: what a measurement on a device of this machine records, before a campaign."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from tracker.cli.options import (Allocator, FormatOption, OneConfiguration, OutputFormat, device_name, emit_json,
                                 option_values, reads_only)

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


@app.command("show", cls=OneConfiguration, help="What a measurement on DEVICE records here, measuring nothing.\n\nIts device mode, each "
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


@app.command("speed", cls=OneConfiguration, help="The machine's speed now: the speed probe every measurement times beside its window, "
                            "timed alone.\n\nIn the mode a measurement with these settings runs in, holding the device "
                            "as a measurement does; beside the median of the warehouse's measurements in that mode and the "
                            "reference speed of each latency fingerprint predict --device loads. "
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
    from tracker.console import counted, shell_line
    from tracker.errors import TrackerError, first_line
    from tracker.profile.probe import measured_speed, speed_now
    from tracker.settings import warehouse_path

    _checked(threads)
    uri = state(ctx).location().uri
    warehouse = warehouse_path(None, uri)
    now = speed_now(device, threads, allocator.value if allocator else None)
    try:  # its own probe's version alone (every version's until 0.9.11): another version is another unit
        usual, unread_warehouse = measured_speed(warehouse, now["mode"], now["speed_probe_version"]), None
    except TrackerError as exc:  # a warehouse an older tracker loaded, say: the probe's figure stands
        usual, unread_warehouse = None, first_line(exc)
    now["warehouse"] = {"path": str(warehouse), **usual} if usual else None
    if unread_warehouse:
        now["warehouse_error"] = unread_warehouse
    if usual and usual["measurements"]:
        now["slower_than_usual_rel"] = now["speed_probe_ms"] / usual["speed_probe_ms"] - 1.0
    fingerprints, unread = _latency_fingerprints(uri, device, now)
    now["fingerprints"] = fingerprints
    if unread:
        now["fingerprints_error"] = unread
    if fmt is OutputFormat.json:
        emit_json(now)
        return
    low, high = now["quartiles_ms"]
    typer.echo(f"speed probe on {device} in mode {now['mode']}: {now['speed_probe_ms']:.4g} ms (median of "
               f"{now['speed_probe_count']} runs; quartiles {low:.4g} to {high:.4g} ms; higher is slower)")
    others = usual["other_versions"] if usual else 0
    left_out = (f"{counted(others, 'measurement')} in this mode timed another version of the speed probe than "
                f"this one's ({now['speed_probe_version']}): another unit, left out")
    if usual and usual["measurements"]:
        typer.echo(f"the warehouse's {usual['measurements']:,} measurements in this mode: median {usual['speed_probe_ms']:.4g} ms; "
                   + _speed_change(now))
        if others:
            typer.echo(left_out)
    elif unread_warehouse:
        typer.echo(f"cannot compare with the warehouse's measurements: {unread_warehouse}")
    elif not warehouse.exists():  # "holds no measurement in this mode" until 0.9.11, of a file not there
        typer.echo(f"no warehouse at {warehouse} to compare with: tracker warehouse load makes it from the store's runs")
    else:
        typer.echo(f"the warehouse ({warehouse}) holds no measurement in this mode with a speed probe to compare with"
                   + (f" ({left_out})" if others else ""))
    if unread:
        typer.echo(f"cannot read the store's fingerprints: {unread}")
    for f in fingerprints:
        where = f"{f['name']} version {f['version']}"
        if f["unreadable_tags"]:  # said to have learnt as measured, or at this probe version's speed, until 0.9.12
            typer.echo(f"{where}: unreadable {' and '.join(f['unreadable_tags'])} "
                       f"{'tags' if len(f['unreadable_tags']) > 1 else 'tag'}, not compared (predict refuses it; "
                       "retrain with tracker fingerprint train)")
        elif f["mode"] is not None and f["mode"] != now["mode"]:
            typer.echo(f"{where} learnt in mode {f['mode']}, not this one: its predictions are of that mode")
        elif f["speed_reference_ms"] is None:
            typer.echo(f"{where} learnt its latencies as measured, with no reference speed: --speed-probe-ms "
                       "does not move its predictions")
        elif not _same_probe(f, now):
            typer.echo(f"{where} learnt at the speed of speed probe version {f['speed_probe_version']}, not this one's "
                       f"({now['speed_probe_version']}): another unit, not compared")
        else:
            change = f["slower_than_reference_rel"]
            typer.echo(f"{where} learnt at speed probe {f['speed_reference_ms']:.4g} ms: at this speed its latencies "
                       + (f"are {100 * change:.1f} % longer" if change >= 0 else f"are {100 * -change:.1f} % shorter"))
    usable = [f for f in fingerprints if f["speed_reference_ms"] is not None and f["mode"] in (None, now["mode"])
              and _same_probe(f, now)]
    if usable:
        # predict names a fingerprint by its phase (an inference one first) and its registered device part: the
        # device, or a mode learnt alone (--device cpu-t1); a training one's line lacked --phase training until 0.9.11
        _, phase, named = usable[0]["name"].split("-", 2)
        typer.echo("predict at this speed: tracker "
                   + shell_line("predict", "MODEL", *(["--phase", phase] if phase != "inference" else []), "--device",
                                named, "--speed-probe-ms", f"{now['speed_probe_ms']:.4g}"))
    elif not unread:
        # the mode as --device: it learns this mode's measurements alone, as latency_ms-PHASE-MODE, which this
        # finds (--device cpu, named until 0.9.11, was refused where the store held two modes, and learnt the
        # store's one mode where that was another)
        typer.echo(f"no latency fingerprint of {device} in mode {now['mode']} learnt at a reference speed, for predict "
                   f"--speed-probe-ms to use: tracker fingerprint train --target latency_ms --device {now['mode']} "
                   "learns one from this mode's measurements")


def _speed_change(now: dict[str, Any]) -> str:
    """How the speed probe now compares with the warehouse's median, ``now`` as ``device speed`` gives it
    (``speed_now``'s, beside its ``warehouse`` and its ``slower_than_usual_rel``): slower or faster than usual,
    by how much; where the usual speed lies within the 95 % CI of the probe's median now (``median_ci_ms``),
    about as fast as usual, the difference said (since 0.9.12: 0.6 % within that CI was "this machine is
    slower than usual")."""
    usual_ms, change = now["warehouse"]["speed_probe_ms"], now["slower_than_usual_rel"]
    low, high = now.get("median_ci_ms") or (None, None)
    if low is not None and low <= usual_ms <= high:
        return (f"the probe takes {100 * abs(change):.1f} % {'longer' if change >= 0 else 'less time'} now, within the "
                f"95 % CI of its median ({low:.4g} to {high:.4g} ms): this machine runs about as fast as usual")
    if change >= 0:
        return f"the probe takes {100 * change:.1f} % longer now: this machine is slower than usual"
    return (f"the probe takes {100 * -change:.1f} % less time now: this machine runs {1 / (1 + change):.3g} times as "
            "fast as usual")


def _latency_fingerprints(uri: str, device: str, now: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The latency champions predict --device loads for ``device`` (or for the mode measured alone),
    each beside the speed now; and why they could not be read (a server down), where they could not.
    A store nothing was logged to has none."""
    from tracker.errors import NothingLoggedError, TrackerError, first_line
    from tracker.fingerprint.predict import latency_references

    try:
        found = latency_references(uri, device, now["mode"])
    except NothingLoggedError:
        return [], None
    except TrackerError as exc:
        return [], first_line(exc)
    except Exception as exc:  # noqa: BLE001  MLflow's client refusing (a server's error): the probe's figure stands
        return [], f"{type(exc).__name__}: {first_line(exc)}"
    for f in found:  # a version of another mode answers for that mode, one learnt at another probe version's speed
        # in another unit: neither compared with this one's speed
        if f["speed_reference_ms"] is not None and f["mode"] in (None, now["mode"]) and _same_probe(f, now):
            f["slower_than_reference_rel"] = now["speed_probe_ms"] / f["speed_reference_ms"] - 1.0
    return found, None


def _same_probe(fingerprint: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether a latency fingerprint's reference speed is in the unit of the probe timed now: of its
    version, or of no version said (a version's tag, written with its reference since 0.9.9)."""
    return fingerprint.get("speed_probe_version") in (None, now["speed_probe_version"])
