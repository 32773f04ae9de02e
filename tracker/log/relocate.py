"""An embedded store moved or copied to another folder, and ``tracker store relocate``.

MLflow keeps absolute artifact paths in the database: each experiment's artifact location,
each run's artifact URI, each logged model's and registered model version's storage location.
Moved or copied with its folder (``runs/``, or the project around it), a store still names the
old folder: its new runs and fingerprints would write their artifacts there, recreating it if it
is gone, and a copy would write into the original's. So a command that writes refuses such a
store in one line, and ``tracker store relocate`` rewrites those paths to the store's own
``artifacts`` folder, in one transaction, once it has checked that the artifacts came along.

Only tracker's own layout counts as moved: the experiment's artifacts in
``OLD/artifacts/<experiment id>`` where ``OLD`` is not this store's folder and either is gone or
holds a database of the same name (the original of a copy). A store that MLflow itself made
(``./mlruns``) or whose artifacts were put elsewhere on purpose is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.console import shell_word
from tracker.errors import StoreError, StoreLockedError, first_line
from tracker.settings import StoreLocation, local_path, mlflow_path, redacted, sqlite_read_only

#: The columns that hold absolute artifact paths, per table (MLflow's schema, pinned).
PATH_COLUMNS = (
    ("experiments", "artifact_location"),
    ("runs", "artifact_uri"),
    ("logged_models", "artifact_location"),
    ("model_versions", "storage_location"),
    ("model_versions", "source"),
)


@dataclass(frozen=True)
class Relocation:
    """What ``relocate`` changed: the old artifacts folder, the new one, and rows per column."""

    old_root: str
    new_root: str
    rows: dict[str, int]


def _local(uri: str) -> Path | None:
    """An absolute local path the location names (as MLflow reads it), else None."""
    path = local_path(uri)
    return path if path is not None and path.is_absolute() else None


def _prefixes(old: Path, new: Path) -> dict[str, str]:
    """Each way a path under ``old`` may be written in MLflow's tables, and how it is written under
    ``new``: a plain path as tracker gives MLflow one (``%`` escaped) or as written before that
    was done, and a ``file:`` URI, percent-encoded or not."""
    return {f"{mlflow_path(old)}/": f"{mlflow_path(new)}/", f"{old}/": f"{mlflow_path(new)}/",
            f"{old.as_uri()}/": f"{new.as_uri()}/", f"file://{old}/": f"{new.as_uri()}/"}


def moved_from(location: StoreLocation, artifact_location: str) -> Path | None:
    """The artifacts folder of the place this embedded store was moved or copied from, when
    this experiment's artifacts still lie there; None when they are the store's own."""
    if not location.is_sqlite or not location.artifact_root:
        return None
    path = _local(artifact_location)
    here = Path(location.artifact_root)
    if path is None or path.parent.name != "artifacts" or path.parent == here:
        return None
    old_folder = path.parent.parent
    if not old_folder.exists() or (old_folder / location.db_path.name).is_file():
        return path.parent
    return None


def moved_message(location: StoreLocation, old_root: Path) -> str:
    return (f"this store ({location.db_path.parent}) was moved or copied from {old_root.parent}: its artifacts "
            f"would go to {old_root}; run `tracker --tracking-uri {shell_word(location.db_path.parent)} store relocate` "
            f"to keep them in {location.artifact_root}")


def require_here(location: StoreLocation, artifact_location: str) -> None:
    """Raise before anything is measured or written when the experiment's artifacts would go elsewhere."""
    old = moved_from(location, artifact_location)
    if old is not None:
        raise StoreError(moved_message(location, old))


def old_roots(location: StoreLocation) -> set[Path]:
    """Every moved-from artifacts folder the store's experiments still name."""
    import sqlite3
    from contextlib import closing

    if not location.is_sqlite or not location.db_path.is_file():
        return set()
    try:
        with closing(sqlite3.connect(sqlite_read_only(location.db_path), uri=True)) as conn:
            found = {moved_from(location, row[0]) for row in conn.execute("SELECT artifact_location FROM experiments")}
    except sqlite3.Error as exc:  # a store cut short, or unreadable: said as the commands that read it say it
        raise StoreError(f"cannot read tracking database {redacted(location.uri)}: {first_line(exc)}") from None
    return {p for p in found if p is not None}


def relocate(location: StoreLocation) -> list[Relocation]:
    """Point every path under a moved-from artifacts folder at this store's own, in one transaction."""
    import sqlalchemy

    from tracker.log.sql_store import SqlStore

    if not location.is_sqlite:
        raise StoreError(f"{location.uri} is not an embedded store: a tracking server keeps its own artifact paths")
    location.require()
    store = SqlStore(location)
    try:
        # opened as every command opens it: a store cut short, read-only or not MLflow's is one line, said
        # as they say it (tracebacks until 0.9.8)
        store.schema_version()
        roots = old_roots(location)
        if not roots:
            return []
        new_root = Path(str(location.artifact_root))
        with store.reading() as conn:  # beside a writer, without its lock
            try:
                uris = [row[0] for row in conn.execute(sqlalchemy.text("SELECT artifact_uri FROM runs"))]
            except sqlalchemy.exc.DatabaseError as exc:
                raise StoreError(f"cannot read tracking database {store.name}: {first_line(exc.orig)}") from None
        for old in sorted(roots):
            under = [p for p in (_local(u) for u in uris) if p is not None and old in p.parents]
            there = sum(1 for p in under if (new_root / p.relative_to(old)).exists())
            if under and not there and any(p.exists() for p in under):
                raise StoreError(f"{new_root} holds none of the artifacts of the {len(under)} runs kept in {old}: "
                                 f"copy that folder to {new_root} first (nothing was changed)")
            # a copy in part: the runs whose artifacts are still at the old place and not here (taken until 0.9.2)
            missing = [p for p in under if p.exists() and not (new_root / p.relative_to(old)).exists()]
            if missing:
                raise StoreError(f"{new_root} lacks the artifacts of {len(missing)} of the {len(under)} runs kept in {old} "
                                 f"(such as {missing[0].relative_to(old)}): copy them too first (nothing was changed)")

        def rewrite(conn: Any) -> list[Relocation]:
            done = []
            for old in sorted(roots):
                rows: dict[str, int] = {}
                for table, column in PATH_COLUMNS:
                    count = 0
                    for prefix, target in _prefixes(old, new_root).items():
                        result = conn.execute(sqlalchemy.text(
                            f"UPDATE {table} SET {column} = :new || substr({column}, :n + 1) "
                            f"WHERE substr({column}, 1, :n) = :old"), {"old": prefix, "new": target, "n": len(prefix)})
                        count += result.rowcount
                    if count:
                        rows[f"{table}.{column}"] = count
                done.append(Relocation(str(old), str(new_root), rows))
            return done

        try:  # one wait for the lock (BUSY_TIMEOUT_S), not a logger's twenty: someone is waiting for the answer
            return store.transaction(rewrite, attempts=1)
        except sqlalchemy.exc.DatabaseError as exc:  # a page cut short met by the rewrite: rolled back
            raise StoreError(f"cannot write tracking database {store.name}: {first_line(exc.orig)} (nothing was "
                             "changed)") from None
        except StoreLockedError:
            raise StoreLockedError(f"tracking store {store.db_path} is locked by another process (a command writing to "
                                   "it, or an open MLflow UI's write): nothing was changed; run store relocate again "
                                   "once it is done") from None
    finally:
        store.close()
