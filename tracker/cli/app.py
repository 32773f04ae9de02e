"""The ``tracker`` command line. Each command is a few lines over the library.

Errors: the library raises TrackerError subclasses; ``main`` prints each as one line on
stderr and exits 1 (2 for usage errors). ``-v`` shows the traceback as well.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tracker.cli import interrupted_line
from tracker.cli import campaign as campaign_cli
from tracker.cli import data as data_cli
from tracker.cli import describe as describe_cli
from tracker.cli import device as device_cli
from tracker.cli import fingerprint as fingerprint_cli
from tracker.cli import imports as imports_cli
from tracker.cli import mapping as mapping_cli
from tracker.cli import profile as profile_cli
from tracker.cli import report as report_cli
from tracker.cli import searchspace as searchspace_cli
from tracker.cli import store as store_cli
from tracker.cli import warehouse as warehouse_cli
from tracker.cli import zoo as zoo_cli
from tracker.cli.options import (FormatOption, OneConfiguration, OutputFormat, RepeatedArgumentsNamed, State,
                                 command_names, emit_json, exit_interrupted, flags_shown_without_a_type, logging_nothing,
                                 path_of, state)
from tracker.settings import UI_WORKERS

flags_shown_without_a_type()

app = typer.Typer(
    name="tracker",
    help="Measure deep networks on a device, track every run in MLflow, query in SQL, predict.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(store_cli.app, name="store")
app.add_typer(store_cli.runs_app, name="runs")
app.add_typer(zoo_cli.app, name="zoo")
app.add_typer(profile_cli.app, name="profile")
app.add_typer(device_cli.app, name="device")
app.add_typer(imports_cli.app, name="import")
app.add_typer(campaign_cli.app, name="campaign")
app.add_typer(data_cli.app, name="data")
app.add_typer(mapping_cli.app, name="mapping")
app.add_typer(searchspace_cli.app, name="searchspace")
app.command("describe", cls=OneConfiguration)(describe_cli.describe)
app.add_typer(warehouse_cli.app, name="warehouse")
app.command("sql")(warehouse_cli.sql)
app.command("views")(warehouse_cli.views)
app.command("sync")(store_cli.sync)
app.add_typer(fingerprint_cli.app, name="fingerprint")
app.command("predict", cls=RepeatedArgumentsNamed)(fingerprint_cli.predict)  # <list[str]> until 0.9.12
app.command("report")(report_cli.report)


def _versions() -> str:
    """``tracker 0.9.17 (python 3.11.7, torch 2.14.1, mlflow 3.17.2, ...)``: read from the installed
    packages' metadata, nothing imported; a package not installed is left out."""
    import platform
    from importlib import metadata

    from tracker import __version__

    found = [f"python {platform.python_version()}"]
    for name in ("torch", "torchvision", "mlflow", "duckdb", "lightgbm"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return f"tracker {__version__} ({', '.join(found)})"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(_versions())
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    tracking_uri: Annotated[
        Optional[str],
        typer.Option(
            "--tracking-uri",
            envvar="MLFLOW_TRACKING_URI",
            help="MLflow tracking store: http(s)://server, sqlite:///file.db or a folder. Default: runs/.",
        ),
    ] = None,
    experiment: Annotated[str, typer.Option("--experiment", "-e", help="MLflow experiment to log into.")] = "Default",
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, metavar="", show_default=False,
                                         help="More output: tracebacks of errors, and MLflow's own INFO lines.")] = 0,
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version, show_default=False,
                                          help="Print tracker's version and its main packages', and exit.")] = False,
) -> None:
    if not experiment.strip():  # an experiment named by spaces was made until 0.9.3
        raise typer.BadParameter(f"an experiment needs a name, got {experiment!r}", param_hint="'--experiment' / '-e'")
    ctx.obj = State(tracking_uri=tracking_uri, experiment=experiment, verbose=verbose)
    ctx.call_on_close(ctx.obj.close)


@app.command()
def ui(
    ctx: typer.Context,
    port: Annotated[int, typer.Option("--port", "-p", min=1, max=65535, help="Port to listen on.")] = 5000,
    workers: Annotated[int, typer.Option("--workers", "-w", min=1, max=64, help="Server worker processes (MLflow's default is 4; one serves one user).")] = UI_WORKERS,
) -> None:
    """Start the MLflow UI on the tracking store (127.0.0.1 only)."""
    from tracker.ui import serve_ui

    # how the UI is meant to stop: status 130 (SIGTERM 143) as any command (0 until 0.9.8)
    with logging_nothing("the MLflow UI is stopped, its server's processes with it"):
        serve_ui(state(ctx).tracking_uri, port, workers)


