"""The ``tracker`` command: thin Typer commands over the library."""

from __future__ import annotations

import sys

#: What any command stopped by Ctrl-C says when it says nothing more.
INTERRUPTED_LINE = "interrupted: what was logged before is kept\n"


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
        sys.stderr.write(INTERRUPTED_LINE)
        sys.exit(143 if was_terminated() else 130)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
