"""The run record: one measurement, as it will be written to the tracking store.

A record is built by a profiler, validated against its kind's schema, and written by a
store writer. Its ``run_id`` is chosen here (a uuid4 hex, as MLflow makes them) so that a
layer record can name its network record as parent before either is written; a writer
that cannot choose ids (the REST API) maps them on the way.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tracker import __version__
from tracker.log.schema import load_schema

Status = Literal["FINISHED", "FAILED", "KILLED"]
PARENT_TAG = "mlflow.parentRunId"
RUN_NAME_TAG = "mlflow.runName"
NOTE_TAG = "mlflow.note.content"
KEY_TAG = "tracker.config_key"
KIND_TAG = "tracker.kind"
#: The prefix of a run's system metrics (telemetry series): MLflow's UI shows them apart, in the
#: run's System metrics tab, against time.
SYSTEM_PREFIX = "system/"
#: The metric a network run measured with its layers has: the sum of its layer runs' latencies.
LAYERS_METRIC = "sum_of_layers_ms"
#: A repeat of a configuration already measured (``--again``, a campaign's ``repeats``): its own
#: key beside the config key, which stays the same so that the views count the configuration once.
REPEAT_KEY_TAG = "tracker.repeat_key"
#: A measurement whose child wrote its result but had to be killed to end (``child.EXIT_GRACE_S``),
#: or whose exit status is not known (its zygote ended first): the result stands, and this says so.
CHILD_NOTE_TAG = "tracker.child_note"
#: What ended a FAILED measurement, in a line: the child's exception (``AttributeError: ...``) or why
#: it was stopped (``no result within 600 s``); its stderr's tail is ``tracker.stderr_tail`` (0.8.5).
FAILURE_MESSAGE_TAG = "tracker.failure_message"
#: Why a FAILED measurement failed (``oom``, ``killed``, ``crash``, ``error``, ``timeout``, ``bad_input``).
FAILURE_REASON_TAG = "tracker.failure_reason"
#: A ``timeout`` failure's time limit (seconds, ``--timeout``, a campaign's ``timeout_s``; since 0.9.8):
#: under a larger one the configuration may finish, so the failure does not answer it.
TIMEOUT_TAG = "tracker.timeout_s"

#: Where a run keeps the description of its network, and the tag that says it has one.
DESCRIPTION_ARTIFACT = "description/description.json"
DESCRIPTION_TAG = "tracker.description"

def now_ms() -> int:
    return int(time.time() * 1000)


def render(value: Any) -> str:
    """A param or tag value as MLflow stores it: text. Lists and dicts become compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def config_key(fields: dict[str, Any]) -> str:
    """Deterministic key of a measured configuration: sha256 of its canonical JSON.

    The fields are what was measured (model and its description hash, batch size, phase,
    device, device mode, precision, software versions); equal fields give equal keys, on
    any machine and in any process.
    """
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass
class RunRecord:
    """One run. ``parent`` is another record (written first) or an existing run id."""

    kind: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)
    status: Status = "FINISHED"
    parent: RunRecord | str | None = None
    description: str | None = None
    key_fields: dict[str, Any] | None = None
    #: metric histories: name -> [(step, value), ...]; the last step is the latest value
    history: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    #: where the steps of its ``system/`` histories count milliseconds from: the wall-clock time (ms
    #: since the epoch) their points are stamped from, as MLflow's System metrics tab plots them
    series_start_ms: int | None = None
    #: artifacts: path inside the run's artifact folder -> bytes, text or a file to copy
    artifacts: dict[str, bytes | str | Path] = field(default_factory=dict)
    start_time_ms: int = field(default_factory=now_ms)
    end_time_ms: int | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def parent_id(self) -> str | None:
        if isinstance(self.parent, RunRecord):
            return self.parent.run_id
        return self.parent

    @property
    def config_key(self) -> str:
        fields = self.key_fields if self.key_fields is not None else {"params": self.params}
        return config_key({"kind": self.kind, **fields})

    def fail(self, reason: str, stderr_tail: str | None = None) -> RunRecord:
        """Mark the record FAILED with a reason (``oom``, ``crash``, ``timeout``, ...)."""
        self.status = "FAILED"
        self.tags[FAILURE_REASON_TAG] = reason
        if stderr_tail:
            self.tags["tracker.stderr_tail"] = stderr_tail[-4000:]
        return self

    def finalize(self, environment: dict[str, str]) -> FinalRecord:
        """Render values, add the bookkeeping tags, and validate against the schema."""
        schema = load_schema(self.kind)
        tags = {k: render(v) for k, v in environment.items()}
        tags.update({k: render(v) for k, v in self.tags.items()})
        tags[KIND_TAG] = self.kind
        tags["tracker.schema"] = schema.tag
        tags["tracker.version"] = __version__
        tags[KEY_TAG] = self.config_key
        if self.parent_id:
            tags[PARENT_TAG] = self.parent_id
        if self.description:
            tags[NOTE_TAG] = self.description
        if DESCRIPTION_ARTIFACT in self.artifacts:
            tags[DESCRIPTION_TAG] = DESCRIPTION_ARTIFACT
        params = {k: render(v) for k, v in self.params.items()}
        metrics = dict(self.metrics)
        for name, points in self.history.items():
            for _, value in points:  # every point of a history obeys the metric rules
                schema.check_metric(name, value)
            if points and name not in metrics:
                metrics[name] = float(max(points)[1])
        schema.validate(params, metrics, tags, self.status)
        tags[RUN_NAME_TAG] = self.name
        return FinalRecord(
            run_id=self.run_id,
            name=self.name,
            params=params,
            metrics={k: float(v) for k, v in self.metrics.items()},
            history={k: [(int(s), float(v)) for s, v in pts] for k, pts in self.history.items()},
            tags=tags,
            status=self.status,
            parent_id=self.parent_id,
            artifacts=self.artifacts,
            start_time_ms=self.start_time_ms,
            end_time_ms=self.end_time_ms or max(now_ms(), self.start_time_ms),
            series_start_ms=self.series_start_ms,
        )


@dataclass(frozen=True)
class FinalRecord:
    """A validated record with every value rendered: what writers consume."""

    run_id: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    history: dict[str, list[tuple[int, float]]]
    tags: dict[str, str]
    status: str
    parent_id: str | None
    artifacts: dict[str, bytes | str | Path]
    start_time_ms: int
    end_time_ms: int
    series_start_ms: int | None = None

    def metric_points(self) -> list[tuple[str, float, int, int]]:
        """Every metric point as (key, value, timestamp_ms, step): a ``system/`` history's points
        stamped ``series_start_ms`` plus their step (milliseconds), where the record has one."""
        points = [(k, v, self.end_time_ms, 0) for k, v in self.metrics.items()]
        for key, series in self.history.items():
            timed = self.series_start_ms is not None and key.startswith(SYSTEM_PREFIX)
            points.extend((key, v, self.series_start_ms + s if timed else self.end_time_ms, s)  # type: ignore[operator]
                          for s, v in series)
        return points

    def latest_metrics(self) -> dict[str, tuple[float, int, int]]:
        """What MLflow keeps as the latest value of each metric: max (step, timestamp, value)."""
        latest: dict[str, tuple[int, int, float]] = {}
        for key, value, ts, step in self.metric_points():
            cand = (step, ts, value)
            if key not in latest or cand > latest[key]:
                latest[key] = cand
        return {k: (v, ts, step) for k, (step, ts, v) in latest.items()}
