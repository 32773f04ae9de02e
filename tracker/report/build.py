"""``tracker report DIR``: the warehouse drawn as PNG files, each also logged on the run it describes.

What is drawn, and where each picture is logged (under ``report/`` in the run's artifacts):

- ``batch/<family>-<phase>-<device>.png``: latency and peak memory against batch size, one
  line per network of a family, the first out-of-memory batch marked; logged on each
  network's largest-batch run of that chain.
- ``layers/<model>-bs<N>-<run>.png``: the slowest layers of a network timed alone and the
  time per operator type; logged on the network run that holds the layer runs.
- ``fingerprints/<name>-v<version>.png``: held-out predicted against measured values of each
  registered fingerprint version (training logs the same picture on the version's run).
- ``loaders/<model>-<dataset>-<device>.png``: the data-wait share per loader setting;
  logged on the fastest setting's run. Two folders of one name (``<dataset>`` is the format and
  the folder's name) are a picture each, named with a digest of their folder.
- ``pareto/<space>-<source>.png``: a search space's accuracy-latency frontier (``tracker
  searchspace report`` logs it on its own run).
- ``speed/<mode>.png``: the machine's speed over time in a device mode, the speed probe timed
  beside each measurement (since 0.9.10; logged on no run).

An ``index.html`` lists every picture with a caption. Rows come from the warehouse's views
(``latest_measurements``, ``oom_boundary``, ``layer_latency``, ``data_loading``,
``searchspace_candidates``, ``whole_network_runs``) with bound parameters only.

Drawing is most of a report's time (about 10 s for the demo's 63 pictures here), so a picture
is keyed by what it is drawn from (its rows, title and the drawing module's source): the folder's
``MANIFEST`` records each picture's key and the runs it was logged on, and a picture whose key
and file are unchanged is neither drawn nor logged again on those runs. A picture the previous
report wrote and this one does not draw (a layer breakdown past the ``MAX_LAYER_PLOTS`` newest, a
deleted run or fingerprint version) is removed from the folder.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from tracker.console import counted
from tracker.decode import loads_json
from tracker.errors import StoreError, TrackerError, interrupted

#: Most layer breakdowns drawn: the latest network runs with layers come first.
MAX_LAYER_PLOTS = 40
#: In the report folder: each picture's key and the runs it was logged on (see the module's doc).
MANIFEST = ".tracker-report.json"
#: The page that lists the pictures.
INDEX = "index.html"
MANIFEST_FORMAT = 1


@dataclass
class Picture:
    path: str  # relative to the report folder
    caption: str
    run_ids: list[str]  # the runs it is logged on (none: written to the folder only)
    draw: Callable[..., bytes] = field(repr=False)
    args: tuple[Any, ...] = field(default=(), repr=False)  # what ``draw`` is called with
    drawn: bool = False  # drawn by this report (not kept from the previous one)

    @property
    def key(self) -> str:
        """Digest of what the picture is drawn from: the drawing function, its module's source and its arguments."""
        h = hashlib.sha256(_source_digest(self.draw.__module__))
        h.update(json.dumps([self.draw.__qualname__, self.caption, self.args], default=str, sort_keys=True).encode())
        return h.hexdigest()[:32]


@lru_cache(maxsize=None)
def _source_digest(module_name: str) -> bytes:
    """Digest of a drawing module's source, read once per process (every picture's key holds it)."""
    module = sys.modules[module_name]
    source = Path(module.__file__).read_bytes() if getattr(module, "__file__", None) else b""
    return hashlib.sha256(source).digest()


class ReportInterrupted(KeyboardInterrupt):
    """A Ctrl-C (or SIGTERM) that stopped :func:`build_report`: what it had done by then is kept, each
    picture whole, and the folder's manifest says so, so that the same command, run again, draws and
    logs only the rest."""

    def __init__(self, drawn: int, logged: int) -> None:
        super().__init__()
        self.drawn, self.logged = drawn, logged


@dataclass
class Report:
    folder: Path
    pictures: list[Picture]
    logged: int
    log_errors: list[str]
    removed: int = 0  # pictures of the previous report not drawn any more
    # what was left out of the pictures, a line each (measurements that timed another speed probe version)
    left_out: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for p in self.pictures:
            kinds[p.path.split("/")[0]] = kinds.get(p.path.split("/")[0], 0) + 1
        drawn = sum(p.drawn for p in self.pictures)
        return {"folder": str(self.folder), "pictures": len(self.pictures), "by_kind": kinds, "drawn": drawn,
                "unchanged": len(self.pictures) - drawn, "removed": self.removed, "logged": self.logged,
                "index": str(self.folder / INDEX), "log_errors": self.log_errors, "left_out": self.left_out}


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "x"


