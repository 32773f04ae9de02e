"""tracker's cache on disk: what one process worked out and a later one reads back instead of
working it out again (MLflow's empty schema, torchvision's list of networks, descriptions of
networks, torch's starting thread count). Each entry is named after everything it depends on, so
a changed input is another entry, never a stale one. A cache that cannot be written or read is
only slower: every function here falls back to "not cached" and says nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any

from tracker.decode import loads_json


def cache_dir() -> Path:
    """tracker's cache: ``TRACKER_CACHE_DIR``, else ``$XDG_CACHE_HOME/tracker``, else ``~/.cache/tracker``."""
    if env := os.environ.get("TRACKER_CACHE_DIR"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracker"


def read_json(name: str) -> Any | None:
    """The JSON of the cache entry ``name`` (a path under :func:`cache_dir`), None where it is
    missing or unreadable (a partial file is never there: :func:`write_json` replaces whole).
    An entry read is marked used (its time), so that trimming takes those used least lately."""
    path = cache_dir() / name
    try:
        value = loads_json(path.read_text())
    except (OSError, ValueError):
        return None
    with suppress(OSError):  # a cache one may read but not write is read all the same
        os.utime(path)
    return value


#: a partial file (``.NAME.PID.new``) older than this was left by a writer that was killed between
#: writing and replacing: trimming removes it (a live writer's is a second old at most)
STALE_PARTIAL_S = 3600.0


def write_json(name: str, value: Any, keep: int | None = None) -> None:
    """Write the cache entry ``name`` whole or not at all (another process writing the same entry
    at once writes the same content). ``keep``: the most entries its folder holds; past it, down to
    three quarters of it, those used least lately (written or read) go; and partial files that
    killed writers left (older than :data:`STALE_PARTIAL_S`) go whenever it is given."""
    path = cache_dir() / name
    partial = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(value))
        os.replace(partial, path)
    except OSError:
        with suppress(OSError):
            partial.unlink(missing_ok=True)
        return
    if keep is not None:
        _trim(path.parent, keep)


def _trim(folder: Path, keep: int) -> None:
    with suppress(OSError):
        entries, stale = [], []
        now = time.time()
        for p in folder.iterdir():
            if p.suffix == ".json" and not p.name.startswith("."):
                entries.append(p)
            elif p.name.startswith(".") and p.suffix == ".new":
                with suppress(OSError):
                    if now - p.stat().st_mtime > STALE_PARTIAL_S:
                        stale.append(p)
        aged = sorted(entries, key=lambda p: p.stat().st_mtime) if len(entries) > keep else []
        for path in stale + aged[: max(0, len(entries) - keep * 3 // 4)]:
            with suppress(OSError):
                path.unlink(missing_ok=True)


@cache
def package_version(name: str) -> str:
    """An installed distribution's version, read from its metadata (without importing it), once a
    process: every description's entry names torch's and torchvision's."""
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


@cache
def source_digest(*packages: str) -> str:
    """A digest of the Python sources of tracker's subpackages ``packages`` (``describe``,
    ``zoo``): an entry made by other code than this process runs is another entry."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted((root / package).glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
