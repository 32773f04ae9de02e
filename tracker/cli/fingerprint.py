"""``tracker fingerprint train|list|promote`` and ``tracker predict``: models of the measurements."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from tracker.cli.options import (Dtype, FormatOption, InputSizeOption, OneConfiguration, OutputFormat, Phase, emit_json,
                                 exit_interrupted, model_reference, option_values, reads_only, state)
from tracker.cli.warehouse import WarehouseOption
from tracker.console import counted, decimal_number, shell_word, whole_number
from tracker.fingerprint.runtime import TARGETS
from tracker.settings import MAX_BATCH

if TYPE_CHECKING:
    from pathlib import Path

    from tracker.settings import StoreLocation

app = typer.Typer(help="Fingerprints: LightGBM predictors of latency, memory and power, in the MLflow registry.",
                  no_args_is_help=True)

PhaseOption = Annotated[Phase, typer.Option("--phase", help="inference or training.")]


def _device_key(value: str) -> str:
    """``cuda:0`` as ``cuda``, the one name its runs and models carry; a device name or mode as given."""
    from tracker.profile.device import canonical_device

    return canonical_device(value)


DeviceOption = Annotated[str, typer.Option("--device", callback=_device_key, help="cpu, cuda, a device name such as jetson-tx2, or a device mode such as cpu-t1-retain.")]
DtypeOption = Annotated[Dtype, typer.Option("--dtype", help="The number format of the measurements (profile --dtype): "
                                            "a fingerprint learns one; other than float32, its name ends with it.")]


def _uri(ctx: typer.Context, read_only: bool = False) -> str:
    return state(ctx).location(read_only).uri


@app.command("train", cls=OneConfiguration)
def train_cmd(
    ctx: typer.Context,
    target: Annotated[str, typer.Option("--target", help=(
        "latency_ms, peak_mem_mb, network_mem_mb (on a CPU, the part of the peak the network added to the process), "
        "tensor_peak_mb (on a CPU, the most bytes of its tensors alive at once), power_w, energy_per_iter_j or "
        "gpu_util_pct."))],
    device: DeviceOption = "cpu",
    phase: PhaseOption = Phase.inference,
    warehouse: WarehouseOption = None,
    exclude: Annotated[Optional[list[str]], typer.Option(
        "--exclude", metavar="NETWORK", help="Leave this network out of training entirely (repeatable), to predict it later as unseen.")] = None,
    experiments: Annotated[Optional[list[str]], typer.Option(
        "--from-experiment", metavar="EXPERIMENT", help="Learn only from this experiment's measurements (repeatable; default: every "
                                  "experiment in the warehouse).")] = None,
    dtype: DtypeOption = Dtype.float32,
    plots: Annotated[bool, typer.Option(
        "--plots/--no-plots", help="Draw the held-out evaluation's pictures among the run's artifacts "
                                   "(about a second a version on a small machine).")] = True,
    as_measured: Annotated[bool, typer.Option(
        "--as-measured", help="Learn latency as measured: by default, where every measurement timed the speed probe "
                              "beside it, each is put at the machine's median speed first (docs/fingerprints.md).")] = False,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Train, evaluate on held-out networks, register, and promote if it beats the champion."""
    from tracker.errors import OptionError, TrackerError, interrupted
    from tracker.fingerprint.train import stopped_train, train
    from tracker.settings import warehouse_path

    if target not in TARGETS:  # as predict's --sort: a usage error, status 2 (1 until 0.9.10)
        raise OptionError(f"--target {target!r}: not a target; one of {', '.join(TARGETS)}")
    location = state(ctx).location()
    if location.is_http:  # it registers the model there: a server that does not answer is said before training
        location.require()
    path = warehouse_path(warehouse, state(ctx).tracking_uri)
    try:
        _note_unloaded(path, location)
        result = train(path, target, phase.value, device, location.uri,
                       exclude=exclude or (), dtype=dtype.value, plots=plots, experiments=experiments or (),
                       as_measured=as_measured)
    except Exception as exc:  # DuckDB's error for a Ctrl-C in a query, said as a Ctrl-C
        if isinstance(exc, TrackerError) or not interrupted(exc):
            raise
        exit_interrupted(f"interrupted: {stopped_train(exc)}")
    except KeyboardInterrupt as exc:  # main's "what was logged before is kept" until 0.9.11, where nothing is
        exit_interrupted(f"interrupted: {stopped_train(exc)}")
    if result.left_out_imprecise:  # said where too few were left alone until 0.9.2
        from tracker.profile.stats import IMPRECISE_CI_REL

        typer.echo(f"note: {result.left_out_imprecise} of its {counted(result.measured_rows, 'measurement')} left out, their 95 % CI "
                   f"wider than {100 * IMPRECISE_CI_REL:g} % of their latency (measure them again: profile network "
                   "... --again with a smaller --precision or a longer --time-cap)", err=True)
    if result.left_out_older:  # since 0.9.27
        from tracker.fingerprint.dataset import older_said

        typer.echo(f"note: {older_said(result.left_out_older)}", err=True)
    if fmt is OutputFormat.json:
        emit_json(result.to_dict())
        return
    e, b = result.evaluation, result.baseline
    typer.echo(f"{result.name} version {result.version} (method {result.method}): held-out networks MAPE {e['mape_pct']:.2f} %, "
               f"RMSPE {e['rmspe_pct']:.2f} %, {e['within_10pct']:.0f} % within ±10 % ({int(e['rows'])} rows); "
               f"ExtraTrees baseline MAPE {b['mape_pct']:.2f} %")
    if "as_measured_mape_pct" in e:
        typer.echo(f"  latency put at the machine's median speed over its runs (speed probe {result.speed_reference_ms:.3g} ms); "
                   f"against the latencies as measured: MAPE {e['as_measured_mape_pct']:.2f} %, "
                   f"{e['as_measured_within_10pct']:.0f} % within ±10 %")
    elif result.as_measured_why:  # not put at the machine's median speed, though not asked to learn as measured
        typer.echo(f"  latency learnt as measured, not at the machine's median speed: {result.as_measured_why}")
    if result.layers_as_measured_why:  # the network labels put at it, the layers not (said nowhere until 0.9.12)
        typer.echo(f"  layer latencies learnt as measured, not at the network labels' median speed: "
                   f"{result.layers_as_measured_why}")
    if len(result.by_family) > 1:
        typer.echo(f"  {'held out, by family':<28} {'rows':>5} {'MAPE':>8} {'RMSPE':>8} {'within ±10 %':>13}")
        for fam, s in sorted(result.by_family.items(), key=lambda kv: -kv[1]["mape_pct"]):
            typer.echo(f"  {fam:<28} {int(s['rows']):>5} {s['mape_pct']:>6.2f} % {s['rmspe_pct']:>6.2f} % "
                       f"{s['within_10pct']:>11.0f} %")
    if result.memory_floor == "true":
        typer.echo("memory floor: kept (no run it learnt from was below what its network's own tensors hold): "
                   "a prediction is never below it")
    elif result.memory_floor is not None:
        typer.echo(f"memory floor: none, {result.memory_floor.removeprefix('false (').rstrip(')')}")
    typer.echo(("champion: " if result.champion else "not champion: ") + result.champion_reason)


