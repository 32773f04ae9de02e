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
``speed_probe_ms`` and ``speed_probe_version`` (since tracker 0.9.9; optional, so format 1 still):
the speed probe's samples, timed just before the network was built and just after the window
(``tracker.profile.probe``); a training job's (since tracker 0.9.11) just before its first step and
just after its last.
Runs logged before tracker 0.7.2, layer runs and imported runs have no samples artifact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tracker.decode import Undecodable, loads_json
from tracker.errors import DamagedArtifactError, TrackerError

SAMPLES_ARTIFACT = "samples/latency_ms.json"
SAMPLES_FORMAT = 1


@dataclass(frozen=True)
class Samples:
    samples_ms: list[float]
    warmup_ms: list[float]
    block_n: int
    stop_reason: str
    host_ms: list[float] | None = None


def samples_json(timing: dict[str, Any], speed_probe: dict[str, Any] | None = None) -> str:
    """The artifact of a child's timing (``tracker.profile.timing``): samples to the nanosecond;
    ``speed_probe``: the probe's samples beside it (``tracker.profile.probe``), where it ran one."""
    return json.dumps({
        "format": SAMPLES_FORMAT, "unit": "ms", "block_n": int(timing.get("block_n", 1)),
        "stop_reason": timing["stop_reason"],
        "warmup_ms": [round(float(v), 6) for v in timing["warmup_ms"]],
        "samples_ms": [round(float(v), 6) for v in timing["samples_ms"]],
        **({"host_ms": [round(float(v), 6) for v in timing["host_ms"]]} if timing.get("host_ms") else {}),
        **({"speed_probe_ms": speed_probe["samples_ms"], "speed_probe_version": int(speed_probe["version"])}
           if speed_probe and speed_probe.get("samples_ms") else {}),
    }, separators=(",", ":"))


def read_samples(text: str | bytes, where: str) -> Samples:
    """The samples artifact's text (or its bytes, as read from the file), checked; ``where`` names it in
    errors (a run id). One cut short or garbled is :class:`DamagedArtifactError`, naming what is wrong
    ("lacks or garbles could not convert string to float: 'a'" until 0.9.8); one in a format this tracker
    does not read, a TrackerError."""
    try:
        data = loads_json(text)
    except Undecodable as exc:  # nested too deeply, or bytes not UTF-8 (read as text first): a traceback until 0.9.15
        raise DamagedArtifactError(f"{where}: {SAMPLES_ARTIFACT}: {exc}; cut short or garbled?") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != SAMPLES_FORMAT:
        raise TrackerError(f"{where}: {SAMPLES_ARTIFACT} is in format {found!r}, which this tracker does not read "
                           f"(it reads format {SAMPLES_FORMAT}): a newer tracker wrote it?")

    def numbers(key: str, default: Any = None) -> list[float] | None:
        values = data.get(key, default)
        if values is None:
            return None
        if not isinstance(values, list):
            raise DamagedArtifactError(f"{where}: {SAMPLES_ARTIFACT}'s {key} is not a list of numbers")
        try:
            return [float(v) for v in values]
        except (TypeError, ValueError):
            bad = next(v for v in values if not _is_number(v))
            raise DamagedArtifactError(f"{where}: {SAMPLES_ARTIFACT}'s {key} holds {bad!r}, not a number") from None

    if "samples_ms" not in data:
        raise DamagedArtifactError(f"{where}: {SAMPLES_ARTIFACT} lacks samples_ms")
    samples, warmup, host = numbers("samples_ms"), numbers("warmup_ms", []), numbers("host_ms")
    try:
        block_n = int(data.get("block_n", 1))
    except (TypeError, ValueError):
        raise DamagedArtifactError(f"{where}: {SAMPLES_ARTIFACT}'s block_n is {data['block_n']!r}, not a whole "
                                   "number") from None
    assert samples is not None and warmup is not None
    if not samples or block_n < 1:
        raise DamagedArtifactError(f"{where}: {SAMPLES_ARTIFACT} holds no samples")
    if host is not None and len(host) != len(samples):
        raise DamagedArtifactError(f"{where}: {SAMPLES_ARTIFACT} holds {len(host)} host parts for {len(samples)} samples")
    return Samples(samples, warmup, block_n, str(data.get("stop_reason", "")), host)


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
