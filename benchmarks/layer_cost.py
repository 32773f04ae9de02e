"""Device time of a layer-by-layer profile, and whether its layer medians hold up.

``tracker profile layers`` runs each layer alone on a copy of its real input under the layer
rule (``Stopping.for_layers``: 5 % precision at least, 1 s cap, blocks of ``LAYER_BLOCK_S``).
Here every layer of a few networks is measured three ways, one right after another (the order of
the two rules alternating from layer to layer):

- ``reference``: a fixed window, REF_WARMUP_S of warm-up then REF_SAMPLE_S of samples, median;
- ``layer_rule``: the layer rule as ``profile layers`` uses it;
- ``network_blocks``: the same rule on whole networks' blocks (``BLOCK_S``), as layers were
  measured before 0.7.1.

Per rule: its device time, how far each layer's median lies from the reference's (median and
90th percentile over layers) and how far the sum of the layers does. Targets for the layer rule:
90 % of layers within the layer precision (``LAYER_MIN_CI_REL``, 5 %) of the reference, the
sum within 2 %, and at least 3x less device time than on whole networks' blocks.
Usage: python benchmarks/layer_cost.py [cpu|cuda] [BATCH] [THREADS] [ALLOCATOR]  (default cpu,
batch 1, one thread, the C library's allocator; as benchmarks/profiling_cost.py).
Last line: {"layer_rule_device_s": ..., "network_blocks_device_s": ..., "ratio": ..., ...}
"""

import os
import sys

# benchmarks/logging.py is named like the stdlib module: keep this folder behind the standard
# library on the import path (measuring_mode is found there, logging is not).
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))

import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import replace  # noqa: E402

from measuring_mode import measuring_mode  # noqa: E402

NETWORKS = ("resnet18", "mobilenet_v3_small")
REF_WARMUP_S = 0.1
REF_SAMPLE_S = 0.4
TARGET_P90_DIFF = 0.05  # LAYER_MIN_CI_REL
TARGET_SUM_DIFF = 0.02
TARGET_RATIO = 3.0
CPU_THREADS = 1


def reference(fn: Callable[[], object], sync: Callable[[], None]) -> tuple[float, float]:
    """A fixed window: median (ms) and device seconds."""
    start = time.perf_counter()
    while time.perf_counter() - start < REF_WARMUP_S:
        fn()
    sync()
    samples = []
    t_end = time.perf_counter() + REF_SAMPLE_S
    while time.perf_counter() < t_end:
        t0 = time.perf_counter_ns()
        fn()
        sync()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(samples), time.perf_counter() - start


def agreement(medians: list[float], ref: list[float]) -> dict[str, float]:
    diffs = sorted(abs(m - r) / r for m, r in zip(medians, ref))
    return {
        "median_layer_diff_rel": round(statistics.median(diffs), 4),
        "p90_layer_diff_rel": round(diffs[min(len(diffs) - 1, int(0.9 * len(diffs)))], 4),
        "max_layer_diff_rel": round(diffs[-1], 4),
        "sum_diff_rel": round(abs(sum(medians) - sum(ref)) / sum(ref), 4),
    }


def main() -> None:
    device, batch_size, allocator = measuring_mode("layer_cost", CPU_THREADS)
    import torch

    from tracker.profile.network import NetworkSpec, capture_layers
    from tracker.profile.stats import BLOCK_S, Stopping
    from tracker.profile.timing import device_sync, measure
    from tracker.zoo import build_model, resolve

    sync = device_sync(device)
    layer_rule = Stopping(target_ci_rel=0.02, time_cap_s=10.0).for_layers()  # profile layers' defaults
    rules = {"layer_rule": layer_rule, "network_blocks": replace(layer_rule, block_s=BLOCK_S)}
    rows = []
    for name in NETWORKS:
        spec = NetworkSpec(model=name, batch_size=batch_size, input_size=resolve(name).input_size, device=device)
        calls = capture_layers(build_model(name), spec)
        medians: dict[str, list[float]] = {"reference": [], **{k: [] for k in rules}}
        device_s = dict.fromkeys(medians, 0.0)
        with torch.inference_mode():
            for call in calls:
                def fn(c=call) -> object:  # a module alone, or a function layer's calls replayed (0.8.6)
                    return c.run()

                ref_ms, ref_s = reference(fn, sync)
                medians["reference"].append(ref_ms)
                device_s["reference"] += ref_s
                order = list(rules) if call.index % 2 == 0 else list(reversed(rules))
                for key in order:
                    timing = measure(fn, rules[key], sync)
                    medians[key].append(timing.summary.median)
                    device_s[key] += timing.elapsed_s
        row = {"network": name, "layers": len(calls), "function_layers": sum(c.kind == "function" for c in calls),
               "reference_sum_ms": round(sum(medians["reference"]), 4),
               "reference_device_s": round(device_s["reference"], 2)}
        modules = [i for i, c in enumerate(calls) if c.kind == "module"]
        for key in rules:
            row[key] = {"device_s": round(device_s[key], 2), "sum_ms": round(sum(medians[key]), 4),
                        **agreement(medians[key], medians["reference"]),
                        # the modules alone, as layers were before 0.8.6's function layers
                        "modules_p90_layer_diff_rel": agreement([medians[key][i] for i in modules],
                                                                [medians["reference"][i] for i in modules])[
                            "p90_layer_diff_rel"]}
        rows.append(row)
        print(json.dumps(row))
    new = {k: round(sum(r[k]["device_s"] for r in rows), 2) for k in rules}
    p90 = max(r["layer_rule"]["p90_layer_diff_rel"] for r in rows)
    sum_diff = max(r["layer_rule"]["sum_diff_rel"] for r in rows)
    ratio = new["network_blocks"] / new["layer_rule"]
    print(json.dumps({
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "networks": len(rows), "layers": sum(r["layers"] for r in rows), "batch_size": batch_size,
        "threads": torch.get_num_threads(), "allocator": allocator,
        "layer_block_s": layer_rule.block_s, "network_block_s": BLOCK_S,
        "reference_window_s": REF_WARMUP_S + REF_SAMPLE_S,
        "layer_rule_device_s": new["layer_rule"], "network_blocks_device_s": new["network_blocks"],
        "ratio": round(ratio, 1),
        "layer_rule_p90_layer_diff_rel": p90,
        "layer_rule_modules_p90_layer_diff_rel": max(r["layer_rule"]["modules_p90_layer_diff_rel"] for r in rows),
        "function_layers": sum(r["function_layers"] for r in rows),
        "network_blocks_p90_layer_diff_rel": max(r["network_blocks"]["p90_layer_diff_rel"] for r in rows),
        "layer_rule_sum_diff_rel": sum_diff,
        "network_blocks_sum_diff_rel": max(r["network_blocks"]["sum_diff_rel"] for r in rows),
        "meets_target": ratio >= TARGET_RATIO and p90 <= TARGET_P90_DIFF and sum_diff <= TARGET_SUM_DIFF,
    }))


if __name__ == "__main__":
    main()
