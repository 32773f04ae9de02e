"""``tracker profile``: measure one network configuration (in a child process) and log it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tracker.cli.options import (
    Allocator,
    AllocatorOption,
    BatchSizeOption,
    DeviceOption,
    Dtype,
    DtypeOption,
    FormatOption,
    InputSizeOption,
    MinSamplesOption,
    MEASUREMENT_FAILED,
    OneConfiguration,
    OutputFormat,
    Phase,
    PrecisionOption,
    TimeCapOption,
    emit_json,
    exit_if_waiting,
    exit_interrupted,
    finite,
    memory_limit,
    model_reference,
    option_values,
    path_text,
    state,
)
from tracker.console import counted, per
from tracker.profile.stats import MIN_SAMPLES
from tracker.settings import MAX_BATCH, MAX_TIMEOUT_S, MIN_MEMORY_LIMIT_MB, MIN_TIMEOUT_S

app = typer.Typer(help="Measure networks on this machine and log each measurement as an MLflow run.", no_args_is_help=True)


ModelArg = Annotated[str, typer.Argument(callback=model_reference, help="Zoo model name (see `tracker zoo list`), network spec file, or FILE.py:NAME: a callable of your file that returns the torch.nn.Module.")]
ThreadsOption = Annotated[Optional[int], typer.Option("--threads", help="CPU threads (the CPU mode); default: torch's.")]
TimeoutOption = Annotated[float, typer.Option("--timeout", min=MIN_TIMEOUT_S, max=MAX_TIMEOUT_S, callback=finite, help="Seconds before a configuration's child is killed.")]
AgainOption = Annotated[bool, typer.Option(
    "--again", help="Measure even if this configuration was measured: a new run beside the old ones "
                    "(a repeat at another time; with layers if the run it repeats had them; "
                    "latest_measurements keeps the newest, measurements all).")]
TraceOption = Annotated[bool, typer.Option(
    "--trace", help="Also trace 3 iterations with torch.profiler after the measurement (which it does not "
                    "slow): artifacts trace/trace.json (open in ui.perfetto.dev) and trace/ops.json (time per "
                    "operator); prints the slowest operators. A configuration measured before is measured "
                    "again, as a repeat.")]
MemLimitOption = Annotated[
    Optional[float], typer.Option("--memory-limit-mb", min=MIN_MEMORY_LIMIT_MB, callback=memory_limit, help="Cap the memory the measuring child may add (a smaller device): resident memory in a "
                                                      "cgroup of its own where one can be made, else address space "
                                                      "(TRACKER_MEMORY_CAP=address-space); on --device cuda, the GPU "
                                                      "memory torch's allocator may hold. Beyond it is out of memory.")
]


def _check(model: str, device: str, input_size: int | None = None, phase: Phase = Phase.inference,
           dtype: Dtype = Dtype.float32, threads: int | None = None, memory_limit_mb: float | None = None) -> None:
    """Bad input is refused before the store is opened (a typo creates nothing); then the zygote
    starts, its imports overlapping the store's opening."""
    from tracker.profile import memcap, zygote_client
    from tracker.profile.api import describe_early
    from tracker.profile.device import check_device
    from tracker.profile.modes import validate_threads
    from tracker.profile.network import check_format
    from tracker.zoo import resolve

    model_ref = resolve(model)
    check_device(device)
    if threads is not None:  # refused after the store and the experiment were made, until 0.9.6
        with option_values():
            validate_threads(threads)
    with option_values():  # options that do not go together: a usage error, status 2 (1 until 0.9.10)
        check_format(dtype.value, phase.value, device)  # int8 in training: before the store, as plan says it
    # the environment's settings too (a bad one refused after the store, a mode run and the experiment
    # were made, until 0.9.8): TRACKER_ZYGOTE, TRACKER_ZYGOTE_IDLE_S where zygotes are on (prestart
    # passes over them), TRACKER_MEMORY_CAP where capped
    if zygote_client.enabled():
        zygote_client.idle_close_s()
    if memory_limit_mb:
        memcap.cap_choice()
    zygote_client.prestart()
    describe_early(model_ref, input_size)  # one of your own, or at another size: while the zygote imports, before the store