def _note_unloaded(path: Path, location: StoreLocation) -> None:
    """A note where the store has runs its warehouse lacks (measured, changed or deleted since its
    last load): the fingerprint learns from the warehouse only (said nowhere until 0.9.3). Counted
    on a store's own database (milliseconds), not through a server's API."""
    import duckdb

    from tracker.errors import TrackerError
    from tracker.warehouse.load import unloaded
    from tracker.warehouse.source import DatabaseSource, open_source

    if location.is_http or not path.exists():
        return
    try:
        source = open_source(location)
        if not isinstance(source, DatabaseSource):
            return
        changed, gone = unloaded(path, source)
    except (TrackerError, duckdb.Error):  # the training says what is wrong with the warehouse (a traceback until 0.9.4)
        return
    if changed or gone:
        # counted over the whole store: the runs of any experiment, phase or device, not this fingerprint's alone
        # (until 0.9.8 "this fingerprint learns from 1 run deleted", of a run it never learnt from); the deleted
        # are still in the warehouse ("learns without them" until 0.9.4)
        what = " and ".join(part for part in (
            f"{counted(changed, 'run')} new or changed" if changed else "",
            f"{counted(gone, 'run')} deleted" if gone else "") if part)
        typer.echo(f"note: the store has changed since the warehouse {path} was loaded: {what}, of any experiment, "
                   "phase or device; this fingerprint learns from the warehouse as it was loaded (tracker warehouse "
                   "load, then train again)", err=True)


