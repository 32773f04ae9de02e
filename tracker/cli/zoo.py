"""``tracker zoo``: the networks the tracker knows, generates and prunes."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from tracker.cli.options import (FormatOption, OneConfiguration, OutputFormat, emit_json, logging_nothing, model_reference,
                                 option_values, reads_only, state)
from tracker.console import counted, decimal_number
from tracker.settings import MAX_GENERATE_COUNT, MAX_SEED

app = typer.Typer(help="Networks: torchvision models, generated and pruned networks (specs in experiments/).", no_args_is_help=True)


class Family(str, Enum):
    all = "all"
    classification = "classification"
    detection = "detection"
    segmentation = "segmentation"


class PruneMethod(str, Enum):
    """``zoo prune --method``: the help names them (``<str>`` until 0.9.32); ``pruning.METHODS``' own."""

    l1 = "l1"
    random = "random"


#: What an interrupted zoo generate or prune says: it logs nothing, and each spec file is whole or absent.
GENERATED_KEPT = ("nothing is logged by this command; the spec files written are whole: run the same command again "
                  "to write the rest")

OutOption = Annotated[Optional[str], typer.Option("--out", metavar="FOLDER", help="Folder for the specs. Default: experiments/<experiment>/networks (experiments/generated/networks or experiments/pruned/networks in the Default experiment).")]


def _out(ctx: typer.Context, out_text: str | None, default_name: str) -> Path:
    """The folder for the specs: --out, else the experiment's. An --out of nothing, or an experiment that
    names a folder, is a usage error, status 2 ("" was the current folder, written into, and -e's status
    1, until 0.9.10); a file where the folder should be is not."""
    from tracker.errors import ConfigError, OptionError

    if out_text is not None:
        if not out_text.strip():
            raise OptionError(f"--out {out_text!r} names no folder: give the folder for the specs (. for this one)")
        out = Path(out_text)
        # a file where the folder or one above it should be: "Not a directory: afile.txt" until 0.9.6
        there = next((p for p in (out, *out.parents) if p.exists()), None)
        if there is not None and not there.is_dir():
            raise ConfigError(f"--out {out}: {there} is a file, not a folder" if there == out else
                              f"--out {out}: {there} is a file, so no folder can be made under it")
        return out
    exp = state(ctx).experiment
    if exp.strip() in (".", "..") or any(c in exp for c in "/\\\n"):  # -e ../../escape wrote outside experiments/,
        # -e /abs/path there, until 0.9.7
        raise OptionError(f"-e {exp!r} names a folder, and the specs' default folder, experiments/<experiment>/networks, "
                          "is made of it: give --out, or an experiment of a plain name")
    return Path("experiments") / (default_name if exp == "Default" else exp) / "networks"


@app.command("list")
@reads_only
def list_models(family: Annotated[Family, typer.Option(help="Which models.")] = Family.all, fmt: FormatOption = OutputFormat.table) -> None:
    """List the torchvision models the zoo can build (without weights)."""
    from tracker.zoo import all_models, classification_models, detection_models, segmentation_models

    names = {"all": all_models, "classification": classification_models, "detection": detection_models,
             "segmentation": segmentation_models}[family.value]()
    if fmt is OutputFormat.json:
        emit_json(list(names))
    else:
        typer.echo("\n".join(names))


@app.command("generate", cls=OneConfiguration)
def generate(
    ctx: typer.Context,
    count: Annotated[int, typer.Option("--count", "-n", min=1, max=MAX_GENERATE_COUNT, help="How many networks.")] = 10,
    seed: Annotated[int, typer.Option("--seed", "-s", min=0, max=MAX_SEED, help="Seed: the same seed gives the same networks.")] = 0,
    input_size: Annotated[int, typer.Option(help="Input resolution (at least 32: the generator's stem and stages halve it 5 times).")] = 224,
    out: OutOption = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Generate PerfSeer-style random CNNs and write one JSON spec each."""
    with logging_nothing(GENERATED_KEPT):
        from tracker.errors import ConfigError, OptionError
        from tracker.zoo.generator import generate as gen
        from tracker.zoo.spec import write_specs

        folder = _out(ctx, out, "generated")  # a bad one said before the networks are drawn
        try:  # the generator knows its least input size (checked there, and for campaigns)
            specs = gen(count, seed, input_size=input_size)
        except ConfigError as e:  # a usage error, status 2 (1 until 0.9.8)
            raise OptionError(f"--input-size: {e}") from None
        paths = write_specs(specs, folder, replace=False)
        if fmt is OutputFormat.json:
            emit_json([str(p) for p in paths])
        else:
            typer.echo(f"wrote {counted(len(paths), 'network spec')} to {paths[0].parent}")


def _ratios(text: str) -> list[float]:
    """--ratios as ratios; a bad one is a usage error, status 2 (1 until 0.9.8)."""
    from tracker.errors import OptionError
    from tracker.zoo.pruning import ratios_from_percentages

    items = text.split(",")
    if text.strip() and not all(t.strip() for t in items):  # passed over without a word until 0.9.6
        raise OptionError(f"--ratios {text!r}: an empty entry (two commas together, or one at an end)")
    values = [decimal_number(t) for t in items if t.strip()]  # ASCII digits alone (٣ was 3 until 0.9.14)
    if None in values:
        raise OptionError(f"--ratios takes percentages separated by commas, e.g. 0,10,50; got {text!r}")
    with option_values():
        return ratios_from_percentages(values, "--ratios")


@app.command("prune")
def prune(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(callback=model_reference, help="Zoo model, spec file or FILE.py:NAME (a network of your own) to prune.")],
    ratios: Annotated[str, typer.Option(help="Pruning percentages, comma separated, e.g. 0,10,50.")] = "0,25,50,75",
    method: Annotated[PruneMethod, typer.Option(help="Filter selection: l1 (the filters of largest L1 norm) or random.")
                      ] = PruneMethod.l1,
    seed: Annotated[int, typer.Option(min=0, max=MAX_SEED, help="Seed of random selection (--method random).")] = 0,
    out: OutOption = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Channel-prune a network at several ratios and write one JSON spec each."""
    with logging_nothing(GENERATED_KEPT):
        from tracker.zoo.pruning import check_method, fractions_said, pruned_spec
        from tracker.zoo.spec import resolve, write_specs

        fractions = _ratios(ratios)
        with option_values():  # --method and --seed: usage errors (status 1 until 0.9.8)
            check_method(method.value, seed)
        resolve(model)  # an unknown name or a bad file: one line before anything is built
        folder = _out(ctx, out, "pruned")  # and a bad folder
        specs = [pruned_spec(model, r, method=method.value, seed=seed) for r in fractions]
        paths = write_specs(specs, folder, replace=False)
        if fmt is OutputFormat.json:
            emit_json([str(p) for p in paths])
        else:
            typer.echo(f"wrote {counted(len(paths), 'pruned spec')} of {model} to {paths[0].parent}")
        if said := fractions_said(fractions, "--ratios"):  # written, as asked, and said (since 0.9.30)
            typer.echo(f"note: {said}", err=True)
