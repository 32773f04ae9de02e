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
  logged on the fastest setting's run.
- ``pareto/<space>-<source>.png``: a search space's accuracy-latency frontier (``tracker
  searchspace report`` logs it on its own run).

An ``index.html`` lists every picture with a caption. Rows come from the warehouse's views
(``latest_measurements``, ``oom_boundary``, ``layer_latency``, ``data_loading``,
``searchspace_candidates``) with bound parameters only.
"""

from __future__ import annotations

import html
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker.errors import TrackerError

#: Most layer breakdowns drawn: the latest network runs with layers come first.
MAX_LAYER_PLOTS = 40


@dataclass
class Picture:
    path: str  # relative to the report folder
    caption: str
    run_ids: list[str]  # the runs it is logged on (none: written to the folder only)
    data: bytes = field(default=b"", repr=False)


@dataclass
class Report:
    folder: Path
    pictures: list[Picture]
    logged: int
    log_errors: list[str]

    def to_dict(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for p in self.pictures:
            kinds[p.path.split("/")[0]] = kinds.get(p.path.split("/")[0], 0) + 1
        return {"folder": str(self.folder), "pictures": len(self.pictures), "by_kind": kinds, "logged": self.logged,
                "index": str(self.folder / "index.html"), "log_errors": self.log_errors}


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


def batch_pictures(con: Any) -> list[Picture]:
    from tracker.report.plots import batch_scaling_png

    # Training jobs (with a data loader) are drawn per loader setting, not along batch sizes.
    rows = _rows(con, "SELECT run_id, model, model_hash, phase, device_name, mode, batch_size, latency_ms, peak_mem_mb "
                      "FROM latest_measurements WHERE run_id NOT IN "
                      "(SELECT run_id FROM training_runs WHERE data_wait_frac IS NOT NULL) "
                      "ORDER BY model, phase, device_name, mode, batch_size")
    ooms = {(r["model_hash"], r["phase"], r["device_name"], r["mode"]): r["smallest_oom_batch"]
            for r in _rows(con, "SELECT model_hash, phase, device_name, mode, "  # under any memory cap
                                "CAST(min(smallest_oom_batch) AS BIGINT) AS smallest_oom_batch FROM oom_boundary "
                                "GROUP BY model_hash, phase, device_name, mode")}
    chains: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        chains.setdefault((r["model"], r["model_hash"], r["phase"], r["device_name"], r["mode"]), []).append(r)
    groups: dict[tuple[str, str, str], list[tuple[tuple, list[dict[str, Any]]]]] = {}
    for key, chain in chains.items():
        oom = ooms.get(key[1:])
        if len(chain) < 2 and oom is None:
            continue  # one batch size and no boundary: nothing to draw
        groups.setdefault((group_of(key[0]), key[2], str(key[3])), []).append((key, chain))
    pictures = []
    for (fam, phase, device), members in sorted(groups.items()):
        members.sort(key=lambda m: m[0][0])
        lines = [{"label": key[0] + ("" if len({m[0][4] for m in members}) == 1 else f" ({key[4]})"),
                  "batch_sizes": [r["batch_size"] for r in chain], "latency_ms": [r["latency_ms"] for r in chain],
                  "peak_mem_mb": [r["peak_mem_mb"] for r in chain], "oom_batch": ooms.get(key[1:])}
                 for key, chain in members]
        title = f"{fam}: {phase} on {device}"
        data = batch_scaling_png(title, lines)
        path = f"batch/{slug(fam)}-{phase}-{slug(device)}.png"
        caption = (f"{title}: latency and peak memory against batch size for {len(members)} network(s)"
                   + (", out-of-memory batches marked" if any(l["oom_batch"] for l in lines) else ""))
        # One file; on MLflow, on the largest-batch run of each network of the family.
        pictures.append(Picture(path, caption, [chain[-1]["run_id"] for _, chain in members], data))
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
        data = layer_breakdown_png(title, layers, float(run["network_ms"]))
        path = f"layers/{slug(run['model'])}-bs{run['batch_size']}-{run['network_run_id'][:8]}.png"
        pictures.append(Picture(path, f"{title}: layer-wise latency breakdown ({len(layers)} layers timed alone)",
                                [run["network_run_id"]], data))
    return pictures


def loader_pictures(con: Any) -> list[Picture]:
    from tracker.report.plots import data_wait_png

    rows = _rows(con, "SELECT * FROM data_loading ORDER BY model, dataset, device, mode, num_workers, prefetch_factor, "
                      "batch_size")
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:  # one picture per device mode: a job's threads and allocator change its step time
        groups.setdefault((r["model"], str(r["dataset"]), r["mode"] or r["device"]), []).append(r)
    pictures = []
    for (model, dataset, mode), settings in sorted(groups.items()):
        for s in settings:
            s["label"] = f"workers {s['num_workers']} · prefetch {s['prefetch_factor']} · bs{s['batch_size']}"
        title = f"{model} on {Path(dataset).name} ({mode})"
        best = next(s for s in settings if s["is_best"])
        pictures.append(Picture(f"loaders/{slug(model)}-{slug(Path(dataset).name)}-{slug(mode)}.png",
                                f"{title}: share of step time waiting for data per loader setting",
                                [best["run_id"]], data_wait_png(title, settings)))
    return pictures


def pareto_pictures(con: Any) -> list[Picture]:
    from tracker.searchspace.plot import pareto_png

    rows = _rows(con, "SELECT * FROM searchspace_candidates")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["search_space"], r["latency_source"]), []).append(r)
    pictures = []
    for (space, source), members in sorted(groups.items()):
        measured = groups.get((space, "measured")) if source == "predicted" else None
        pictures.append(Picture(f"pareto/{slug(space)}-{source}.png",
                                f"{space}: accuracy against {source} latency, Pareto frontier joined up",
                                [], pareto_png(space, members, source, measured)))
    return pictures


def fingerprint_pictures(tracking_uri: str) -> list[Picture]:
    """One picture per registered fingerprint version, from the held-out predictions it logged."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    from tracker.fingerprint.dataset import family
    from tracker.log.artifacts import downloaded
    from tracker.report.plots import predicted_vs_measured_png

    client = MlflowClient(tracking_uri)
    pictures = []
    for model in client.search_registered_models():
        aliases = {str(v): a for a, v in (model.aliases or {}).items()}
        for version in sorted(client.search_model_versions(f"name = '{model.name}'"), key=lambda v: int(v.version)):
            try:
                with downloaded(tracking_uri, version.run_id, "evaluation/heldout_predictions.csv") as local:
                    held = pd.read_csv(local)
            except Exception:  # noqa: BLE001 - a version logged by something else has no such file
                continue
            alias = aliases.get(str(version.version))
            title = f"{model.name} v{version.version}" + (f" ({alias})" if alias else "")
            unit = version.tags.get("unit", "")
            data = predicted_vs_measured_png(title, held["measured"], held["predicted"],
                                             [family(m) for m in held["model"]], unit)
            pictures.append(Picture(f"fingerprints/{slug(model.name)}-v{version.version}.png",
                                    f"{title}: held-out predicted against measured", [], data))
    return pictures


