"""``tracker import``: measurements made elsewhere, as tracker runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracker.cli.options import (FormatOption, OutputFormat, emit_json, exit_interrupted, logging_nothing, path_text,
                                 state)

app = typer.Typer(help="Import measurements made elsewhere.", no_args_is_help=True)


@app.command("perf4sight")
def perf4sight(
    ctx: typer.Context,
    folder_text: Annotated[str, typer.Argument(metavar="FOLDER", parser=path_text("perf4sight's TX2 data folder"), help="Folder with latency/, memory/ and architectures.json.gz.")],
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Import perf4sight's Jetson TX2 training profiles (one training run per network and batch size)."""
    from tracker.imports.perf4sight import import_perf4sight, prepare

    path = Path(folder_text)
    with logging_nothing("the folder was being read; nothing was imported"):
        prepared = prepare(path)  # a wrong folder or a file it cannot read is refused before the store is touched
    st = state(ctx)
    if st.experiment == "Default":
        st.experiment = "perf4sight-tx2"
    logger = st.logger()
    try:
        stats = import_perf4sight(logger, path, prepared)
    except KeyboardInterrupt as exc:  # main's "what was logged before is kept" until 0.9.8: how much, and what then
        from tracker.cli import outbox_note
        from tracker.console import counted

        done, total = getattr(exc, "imported", 0), getattr(exc, "to_import", None)
        what = f"{done:,} of {total:,} {'run' if total == 1 else 'runs'}" if total is not None else counted(done, "run")
        exit_interrupted(f"interrupted: {what} imported into experiment {logger.experiment_name}; run the same command "
                         f"again to import the rest{outbox_note()}")
    if fmt is OutputFormat.json:
        emit_json({"experiment": logger.experiment_name, **stats})
    else:  # the experiment said (unsaid until 0.9.5, where -e put a second copy beside the first without a word)
        typer.echo(f"into experiment {logger.experiment_name}: "
                   + ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in stats.items()))