@app.command("list")
@reads_only
def list_cmd(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Registered fingerprints with their versions, aliases and held-out metrics."""
    location = state(ctx).location(read_only=True)  # a store that is not there is said before it is read
    from tracker.fingerprint.served import made_by_train, version_format
    from tracker.fingerprint.train import CHAMPION, floor_kept, floor_not_why

    rows = []
    held: list[tuple[str, str]] = []  # those of them the champion alias is on: predict fails for their target
    others = 0  # versions registered otherwise (MLflow's own register_model): no fingerprint, listed as one until 0.9.2
    for model in _registered(location):
        # each version's aliases (one shown, which MLflow's order made the last, until 0.9.33)
        aliases: dict[str, list[str]] = {}
        for alias, on in sorted(model.aliases.items()):
            aliases.setdefault(on, []).append(alias)
        for version in model.versions:
            number = version.version
            tags = version.tags
            if not made_by_train(tags):
                others += 1
                if model.aliases.get(CHAMPION) == number:
                    held.append((model.name, number))
                continue
            figures = {key: _number(tags.get(key), positive=key in POSITIVE_TAGS) for key in NUMERIC_TAGS
                       if key not in WHOLE_TAGS}
            # a count and a version are whole numbers, in digits as predict reads them (a version of 8.0 was
            # listed as 8, which predict refuses, until 0.9.25)
            figures |= {key: whole_number(tags[key]) if key in tags else None for key in WHOLE_TAGS}
            form = version_format(tags)  # a whole number, else unreadable (its text in JSON until 0.9.13)
            rows.append({"name": model.name, "version": number, "alias": ",".join(aliases.get(number, [])),
                         # numbers as numbers (since 0.9.0; MLflow keeps tags as text), None where absent
                         **figures,
                         # the numeric tags it has that are not numbers of their kind (since 0.9.12; shown as
                         # nan or inf, JSON NaN or Infinity, or a traceback for networks, until then)
                         "unreadable_tags": [key for key in NUMERIC_TAGS if key in tags and figures[key] is None]
                         + ([] if isinstance(form, int) else ["format"]),
                         "method": tags.get("method", "network"),
                         "promoted": tags.get("promoted"), "format": form if isinstance(form, int) else None,
                         # a boolean, and why not where it keeps none (the tag's text, "true" or "false (...)",
                         # until 0.9.6)
                         "memory_floor": floor_kept(tags.get("memory_floor")),
                         "memory_floor_not_why": floor_not_why(tags.get("memory_floor")),
                         # what it learnt from: the device mode and devices of its runs (tags since 0.8.9), the
                         # networks left out of it by hand, and when it was registered
                         "mode": tags.get("mode"), "devices": tags.get("devices"),
                         "excluded_networks": tags.get("excluded_networks"), "experiments": tags.get("experiments"),
                         "registered": _when(version.creation_timestamp)})
    if others:
        typer.echo(f"note: {counted(others, 'registered model version')} not made by tracker fingerprint "
                   "train left out", err=True)
    for name, number in held:  # said only in the count above, while predict failed, until 0.9.8
        typer.echo(f"note: {name} version {number}, left out, holds the champion alias: tracker predict cannot use "
                   f"it; tracker fingerprint promote {shell_word(name)} VERSION moves the alias to a version of train's", err=True)
    if fmt is OutputFormat.json:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no fingerprints registered: run tracker fingerprint train --target latency_ms")
    for r in rows:
        networks = "?" if r["networks"] is None else r["networks"]
        typer.echo(f"{r['name']:<40} v{r['version']:<3} {r['alias']:<9} {r['method']:<8} "
                   f"MAPE {_pct(r['heldout_mape_pct'])}, {_pct(r['heldout_within_10pct'])} within ±10 %  "
                   f"(ExtraTrees {_pct(r['baseline_extratrees_mape_pct'])}, {networks} networks"
                   + (f", mode {r['mode']}" if r["mode"] else "") + ")"
                   + ("; promoted by hand" if r["promoted"] else "")
                   + _speed(r)
                   + ("; never below its tensors' floor" if r["memory_floor"] else "")
                   + _limits(r)
                   + _rows_learnt(r)
                   + ("; format 1: MLflow serves log(target)" if r["format"] == 1 else "")
                   + (f"; unreadable tags: {', '.join(r['unreadable_tags'])}" if r["unreadable_tags"] else ""))


def _speed(row: dict[str, Any]) -> str:
    """How a latency version's labels were put (since 0.9.11): at the machine's median speed over its
    runs (its reference, which predict --speed-probe-ms scales from), or as measured."""
    if not row["name"].startswith("latency_ms-"):
        return ""
    if row["speed_reference_ms"] is not None:
        from tracker.profile.probe import PROBE_VERSION

        version = row.get("speed_probe_version")
        return (f"; at speed probe {row['speed_reference_ms']:.4g} ms"
                + (f" (probe version {version}, not this tracker's {PROBE_VERSION}: predict --speed-probe-ms "
                   "cannot move it)" if version not in (None, PROBE_VERSION) else ""))
    if "speed_reference_ms" in row["unreadable_tags"]:  # a reference it has, unread: not "as measured"
        return ""
    return "; latencies as measured"


# a version's numeric tags that list shows, and those of them that are a positive amount (as predict reads them)
NUMERIC_TAGS = ("heldout_mape_pct", "heldout_within_10pct", "baseline_extratrees_mape_pct", "device_memory_mb",
                "largest_peak_mb", "speed_reference_ms", "speed_probe_version", "networks", "node_rows_version")
POSITIVE_TAGS = ("device_memory_mb", "largest_peak_mb", "speed_reference_ms")
# those of them that are whole numbers (the speed probe's version since 0.9.12: unlisted, and an unreadable one
# unsaid, while predict refused it; the node rows' version since 0.9.25)
WHOLE_TAGS = ("speed_probe_version", "networks", "node_rows_version")


def _number(text: str | None, positive: bool = False) -> float | None:
    """A numeric tag as a number; None where it is absent or not a finite number (``nan``, ``inf``:
    shown as they are, and not valid JSON, until 0.9.12), or of another script's digits (``٣`` read as 3 until
    0.9.14), or, ``positive``, not above 0."""
    value = None if text is None else decimal_number(text)
    if value is None or not math.isfinite(value) or (positive and value <= 0):
        return None
    return value


def _registered(location: StoreLocation) -> list[Any]:
    """The store's registered models (``tracker.log.store.RegisteredModel``): a database store's read in
    SQL (since 0.9.33; MLflow's client took 2.5 s of ``fingerprint list``'s 3.4 to import), a server's
    through MLflow's client."""
    if not location.is_http:
        from tracker.log.sql_store import SqlStore

        store = SqlStore(location)
        try:
            return store.registered_models()
        finally:
            store.close()
    from mlflow.tracking import MlflowClient

    from tracker.log.search import registered_models

    return registered_models(MlflowClient(location.uri))


