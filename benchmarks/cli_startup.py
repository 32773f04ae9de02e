"""Start-up time of `tracker --help` (torch and mlflow must be imported lazily).

Runs the installed command as a fresh process several times; target: median under 1.5 s.
Last line: {"help_median_s": ..., "help_max_s": ..., "runs": N, "target_s": 1.5}
"""

import os
import sys

# benchmarks/logging.py is named like the stdlib module: keep this folder off the import path.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time
from pathlib import Path

RUNS = 10
TARGET_S = 1.5


def main() -> None:
    exe = shutil.which("tracker") or str(Path(sys.executable).with_name("tracker"))
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run([exe, "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    print(json.dumps({"help_median_s": round(median, 3), "help_max_s": round(max(times), 3), "runs": RUNS,
                      "target_s": TARGET_S, "meets_target": median < TARGET_S}))


if __name__ == "__main__":
    main()