#: Page faults per iteration from which a measurement in the C library's allocator mode says
#: that ``--allocator retain`` exists (retaining: about none; glibc's defaults: 1,000 and more).
PAGE_FAULT_HINT = 100


def _telemetry_text(data: dict) -> str:
    """What the telemetry measured, for a profile's line: nothing of what it could not."""
    parts = []
    if data.get("power_w") is not None:
        parts.append(f"{data['power_w']:.1f} W")
    if data.get("energy_per_iter_j") is not None:
        parts.append(f"{data['energy_per_iter_j']:.3g} J per iteration")
    for key, what in (("gpu_util_pct", "GPU"), ("cpu_util_pct", "CPUs")):
        if data.get(key) is not None:
            parts.append(f"{what} {data[key]:.0f} % busy")
    if data.get("gpu_sm_clock_mhz") is not None:
        low = data.get("gpu_sm_clock_min_mhz")
        parts.append(f"SM clock {data['gpu_sm_clock_mhz']:,.0f} MHz" + (f" (lowest {low:,.0f})" if low is not None
                                                                         and low < data["gpu_sm_clock_mhz"] else ""))
    return "".join(f", {p}" for p in parts)


def _size_words(data: dict) -> str:
    """`` at 64 px`` where the input is not the usual 224 pixels (or its shape, not images), and
    `` in bfloat16`` where the number format is not float32: what a run's line says it measured."""
    from tracker.profile.records import USUAL_INPUT_SIZE

    size = f" at {data['input_size']} px" if data.get("input_size") not in (None, USUAL_INPUT_SIZE) else ""
    if data.get("input_shape"):  # not images
        ids = f" token ids (of {data['input_vocab']:,})" if data.get("input_vocab") else ""
        size = f" on {data['input_shape']}{ids} inputs"
    if data.get("dtype", "float32") != "float32":  # --dtype
        size += f" in {data['dtype']}"
    return size


