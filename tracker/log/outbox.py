"""A local outbox for runs a tracking server could not take (unreachable, or refused).

Each failed batch becomes one JSON file in ``<runs dir>/outbox/``: the server it was meant
for, the experiment, and the validated records with their artifacts. ``tracker sync``
sends them when the server is back and removes each file only once its runs are written.
Records whose configuration the server already has (same config key and status) are not
sent twice. Credentials are never written here: a server's come from the environment at send time, a
database's from the URI ``tracker --tracking-uri ... sync`` is given (since 0.9.3).

Since 0.9.0 every batch is written here first, as a journal (its writer's process id in it),
and removed once the server has it all: a process killed while it writes (SIGKILL, power)
leaves its batch here and not only a half-written run on the server. Each run sent to a
server carries the tag ``tracker.write`` (the batch's file name, then the record's id), so
that ``tracker sync`` finds what a cut-short write left, deletes the runs it left unfinished
and sends the rest, a layer run under its network run already there.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

from tracker.console import shell_word
from tracker.decode import loads_json
from tracker.errors import ExperimentDeletedError, StoreError, os_reason
from tracker.log.record import KEY_TAG, LAYERS_METRIC, REPEAT_KEY_TAG, FinalRecord
from tracker.settings import StoreLocation, runs_dir

FORMAT = "tracker.outbox/1"
#: The tag on every run sent to a server: ``<batch>/<record id>`` (the batch: its outbox file's stem).
WRITE_TAG = "tracker.write"


def outbox_dir() -> Path:
    return runs_dir() / "outbox"


def strip_credentials(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.username or parsed.password:
        host = parsed.hostname or ""
        if parsed.port:
            host = f"{host}:{parsed.port}"
        return urlunparse(parsed._replace(netloc=host))
    return uri


def _artifact(value: bytes | str | Path) -> dict[str, str]:
    if isinstance(value, Path):
        value = value.read_bytes()
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    return {"text": value}


def _unartifact(value: dict[str, str]) -> bytes | str:
    return base64.b64decode(value["base64"]) if "base64" in value else value["text"]


def _to_json(r: FinalRecord) -> dict[str, Any]:
    return {
        "run_id": r.run_id, "name": r.name, "params": r.params, "metrics": r.metrics,
        "history": {k: [list(p) for p in v] for k, v in r.history.items()}, "tags": r.tags, "status": r.status,
        "parent_id": r.parent_id, "artifacts": {k: _artifact(v) for k, v in r.artifacts.items()},
        "start_time_ms": r.start_time_ms, "end_time_ms": r.end_time_ms, "series_start_ms": r.series_start_ms,
    }


def _from_json(d: dict[str, Any]) -> FinalRecord:
    return FinalRecord(
        run_id=d["run_id"], name=d["name"], params=d["params"], metrics=d["metrics"],
        history={k: [(int(s), float(v)) for s, v in pts] for k, pts in d["history"].items()}, tags=d["tags"],
        status=d["status"], parent_id=d["parent_id"], artifacts={k: _unartifact(v) for k, v in d["artifacts"].items()},
        start_time_ms=d["start_time_ms"], end_time_ms=d["end_time_ms"], series_start_ms=d.get("series_start_ms"),
    )


@dataclass(frozen=True)
class Spooled:
    path: Path
    uri: str
    experiment: str
    records: list[FinalRecord]
    reason: str
    #: the process writing this batch to its server now (``host:pid``), if one is; None for a batch waiting
    writer: str | None = None

    @property
    def batch(self) -> str:
        return self.path.stem

    def being_written(self) -> bool:
        """Whether the process that journalled this batch is still alive on this host (writing it)."""
        if self.writer is None:
            return False
        host, _, pid = self.writer.rpartition(":")
        return host == socket.gethostname() and _alive(int(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def batch_name() -> str:
    """A new batch's name: its outbox file's stem, and the prefix of its runs' ``tracker.write`` tags."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def mark_batch(records: list[FinalRecord], batch: str) -> None:
    """Tag each record with its batch and its own id, as a server will keep them."""
    for r in records:
        r.tags[WRITE_TAG] = f"{batch}/{r.run_id}"