def _rows(con: Any, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or {})
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def group_of(model: str) -> str:
    """What a network is drawn with: a zoo network alone, a pruned or generated one with its family."""
    from tracker.fingerprint.dataset import family
    from tracker.zoo.torchvision_zoo import all_models

    return model if model in all_models() else family(model)


class ChainKey(NamedTuple):
    """What one line of a batch picture is: a network at an input size, a phase, device, mode and
    number format, under one memory cap (None: the device's own memory)."""

    model: str
    model_hash: str
    phase: str
    device_name: str
    mode: str | None
    precision: str
    input_size: int | None
    memory_limit_mb: float | None

    @property
    def boundary(self) -> tuple:
        """Its key in ``oom_boundary``."""
        return (self.model_hash, self.phase, self.device_name, self.mode, self.precision, self.memory_limit_mb)


def _cap_words(cap_mb: float | None) -> str:
    return "no cap" if cap_mb is None else f"cap +{cap_mb:,.0f} MB"


def _line_label(key: ChainKey, modes: bool, sizes: bool, caps: bool = False) -> str:
    """A chain's label: its network, and its input size, mode and memory cap where the picture has
    several of them (two lines of one name were told apart by nothing until 0.8.9), its number
    format if not float32."""
    return (key.model + (f" {key.input_size} px" if sizes and key.input_size else "")
            + (f" ({key.mode or 'no mode'})" if modes else "") + ("" if key.precision == "float32" else f" {key.precision}")
            + (f", {_cap_words(key.memory_limit_mb)}" if caps else ""))


