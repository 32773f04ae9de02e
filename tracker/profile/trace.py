"""torch.profiler's view of a configuration: a trace of a few iterations and its operator table.

Taken in the measuring child *after* the measurement, its memory peak and its telemetry: the
profiler's overhead (it records every operator call) never reaches the measured latency. The
trace (``trace/trace.json``, Chrome trace format: open it in https://ui.perfetto.dev or
chrome://tracing) and the operator table (``trace/ops.json``: per aten operator, calls and self
time per iteration, and its share; on a GPU also each kernel's device time, and how long the
device was busy per iteration) are artifacts of the network run; the table's path is its tag
``tracker.trace``, and ``tracker warehouse load`` puts the table in ``trace_ops`` (SQL view
``operator_time``). They say where an
iteration's time goes operator by operator, functional ones included (``aten::add_`` of a
residual connection, ``aten::cat``), which layer runs, one per module, do not see. The traced
iterations' own wall time is kept beside them (``traced_iteration_ms``): against the run's
``latency_ms`` it says how much the profiler itself cost.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Iterations traced (after one untraced one): a trace is for reading, not for statistics.
TRACE_ITERATIONS = 3
TRACE_ARTIFACT = "trace/trace.json"
OPS_ARTIFACT = "trace/ops.json"
#: On a traced run: the artifact of its operator table (the warehouse loads it into ``trace_ops``).
TRACE_TAG = "tracker.trace"
#: Why a trace asked for is missing (the measurement stands): the profiler's error.
TRACE_ERROR_TAG = "tracker.trace_error"
#: Operators a profile prints and answers in JSON (all of them are in the ops artifact).
TOP_OPS = 15
TRACE_FILE = "trace.json"


def trace_step(step: Callable[[], object], sync: Callable[[], None], cuda: bool, folder: str,
               iterations: int = TRACE_ITERATIONS) -> dict[str, Any]:
    """Trace ``iterations`` calls of ``step`` with torch.profiler (CPU, and CUDA kernels where
    ``cuda``), write the Chrome trace to ``folder``/trace.json and return the operator table."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    step()
    sync()
    walls = []
    with profile(activities=activities) as prof:
        for _ in range(iterations):
            t0 = time.perf_counter_ns()
            step()
            sync()
            walls.append((time.perf_counter_ns() - t0) / 1e6)
    path = Path(folder) / TRACE_FILE
    prof.export_chrome_trace(str(path))
    averages = prof.key_averages()
    table: dict[str, Any] = {"iterations": iterations, "traced_iteration_ms": statistics.median(walls),
                             "time_basis": "self_device_ms" if cuda else "self_cpu_ms",
                             "ops": op_table(averages, iterations, cuda), "trace_file": str(path)}
    if cuda:  # what the device itself ran: its kernels, and how long it was busy per iteration
        kernels = kernel_table(averages, iterations)
        table["kernels"] = kernels
        table["device_busy_ms"] = sum(k["self_device_ms"] for k in kernels)
    return table


def op_table(averages: Any, iterations: int, cuda: bool) -> list[dict[str, Any]]:
    """Per operator (torch.profiler's ``key_averages``): calls and times per iteration (ms), and
    its share of the operators' self time (device time on a GPU, CPU time else); slowest first.

    Operators only: on a GPU ``key_averages`` also lists each kernel (and copy) as an event of its
    own, whose time the operator that launched it already holds as its self device time; counted
    twice, every share was about half what it is (resnet18 on an H200: ``aten::cudnn_convolution``
    38 % beside its own kernels' 20 % and 13 %). Those are ``kernel_table``'s."""
    rows = []
    for e in averages:
        if _on_device(e):
            continue
        row = {"op": e.key, "calls_per_iter": e.count / iterations,
               "self_cpu_ms": e.self_cpu_time_total / 1e3 / iterations,
               "cpu_total_ms": e.cpu_time_total / 1e3 / iterations}
        if cuda:
            row["self_device_ms"] = _device_us(e) / 1e3 / iterations
        rows.append(row)
    return _shares(rows, "self_device_ms" if cuda else "self_cpu_ms")