def spool(uri: str, experiment: str, records: list[FinalRecord], reason: str, folder: Path | None = None,
          batch: str | None = None, writer: bool = False) -> Path:
    """Write one batch to the outbox atomically (write, then rename; the same batch again replaces
    its file). ``writer``: journalled by this process, which writes it to the server now."""
    folder = folder or outbox_dir()
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{batch or batch_name()}.json"
    body = {"format": FORMAT, "uri": strip_credentials(uri), "experiment": experiment, "reason": reason,
            "records": [_to_json(r) for r in records]}
    if writer:
        body["writer"] = f"{socket.gethostname()}:{os.getpid()}"
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(body))
    os.replace(tmp, folder / name)
    return folder / name


def pending(folder: Path | None = None, skip_broken: bool = False, holding: str | None = None) -> list[Spooled]:
    """The batches waiting in the outbox, oldest first. A file that is not one is a StoreError
    naming it, or, with ``skip_broken`` (what counts the runs measured: a broken file, maybe for
    another store, blocked every measuring command until 0.9.2), left out. ``holding``: only the
    files whose text holds it (a config key, a run id), the others not parsed (a campaign measuring
    while its server is down asks once a configuration, of an outbox that grows with it)."""
    folder = folder or outbox_dir()
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:  # sent and removed by a sync since the folder was listed
            continue
        except OSError as exc:
            if not skip_broken:
                raise StoreError(f"cannot read outbox file {path}: {os_reason(exc)}") from None
            continue
        if holding is not None and holding.encode() not in raw:
            continue
        try:
            out.append(_read_spooled(path, raw))
        except StoreError:
            if not skip_broken:
                raise
    return out


def _read_spooled(path: Path, raw: bytes) -> Spooled:
    try:
        body = loads_json(raw.decode())
    except ValueError:  # not UTF-8 (a traceback until 0.9.2), decode.Undecodable (nested too deeply: until 0.9.15)
        raise StoreError(f"outbox file {path} is not valid JSON; move it away to go on") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        found = body.get("format") if isinstance(body, dict) else None
        raise StoreError(f"outbox file {path} has format {found!r}, this tracker reads {FORMAT}")
    try:
        return Spooled(path, body["uri"], body["experiment"], [_from_json(r) for r in body["records"]],
                       body.get("reason", ""), body.get("writer"))
    except (KeyError, TypeError, ValueError) as exc:  # a KeyError's traceback until 0.9.1
        raise StoreError(f"outbox file {path} is not a whole batch ({type(exc).__name__}: {exc}); move it away to "
                         "go on") from None


def spooled_run(uri: str, experiment: str, config_key: str, status: str = "FINISHED",
                folder: Path | None = None, having_metric: str | None = None) -> FinalRecord | None:
    """The newest run of this config key and status (that logged the metric ``having_metric``, if
    given) waiting in the outbox for this store and experiment (what a server down answers a request
    measured before with, since 0.9.3)."""
    target = strip_credentials(uri)
    found = [r for item in pending(folder, skip_broken=True, holding=config_key)
             if item.uri == target and item.experiment == experiment for r in item.records
             if r.tags.get(KEY_TAG) == config_key and r.status == status
             and (having_metric is None or having_metric in r.metrics)]
    # the newest by its start (files are named by the second they were written in, then at random: until
    # 0.9.23 the last file by name was taken for the newest, which two runs spooled in one second are not)
    return max(reversed(found), key=lambda r: r.start_time_ms, default=None)


