"""The ``tracker`` command: thin Typer commands over the library."""

from __future__ import annotations

import sys
import time

#: When this command started: the outbox files it wrote are those written since.
STARTED_S = time.time()

#: What any command stopped by Ctrl-C says when it says nothing more.
INTERRUPTED_LINE = "interrupted: what was logged before is kept\n"


def interrupted_line() -> str:
    """:data:`INTERRUPTED_LINE`, and where runs wait in the outbox (a write to a server cut short:
    the rest of its batch), that ``tracker sync`` sends them (unsaid until 0.9.2). The batches this
    command wrote only (every file in it, another server's too, until 0.9.4: said by a predict)."""
    try:
        from tracker.log.outbox import outbox_dir

        waiting = sum(1 for p in outbox_dir().glob("*.json") if p.stat().st_mtime >= STARTED_S - 1)
    except Exception:  # noqa: BLE001 - what is said on the way out never fails the way out
        waiting = 0
    if not waiting:
        return INTERRUPTED_LINE
    from tracker.console import counted

    return (INTERRUPTED_LINE.rstrip("\n") + f"; runs wait in the outbox ({counted(waiting, 'batch', 'batches')}: "
            "tracker sync sends them)\n")


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

        run()
    except KeyboardInterrupt:
        sys.stderr.write(interrupted_line())
        sys.exit(143 if was_terminated() else 130)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