def kernel_table(averages: Any, iterations: int) -> list[dict[str, Any]]:
    """Per kernel (and memory copy or set) that ran on the device: launches and device time per
    iteration (ms), and its share of the device's busy time; slowest first. Empty on a CPU."""
    rows = [{"kernel": e.key, "calls_per_iter": e.count / iterations, "self_device_ms": _device_us(e) / 1e3 / iterations}
            for e in averages if _on_device(e)]
    return _shares(rows, "self_device_ms")


def normalized(table: dict[str, Any]) -> dict[str, Any]:
    """An operator table (``trace/ops.json``) as this tracker writes it, whichever wrote it. A GPU
    table from before tracker 0.7.3 (time basis ``self_device_ms``, no ``kernels``) listed the
    kernels among the operators, their time counted twice: there a row without any CPU time is a
    kernel (an operator runs on the host, if only to launch), and each part gets its own shares."""
    if table.get("time_basis") != "self_device_ms" or "kernels" in table:
        return table
    ops: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []
    for o in table["ops"]:
        if o.get("self_cpu_ms") or o.get("cpu_total_ms"):
            ops.append(dict(o))
        else:
            kernels.append({"kernel": o["op"], "calls_per_iter": o["calls_per_iter"],
                            "self_device_ms": float(o.get("self_device_ms") or 0.0)})
    return {**table, "ops": _shares(ops, "self_device_ms"), "kernels": _shares(kernels, "self_device_ms"),
            "device_busy_ms": sum(k["self_device_ms"] for k in kernels)}


def _on_device(event: Any) -> bool:
    """Whether a profiler event ran on the device (a kernel, a copy), not on the host."""
    device_type = getattr(event, "device_type", None)
    return device_type is not None and getattr(device_type, "name", str(device_type)).rpartition(".")[2] != "CPU"


def _device_us(event: Any) -> float:
    device_us = getattr(event, "self_device_time_total", None)
    if device_us is None:  # torch before 2.4 named it after CUDA
        device_us = getattr(event, "self_cuda_time_total", 0.0)
    return float(device_us)


def _shares(rows: list[dict[str, Any]], basis: str) -> list[dict[str, Any]]:
    total = sum(r[basis] for r in rows)
    for r in rows:
        r["share_pct"] = 100.0 * r[basis] / total if total > 0 else None
    rows.sort(key=lambda r: -r[basis])
    return rows


@dataclass(frozen=True)
class Traced:
    """What a traced measurement adds to its network run, and what ``profile`` says of it."""

    artifacts: dict[str, bytes | str]
    tags: dict[str, str]
    summary: dict[str, Any]


def traced_run(payload: dict[str, Any]) -> Traced | None:
    """The trace a child's result points to, read (before its folder goes) with its operator table
    as artifacts; the profiler's error where it failed; None where no trace was asked for."""
    if error := payload.get("trace_error"):  # the trace failed: the measurement stands
        return Traced({}, {TRACE_ERROR_TAG: error}, {"error": error})
    traced = payload.get("trace")
    if not traced:
        return None
    table = {k: v for k, v in traced.items() if k != "trace_file"}
    artifacts: dict[str, bytes | str] = {OPS_ARTIFACT: json.dumps(table, indent=1)}
    trace_file = Path(traced["trace_file"])
    if trace_file.is_file():
        artifacts[TRACE_ARTIFACT] = trace_file.read_bytes()
    summary = {**{k: v for k, v in table.items() if k not in ("ops", "kernels")}, "ops": table["ops"][:TOP_OPS],
               "operators": len(table["ops"]), "artifacts": sorted(artifacts)}
    if "kernels" in table:
        summary["kernels"] = table["kernels"][:TOP_OPS]
        summary["kernel_count"] = len(table["kernels"])
    return Traced(artifacts, {TRACE_TAG: OPS_ARTIFACT}, summary)
