"""``tracker store`` and ``tracker runs``: what is in the tracking store."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from tracker.cli.options import FormatOption, OutputFormat, emit_json, option_values, reads_only, state
from tracker.console import counted, named, shell_word

app = typer.Typer(help="The tracking store: where it is, its schema, its experiments.", no_args_is_help=True)
runs_app = typer.Typer(help="Runs in the current experiment.", no_args_is_help=True)


@app.command("info")
@reads_only
def info(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Show the store's URI, schema version and experiment."""
    from tracker.log.inspect import store_info

    data = store_info(state(ctx).logger(read_only=True))
    if fmt is OutputFormat.json:
        emit_json(data)
        return
    for key, value in data.items():
        if isinstance(value, list):
            value = named(value)
        typer.echo(f"{key:>18}: {value}")


@app.command("relocate")
def relocate(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Keep a moved or copied embedded store's artifacts in its own folder (MLflow keeps absolute paths)."""
    from tracker.log.relocate import relocate as _relocate

    location = state(ctx).location(read_only=True)
    done = _relocate(location)
    if fmt is OutputFormat.json:
        emit_json([{"old_root": d.old_root, "new_root": d.new_root, "rows": d.rows} for d in done])
        return
    if not done:
        typer.echo(f"nothing to relocate: every experiment keeps its artifacts in {location.artifact_root}")
    for d in done:
        counts = ", ".join(f"{n} {column}" for column, n in d.rows.items())
        typer.echo(f"{d.old_root} -> {d.new_root}: {counts}")


@runs_app.command("list")
@reads_only
def list_runs(
    ctx: typer.Context,
    kind: Annotated[Optional[str], typer.Option(help="Only runs of this kind (network, layer, ...).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many runs, newest first.")] = 50,
    status: Annotated[Optional[str], typer.Option(help="Only runs of this status (FINISHED, FAILED, KILLED, ...).")] = None,
    where: Annotated[Optional[str], typer.Option(
        "--where", help="An MLflow search filter, e.g. \"params.model = 'resnet18' AND metrics.latency_ms < 20\".")] = None,
    order_by: Annotated[Optional[str], typer.Option(
        "--order-by", help="An MLflow ordering instead of newest first, e.g. \"metrics.latency_ms ASC\".")] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """List runs of the experiment, newest first; a run that failed says why; a network's layer runs with --kind layer."""
    from tracker.log.inspect import check_list_options, list_runs as _list

    st = state(ctx)
    kind = kind.lower() if kind else kind  # as --status takes any case
    # blank is none, for both (a blank --order-by was MLflow's "Invalid order_by clause ''" until 0.9.4)
    where, order_by = (x.strip() if x and x.strip() else None for x in (where, order_by))
    with option_values():  # usage errors, status 2, said before the store is read (1 until 0.9.8)
        check_list_options(kind, status, where, order_by)
    rows = _list(st.logger(read_only=True), kind=kind, limit=limit + 1, status=status, where=where, order_by=order_by)
    more, rows = len(rows) > limit, rows[:limit]  # a list cut at --limit says so (silently until 0.9.1)
    if more:  # on stderr, in JSON too (in a table only until 0.9.4); in the order asked for
        first = f"the first {limit} by {order_by}" if order_by else f"the newest {limit}"
        typer.echo(f"{first} shown; experiment {st.experiment!r} has more (--limit N shows more; --kind and "
                   "--status choose)", err=True)
    if not rows and kind is None and where and _list(st.logger(read_only=True), kind="layer", limit=1, status=status,
                                                     where=where):
        # only layer runs match: said, where "no runs" hid them (0.9.4, when runs list began to fold them)
        typer.echo("layer runs match: --kind layer lists them (runs list shows runs that are not a network's layers)",
                   err=True)
    if fmt is OutputFormat.json:
        emit_json(rows)
        return
    if not rows:
        from tracker.log.inspect import experiments_with_runs

        which = " ".join(x for x in (status and status.upper(), kind) if x)
        line = (f"no {which + ' ' if which else ''}runs in experiment {st.experiment!r}"
                + (f" where {where}" if where else ""))
        others = [e for e in experiments_with_runs(st.logger(read_only=True)) if e != st.experiment]
        if not which and not where and others:  # a --where matching nothing is no wrong experiment
            line += f"; runs are in {', '.join(repr(name) for name in others)} (-e NAME selects one)"
        typer.echo(line)
        return
    from rich.table import Table

    from tracker.console import fixed, wide_console

    failures = any(r["failure_reason"] for r in rows)
    header = ("run_id", "kind", "name", "mode", "status", "latency_ms", *(["why"] if failures else []))
    table = Table(*header)
    cells = []
    for r in rows:
        lat = r["metrics"].get("latency_ms")
        why = [_why(r)] if failures else []
        cells.append((r["run_id"][:12], r["kind"], r["name"] or "", r["params"].get("mode", ""), r["status"],
                      fixed(lat) if lat is not None else "", *why))
        table.add_row(*cells[-1])
    # a pipe or a log: names, modes and reasons whole, the table as wide as they need (a long name was
    # wrapped over two rows past 120 columns until 0.9.8)
    needed = sum(max(len(h), *(len(row[i]) for row in cells)) + 3 for i, h in enumerate(header)) + 1
    wide_console(max(200 if failures else 120, needed)).print(table)


def _said(value: Any) -> str:
    """A parameter's value as ``runs compare`` says it: one a run lacks is "absent" (None until 0.9.4)."""
    return "absent" if value is None else str(value)


#: How much of the last line of a failed child's stderr ``runs list`` shows beside its reason.
WHY_CHARS = 70


def _why(run: dict[str, Any]) -> str:
    """Why a run failed: its reason and the last line of its child's stderr (an exception's
    message, mostly), cut to ``WHY_CHARS``; empty for a run that did not fail."""
    from tracker.console import clipped

    if not run["failure_reason"]:
        return ""
    last = next((line.strip() for line in reversed((run["stderr_tail"] or "").splitlines()) if line.strip()), "")
    return run["failure_reason"] + (f": {clipped(last, WHY_CHARS)}" if last else "")


def _say_if_moved(logger: Any) -> None:
    """A store moved or copied since its runs were logged, not yet relocated: their artifacts (raw
    samples, files) are looked for where it was, and shown or judged as absent where they are not
    there; said on stderr, as ``store info`` says it (nothing was said, until 0.9.8)."""
    from tracker.log.relocate import moved_message, old_roots

    if old := sorted(old_roots(logger.location)):
        typer.echo(f"note: {moved_message(logger.location, old[0])}; until then its runs' artifacts (raw samples, "
                   "files) are looked for where it was", err=True)


@runs_app.command("show")
@reads_only
def show(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="The run: its id, or its first 6 characters or more.")],
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """One run whole: configuration, figures, samples, why it failed, layers, environment, artifacts."""
    import datetime

    from tracker.log.compare import check_run_reference
    from tracker.log.inspect import show_run

    with option_values():  # not a run id's form: a usage error, status 2, before the store is read (1 until 0.9.10)
        check_run_reference(run)
    logger = state(ctx).logger(read_only=True)
    data = show_run(logger, run)
    _say_if_moved(logger)
    if fmt is OutputFormat.json:
        emit_json(data)
        return
    started = datetime.datetime.fromtimestamp(data["start_time_ms"] / 1000).isoformat(sep=" ", timespec="seconds")
    took = f", {(data['end_time_ms'] - data['start_time_ms']) / 1000:.1f} s" if data["end_time_ms"] else ""
    when = f"started {started}{took}"
    if (source := data["tags"].get("tracker.source", "")).startswith("import:"):
        # measured elsewhere: its times are the import's, not the measurement's (said as "started ..., 15.9 s",
        # the import's own seconds, until 0.9.10)
        when = f"imported from {source.removeprefix('import:')} {started}"
    reason = f" ({data['failure_reason']})" if data["failure_reason"] else ""
    deleted = " · deleted (MLflow's trash: the warehouse leaves it out)" if data["deleted"] else ""
    typer.echo(f"run {data['run_id']} · {data['kind'] or 'not a tracker run'} · {data['status']}{reason}{deleted}")
    typer.echo(f"  {data['name']} (experiment {data['experiment']!r}, {when})")
    if data["description"]:  # what the MLflow UI shows above the run (since 0.9.1 here too)
        typer.echo(f"  {data['description']}")
    if data["parent_run_id"]:
        typer.echo(f"  nested under {data['parent_run_id']}")
    if data["layer_runs"]:
        typer.echo(f"  {counted(data['layer_runs'], 'layer run')} nested under it")
    if data["samples_unreadable"]:  # the run shown whole beside it (since 0.9.8)
        typer.echo(f"  raw samples unreadable: {data['samples_unreadable']}")
    if s := data["samples"]:
        span = f", {s['min_ms']:.4g} to {s['max_ms']:.4g} ms" if s["count"] else ""
        typer.echo(f"  raw samples: {s['count']} after {s['warmup_count']} warm-up, {s['block_n']} per block, "
                   f"stopped on {s['stop_reason']}{span}")
    for title, values in (("params", data["params"]), ("metrics", data["metrics"]), ("tags", data["tags"]),
                          ("environment", data["environment"])):
        if values:
            typer.echo(f"{title}:")
            width = max(len(k) for k in values)
            for key, value in values.items():
                shown = f"{value:.6g}" if isinstance(value, float) else str(value)
                typer.echo(f"  {key:<{width}}  {shown}")
    if data["system_metrics"]:
        typer.echo(f"system metrics (series over the window, in the MLflow UI's System metrics tab): "
                   f"{', '.join(data['system_metrics'])}")
    if data["artifacts"]:
        typer.echo("artifacts:")
        for path, size in data["artifacts"].items():
            typer.echo(f"  {path}" + (f"  ({size:,} bytes)" if size is not None else ""))
    if data["stderr_tail"]:
        typer.echo("stderr tail of its measuring child:")
        for line in data["stderr_tail"].splitlines():
            typer.echo(f"  {line}")


@runs_app.command("compare")
@reads_only
def compare(
    ctx: typer.Context,
    run_a: Annotated[str, typer.Argument(help="The reference run: its id, or its first 6 characters or more.")],
    run_b: Annotated[str, typer.Argument(help="The run compared with it (changes are B against A).")],
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Compare two measurement runs, pyperf-style.

    Configuration and environment differences first, then each metric's change and whether the latency change is significant."""
    from tracker.log.compare import check_run_reference, compare_runs

    with option_values():  # as runs show's RUN
        check_run_reference(run_a)
        check_run_reference(run_b)
    logger = state(ctx).logger(read_only=True)
    data = compare_runs(logger.store, logger.experiment, run_a, run_b)
    _say_if_moved(logger)
    if fmt is OutputFormat.json:
        emit_json(data)
        return
    from rich.table import Table

    from tracker.console import change, clipped, fixed, ratio_past_percent, wide_console

    for side in ("a", "b"):
        s = data[side]
        mode = f" · {s['mode']}" if s["mode"] else ""  # an imported run has none ("· None" until 0.9.2)
        typer.echo(f"{side.upper()}: {s['run_id'][:12]}  {s['name']}{mode}"
                   + (f"  (raw samples unreadable: {s['samples_unreadable']}; judged without them)"
                      if s.get("samples_unreadable") else "" if s["samples"] else "  (no raw samples kept)")
                   + (f"  (operator table unreadable: {s['ops_unreadable']}; compared without it)"
                      if s.get("ops_unreadable") else "")
                   + ("  (interrupted: what it measured before)" if s["status"] == "KILLED" else "")
                   + ("  (deleted)" if s["deleted"] else ""))
    for title, rows in (("configurations differ", data["configuration_differences"]),
                        ("WARNING: environments differ", data["environment_differences"])):
        if rows:
            typer.echo(f"{title}: " + "; ".join(f"{r['key']} {_said(r['a'])} -> {_said(r['b'])}" for r in rows))
    if busy := data["busy_beside"]:
        shares = "; ".join(f"{side.upper()} {'not measured' if v is None else f'{v:.1f} %'}" for side, v in busy.items())
        typer.echo(f"WARNING: other processes took the CPU while measuring ({shares}): a change may be theirs")
    if bound := data["host_bound"]:
        shares = "; ".join(f"{side.upper()} {'not split' if v is None else f'{v:.0f} %'}" for side, v in bound.items())
        typer.echo(f"WARNING: bound by the host's CPU, which launched the work ({shares} of each iteration): a change "
                   "may be the host's speed, not the device's")
    table = Table("metric", "A", "B", "change", box=None, pad_edge=False)
    for r in data["metrics"]:
        def cell(value: float | None, ci: float | None = None) -> str:
            if value is None:
                return "absent"
            return f"{value:.4g}" + (f" ±{100 * ci:.1f}%" if ci is not None else "")
        table.add_row(r["metric"], cell(r["a"], r.get("a_ci_rel")), cell(r["b"], r.get("b_ci_rel")),
                      change(r["a"], r["b"]) if "change_rel" in r else "")
    wide_console(100).print(table)
    lat, rows = data["latency"], {r["metric"]: r for r in data["metrics"]}
    la, lb = rows["latency_ms"]["a"], rows["latency_ms"]["b"]  # a ratio past a percentage says itself alone
    said = ratio_past_percent(la, lb) or change(la, lb) + (f" ({lat['ratio']:.3f}x)" if lat["ratio"] is not None else "")
    typer.echo(f"latency {said}: {lat['verdict']} ({lat['why']})")
    if speed := data["machine_speed"]:
        if "probe_versions" in speed:
            typer.echo("machine speed: not compared (speed probes of versions "
                       f"{' and '.join(str(v) for v in speed['probe_versions'])}: other units)")
        else:
            pa, pb = rows["speed_probe_ms"]["a"], rows["speed_probe_ms"]["b"]
            typer.echo(f"{'WARNING: ' if speed['moved'] else ''}machine speed: the speed probe {change(pa, pb)} "
                       f"from A to B; at the machine's speed (latency over probe) latency {change(la / pa, lb / pb)}"
                       + (": a change may be the machine's" if speed["moved"] else ""))
    if "layers" in data:
        ly = data["layers"]
        unmatched = f"; {ly['only_a']} only in A, {ly['only_b']} only in B" if ly["only_a"] or ly["only_b"] else ""
        typer.echo(f"\nlayers: {ly['matched']} matched by name{unmatched}; their sum {fixed(ly['sum_a_ms'])} -> "
                   f"{fixed(ly['sum_b_ms'])} ms; {ly['apart']} with CIs apart. Those that moved most:")
        table = Table("layer", "op", "A ms", "B ms", "change", "", box=None, pad_edge=False)
        for r in ly["top"]:
            rel = change(r["a_ms"], r["b_ms"]) if r["a_ms"] > 0 else ""  # change_rel is null past a float
            table.add_row(r["layer"], r["op_type"] or "", fixed(r["a_ms"], 4), fixed(r["b_ms"], 4), rel,
                          "CIs apart" if r["apart"] else "")
        wide_console(100).print(table)
    if "operators" in data:
        ops = data["operators"]
        basis = ops["time_basis"].replace("_", " ")
        typer.echo(f"\noperators (torch.profiler, {basis} per iteration): {ops['total_a_ms']:.3f} -> "
                   f"{ops['total_b_ms']:.3f} ms in all. Those that moved most:")
        _moved_table("operator", [(r["op"], r) for r in ops["top"]], 100)
    if "kernels" in data:  # two GPU traces: what the device itself ran
        from tracker.cli.profile import KERNEL_NAME_CHARS

        k = data["kernels"]
        typer.echo(f"\nkernels (device time per iteration): busy {k['busy_a_ms']:.3f} -> {k['busy_b_ms']:.3f} ms "
                   f"({k['kernels'][0]} and {k['kernels'][1]} kernels). Those that moved most:")
        _moved_table("kernel", [(clipped(r["kernel"], KERNEL_NAME_CHARS), r) for r in k["top"]], KERNEL_NAME_CHARS + 40)


def _moved_table(column: str, rows: list[tuple[str, dict[str, Any]]], width: int) -> None:
    """A compare's operators or kernels that moved most: name, A and B ms, the change."""
    from rich.table import Table

    from tracker.console import wide_console

    table = Table(column, "A ms", "B ms", "change ms", box=None, pad_edge=False)
    for name, r in rows:
        table.add_row(name, f"{r['a_ms']:.4f}", f"{r['b_ms']:.4f}", f"{r['change_ms']:+.4f}")
    wide_console(width).print(table)


def sync(ctx: typer.Context) -> None:
    """Send runs spooled in the outbox while the tracking server was unreachable (or the store could not take them)."""
    from tracker.log.outbox import pending, sync as send
    from tracker.settings import resolve_location

    uri = state(ctx).tracking_uri
    uri = resolve_location(uri).uri if uri else None  # a store's folder (runs/) as the outbox names it
    waiting = pending()
    if not waiting:
        typer.echo("outbox is empty: nothing to send")
        return
    report = send(uri)
    sent_files = report.files - report.left
    typer.echo(f"sent {counted(report.sent, 'run')} from {counted(sent_files, 'outbox file')} ({report.skipped} already "
               f"on the server); {counted(report.left, 'file')} left")
    if report.discarded:
        typer.echo(f"deleted {counted(report.discarded, 'unfinished run')} that a write cut short had left on the server "
                   "(sent whole again)")
    if report.busy:
        typer.echo(f"{counted(report.busy, 'outbox file')} being written to the server by a running tracker or another "
                   "sync: left to it")
    for other, files in sorted(report.others.items()):  # it said "0 files left" of an outbox that was not empty
        typer.echo(f"{counted(files, 'outbox file')} wait for another server: "
                   f"tracker --tracking-uri {shell_word(other)} sync")
