"""``tracker searchspace``: accuracy and latency tables of a search space, and its Pareto frontier."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tracker.cli.options import FormatOption, OutputFormat, emit_json, finite, path_of, path_text, state
from tracker.profile.stats import MAX_TIME_CAP_S, MIN_TIME_CAP_S

app = typer.Typer(help="Search-space profiling: what each candidate costs and is worth, and the frontier worth keeping.",
                  no_args_is_help=True)
SpaceArg = Annotated[str, typer.Argument(metavar="FILE", parser=path_text("the search space file, e.g. experiments/searchspace-digits.toml"), help="Search space file, e.g. experiments/searchspace-digits.toml.")]


def _open(ctx: typer.Context, space_file: Path) -> tuple[Any, Any]:
    """The search space and the command state, runs going to experiment searchspace-<name> unless told."""
    from tracker.searchspace.space import load_space

    space = load_space(space_file)
    st = state(ctx)
    if st.experiment == "Default":
        st.experiment = f"searchspace-{space.name}"
    return space, st


class LatencySource(str, Enum):
    measured = "measured"
    predicted = "predicted"


@app.command("run")
def run(
    ctx: typer.Context,
    space_text: SpaceArg,
    latency: Annotated[LatencySource, typer.Option(help="measured by the profilers, or predicted by the registered fingerprints.")] = LatencySource.measured,
    skip_accuracy: Annotated[bool, typer.Option("--skip-accuracy", help="Only the latency table.")] = False,
    skip_latency: Annotated[bool, typer.Option("--skip-latency", help="Only the accuracy table.")] = False,
    specs: Annotated[Optional[str], typer.Option(metavar="FOLDER", help="Folder for the candidates' spec files (default: <space folder>/<name>/networks).")] = None,
    time_cap: Annotated[float, typer.Option("--time-cap", min=MIN_TIME_CAP_S, max=MAX_TIME_CAP_S, callback=finite, help="Seconds of sampling at most per measured candidate.")] = 5.0,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Fill the space's accuracy and latency tables; a re-run only fills what is missing."""
    from tracker.profile.records import OTHER_WORK_RULE
    from tracker.profile.stats import IMPRECISE_CI_REL
    from tracker.searchspace.run import check_runnable, run_space

    from tracker.errors import OptionError

    # usage errors, status 2 (1 until 0.9.8)
    if skip_accuracy and skip_latency:  # did nothing and ended 0 until 0.9.5
        raise OptionError("--skip-accuracy and --skip-latency together leave nothing to fill: give one at most")
    if specs is not None and not specs.strip():  # "" was the current folder, written into (until 0.9.7)
        raise OptionError("--specs names no folder: give the folder for the spec files (. for this one)")
    space_file = Path(space_text)
    space, st = _open(ctx, space_file)
    check_runnable(space, latency.value, skip_latency)  # before the store is opened: none made for a refused space
    folder = Path(specs) if specs is not None else space_file.parent / space.name / "networks"
    quiet = fmt is OutputFormat.json
    tally = run_space(st.logger(), space, folder, latency.value, skip_accuracy, skip_latency, time_cap,
                      progress=None if quiet else (lambda text: typer.echo(text, err=True)))
    data = {"search_space": space.name, "candidates": len(space.candidates()), "latency_source": latency.value, **tally.as_dict()}
    if quiet:
        emit_json(data)
        return
    # each kind's own failures (one count of failed candidates was said as the latency's until 0.9.8)
    accuracy = ("accuracy skipped" if skip_accuracy else
                f"accuracy {tally.accuracy_done} trained, {tally.accuracy_skipped} already there, "
                f"{tally.accuracy_failed} failed")
    latency_part = ("latency skipped" if skip_latency else
                    f"latency ({latency.value}) {tally.latency_done} new, {tally.latency_skipped} already there, "
                    f"{tally.latency_failed} failed; {tally.device_time_s:.1f} s of device time")
    typer.echo(f"{space.name}: {data['candidates']} candidates; {accuracy}; {latency_part}")
    for name in tally.failed:  # counted alone until 0.9.7 (--format json: failures)
        typer.echo(f"  failed: {name}: {tally.failures.get(name, 'see its run')}")
    if tally.space_mode:
        typer.echo(f"note: the space's [latency] runs in mode {tally.space_mode}, the fingerprint learnt {tally.mode}: "
                   f"its latencies are of {tally.mode} (train one with fingerprint train --device {tally.space_mode}, "
                   "or use --latency measured)")
    if tally.extrapolated:
        typer.echo(f"note: {len(tally.extrapolated)} of {tally.latency_done} predicted latencies extrapolate beyond what the "
                   f"fingerprint learnt from (tracker predict SPEC says how): {some(tally.extrapolated)}")
    if tally.beside_other_work:
        typer.echo(f"note: {len(tally.beside_other_work)} of {tally.latency_done} candidates were measured while other "
                   f"processes took {OTHER_WORK_RULE}: {some(tally.beside_other_work)}")
    if tally.measured_again:
        typer.echo(f"note: {len(tally.measured_again)} imprecise candidates measured again, with a --time-cap of "
                   f"{time_cap:g} s, longer than before: {some(tally.measured_again)}")
    if tally.imprecise:
        typer.echo(f"note: {len(tally.imprecise)} measured latencies have a 95 % CI wider than "
                   f"{100 * IMPRECISE_CI_REL:g} %: left off the frontier (measure again with a longer --time-cap, "
                   f"or on a quieter machine): {some(tally.imprecise)}")