def _when(ms: int | None) -> str | None:
    """A registry timestamp (ms since the epoch) as UTC ISO time, seconds, as a promotion's tag says
    its time (the machine's local time, without its zone, until 0.9.6)."""
    import datetime

    if not ms:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@app.command("promote")
def promote_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Registered fingerprint, such as latency_ms-inference-cpu.")],
    version: Annotated[str, typer.Argument(help="Its version to make champion (tracker fingerprint list).")],
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Make a version the champion by hand: tracker predict and searchspace run use it from now on."""
    uri = _uri(ctx, read_only=True)  # the store must exist: no new empty one
    from tracker.fingerprint.train import promote

    result = promote(uri, name, version)
    if fmt is OutputFormat.json:
        emit_json(result.to_dict())
    elif not result.moved:
        typer.echo(f"{name}: version {result.version} is already champion")
    else:
        was = f"version {result.previous}" if result.previous else "no version"
        typer.echo(f"{name}: champion moved from {was} to version {result.version}")


def _rows_learnt(row: dict[str, Any]) -> str:
    """Where a version learnt from node rows another tracker counted (since 0.9.25): which, and that predict
    names what of a network it learnt otherwise; nothing for this tracker's rows, or a tag said unreadable."""
    from tracker.describe.features import NODE_ROWS_VERSION

    version = row["node_rows_version"]
    if "node_rows_version" in row["unreadable_tags"] or version == NODE_ROWS_VERSION:
        return ""
    if version is not None and version > NODE_ROWS_VERSION:
        return f"; learnt from node rows version {version}, a newer tracker's (this one counts {NODE_ROWS_VERSION})"
    return (f"; learnt from {_rows_version_words(version)}, where this tracker's are {NODE_ROWS_VERSION}: tracker "
            "predict names what of a network it counted otherwise")


def _limits(row: dict[str, Any]) -> str:
    """The memory limits a peak-memory version knows (``predict`` flags predictions above them)."""
    known = [f"{label} {_mb(row[key])}" for key, label in (("device_memory_mb", "device"),
                                                           ("largest_peak_mb", "largest peak run"))
             if row.get(key) is not None]
    return f"; fits under: {', '.join(known)}" if known else ""


def _mb(value: float) -> str:
    return f"{value:,.0f} MB"


def _pct(value: float | None) -> str:
    """A percentage of a version (``_number``'s of its tag), as ``12.3 %`` (``?`` when absent or not a number)."""
    return "?" if value is None else f"{value:.1f} %"


