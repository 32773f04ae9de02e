"""The raw timing samples of a measurement run, kept as its artifact ``samples/latency_ms.json``.

The run's metrics (median, CI, spread) are derived from these samples; keeping them lets any
figure be derived again, and ``tracker runs compare`` test two runs on them. A versioned
record, pyperf's way: a format this tracker does not know is refused by name, never guessed at.

    {"format": 1, "unit": "ms", "block_n": 12, "stop_reason": "precision",
     "warmup_ms": [...], "samples_ms": [...], "host_ms": [...]}

Samples are in time order; ``block_n`` consecutive samples make one block of about
``tracker.profile.stats.BLOCK_S`` of work (the drift-aware CI rests on the block medians).
A training job's samples (since tracker 0.7.3) are its steps' iteration times, one a block.
``host_ms`` (on a device, since tracker 0.8.4; optional, so format 1 still): each sample's host
part, the step's call until it returned, before the device was waited on.
Runs logged before tracker 0.7.2, layer runs and imported runs have no samples artifact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tracker.errors import TrackerError

SAMPLES_ARTIFACT = "samples/latency_ms.json"
SAMPLES_FORMAT = 1


@dataclass(frozen=True)
class Samples:
    samples_ms: list[float]
    warmup_ms: list[float]
    block_n: int
    stop_reason: str
    host_ms: list[float] | None = None


def samples_json(timing: dict[str, Any]) -> str:
    """The artifact of a child's timing (``tracker.profile.timing``): samples to the nanosecond."""
    return json.dumps({
        "format": SAMPLES_FORMAT, "unit": "ms", "block_n": int(timing.get("block_n", 1)),
        "stop_reason": timing["stop_reason"],
        "warmup_ms": [round(float(v), 6) for v in timing["warmup_ms"]],
        "samples_ms": [round(float(v), 6) for v in timing["samples_ms"]],
        **({"host_ms": [round(float(v), 6) for v in timing["host_ms"]]} if timing.get("host_ms") else {}),
    }, separators=(",", ":"))


def read_samples(text: str, where: str) -> Samples:
    """The samples artifact's text, checked; ``where`` names it in errors (a run id)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TrackerError(f"{where}: {SAMPLES_ARTIFACT} is not JSON ({exc})") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != SAMPLES_FORMAT:
        raise TrackerError(f"{where}: {SAMPLES_ARTIFACT} is in format {found!r}, which this tracker does not read "
                           f"(it reads format {SAMPLES_FORMAT}): a newer tracker wrote it?")
    try:
        samples = [float(v) for v in data["samples_ms"]]
        warmup = [float(v) for v in data.get("warmup_ms", [])]
        block_n = int(data.get("block_n", 1))
        host = [float(v) for v in data["host_ms"]] if data.get("host_ms") is not None else None
    except (KeyError, TypeError, ValueError) as exc:
        raise TrackerError(f"{where}: {SAMPLES_ARTIFACT} lacks or garbles {exc}") from None
    if not samples or block_n < 1:
        raise TrackerError(f"{where}: {SAMPLES_ARTIFACT} holds no samples")
    if host is not None and len(host) != len(samples):
        raise TrackerError(f"{where}: {SAMPLES_ARTIFACT} holds {len(host)} host parts for {len(samples)} samples")
    return Samples(samples, warmup, block_n, str(data.get("stop_reason", "")), host)