def _report(data: dict, fmt: OutputFormat) -> None:
    from tracker.profile.records import bound_by_host
    from tracker.profile.stats import HOST_BOUND_SHARE

    if fmt is OutputFormat.json:
        emit_json(data)
        for line in _notes(data):  # beside the JSON, on stderr (unsaid until 0.9.6), as a campaign's commentary
            typer.echo(line, err=True)
        return
    size = _size_words(data)
    mode = f" in mode {data['mode']}" if data.get("mode") else ""
    reused = " (already measured: reused)" if data.get("reused") else ""  # a failure too (unsaid until 0.9.8)
    if data["status"] != "FINISHED":  # said as a measured line says what it measured (its size, its mode)
        why = f": {data['failure_message']}" if data.get("failure_message") else ""
        typer.echo(f"{data['model']} bs{data['batch_size']}{size} {data['phase']}{mode}: FAILED "
                   f"({data.get('failure_reason')}{why}){reused}; run {data['run_id']} (tracker runs show "
                   f"{data['run_id'][:12]}: its stderr)")
        for line in _notes(data):
            typer.echo(line)
        return
    note = reused
    mem = f", peak {data['peak_mem_mb']:.0f} MB" if data.get("peak_mem_mb") else ""
    if data.get("network_mem_mb") is not None:  # what the network added to the process's peak
        mem += f" ({data['network_mem_mb']:,.0f} MB of it the network's"
        if data.get("tensor_peak_mb") is not None:  # its tensors alone, at the busiest operator (since 0.9.31)
            mem += f", its tensors {data['tensor_peak_mb']:,.1f} MB at most"
        mem += ")"
    if data.get("memory_cap_used_mb") is not None:  # how much of a resident cap it took
        mem += f" ({data['memory_cap_used_mb']:,.0f} of its {data['memory_limit_mb']:g} MB cap)"
    if data.get("page_faults_per_iter_count") is not None:
        faults = data["page_faults_per_iter_count"]
        mem += f", {per(faults, 'page fault', 'iteration')}"
    tail = "".join(f", p{q} {data[f'latency_p{q}_ms']:.3f} ms" for q in (90, 99) if f"latency_p{q}_ms" in data)
    mem += _telemetry_text(data)
    if data.get("host_share_pct") is not None:  # on a device: how much of each iteration the host's launching took
        mem += f", host {data['host_share_pct']:.0f} % of each iteration"
    typer.echo(
        f"{data['model']} bs{data['batch_size']}{size} {data['phase']}{mode}: {data['latency_ms']:.3f} ms median, "
        f"±{100 * data['ci_rel']:.1f}% (95% CI){tail}, {data['samples']} samples, stopped on {data['stop_reason']}{mem}{note}; "
        f"run {data['run_id']}"
    )
    for line in _notes(data):
        typer.echo(line)
    if "layers" in data:
        split = any(r.get("host_share_pct") is not None for r in data["layers"])  # on a device
        bound = sum(bound_by_host(r) for r in data["layers"])
        functions = [r for r in data["layers"] if r.get("kind") == "function"]
        total_ms = sum(r.get("latency_ms", 0.0) for r in data["layers"])
        typer.echo(f"{counted(len(data['layers']), 'layer run')}; sum of layers / network = {data['sum_of_layers_ratio']:.2f}"
                   + (f"; {len(functions)} of them the torch functions modules called between their layers "
                      f"({100 * sum(r.get('latency_ms', 0.0) for r in functions) / total_ms:.0f} % of the sum)"
                      if functions and total_ms else "")
                   + (f"; {bound} of them bound by the host (launching took {100 * HOST_BOUND_SHARE:.0f} % or more "
                      "of their time)" if split else ""))
        _layers_table(data["layers"])
    if "trace" in data:
        if "error" in data["trace"]:
            typer.echo(f"no trace: torch.profiler failed ({data['trace']['error']}); the measurement stands")
        else:
            _trace_table(data["trace"], data["latency_ms"])


def _notes(data: dict) -> list[str]:
    """What a measured network's figures mean that they do not say: many page faults, a latency bound
    by the host, other work beside it."""
    from tracker.profile.records import beside_other_work, bound_by_host, other_work_note

    # how its child ended, where its run says (its layers lost with a killed child, a child killed after
    # its result): the run's tag alone until 0.9.8
    notes = [f"note: {data['child_note']}"] if data.get("child_note") else []
    if data["status"] != "FINISHED":
        return notes
    faults = data.get("page_faults_per_iter_count")
    if faults is not None and faults >= PAGE_FAULT_HINT and not str(data["mode"]).endswith("-retain"):
        notes.append(f"note: {faults:,.0f} page faults per iteration: the C library's allocator hands freed activations "
                     "back and faults them in again every iteration, at a cost that moves with the host; "
                     "--allocator retain keeps them (a mode of its own)")
    if bound_by_host(data):
        notes.append(f"note: the host spent {data['host_share_pct']:.0f} % of each iteration launching its work and the "
                     "device waited on it: this latency is bound by the host's CPU, not the device (it moves with the "
                     "host's speed; a larger batch puts the work on the device)")
    if beside_other_work(data):
        notes.append(other_work_note(data, "this may be slower than the machine alone would run it"))
    return notes


#: Kernels a traced profile prints (all of them are in the ops artifact), and how much of each
#: name: a C++ template kernel's name runs to hundreds of characters.
TOP_KERNELS = 5
KERNEL_NAME_CHARS = 100
#: Under this share of a traced iteration busy, a GPU measurement is said to be the host's (resnet18 at
#: batch 1 on an H200: about 0.4 ms of kernels in a 2.3 ms iteration).
HOST_BOUND_BUSY = 0.5


