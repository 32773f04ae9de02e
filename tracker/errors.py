"""The project's own exceptions. The library raises these; the CLI turns each into one line."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def first_paragraph(message: str) -> str:
    """A library's error up to its first blank line, on one line: for DuckDB, the error and its
    hint ("Did you mean ...?", "Candidate bindings: ..."), without the echoed query and its caret."""
    head = message.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in head.splitlines() if line.strip())


def first_line(exc: BaseException) -> str:
    """An exception's first line (its type's name when it has no message)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def os_reason(exc: OSError) -> str:
    """What the file system said, and of which path: ``Not a directory: /a/file/runs``."""
    reason = exc.strerror or first_line(exc)
    if isinstance(exc, FileExistsError) and exc.filename and os.path.isfile(exc.filename):
        reason = "Not a directory"  # mkdir(parents=True) met a file where a folder should be
    return f"{reason}: {exc.filename}" if exc.filename else reason


def not_utf8(exc: UnicodeDecodeError) -> str:
    """Where text that should be UTF-8 is not, and the byte: ``not UTF-8 text (byte 1937: b'\\xe9')``."""
    return f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r})"


def is_oom(exc: BaseException, capped: bool = False) -> bool:
    """Whether ``exc`` is an allocation failure. Under a memory cap (``capped``), oneDNN's
    "could not create a primitive" counts too: it is how oneDNN reports a failed allocation
    (the same primitive is created without the cap); so do cuDNN's and cuBLAS's
    ``..._STATUS_ALLOC_FAILED``, a workspace they could not get under a GPU memory cap."""
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__
    text = str(exc).lower()
    if capped and ("could not create a primitive" in text or "status_alloc_failed" in text):
        return True
    return (name == "OutOfMemoryError" or "out of memory" in text or "can't allocate memory" in text
            or "not enough memory" in text)


