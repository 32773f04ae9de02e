"""Logging rate: MLflow's client one call at a time vs tracker's batched writer.

Logs 2,000 layer runs nested under 20 network runs into fresh embedded stores, once
through ``MlflowClient`` (create_run + log_batch + set_terminated per run) and once
through ``RunLogger.log``, in one process. Target: ratio >= 20.
Last line: {"naive_runs_per_s": ..., "tracker_runs_per_s": ..., "ratio": ...}
"""

import os
import sys

# This file is named like the stdlib module: keep its folder off the import path.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

NETWORKS = 20
LAYERS_PER_NETWORK = 100
TARGET_RATIO = 20.0


def make_records() -> list:
    from tracker.log.record import RunRecord

    records = []
    common = dict(phase="inference", device="cpu", precision="float32", mode="cpu-t2")
    for n in range(NETWORKS):
        net = RunRecord(
            kind="network",
            name=f"net{n} · bs1",
            params=dict(model=f"net{n}", model_hash=f"{n:016x}", batch_size=1, input_size=224, target_ci_rel=0.02, time_cap_s=10.0, **common),
            metrics=dict(latency_ms=10.0 + n, latency_ci_rel=0.01, samples_count=50, throughput_per_s=100.0 / (1 + n), latency_iqr_ms=0.5, latency_min_ms=9.0, latency_max_ms=12.0, warmup_count=10),
            tags={"tracker.stop_reason": "precision", "tracker.source": "measured"},
            key_fields={"model": f"net{n}"},
        )
        records.append(net)
        for i in range(LAYERS_PER_NETWORK):
            records.append(
                RunRecord(
                    kind="layer",
                    name=f"{i:03d} layer{i} (Conv2d)",
                    parent=net,
                    params=dict(model=f"net{n}", model_hash=f"{n:016x}", layer_index=i, layer_name=f"layer{i}", op_type="Conv2d", batch_size=1, input_shape="1x64x56x56", output_shape="1x64x56x56", **common),
                    metrics=dict(latency_ms=0.1 * (i + 1), latency_iqr_ms=0.01, latency_ci_rel=0.02, samples_count=40, share_of_layers_pct=1.0),
                    tags={"tracker.stop_reason": "precision", "tracker.source": "measured"},
                    key_fields={"model": f"net{n}", "layer": i},
                )
            )
    return records


def main() -> None:
    from mlflow.tracking import MlflowClient

    from tracker.environment import capture_environment
    from tracker.log.logger import RunLogger
    from tracker.log.reference import log_with_client

    env = capture_environment()
    with tempfile.TemporaryDirectory() as tmp:
        naive_dir, fast_dir = Path(tmp, "naive"), Path(tmp, "fast")
        # Both stores are created (migrations run) before the clocks start.
        naive_logger = RunLogger(str(naive_dir), experiment="bench", environment=env)
        fast_logger = RunLogger(str(fast_dir), experiment="bench", environment=env)

        records = make_records()
        final = naive_logger.finalize(records)
        client = MlflowClient(naive_logger.location.uri)
        exp_id = naive_logger.experiment.experiment_id
        ids: dict[str, str] = {}
        t0 = time.perf_counter()
        for r in final:
            ids[r.run_id] = log_with_client(client, exp_id, r, parent_id=ids.get(r.parent_id or ""))
        naive_s = time.perf_counter() - t0

        records = make_records()
        t0 = time.perf_counter()
        fast_logger.log(records)
        fast_s = time.perf_counter() - t0

        fast_client = MlflowClient(fast_logger.location.uri)
        written = fast_client.search_runs([fast_logger.experiment.experiment_id], max_results=5000)
        nested = sum(1 for r in written if "mlflow.parentRunId" in r.data.tags)
        assert len(written) == len(records) and nested == NETWORKS * LAYERS_PER_NETWORK, (len(written), nested)

    n = len(records)
    result = {
        "runs": n,
        "naive_s": round(naive_s, 3),
        "tracker_s": round(fast_s, 3),
        "naive_runs_per_s": round(n / naive_s, 1),
        "tracker_runs_per_s": round(n / fast_s, 1),
        "ratio": round(naive_s / fast_s, 1),
        "target_ratio": TARGET_RATIO,
        "meets_target": naive_s / fast_s >= TARGET_RATIO,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
