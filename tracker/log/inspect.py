"""Reading the store back for people: summary and run listings (through MLflow's client)."""

from __future__ import annotations

from typing import Any

from tracker.errors import TrackerError
from tracker.log.logger import RunLogger
from tracker.log.schema import KINDS


def store_info(logger: RunLogger) -> dict[str, Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(logger.location.uri)
    info: dict[str, Any] = {"tracking_uri": logger.location.uri}
    if logger.location.artifact_root:
        info["artifact_root"] = logger.location.artifact_root
    schema_version = getattr(logger.store, "schema_version", None)
    if schema_version is not None:  # a tracking server keeps its schema to itself
        info["schema_version"] = schema_version()
    from tracker.log.relocate import old_roots

    moved = old_roots(logger.location)
    if moved:  # see tracker store relocate
        info["moved_from"] = ", ".join(str(p.parent) for p in sorted(moved))
    info["experiment"] = logger.experiment.name
    info["experiment_id"] = logger.experiment.experiment_id
    info["experiments"] = len(client.search_experiments())
    info["runs_in_experiment"] = _count(client, logger)
    return info


def _count(client: Any, logger: RunLogger) -> int:
    total, token = 0, None
    while True:
        page = client.search_runs([logger.experiment.experiment_id], max_results=50000, page_token=token)
        total += len(page)
        token = page.token
        if not token:
            return total


#: The run statuses MLflow keeps (``runs list --status``).
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")


def list_runs(logger: RunLogger, kind: str | None = None, limit: int = 50,
              status: str | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` runs of the experiment (of one kind, one status), each with why it
    failed where it did (``failure_reason``, and the tail of its measuring child's stderr)."""
    from mlflow.tracking import MlflowClient

    if kind is not None and kind not in KINDS:
        raise TrackerError(f"unknown run kind {kind!r}: expected one of {', '.join(KINDS)}")
    if status is not None and status.upper() not in RUN_STATUSES:
        raise TrackerError(f"unknown run status {status!r}: expected one of {', '.join(RUN_STATUSES)}")
    flt = " AND ".join(([f"tags.`tracker.kind` = '{kind}'"] if kind else [])
                       + ([f"attributes.status = '{status.upper()}'"] if status else []))
    client = MlflowClient(logger.location.uri)
    runs = client.search_runs(
        [logger.experiment.experiment_id], filter_string=flt, max_results=limit, order_by=["attributes.start_time DESC"]
    )
    return [
        {
            "run_id": r.info.run_id,
            "kind": r.data.tags.get("tracker.kind", ""),
            "name": r.info.run_name,
            "status": r.info.status,
            "parent_run_id": r.data.tags.get("mlflow.parentRunId"),
            "params": r.data.params,
            "metrics": r.data.metrics,
            "failure_reason": r.data.tags.get("tracker.failure_reason"),
            "stderr_tail": r.data.tags.get("tracker.stderr_tail"),
        }
        for r in runs
    ]