@app.command()
def demo(
    ctx: typer.Context,
    quick: Annotated[bool, typer.Option("--quick", help="Seven small networks at batch 1, no TX2 data (about a minute).")] = False,
    tx2: Annotated[Optional[Path], typer.Option("--tx2", metavar="FOLDER", parser=path_of("perf4sight's TX2 data folder"), help="perf4sight's TX2 data folder. Default: ../shared/datasets/perf4sight-tx2.")] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """The main job: measure a dozen networks and more, load the warehouse, train fingerprints, predict unseen networks."""
    from tracker.demo import FULL, QUICK, run_demo

    if tx2 is not None and not (tx2 / "architectures.json.gz").is_file():
        raise typer.BadParameter(f"{tx2} holds no architectures.json.gz (perf4sight's TX2 data)", param_hint="--tx2")
    st = state(ctx)
    try:
        summary = run_demo(st.tracking_uri, QUICK if quick else FULL, tx2_folder=tx2, to_stderr=fmt is OutputFormat.json)
    except KeyboardInterrupt:  # campaigns skip what they measured: the same command goes on from there
        exit_interrupted("interrupted: what was measured is kept; run the same command again to go on from there")
    if fmt is OutputFormat.json:
        emit_json(summary)


#: The options of ``tracker`` itself, before any command, and whether each takes a value: where one
#: is given after a command, its error says where it goes.
GLOBAL_OPTIONS = {"--tracking-uri": True, "--experiment": True, "-e": True, "--verbose": False, "-v": False,
                  "--version": False}


def quiet_interrupted_closes() -> None:
    """SQLAlchemy's pool logs a Ctrl-C (or a SIGTERM, raised as one) that lands while it closes a
    connection, traceback and all, then raises it: the interrupt is said once, as any other, and not
    as a traceback before it (until 0.9.7). Its other records pass on as before."""
    import logging

    class Pass(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kind = record.exc_info[0] if record.exc_info else None
            if kind is None or not issubclass(kind, KeyboardInterrupt):
                logging.getLogger().handle(record)  # the root's handlers, or logging's last resort

    pool = logging.getLogger("sqlalchemy.pool")
    pool.addHandler(Pass())
    pool.propagate = False


def _given_tracking_uri() -> str | None:
    """The tracking URI the command was given (``--tracking-uri``, else ``MLFLOW_TRACKING_URI``), as
    MLflow's client was given it: what a line of its failure names (a page not MLflow's JSON named no
    server until 0.9.7)."""
    import os

    args = sys.argv[1:]
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--tracking-uri" and i + 1 < len(args):
            return args[i + 1].rstrip("/")
        if arg.startswith("--tracking-uri="):
            return arg.partition("=")[2].rstrip("/")
    return os.environ.get("MLFLOW_TRACKING_URI", "").rstrip("/") or None


def _misplaced_option(option: str, args: list[str], ctx: Any = None) -> str:
    """What to say of tracker's own ``option`` given after a command (``runs list -e NAME``): the
    command, and the same command line with the option (and its value) moved before it. Until 0.9.8
    the line kept the command's words and the values of its options but dropped their names
    (``tracker --experiment VALUE profile network NET 1 1 retain ...``)."""
    import shlex

    at = next((i for i, a in enumerate(args) if a == option or a.startswith(f"{option}=")), 0)
    takes = GLOBAL_OPTIONS[option] and "=" not in args[at]
    moved = args[at:at + 2] if takes and at + 1 < len(args) else [args[at], "VALUE"] if takes else [args[at]]
    rest = args[:at] + args[at + 1 + (takes and at + 1 < len(args)):]
    command = " ".join(command_names(ctx)) or next((a for a in rest if not a.startswith("-")), "COMMAND")
    # tracker's own options given before the command stay where they are, the misplaced one joins them
    first = next((i for i, a in enumerate(rest) if not a.startswith("-") and not (i and GLOBAL_OPTIONS.get(rest[i - 1]))),
                 0)
    line = shlex.join(["tracker", *rest[:first], *moved, *rest[first:]])
    return f"{option} is an option of tracker itself, not of {command}: give it before the command ({line})"


#: The most digits of one number an error line says: a value of 400 digits (``--images`` and 400 zeros) was said
#: whole, a line of 450 characters, by every check but check_bound's until 0.9.13.
SAID_DIGITS = 80


def error_line(text: str) -> str:
    """``text`` as the command's one error line says it: ``error: `` before it, and each run of digits longer
    than :data:`SAID_DIGITS` cut there, an ellipsis after it."""
    import re

    return "error: " + re.sub(rf"\d{{{SAID_DIGITS + 1},}}", lambda m: m.group()[:SAID_DIGITS] + "…", text)


def main() -> None:
    from tracker.cli.options import INTERRUPTED, TERMINATED, interrupt_said
    from tracker.errors import OptionError, TrackerError, interrupted, os_reason, was_terminated

    import os

    verbose = any(a in ("-v", "-vv", "--verbose") for a in sys.argv[1:])
    if not verbose:  # MLflow's INFO lines (store creation, migrations) are noise on a terminal
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
        # and its "View run ... at: URL" lines, written by a run ended on a server (0.9.4)
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    # MLflow's client retries a server's 5xx for minutes (7 tries, doubling from 2 s: 4 minutes
    # where a proxy answered 503, until 0.9.4); four tries within about eight seconds, for tracker's own
    # client as for MLflow's (rest_store.RETRIES and BACKOFF_FACTOR, its defaults where unset)
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "3")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    quiet_interrupted_closes()
    try:
        # a value MLflow cannot use, said before anything is measured (MLflow's traceback at its first
        # request, after a measurement, until 0.9.7)
        from tracker.settings import check_http_environment

        check_http_environment()
        code = app(standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: bad option, bad value, no such command
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        message = message.replace(": Value error, ", ": ")  # an enum's check, as Typer words it
        option = getattr(exc, "option_name", None)
        if option in GLOBAL_OPTIONS:  # `runs list -e NAME`: "No such option: -e", and no more, until 0.9.4
            message = _misplaced_option(option, sys.argv[1:], getattr(exc, "ctx", None))
        elif option is not None and option.startswith("--") and any(c.isspace() for c in option):
            # a query that begins with its `-- comment` line, read as an option ("No such option: -- best
            # runs ..." until 0.9.6)
            message = (f"{option.splitlines()[0][:60]!r} was read as an option: a query that begins with a -- comment "
                       "goes after a lone --: tracker sql -- \"-- ...\"")
        if message:  # a bare `tracker` has already printed its help
            sys.stderr.write(error_line(f"{message}\n"))
        sys.exit(getattr(exc, "exit_code", 2))
    except OptionError as exc:  # an option's value tracker checks: a usage error, as the parser's own (1 until 0.9.8)
        sys.stderr.write(error_line(f"{exc}\n"))
        sys.exit(2)
    except TrackerError as exc:
        if verbose:
            raise
        sys.stderr.write(error_line(f"{exc}\n"))
        sys.exit(1)
    except OSError as exc:  # the file system said no where no command expected it: still one line
        from tracker.cli import broken_pipe

        if verbose or broken_pipe(exc):  # a closed stdout: tracker.cli.main ends quietly, status 141
            raise
        sys.stderr.write(error_line(f"{os_reason(exc)}\n"))
        sys.exit(1)
    except Exception as exc:  # a Ctrl-C during a DuckDB query (tracker sql, report, fingerprint train)
        if not verbose and any(c.__name__ == "MlflowException" for c in type(exc).__mro__):  # a RestException too
            from tracker.log.rest_store import mlflow_http_line

            # a server's refusal through MLflow's own client (the registry: fingerprint list, promote,
            # predict): one line, as tracker's own client says it (a traceback until 0.9.4)
            if (line := mlflow_http_line(_given_tracking_uri(), exc)) is not None:
                sys.stderr.write(error_line(f"{line}\n"))
                sys.exit(1)
        if not verbose and not interrupted(exc) and type(exc).__module__.lstrip("_").startswith("duckdb"):
            from tracker.errors import first_paragraph

            # a warehouse damaged, cut short or missing what a load makes, read by a command that reads it
            # (fingerprint train, report): one line (a traceback until 0.9.6; sql and load said it already)
            sys.stderr.write(error_line(f"the warehouse could not be read: {first_paragraph(str(exc))} (tracker warehouse "
                             "load --full makes its tables and views again; a damaged file: remove it, then load)\n"))
            sys.exit(1)
        if verbose or not interrupted(exc):
            raise
        raise KeyboardInterrupt from None  # said by tracker.cli.main, as a Ctrl-C anywhere else
    if code == INTERRUPTED and not interrupt_said():  # typer turns a Ctrl-C into status 130, silently
        sys.stderr.write(interrupted_line())
        if was_terminated():  # a SIGTERM handled as a Ctrl-C: 143, as exit_interrupted says it (130 until 0.9.2)
            code = TERMINATED
    if isinstance(code, int) and code:
        sys.exit(code)
