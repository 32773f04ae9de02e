"""``tracker campaign``: run the configurations of a campaign file, resumably."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tracker.cli.options import (FormatOption, OneConfiguration, OutputFormat, emit_json, exit_if_waiting, exit_interrupted,
                                 option_values, path_text, state)
from tracker.console import clipped, counted, integer_number

app = typer.Typer(help="Campaigns: products of networks, devices, modes, phases and batch sizes (experiments/*.toml).",
                  no_args_is_help=True)


@app.command("run")
def run(
    ctx: typer.Context,
    file_text: Annotated[str, typer.Argument(metavar="FILE", parser=path_text("the campaign file, e.g. experiments/zoo-dozen.toml"), help="Campaign file, e.g. experiments/zoo-dozen.toml.")],
    shard: Annotated[Optional[str], typer.Option(help="Run shard I of N (by network), e.g. 1/2.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Measure nothing: list each configuration with what a "
                                          "run would do (measured, failed, to measure).")] = False,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Measure every configuration not yet measured; Ctrl-C stops, a re-run resumes."""
    from tracker.profile import zygote_client
    from tracker.profile.campaign import (campaign_progress, chains, check_campaign, load_campaign, parse_shard,
                                         run_campaign)

    path = Path(file_text)
    shard_ij = parse_shard(shard)  # before the file is loaded: a bad shard wrote its spec files until 0.9.13
    campaign = load_campaign(path, dry_run=dry_run)  # a dry run writes no spec file (it did until 0.9.8)
    for note in campaign.notes:  # before anything is measured (since 0.9.30)
        typer.echo(f"note: {note}", err=True)
    st = state(ctx)
    if st.experiment == "Default":
        st.experiment = campaign.name
    if dry_run:
        _dry_run(st, campaign, shard_ij, fmt)
        return
    zygote_client.prestart()  # its imports overlap planning; a campaign with nothing left ends it unused
    check_campaign(campaign, shard_ij)  # what would fail it all: before the store is made
    logger = st.logger()
    quiet = fmt is OutputFormat.json or not chains(campaign, shard_ij)  # an empty shard: no bar of 0/?
    with campaign_progress(campaign.name, transient=quiet, disable=quiet) as progress:
        tally = run_campaign(logger, campaign, shard_ij, progress)
    data = {"campaign": campaign.name, "experiment": logger.experiment_name, "shard": f"{shard_ij[0]}/{shard_ij[1]}", **tally.as_dict()}
    if fmt is OutputFormat.json:
        emit_json(data)
    elif not tally.total:  # as a dry run says it (until 0.9.2: "0 measured, 0 failed, 0 skipped of 0")
        typer.echo(f"{campaign.name}: no configuration (shard {shard_ij[0]}/{shard_ij[1]} has no network: the campaign "
                   f"has {len(campaign.networks)})")
    else:
        sharded = f" (shard {shard_ij[0]}/{shard_ij[1]})" if shard_ij[1] > 1 else ""  # its counts are the shard's (0.9.5)
        typer.echo(f"{campaign.name}{sharded}: {tally.measured} measured, {tally.failed} failed, {tally.skipped} skipped "
                   f"of {tally.total}")
        if tally.in_outbox:  # said by a warning as each was logged, not in the summary, until 0.9.9
            typer.echo(f"note: {tally.in_outbox} of them {'waits' if tally.in_outbox == 1 else 'wait'} in the outbox, "
                       "the store not taking them: tracker sync sends them")
        if tally.measured_again:  # since 0.9.19
            typer.echo(f"note: {tally.again_said()}")
        if tally.older_network_mem:  # since 0.9.27
            typer.echo(f"note: {tally.older_said()}")
        if tally.beside_other_work:
            from tracker.profile.records import OTHER_WORK_RULE

            typer.echo(f"note: {tally.beside_other_work} of them measured while other processes took "
                       f"{OTHER_WORK_RULE} (their runs say how much: cpu_util_others_pct); "
                       "to measure them again: profile network ... --again, or a campaign's repeats")
    if tally.interrupted:
        exit_interrupted("interrupted: what was measured is kept; run the same command again to resume")
    if tally.nothing_measured():  # status 0 until 0.9.12, as if it had measured
        from tracker.console import shell_word

        what = ("the one configuration measured failed" if tally.failed == 1 else
                f"each of the {tally.failed} configurations measured failed")
        if tally.skipped:  # none measured before (nothing_measured): each failed before, or past a failure
            what += f", and {counted(tally.skipped, 'more was', 'more were')} skipped, failed before or past a failure"
        says = "its run says" if tally.failed == 1 and not tally.skipped else "their runs say"
        typer.echo(f"error: nothing measured: {what} ({says} why: tracker -e "
                   f"{shell_word(logger.experiment_name)} runs list --status FAILED)", err=True)
        raise typer.Exit(1)


