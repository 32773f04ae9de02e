"""The reference path: one run through MLflow's own client, one call per step.

``create_run`` + ``log_batch`` + ``set_terminated`` is how a run is logged without
tracker. It is the baseline of ``benchmarks/logging.py`` and the yardstick of the tests
that check tracker's writers produce runs MLflow cannot tell apart from its own.
"""

from __future__ import annotations

from typing import Any

from tracker.log.record import PARENT_TAG, FinalRecord


def log_with_client(client: Any, experiment_id: str, record: FinalRecord, parent_id: str | None = None) -> str:
    from mlflow.entities import Metric, Param

    tags = dict(record.tags)
    if parent_id or record.parent_id:
        tags[PARENT_TAG] = parent_id or record.parent_id  # type: ignore[assignment]
    run = client.create_run(experiment_id, start_time=record.start_time_ms, tags=tags, run_name=record.name)
    run_id = run.info.run_id
    client.log_batch(
        run_id,
        metrics=[Metric(k, v, ts, step) for k, v, ts, step in record.metric_points()],
        params=[Param(k, v) for k, v in record.params.items()],
    )
    client.set_terminated(run_id, status=record.status, end_time=record.end_time_ms)
    return run_id
