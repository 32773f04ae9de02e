"""The ``tracker`` command: thin Typer commands over the library."""

from __future__ import annotations

import sys

#: What any command stopped by Ctrl-C says when it says nothing more.
INTERRUPTED_LINE = "interrupted: what was logged before is kept\n"


def main() -> None:
    """The console script. A Ctrl-C while typer and the commands load (the first half-second)
    says the same one line, with status 130, as one during a command."""
    try:
        from tracker.cli.app import main as run
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED_LINE)
        sys.exit(130)
    run()