def batch_pictures(con: Any) -> list[Picture]:
    from tracker.report.plots import batch_scaling_png

    # Training jobs (with a data loader) are drawn per loader setting, not along batch sizes.
    # a chain of batch sizes is one network, phase, device, mode and number format (precision), under
    # one memory cap: a cap's out-of-memory batch is drawn on its own line (since 0.9.0; before, the
    # smallest under any cap was drawn on a line measured under another)
    rows = _rows(con, "SELECT run_id, model, model_hash, CAST(input_size AS BIGINT) AS input_size, phase, device_name, "
                      "mode, COALESCE(precision, 'float32') AS precision, CAST(memory_limit_mb AS DOUBLE) AS memory_limit_mb, "
                      "batch_size, latency_ms, peak_mem_mb, latency_ci_rel "
                      "FROM latest_measurements WHERE run_id NOT IN "
                      "(SELECT run_id FROM training_runs WHERE data_wait_frac IS NOT NULL) "
                      "ORDER BY model, input_size, phase, device_name, mode, precision, memory_limit_mb, batch_size")
    # the smallest batch that ran out of memory under each memory cap
    boundaries = _rows(con, "SELECT any_value(model) AS model, model_hash, CAST(any_value(input_size) AS BIGINT) AS input_size, "
                            "phase, device_name, mode, COALESCE(precision, 'float32') AS precision, "
                            "CAST(memory_limit_mb AS DOUBLE) AS cap_mb, CAST(min(smallest_oom_batch) AS BIGINT) AS batch "
                            "FROM oom_boundary WHERE smallest_oom_batch IS NOT NULL "
                            "GROUP BY model_hash, phase, device_name, mode, precision, memory_limit_mb")
    ooms = {(r["model_hash"], r["phase"], r["device_name"], r["mode"], r["precision"], r["cap_mb"]): r["batch"]
            for r in boundaries}
    chains: dict[ChainKey, list[dict[str, Any]]] = {}
    for r in rows:
        chains.setdefault(ChainKey(r["model"], r["model_hash"], r["phase"], r["device_name"], r["mode"], r["precision"],
                                   r["input_size"], r["memory_limit_mb"]), []).append(r)
    # a cap under which no batch fitted: its cross alone (since 0.9.1; such a boundary was drawn nowhere)
    for r in boundaries:
        key = ChainKey(r["model"], r["model_hash"], r["phase"], r["device_name"], r["mode"], r["precision"],
                       r["input_size"], r["cap_mb"])
        chains.setdefault(key, [])
    groups: dict[tuple[str, str, str], list[tuple[ChainKey, list[dict[str, Any]]]]] = {}
    for key, chain in chains.items():
        if len(chain) < 2 and key.boundary not in ooms:
            continue  # one batch size and no boundary: nothing to draw
        groups.setdefault((group_of(key.model), key.phase, str(key.device_name)), []).append((key, chain))
    pictures = []
    for (fam, phase, device), members in sorted(groups.items()):
        members.sort(key=lambda m: (m[0].model, m[0].input_size or 0, m[0].mode or "", m[0].precision,
                                    m[0].memory_limit_mb or 0.0))
        modes, sizes = {m[0].mode for m in members}, {m[0].input_size for m in members}
        caps = {m[0].memory_limit_mb for m in members}
        lines = []
        for key, chain in members:
            lines.append({"label": _line_label(key, len(modes) > 1, len(sizes) > 1, len(caps) > 1),
                          "batch_sizes": [r["batch_size"] for r in chain], "latency_ms": [r["latency_ms"] for r in chain],
                          "peak_mem_mb": [r["peak_mem_mb"] for r in chain],
                          "latency_ci_rel": [r["latency_ci_rel"] for r in chain], "oom_batch": ooms.get(key.boundary),
                          "oom_cap_mb": key.memory_limit_mb})
        # what every line shares is said once, in the title; what tells them apart, in their labels
        # an imported run's mode may be unknown: left unsaid ("mode None" until 0.9.5)
        title = (f"{fam}: {phase} on {device}" + (f", mode {next(iter(modes))}" if len(modes) == 1 and
                                                  next(iter(modes)) else "")
                 + (f", {next(iter(sizes))} px" if len(sizes) == 1 and next(iter(sizes)) else "")
                 + (f", {_cap_words(next(iter(caps)))}" if len(caps) == 1 and next(iter(caps)) is not None else ""))
        path = f"batch/{slug(fam)}-{phase}-{slug(device)}.png"
        # networks counted once, and lines apart where one network has several (another cap, size or mode;
        # "for 2 networks" of one network with and without a cap until 0.9.6)
        named = {m[0].model for m in members}
        drawn = counted(len(named), "network") + ("" if len(members) == len(named) else
                                                   f" ({counted(len(members), 'line')})")
        caption = (f"{title}: latency and peak memory against batch size for {drawn}"
                   + (", out-of-memory batches marked" if any(l["oom_batch"] for l in lines) else ""))
        # One file; on MLflow, on the largest-batch run of each network of the family.
        pictures.append(Picture(path, caption, [chain[-1]["run_id"] for _, chain in members if chain], batch_scaling_png,
                                (title, lines)))
    return pictures


def layer_pictures(con: Any) -> list[Picture]:
    from tracker.report.plots import layer_breakdown_png

    runs = _rows(con, "SELECT network_run_id, any_value(model) AS model, any_value(batch_size) AS batch_size, "
                      "any_value(device) AS device, any_value(network_latency_ms) AS network_ms, "
                      "max(r.end_time) AS end_time "
                      "FROM layer_latency JOIN runs r ON r.run_id = network_run_id "
                      "GROUP BY network_run_id ORDER BY end_time DESC LIMIT $n", {"n": MAX_LAYER_PLOTS})
    pictures = []
    for run in runs:
        layers = _rows(con, "SELECT layer_name, op_type, latency_ms FROM layer_latency WHERE network_run_id = $id "
                            "ORDER BY layer_index", {"id": run["network_run_id"]})
        title = f"{run['model']} bs{run['batch_size']} {run['device']}"
        path = f"layers/{slug(run['model'])}-bs{run['batch_size']}-{run['network_run_id'][:8]}.png"
        pictures.append(Picture(path, f"{title}: layer-wise latency breakdown ({len(layers)} layers timed alone)",
                                [run["network_run_id"]], layer_breakdown_png, (title, layers, float(run["network_ms"]))))
    return pictures


