"""Wall time of `tracker demo` (the README's first command) on a fresh embedded store.

Runs the full demo in a temporary folder (campaigns, TX2 import, warehouse, fingerprints,
predictions of unseen networks, report), then runs it again to check that the second run
measures and trains nothing. Target: the first run within 10 minutes on 2 CPU cores.
Last line: {"total_s": ..., "steps_s": {...}, "rerun_s": ..., "unseen_latency_mape_pct": ..., ...}
"""

import os
import sys

# benchmarks/logging.py is named like the stdlib module: keep this folder off the import path.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import json  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

TARGET_S = 600.0


def demo(folder: str) -> tuple[dict, float]:
    env = {**os.environ, "TRACKER_RUNS_DIR": os.path.join(folder, "runs")}
    env.pop("MLFLOW_TRACKING_URI", None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tracker", "demo", "--format", "json"], cwd=folder, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"tracker demo exited {proc.returncode}")
    sys.stderr.write(proc.stderr)
    return json.loads(proc.stdout), wall


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        first, wall = demo(tmp)
        second, rewall = demo(tmp)
    unseen = [r for r in first["unseen"] if r.get("predicted_latency_ms")]
    errs = [abs(r["predicted_latency_ms"] / r["measured_latency_ms"] - 1) for r in unseen]
    mem = [abs(r["predicted_peak_mem_mb"] / r["measured_peak_mem_mb"] - 1) for r in first["unseen"]
           if r.get("predicted_peak_mem_mb") and r.get("measured_peak_mem_mb")]
    measured = sum(t["measured"] for t in first["campaigns"].values())
    failed = sum(t["failed"] for t in first["campaigns"].values())
    out = {
        "total_s": round(wall, 1),
        "steps_s": first["steps_s"],
        "configurations_measured": measured,
        "configurations_failed": failed,
        "fingerprints": {f["name"]: f.get("heldout_mape_pct") for f in first["fingerprints"]},
        "unseen_rows": len(unseen),
        "unseen_latency_mape_pct": round(100 * sum(errs) / len(errs), 1) if errs else None,
        "unseen_latency_within_10pct": round(100 * sum(e <= 0.1 for e in errs) / len(errs)) if errs else None,
        "unseen_memory_mape_pct": round(100 * sum(mem) / len(mem), 1) if mem else None,
        "rerun_s": round(rewall, 1),
        "rerun_measured": sum(t["measured"] for t in second["campaigns"].values()),
        "rerun_trained": sum(not f.get("reused", False) for f in second["fingerprints"] if "error" not in f),
        "target_s": TARGET_S,
    }
    out["meets_target"] = out["total_s"] <= TARGET_S and out["rerun_measured"] == 0 and out["rerun_trained"] == 0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
