"""Which speed probe follows a host-bound GPU measurement's drift: the GPU probe's wall time (what
``speed_probe_ms`` records on cuda), its host part (the probe's call until it returned, before the
device was waited on), or the CPU probe on one thread.

For SECONDS (default 90), one-second windows of NETWORK at batch 1 on cuda:0 (median wall time of a
synchronised iteration), each followed by one bracket of each probe (``PROBE_RUNS`` runs). Prints a
JSON line per window, then one with the correlation of each probe's log with the network's log over
the windows, and each one's spread (max/min - 1). Needs a GPU; run from the repository root:
``python tools/host_drift.py [NETWORK] [SECONDS]``. On an H200 (2026-11-30, resnet18, 97 windows): the
network 1.19 to 1.84 ms; correlations 0.62 (the probe's wall time), 0.65 (its host part), 0.52 (the
CPU probe); the network's log-sd 0.065, divided by each 0.058, 0.110 and 0.090: the recorded probe
steadies it best, so no host probe was added (README, "Host-bound or device-bound").
"""
import json
import math
import statistics
import sys
import time

import torch

from tracker.profile.probe import PROBE_RUNS, SpeedProbe
from tracker.zoo import build_model

name = sys.argv[1] if len(sys.argv) > 1 else "resnet18"
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 90.0
torch.set_num_threads(1)
clock = time.perf_counter_ns
net = build_model(name).cuda().eval()
x = torch.randn(1, 3, 224, 224, device="cuda")
gpu_probe, cpu_probe = SpeedProbe("cuda"), SpeedProbe("cpu")
module, px = gpu_probe.module.cuda(), gpu_probe.x.cuda()
rows = []
with torch.inference_mode():
    for _ in range(20):
        net(x)
        module(px)
    torch.cuda.synchronize()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        wall = []
        stop = time.perf_counter() + 1.0
        while time.perf_counter() < stop:
            torch.cuda.synchronize()
            t0 = clock()
            net(x)
            torch.cuda.synchronize()
            wall.append((clock() - t0) / 1e6)
        host, probe_wall = [], []
        for _ in range(PROBE_RUNS):
            torch.cuda.synchronize()
            t0 = clock()
            module(px)
            t1 = clock()
            torch.cuda.synchronize()
            host.append((t1 - t0) / 1e6)
            probe_wall.append((clock() - t0) / 1e6)
        cpu = cpu_probe.sample()
        row = {"network_ms": statistics.median(wall), "n": len(wall), "probe_ms": statistics.median(probe_wall),
               "probe_host_ms": statistics.median(host), "cpu_probe_ms": statistics.median(cpu)}
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
logs = {k: [math.log(r[k]) for r in rows] for k in ("network_ms", "probe_ms", "probe_host_ms", "cpu_probe_ms")}
print(json.dumps({"network": name, "windows": len(rows),
                  "spread": {k: round(max(r[k] for r in rows) / min(r[k] for r in rows) - 1, 3) for k in logs},
                  "correlation_with_network": {k: round(statistics.correlation(logs["network_ms"], v), 3)
                                               for k, v in logs.items() if k != "network_ms"}}))
