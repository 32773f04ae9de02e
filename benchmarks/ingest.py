"""Warehouse load speed: full load of 100,000 runs, incremental load of 1,000, and a baseline.

Builds an embedded store of 100,000 runs (a realistic mix: network runs each with 7 nested
layer runs, training runs, a few FAILED ones; about 10 params, 8 metrics and 6 tags each),
then times, into fresh DuckDB files:
- a full ``tracker warehouse load`` (ADBC read of the SQLite store, Arrow into DuckDB, typed
  tables, network descriptions, views);
- an incremental load after 1,000 more runs were logged;
- the baseline: ``mlflow.search_runs`` over all runs into a DataFrame, then into DuckDB.
Peak memory is the resident set high-water mark of this process during the full load.
Targets: full <= 30 s, >= 10x faster than the baseline, incremental <= 2 s, peak < 2 GB.
Last line: {"full_load_s": ..., "incremental_load_s": ..., "baseline_s": ..., "ratio": ..., ...}
"""

import os
import sys

# benchmarks/logging.py is named like the stdlib module: keep this folder off the import path.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import json  # noqa: E402
import resource  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

RUNS = 100_000
INCREMENT = 1_000
LAYERS_PER_NETWORK = 7
ENV = {"env.host": "bench-host", "env.threads": "2"}


def make_records(n: int, seed: int) -> list:
    from tracker.log.record import RunRecord

    records: list = []
    common = dict(device="cpu", precision="float32", mode="cpu-t2")
    i = 0
    while len(records) < n:
        i += 1
        model, bs = f"net{seed}-{i}", 2 ** (i % 6)
        if i % 10 == 0:  # training runs
            r = RunRecord(
                kind="training", name=f"{model} · train · bs{bs}",
                params=dict(model=model, model_hash=f"{seed:04d}{i:012x}", batch_size=bs, input_size=224, phase="training",
                            optimizer="sgd", dataset="synthetic", target_ci_rel=0.02, time_cap_s=10.0, **common),
                metrics=dict(latency_ms=30.0 + i % 97, latency_ci_rel=0.02, samples_count=40, throughput_per_s=bs * 30.0,
                             peak_mem_mb=500.0 + bs, step_time_ms=31.0, data_wait_ms=1.0, forward_ms=10.0),
                tags={"tracker.stop_reason": "precision"}, key_fields={"model": model, "bs": bs, "t": 1},
            )
            if i % 40 == 0:
                r.fail("oom", "out of memory")
            records.append(r)
            continue
        net = RunRecord(
            kind="network", name=f"{model} · bs{bs}",
            params=dict(model=model, model_hash=f"{seed:04d}{i:012x}", batch_size=bs, input_size=224, phase="inference",
                        target_ci_rel=0.02, time_cap_s=10.0, **common),
            metrics=dict(latency_ms=10.0 + i % 89, latency_ci_rel=0.01, samples_count=50, throughput_per_s=100.0,
                         peak_mem_mb=300.0 + bs, latency_iqr_ms=0.5, latency_min_ms=9.0, latency_max_ms=12.0),
            tags={"tracker.stop_reason": "precision"}, key_fields={"model": model, "bs": bs},
        )
        records.append(net)
        for j in range(LAYERS_PER_NETWORK):
            records.append(RunRecord(
                kind="layer", name=f"{j:03d} layer{j} (Conv2d)", parent=net,
                params=dict(model=model, model_hash=net.params["model_hash"], layer_index=j, layer_name=f"layer{j}",
                            op_type="Conv2d", batch_size=bs, input_shape="1x64x56x56", phase="inference", **common),
                metrics=dict(latency_ms=0.1 * (j + 1), latency_iqr_ms=0.01, latency_ci_rel=0.02, samples_count=40,
                             share_of_layers_pct=100.0 / LAYERS_PER_NETWORK, power_w=5.0, cpu_util_pct=90.0,
                             energy_per_iter_j=0.01),
                tags={"tracker.stop_reason": "precision"}, key_fields={"model": model, "bs": bs, "layer": j},
            ))
    return records[:n]


def log_runs(logger, n: int, seed: int) -> None:
    records = make_records(n, seed)
    for k in range(0, len(records), 5000):
        logger.log(records[k : k + 5000], environment=ENV)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    import duckdb

    from tracker.log.logger import RunLogger
    from tracker.settings import resolve_location
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp, "runs")
        logger = RunLogger(str(runs), experiment="bench", environment=ENV)
        t0 = time.perf_counter()
        log_runs(logger, RUNS, seed=1)
        build_s = time.perf_counter() - t0
        location = resolve_location(str(runs))

        rss_before = peak_rss_mb()
        t0 = time.perf_counter()
        full = load(Path(tmp, "w.duckdb"), open_source(location))
        full_s = time.perf_counter() - t0
        peak_mb = peak_rss_mb()

        log_runs(logger, INCREMENT, seed=2)
        t0 = time.perf_counter()
        inc = load(Path(tmp, "w.duckdb"), open_source(location))
        inc_s = time.perf_counter() - t0

        import mlflow

        mlflow.set_tracking_uri(location.uri)
        t0 = time.perf_counter()
        frame = mlflow.search_runs(search_all_experiments=True, max_results=RUNS + INCREMENT + 10)
        con = duckdb.connect(str(Path(tmp, "baseline.duckdb")))
        con.register("frame", frame)
        con.execute("CREATE TABLE runs AS SELECT * FROM frame")
        con.close()
        baseline_s = time.perf_counter() - t0
        baseline_rows = len(frame)

    print(json.dumps({
        "runs": RUNS,
        "store_build_s": round(build_s, 1),
        "full_load_s": round(full_s, 2),
        "full_runs_loaded": full.runs_changed,
        "incremental_runs": inc.runs_changed,
        "incremental_load_s": round(inc_s, 3),
        "baseline": "mlflow.search_runs into a DataFrame, then DuckDB",
        "baseline_rows": baseline_rows,
        "baseline_s": round(baseline_s, 1),
        "ratio": round(baseline_s / full_s, 1),
        "peak_rss_mb": round(peak_mb, 0),
        "rss_before_load_mb": round(rss_before, 0),
        "meets_target": full_s <= 30 and inc_s <= 2 and baseline_s / full_s >= 10 and peak_mb < 2048,
    }))


if __name__ == "__main__":
    main()