def loader_pictures(con: Any) -> list[Picture]:
    from tracker.report.plots import data_wait_png

    rows = _rows(con, "SELECT * FROM data_loading ORDER BY model, dataset, data_path NULLS FIRST, device, mode, "
                      "input_size, num_workers, prefetch_factor, batch_size")
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for r in rows:  # one picture per dataset and device mode: a job's threads and allocator change its step time
        # a dataset is its folder (data_path, since 0.9.8; two folders of one name were one picture, the
        # older's bars hidden); a job logged before then has its dataset alone ("" sorts it first)
        groups.setdefault((r["model"], str(r["dataset"]), r["data_path"] or "", r["mode"] or r["device"]), []).append(r)
    # datasets of one name (format:folder name) in one picture's place: each said by its folder
    places = Counter((model, dataset, mode) for model, dataset, _, mode in groups)
    pictures = []
    for (model, dataset, folder, mode), settings in sorted(groups.items()):
        shared = places[model, dataset, mode] > 1
        name = Path(dataset).name
        if shared and folder:  # imagefolder:/data/a/shapes, its file named with its folder's digest
            name = f"{dataset.split(':', 1)[0]}:{folder}" if ":" in dataset else folder
        # a setting is its loader settings at one input size: sizes apart, each labelled with its own where
        # the picture has several and said in the title where it has one, as batch pictures' lines are
        # (until 0.9.8 a 64 and a 128 px job of one loader setting were two bars of one label, drawn over
        # each other, and the picture was logged on the first size's fastest run alone)
        sizes = {s["input_size"] for s in settings}
        for s in settings:
            s["label"] = ((f"{s['input_size']} px · " if len(sizes) > 1 and s["input_size"] else "")
                          + f"workers {s['num_workers']} · prefetch {s['prefetch_factor']} · bs{s['batch_size']}")
        size = next(iter(sizes))
        title = f"{model} on {name} ({mode})" + (f", {size} px" if len(sizes) == 1 and size else "")
        digest = f"-{hashlib.sha256(folder.encode()).hexdigest()[:8]}" if shared and folder else ""
        # the fastest setting of each input size (data_loading's is_best); none where every job was its
        # set-up step alone (a StopIteration, no report, until 0.9.8)
        best = [s["run_id"] for s in settings if s["is_best"]]
        pictures.append(Picture(f"loaders/{slug(model)}-{slug(Path(dataset).name)}{digest}-{slug(mode)}.png",
                                f"{title}: share of step time waiting for data per loader setting"
                                + (f", at {len(sizes)} input sizes" if len(sizes) > 1 else ""),
                                best, data_wait_png, (title, settings)))
    return pictures


def speed_pictures(con: Any, left_out: list[str] | None = None) -> list[Picture]:
    """A picture per device mode whose measurements timed this tracker's speed probe (its
    ``PROBE_VERSION``): the machine's speed over time, which a fingerprint's labels are put at (the
    median) and ``runs compare`` weighs. A measurement that timed another version of the probe timed
    another workload, another unit: left out of the picture (every version's probes were drawn on one
    axis until 0.9.12), its caption saying how many; each mode's such measurements are also said, in a
    line, in ``left_out`` (where given), which the report prints and its page shows, a mode with no
    measurement of this version (so no picture) included."""
    from tracker.profile.probe import PROBE_VERSION
    from tracker.report.plots import machine_speed_png

    rows = _rows(con, "SELECT COALESCE(mode, device) AS mode, end_time, speed_probe_ms, speed_probe_version "
                      "FROM whole_network_runs WHERE status = 'FINISHED' AND speed_probe_ms > 0 "
                      "ORDER BY mode, end_time, run_id")
    modes: dict[str, list[dict[str, Any]]] = {}
    others: dict[str, Counter] = {}
    for r in rows:
        version = r.pop("speed_probe_version")
        if version == PROBE_VERSION:
            modes.setdefault(str(r["mode"]), []).append(r)
        else:  # another version's probe, or one whose version goes unsaid: another unit
            others.setdefault(str(r["mode"]), Counter())["unsaid" if version is None else str(version)] += 1
    pictures = []
    for mode in sorted(set(modes) | set(others)):
        runs, other = modes.get(mode, []), others.get(mode)
        what = ""
        if other:
            versions = sorted(v for v in other if v != "unsaid")
            which = (" and ".join(([f"speed probe version {', '.join(versions)}"] if versions else [])
                                  + (["a probe of no version said"] if "unsaid" in other else [])))
            what = (f"{counted(sum(other.values()), 'measurement')} in mode {mode} timed {which}, not this "
                    f"tracker's version {PROBE_VERSION}: another unit, left out of "
                    + (f"speed/{slug(mode)}.png" if runs else "the report (no measurement of this version there to draw)"))
            if left_out is not None:
                left_out.append(what)
        if runs:
            pictures.append(Picture(
                f"speed/{slug(mode)}.png",
                f"{mode}: the machine's speed over time, the speed probe (version {PROBE_VERSION}) beside each of "
                f"{counted(len(runs), 'measurement')}"
                + (f"; {counted(sum(other.values()), 'measurement')} of another probe version left out" if other else ""),
                [], machine_speed_png, (f"{mode}: the speed probe (version {PROBE_VERSION}) beside each measurement", runs)))
    return pictures