def spooled_children(uri: str, run_id: str, folder: Path | None = None) -> list[FinalRecord] | None:
    """The FINISHED runs spooled under the run ``run_id`` (its layers, in their order), or None
    where that run is not in the outbox."""
    target = strip_credentials(uri)
    for item in pending(folder, skip_broken=True, holding=run_id):
        if item.uri == target and any(r.run_id == run_id for r in item.records):
            return [r for r in item.records if r.parent_id == run_id and r.status == "FINISHED"]
    return None


def spooled_keys(uri: str, experiment: str, kind: str | None = None, statuses: tuple[str, ...] = ("FINISHED",),
                 folder: Path | None = None, tag: str = KEY_TAG, having: str | None = None) -> set[str]:
    """Config keys (or another key ``tag``) of runs of this kind and status (carrying the tag
    ``having``, if given) waiting in the outbox for this server and experiment."""
    keys = set()
    for item in pending(folder, skip_broken=True):  # a broken file: said once by RunLogger, not blocking
        if item.uri == strip_credentials(uri) and item.experiment == experiment:
            keys |= {r.tags.get(tag, "") for r in item.records
                     if r.status in statuses and (kind is None or r.tags.get("tracker.kind") == kind)
                     and (having is None or having in r.tags)}
    return keys - {""}


@dataclass(frozen=True)
class SyncReport:
    files: int
    sent: int
    skipped: int
    left: int
    #: outbox files spooled for other servers than the one synced (server URI: files), not sent
    others: dict[str, int] = field(default_factory=dict)
    #: outbox files a live process is writing to the server now (left to it)
    busy: int = 0
    #: unfinished runs a write cut short had left on the server, deleted before their batch was sent again
    discarded: int = 0