@reads_only  # main's "what was logged before is kept" until 0.9.8
def predict(
    ctx: typer.Context,
    models: Annotated[list[str], typer.Argument(callback=model_reference, metavar="model",
        help="Zoo name, spec file or FILE.py:NAME (a network of your own); several: each is predicted.")],
    batch_sizes: Annotated[Optional[list[int]], typer.Option(
        "--batch-size", "-b", metavar="N", min=1, max=MAX_BATCH, help="Images per iteration (repeatable: each is predicted). "
        "Default: 1.")] = None,
    phase: PhaseOption = Phase.inference,
    device: DeviceOption = "cpu",
    input_size: InputSizeOption = None,
    dtype: DtypeOption = Dtype.float32,
    fmt: FormatOption = OutputFormat.table,
    features: Annotated[bool, typer.Option("--features", help="Also print the network's features: the row "
                                           "of measurement_features a registered model takes through MLflow.")] = False,
    largest: Annotated[bool, typer.Option("--largest-batch", help="Instead: the largest batch size whose predicted "
                                          "peak memory stays under the largest peak learnt from and under the "
                                          "device's memory (profile boundary, without running).")] = False,
    sort: Annotated[Optional[str], typer.Option("--sort", metavar="TARGET", help="Order the configurations by "
                                                "this predicted target, smallest first (latency_ms, peak_mem_mb, ...); a memory target whose "
                                                "readings saturate by what it needs (memory_demand_mb).")] = None,
    under: Annotated[Optional[list[str]], typer.Option("--under", metavar="TARGET=VALUE", help="Keep only the "
                                                       "configurations predicted under this budget, in the target's "
                                                       "unit (repeatable: under each), e.g. latency_ms=5; a memory "
                                                       "target whose readings saturate: what it needs "
                                                       "(memory_demand_mb), a question of fit.")] = None,
    use: Annotated[Optional[list[str]], typer.Option("--use", metavar="NAME/VERSION", help="Predict its target with "
                                                     "this registered version instead of the champion (repeatable), "
                                                     "e.g. latency_ms-inference-cpu/2: versions compared without "
                                                     "promoting.")] = None,
    speed_probe_ms: Annotated[Optional[float], typer.Option(
        "--speed-probe-ms", help="Latency at the machine's speed when its speed probe took "
        "this long (a run's speed_probe_ms): a version that learnt at a reference speed predicts at that speed "
        "otherwise.")] = None,
) -> None:
    """Predict latency, memory and power of a network without running it.

    Several networks and batch sizes: the champions loaded once, a row (JSON: an object) each; --under keeps those within a budget and --sort ranks them (a search's candidates)."""
    from tracker.errors import ConfigError, OptionError
    from tracker.fingerprint.predict import check_speed_probe_ms, fit_figure, predict_grid

    # its options' values, and options that do not go together: usage errors, status 2 (1 until 0.9.8)
    if largest:
        given = [opt for opt, value in (("--batch-size", batch_sizes), ("--features", features), ("--use", use),
                                        ("--under", under), ("--sort", sort),
                                        ("--speed-probe-ms", speed_probe_ms is not None)) if value]
        if given:  # --under and --sort were let by, unheeded, until 0.9.2
            raise OptionError(f"--largest-batch answers one thing, the largest batch size, with the champions: leave "
                              f"out {' and '.join(given)}")
        _largest_batch(_uri(ctx), models, phase.value, device, input_size, fmt, dtype.value)
        return
    with option_values():  # a usage error, status 2
        check_speed_probe_ms(speed_probe_ms, "--speed-probe-ms")
    sizes = batch_sizes or [1]
    models = list(dict.fromkeys(models))  # a network named twice is predicted once, as a batch size is (0.9.4)
    # predict_grid predicts a batch size given twice once; a budget or an order makes a list, whatever it holds
    several = len(models) * len(set(sizes)) > 1 or bool(under) or sort is not None
    if several and features and fmt is OutputFormat.table:  # (dropped unsaid with --under or --sort until 0.9.2)
        raise OptionError("--features prints one configuration's features as a table: give one network and one "
                          "--batch-size, or add --format json")
    budgets = _budgets(under or [])
    if sort is not None and sort not in TARGETS:
        raise OptionError(f"--sort {sort!r}: not a target; one of {', '.join(TARGETS)}")
    uri = _uri(ctx)
    chosen = _chosen_models(uri, use, phase.value, device, dtype.value) if use else None
    results = predict_grid(uri, list(models), sizes, phase.value, device, input_size, chosen, with_features=features,
                           dtype=dtype.value, progress=_describing_progress(), speed_probe_ms=speed_probe_ms)
    if speed_probe_ms is not None and not results[0]["speed_reference_ms"]:  # a JSON reader is told too, on stderr
        typer.echo("note: no version used learnt at a reference speed (their latencies are as measured, or no "
                   "latency was predicted): --speed-probe-ms changes nothing", err=True)
    for target in [*budgets, *([sort] if sort else [])]:
        if target not in results[0]["predictions"]:
            raise ConfigError(f"no {target} fingerprint for phase {phase.value!r} on device {device!r} to "
                              f"{'rank' if target == sort else 'budget'} by; registered targets here: "
                              f"{', '.join(results[0]['predictions']) or 'none'}")
    total = len(results)
    # a memory target whose readings saturate (a hinge trend) is budgeted and ranked by what it needs, the
    # figure its fit verdicts compare (by the capped reading until 0.9.8: kept what it said would not fit)
    results = [r for r in results if all(fit_figure(r, t) <= v for t, v in budgets.items())]
    if sort:
        results.sort(key=lambda r: fit_figure(r, sort))
    if budgets:  # on stderr, JSON or not (it was a table's only until 0.9.2)
        typer.echo(f"{len(results)} of {counted(total, 'configuration')} predicted under "
                   + " and ".join(f"{t} {v:g}" for t, v in budgets.items()), err=True)
    if fmt is OutputFormat.json:
        emit_json(results if several else results[0])
    elif not results:
        return
    elif several:
        _prediction_table(results)
    else:
        _prediction_lines(results[0], features)
    if fmt is OutputFormat.table and results:
        _speed_note(results[0])


def _speed_note(result: dict) -> None:
    """What speed a latency is predicted at, where its version learnt at a reference speed; where that
    reference is a time of another speed probe version than this tracker's, that --speed-probe-ms cannot
    move it (since 0.9.12: the note offered --speed-probe-ms, which predict then refused)."""
    from tracker.profile.probe import PROBE_VERSION

    for target, reference in result.get("speed_reference_ms", {}).items():
        if "at_speed_probe_ms" in result:
            typer.echo(f"note: {target} at the machine's speed when its speed probe takes {result['at_speed_probe_ms']:.4g} "
                       f"ms ({result['model_versions'][target]} learnt at {reference:.4g} ms)")
            continue
        version = result.get("speed_probe_version", {}).get(target)
        how = (f"its speed probe {reference:.4g} ms; --speed-probe-ms for another" if version in (None, PROBE_VERSION)
               else f"its speed probe {reference:.4g} ms, a time of speed probe version {version}: --speed-probe-ms, "
                    f"a time of this tracker's version {PROBE_VERSION}, cannot put it at another speed")
        typer.echo(f"note: {target} at the machine's median speed over the runs {result['model_versions'][target]} "
                   f"learnt from ({how})")


