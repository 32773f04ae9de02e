"""Measurements into run records: one network run, its layer runs nested under it."""

from __future__ import annotations

from typing import Any

from tracker.log.record import RunRecord, now_ms
from tracker.profile.network import LayerCall, NetworkSpec
from tracker.profile.stats import Stopping
from tracker.profile.timing import Timing


def cpu_mode_id() -> str:
    import torch

    return f"cpu-t{torch.get_num_threads()}"


def key_fields(spec: NetworkSpec, model_hash: str, mode: str, versions: dict[str, str], **extra: Any) -> dict[str, Any]:
    """What makes two measurements the same configuration."""
    return {
        "model": spec.model,
        "model_hash": model_hash,
        "batch_size": spec.batch_size,
        "input_size": spec.input_size,
        "phase": spec.phase,
        "device": spec.device,
        "precision": spec.precision,
        "mode": mode,
        "software": versions,
        **extra,
    }


def timing_metrics(t: Timing) -> dict[str, float]:
    s = t.summary
    return {
        "latency_ms": s.median,
        "latency_mean_ms": s.mean,
        "latency_min_ms": s.min,
        "latency_max_ms": s.max,
        "latency_iqr_ms": s.iqr,
        "latency_std_ms": s.std,
        "latency_ci_low_ms": s.ci_low,
        "latency_ci_high_ms": s.ci_high,
        "latency_ci_rel": s.ci_rel,
        "samples_count": float(s.n),
        "warmup_count": float(len(t.warmup_ms)),
        "measure_time_s": t.elapsed_s,
    }


def network_record(
    spec: NetworkSpec, model_hash: str, mode: str, rule: Stopping, timing: Timing, versions: dict[str, str], start_ms: int
) -> RunRecord:
    metrics = timing_metrics(timing)
    metrics["throughput_per_s"] = spec.batch_size * 1000.0 / metrics["latency_ms"]
    return RunRecord(
        kind="network",
        name=f"{spec.model} · bs{spec.batch_size} · {spec.phase} · {spec.device}",
        params={
            "model": spec.model,
            "model_hash": model_hash,
            "batch_size": spec.batch_size,
            "input_size": spec.input_size,
            "phase": spec.phase,
            "device": spec.device,
            "precision": spec.precision,
            "mode": mode,
            "target_ci_rel": rule.target_ci_rel,
            "time_cap_s": rule.time_cap_s,
        },
        metrics=metrics,
        tags={"tracker.stop_reason": timing.stop_reason, "tracker.source": "measured"},
        key_fields=key_fields(spec, model_hash, mode, versions),
        description=(
            f"{spec.model} {spec.phase} at batch {spec.batch_size} on {spec.device} ({mode}): "
            f"median {metrics['latency_ms']:.3f} ms ±{100 * metrics['latency_ci_rel']:.1f}% "
            f"from {timing.summary.n} samples, stopped on {timing.stop_reason}."
        ),
        start_time_ms=start_ms,
        end_time_ms=now_ms(),
    )


def layer_records(
    parent: RunRecord, spec: NetworkSpec, model_hash: str, mode: str, calls: list[LayerCall], versions: dict[str, str]
) -> list[RunRecord]:
    total = sum(c.timing.summary.median for c in calls if c.timing)
    records = []
    for c in calls:
        assert c.timing is not None
        m = timing_metrics(c.timing)
        records.append(
            RunRecord(
                kind="layer",
                name=f"{c.index:03d} {c.name} ({c.op_type})",
                parent=parent,
                params={
                    "model": spec.model,
                    "model_hash": model_hash,
                    "layer_index": c.index,
                    "layer_name": c.name,
                    "op_type": c.op_type,
                    "batch_size": spec.batch_size,
                    "input_shape": c.input_shape,
                    "output_shape": c.output_shape,
                    "phase": spec.phase,
                    "device": spec.device,
                    "precision": spec.precision,
                    "mode": mode,
                },
                metrics={
                    "latency_ms": m["latency_ms"],
                    "latency_iqr_ms": m["latency_iqr_ms"],
                    "latency_ci_rel": m["latency_ci_rel"],
                    "samples_count": m["samples_count"],
                    **({"share_of_network_pct": 100.0 * m["latency_ms"] / total} if total else {}),
                },
                tags={"tracker.stop_reason": c.timing.stop_reason, "tracker.source": "measured"},
                key_fields=key_fields(spec, model_hash, mode, versions, layer_index=c.index),
            )
        )
    if calls and total:
        parent.metrics["sum_of_layers_ms"] = total
        parent.metrics["sum_of_layers_ratio"] = total / parent.metrics["latency_ms"]
    return records