def write_index(folder: Path, pictures: list[Picture]) -> None:
    sections = {"batch": "Latency and memory against batch size", "layers": "Layer-wise latency",
                "fingerprints": "Fingerprints: predicted against measured", "loaders": "Data loading",
                "pareto": "Search-space Pareto frontiers"}
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
    if not pictures:
        parts.append("<p>Nothing to draw yet: measure something, then run tracker report again.</p>")
    (folder / "index.html").write_text("\n".join(parts) + "\n")


def build_report(warehouse: Path, folder: Path, tracking_uri: str, log: bool = True) -> Report:
    """Draw everything the warehouse holds into ``folder``; with ``log``, attach each picture
    to the run it describes. A picture that cannot be logged is reported, never fatal."""
    from tracker.warehouse.load import connect

    if not warehouse.exists():
        raise TrackerError(f"no warehouse at {warehouse}: run tracker warehouse load first")
    if folder.exists() and not folder.is_dir():
        raise TrackerError(f"{folder} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrackerError(f"cannot make the report folder {folder}: {exc.strerror}") from None
    con = connect(warehouse, read_only=True)
    try:
        pictures = batch_pictures(con) + layer_pictures(con) + loader_pictures(con) + pareto_pictures(con)
    finally:
        con.close()
    pictures += fingerprint_pictures(tracking_uri)
    for p in pictures:
        (folder / p.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / p.path).write_bytes(p.data)
    write_index(folder, pictures)
    logged, errors = 0, []
    if log:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri)
        with tempfile.TemporaryDirectory() as tmp:
            for p in pictures:
                local = Path(tmp) / Path(p.path).name
                local.write_bytes(p.data)
                for run_id in p.run_ids:
                    try:
                        client.log_artifact(run_id, str(local), "report")
                        logged += 1
                    except Exception as exc:  # noqa: BLE001 - one run that cannot take it does not stop the rest
                        errors.append(f"{p.path} on run {run_id}: {str(exc).splitlines()[0][:200]}")
    return Report(folder, pictures, logged, errors)
