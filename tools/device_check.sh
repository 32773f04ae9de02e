#!/usr/bin/env bash
# The GPU checks of a session lent a device machine (the `device` tool of this workplace), as
# one prepared script: tracker's CUDA paths and the CUDA benchmarks, run from the repository
# root there. That machine has Python 3.12 with torch, numpy, pandas, scipy, scikit-learn and
# pyarrow, but not mlflow, duckdb or lightgbm, and reaches no package index: tracker's other
# packages travel in .whl/site.tar.xz (ignored by git; carry it), which tools/device_site.sh
# builds here from the versions .venv holds (CPython 3.12 wheels, without the MLflow UI).
# Usage: bash tools/device_check.sh STEP...  (STEP: gpu_paths, gpu_paths=NAME,NAME... (those of
# gpu_paths.py's steps alone), gpu_paths=NAME,...+NAME,... (two lists at once, each on a store of
# its own: their measurements take turns on the machine-wide device lock while the other's
# commands start, about 20 s of imports each there), cost_bN (profiling_cost.py at batch N: cost_b1,
# cost_b32, ...), layers or layers=SECONDS (its time limit, 200 s unless given))
# Each step's output goes to $OUT (the files that come back, at most 8); a failed set-up ends
# the script at once, so little device time is lost on it. On an H200 (2026-11-26) the set-up
# took 15 s, cost_b1 and cost_b32 93 s each, layers 193 s, and gpu_paths ran past 400 s (15
# steps of 22 done): give gpu_paths a call of its own (`run` with timeout_s 600), the rest a
# second call on the warm machine; a session's 15 minutes of device time hold about that.
# On 2026-11-30 (0.9.20) gpu_paths=A+B, 20 steps beside 12 (the campaign, warehouse, fingerprints and
# predictions), ran in one call of 346 s, set-up included: 395 s of device time with the start.
set -u
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT" /tmp/site
t0=$(date +%s)
tar -C /tmp/site -xJf .whl/site.tar.xz || { echo "set-up: cannot unpack .whl/site.tar.xz"; exit 3; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -c "
import torch, mlflow, duckdb, lightgbm, typer, tracker.cli
print('python3', __import__('platform').python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda,
      torch.cuda.get_device_name(), 'mlflow', mlflow.__version__, 'duckdb', duckdb.__version__,
      'lightgbm', lightgbm.__version__, 'typer', typer.__version__)" || { echo "set-up: imports fail"; exit 4; }
python3 -m tracker --help > /dev/null || { echo "set-up: tracker does not start"; exit 5; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total --format=csv
echo "set-up: $(( $(date +%s) - t0 )) s"
for step in "$@"; do
  t=$(date +%s)
  case $step in
    gpu_paths)
      timeout 560 python3 benchmarks/gpu_paths.py cuda /tmp/gpu-paths-steps > "$OUT/gpu_paths.log" 2>&1
      echo "gpu_paths rc=$?"; tar -C /tmp -czf "$OUT/gpu_paths_steps.tgz" gpu-paths-steps
      tail -c 6000 "$OUT/gpu_paths.log";;
    gpu_paths=*+*)
      lists=${step#gpu_paths=}
      timeout 480 python3 benchmarks/gpu_paths.py cuda /tmp/gpu-paths-a "${lists%%+*}" > "$OUT/gpu_paths_a.log" 2>&1 &
      timeout 480 python3 benchmarks/gpu_paths.py cuda /tmp/gpu-paths-b "${lists#*+}" > "$OUT/gpu_paths_b.log" 2>&1
      echo "gpu_paths b rc=$?"; wait $!; echo "gpu_paths a rc=$?"
      tar -C /tmp -czf "$OUT/gpu_paths_steps.tgz" gpu-paths-a gpu-paths-b
      tail -c 3000 "$OUT/gpu_paths_a.log"; tail -c 3000 "$OUT/gpu_paths_b.log";;
    gpu_paths=*)
      timeout 420 python3 benchmarks/gpu_paths.py cuda /tmp/gpu-paths-steps "${step#gpu_paths=}" > "$OUT/gpu_paths.log" 2>&1
      echo "gpu_paths rc=$?"; tar -C /tmp -czf "$OUT/gpu_paths_steps.tgz" gpu-paths-steps
      tail -c 6000 "$OUT/gpu_paths.log";;
    cost_b[0-9]*)
      b=${step#cost_b}
      timeout 170 python3 benchmarks/profiling_cost.py cuda "$b" > "$OUT/profiling_cost_b$b.log" 2>&1
      echo "$step rc=$?"; tail -n 2 "$OUT/profiling_cost_b$b.log";;
    layers|layers=*)
      s=200; [ "$step" != layers ] && s=${step#layers=}
      timeout "$s" python3 benchmarks/layer_cost.py cuda > "$OUT/layer_cost.log" 2>&1
      echo "layers rc=$?"; tail -n 2 "$OUT/layer_cost.log";;
    *) echo "unknown step $step";;
  esac
  echo "$step: $(( $(date +%s) - t )) s"
done
