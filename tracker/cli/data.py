"""``tracker data``: datasets on disk for training jobs."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from tracker.cli.options import FormatOption, OutputFormat, emit_json
from tracker.console import counted
from tracker.data.synth import MAX_IMAGES, MAX_SIZE_PX, MIN_SIZE_PX
from tracker.settings import MAX_SEED


class DatasetKind(str, Enum):
    """What ``data synth`` writes (``synth.KINDS``): its help names the two (``<str>`` until 0.9.32), click
    refuses another."""

    detection = "detection"
    classification = "classification"


app = typer.Typer(help="Image datasets on disk for training jobs.", no_args_is_help=True)


@app.command("synth")
def synth(
    folder_text: Annotated[str, typer.Argument(metavar="FOLDER", help="Folder to write the dataset into.")],
    kind: Annotated[DatasetKind, typer.Option(help="detection (COCO JSON + VOC XML) or classification (class folders).")
                    ] = DatasetKind.detection,
    images: Annotated[int, typer.Option(help=f"Number of JPEG images, 1 to {MAX_IMAGES:,}.")] = 32,
    size: Annotated[int, typer.Option(help=f"Image side in pixels, {MIN_SIZE_PX} to {MAX_SIZE_PX:,}.")] = 160,
    seed: Annotated[int, typer.Option(min=0, max=MAX_SEED, help="Random seed.")] = 0,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Write a small realistic dataset (JPEG images with objects and their annotations); nothing is downloaded."""
    from tracker.data.synth import synth as write
    from tracker.errors import OptionError

    if not folder_text.strip():  # "" was the current folder, written into (until 0.9.10)
        raise OptionError(f"FOLDER {folder_text!r} names no folder: give the folder to write the dataset into (. for "
                          "this one)")
    folder = Path(folder_text)
    try:
        info = write(folder, kind.value, images, size, seed)
    except KeyboardInterrupt as exc:  # "what was logged before is kept" until 0.9.6: synth logs nothing
        from tracker.cli.options import exit_interrupted

        written = getattr(exc, "written", 0)
        exit_interrupted(f"interrupted: {written:,} of {images:,} {'image' if images == 1 else 'images'} written to {folder}"
                         + (", without annotations.json (written last)" if kind is DatasetKind.detection else "")
                         + ": an incomplete dataset; run the same command again to write it whole")
    if fmt is OutputFormat.json:
        emit_json(info)
    else:
        typer.echo(f"wrote {counted(info['images'], f'{kind.value} image')} ({info['format']} layout) to {info['path']}")
