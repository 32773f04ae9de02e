"""Option types and state shared by every command."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional, TypeVar

import typer

from tracker.profile.stats import (MAX_PRECISION, MAX_SAMPLES, MAX_TIME_CAP_S, MIN_PRECISION, MIN_SAMPLES_FOR_CI,
                                   MIN_TIME_CAP_S)
from tracker.settings import DEFAULT_EXPERIMENT, MAX_BATCH, MAX_SPEC_SIZE, MIN_INPUT_SIZE

if TYPE_CHECKING:
    from tracker.log.logger import RunLogger
    from tracker.settings import StoreLocation


F = TypeVar("F", bound=Callable[..., Any])


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


class Phase(str, Enum):
    inference = "inference"
    training = "training"


INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C (128 + SIGINT)
#: The exit status of a command that measured one configuration (or workload) and logged it FAILED
#: (out of memory, a crash, a timeout, bad input): its run and line are the outcome, and a script can
#: tell (0 until 0.9.1). A campaign, whose faults end one measurement each, and a boundary, whose
#: failures are what it looks for, end with 0; a campaign that measured nothing, each of its configurations
#: failed (or refused), none measured before, ends with 1 (since 0.9.12).
MEASUREMENT_FAILED = 3
TERMINATED = 143  # and by SIGTERM (128 + SIGTERM)
_interrupt_said: list[bool] = []


def exit_interrupted(message: str) -> NoReturn:
    """End a command that handled a Ctrl-C itself: its own line, status 130 (main adds no other);
    143 where it was a SIGTERM (``tracker.errors.Terminated``, handled as a Ctrl-C is)."""
    from tracker.errors import was_terminated

    _interrupt_said.append(True)
    typer.echo(message, err=True)
    raise typer.Exit(TERMINATED if was_terminated() else INTERRUPTED)


def exit_if_waiting(exc: BaseException, what: str) -> None:
    """End a command whose Ctrl-C (``exc``) landed while it waited for its device, another tracker process
    measuring on it (``devicelock.waiting_for``), with a line saying so and ``what`` that left; return for
    one that landed anywhere else (main's "what was logged before is kept" for each until 0.9.11)."""
    from tracker.profile.devicelock import waiting_for

    if (device := waiting_for(exc)) is not None:
        exit_interrupted(f"interrupted while waiting for {device}, which another tracker process was measuring on: {what}")


@contextmanager
def logging_nothing(what: str) -> Iterator[None]:
    """The body of a command that logs nothing (describe, zoo generate, zoo prune): a Ctrl-C there
    says ``interrupted: WHAT``, not main's "what was logged before is kept" (said until 0.9.7, of
    commands that log nothing), with status 130 (143 for SIGTERM)."""
    from tracker.errors import TrackerError, interrupted

    try:
        yield
    except KeyboardInterrupt:
        exit_interrupted(f"interrupted: {what}")
    except Exception as exc:  # DuckDB's error for a Ctrl-C in a query (predict's in-memory warehouse), not
        # the command's own line (typer.Exit) or error, said while one was handled
        if isinstance(exc, (typer.Exit, TrackerError)) or not interrupted(exc):
            raise
        exit_interrupted(f"interrupted: {what}")


@contextmanager
def option_values() -> Iterator[None]:
    """Around the library's check of command-line options' values (the same check a campaign's or a
    job's keys get, a ConfigError there): its error is a usage error, :class:`~tracker.errors.OptionError`,
    status 2, as the parser's own for a value out of its range (status 1 until 0.9.8)."""
    from tracker.errors import OptionError, TrackerError

    try:
        yield
    except OptionError:
        raise
    except TrackerError as exc:
        raise OptionError(str(exc)) from None


#: What a command that writes nothing (runs list, runs show, store info, device show, views, ...) says
#: when Ctrl-C stops it: main's "what was logged before is kept" until 0.9.8, of commands that log nothing.
READ_ONLY_LINE = "interrupted: nothing is written by this command"


def says_when_interrupted(line: str) -> Callable[[F], F]:
    """A command's one declaration of what its Ctrl-C (or SIGTERM) says, put under its ``@app.command``:
    ``line``, status 130 (143), as :func:`logging_nothing` does for a block, in place of main's generic
    line. A line the command says itself (:func:`exit_interrupted`) is said instead."""
    import functools

    def declare(command: F) -> F:
        @functools.wraps(command)  # its signature and annotations, as Typer reads them
        def run(*args: Any, **kwargs: Any) -> Any:
            with logging_nothing(line.removeprefix("interrupted: ")):
                return command(*args, **kwargs)
        return run  # type: ignore[return-value]

    return declare


#: :func:`says_when_interrupted` for a command that only reads.
reads_only = says_when_interrupted(READ_ONLY_LINE)


def interrupt_said() -> bool:
    """Whether the command said why it stopped (see :func:`exit_interrupted`)."""
    return bool(_interrupt_said)


class Allocator(str, Enum):
    """modes.ALLOCATORS, repeated here so that --help imports nothing of the profiler."""

    system = "system"
    retain = "retain"


AllocatorOption = Annotated[Allocator, typer.Option(
    "--allocator", help="How the child's C allocator keeps freed memory (part of the mode): system, the C library's "
                        "default; retain, kept for reuse (glibc mallopt), as jemalloc or tcmalloc would.")]


def _repeated_type(self: Any, ctx: Any) -> str:
    """An argument of several values' type column: its values' type, ``<str>...``, as Typer shows an
    option of several values'."""
    from typing import get_args

    (each,) = get_args(self.type_descriptor.annotation)
    return f"<{self._bare_type(each)}>..."


def flags_shown_without_a_type() -> None:
    """Typer 0.29 shows a flag's type in --help's type column, ``--quick <bool>``, as if it took a value
    (``--quick true``: "Got unexpected extra argument"); click shows a flag with nothing there, as
    tracker's did before that Typer. A flag with a metavar of its own still shows it."""
    shown = typer.core.TyperOption.display_type_rich
    if getattr(shown, "flags_bare", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_bool_flag", False) and self.metavar is None:
            return None
        return shown(self, ctx)

    display_type_rich.flags_bare = True  # type: ignore[attr-defined]
    typer.core.TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


class OneConfiguration(typer.core.TyperCommand):
    """The ``cls`` of a command that measures, describes or predicts one configuration: an option that names
    what is measured (``AXES``: ``--batch-size``, ``--phase``, ``--device``, ...) given more than once is a
    usage error naming the values, where click keeps the last without a word (``profile network resnet18 -b 1
    -b 8`` measured batch 8 alone, ``predict resnet18 --phase inference --phase training`` predicted training
    alone, until 0.9.29, as ``predict``'s --batch-size and a campaign take several). An option of several
    values (``predict -b``) is not one of them; ``campaign loader``'s --batch-size is one comma list."""

    #: The options checked, and what one value of each is.
    AXES = {"batch_size": "batch size", "phase": "phase", "device": "device", "input_size": "input size",
            "dtype": "number format", "threads": "thread count", "allocator": "allocator", "target": "target"}
    #: What the command takes instead, by its name: ``{what}``, one value's name (``AXES``); ``{option}`` and
    #: ``{listed}``, the option and its values in a comma list (``campaign loader``'s one --batch-size is one).
    TAKES = {"network": "takes one {what}; a campaign measures several (tracker campaign run)",
             "layers": "takes one {what}; a campaign with layers = true measures several (tracker campaign run)",
             "loader": "takes several in one comma list ({option} {listed})"}
    #: What any other command takes instead.
    TAKES_ONE = "takes one {what}; run it once for each"

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:  # the order the options were parsed in, once each time one is given (an error: the parse below says it)
            _, _, order = self.make_parser(ctx).parse_args(args=list(args))
        except typer.TyperException:
            order = []
        if any(set(getattr(p, "opts", ())) & set(ctx.help_option_names) for p in order):
            return super().parse_args(ctx, args)  # --help asked for: the help, whatever else was given
        options = [p for p in order if getattr(p, "param_type_name", "") == "option" and not getattr(p, "multiple", False)
                   and getattr(p, "name", None) in self.AXES]
        twice = next((p for p in options if options.count(p) > 1), None)
        if twice is not None:
            values = _option_values(args, twice.opts)
            takes = self.TAKES.get(ctx.info_name or "", self.TAKES_ONE).format(
                what=self.AXES[twice.name], option=twice.opts[0], listed=",".join(values))
            command = " ".join(command_names(ctx)) or ctx.info_name
            raise typer.BadParameter(f"given {options.count(twice)} times ({', '.join(values)}): {command} {takes}",
                                     ctx, twice)
        return super().parse_args(ctx, args)


def command_names(ctx: Any) -> list[str]:
    """The names of ``ctx``'s command below tracker's own (``["profile", "network"]``): the root's name is
    the program's, as it was started (``tracker``, ``__main__.py``)."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name)
        ctx = ctx.parent
    return names


def _option_values(args: list[str], names: list[str]) -> list[str]:
    """The values given to the option of these ``names`` in ``args``: ``-b 4``, ``-b4``, ``--batch-size 4``,
    ``--batch-size=4``; up to ``--``."""
    values, i = [], 0
    while i < len(args) and args[i] != "--":
        arg = args[i]
        if arg in names and i + 1 < len(args):
            values.append(args[i + 1])
            i += 2
            continue
        for name in names:
            if name.startswith("--") and arg.startswith(f"{name}="):
                values.append(arg[len(name) + 1:])
            elif not name.startswith("--") and arg.startswith(name) and not arg.startswith("--") and len(arg) > len(name):
                values.append(arg[len(name):])
        i += 1
    return values


class RepeatedArgumentsNamed(OneConfiguration):
    """The ``cls`` of a command with an argument of several values (``list[str]``: ``predict MODEL...``),
    whose --help would show its Python type, ``<list[str]>``, in the type column, whatever its metavar
    (Typer takes an argument's column from its type alone): there it shows its values' type and ``...``.
    A ``OneConfiguration`` too: ``predict``, its one user, takes one of each axis but --batch-size."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, typer.core.TyperArgument) and param.type_descriptor.is_list:
                param.display_type_rich = _repeated_type.__get__(param)  # this argument's, not the class's


def device_name(value: str) -> str:
    """A device as tracker takes it (``cpu``, ``cuda``, ``cuda:N``), in its one name (``cuda:0`` is
    ``cuda``), or a usage error naming it: whether this machine has it is checked after
    (``check_device``), in one line."""
    from tracker.profile.device import canonical_device, is_device_name

    if not is_device_name(value):
        raise typer.BadParameter(f"{value!r} is not a device: cpu, cuda or cuda:N (CUDA device N)")
    return canonical_device(value)


def finite(value: float | None) -> float | None:
    """A number option's value, or a usage error where it is not a finite number (``inf``, ``nan``:
    click's ranges let them by, and a run's params must be finite, so the measurement would be made
    and then lost when it is logged)."""
    import math

    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number, got {value:g}")
    return value


def model_reference(value: Any) -> Any:
    """A MODEL argument (one, or a list of them), as given; where one is a zoo name and a file or
    folder of that name is in the current folder, a note on stderr that the zoo's network is taken
    and how to name the file (``./NAME``). Until 0.9.8 the file was taken instead, without a word.
    An empty one is a usage error naming the argument (status 1 until 0.9.10)."""
    from tracker.zoo.spec import shadowed_file

    for ref in value if isinstance(value, (list, tuple)) else [value] if value is not None else []:
        if not str(ref).strip():
            raise typer.BadParameter(f"{str(ref)!r} names no network: give a zoo name, a spec file or FILE.py:NAME")
        if note := shadowed_file(str(ref)):
            typer.echo(f"note: {note}", err=True)
    return value


def path_text(what: str) -> Callable[[str], str]:
    """The ``parser`` of a FILE or FOLDER argument (``typer.Argument(metavar="FILE",
    parser=path_text("the campaign file"))``, of type ``str``, made a Path by its command: Typer's help
    shows an argument's type, ``<Path>`` for a Path, until 0.9.12): the text as given, or a usage error,
    status 2, where it is empty or blank, said before anything is read or made. Path("") is ".", the
    current folder: ``campaign run ""`` said "cannot read campaign .: Is a directory", ``views -w ""``
    opened the current folder as a warehouse, status 1, until 0.9.11."""
    def parse(value: str) -> str:
        if not str(value).strip():
            raise typer.BadParameter(f"{str(value)!r} is an empty path: give {what}")
        return value

    return parse


def path_of(what: str) -> Callable[[str], Path]:
    """The ``parser`` of a FILE or FOLDER option (``typer.Option("--file", metavar="FILE",
    parser=path_of("the mapping file"))``: its help shows the metavar where it would show ``<Path>``):
    :func:`path_text`'s check, the path as given."""
    text = path_text(what)
    return lambda value: Path(text(value))


def memory_limit(value: float | None) -> float | None:
    """``--memory-limit-mb``: finite, and at most the largest cap a measurement takes
    (``memcap.MAX_LIMIT_MB``: 1e30 read as a tiny cgroup limit, a false out-of-memory, until 0.9.5)."""
    if finite(value) is None:
        return None
    from tracker.profile.memcap import over_limit

    if why := over_limit(value):
        raise typer.BadParameter(why)
    return value


DeviceOption = Annotated[str, typer.Option(
    "--device", callback=device_name, help="Device to run on: cpu, cuda, or cuda:N (CUDA device N).")]
FormatOption = Annotated[OutputFormat, typer.Option("--format", help="Output as a table or as JSON.")]
#: a network's input size at most as a spec file's (MAX_SPEC_SIZE): 100,000 px was tried, and said as memory not
#: given ("cannot run on a 1x3x100000x100000 input"), status 1, until 0.9.8
InputSizeOption = Annotated[Optional[int], typer.Option(
    "--input-size", min=MIN_INPUT_SIZE, max=MAX_SPEC_SIZE,
    help="Input resolution S of the (N, C, S, S) images (default: the network's own: 224, 299 for inception_v3, a "
         "spec's, a file's INPUT_SIZE).")]
BatchSizeOption = Annotated[int, typer.Option("--batch-size", "-b", min=1, max=MAX_BATCH, help="Images per iteration.")]
class Dtype(str, Enum):
    """The number formats a network may run in (``profile.network.DTYPES``, repeated here so that
    --help imports nothing of the profiler)."""

    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"
    int8 = "int8"


DtypeOption = Annotated[Dtype, typer.Option(
    "--dtype", help="Number format the network runs in: its weights and inputs cast to it (float16, bfloat16: "
                    "as model.half() or .bfloat16() would, not autocast); int8: quantized after training by torch.ao's "
                    "FX graph mode (CPU inference). Part of the configuration (run param precision).")]
PrecisionOption = Annotated[
    float,
    typer.Option("--precision", min=MIN_PRECISION, max=MAX_PRECISION, callback=finite, help="Target relative half-width of the 95% CI of the median."),
]
TimeCapOption = Annotated[float, typer.Option("--time-cap", min=MIN_TIME_CAP_S, max=MAX_TIME_CAP_S, callback=finite, help="Seconds of sampling at most per configuration.")]
MinSamplesOption = Annotated[int, typer.Option(
    "--min-samples", min=MIN_SAMPLES_FOR_CI, max=MAX_SAMPLES,
    help="Samples at least before the precision may end sampling (the time cap still does): 200 give a p99.")]


@dataclass
class State:
    """What the global options set, handed to every command through ``ctx.obj``."""

    tracking_uri: str | None = None
    experiment: str = DEFAULT_EXPERIMENT
    verbose: int = 0
    _logger: Any = field(default=None, repr=False)

    def location(self, read_only: bool = False) -> StoreLocation:
        """Where the tracking store is; ``read_only``: it must exist already (a one-line error), so
        that a command that only reads leaves no new empty store behind."""
        from tracker.settings import resolve_location

        location = resolve_location(self.tracking_uri)
        if read_only:
            location.require()
        return location

    def logger(self, read_only: bool = False) -> RunLogger:
        """The run logger of the store (``read_only``: see :meth:`location`)."""
        if read_only:
            self.location(read_only=True)
        if self._logger is None:
            from tracker.log.logger import RunLogger

            self._logger = RunLogger(self.tracking_uri, self.experiment, create=not read_only)
        if not read_only:
            self._logger.require_artifacts_here()
        return self._logger

    def close(self) -> None:
        if self._logger is not None:
            self._logger.close()


def state(ctx: typer.Context) -> State:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, State) else State()


def _finite_only(value: Any) -> Any:
    """``value`` with every float that is not finite (NaN, an infinity; Python's or numpy's) made None,
    through its dicts, lists and tuples; a finite numpy float made Python's (``default=str`` wrote it as
    a string)."""
    import math

    if isinstance(value, float):  # numpy's float64 too
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_only(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_only(item) for item in value]
    numpy = sys.modules.get("numpy")  # numpy's other floats; none where numpy was never imported
    if numpy is not None and isinstance(value, numpy.floating):
        return float(value) if math.isfinite(value) else None
    return value


def emit_json(data: Any) -> None:
    """``data`` as JSON on stdout: a number that is not finite is null, absent (written as NaN or
    Infinity, which strict JSON readers refuse, until 0.9.12); ``allow_nan=False`` the guard."""
    sys.stdout.write(json.dumps(_finite_only(data), indent=2, default=str, allow_nan=False) + "\n")
