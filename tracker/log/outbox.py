"""A local outbox for runs a tracking server could not take (unreachable, or refused).

Each failed batch becomes one JSON file in ``<runs dir>/outbox/``: the server it was meant
for, the experiment, and the validated records with their artifacts. ``tracker sync``
sends them when the server is back and removes each file only once its runs are written.
Records whose configuration the server already has (same config key and status) are not
sent twice. Credentials are never written here: they come from the environment at send time.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

from tracker.errors import StoreError
from tracker.log.record import KEY_TAG, REPEAT_KEY_TAG, FinalRecord
from tracker.settings import runs_dir

FORMAT = "tracker.outbox/1"


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


def spool(uri: str, experiment: str, records: list[FinalRecord], reason: str, folder: Path | None = None) -> Path:
    """Write one batch to the outbox atomically (write, then rename)."""
    folder = folder or outbox_dir()
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.json"
    body = {"format": FORMAT, "uri": strip_credentials(uri), "experiment": experiment, "reason": reason,
            "records": [_to_json(r) for r in records]}
    tmp = folder / f".{name}.tmp"
    tmp.write_text(json.dumps(body))
    os.replace(tmp, folder / name)
    return folder / name


def pending(folder: Path | None = None) -> list[Spooled]:
    folder = folder or outbox_dir()
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            body = json.loads(path.read_text())
        except json.JSONDecodeError:
            raise StoreError(f"outbox file {path} is not valid JSON; move it away to go on") from None
        if body.get("format") != FORMAT:
            raise StoreError(f"outbox file {path} has format {body.get('format')!r}, this tracker reads {FORMAT}")
        out.append(Spooled(path, body["uri"], body["experiment"], [_from_json(r) for r in body["records"]], body.get("reason", "")))
    return out


def spooled_keys(uri: str, experiment: str, kind: str | None = None, statuses: tuple[str, ...] = ("FINISHED",),
                 folder: Path | None = None, tag: str = KEY_TAG, having: str | None = None) -> set[str]:
    """Config keys (or another key ``tag``) of runs of this kind and status (carrying the tag
    ``having``, if given) waiting in the outbox for this server and experiment."""
    keys = set()
    for item in pending(folder):
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


def sync(uri: str | None = None, folder: Path | None = None) -> SyncReport:
    """Send every spooled batch (for ``uri`` only, if given); stop at the first failure."""
    from tracker.log.store import open_store
    from tracker.settings import resolve_location

    target = None if uri is None else strip_credentials(uri)
    items: list[Spooled] = []
    others: dict[str, int] = {}
    for item in pending(folder):
        if target is None or item.uri == target:
            items.append(item)
        else:
            others[item.uri] = others.get(item.uri, 0) + 1
    sent = skipped = done = 0
    stores: dict[str, Any] = {}
    try:
        for item in items:
            store = stores.get(item.uri) or stores.setdefault(item.uri, open_store(resolve_location(item.uri)))
            experiment = store.experiment(item.experiment, create=True)
            done_statuses = ("FINISHED", "FAILED")
            present = store.measured_keys(experiment, None, done_statuses)
            # A repeat of a configuration already there is new unless its own repeat key is there.
            repeats = any(REPEAT_KEY_TAG in r.tags for r in item.records)
            present_repeats = store.measured_keys(experiment, None, done_statuses, REPEAT_KEY_TAG) if repeats else set()
            skipped_ids = {r.run_id for r in item.records if (r.tags[REPEAT_KEY_TAG] in present_repeats
                                                               if REPEAT_KEY_TAG in r.tags
                                                               else r.tags.get(KEY_TAG) in present)}
            # A child whose parent is already on the server was written with it.
            todo = [r for r in item.records if r.run_id not in skipped_ids and r.parent_id not in skipped_ids]
            if todo:
                store.write(experiment, todo)
            sent += len(todo)
            skipped += len(item.records) - len(todo)
            item.path.unlink()
            done += 1
    finally:
        for store in stores.values():
            store.close()
    return SyncReport(files=len(items), sent=sent, skipped=skipped, left=len(items) - done, others=others)
