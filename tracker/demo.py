"""``tracker demo``: the main job on the embedded default store.

Profiles a small torchvision network on this machine: whole-network inference at two
batch sizes, and every layer alone on its real input (nested layer runs), with adaptive
stopping. Run twice, it reuses what was measured.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tracker.log.logger import RunLogger
from tracker.profile.api import profile_network
from tracker.profile.stats import Stopping

DEMO_BATCH_SIZES = (1, 4)


def run_demo(logger: RunLogger, model: str = "resnet18", time_cap_s: float = 5.0) -> list[dict]:
    console = Console()
    console.print(f"[bold]tracker demo[/]: store {logger.location.uri}, experiment {logger.experiment.name!r}")
    rule = Stopping(target_ci_rel=0.02, time_cap_s=time_cap_s)
    layer_rule = rule.for_layers()
    results = []
    for i, bs in enumerate(DEMO_BATCH_SIZES):
        with console.status(f"profiling {model} at batch {bs}{' with its layers' if i == 0 else ''}..."):
            res = profile_network(logger, model, bs, rule, layers=(i == 0), layer_rule=layer_rule)
        results.append(res.as_dict())
    table = Table(title=f"{model} inference on cpu")
    for col in ("batch", "latency_ms", "±95% CI", "samples", "stop", "images/s", "run"):
        table.add_column(col)
    for r in results:
        table.add_row(
            str(r["batch_size"]),
            f"{r['latency_ms']:.2f}",
            f"{100 * r['ci_rel']:.1f}%",
            str(r["samples"]),
            str(r["stop_reason"]),
            f"{r['throughput_per_s']:.1f}",
            r["run_id"][:12] + (" (reused)" if r["reused"] else ""),
        )
    console.print(table)
    first = results[0]
    if "layers" in first:
        top = sorted(first["layers"], key=lambda l: -l["latency_ms"])[:5]
        console.print(
            f"{len(first['layers'])} layers timed alone; their sum is {first['sum_of_layers_ratio']:.2f}x the whole network. "
            "Slowest: " + ", ".join(f"{l['name']} {l['latency_ms']:.2f} ms" for l in top)
        )
    console.print("Next: [bold]tracker ui[/] to browse the runs, [bold]tracker runs list[/] to list them.")
    return results
