"""Files written whole: a reader never finds one cut short (a Ctrl-C, a full disk in the write)."""
from __future__ import annotations

import contextlib
from pathlib import Path


def write_whole(path: Path, text: str | bytes) -> None:
    """``text`` (UTF-8) or bytes as ``path``, whole or not at all: written to a temporary file beside
    it, then put in its place (``os.replace``). A Ctrl-C or a full disk in a write left the file empty
    or cut short until 0.9.7, which the same command, run again, refused as "another network of that name"."""
    import os
    import tempfile

    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as write_text made it (mkstemp's is 0600)
        with os.fdopen(fd, "wb") as file:
            file.write(text if isinstance(text, bytes) else text.encode("utf-8"))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
