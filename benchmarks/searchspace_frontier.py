"""How closely a predicted-latency frontier matches the measured one, and the device time saved.

On a temporary embedded store: measure 30 generated networks (PerfSeer's generator, 32x32
input, 10 classes, none of them a candidate) at batch 1 on this CPU, load the warehouse and
train the ``latency_ms`` fingerprint on them; then fill the accuracy table of
``experiments/searchspace-digits.toml`` (27 candidates, the bundled digits) and its latency
table twice, measured by the profilers and predicted by the fingerprint, and compare the two
frontiers: the share of candidates kept or dropped alike, the Jaccard index of the two
frontiers, the device time of each latency table, and how many predictions lay beyond the
span the fingerprint learnt from.

Target: agreement >= 0.9 and at least 10x less device time for the predicted table.
Last line: {"candidates": 27, "agreement": ..., "jaccard": ..., "measured_device_time_s": ..., ...}
"""

import os
import sys

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRAINING_NETWORKS = 30


def main() -> None:
    from tracker.fingerprint.train import train
    from tracker.log.logger import RunLogger
    from tracker.profile.api import profile_network
    from tracker.profile.stats import Stopping
    from tracker.searchspace.run import report, run_space
    from tracker.searchspace.space import load_space
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source
    from tracker.zoo.generator import generate
    from tracker.zoo.spec import write_specs

    space = load_space(ROOT / "experiments" / "searchspace-digits.toml")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        logger = RunLogger(str(tmp_path / "runs"), experiment="searchspace-bench")
        wh = tmp_path / "w.duckdb"
        t0 = time.perf_counter()
        specs = write_specs(generate(TRAINING_NETWORKS, seed=11, input_size=space.input_size,
                                     num_classes=space.num_classes), tmp_path / "train-nets")
        for path in specs:
            profile_network(logger, str(path), 1, Stopping(time_cap_s=2.0))
        load(wh, open_source(logger.location))
        fit = train(wh, "latency_ms", "inference", "cpu", logger.location.uri)
        print(f"fingerprint trained on {TRAINING_NETWORKS} generated networks in {time.perf_counter() - t0:.0f} s: "
              f"held-out {json.dumps(fit.evaluation)}", file=sys.stderr)
        specs_dir = tmp_path / "candidates"
        acc = run_space(logger, space, specs_dir, "measured", skip_latency=True)
        measured = run_space(logger, space, specs_dir, "measured", skip_accuracy=True, time_cap_s=2.0)
        predicted = run_space(logger, space, specs_dir, "predicted", skip_accuracy=True)
        load(wh, open_source(logger.location))
        out = report(logger, wh, space, "predicted")
        cmp = out["comparison"]
        for c in out["candidates"]:
            print(f"{c['name']:40s} acc {100 * c['accuracy']:.1f}  predicted {c['latency_ms']:.3f} ms  "
                  f"{'frontier' if c['on_frontier'] else ''}"
                  f"{'  beyond: ' + ','.join(c['outside_trained_range']) if c['outside_trained_range'] else ''}",
                  file=sys.stderr)
        ratio = cmp["measured_device_time_s"] / max(cmp["predicted_device_time_s"], 1e-9)
        result = {
            "candidates": cmp["candidates"], "accuracy_trained": acc.accuracy_done,
            "agreement": round(cmp["agreement"], 3), "jaccard": round(cmp["jaccard"], 3),
            "measured_frontier": cmp["measured_frontier"], "predicted_frontier": cmp["predicted_frontier"],
            "measured_device_time_s": round(cmp["measured_device_time_s"], 2),
            "predicted_device_time_s": round(cmp["predicted_device_time_s"], 3),
            "device_time_ratio": round(ratio, 1), "latency_failed": measured.failed + predicted.failed,
            "predicted_beyond_trained_range": len(predicted.extrapolated),
            "meets_target": cmp["agreement"] >= 0.9 and ratio >= 10,
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