def some(names: list[str], most: int = 5) -> str:
    """The first ``most`` names, then how many more there are (all of them are in --format json)."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more (--format json lists all)"


def _remove(made: list[Path]) -> None:
    """Remove a warehouse file this command made (``made[0]``), DuckDB's journal of it, and then the
    folders made for it, innermost first (any that is not empty is left)."""
    import contextlib

    if not made:
        return
    for file in (made[0], made[0].with_name(made[0].name + ".wal")):
        with contextlib.suppress(OSError):
            file.unlink(missing_ok=True)
    for folder in made[1:]:
        with contextlib.suppress(OSError):
            folder.rmdir()


@app.command("report")
def report_cmd(
    ctx: typer.Context,
    space_text: SpaceArg,
    latency: Annotated[Optional[LatencySource], typer.Option(help="Which latency the frontier uses (default: measured where there is any).")] = None,
    warehouse: Annotated[Optional[Path], typer.Option(metavar="FILE", parser=path_of("the DuckDB file, or leave --warehouse out"), help="DuckDB warehouse (default: warehouse.duckdb in the embedded store's folder); loaded first.")] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Load the warehouse, print the Pareto frontier and the primitives on it per position, log the plot."""
    from tracker.profile.stats import IMPRECISE_CI_REL
    from tracker.searchspace.run import report
    from tracker.settings import resolve_location, warehouse_path
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    from tracker.errors import ConfigError, NothingLoggedError

    space, st = _open(ctx, Path(space_text))
    path = warehouse_path(warehouse, state(ctx).tracking_uri)
    made = [path, *(folder for folder in path.parents if not folder.exists())] if not path.exists() else []
    load(path, open_source(resolve_location(st.tracking_uri), None))
    try:  # the store's experiment opened (made) only where there is a frontier to log
        out = report(st.logger, path, space, latency.value if latency else None)
    except (NothingLoggedError, ConfigError):
        # nothing to report leaves nothing made: no warehouse nor its folders where there were none (its
        # experiment and a warehouse were made until 0.9.8); nor does a space refused (one network twice)
        _remove(made)
        raise
    if fmt is OutputFormat.json:
        emit_json(out)
        return
    modes = f", mode {', '.join(out['modes'])}" if out.get("modes") else ""
    placed, whole = len(out["candidates"]), out["space_candidates"]
    missing = "" if placed == whole else f" (the space has {whole}: the others lack an accuracy or this latency)"
    typer.echo(f"{space.name} ({out['latency_source']} latency, bs{out['batch_size']} on {out['device']}{modes}): "
               f"{sum(c['on_frontier'] for c in out['candidates'])} of {placed} candidates on the frontier{missing}")
    for c in out["candidates"]:
        if c["on_frontier"]:
            mark = " *" if c["outside_trained_range"] else ""
            typer.echo(f"  {c['name']}: accuracy {100 * c['accuracy']:.1f} %, {c['latency_ms']:.3f} ms{mark}")
    for pos, prims in out["shared_primitives"].items():
        typer.echo(f"  {pos}: {', '.join(prims) or '-'} on the frontier")
    if "comparison" in out:
        cmp = out["comparison"]
        # the frontiers first: most candidates are off both, so the share kept or dropped alike says little
        typer.echo(f"predicted vs measured frontier: {cmp['shared_frontier']} candidate(s) on both, of "
                   f"{len(cmp['predicted_frontier'])} predicted and {len(cmp['measured_frontier'])} measured (Jaccard "
                   f"{cmp['jaccard']:.2f}; {100 * cmp['agreement']:.0f} % of {cmp['candidates']} candidates on or off "
                   f"both alike); device time {cmp['measured_device_time_s']:.1f} s measured vs "
                   f"{cmp['predicted_device_time_s']:.2f} s predicted")
        if cmp["modes_differ"]:
            typer.echo(f"note: measured in mode {', '.join(cmp['measured_modes'])}, predicted by a fingerprint that learnt "
                       f"{', '.join(cmp['predicted_modes'])}: not the same figure (set [latency] threads and allocator "
                       "to the fingerprint's mode, or train one on the candidates' mode)")
    imprecise = sum(c["imprecise"] for c in out["candidates"])
    if imprecise:
        typer.echo(f"{imprecise} of {len(out['candidates'])} candidates measured too imprecisely to place (95 % CI over "
                   f"{100 * IMPRECISE_CI_REL:g} %): off the frontier")
    beyond = sum(bool(c["outside_trained_range"]) for c in out["candidates"])
    if beyond:
        typer.echo(f"* predicted beyond what the fingerprint learnt from ({beyond} of {len(out['candidates'])} candidates): "
                   "extrapolated, not learnt; treat it as a guess")
    typer.echo(f"plot: pareto.png on run {out['run_id']}")