def _dry_run_logger(st: Any) -> tuple[Any, str | None]:
    """The store's logger for a dry run, opened to read; None, and why, where nothing was ever
    logged there (no store, no such experiment), which a dry run takes as nothing measured, and
    does not make."""
    from tracker.errors import NothingLoggedError

    try:
        return st.logger(read_only=True), None
    except NothingLoggedError as exc:
        return None, str(exc)


def _dry_run(st: Any, campaign: Any, shard: tuple[int, int], fmt: OutputFormat) -> None:
    """What ``campaign run`` would do with each configuration of the shard, measuring and logging
    nothing: the store and experiment are read, not made (none yet: nothing measured)."""
    from rich.table import Table

    from tracker.console import wide_console
    from tracker.profile.campaign import run_campaign
    from tracker.zoo.spec import planned_specs

    logger, nothing = _dry_run_logger(st)
    with planned_specs(campaign.unwritten):  # its generated and pruned networks, planned, not written
        tally = run_campaign(logger, campaign, shard, dry_run=True)
    counts = tally.plan_counts()
    data = {"campaign": campaign.name, "experiment": st.experiment, "shard": f"{shard[0]}/{shard[1]}",
            "dry_run": True, "total": tally.total, "states": counts, "configurations": tally.planned,
            "would_write": list(campaign.unwritten)}
    if fmt is OutputFormat.json:
        emit_json(data)
        return
    if tally.planned:
        table = Table("network", "batch", "size", "phase", "device", "threads", "dtype", "repeat", "state")
        for c in tally.planned:
            table.add_row(c["network"], str(c["batch_size"]), str(c["input_size"]), c["phase"], c["device"],
                          "" if c["threads"] is None else str(c["threads"]), c["dtype"], str(c["repeat"]), c["state"])
        wide_console(110).print(table)  # a pipe or a log: every column whole
    if nothing:
        typer.echo(f"nothing measured yet ({nothing})")
    if campaign.unwritten:  # what a run would write first: the spec files of its generate and prune
        folders = ", ".join(dict.fromkeys(str(Path(p).parent) for p in campaign.unwritten))
        typer.echo(f"a run would write {counted(len(campaign.unwritten), 'spec file')} to {folders} (a dry run "
                   "writes none)")
    found = (f"{counted(tally.total, 'configuration')}: " + ", ".join(f"{n} {state}" for state, n in counts.items())
             if tally.planned else f"no configuration (shard {shard[0]}/{shard[1]} has no network: the campaign has "
                                   f"{len(campaign.networks)})")  # as the real run says it (since 0.9.3)
    typer.echo(f"{campaign.name} (shard {shard[0]}/{shard[1]}), dry run, nothing measured: {found}")


#: The most of a failed setting's message its line says (its run and the JSON keep 500 characters).
LOADER_MESSAGE_CHARS = 200


def _loader_line(r: dict[str, Any]) -> str:
    """One setting of a loader campaign: its figures, and what ended it where it did not finish. The
    median step is the usual one; the data wait share and the throughput are of all its steps after
    the first (a stalled step counts in them: it is time the loader cost), so they need not agree."""
    where = f"workers {r['num_workers']} prefetch {r['prefetch_factor']} batch {r['batch_size']}"
    if r["status"] == "refused":  # refused before anything ran: no run (since 0.9.11, a batch larger than the dataset)
        return f"{where}: refused ({clipped(r['failure_message'], LOADER_MESSAGE_CHARS)})"
    # what ended it, as profile training's line says it, cut to a line's worth (the reason alone until 0.9.6)
    why = f": {clipped(r['failure_message'], LOADER_MESSAGE_CHARS)}" if r.get("failure_message") else ""
    ended = r["status"] + (f" ({r['reason']}{why})" if r.get("reason") else "")
    if not r.get("steps"):  # a dry run's, or one ended before its first step (said as such since 0.9.5)
        return f"{where}: {ended}" + (", before any step was measured" if r.get("run_id") and r["status"] != "FINISHED"
                                      else "")
    figures = (f"median step {r['median_step_ms']:.1f} ms; over its measured steps: data wait "
               f"{100 * r['data_wait_fraction']:.1f} %, {r['images_per_s']:.1f} images/s")
    # batches a bad file left short, not timed (since 0.9.11): said as profile training says them, where this
    # setting's line said nothing of them, its figures of fewer steps than the others'
    short = r.get("skipped_steps") or 0
    batches = "its batch" if short == 1 else "each batch"
    skipped = f"; {counted(short, 'step')} skipped, not timed: a bad file left {batches} short" if short else ""
    return (f"{where}: {figures}{skipped}"
            + ("" if r["status"] == "FINISHED" else f", then {ended} after {r['steps']} steps"))