#: What each column of a peak memory's floor (fingerprint.runtime.MEMORY_FLOOR_COLUMNS) counts.
_FLOOR_WORDS = {"weight_bytes": "its weights", "batch_largest_activation_bytes": "its largest activation",
                "batch_live_activation_bytes": "the activations alive at once at the fullest point of its forward pass",
                "batch_kept_activation_bytes": "the activations kept for the backward pass"}


def _batched_otherwise_words(model_version: str) -> str:
    """A note's words for a version of before 0.8.0 predicting a network with tensors batched in another dimension
    than their first (predict's ``batched_otherwise``)."""
    return (f"{model_version} learnt from features counted before tracker 0.8.0, which took every tensor's first "
            "dimension for its batch; this network has tensors batched in another (sequence first, or an image's "
            "proposals), now counted whole: retrain with tracker fingerprint train")


def _counted_otherwise_note(model_version: str, rows_version: int | None, kinds: dict[str, int]) -> str:
    """A note's words for a version predicting a network of which it learnt ``kinds`` otherwise (predict's
    ``counted_otherwise``), having learnt from node rows ``rows_version``."""
    return (f"{model_version} learnt from {_rows_version_words(rows_version)}, and this network's "
            f"{_counted_otherwise_words(kinds)} counted otherwise since: retrain with tracker fingerprint train")


def _rows_version_words(version: int | None) -> str:
    """A fingerprint's node rows version (its tag node_rows_version) in words."""
    from tracker.describe.features import ROWS_VERSION_SINCE

    if version not in ROWS_VERSION_SINCE:  # none recorded, or one of before 0.8.0
        return "features counted before tracker 0.8.0"
    return f"node rows version {version} (tracker {ROWS_VERSION_SINCE[version]} on)"


def _counted_otherwise_words(kinds: dict[str, int]) -> str:
    """What a network has that tracker counts otherwise than a fingerprint's node rows version did
    (``counted_otherwise``: kind to the node rows version that counts it so), by the tracker that first did,
    and the verb: "mean and interpolate (tracker 0.9.24) are"."""
    from tracker.describe.features import ROWS_VERSION_SINCE

    groups: dict[int, list[str]] = {}
    for kind, version in sorted(kinds.items(), key=lambda kv: kv[1]):
        groups.setdefault(version, []).append(kind)
    words = [f"{_and(names)} (tracker {ROWS_VERSION_SINCE.get(version, '?')})" for version, names in groups.items()]
    return f"{_and(words)} {'is' if len(kinds) == 1 else 'are'}"