#: Layers `profile layers` prints, the slowest first (every one is in --format json and view layer_latency).
TOP_LAYERS = 10
OP_CHARS = 40


def _layers_table(layers: list[dict[str, Any]]) -> None:
    """The slowest layers alone: where the network's time goes, as DNN stats and torch.profiler print it."""
    from rich.table import Table

    from tracker.console import clipped, wide_console

    timed = [r for r in layers if r.get("latency_ms") is not None]
    if not timed:
        return
    total = sum(r["latency_ms"] for r in timed)
    slowest = sorted(timed, key=lambda r: -r["latency_ms"])[:TOP_LAYERS]
    typer.echo(f"the {len(slowest)} slowest of {counted(len(timed), 'layer')}, each alone (all of them: --format json, or the SQL "
               "view layer_latency):")
    table = Table()
    for column in ("#", "layer", "op", "kind", "ms", "±", "share"):
        table.add_column(column, justify="left" if column in ("layer", "op", "kind") else "right", no_wrap=True)
    for r in slowest:
        ci = f"{100 * r['ci_rel']:.1f} %" if r.get("ci_rel") is not None else "-"
        share = f"{100 * r['latency_ms'] / total:.1f} %" if total else "-"
        table.add_row(str(r.get("index", "")), str(r.get("name", "")), clipped(str(r.get("op_type", "")), OP_CHARS),
                      str(r.get("kind", "module")), f"{r['latency_ms']:.4f}", ci, share)
    wide_console(120).print(table)


def _trace_table(trace: dict[str, Any], latency_ms: float) -> None:
    """The slowest operators of a trace, and what the profiler itself cost."""
    from rich.table import Table

    from tracker.console import clipped, wide_console

    basis = trace["time_basis"]
    typer.echo(f"torch.profiler, {trace['iterations']} iterations after the measurement: the {len(trace['ops'])} "
               f"slowest of {trace['operators']} operators by {basis.replace('_', ' ')} per iteration (traced "
               f"iteration {trace['traced_iteration_ms']:.3f} ms against {latency_ms:.3f} ms measured)")
    table = Table()
    for column in ("operator", "calls", basis.replace("_", " "), "share"):
        table.add_column(column, justify="left" if column == "operator" else "right", no_wrap=True)
    for op in trace["ops"]:
        share = f"{op['share_pct']:.1f} %" if op.get("share_pct") is not None else "-"
        table.add_row(op["op"], f"{op['calls_per_iter']:g}", f"{op[basis]:.3f}", share)
    wide_console(120).print(table)  # a log file or a pipe: operator names whole, not cut to 80 columns
    if trace.get("kernels"):  # on a GPU: what the device itself ran
        busy = trace["device_busy_ms"] / trace["traced_iteration_ms"] if trace["traced_iteration_ms"] > 0 else None
        share = f" ({100 * busy:.0f} % of it)" if busy is not None else ""
        typer.echo(f"the device was busy {trace['device_busy_ms']:.3f} ms per traced iteration{share}, in "
                   f"{trace['kernel_count']} kernels and copies; the {min(TOP_KERNELS, len(trace['kernels']))} longest:")
        if busy is not None and busy < HOST_BOUND_BUSY:
            typer.echo("note: the device idles most of each iteration, waiting for the host to launch its kernels: the "
                       "latency is the host's, and it moves with the host's load (a larger batch puts the work on the device)")
        kernels = Table()
        for column in ("kernel", "launches", "self device ms", "share"):
            kernels.add_column(column, justify="left" if column == "kernel" else "right", no_wrap=True)
        for k in trace["kernels"][:TOP_KERNELS]:
            share = f"{k['share_pct']:.1f} %" if k.get("share_pct") is not None else "-"
            kernels.add_row(clipped(k["kernel"], KERNEL_NAME_CHARS), f"{k['calls_per_iter']:g}", f"{k['self_device_ms']:.3f}",
                            share)
        wide_console(KERNEL_NAME_CHARS + 50).print(kernels)  # the name column, and three of figures
    typer.echo(f"artifacts of the run: {', '.join(trace['artifacts'])}")