def pareto_pictures(con: Any) -> list[Picture]:
    from tracker.searchspace.plot import pareto_png

    # each candidate's current version (an edited space's old ones are drawn no more, since 0.9.7)
    rows = _rows(con, "SELECT * FROM searchspace_candidates WHERE current ORDER BY ALL")  # the rows' order keys the picture (unordered, it was redrawn now and then until 0.9.3)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["search_space"], r["latency_source"]), []).append(r)
    pictures = []
    for (space, source), members in sorted(groups.items()):
        measured = groups.get((space, "measured")) if source == "predicted" else None
        pictures.append(Picture(f"pareto/{slug(space)}-{source}.png",
                                f"{space}: accuracy against {source} latency, Pareto frontier joined up",
                                [], pareto_png, (space, members, source, measured)))
    return pictures


def fingerprint_pictures(tracking_uri: str) -> list[Picture]:
    """One picture per registered fingerprint version, from the held-out predictions it logged."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    from tracker.fingerprint.dataset import family
    from tracker.fingerprint.served import made_by_train
    from tracker.log.artifacts import downloaded
    from tracker.log.search import every_model_version, every_registered_model
    from tracker.report.plots import predicted_vs_measured_png

    client = MlflowClient(tracking_uri)
    pictures = []
    versions = every_model_version(client)
    for model in every_registered_model(client):
        aliases = {str(v): a for a, v in (model.aliases or {}).items()}
        for version in sorted(versions.get(model.name, []), key=lambda v: int(v.version)):
            if not made_by_train(version.tags):  # registered otherwise: another run's figures (drawn until 0.9.2)
                continue
            try:
                with downloaded(tracking_uri, version.run_id, "evaluation/heldout_predictions.csv") as local:
                    held = pd.read_csv(local)
            except Exception:  # noqa: BLE001 - a version logged by something else has no such file
                continue
            alias = aliases.get(str(version.version))
            title = f"{model.name} v{version.version}" + (f" ({alias})" if alias else "")
            unit = version.tags.get("unit", "")
            args = (title, held["measured"].tolist(), held["predicted"].tolist(), [family(m) for m in held["model"]], unit)
            pictures.append(Picture(f"fingerprints/{slug(model.name)}-v{version.version}.png",
                                    f"{title}: held-out predicted against measured", [], predicted_vs_measured_png, args))
    return pictures


def write_index(folder: Path, pictures: list[Picture], left_out: list[str] = ()) -> None:
    """The page listing ``pictures`` by kind, each with its caption, and what was left out of them
    (``left_out``, a line each: ``Report.left_out``) under its own heading."""
    sections = {"batch": "Latency and memory against batch size", "layers": "Layer-wise latency",
                "fingerprints": "Fingerprints: predicted against measured", "loaders": "Data loading",
                "pareto": "Search-space Pareto frontiers", "speed": "The machine's speed"}  # on no section, so not on the page, until 0.9.12
    parts = ["<!doctype html><meta charset='utf-8'><title>tracker report</title>",
             "<style>body{font-family:sans-serif;margin:2em}figure{display:inline-block;margin:1em}"
             "img{max-width:900px;border:1px solid #ccc}</style><h1>tracker report</h1>"]
    for key, heading in sections.items():
        mine = [p for p in pictures if p.path.startswith(key + "/")]
        if not mine:
            continue
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts += [f"<figure><img src='{html.escape(p.path)}' alt='{html.escape(p.caption)}'>"
                  f"<figcaption>{html.escape(p.caption)}</figcaption></figure>" for p in mine]
    if left_out:
        parts.append("<h2>Left out</h2><ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in left_out) + "</ul>")
    if not pictures:
        parts.append("<p>Nothing to draw yet: measure something, then run tracker report again.</p>")
    from tracker.files import write_whole

    write_whole(folder / INDEX, "\n".join(parts) + "\n")


def build_report(warehouse: Path, folder: Path, tracking_uri: str, log: bool = True) -> Report:
    """Draw everything the warehouse holds into ``folder``; with ``log``, attach each picture
    to the run it describes. A picture that cannot be logged is reported, never fatal."""
    from tracker.warehouse.load import connect_loaded
    from tracker.files import write_whole

    if not warehouse.exists():
        raise TrackerError(f"no warehouse at {warehouse}: run tracker warehouse load first")
    if log:  # a store moved or copied from elsewhere: its runs' pictures would go to the original's folder
        from tracker.log.relocate import moved_message, old_roots
        from tracker.settings import resolve_location

        location = resolve_location(tracking_uri)
        if old := sorted(old_roots(location)):
            raise StoreError(moved_message(location, old[0]) + " (or draw without logging: --no-log)")
    if folder.exists() and not folder.is_dir():
        raise TrackerError(f"{folder} exists and is not a folder")
    for name in (MANIFEST, INDEX):  # found once the pictures were drawn (until 0.9.6)
        if (folder / name).is_dir():
            raise TrackerError(f"{folder / name} is a folder: the report writes its {name} there; move it away")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrackerError(f"cannot make the report folder {folder}: {exc.strerror}") from None
    drawn, logged = 0, 0
    left_out: list[str] = []
    before: dict[str, dict[str, Any]] | None = None
    now: dict[str, dict[str, Any]] = {}
    try:
        con = connect_loaded(warehouse)
        try:
            pictures = (batch_pictures(con) + layer_pictures(con) + loader_pictures(con) + pareto_pictures(con)
                        + speed_pictures(con, left_out))
        finally:
            con.close()
        pictures += fingerprint_pictures(tracking_uri)
        before = read_manifest(folder)
        for p in pictures:
            key, target, kept = p.key, folder / p.path, before.get(p.path, {})
            if kept.get("key") != key or not target.is_file():
                p.drawn, kept = True, {}
                target.parent.mkdir(parents=True, exist_ok=True)
                write_whole(target, p.draw(*p.args))  # whole or not at all: a Ctrl-C in it too (cut short until 0.9.8)
                drawn += 1
            # runs that hold this very picture already (under this tracking URI)
            held = set(kept.get("logged_on", {}).get(tracking_uri, []))
            now[p.path] = {"key": key, "logged_on": {tracking_uri: sorted(held & set(p.run_ids))}}
        removed = 0
        for path in set(before) - set(now):  # written by the previous report, not drawn by this one
            stale = folder / path
            if stale.is_file() and stale.resolve().is_relative_to(folder.resolve()):
                stale.unlink()
                removed += 1
        write_index(folder, pictures, left_out)
        errors: list[str] = []
        if log:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri)
            for p in pictures:  # the file in the folder is logged as it is (report/<its name> on the run)
                done = now[p.path]["logged_on"][tracking_uri]
                for run_id in p.run_ids:
                    if run_id in done:
                        continue
                    try:
                        client.log_artifact(run_id, str(folder / p.path), "report")
                        logged += 1
                        done.append(run_id)
                    except Exception as exc:  # noqa: BLE001 - one run that cannot take it does not stop the rest
                        if interrupted(exc):
                            raise
                        errors.append(f"{p.path} on run {run_id}: {str(exc).splitlines()[0][:200]}")
    except BaseException as exc:
        if not interrupted(exc):
            raise
        if before is not None:  # what was drawn and logged, said for the next report (until 0.9.8 drawn and logged again)
            write_manifest(folder, {**before, **now})
        raise ReportInterrupted(drawn, logged) from None
    write_manifest(folder, now)
    return Report(folder, pictures, logged, errors, removed, left_out)


def report_counts(d: dict[str, Any]) -> str:
    """What a report did, from its ``to_dict``: "12 drawn, 51 unchanged, 2 removed; 30 logged on their runs"."""
    removed = f", {d['removed']} removed" if d["removed"] else ""
    return f"{d['drawn']} drawn, {d['unchanged']} unchanged{removed}; {d['logged']} logged on their runs"


def read_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """The previous report's pictures (path: key and runs logged on); none where there is no
    manifest or one this tracker cannot read (every picture is then drawn again)."""
    try:
        data = loads_json((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT or not isinstance(data.get("pictures"), dict):
        return {}
    return data["pictures"]


def write_manifest(folder: Path, pictures: dict[str, dict[str, Any]]) -> None:
    from tracker.files import write_whole

    write_whole(folder / MANIFEST, json.dumps({"format": MANIFEST_FORMAT, "pictures": pictures}, indent=1, sort_keys=True))