def _and(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _floor_words(columns: list[str]) -> str:
    """What a floor of these columns counts, in words: ``its weights and its largest activation``."""
    return " and ".join(_FLOOR_WORDS.get(c, c) for c in columns)


#: How ``--largest-batch`` names each limit in its lines.
_LIMIT_WORDS = {"largest_peak_measured": "the largest peak learnt from", "device_memory": "the device's memory"}


def _largest_batch(uri: str, models: list[str], phase: str, device: str, input_size: Optional[int],
                   fmt: OutputFormat, dtype: str = "float32") -> None:
    from tracker.fingerprint.predict import largest_batch

    results = largest_batch(uri, list(models), phase, device, input_size, dtype=dtype)
    if fmt is OutputFormat.json:
        emit_json(results if len(results) > 1 else results[0])
        return
    for ref, result in zip(models, results):
        parts = []
        for name, batch in result["largest_batch"].items():
            under = f"under {_LIMIT_WORDS[name]} ({result['limits_mb'][name]:,.0f} MB)"
            if batch is None:
                parts.append(f"{under}: more than {result['max_batch']:,}")
            elif batch == 0:
                parts.append(f"{under}: none, batch 1 is predicted above it")
            else:
                parts.append(f"{under}: {batch} ({_peak_words(result, name)})")
        typer.echo(f"{result['model']}: largest batch {'; '.join(parts)}  ({result['model_version']})")
        for name, outside in result["outside_trained_range"].items():
            if outside:
                typer.echo(f"note: at batch {result['largest_batch'][name]} the prediction extrapolates: "
                           f"{_beyond(outside)}")
        for name, by_floor in result.get("over_by_memory_floor", {}).items():
            if by_floor:
                learnt = result.get("learnt_batch_sizes")
                span = f" (it learnt batch sizes {learnt[0]:.0f} to {learnt[1]:.0f})" if learnt else ""
                typer.echo(f"note: batch {result['largest_batch'][name] + 1} passes {_LIMIT_WORDS[name]} by what the "
                           f"network's own tensors hold at once ({_floor_words(result['memory_floor_columns'])}), where "
                           f"{result['model_version']}'s prediction had stopped growing{span}: an upper bound")
        if result.get("batched_otherwise"):
            typer.echo(f"note: {_batched_otherwise_words(result['model_version'])}")
        if result.get("counted_otherwise"):
            typer.echo("note: " + _counted_otherwise_note(result["model_version"], result["node_rows_version"],
                                                          result["counted_otherwise"]))
        if "measure_command" in result:  # from the smaller answer (a size that does not fit is halved)
            typer.echo(f"measure it: {result['measure_command']}")


def _peak_words(result: dict, name: str) -> str:
    """A largest batch's figure: its predicted peak, or, where the version's readings saturate, what
    it needs (the figure compared with the limit) beside the reading."""
    reading = result["predicted_peak_mb"][name]
    demand = result.get("memory_demand_mb", {}).get(name)
    if demand is None:
        return f"{reading:,.0f} MB predicted"
    return f"{demand:,.0f} MB needed; predicted reading {reading:,.0f} MB"


def _beyond(outside: dict[str, dict[str, Any]]) -> str:
    """The features of a configuration outside what a version learnt, each with the span learnt."""
    return ", ".join(f"{f} {'none (not images; ' if o['value'] is None else format(o['value'], '.4g') + ' ('}"
                     f"learnt {o['trained'][0]:.4g} to {o['trained'][1]:.4g})"
                     for f, o in outside.items())


def _prediction_lines(result: dict, features: bool) -> None:
    """One configuration: a line per target, then what it extrapolates and what has no model."""
    for target, value in result["predictions"].items():
        typer.echo(f"{target:>18}: {value:.4g} {result['units'][target]}  ({result['model_versions'][target]})")
    _prediction_notes([result])
    if features:
        typer.echo("features:")
        for name, value in result["features"].items():
            if isinstance(value, list):  # the module calls: in --format json
                typer.echo(f"  {name:<30} {len(value)} module calls (listed in --format json)")
            else:
                typer.echo(f"  {name:<30} {'' if value is None else f'{value:.6g}'}")


def _chosen_models(uri: str, use: list[str], phase: str, device: str, dtype: str) -> dict[str, Any]:
    """The champions of this phase and device, each target named by a ``--use NAME/VERSION`` answered
    by that version instead; loaded."""
    from tracker.errors import OptionError
    from tracker.fingerprint.dataset import FingerprintError
    from tracker.fingerprint.predict import champion_versions, load_champions, registered_versions, split_version
    from tracker.fingerprint.train import registered_name

    targets = []
    use = list(dict.fromkeys(use))  # a version named twice is one (said as "two versions" until 0.9.4)
    for text in use:  # the name first: a version of another phase or device is said before the store is read
        with option_values():  # its form, and its name against --phase and --device: usage errors (1 until 0.9.8)
            name = split_version(text)[0]
        target = name.split("-", 1)[0]
        targets.append(target)
        if name and (target not in TARGETS or registered_name(target, phase, device, dtype) != name):
            expected = registered_name(target, phase, device, dtype) if target in TARGETS else "TARGET-PHASE-DEVICE"
            raise OptionError(f"--use {text}: not a fingerprint of {phase} on {device!r}"
                              + (f" in {dtype}" if dtype != "float32" else "") + f" (that would be {expected}); "
                              "give --phase and --device as it learnt them")
    if twice := sorted({t for t in targets if targets.count(t) > 1}):  # the last one answered, unsaid, until 0.9.2
        raise OptionError(f"--use names two versions of {twice[0]}: one version a target (to compare two, predict "
                          "with each in turn)")
    chosen = {name.split("-", 1)[0]: version for name, version in registered_versions(uri, use).items()}
    try:
        versions = champion_versions(uri, phase, device, dtype=dtype)
    except FingerprintError:  # none registered as champion: the versions named answer alone
        versions = {}
    return load_champions(uri, {**versions, **chosen})


#: Seconds between two lines of ``predict``'s progress while it describes networks (none before the first).
PROGRESS_EVERY_S = 5.0


def _describing_progress() -> Any:
    """A ``progress(done, total)`` that says on stderr, every ``PROGRESS_EVERY_S``, how many networks
    are described (a thousand new candidates take minutes; cached ones, milliseconds: then nothing)."""
    import time

    last = [time.monotonic()]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S and done < total:
            last[0] = now
            typer.echo(f"described {done} of {total} networks", err=True)

    return progress


def _budgets(items: list[str]) -> dict[str, float]:
    """``--under TARGET=VALUE`` options as {target: value}; a wrong one is an OptionError naming it (a usage error)."""
    import math

    from tracker.errors import OptionError

    out: dict[str, float] = {}
    for item in items:
        target, sep, value = item.partition("=")
        target = target.strip()
        if not sep or target not in TARGETS:
            raise OptionError(f"--under {item!r}: expected TARGET=VALUE, TARGET one of {', '.join(TARGETS)}")
        budget = decimal_number(value)  # ASCII digits alone (٣ was 3 until 0.9.14)
        if budget is None:
            raise OptionError(f"--under {item!r}: {value.strip()!r} is not a number")
        if not math.isfinite(budget) or budget <= 0:  # 0 and below kept nothing, unsaid, until 0.9.2
            raise OptionError(f"--under {item!r}: the budget must be a finite number above 0")
        if target in out:  # the last one was kept, unsaid, until 0.9.2
            raise OptionError(f"--under {target} given twice ({out[target]:g} and {budget:g}): one budget a target")
        out[target] = budget
    return out


#: The marks a table puts after a predicted value, and what each means (said once under it).
_MARKS = {"*": "beyond what its version learnt from (which features: --format json, outside_trained_range)",
          "^": "its version's prediction at the largest batch it learnt, scaled by the batch (past it, trees answer "
               "as at it: scaled_from_batch)",
          "_": "raised to its floor, what the network's own tensors hold at once (its version predicted less: "
               "at_memory_floor)",
          "<": "lowered to the predicted peak_mem_mb, of which the network's own memory is a part (its version "
               "predicted more: capped_at_peak)"}


def _marks(result: dict, target: str) -> str:
    return (("*" if target in result["outside_trained_range"] else "")
            + ("^" if target in result.get("scaled_from_batch", {}) else "")
            + ("_" if target in result.get("at_memory_floor", []) else "")
            + ("<" if target in result.get("capped_at_peak", []) else ""))


def _prediction_table(results: list[dict]) -> None:
    """Several configurations: a row each, a column per target (its unit in the header), each value
    marked with what to read it with (a line per mark under the table: a note a row flooded a
    search's table, until 0.9.0), the versions that answered under the table."""
    targets = list(results[0]["predictions"])
    header = ["model", "batch"] + [f"{t} ({results[0]['units'][t]})" for t in targets]
    # marks in a fixed width after the value, so that values line up (two wide until 0.9.4: three shifted them)
    width = max(len(_marks(r, t)) for r in results for t in targets)
    body = [[r["model"], str(r["batch_size"])] + [f"{r['predictions'][t]:.4g}{_marks(r, t):<{width}}" for t in targets]
            for r in results]
    header = header[:2] + [f"{h}{' ' * width}" for h in header[2:]]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    for row in [header, *body]:
        typer.echo("  ".join(cell.ljust(w) if i < 1 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
    typer.echo("versions: " + ", ".join(results[0]["model_versions"][t] for t in targets))
    for mark, meaning in _MARKS.items():
        marked = sum(mark in _marks(r, t) for r in results for t in targets)
        if marked:
            typer.echo(f"{mark}: {meaning}; {marked} of {len(results) * len(targets)} predictions")
    _prediction_notes(results, with_model=True, marked=True)


def _prediction_notes(results: list[dict], with_model: bool = False, marked: bool = False) -> None:
    """The notes of each configuration; ``marked``: those the table's marks say are left out."""
    for result in results:
        which = f" ({result['model']} at batch {result['batch_size']})" if with_model else ""
        for target, outside in ({} if marked else result["outside_trained_range"]).items():
            typer.echo(f"note: {target}{which} extrapolates beyond what {result['model_versions'][target]} "
                       f"learnt from: {_beyond(outside)}")
        for target, top in ({} if marked else result.get("scaled_from_batch", {})).items():
            typer.echo(f"note: {target}{which} is {result['model_versions'][target]}'s prediction at batch {top}, the "
                       f"largest it learnt, times {result['batch_size']}/{top} (past it, trees answer as at it)")
        for target in [] if marked else result.get("at_memory_floor", []):
            typer.echo(f"note: {target}{which} is its floor, what the network's own tensors hold at once "
                       f"({_floor_words(result['memory_floor_columns'][target])}): {result['model_versions'][target]} predicted less, "
                       "as trees do past what they learnt")
        for target in [] if marked else result.get("capped_at_peak", []):
            typer.echo(f"note: {target}{which} is the predicted peak_mem_mb, of which it is a part: "
                       f"{result['model_versions'][target]} predicted more, as trees do past what they learnt")
        for target in result.get("batched_otherwise", []):
            typer.echo(f"note: {target}{which}: {_batched_otherwise_words(result['model_versions'][target])}")
        for target, kinds in result.get("counted_otherwise", {}).items():
            said = _counted_otherwise_note(result["model_versions"][target], result["node_rows_version"][target], kinds)
            typer.echo(f"note: {target}{which}: {said}")
        for target in dict.fromkeys([*result["exceeds_device_memory"], *result["above_largest_peak_measured"]]):
            value = f"note: {target}{which} {result['predictions'][target]:,.0f} {result['units'][target]}"
            if (demand := result.get("memory_demand_mb", {}).get(target)) is not None:
                # the figure the verdict compares: what it needs (the capped reading beside a limit it is under
                # contradicted it, until 0.9.8)
                value = (f"note: {target}{which} needs {demand:,.0f} {result['units'][target]} (predicted reading "
                         f"{result['predictions'][target]:,.0f}), which")
            if target in result["exceeds_device_memory"]:
                typer.echo(f"{value} is more than the device's memory ({result['device_memory_mb'][target]:,.0f} MB, "
                           "as its runs recorded): it would not fit")
            else:
                typer.echo(f"{value} is above the largest peak measured on the device "
                           f"({result['largest_peak_measured_mb'][target]:,.0f} MB): it may not fit")
    if results[0]["missing_targets"]:
        typer.echo(f"no fingerprint for: {', '.join(results[0]['missing_targets'])}")