def _claim(path: Path) -> int | None:
    """An open descriptor of ``path`` holding its exclusive lock (flock), or None where another
    process holds it or the file has gone (sent and removed) since it was read."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino != os.stat(path).st_ino:  # replaced since it was opened
            raise FileNotFoundError(path)
    except OSError:  # locked by another sync (BlockingIOError), or gone
        os.close(fd)
        return None
    return fd


def _without_credentials(exc: StoreError, location: Any, item: Spooled) -> StoreError:
    """Where a database refused the URI the outbox kept without its credentials, the line says
    how to give them; any other failure as it was (a database that is down said so too until 0.9.9,
    pointing at credentials where none were asked for)."""
    asked = any(word in str(exc).lower() for word in ("password", "authentication"))
    if asked and location.uri == item.uri and not (location.is_http or location.is_sqlite):  # a database server's
        return StoreError(f"{exc} (outbox file {item.path} keeps no credentials: give the URI with them, "
                          f"tracker --tracking-uri {shell_word(_with_user(item.uri))} sync)")
    return exc


def _with_user(uri: str) -> str:
    parsed = urlparse(uri)
    return urlunparse(parsed._replace(netloc=f"USER:PASSWORD@{parsed.netloc}"))


def _location(item: Spooled, uri: str | None) -> StoreLocation:
    """Where ``item`` goes: the store ``uri`` names (the command line's), else the one its file names;
    a file's URI that is malformed is the file's fault, a StoreError, not a usage error (status 1)."""
    from tracker.errors import TrackingUriError
    from tracker.settings import resolve_location

    if uri is not None:
        return resolve_location(uri)
    try:
        return resolve_location(item.uri)
    except TrackingUriError as exc:
        raise StoreError(f"outbox file {item.path}: {exc}; move it away to go on") from None


def sync(uri: str | None = None, folder: Path | None = None) -> SyncReport:
    """Send every spooled batch (for ``uri`` only, if given, opened by it with its credentials);
    stop at the first failure."""
    from tracker.log.store import open_store

    target = None if uri is None else strip_credentials(uri)
    items: list[Spooled] = []
    others: dict[str, int] = {}
    busy = 0
    for item in pending(folder):
        if target is not None and item.uri != target:
            others[item.uri] = others.get(item.uri, 0) + 1
        elif item.being_written():
            busy += 1
        else:
            items.append(item)
    sent = skipped = done = discarded = elsewhere = 0
    stores: dict[str, Any] = {}
    claimed: int | None = None
    try:
        for item in items:
            # Claimed while it is sent: a second sync at once sent the same batch again until 0.9.2
            claimed = _claim(item.path)
            if claimed is None:  # another sync sends it now (left to it), or has sent it
                busy += item.path.exists()
                elsewhere += 1
                continue
            # The URI given, with its credentials (the file keeps none): until 0.9.3 the file's own was
            # opened, and a database's batch could not be sent, its password being left out of it.
            location = _location(item, uri)
            if location.is_sqlite and location.db_path is not None and not location.db_path.is_file():
                # an embedded store moved or deleted since: a new empty one was made there until 0.9.1
                raise StoreError(f"outbox file {item.path} is for the store {location.db_path.parent}, which is not "
                                 "there (moved or deleted?): put it back, or move the file away to go on")
            try:
                store = stores.get(item.uri) or stores.setdefault(item.uri, open_store(location))
                experiment = store.experiment(item.experiment, create=True)
            except ExperimentDeletedError as exc:  # the file unnamed until 0.9.2
                raise ExperimentDeletedError(f"outbox file {item.path}: {exc}; or move the file away to go on") from None
            except StoreError as exc:
                raise _without_credentials(exc, location, item) from None
            done_statuses = ("FINISHED", "FAILED")
            # What a write of this batch cut short left: its finished runs stay (their ids map a
            # child's parent), its unfinished ones go, to be sent whole again.
            written = store.batch_runs(experiment, item.batch) if any(WRITE_TAG in r.tags for r in item.records) else {}
            unfinished = [server_id for server_id, status in written.values() if status not in done_statuses]
            if unfinished:
                store.delete_runs(unfinished)
                discarded += len(unfinished)
            on_server = {rid: server_id for rid, (server_id, status) in written.items() if status in done_statuses}
            # Already there: a run of its key with its own status (until 0.9.2 of either status, so a
            # measurement was dropped where the server had a failure of its configuration).
            present = {status: store.measured_keys(experiment, None, (status,)) for status in done_statuses}
            # A repeat of a configuration already there is new unless its own repeat key is there.
            repeats = any(REPEAT_KEY_TAG in r.tags for r in item.records)
            present_repeats = ({status: store.measured_keys(experiment, None, (status,), REPEAT_KEY_TAG)
                                for status in done_statuses} if repeats else {})
            parents = {r.parent_id for r in item.records if r.parent_id}

            def there(r: FinalRecord) -> bool:
                if r.run_id in on_server:
                    return True
                if REPEAT_KEY_TAG in r.tags:
                    return r.tags[REPEAT_KEY_TAG] in present_repeats.get(r.status, set())
                if r.tags.get(KEY_TAG) not in present.get(r.status, set()):
                    return False
                if r.run_id in parents:  # measured with its layers: the server's run answers only with its own
                    existing = store.find_run(experiment, r.tags[KEY_TAG], r.status)  # (dropped until 0.9.2)
                    return existing is not None and LAYERS_METRIC in existing.metrics
                return True

            skipped_ids = {r.run_id for r in item.records if there(r)}
            # A child whose parent is already on the server was written with it, unless this
            # batch's own write of that parent is there and the child's is not (a write cut short).
            todo = [r for r in item.records
                    if r.run_id not in skipped_ids and (r.parent_id not in skipped_ids or r.parent_id in on_server)]
            if todo:
                store.write(experiment, todo, on_server)
            sent += len(todo)
            skipped += len(item.records) - len(todo)
            item.path.unlink()
            done += 1
            os.close(claimed)
            claimed = None
    finally:
        if claimed is not None:
            os.close(claimed)
        for store in stores.values():
            store.close()
    return SyncReport(files=len(items) - elsewhere, sent=sent, skipped=skipped, left=len(items) - elsewhere - done,
                      others=others, busy=busy, discarded=discarded)
