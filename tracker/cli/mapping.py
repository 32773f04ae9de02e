"""``tracker mapping``: multi-DNN workloads, several networks at once, each split between two devices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from tracker.cli.options import (MEASUREMENT_FAILED, Allocator, AllocatorOption, BatchSizeOption, FormatOption,
                                 OneConfiguration, OutputFormat, emit_json, exit_interrupted, finite, option_values, path_of,
                                 state)
from tracker.console import counted
from tracker.settings import MAX_NETS, MAX_SEED, MAX_TIMEOUT_S, MAX_WINDOW_S, MIN_TIMEOUT_S

if TYPE_CHECKING:
    from tracker.profile.mapping import GenerateOptions, Mapping

app = typer.Typer(help="Multi-DNN workloads: draw mappings (networks, split layers, devices) and measure them running at once.",
                  no_args_is_help=True)
EXPERIMENT = "multi-dnn"

SeedOption = Annotated[int, typer.Option(min=0, max=MAX_SEED, help="Seed of the draw: the same options and seed give the "
                                                                  "same mappings.")]
NumNetsOption = Annotated[Optional[tuple[int, int]], typer.Option(
    "--num-nets-range", metavar="MIN MAX", help="Fewest and most networks per workload (default: 2 6; at most 32, all run at once in one child).")]
ModelsOption = Annotated[Optional[str], typer.Option(help="Comma list of zoo models to draw from (default: the classification models that fit the device).")]
PrioritiesOption = Annotated[str, typer.Option("--device-priorities", help="Weights of cpu and cuda for each stage, e.g. 0.4,0.6.")]
SetsOption = Annotated[int, typer.Option(min=1, help="Sets of networks to draw.")]
SamplesOption = Annotated[int, typer.Option(min=1, help="Mappings (splits and devices) per set of networks.")]
SingleOption = Annotated[bool, typer.Option("--single", help="One network per mapping (each network alone).")]
GpuOnlyOption = Annotated[bool, typer.Option("--gpu-only", help="Every stage on cuda.")]
MaxSplitOption = Annotated[Optional[int], typer.Option("--max-split", min=0, max=MAX_NETS, help="At most this many networks of a workload cut in two (the rest whole on one device).")]


def _options(seed: int, num_nets: tuple[int, int] | None, models: str | None, priorities: str, sets: int,
             samples: int, single: bool, gpu_only: bool, max_split: int | None) -> GenerateOptions:
    from tracker.errors import OptionError
    from tracker.profile.mapping import GenerateOptions, parse_priorities

    # each passed over without a word until 0.9.5
    if single and num_nets is not None:
        raise OptionError("--num-nets-range is for workloads of several networks; --single runs each alone: give one")
    names = [m.strip() for m in models.split(",") if m.strip()] if models is not None else None
    if names == []:  # "" drew from the default list
        raise OptionError("--models names no model: give a comma list of zoo names, or leave it out for the default list")
    with option_values():
        options = GenerateOptions(seed=seed, num_nets=num_nets or (2, 6), models=names,
                                  device_priorities=parse_priorities(priorities), sets=sets, samples=samples,
                                  single=single, gpu_only=gpu_only, max_split=max_split)
        options.check()
    return options


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _say(notes: list[str]) -> None:
    for note in notes:
        typer.echo(note, err=True)


@app.command("generate")
def generate(
    seed: SeedOption = 0,
    num_nets: NumNetsOption = None,
    models: ModelsOption = None,
    device_priorities: PrioritiesOption = "0.5,0.5",
    sets: SetsOption = 1,
    samples: SamplesOption = 1,
    single: SingleOption = False,
    gpu_only: GpuOnlyOption = False,
    max_split: MaxSplitOption = None,
    out_text: Annotated[Optional[str], typer.Option(
        "--out", metavar="FILE", help="Write the mappings to this JSON file (for `mapping run --file`).")] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Draw mappings at random from a seed (nothing is measured).

    A network run whole is written model@N:cpu>cpu, N its layer count: the same as model:cpu."""
    from tracker.errors import ConfigError, OptionError, os_reason
    from tracker.profile.mapping import generate as draw

    if out_text is not None and not out_text.strip():  # "--out . is a folder", status 1, until 0.9.10
        raise OptionError(f"--out {out_text!r} names no file: give the JSON file to write the mappings into "
                          "(e.g. mappings.json)")
    out = Path(out_text) if out_text is not None else None
    opts = _options(seed, num_nets, models, device_priorities, sets, samples, single, gpu_only, max_split)
    if out is not None and out.is_dir():  # before the draw (after its note, as "error: Is a directory: mf", until 0.9.6)
        raise ConfigError(f"--out {out} is a folder: give a file name (e.g. {out / 'mappings.json'})")
    written = False
    try:
        mappings = draw(opts, _gpu())
        data = [m.to_json() | {"mapping": m.compact()} for m in mappings]
        if out is not None:
            from tracker.files import write_whole

            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                write_whole(out, json.dumps(data, indent=2) + "\n")  # whole or not at all, a Ctrl-C in it too
            except OSError as exc:  # the file system's words alone, not naming --out, until 0.9.6
                raise ConfigError(f"--out {out}: cannot write the mappings ({os_reason(exc)})") from None
            written = True
        _say(opts.notes)  # once the mappings are written: a refusal is its one line
        if fmt is OutputFormat.json:
            emit_json(data)
        else:
            for m in mappings:
                typer.echo(m.compact())
    except KeyboardInterrupt:  # main's "what was logged before is kept" until 0.9.8: generate logs nothing
        exit_interrupted("interrupted: generate logs nothing" + (
            f"; the mappings are written to {out}" if written else
            f", and --out {out} was not written" if out is not None else ", and the mappings were not all printed"))