def _nothing_measured(results: list[dict[str, Any]], fmt: OutputFormat) -> str | None:
    """The closing line of a loader campaign none of whose settings is measured, each refused or failed (its
    status 1 since 0.9.12); None where one is: measured now, or before (``skipped (measured)``)."""
    if any(r["status"] in ("FINISHED", "skipped (measured)") for r in results):
        return None
    refused = sum(r["status"] == "refused" for r in results)
    failed = len(results) - refused
    where = "each entry's failure_message" if fmt is OutputFormat.json else "each line"
    if not failed or not refused:
        n, ended = (refused, "was refused") if refused else (failed, "failed")
        what = f"{'the one setting' if n == 1 else f'each of the {n} settings'} {ended}"
    else:
        what = f"{counted(refused, 'setting')} refused, {failed} failed"
    return f"nothing measured: {what} ({where} says why)"


@app.command("loader", cls=OneConfiguration)
def loader(
    ctx: typer.Context,
    file_text: Annotated[str, typer.Argument(metavar="FILE", parser=path_text("the training job file, e.g. experiments/train-classification.toml"), help="Training job file with a \\[sweep] table, e.g. experiments/train-classification.toml.")],
    num_workers: Annotated[Optional[str], typer.Option(help="Comma list, replaces \\[sweep].num_workers.")] = None,
    prefetch_factor: Annotated[Optional[str], typer.Option(help="Comma list, replaces \\[sweep].prefetch_factor.")] = None,
    batch_size: Annotated[Optional[str], typer.Option(help="Comma list, replaces \\[sweep].batch_size.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Measure nothing: list each setting, measured before "
                                          "or to measure.")] = False,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Find the data-loading bottleneck: the job at every num_workers x prefetch_factor x batch_size (resumable)."""
    from tracker.cli.profile import run_training_job
    from tracker.errors import OptionError
    from tracker.profile.job import check_sweep, run_loader_campaign, sweep_of

    path = Path(file_text)
    sweep = sweep_of(path) if path.is_file() else {}
    for key, text in (("num_workers", num_workers), ("prefetch_factor", prefetch_factor), ("batch_size", batch_size)):
        if text is not None:  # an empty one is refused (check_sweep), not passed over as none (until 0.9.6)
            # each a usage error, status 2 (1 until 0.9.8); ASCII digits alone (٣ was 3 until 0.9.14)
            values = [integer_number(v) for v in text.split(",")] if text.strip() else []
            if None in values:
                raise OptionError(f"--{key.replace('_', '-')}: expected whole numbers separated by commas, got {text!r}")
            sweep[key] = values
            with option_values():
                check_sweep(key, sweep[key], f"--{key.replace('_', '-')}")
    st = state(ctx)
    # opened once the job is checked, and only where a setting is left to measure (no store for a refused one)
    open_logger = (lambda: _dry_run_logger(st)[0]) if dry_run else st.logger
    try:
        results = run_loader_campaign(
            open_logger, path, sweep,
            lambda cfg, dataset: run_training_job(ctx, cfg, quiet=fmt is OutputFormat.json, dataset=dataset), dry_run)
    except KeyboardInterrupt as exc:
        exit_if_waiting(exc, "the settings measured before are kept, the next measured nothing; run the campaign "
                             "again to go on")
        raise
    killed = next((r for r in results if r["status"] == "KILLED"), None)  # the one interrupted, the last
    nothing = None if dry_run or killed is not None else _nothing_measured(results, fmt)
    if fmt is OutputFormat.json:
        emit_json(results)
    else:
        for r in results:
            typer.echo(_loader_line(r))
        if dry_run:
            typer.echo(f"dry run, nothing measured: {sum(r['status'] == 'to measure' for r in results)} of "
                       f"{counted(len(results), 'setting')} to measure")
        elif killed is None and nothing is None:
            typer.echo("tracker warehouse load, then: tracker sql 'SELECT * FROM data_loading'")
    if nothing is not None:  # status 0 until 0.9.12, as if it had measured
        typer.echo(f"error: {nothing}", err=True)
        raise typer.Exit(1)
    if killed is not None:  # status 0 until 0.9.5, as if it had ended
        # one stopped before its first step has none to keep (said as kept until 0.9.11)
        exit_interrupted("interrupted: the settings measured before are kept, and the steps of the one "
                         "interrupted in its run; run the campaign again to go on" if killed.get("steps") else
                         "interrupted: the settings measured before are kept; the one interrupted measured no step "
                         "(its run is logged KILLED, with none); run the campaign again to go on")