def allocation_failed(exc: BaseException) -> str | None:
    """Where ``exc`` is memory not given (:func:`is_oom`), how much was asked for where it says so
    (``an allocation of 512,000,000,000,000 bytes``, else ``an allocation``); None for anything else."""
    import re

    if not is_oom(exc):
        return None
    asked = re.search(r"(?:tried to allocate|allocate) (\d+) bytes", str(exc))
    return f"an allocation of {int(asked[1]):,} bytes" if asked else "an allocation"


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler ending a job), raised where a Ctrl-C would be (see
    :func:`terminate`): a command stops as it does on Ctrl-C, its measuring child ended and what was
    being written written (until 0.8.9 it died where it stood, its child measuring on, orphaned)."""


_terminated: list[bool] = []


def terminate(signum: int, frame: Any) -> None:
    """The SIGTERM handler of the ``tracker`` command: :class:`Terminated`, and the process marked
    so (:func:`was_terminated`: its status is then 143, not a Ctrl-C's 130)."""
    _terminated.append(True)
    raise Terminated


def was_terminated() -> bool:
    """Whether this process was sent SIGTERM (see :func:`terminate`)."""
    return bool(_terminated)


@contextmanager
def sigint_handled(handler: Callable[[int, Any], Any] | signal.Handlers) -> Iterator[None]:
    """Ctrl-C goes to ``handler`` (a function, or ``signal.SIG_IGN`` to hold it) inside the block,
    then back to what it was. Off the main thread, or where whoever started the process chose to
    ignore SIGINT, nothing changes: Ctrl-C is not this code's to take."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _Held:
    """The signals one :func:`signals_deferred` block holds, and the handlers they are due to."""

    def __init__(self) -> None:
        self.signals: list[int] = []
        self.previous: dict[int, Callable[[int, Any], Any]] = {}

    def deliver(self) -> None:
        """Act on what is held, as its handler would have (SIGTERM's where both came): raises."""
        if self.signals:
            signum = signal.SIGTERM if signal.SIGTERM in self.signals else self.signals[0]
            self.signals.clear()
            self.previous[signum](signum, None)


_deferrals: list[_Held] = []


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held inside the block, then acted on once it has ended, as they would have
    been (a Ctrl-C's KeyboardInterrupt, the command's :class:`Terminated`): for a write that must be
    whole, a batch of runs logged to a SQL store (a second Ctrl-C there rolled the KILLED run of an
    interrupted job back, its steps lost, as the command said "what was logged before is kept", until
    0.9.8). :func:`act_on_held_signals` acts on them inside the block where nothing is half done (a
    store locked, waited on again). Off the main thread, or for a signal whose handler is not
    Python's (ignored, or the system's default), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = _Held()
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if callable(handler):
            held.previous[signum] = handler
            signal.signal(signum, lambda got, frame: held.signals.append(got))
    _deferrals.append(held)
    try:
        yield
    finally:
        _deferrals.pop()
        for signum, handler in held.previous.items():
            signal.signal(signum, handler)
    held.deliver()  # once the block has ended whole (an exception out of it goes on as it was)


def act_on_held_signals() -> None:
    """Inside :func:`signals_deferred`, where its work may stop with nothing half done: a signal held
    so far is acted on now (its KeyboardInterrupt raised here), not once the block ends."""
    if _deferrals and threading.current_thread() is threading.main_thread():
        _deferrals[-1].deliver()


def interrupted(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a Ctrl-C or was raised while one was handled. DuckDB turns a Ctrl-C during
    a query into an error ("Query interrupted", or "... failed: KeyboardInterrupt:" while it reads a
    registered Arrow table), and the next statement of its transaction then fails with another
    ("Current transaction is aborted") that hides the first."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "InterruptException":
            return True
        if str(exc) == "Query interrupted" or "KeyboardInterrupt" in str(exc):
            return True
        exc = exc.__context__
    return False


class TrackerError(Exception):
    """Base class: a problem the user can act on, reported as one line without a traceback."""


class SchemaError(TrackerError):
    """A run record breaks the schema of its kind (the message names the field)."""


class StoreError(TrackerError):
    """The tracking store cannot be used: unreachable, unsupported URI or schema version."""


class StoreLockedError(StoreError):
    """An embedded store's write lock stayed held by another process past every wait (its
    ``SqlStore.transaction``): nothing of the write was made."""


class NothingLoggedError(StoreError):
    """What a command that only reads asks for was never written: no embedded store in the folder,
    or no experiment of that name in the store."""


class ExperimentDeletedError(StoreError):
    """The store answered: the experiment named is deleted (MLflow's soft delete). Said, not taken
    for an unreachable server (its runs went to the outbox until 0.9.2)."""


class DamagedArtifactError(TrackerError):
    """A run's artifact that tracker reads back (its raw samples) is cut short or garbled: the run
    is shown, and compared, without it."""


class ConfigError(TrackerError):
    """A configuration file or option is malformed (the message names the key)."""


class OptionError(ConfigError):
    """A command-line option's (or argument's) value the command cannot take (out of its range, not of
    its form, empty), or options that do not go together: a usage error, said in one line with status
    2, as the command line's parser says its own (``--batch-size 0``); until 0.9.8 those tracker checks
    itself (``--threads 4096``, ``--ratios 150``) were 1, and until 0.9.10 some more (``report ""``,
    ``--mapping garbage``). What a file, the store or the machine holds is a ConfigError or another
    TrackerError, status 1."""


class TrackingUriError(OptionError, StoreError):
    """A tracking URI malformed on its face (blank, an unknown scheme, no server or database file named,
    credentials in it): what ``--tracking-uri`` (or MLFLOW_TRACKING_URI, its environment variable) was
    given, a usage error, status 2 (1 until 0.9.10). A StoreError too, as it was. A store that cannot
    be opened or reached is a StoreError, status 1."""


class DatasetSmallerThanBatchError(ConfigError):
    """A training job whose dataset holds fewer images than one batch (since 0.9.11): each step would
    train on all of them under the job's batch size, another configuration measured under its label.
    Refused before anything is measured: from ``profile training``, whose batch size is its job file's,
    a bad file's status 1 as any other bad value of it (since 0.9.12; a usage error, status 2, until
    then); a loader campaign ends that setting alone with it (``refused``), its batch size the file's or
    ``--batch-size``'s. ``detail`` is the line without the job file: the dataset, its images and the
    batch size."""

    def __init__(self, detail: str, where: str = "") -> None:
        super().__init__(f"{where}{detail}")
        self.detail = detail


class UnknownModelError(TrackerError):
    """A model name that the zoo does not know (the message suggests the closest names)."""


class MeasurementError(TrackerError):
    """A measurement could not be made (the run is recorded as failed with this reason)."""


class QueryError(TrackerError):
    """A SQL query on the warehouse failed (the message is DuckDB's)."""
