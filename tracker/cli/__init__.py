"""The ``tracker`` command: thin Typer commands over the library."""

from __future__ import annotations

import sys
import time

#: When this command started: the outbox files it wrote are those written since.
STARTED_S = time.time()

#: What any command stopped by Ctrl-C says when it says nothing more.
INTERRUPTED_LINE = "interrupted: what was logged before is kept\n"


def outbox_note() -> str:
    """Where runs this command wrote wait in the outbox (a write to a server cut short), what to add
    to a line saying it was interrupted; else nothing."""
    try:
        from tracker.log.outbox import outbox_dir

        waiting = sum(1 for p in outbox_dir().glob("*.json") if p.stat().st_mtime >= STARTED_S - 1)
    except Exception:  # noqa: BLE001 - what is said on the way out never fails the way out
        waiting = 0
    if not waiting:
        return ""
    from tracker.console import counted

    return f"; runs wait in the outbox ({counted(waiting, 'batch', 'batches')}: tracker sync sends them)"


def interrupted_line() -> str:
    """:data:`INTERRUPTED_LINE`, and where runs wait in the outbox (a write to a server cut short:
    the rest of its batch), that ``tracker sync`` sends them (unsaid until 0.9.2). The batches this
    command wrote only (every file in it, another server's too, until 0.9.4: said by a predict)."""
    return INTERRUPTED_LINE.rstrip("\n") + outbox_note() + "\n"


#: The status of a command whose output was cut off by its reader (``tracker runs show RUN | head -1``):
#: 128 + SIGPIPE, what the shell says of any program a closed pipe ended (``yes | head -1``), and what
#: a Python program that leaves SIGPIPE to its default ends with. Not 0: the output was not all written.
BROKEN_PIPE = 141


def stdout_closed() -> bool:
    """Whether standard output is a pipe its reader has closed (the system reports an error on its
    writing end), or was put on the null device after a write to one failed (rich's way)."""
    import os
    import select

    try:
        fd = sys.__stdout__.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(events & select.POLLERR for _, events in poller.poll(0)):
            return True
        null, out = os.stat(os.devnull), os.fstat(fd)
        return (out.st_rdev, out.st_ino) == (null.st_rdev, null.st_ino)
    except (AttributeError, OSError, ValueError):  # no stdout, or one that is not a file
        return False


def broken_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` ends a command because its standard output was closed: a BrokenPipeError
    (what was buffered, written as the command ends), or the status 1 click and rich exit with, in
    silence, once a write to a closed pipe failed (1, and nothing on stderr, until 0.9.8)."""
    if isinstance(exc, SystemExit):
        exc = exc.__context__ if exc.code == 1 else None  # type: ignore[assignment]
    return isinstance(exc, BrokenPipeError) and stdout_closed()


def end_quietly_on_broken_pipe() -> None:
    """Python's "Note on SIGPIPE" (the signal module's docs): the rest of the output goes to the null
    device, so that the interpreter's own flush at exit does not fail once more; status 141."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
    except (AttributeError, OSError, ValueError):
        pass
    sys.exit(BROKEN_PIPE)


def main() -> None:
    """The console script: a Ctrl-C during a command, or while typer and the commands load (its
    first half-second), is one line and status 130. Once the command has ended, a Ctrl-C is
    ignored: the interpreter's shutdown (about a second after ``fingerprint train``, in native
    code) would otherwise end with signal 2 or Python's "Exception ignored" lines, after the
    command's work was done and said."""
    import signal
    import threading

    from tracker.errors import terminate, was_terminated

    signal.signal(signal.SIGTERM, terminate)
    try:
        from tracker.cli.app import main as run

        try:
            run()
        finally:  # what is buffered, written while a closed pipe can still be said quietly
            if sys.stdout is not None:
                sys.stdout.flush()
    except KeyboardInterrupt:
        sys.stderr.write(interrupted_line())
        sys.exit(143 if was_terminated() else 130)
    except BaseException as exc:  # a reader that closed the pipe (`| head -1`): once for every command
        if broken_pipe(exc):
            end_quietly_on_broken_pipe()
        raise
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        say_network_threads()


def say_network_threads() -> None:
    """Where a network file of the user's (``describe ./net.py:Net``) started a thread that is no
    daemon and still runs, the command ends without waiting for it (it waited, forever for a server's
    or a sleeping one's, until 0.9.8), and says so on stderr."""
    if "tracker.zoo.spec" not in sys.modules:  # no network file was built by this command
        return
    from tracker.zoo.spec import release_network_threads

    if left := release_network_threads():
        try:
            sys.stderr.write(f"note: a network file left {'a thread' if len(left) == 1 else 'threads'} running, "
                             f"{', '.join(left)}: tracker ends without waiting for {'it' if len(left) == 1 else 'them'}\n")
        except (OSError, ValueError):
            pass
