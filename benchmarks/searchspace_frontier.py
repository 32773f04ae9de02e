"""How closely a predicted-latency frontier matches the measured one, and the device time saved.

On a temporary embedded store: measure 30 training networks, none of them a candidate, at
batch 1 on this CPU, load the warehouse and train the ``latency_ms`` fingerprint on them; then
fill the accuracy table of
``experiments/searchspace-digits.toml`` (27 candidates, the bundled digits) and its latency
table twice, measured by the profilers and predicted by the fingerprint, and compare the two
frontiers: the share of candidates kept or dropped alike, the Jaccard index of the two
frontiers, the device time of each latency table, how far each predicted latency is from the
measured one (MAPE and the count within 10 %), and how many predictions lay beyond the span the
fingerprint learnt from.

The training networks (first argument):
- ``around`` (default): drawn around the space, as a NAS user would cover it before trusting a
  predictor: the space's own positions and primitives, each position at a width of 0.5, 0.75,
  1.25 or 1.5 times its own (rounded to 8) and a depth of 1 to 3, seeded; none is a candidate.
- ``generated``: PerfSeer's generator (32x32 input, 10 classes): larger networks than the
  candidates (3.9 to 30 MFLOPs against 1.1 to 2.9), so every prediction extrapolates.

Target: agreement >= 0.9 and at least 10x less device time for the predicted table.
Usage: python benchmarks/searchspace_frontier.py [around|generated]
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
WIDTH_FACTORS = (0.5, 0.75, 1.25, 1.5)
SEED = 11


def around(space, count: int) -> list[dict]:  # noqa: ANN001
    """``count`` networks of the space's positions and primitives at other widths and depths."""
    import dataclasses
    import random

    from tracker.errors import TrackerError

    rng = random.Random(SEED)
    taken = {json.dumps(c.spec["stages"], sort_keys=True) for c in space.candidates()}
    specs: list[dict] = []
    while len(specs) < count:
        positions = [dataclasses.replace(p, width=max(8, 8 * round(p.width * rng.choice(WIDTH_FACTORS) / 8)),
                                         depth=rng.randint(1, 3), candidates=[rng.choice(p.candidates)])
                     for p in space.positions]
        try:
            spec = dataclasses.replace(space, name=f"{space.name}_around", positions=positions).candidates()[0].spec
        except TrackerError:  # a style this narrow cannot be built (inception's branches): draw again
            continue
        key = json.dumps(spec["stages"], sort_keys=True)
        if key not in taken:
            taken.add(key)
            spec["name"] = f"{space.name}_around-{len(specs):04d}"
            del spec["search_space"]  # a network drawn around the space, not one of its candidates
            specs.append(spec)
    return specs


def main() -> None:
    from tracker.fingerprint.train import train
    from tracker.log.logger import RunLogger
    from tracker.profile.api import profile_network
    from tracker.profile.stats import Stopping
    from tracker.searchspace.run import frontier_rows, report, run_space
    from tracker.searchspace.space import load_space
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source
    from tracker.zoo.generator import generate
    from tracker.zoo.spec import write_specs

    source = sys.argv[1] if len(sys.argv) > 1 else "around"
    if source not in ("around", "generated"):
        sys.exit(f"searchspace_frontier: training networks {source!r}: expected around or generated")
    space = load_space(ROOT / "experiments" / "searchspace-digits.toml")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        logger = RunLogger(str(tmp_path / "runs"), experiment="searchspace-bench")
        wh = tmp_path / "w.duckdb"
        t0 = time.perf_counter()
        drawn = (around(space, TRAINING_NETWORKS) if source == "around" else
                 generate(TRAINING_NETWORKS, seed=SEED, input_size=space.input_size, num_classes=space.num_classes))
        specs = write_specs(drawn, tmp_path / "train-nets")
        for path in specs:
            # in the mode the candidates are measured in ([latency] threads and allocator)
            profile_network(logger, str(path), 1, Stopping(time_cap_s=2.0), threads=space.latency.threads,
                            allocator=space.latency.allocator)
        load(wh, open_source(logger.location))
        fit = train(wh, "latency_ms", "inference", "cpu", logger.location.uri)
        print(f"fingerprint trained on {TRAINING_NETWORKS} {source} networks in {time.perf_counter() - t0:.0f} s: "
              f"held-out {json.dumps(fit.evaluation)}", file=sys.stderr)
        specs_dir = tmp_path / "candidates"
        acc = run_space(logger, space, specs_dir, "measured", skip_latency=True)
        measured = run_space(logger, space, specs_dir, "measured", skip_accuracy=True, time_cap_s=2.0)
        predicted = run_space(logger, space, specs_dir, "predicted", skip_accuracy=True)
        load(wh, open_source(logger.location))
        out = report(logger, wh, space, "predicted")
        cmp = out["comparison"]
        measured_ms = {r["model"]: r["latency_ms"] for r in frontier_rows(wh, space, "measured")}
        errors = [abs(c["latency_ms"] - measured_ms[c["name"]]) / measured_ms[c["name"]]
                  for c in out["candidates"] if c["name"] in measured_ms]
        for c in out["candidates"]:
            print(f"{c['name']:40s} acc {100 * c['accuracy']:.1f}  predicted {c['latency_ms']:.3f} ms  "
                  f"{'frontier' if c['on_frontier'] else ''}"
                  f"{'  beyond: ' + ','.join(c['outside_trained_range']) if c['outside_trained_range'] else ''}",
                  file=sys.stderr)
        ratio = cmp["measured_device_time_s"] / max(cmp["predicted_device_time_s"], 1e-9)
        result = {
            "training_networks": source, "candidates": cmp["candidates"], "accuracy_trained": acc.accuracy_done,
            "agreement": round(cmp["agreement"], 3), "jaccard": round(cmp["jaccard"], 3),
            "candidate_mape_pct": round(100 * sum(errors) / len(errors), 1),
            "candidates_within_10pct": sum(e <= 0.10 for e in errors),
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
