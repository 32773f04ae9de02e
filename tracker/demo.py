"""``tracker demo``: the whole flow on the embedded default store, in minutes on a laptop CPU.

1. Campaigns (experiment ``demo``, adaptive stopping, one child process per configuration):
   a dozen torchvision networks, PerfSeer-style generated CNNs and a channel-pruned resnet18
   at two batch sizes, those the fingerprints learn from layer by layer (nested ``layer`` runs:
   the layer-level fingerprint learns from them); one network's training step up to the first
   batch that runs out of a memory cap (``training`` runs).
2. perf4sight's real Jetson TX2 training data imported (experiment ``perf4sight-tx2``).
3. The DuckDB warehouse loaded.
4. Fingerprints trained and registered (latency and memory on this CPU, latency on the TX2),
   leaving a few measured networks out of training entirely.
5. Those unseen networks predicted by the ``champion`` fingerprints, beside their measurements.
6. ``tracker report`` pictures written to ``<runs>/report`` and logged on their runs.

Run twice, nothing is measured or trained again: campaigns skip configurations already
measured and a fingerprint whose training runs are unchanged is kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tracker.errors import TrackerError


@dataclass(frozen=True)
class DemoPlan:
    """What the demo measures and learns (a frozen spec: the same plan, the same configurations)."""

    zoo: tuple[str, ...]
    generated: int  # PerfSeer-style CNNs, seed 0, 224 px
    pruned: tuple[int, ...]  # resnet18 channel-pruned (L1) at these percentages
    batch_sizes: tuple[int, ...]
    #: measured layer by layer at every batch size; None: every network the fingerprints learn from
    #: (the unseen ones are predicted from their description alone, so their layers are not needed)
    layer_networks: tuple[str, ...] | None
    training_network: str
    training_batch_sizes: tuple[int, ...]  # up to the first failure
    training_memory_limit_mb: float | None  # the cap that gives the out-of-memory boundary
    unseen_zoo: tuple[str, ...]  # left out of the fingerprints, then predicted
    unseen_generated: int  # the last N generated networks likewise
    unseen_pruned: tuple[int, ...]
    time_cap_s: float
    precision: float
    tx2: bool  # import perf4sight's TX2 data and fit its latency fingerprint
    targets: tuple[str, ...]  # fingerprint targets on this CPU (inference)
    #: The CPU mode the networks are measured (and the fingerprints learn) in: one torch thread and
    #: the C allocator keeping freed memory, where repeats of a configuration agree best on a small
    #: VM (docs/profiling.md, *Device modes*). The training chain keeps the defaults: it
    #: looks for the batch that runs out of memory under its cap.
    threads: int | None = 1
    allocator: str | None = "retain"


FULL = DemoPlan(
    zoo=("resnet18", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "squeezenet1_1", "shufflenet_v2_x1_0",
         "mnasnet0_5", "mnasnet1_0", "efficientnet_b0", "regnet_x_400mf", "regnet_y_400mf", "googlenet"),
    generated=10, pruned=(25, 50, 75), batch_sizes=(1, 4),
    layer_networks=None,
    training_network="mobilenet_v3_small", training_batch_sizes=(2, 4, 8, 16, 32, 64), training_memory_limit_mb=1000,
    unseen_zoo=("mnasnet1_0", "regnet_y_400mf"), unseen_generated=2, unseen_pruned=(50,),
    time_cap_s=1.0, precision=0.03, tx2=True, targets=("latency_ms", "peak_mem_mb", "network_mem_mb", "tensor_peak_mb"),
)
#: The same flow at a fraction of the cost (the browser test's store; ``tracker demo --quick``).
QUICK = DemoPlan(
    zoo=("mobilenet_v3_small", "squeezenet1_1", "shufflenet_v2_x0_5", "mnasnet0_5"),
    generated=3, pruned=(), batch_sizes=(1,),
    layer_networks=("squeezenet1_1",),
    training_network="squeezenet1_1", training_batch_sizes=(1, 2), training_memory_limit_mb=None,
    unseen_zoo=("mnasnet0_5",), unseen_generated=1, unseen_pruned=(),
    time_cap_s=0.25, precision=0.05, tx2=False, targets=("latency_ms",),
)

EXPERIMENT = "demo"
TX2_EXPERIMENT = "perf4sight-tx2"
TX2_DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "perf4sight-tx2"


@dataclass
class Unseen:
    ref: str  # zoo name or spec file
    name: str
    origin: str  # zoo, generated or pruned


def networks(plan: DemoPlan, folder: Path) -> tuple[list[str], list[Unseen]]:
    """Every network reference of the plan (specs written under ``folder``) and the unseen ones."""
    from tracker.profile.campaign import network_refs
    from tracker.zoo import resolve

    nets: dict[str, Any] = {"zoo": list(plan.zoo)}
    if plan.generated:
        nets["generate"] = {"count": plan.generated, "seed": 0, "input_size": 224}
    if plan.pruned:
        nets["prune"] = {"model": "resnet18", "ratios": list(plan.pruned), "method": "l1", "seed": 0}
    refs = network_refs(nets, "demo", folder / "demo.toml", "demo")
    generated = refs[len(plan.zoo):len(plan.zoo) + plan.generated]
    pruned = dict(zip(plan.pruned, refs[len(plan.zoo) + plan.generated:]))
    unseen = [Unseen(z, z, "zoo") for z in plan.unseen_zoo]
    unseen += [Unseen(r, resolve(r).name, "generated") for r in generated[len(generated) - plan.unseen_generated:]]
    unseen += [Unseen(pruned[p], resolve(pruned[p]).name, "pruned") for p in plan.unseen_pruned]
    return refs, unseen


def campaigns(plan: DemoPlan, refs: list[str], unseen: list[Unseen]) -> list[Any]:
    """The demo's campaigns, in the order they run: layers first (their network runs are then
    already measured for the inference campaign), whole networks, the training chain."""
    from tracker.profile.campaign import Campaign

    common = {"path": Path("demo.toml"), "precision": plan.precision, "time_cap_s": plan.time_cap_s, "timeout_s": 300.0}
    mode = {"threads": [plan.threads], "allocator": plan.allocator}
    left_out = {u.ref for u in unseen}
    layered = [r for r in refs if r not in left_out] if plan.layer_networks is None else list(plan.layer_networks)
    return [
        Campaign(name="demo-layers", description="layer by layer", networks=layered,
                 batch_sizes=list(plan.batch_sizes), layers=True, **mode, **common),
        Campaign(name="demo-inference", description="whole networks", networks=refs,
                 batch_sizes=list(plan.batch_sizes), **mode, **common),
        Campaign(name="demo-training", description="training step up to the first failure",
                 networks=[plan.training_network], phases=["training"], batch_sizes=list(plan.training_batch_sizes),
                 till_first_fail=True, memory_limit_mb=plan.training_memory_limit_mb, **common),
    ]


def for_this_machine(plan: DemoPlan) -> tuple[DemoPlan, str | None]:
    """The plan as this machine can run it, and what was changed, if anything: where the C library
    cannot keep freed memory (no glibc ``mallopt``: macOS, musl), its own allocator."""
    from tracker.profile.modes import allocator_available

    if plan.allocator and not allocator_available(plan.allocator):
        return replace(plan, allocator=None), (f"this C library cannot keep freed memory as allocator "
                                               f"{plan.allocator!r} asks (no glibc mallopt): measuring with its own")
    return plan, None


def run_demo(tracking_uri: str | None, plan: DemoPlan = FULL, runs_folder: Path | None = None,
             warehouse: Path | None = None, tx2_folder: Path | None = None, report_folder: Path | None = None,
             to_stderr: bool = False) -> dict[str, Any]:
    """Run the whole flow; returns what it printed as data (for tests and ``--format json``,
    which prints the running commentary on stderr)."""
    from rich.text import Text

    from tracker.console import wide_console

    from tracker.log.logger import RunLogger
    from tracker.profile.campaign import campaign_progress, run_campaign
    from tracker.settings import store_files, store_words, warehouse_path

    console = wide_console(132, stderr=to_stderr)  # a log file or CI: wide enough for the table
    warehouse = warehouse_path(warehouse, tracking_uri)  # refused here, not after the measuring
    # with the store (./runs of the current folder until 0.9.11, whatever store --tracking-uri named)
    beside, suffix = store_files(tracking_uri)
    folder = runs_folder or beside
    report_folder = report_folder or folder / f"report{suffix}"
    from tracker.profile import zygote_client

    zygote_client.prestart()  # its imports overlap the store's opening and the networks' describing
    logger = RunLogger(tracking_uri, EXPERIMENT)
    logger.require_artifacts_here()
    uri = logger.location.uri
    store = store_words(uri)  # before MLflow, training a fingerprint, sets MLFLOW_TRACKING_URI to this store
    started = time.monotonic()
    steps: dict[str, float] = {}
    summary: dict[str, Any] = {"store": uri, "experiment": EXPERIMENT, "warehouse": str(warehouse)}
    console.print(Text.assemble(("tracker demo", "bold"), f": store {uri}, experiment {EXPERIMENT!r}"))
    plan, note = for_this_machine(plan)
    if note:
        console.print(f"  {note}")

    t = time.monotonic()
    refs, unseen = networks(plan, folder)
    tallies = {}
    said_older = False
    try:
        for c in campaigns(plan, refs, unseen):
            with campaign_progress(c.name, prefix=f"{c.name}: ", console=console, transient=True) as progress:
                tally = run_campaign(logger, c, progress=progress)
            tallies[c.name] = tally.as_dict()
            console.print(f"  {c.name}: {tally.measured} measured, {tally.failed} failed, {tally.skipped} already "
                          f"measured or past a failure, of {tally.total}")
            if tally.measured_again:
                console.print(f"    {tally.again_said()}")
            if tally.older_network_mem:  # a store an earlier demo measured (since 0.9.27); why, said once (0.9.30)
                console.print(f"    {tally.older_said(again=said_older)}")
                said_older = True
            if tally.interrupted:
                raise KeyboardInterrupt
    finally:
        logger.close()
    summary["campaigns"] = tallies
    steps["measure"] = time.monotonic() - t

    if plan.tx2:
        t = time.monotonic()
        summary["tx2"] = _import_tx2(console, tracking_uri, tx2_folder or TX2_DATA)
        steps["import_tx2"] = time.monotonic() - t

    t = time.monotonic()
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    loaded = load(warehouse, open_source(logger.location))
    console.print(f"  warehouse {warehouse}: {loaded.runs_total} runs ({loaded.runs_changed} new or changed)")
    steps["warehouse"] = time.monotonic() - t

    t = time.monotonic()
    # An unseen network none of whose measurements succeeded has nothing to leave out.
    # The mode the demo measured in: other modes measured in this store are not learnt from.
    from tracker.profile.modes import read_mode

    mode = read_mode("cpu", plan.threads, plan.allocator).mode_id
    measured = measured_rows(warehouse, [u.name for u in unseen], "inference", "cpu", mode)
    jobs = [(target, "inference", "cpu", sorted({m for (m, _), row in measured.items() if row.get(target) is not None}),
             mode) for target in plan.targets]
    if plan.tx2 and summary.get("tx2"):
        jobs.append(("latency_ms", "training", "jetson-tx2", [], None))
    summary["fingerprints"] = [_fingerprint(console, warehouse, uri, *job) for job in jobs]
    steps["fingerprints"] = time.monotonic() - t

    t = time.monotonic()
    summary["unseen"] = _unseen_table(console, measured, uri, unseen, plan)
    steps["predict_unseen"] = time.monotonic() - t

    t = time.monotonic()
    from tracker.report.build import build_report, report_counts

    report = build_report(warehouse, report_folder, uri)
    summary["report"] = report.to_dict()
    console.print(f"  report: {len(report.pictures)} pictures in {report_folder} ({report_counts(summary['report'])})")
    steps["report"] = time.monotonic() - t

    summary["steps_s"] = {k: round(v, 1) for k, v in steps.items()}
    summary["total_s"] = round(time.monotonic() - started, 1)
    console.print(f"done in {summary['total_s']:.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in steps.items()) + ")")
    # two runs of one network, at the smallest and the largest batch, to compare
    small, large = min(plan.batch_sizes), max(plan.batch_sizes)
    pair = next(((u.name, measured[(u.name, small)]["run_id"], measured[(u.name, large)]["run_id"]) for u in unseen
                 if small != large and (u.name, small) in measured and (u.name, large) in measured), None)
    _next_steps(console, unseen, max(plan.batch_sizes), pair, memory="peak_mem_mb" in plan.targets,
                store=store, report_folder=report_folder)
    return summary


def _import_tx2(console: Any, tracking_uri: str | None, folder: Path) -> dict[str, int] | None:
    from tracker.imports.perf4sight import import_perf4sight
    from tracker.log.logger import RunLogger

    if not (folder / "architectures.json.gz").exists():
        console.print(f"  TX2 data not found at {folder}: its import and fingerprint are skipped")
        return None
    tx2 = RunLogger(tracking_uri, TX2_EXPERIMENT)
    try:
        tx2.require_artifacts_here()
        stats = import_perf4sight(tx2, folder)
    finally:
        tx2.close()
    waiting = f", {stats['in_outbox']} waiting in the outbox (tracker sync sends them)" if stats["in_outbox"] else ""
    console.print(f"  perf4sight TX2 data: {stats['imported']} runs imported, {stats['already_present']} already there"
                  f"{waiting} (experiment {TX2_EXPERIMENT!r})")
    return stats


def _fingerprint(console: Any, warehouse: Path, uri: str, target: str, phase: str, device: str,
                 exclude: list[str], mode: str | None) -> dict[str, Any]:
    """Train a fingerprint unless the champion learnt from exactly these runs already."""
    from mlflow.tracking import MlflowClient

    from tracker.fingerprint.train import champion_version, registered_name, runs_digest, train, training_rows

    name = registered_name(target, phase, device)
    try:
        digest = runs_digest(training_rows(warehouse, target, phase, device, exclude, mode))
        current = champion_version(MlflowClient(uri), name)
        if current is not None and current.tags.get("runs_digest") == digest:
            out = {"name": name, "version": str(current.version), "reused": True, "champion": True,
                   "heldout_mape_pct": float(current.tags.get("heldout_mape_pct", "nan")),
                   "heldout_within_10pct": float(current.tags.get("heldout_within_10pct", "nan"))}
            console.print(f"  fingerprint {name}: version {current.version} (champion) already learnt from these runs; "
                          f"held-out MAPE {out['heldout_mape_pct']:.1f} %")
            return out
        result = train(warehouse, target, phase, device, uri, exclude=exclude, mode=mode)
    except TrackerError as exc:  # too little data for one target does not stop the others
        console.print(f"  fingerprint {name}: not trained: {exc}")
        return {"name": name, "error": str(exc)}
    e = result.evaluation
    console.print(f"  fingerprint {name}: version {result.version}, held-out networks MAPE {e['mape_pct']:.1f} % "
                  f"({e['within_10pct']:.0f} % within ±10 %, ExtraTrees {result.baseline['mape_pct']:.1f} %); "
                  + ("champion: " if result.champion else "not champion: ") + result.champion_reason)
    if "as_measured_mape_pct" in e:  # its labels put at the machine's median speed: as measured, beside
        console.print(f"    (latency put at the machine's median speed, speed probe {result.speed_reference_ms:.3g} ms; "
                      f"against the latencies as measured: {e['as_measured_mape_pct']:.1f} %, "
                      f"{e['as_measured_within_10pct']:.0f} % within ±10 %)")
    return {"name": name, "version": result.version, "reused": False, "champion": result.champion,
            "heldout_mape_pct": e["mape_pct"], "heldout_within_10pct": e["within_10pct"],
            **({"speed_reference_ms": result.speed_reference_ms, "heldout_as_measured_mape_pct": e["as_measured_mape_pct"],
                "heldout_as_measured_within_10pct": e["as_measured_within_10pct"]} if "as_measured_mape_pct" in e else {})}


def measured_rows(warehouse: Path, names: list[str], phase: str, device: str,
                  mode: str | None = None) -> dict[tuple[str, int], dict[str, Any]]:
    """Latest measurements of these networks, by (model, batch size); ``mode``: in that device mode only."""
    from tracker.warehouse.load import connect

    con = connect(warehouse, read_only=True)
    try:
        cur = con.execute("SELECT model, CAST(batch_size AS BIGINT), latency_ms, latency_ci_rel, peak_mem_mb, network_mem_mb, "
                          "tensor_peak_mb, run_id, speed_probe_ms, speed_probe_version "
                          "FROM latest_measurements WHERE phase = $phase AND device = $device "
                          "AND ($mode IS NULL OR mode = $mode) AND list_contains($names, model)",
                          {"phase": phase, "device": device, "names": names, "mode": mode})
        rows = cur.fetchall()
    finally:
        con.close()
    return {(m, int(b)): {"latency_ms": lat, "ci_rel": ci, "peak_mem_mb": mem, "network_mem_mb": own,
                          "tensor_peak_mb": tensors, "run_id": rid, "speed_probe_ms": probe, "speed_probe_version": version}
            for m, b, lat, ci, mem, own, tensors, rid, probe, version in rows}


def _unseen_table(console: Any, measured: dict[tuple[str, int], dict[str, Any]], uri: str, unseen: list[Unseen],
                  plan: DemoPlan) -> list[dict[str, Any]]:
    """Predict the networks no fingerprint learnt from and print them beside their measurements
    (``measured``: their rows from :func:`measured_rows`)."""
    from rich.table import Table

    from tracker.fingerprint.predict import champions, check_probe_versions, predict

    if not unseen:
        return []
    try:
        models = champions(uri, "inference", "cpu")
    except TrackerError as exc:
        console.print(f"  no prediction of unseen networks: {exc}")
        return []
    table = Table(title="Networks the fingerprints never saw: predicted vs measured (inference, this CPU)")
    for col in ("network", "origin", "batch", "measured ms", "predicted ms", "error", "measured MB", "predicted MB", "error "):
        table.add_column(col, justify="left" if col in ("network", "origin") else "right")
    rows = []
    other_probe: list[str] = []  # why a run's probe could not put a prediction at its speed (another probe version)
    for u in unseen:
        for bs in plan.batch_sizes:
            m = measured.get((u.name, bs))
            if m is None:
                continue  # its measurement failed: nothing to compare with
            # latency at the machine's speed when the network was measured (its speed probe), where the
            # fingerprint learnt at a reference speed: what is compared is the network, not the machine's moods
            probe_ms = m.get("speed_probe_ms")
            if probe_ms is not None:  # a run that timed another version of the probe than the fingerprint learnt at:
                try:  # predicted at the fingerprint's reference speed instead, and said (rescaled until 0.9.12)
                    check_probe_versions(models, m.get("speed_probe_version"))
                except TrackerError as exc:
                    other_probe.append(str(exc).split(":")[0])
                    probe_ms = None
            result = predict(uri, u.ref, bs, "inference", "cpu", models=models, speed_probe_ms=probe_ms,
                             speed_probe_version=m.get("speed_probe_version"))
            p, beyond = result["predictions"], result["outside_trained_range"]
            row = {"model": u.name, "origin": u.origin, "batch_size": bs, "measured_latency_ms": m["latency_ms"],
                   "predicted_latency_ms": p.get("latency_ms"), "measured_peak_mem_mb": m["peak_mem_mb"],
                   "predicted_peak_mem_mb": p.get("peak_mem_mb"), "measured_network_mem_mb": m["network_mem_mb"],
                   "predicted_network_mem_mb": p.get("network_mem_mb"), "measured_tensor_peak_mb": m.get("tensor_peak_mb"),
                   "predicted_tensor_peak_mb": p.get("tensor_peak_mb"),
                   "outside_trained_range": {t: sorted(found) for t, found in beyond.items()}}
            if "latency_ms" in result.get("predictions_at_reference_speed", {}):
                row["predicted_latency_at_reference_ms"] = result["predictions_at_reference_speed"]["latency_ms"]
            rows.append(row)
            table.add_row(u.name, u.origin, str(bs), f"{m['latency_ms']:.2f} ±{100 * (m['ci_rel'] or 0):.0f}%",
                          *_pair(row["predicted_latency_ms"], m["latency_ms"], ".2f", "latency_ms" in beyond),
                          "" if m["peak_mem_mb"] is None else f"{m['peak_mem_mb']:.0f}",
                          *_pair(row["predicted_peak_mem_mb"], m["peak_mem_mb"], ".0f", "peak_mem_mb" in beyond))
    console.print(table, soft_wrap=False)  # its title centred over it, as in a terminal
    if any(r["outside_trained_range"] for r in rows):
        console.print("  * beyond the span its fingerprint learnt from (batch size, parameters, FLOPs or "
                      "activations): extrapolated")
    for target, what in (("latency_ms", "latency"), ("network_mem_mb", "the network's own memory (peak less the process)"),
                         ("tensor_peak_mb", "its tensors' peak (the same in every process)")):
        errs = [abs(r[f"predicted_{target}"] / r[f"measured_{target}"] - 1) for r in rows
                if r[f"predicted_{target}"] and r[f"measured_{target}"]]
        if errs:
            console.print(f"  {what} of unseen networks: MAPE {100 * sum(errs) / len(errs):.1f} %, "
                          f"{sum(e <= 0.1 for e in errs)} of {len(errs)} within ±10 %")
    if other_probe:
        from tracker.console import counted

        console.print(f"  {counted(len(other_probe), 'latency', 'latencies')} predicted at the fingerprint's median speed, "
                      f"not at the speed each was measured at ({other_probe[0]})")
    at_reference = [abs(r["predicted_latency_at_reference_ms"] / r["measured_latency_ms"] - 1) for r in rows
                    if r.get("predicted_latency_at_reference_ms") and r["measured_latency_ms"]]
    if at_reference:  # the latency predicted at the machine's median speed, against each as it was measured
        console.print("  latency predicted at the speed each was measured at (its speed probe); at the machine's median "
                      f"speed instead: MAPE {100 * sum(at_reference) / len(at_reference):.1f} %, "
                      f"{sum(e <= 0.1 for e in at_reference)} of {len(at_reference)} within ±10 %")
    return rows


def _pair(predicted: float | None, measured: float | None, spec: str, beyond: bool = False) -> tuple[str, str]:
    """A prediction and its error against the measurement; ``*`` marks one beyond the span learnt."""
    if predicted is None or measured is None:
        return ("", "")
    return (format(predicted, spec) + ("*" if beyond else ""), f"{100 * (predicted / measured - 1):+.0f}%")


#: Where the words of the next steps start, after two spaces of indent: a longer command has them
#: on the line below it.
NEXT_COLUMN = 44


def _next_steps(console: Any, unseen: list[Unseen], batch_size: int, pair: tuple[str, str, str] | None = None,
                memory: bool = True, store: list[str] | None = None, report_folder: Path | None = None) -> None:
    """What to try next, each command's words at ``NEXT_COLUMN``; ``pair``: a network and two of its
    runs (ids) to compare; ``memory``: whether a memory fingerprint was learnt (``--largest-batch``
    needs one); ``store``: the words naming the demo's store (``settings.store_words``), after
    ``tracker`` in each command; ``report_folder``: where the demo drew its report."""
    import os

    from rich.text import Text

    from tracker.console import shell_line, shell_word

    example = unseen[0].name if unseen and unseen[0].origin == "zoo" else "resnet50"
    report = "runs/report" if report_folder is None else os.path.relpath(report_folder)
    if report.startswith(".."):  # outside the folder the demo ran in: where it is
        report = str(report_folder)
    steps = [("tracker ui", "browse the runs: experiment 'demo', layer runs nested under their network,"),
             ("", "Models tab: fingerprints with their 'champion' alias"),
             ('tracker sql "SELECT model, batch_size, latency_ms, peak_mem_mb FROM latest_measurements '
              'ORDER BY latency_ms LIMIT 10"', ""),
             (f"tracker predict {example} --batch-size {batch_size}",
              f"a network's {'latency and memory' if memory else 'latency'} without running it")]
    if memory:
        steps.append((f"tracker predict {example} --largest-batch", "the largest batch predicted to fit in memory"))
    steps += [("tracker profile network squeezenet1_1 --trace", "where its time goes, operator by operator (torch.profiler)"),
              (f"tracker report {shell_word(report)}", f"the pictures again (open {os.path.join(report, 'index.html')})"),
              ("tracker views", "every SQL view of the warehouse")]
    if pair:
        steps.append((f"tracker -e {EXPERIMENT} runs compare {pair[1][:8]} {pair[2][:8]}",
                      f"{pair[0]} at two batch sizes side by side (pyperf-style)"))
    lines = []
    program = "tracker" + (f" {shell_line(*store)}" if store else "")
    for command, words in steps:
        command = program + command.removeprefix("tracker") if command.startswith("tracker") else command
        if words and len(command) + 2 > NEXT_COLUMN:  # the words on a line of their own, at the column
            lines += [f"  {command}", " " * (NEXT_COLUMN + 2) + words]
        else:
            lines.append(f"  {command:<{NEXT_COLUMN}}{words}".rstrip())
    console.print(Text.assemble("\n", ("Next", "bold"), "\n" + "\n".join(lines)))
