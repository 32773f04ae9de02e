"""In-process prediction time of one configuration, the champions loaded.

``tracker predict`` loads the ``champion`` fingerprint of every target (and with them the
in-memory feature warehouse), describes the network, then builds the configuration's feature
rows through the same SQL views as training and runs the boosters. That last part is timed
here (the ``predict_ms`` that ``tracker predict --format json`` reports): five zoo networks,
ten calls each, the very first call included.

Store: the one named as the first argument (e.g. after the 40-network CPU campaign of the
README, whose latency champion is a layer/network blend), predicting inference on ``cpu`` or
on the device or mode named second (``cpu-t1-retain``: a layer-level champion of format 4);
without one, a temporary store of perf4sight's TX2 data with a latency fingerprint trained
on it, predicting training on ``jetson-tx2`` (network-level champion).
Target: median under 50 ms.
Last line: {"median_ms": ..., "p90_ms": ..., "first_call_ms": ..., "load_s": ..., "fresh_process_s": {...}, ...}
"""

import os
import sys

# benchmarks/logging.py is named like the stdlib module: keep this folder off the import path.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

NETWORKS = ("resnet18", "mobilenet_v3_large", "mnasnet1_0", "squeezenet1_1", "regnet_y_400mf")
CALLS = 10
BATCH_SIZE = 8
TARGET_MS = 50.0
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "perf4sight-tx2"


def tx2_store(folder: Path) -> str:
    """A store of the TX2 data with a registered latency champion; returns its location."""
    from tracker.fingerprint.train import train
    from tracker.imports.perf4sight import DEVICE, import_perf4sight
    from tracker.log.logger import RunLogger
    from tracker.settings import resolve_location
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    if not DATA.is_dir():
        sys.exit(f"perf4sight data not found at {DATA}")
    runs = str(folder / "runs")
    logger = RunLogger(runs, experiment="perf4sight-tx2")
    import_perf4sight(logger, DATA)
    logger.close()
    load(folder / "w.duckdb", open_source(resolve_location(runs)))
    train(folder / "w.duckdb", "latency_ms", "training", DEVICE, resolve_location(runs).uri)
    return runs


def fresh_process_s(store: str, phase: str, device: str, cache: Path) -> dict[str, float]:
    """``tracker predict NETWORK`` as a command, a new process each time (imports, the champions'
    load and the description included), with an empty cache of its own: the first run describes
    the network and lists torchvision's names, the next two read them from the cache (0.8.8).
    Informational: the target above is the in-process prediction."""
    import subprocess

    env = {**os.environ, "TRACKER_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "tracker", "--tracking-uri", store, "predict", NETWORKS[0], "-b", str(BATCH_SIZE),
               "--phase", phase, "--device", device, "--format", "json"]
    took = []
    for _ in range(3):
        t0 = time.perf_counter()
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        took.append(time.perf_counter() - t0)
        if out.returncode != 0:
            sys.exit(f"error: tracker predict failed: {out.stderr.strip()[-500:]}")
    return {"first": round(took[0], 2), "cached": round(statistics.median(took[1:]), 2)}


def main() -> None:
    from tracker.fingerprint.predict import champions, predict
    from tracker.imports.perf4sight import DEVICE
    from tracker.errors import TrackerError
    from tracker.settings import resolve_location

    with tempfile.TemporaryDirectory() as tmp:
        if len(sys.argv) > 1:
            store, phase, device = sys.argv[1], "inference", sys.argv[2] if len(sys.argv) > 2 else "cpu"
            if "://" not in store and not (Path(store) / "mlflow.db").is_file():
                sys.exit(f"error: no embedded tracking store at {store} (a folder holding mlflow.db)")
        else:
            store, phase, device = tx2_store(Path(tmp)), "training", DEVICE
        uri = resolve_location(store).uri
        t0 = time.perf_counter()
        try:
            models = champions(uri, phase, device)
        except TrackerError as exc:
            sys.exit(f"error: {exc}")
        load_s = time.perf_counter() - t0
        times: list[float] = []
        for name in NETWORKS:
            for _ in range(CALLS):
                times.append(predict(uri, name, BATCH_SIZE, phase, device, models=models)["predict_ms"])
            print(json.dumps({"network": name, "first_ms": times[-CALLS], "median_ms": statistics.median(times[-CALLS:])}))
        fresh = fresh_process_s(store, phase, device, Path(tmp) / "cache")
    ordered = sorted(times)
    median = statistics.median(times)
    print(json.dumps({
        "store": store if len(sys.argv) > 1 else "temporary (perf4sight TX2)",
        "phase": phase, "device": device, "methods": {t: m.method for t, m in models.items()},
        "calls": len(times), "batch_size": BATCH_SIZE, "load_s": round(load_s, 2),
        "first_call_ms": round(times[0], 1), "median_ms": round(median, 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1), "max_ms": round(ordered[-1], 1),
        "target_ms": TARGET_MS, "meets_target": median < TARGET_MS,
        "fresh_process_s": fresh,
    }))


if __name__ == "__main__":
    main()
