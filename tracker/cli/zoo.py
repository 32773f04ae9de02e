"""``tracker zoo``: the networks the tracker knows."""

from __future__ import annotations

import typer

from tracker.cli.options import FormatOption, OutputFormat, emit_json

app = typer.Typer(help="Networks: torchvision models by name (built without weights).", no_args_is_help=True)


@app.command("list")
def list_models(fmt: FormatOption = OutputFormat.table) -> None:
    """List the classification models the zoo can build."""
    from tracker.zoo import classification_models

    names = list(classification_models())
    if fmt is OutputFormat.json:
        emit_json(names)
    else:
        typer.echo("\n".join(names))