def _profile(ctx: typer.Context, model: str, batch_size: int, phase: Phase, device: str, threads: int | None,
             precision: float, time_cap: float, timeout: float, memory_limit_mb: float | None, layers: bool, fmt: OutputFormat,
             again: bool = False, allocator: Allocator = Allocator.system, trace: bool = False,
             min_samples: int = MIN_SAMPLES, input_size: int | None = None, dtype: Dtype = Dtype.float32) -> None:
    from tracker.profile.api import profile_network
    from tracker.profile.stats import Stopping

    _check(model, device, input_size, phase, dtype, threads, memory_limit_mb)
    rule = Stopping(target_ci_rel=precision, time_cap_s=time_cap, min_samples=min_samples)
    layer_rule = rule.for_layers()
    try:
        result = profile_network(state(ctx).logger(), model, batch_size, rule, phase=phase.value, device=device,
                                 threads=threads, layers=layers, layer_rule=layer_rule, timeout_s=timeout,
                                 memory_limit_mb=memory_limit_mb, again=again, allocator=allocator.value, trace=trace,
                                 input_size=input_size, dtype=dtype.value)
    except KeyboardInterrupt as exc:
        exit_if_waiting(exc, "nothing was measured, and no run of it is logged")
        # a Ctrl-C while the server took the runs, which it took whole: their figures, and where they are (said to
        # wait in the outbox, without figures, until 0.9.8)
        if (logged := getattr(exc, "logged_result", None)) is None:
            raise
        _report(logged.as_dict(), fmt)
        runs, them = ("runs were", "them") if logged.layers else ("run was", "it")
        if state(ctx).logger().location.is_http:
            exit_interrupted(f"interrupted as its {runs} written: the tracking server has {them} whole (none waits in "
                             "the outbox)")
        exit_interrupted(f"interrupted as its {runs} written: the store has {them} whole")  # an embedded one (0.9.8)
    _report(result.as_dict(), fmt)
    if result.network.status == "FAILED":
        raise typer.Exit(MEASUREMENT_FAILED)
    if layers and not result.layers:  # its layers lost (its child killed while it measured them; 0 until 0.9.8)
        raise typer.Exit(MEASUREMENT_FAILED)


