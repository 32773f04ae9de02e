"""Where a GPU measurement's drift comes from: the host's CPU or the GPU's clock.

Runs each (network, batch) for 20 s on cuda:0 and prints a JSON line a second: the median wall
time of an iteration (synchronised), the launching thread's own CPU time inside the step
(``time.thread_time_ns``: work done, not waited), the device's time between CUDA events at the
step's ends, the SM clock and clock-event (throttle) reasons from NVML, and the host's reported
MHz. Where the thread's CPU time moves with the wall time at a steady SM clock, the host's speed
is what moved (README, "Host-bound or device-bound"). Needs a GPU; run from the repository root:
``python tools/drift_probe.py``.
"""
import json
import statistics
import time

import pynvml
import torch

from tracker.zoo import build_model

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
for name, b in (("shufflenet_v2_x0_5", 256), ("resnet18", 1), ("shufflenet_v2_x0_5", 1)):
    m = build_model(name).cuda().eval()
    x = torch.randn(b, 3, 224, 224, device="cuda")
    with torch.inference_mode():
        for _ in range(20):
            m(x)
        torch.cuda.synchronize()
        t_end = time.perf_counter() + 20
        sec_end = time.perf_counter() + 1
        wall, cpu, gpu_ms = [], [], []
        while time.perf_counter() < t_end:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter_ns(); c0 = time.thread_time_ns()
            e0.record(); m(x); e1.record()
            c1 = time.thread_time_ns()
            torch.cuda.synchronize()
            wall.append((time.perf_counter_ns() - t0) / 1e6); cpu.append((c1 - c0) / 1e6)
            gpu_ms.append(e0.elapsed_time(e1))
            if time.perf_counter() >= sec_end:
                sm = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
                thr = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons; thr = thr(h)
                mhz = [float(l.split(":")[1]) for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")]
                print(json.dumps({"net": name, "b": b, "n": len(wall), "wall_ms": round(statistics.median(wall), 3),
                                  "launch_cpu_ms": round(statistics.median(cpu), 3),
                                  "event_ms": round(statistics.median(gpu_ms), 3), "sm_mhz": sm, "reasons": hex(thr),
                                  "host_mhz_med": round(statistics.median(mhz))}), flush=True)
                wall, cpu, gpu_ms = [], [], []
                sec_end = time.perf_counter() + 1
    del m, x