def _read_file(path: Path) -> list[Mapping]:
    from tracker.decode import Undecodable, loads_json
    from tracker.errors import ConfigError, not_utf8
    from tracker.profile.mapping import from_json

    try:
        data = loads_json(path.read_text(encoding="utf-8-sig"))  # an editor's byte-order mark read past
    except OSError as exc:
        raise ConfigError(f"cannot read mapping file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:  # a traceback until 0.9.6
        raise ConfigError(f"{path}: {not_utf8(exc)}; a mapping file is JSON, as `tracker mapping generate --out` "
                          "writes") from None
    except Undecodable as exc:  # nested too deeply: a traceback until 0.9.8
        raise ConfigError(f"{path}: {exc}; a mapping file is a mapping or a list of them, as "
                          "`tracker mapping generate --out` writes") from None
    if isinstance(data, dict):  # one mapping, as the README shows it (refused, "expected a list", until 0.9.8)
        return [from_json(data, str(path))]
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a mapping {{\"networks\": [...]}} or a list of them (as `tracker mapping "
                          "generate --out` writes)")
    if not data:  # exit 0 with nothing said until 0.9.3
        raise ConfigError(f"{path}: holds no mapping (an empty list)")
    return [from_json(item, f"{path}[{i}]") for i, item in enumerate(data)]


@app.command("run", cls=OneConfiguration)
def run(
    ctx: typer.Context,
    seed: SeedOption = 0,
    num_nets: NumNetsOption = None,
    models: ModelsOption = None,
    device_priorities: PrioritiesOption = "0.5,0.5",
    sets: SetsOption = 1,
    samples: SamplesOption = 1,
    single: SingleOption = False,
    gpu_only: GpuOnlyOption = False,
    max_split: MaxSplitOption = None,
    file: Annotated[Optional[Path], typer.Option("--file", metavar="FILE", parser=path_of("the mapping file (JSON, as mapping generate --out writes)"), help="Run the mappings of this file instead of drawing them.")] = None,
    mapping: Annotated[Optional[list[str]], typer.Option("--mapping", metavar="MAPPING", help="Run this mapping, e.g. resnet18@30:cpu>cpu,mobilenet_v2:cpu (repeatable).")] = None,
    batch_size: BatchSizeOption = 1,
    duration: Annotated[float, typer.Option("--duration", min=0.1, max=MAX_WINDOW_S, callback=finite, help="Seconds of sampling per workload.")] = 10.0,
    warmup: Annotated[float, typer.Option("--warmup", min=0.0, max=MAX_WINDOW_S, callback=finite, help="Seconds of warm-up before sampling.")] = 2.0,
    threads: Annotated[Optional[int], typer.Option("--threads", help="CPU threads (the CPU mode); default: torch's.")] = None,
    allocator: AllocatorOption = Allocator.system,
    timeout: Annotated[Optional[float], typer.Option("--timeout", min=MIN_TIMEOUT_S, max=MAX_TIMEOUT_S, callback=finite, help="Seconds before a workload's child is killed, more than warm-up + duration (default: 120 + 3 x (warm-up + duration)).")] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Run each mapping's networks at once for --duration after --warmup; one mapping run per workload.

    Workloads already measured are skipped, so an interrupted run resumes."""
    from tracker.profile.mapping import Workload, check_timeout, generate as draw, parse_mapping, validate
    from tracker.profile.modes import validate_threads
    from tracker.profile.records import beside_other_work, other_work_note

    with option_values():
        if threads is not None:  # before any note is said (refused after "no CUDA GPU ...", two lines, until 0.9.6)
            validate_threads(threads)
        check_timeout(timeout, duration, warmup)  # each workload a FAILED run of reason timeout until 0.9.6
    gpu = _gpu()
    notes: list[str] = []  # a given mapping's devices are its own: the no-GPU note is a drawn one's (said of any until 0.9.8)
    if mapping or file:
        from tracker.errors import OptionError

        drawing = [name for name in ("seed", "num_nets", "models", "device_priorities", "sets", "samples", "single",
                                     "gpu_only", "max_split") if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"]
        if drawing:  # ignored, unchecked, until 0.9.3
            raise OptionError(f"--{drawing[0].replace('_', '-')} is for mappings drawn at random; the mappings of "
                              f"{'--mapping' if mapping else '--file'} are given whole: leave it out")
        typed = [parse_mapping(m) for m in mapping or []]  # its form: a usage error, status 2 (1 until 0.9.10)
        mappings = typed + (_read_file(file) if file else [])
    else:
        opts = _options(seed, num_nets, models, device_priorities, sets, samples, single, gpu_only, max_split)
        typed, mappings = [], draw(opts, gpu)
        notes = opts.notes
    for i, m in enumerate(mappings):
        validate(m, gpu, typed=i < len(typed))  # every mapping checked before the first is measured
    from tracker.profile import zygote_client

    zygote_client.prestart()
    _say(notes)
    st = state(ctx)
    if st.experiment == "Default":
        st.experiment = EXPERIMENT
    from tracker.profile.mapping import run_workloads

    workloads = [Workload(m, batch_size, duration, warmup, threads, allocator.value) for m in mappings]
    done: list[dict[str, Any]] = []

    def show(r: dict[str, Any]) -> None:
        done.append(r)
        if fmt is OutputFormat.json:
            return
        if r["status"] != "FINISHED":
            said = f": {r['message']}" if r.get("message") else ""  # "(timeout)" alone until 0.9.8
            typer.echo(f"{r['mapping']}: {r['status']} ({r['reason']}){said}; run {r['run_id'][:12]}")
            return
        note = " (already measured: reused)" if r["reused"] else ""
        typer.echo(f"{r['mapping']}: {r['total_throughput_per_s']:.1f} images/s in all{note}; run {r['run_id'][:12]}")
        if beside_other_work(r):  # unsaid, and unkept, until 0.9.8
            typer.echo(other_work_note(r, "its networks may be slower than the machine alone would run them"), err=True)
        idle = [f"{n['model']}@{n['split']}" for n in r["networks"] if not n["inf_count"]]
        if idle:  # FINISHED and silent until 0.9.3
            typer.echo(f"note: {', '.join(idle)} finished no inference in the {duration:g} s window: its figures are "
                       "absent; give a longer --duration", err=True)
        for n in r["networks"]:
            xfer = f", transfer {n['avg_transfer_ms']:.3f} ms" if n["avg_transfer_ms"] is not None else ""
            inf = f"{n['avg_inf_ms']:.1f} ms" if n["avg_inf_ms"] is not None else "-"
            typer.echo(f"  {n['model']}@{n['split']} {'>'.join(n['devices'])}: {counted(n['inf_count'], 'inference')}, {inf} each{xfer}")

    try:
        run_workloads(st.logger(), workloads, timeout_s=timeout, campaign=EXPERIMENT, on_done=show)
    except KeyboardInterrupt:
        if fmt is OutputFormat.json:
            emit_json(done)
        exit_interrupted(f"interrupted after {len(done)} of {len(workloads)} workloads: what was measured is kept; "
                         "run the same command again to resume")
    if fmt is OutputFormat.json:
        emit_json(done)
    if any(r["status"] == "FAILED" for r in done):  # each is logged; a script can tell (0 until 0.9.1)
        raise typer.Exit(MEASUREMENT_FAILED)