@app.command("network", cls=OneConfiguration)
def network(
    ctx: typer.Context,
    model: ModelArg,
    batch_size: BatchSizeOption = 1,
    phase: Annotated[Phase, typer.Option(help="inference, or training (forward, loss, backward, optimizer step).")] = Phase.inference,
    device: DeviceOption = "cpu",
    threads: ThreadsOption = None,
    allocator: AllocatorOption = Allocator.system,
    precision: PrecisionOption = 0.02,
    time_cap: TimeCapOption = 10.0,
    min_samples: MinSamplesOption = MIN_SAMPLES,
    timeout: TimeoutOption = 600.0,
    memory_limit_mb: MemLimitOption = None,
    again: AgainOption = False,
    trace: TraceOption = False,
    input_size: InputSizeOption = None,
    dtype: DtypeOption = Dtype.float32,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Whole-network latency, memory and telemetry at one batch size (one child process)."""
    _profile(ctx, model, batch_size, phase, device, threads, precision, time_cap, timeout, memory_limit_mb, False, fmt, again,
             allocator, trace, min_samples, input_size, dtype)


@app.command("layers", cls=OneConfiguration)
def layers(
    ctx: typer.Context,
    model: ModelArg,
    batch_size: BatchSizeOption = 1,
    device: DeviceOption = "cpu",
    threads: ThreadsOption = None,
    allocator: AllocatorOption = Allocator.system,
    precision: PrecisionOption = 0.02,
    time_cap: TimeCapOption = 10.0,
    min_samples: MinSamplesOption = MIN_SAMPLES,
    timeout: TimeoutOption = 600.0,
    again: AgainOption = False,
    trace: TraceOption = False,
    input_size: InputSizeOption = None,
    dtype: DtypeOption = Dtype.float32,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Whole-network inference plus each layer alone on its real input (nested layer runs)."""
    _profile(ctx, model, batch_size, Phase.inference, device, threads, precision, time_cap, timeout, None, True, fmt, again,
             allocator, trace, min_samples, input_size, dtype)


@app.command("boundary", cls=OneConfiguration)
def boundary(
    ctx: typer.Context,
    model: ModelArg,
    phase: Annotated[Phase, typer.Option(help="Which phase's memory limit to find.")] = Phase.training,
    device: DeviceOption = "cpu",
    threads: ThreadsOption = None,
    allocator: AllocatorOption = Allocator.system,
    start: Annotated[int, typer.Option(min=1, max=MAX_BATCH, help="First batch size (with --search, a size that does not fit is "
                                                   "halved until one does: tracker predict --largest-batch's answer "
                                                   "is a start).")] = 1,
    max_batch: Annotated[int, typer.Option(min=1, max=MAX_BATCH, help="Largest batch size to try.")] = 1024,
    search: Annotated[bool, typer.Option("--search", help="Bisect between the last fit and the first failure (halving first where "
                                                    "the start does not fit).")] = False,
    precision: PrecisionOption = 0.05,
    time_cap: TimeCapOption = 5.0,
    timeout: TimeoutOption = 600.0,
    memory_limit_mb: MemLimitOption = None,
    input_size: InputSizeOption = None,
    dtype: DtypeOption = Dtype.float32,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Largest batch size that fits: double until the first failure (recorded as a FAILED run)."""
    from tracker.profile.api import find_boundary
    from tracker.profile.stats import Stopping

    if start > max_batch:  # nothing to try: refused before the store is made (made, and "up to None", until 0.9.8)
        raise typer.BadParameter(f"{start} is over --max-batch {max_batch}: no batch size would be tried",
                                 param_hint="'--start'")
    _check(model, device, input_size, phase, dtype, threads, memory_limit_mb)
    try:
        result = find_boundary(state(ctx).logger(), model, Stopping(target_ci_rel=precision, time_cap_s=time_cap),
                               phase=phase.value, device=device, threads=threads, start=start, max_batch=max_batch,
                               search=search, timeout_s=timeout, memory_limit_mb=memory_limit_mb,
                               allocator=allocator.value, input_size=input_size, dtype=dtype.value)
    except KeyboardInterrupt as exc:
        exit_if_waiting(exc, "the batch sizes measured before are kept, the next measured nothing; run the same "
                             "command again to go on")
        raise
    data = result.as_dict()
    if fmt is OutputFormat.json:
        emit_json(data)
        return
    for run in data["runs"]:
        _report(run, OutputFormat.table)
    typer.echo(_boundary_line(data, max_batch))


def _boundary_line(data: dict[str, Any], max_batch: int) -> str:
    """The boundary's summary in words: no "None" where nothing fitted or nothing failed."""
    ok, failed, reason = data["largest_ok_batch_size"], data["first_failed_batch_size"], data["failure_reason"]
    cap = ""
    if data.get("memory_limit_mb"):
        kind = f"{data['memory_cap']} " if data.get("memory_cap") else ""
        cap = f" under a {data['memory_limit_mb']:g} MB {kind}memory cap"
    if failed is None and ok is None:  # a library caller's start over its max_batch (the CLI refuses it)
        return f"no batch size tried{cap}: none from the start up to --max-batch {max_batch}"
    if failed is None:
        return (f"every batch size tried fits{cap}, up to {ok}: nothing failed (the next would pass "
                f"--max-batch {max_batch})")
    if ok is None:
        return f"no batch size fits{cap}: the first, {failed}, failed ({reason})"
    return f"largest batch size that fits{cap}: {ok}; first failure: {failed} ({reason})"


def run_training_job(ctx: typer.Context, config: Any, quiet: bool = False, again: bool = False,
                     dataset: Any = None) -> dict[str, Any]:
    """One training job with a rich progress bar (throughput, ETA); Ctrl-C keeps the steps measured.
    ``dataset``: the job's, checked before the store was opened (``job.check_job``), else checked here."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from tracker.profile.job import run_job

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]:.1f} img/s"), TimeElapsedColumn(), TimeRemainingColumn())
    from rich.console import Console

    # on stderr: on stdout a transient bar left a blank first line there, before the job's line (until 0.9.3);
    # and only on a terminal: elsewhere rich draws no transient bar, but ends it with a blank line (every job
    # wrote one to a log, before its errors too, until 0.9.6)
    console = Console(stderr=True)
    with Progress(*columns, console=console, transient=True, disable=quiet or not console.is_interactive) as bar:
        task = bar.add_task(f"{config.model_name} bs{config.batch_size} w{config.num_workers}", total=None, rate=0.0)

        def progress(done: int, total: int | None, rate: float) -> None:
            bar.update(task, completed=done, total=total, rate=rate)

        return run_job(state(ctx).logger(), config, progress, again=again, dataset=dataset).as_dict()


@app.command("training")
def training(
    ctx: typer.Context,
    config_text: Annotated[str, typer.Argument(metavar="FILE", parser=path_text("the training job file, e.g. experiments/train-detection.toml"), help="Training job file, e.g. experiments/train-detection.toml.")],
    fmt: FormatOption = OutputFormat.table,
    again: Annotated[bool, typer.Option(
        "--again", help="Run the job even if it was measured: a new run beside the old ones, named '· again' (a "
                        "repeat at another time; data_loading keeps the newest).")] = False,
) -> None:
    """Profile one training job: data wait, copy, forward, backward, optimizer per step (one training run)."""
    from tracker.profile import zygote_client
    from tracker.profile.job import check_job, load_job

    cfg = load_job(Path(config_text))
    # what refuses the job (its dataset, a batch larger than it, its network), before the store is opened: a
    # refused job made a store in a fresh folder until 0.9.12; and before the zygote is started (a refused job
    # started one, which imported torch and torchvision for nothing, until 0.9.13)
    dataset = check_job(cfg)
    zygote_client.prestart()
    try:
        result = run_training_job(ctx, cfg, quiet=fmt is OutputFormat.json, again=again, dataset=dataset)
    except KeyboardInterrupt as exc:
        exit_if_waiting(exc, "the job measured nothing, and no run of it is logged")
        raise
    if fmt is OutputFormat.json:
        emit_json(result)
    else:
        _job_line(result)
    if result["status"] == "KILLED":  # before its first step, none to keep (said as kept until 0.9.10)
        exit_interrupted("interrupted: the steps measured before are kept in that run" if result["steps"] else
                         "interrupted before its first step was measured: that run is logged KILLED, with no step")
    if result["status"] == "FAILED":
        raise typer.Exit(MEASUREMENT_FAILED)


def _job_notes(r: dict[str, Any]) -> None:
    """What to read a job's figures with, as a network's measurement says it (since 0.9.1): iterations
    too spread to compare, and other processes taking the CPU meanwhile."""
    from tracker.profile.records import beside_other_work, other_work_note
    from tracker.profile.stats import IMPRECISE_CI_REL

    if (ci := r.get("latency_ci_rel")) is not None and ci > IMPRECISE_CI_REL:
        typer.echo(f"note: its iterations' 95 % CI is ±{100 * ci:.0f} % of their median, over {100 * IMPRECISE_CI_REL:g} %: "
                   "too imprecise to compare with another job (more steps: [training].max_steps)")
    if beside_other_work(r):
        typer.echo(other_work_note(r, "its steps may be slower than the machine alone would run them"))


def _more_steps(config: dict[str, Any]) -> str:
    """What gives a job of one step more: max_steps only caps its steps, and an epoch is its whole batches
    alone (the last, partial one dropped), so more images than one batch but fewer than two, or a larger
    max_steps, gave the same single step (both were what its line asked for until 0.9.11)."""
    if config.get("max_steps") == 1:
        return "max_steps of 2 or more"
    batch = config.get("batch_size")
    return (f"two batches of images or more{f' ({2 * batch} at batch {batch})' if batch else ''}, or num_epochs of 2 "
            "or more")


def _job_line(r: dict[str, Any]) -> None:
    """One line for a job; a child that died took its peak memory with it, so none is shown."""
    if r["steps"]:
        why = f": {r['failure_message']}" if r.get("failure_message") else ""
        status = f"{r['status']} ({r['reason']}{why})" if r["reason"] else r["status"]
        peak = f", peak {r['peak_mem_mb']:.0f} MB" if r["peak_mem_mb"] is not None else ""
        if peak and r.get("workers_mem_peak_mb") is not None:
            peak += f" (its loader workers {r['workers_mem_peak_mb']:.0f} MB more of their own)"
        if peak and r.get("tensor_peak_mb") is not None:  # its tensors alone (since 0.9.31)
            peak += f", its tensors {r['tensor_peak_mb']:,.1f} MB at most"
        if r.get("page_faults_per_iter_count") is not None:
            faults = r["page_faults_per_iter_count"]
            peak += f", {per(faults, 'page fault', 'step')}"
        if r.get("host_share_pct") is not None:
            peak += f", the host {r['host_share_pct']:.0f} % of each step's compute"
        set_up = r.get("set_up_steps") or 0
        steps = f"{r['steps']} steps" + (f" ({counted(set_up, 'set-up step')} left out)" if set_up else "")
        if r["steps"] == 1:  # its figures are the set-up step's: workers starting, kernels warming (0.9.1 says so)
            steps = ("1 step, the set-up alone (its figures are the set-up's, which a job leaves out when it has more: "
                     f"give it {_more_steps(r.get('config', {}))})")
        iteration = f" (iteration {r['latency_ms']:.1f} ms, its wait for data left out)" if r.get("latency_ms") else ""
        typer.echo(f"{status}: {steps}, median step {r['median_step_ms']:.1f} ms{iteration}, data wait "
                   f"{100 * r['data_wait_fraction']:.1f} %, {r['images_per_s']:.1f} images/s{peak}"
                   f" (run {r['run_id'][:12]}{', already measured: reused' if r.get('reused') else ''})")
        _job_notes(r)
    else:
        why = f": {r['failure_message']}" if r.get("failure_message") else ""
        # a FINISHED run of no step (logged so until 0.9.8, and read back) has no reason: "(None)" was said
        ended = f" ({r['reason']}{why})" if r["reason"] else ""
        typer.echo(f"{r['status']}: no step measured{ended} (run {r['run_id'][:12]})")
    for s in r["skipped_files"]:
        typer.echo(f"skipped {s['file']}: {s['reason']}", err=True)
    if r.get("skipped_files_unreadable"):  # a reused run's, damaged: its figures stand (a traceback until 0.9.15)
        typer.echo(f"note: the files it skipped go unnamed, its {r['skipped_files_unreadable']}", err=True)
    if (short := r.get("skipped_steps")) and r["steps"]:  # since 0.9.11 (timed under the job's batch size before);
        # a job of none says it in its failure
        batch = r.get("config", {}).get("batch_size")
        typer.echo(f"skipped {counted(short, 'step')}, not timed: a bad file left {'its batch' if short == 1 else 'each batch'}"
                   f" short{f' of {batch} images' if batch else ''}", err=True)
