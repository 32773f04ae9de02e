"""Fill a search space's accuracy and latency tables (only what is missing), and report its
accuracy-latency Pareto frontier from the warehouse view ``searchspace_candidates``."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from tracker.console import shell_word
from tracker.errors import ConfigError, MeasurementError, NothingLoggedError, SchemaError, TrackerError, first_line, is_oom
from tracker.log.record import FAILURE_MESSAGE_TAG
from tracker.profile.records import beside_other_work
from tracker.profile.stats import imprecise
from tracker.searchspace.space import Candidate, SearchSpace

SOURCES = ("measured", "predicted")
#: ``searchspace run --time-cap``'s default, the cap of a measured candidate that records none (before 0.9.8)
DEFAULT_TIME_CAP_S = 5.0


@dataclass
class Tally:
    accuracy_done: int = 0
    accuracy_skipped: int = 0
    latency_done: int = 0
    latency_skipped: int = 0
    failed: list[str] = field(default_factory=list)
    #: how many accuracy runs and latency runs of this run were FAILED, each kind its own (since 0.9.9: one
    #: count of failed candidates was said as the latency's)
    accuracy_failed: int = 0
    latency_failed: int = 0
    #: what ended each failed candidate's accuracy or latency, in a line (since 0.9.7)
    failures: dict[str, str] = field(default_factory=dict)
    #: predicted candidates whose features lie beyond what their fingerprint learnt from
    extrapolated: list[str] = field(default_factory=list)
    #: measured candidates whose CI is wider than stats.IMPRECISE_CI_REL: left off the frontier (since 0.9.0)
    imprecise: list[str] = field(default_factory=list)
    #: imprecise candidates already there measured again, this run's --time-cap longer than theirs (since 0.9.9;
    #: counted as already there, and the note's advice to measure them with a longer cap was unheeded, until then)
    measured_again: list[str] = field(default_factory=list)
    #: measured candidates that other processes took records.OTHERS_CPU_NOTE_PCT or more of the CPU beside
    beside_other_work: list[str] = field(default_factory=list)
    #: the device mode the latencies are of: measured in, or learnt by the predicting version (None: not recorded)
    mode: str | None = None
    #: predicted: the mode the space's [latency] asks for where its version learnt another (since 0.9.2)
    space_mode: str | None = None
    device_time_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_specs(space: SearchSpace, folder: Path) -> dict[str, Path]:
    """Each candidate's spec file (the same file for the same candidate, left alone when it says
    the same already): name -> path."""
    from tracker.zoo import spec

    candidates = list(space.candidates())
    return dict(zip((c.name for c in candidates), spec.write_specs([c.spec for c in candidates], folder)))


def describe_candidates(space: SearchSpace) -> dict[str, tuple[str, str, str]]:
    """(name, description hash, description JSON) of each candidate, as its spec file describes: the
    hash keys its runs and places it in the report, the JSON feeds its prediction."""
    from tracker.describe import described_json, spec_json

    return {c.name: described_json(c.name, spec_json(c.spec), space.input_size) for c in space.candidates()}


def candidate_hashes(space: SearchSpace, described: dict[str, tuple[str, str, str]] | None = None) -> dict[str, str]:
    """Each candidate's description hash, from ``described`` (:func:`describe_candidates`) where given; two
    candidates of one network (``["vgg", {name = "vgg2", style = "vgg"}]``) are a ConfigError naming both (each
    was trained and measured, until 0.9.8)."""
    hashes = {name: model_hash for name, (_, model_hash, _) in (described or describe_candidates(space)).items()}
    first: dict[str, str] = {}
    for name, model_hash in hashes.items():
        if (other := first.setdefault(model_hash, name)) != name:
            raise ConfigError(f"{space.path}: candidates {other} and {name} are the same network (model_hash {model_hash}): "
                              "keep one of their primitives")
    return hashes


def accuracy_record(space: SearchSpace, c: Candidate, model_hash: str) -> Any:
    """The ``accuracy`` run of a candidate under the space's budget, before training (its key is final)."""
    from tracker.log.record import RunRecord

    b = space.accuracy
    params = {"model": c.name, "model_hash": model_hash, "dataset": b.dataset, "epochs": b.epochs,
              "batch_size": b.batch_size, "learning_rate": b.learning_rate, "seed": b.seed,
              "search_space": space.name, "candidate": c.choices}
    record = RunRecord(kind="accuracy", name=f"{c.name} · accuracy · {b.dataset} · {b.epochs} epochs", params=params,
                       key_fields={k: v for k, v in params.items() if k != "candidate"},
                       tags={"tracker.campaign": space.name, "tracker.source": "measured"},
                       description=f"Validation accuracy of candidate {c.name} of search space {space.name} after "
                                   f"{b.epochs} epochs on {b.dataset}.")
    return record


def _candidate_record(space: SearchSpace, c: Candidate, model_hash: str, source: str, mode: str | None,
                      fingerprint_version: str | None = None, fingerprint_mode: str | None = None) -> Any:
    """A candidate's latency run. Its key holds the device mode it is measured in, or the fingerprint
    version that predicts it: a champion moved to a better version makes the prediction missing again."""
    from tracker.log.record import RunRecord

    lat = space.latency
    params: dict[str, Any] = {"search_space": space.name, "model": c.name, "model_hash": model_hash, "candidate": c.choices,
                              "latency_source": source, "device": lat.device, "batch_size": lat.batch_size}
    if mode:
        params["mode"] = mode
    if fingerprint_version:
        params["fingerprint_version"] = fingerprint_version
    keys = {k: v for k, v in params.items() if k != "candidate"}
    if fingerprint_mode:  # follows from the version: not part of the key
        params["fingerprint_mode"] = fingerprint_mode
    return RunRecord(kind="candidate", name=f"{c.name} · latency {source} · bs{lat.batch_size} · {lat.device}", params=params,
                     key_fields=keys, tags={"tracker.campaign": space.name, "tracker.source": source},
                     description=f"Latency of candidate {c.name} of {space.name}, {source}.")


def check_runnable(space: SearchSpace, latency: str = "measured", skip_latency: bool = False) -> None:
    """What this machine must have to fill the space's tables, each one line: the latency source, the
    [latency] device and its threads, at most this machine's CPUs. ``searchspace run`` checks before it opens
    the store (after, until 0.9.13: ``threads = 1000`` on a machine of 2 CPUs was refused, and an empty store
    left made), and :func:`run_space` before anything."""
    if latency not in SOURCES:
        raise TrackerError(f"--latency must be measured or predicted, got {latency!r}")
    if latency == "measured" and not skip_latency:
        from tracker.profile.device import check_device

        check_device(space.latency.device)  # one line before anything, as a campaign's (a FAILED run each until 0.9.3)
    if not skip_latency and space.latency.threads is not None:  # after every accuracy, as "--threads", until 0.9.7
        from tracker.profile.modes import validate_threads

        validate_threads(space.latency.threads, f"{space.path}: [latency].threads =")


def run_space(logger: Any, space: SearchSpace, specs_dir: Path, latency: str = "measured", skip_accuracy: bool = False,
              skip_latency: bool = False, time_cap_s: float = DEFAULT_TIME_CAP_S,
              progress: Callable[[str], None] | None = None) -> Tally:
    """Fill what is missing: an ``accuracy`` run per candidate, and a ``candidate`` run with its latency
    (``measured``: a network run by the profilers; ``predicted``: the registered fingerprints). A
    measured candidate already there whose CI is wider than IMPRECISE_CI_REL is measured again where
    ``time_cap_s`` is longer than the cap it had, else named imprecise again."""
    from tracker.log.record import now_ms
    from tracker.searchspace.accuracy import train_and_evaluate

    check_runnable(space, latency, skip_latency)
    registered, wanted = None, None
    if not skip_latency:  # the device mode its latencies are measured in, or were learnt in
        from tracker.profile.modes import read_mode

        wanted = read_mode(space.latency.device, threads=space.latency.threads, allocator=space.latency.allocator).mode_id
    if latency == "predicted" and wanted is not None:
        # the champion looked up before any candidate is trained (a store without one failed after the whole
        # accuracy table was trained, until 0.9.8); its model is loaded only where a prediction is missing
        registered = _latency_champion(logger.location.uri, space.latency.device, wanted)
    say = progress or (lambda _: None)
    candidates = space.candidates()
    described = describe_candidates(space)
    hashes = candidate_hashes(space, described)  # one network twice: refused before any spec file is written
    paths = write_specs(space, specs_dir)
    tally = Tally()
    if not skip_accuracy:
        done = logger.measured(kind="accuracy")
        b = space.accuracy
        for c in candidates:
            record = accuracy_record(space, c, hashes[c.name])
            if record.config_key in done:
                tally.accuracy_skipped += 1
                continue
            split = _split(space)
            say(f"accuracy {c.name}")
            record.start_time_ms = now_ms()
            try:
                result = train_and_evaluate(c.spec, split, b.epochs, b.batch_size, b.learning_rate, b.seed)
            except MeasurementError as exc:  # a loss gone NaN: this candidate's FAILED run (the whole run, since
                # the log refused its NaN, until 0.9.8)
                record.fail("error", str(exc))
                record.tags[FAILURE_MESSAGE_TAG] = first_line(exc)[:300]
                tally.failed.append(c.name)
                tally.accuracy_failed += 1
                tally.failures[c.name] = f"accuracy: {record.tags[FAILURE_MESSAGE_TAG]}"
            except TrackerError:
                raise
            except Exception as exc:  # a fault of this candidate's training ends it alone (the campaign, with a
                # traceback, until 0.9.7): a loss past float's range, a batch norm given one value, memory
                _failed(record, exc)
                tally.failed.append(c.name)
                tally.accuracy_failed += 1
                tally.failures[c.name] = f"accuracy: {record.tags[FAILURE_MESSAGE_TAG]}"
            else:
                record.params.update(train_count=result.train_count, val_count=result.val_count)
                record.metrics.update(val_accuracy=result.val_accuracy, train_loss=result.train_loss,
                                      train_time_s=result.train_time_s)
            record.end_time_ms = now_ms()
            _log(logger, record, c.name, "accuracy", tally)
            tally.accuracy_done += 1
    if wanted is not None:
        mode, version, learnt_mode = None, None, None
        if latency == "measured":
            mode = tally.mode = wanted
        else:  # the version read before training, its model loaded only if a candidate lacks its prediction
            assert registered is not None
            version = f"{registered['latency_ms'].name}/{registered['latency_ms'].version}"
            learnt_mode = tally.mode = registered["latency_ms"].tags.get("mode") or None
            if learnt_mode is not None and learnt_mode != wanted:  # the space's threads and allocator, unheeded until 0.9.2
                tally.space_mode = wanted
        done = logger.measured(kind="candidate")
        todo = []
        for c in candidates:
            record = _candidate_record(space, c, hashes[c.name], latency, mode, version, learnt_mode)
            if latency == "measured":
                record.params["time_cap_s"] = time_cap_s  # not part of the key
            if record.config_key in done:
                old = logger.find(record.config_key) if latency == "measured" else None
                if old is not None and imprecise(old.metrics):
                    if time_cap_s > time_cap_of(old):
                        tally.measured_again.append(c.name)
                        todo.append((c, record))
                        continue
                    tally.imprecise.append(c.name)  # said again at every run (the first alone until 0.9.8)
                tally.latency_skipped += 1
            else:
                todo.append((c, record))
        if registered is not None and todo:
            say(f"latency (predicted by {version}) of {len(todo)} candidates")
            _predict(logger.location.uri, space, registered,
                     [(record, paths[c.name], described[c.name][2]) for c, record in todo])
        for c, record in todo:
            if latency == "measured":
                say(f"latency (measured) {c.name}")
                _measure(logger, space, record, paths[c.name], time_cap_s)
            if record.status != "FINISHED":
                tally.latency_failed += 1
                if c.name not in tally.failed:
                    tally.failed.append(c.name)
                message = record.tags.get(FAILURE_MESSAGE_TAG) or record.tags.get("tracker.failure_reason", "failed")
                tally.failures[c.name] = "; ".join(filter(None, (tally.failures.get(c.name), f"latency: {message}")))
            if "tracker.outside_trained_range" in record.tags:
                tally.extrapolated.append(c.name)
            if imprecise(record.metrics):
                tally.imprecise.append(c.name)
            if beside_other_work(record.metrics):
                tally.beside_other_work.append(c.name)
            tally.device_time_s += record.metrics.get("device_time_s", 0.0)
            _log(logger, record, c.name, "latency", tally)
            tally.latency_done += 1
    return tally


def time_cap_of(run: Any) -> float:
    """The time cap a measured candidate's run had: its ``time_cap_s`` param, or ``DEFAULT_TIME_CAP_S``
    where it has none (a store from before caps were recorded) or one that is no positive finite number
    (edited in the store's database: a ValueError's traceback until 0.9.21), as if none were recorded."""
    from tracker.console import decimal_number
    from tracker.settings import finite_number

    cap = decimal_number(str(run.params.get("time_cap_s", DEFAULT_TIME_CAP_S)))
    return cap if cap is not None and finite_number(cap) and cap > 0 else DEFAULT_TIME_CAP_S


def _log(logger: Any, record: Any, name: str, what: str, tally: Tally) -> None:
    """Log a candidate's run; one the log refuses (a figure it cannot take) is logged FAILED without its
    figures, and said, and the run goes on to the next candidate (the refusal ended it until 0.9.8)."""
    try:
        logger.log([record])
        return
    except SchemaError as exc:
        refused = first_line(exc)[:300]
    if record.status == "FINISHED":  # counted FAILED from here
        if what == "accuracy":
            tally.accuracy_failed += 1
        else:
            tally.latency_failed += 1
    record.metrics.clear()
    record.fail("error", refused)
    record.tags[FAILURE_MESSAGE_TAG] = f"not logged as measured: {refused}"
    if name not in tally.failed:
        tally.failed.append(name)
    tally.failures[name] = "; ".join(filter(None, (tally.failures.get(name), f"{what}: {record.tags[FAILURE_MESSAGE_TAG]}")))
    try:
        logger.log([record])
    except SchemaError:  # not even FAILED: said in the summary alone
        pass


def _split(space: SearchSpace) -> Any:
    """The space's dataset at its input size, split; one line where it cannot be made (a traceback,
    allocating 120 GB for digits at 4096 px, until 0.9.7)."""
    from tracker.searchspace.accuracy import load_split

    b = space.accuracy
    try:
        return load_split(b.dataset, space.input_size, b.seed, str(space.path.parent))
    except TrackerError:
        raise
    except Exception as exc:
        why = "out of memory" if is_oom(exc) else f"{type(exc).__name__}: {first_line(exc)[:300]}"
        raise TrackerError(f"{space.path}: [accuracy].dataset {b.dataset!r} at input_size {space.input_size} could not be "
                           f"made ({why}): a smaller input_size") from None


def _failed(record: Any, exc: BaseException) -> None:
    """Mark an accuracy run FAILED by ``exc``: reason ``oom`` or ``error``, its message in a line."""
    import traceback

    record.fail("oom" if is_oom(exc) else "error", "".join(traceback.format_exception(exc)))
    record.tags[FAILURE_MESSAGE_TAG] = f"{type(exc).__name__}: {first_line(exc)[:300]}"


def _measure(logger: Any, space: SearchSpace, record: Any, path: Path, time_cap_s: float) -> None:
    from tracker.profile.api import profile_network
    from tracker.profile.stats import Stopping

    result = profile_network(logger, str(path), space.latency.batch_size, Stopping(time_cap_s=time_cap_s),
                             device=space.latency.device, threads=space.latency.threads,
                             allocator=space.latency.allocator)
    net = result.network
    record.tags["tracker.latency_run"] = net.run_id
    if net.status != "FINISHED":
        record.fail(net.tags.get("tracker.failure_reason", "error"), net.tags.get("tracker.stderr_tail"))
        if FAILURE_MESSAGE_TAG in net.tags:
            record.tags[FAILURE_MESSAGE_TAG] = net.tags[FAILURE_MESSAGE_TAG]
        return
    record.metrics.update(latency_ms=net.metrics["latency_ms"], latency_ci_rel=net.metrics["latency_ci_rel"],
                          device_time_s=net.metrics.get("measure_time_s", 0.0))
    if "cpu_util_others_pct" in net.metrics:
        record.metrics["cpu_util_others_pct"] = net.metrics["cpu_util_others_pct"]


def _latency_champion(uri: str, device: str, mode: str) -> dict[str, Any]:
    """``{"latency_ms": version}``: the registered champion for inference in the device mode ``mode``
    (``fingerprint train --device MODE``'s) where there is one, else on ``device``; not loaded."""
    from tracker.fingerprint.dataset import FingerprintError
    from tracker.fingerprint.predict import champion_versions

    try:
        return champion_versions(uri, "inference", mode, targets=("latency_ms",))
    except FingerprintError:
        pass
    try:
        return champion_versions(uri, "inference", device, targets=("latency_ms",))
    except FingerprintError as exc:
        raise TrackerError(f"{exc}; or use --latency measured") from None


def _predict(uri: str, space: SearchSpace, registered: dict[str, Any], todo: list[tuple[Any, Path, str]]) -> None:
    """Fill each ``(record, spec path, description JSON)`` with its candidate's latency from the
    ``registered`` latency version (loaded once), their features made in one pass from the
    descriptions already made. Each candidate's ``device_time_s`` is an equal share of the whole,
    the load included."""
    from tracker.describe.graph import Description
    from tracker.fingerprint.predict import load_champions, predict_many

    t0 = time.perf_counter()
    champion = load_champions(uri, registered)["latency_ms"]
    descriptions = [Description.from_json(json.loads(text)) for _, _, text in todo]
    outs = predict_many(uri, [str(path) for _, path, _ in todo], space.latency.batch_size, "inference",
                        space.latency.device, models={"latency_ms": champion}, descriptions=descriptions)
    share_s = (time.perf_counter() - t0) / len(todo)
    for (record, _, _), out in zip(todo, outs):
        record.metrics.update(latency_ms=out["predictions"]["latency_ms"], device_time_s=share_s)
        beyond = out["outside_trained_range"].get("latency_ms")
        if beyond:
            record.tags["tracker.outside_trained_range"] = json.dumps(beyond, sort_keys=True)


# --------------------------------------------------------------------------- report

def measured_mode(space: SearchSpace) -> str:
    """The device mode a measured candidate of the space is keyed by here (``run``'s), or one line why not."""
    from tracker.profile.modes import read_mode

    try:
        return read_mode(space.latency.device, threads=space.latency.threads, allocator=space.latency.allocator).mode_id
    except TrackerError as exc:
        raise TrackerError(f"{space.path}: the device mode of its [latency] cannot be read on this machine ({first_line(exc)}): "
                           "report where its candidates were measured, or --latency predicted") from None


def frontier_rows(warehouse: Path, space: SearchSpace, source: str,
                  hashes: dict[str, str] | None = None, mode: str | None = None) -> list[dict[str, Any]]:
    """The file's candidates (``hashes``: name -> description hash, made here unless given) with an accuracy and a ``source``
    latency in the warehouse, each marked ``on_frontier`` among them alone: the view keeps every
    version of a space's candidates, and one dropped from the file or edited since was placed beside
    them until 0.9.7. Only figures of the file's own run keys: its [accuracy] budget and, measured,
    the device mode ``mode`` (:func:`measured_mode`) its [latency] runs in (the newest of any budget or
    mode was placed until 0.9.8)."""
    from tracker.warehouse.load import connect_loaded

    if hashes is None:
        hashes = candidate_hashes(space)
    if source == "measured" and mode is None:
        mode = measured_mode(space)
    b = space.accuracy
    con = connect_loaded(warehouse)
    try:
        cur = con.execute(
            "SELECT model, model_hash, candidate, accuracy, latency_ms, device_time_s, outside_trained_range, "
            "latency_ci_rel, imprecise, mode, fingerprint_mode, cpu_util_others_pct "
            "FROM searchspace_candidates "
            "WHERE search_space = ? AND latency_source = ? AND device = ? AND batch_size = ? "
            "AND dataset = ? AND epochs = ? AND accuracy_batch_size = ? AND learning_rate = ? AND seed = ? "
            "AND (latency_source <> 'measured' OR mode = ?) ORDER BY latency_ms, model",
            [space.name, source, space.latency.device, space.latency.batch_size, b.dataset, b.epochs, b.batch_size,
             float(b.learning_rate), b.seed, mode])
        names = [d[0] for d in cur.description]
        rows = [r for r in (dict(zip(names, r)) for r in cur.fetchall()) if hashes.get(r["model"]) == r["model_hash"]]
    finally:
        con.close()
    for r in rows:
        r["candidate"] = json.loads(r["candidate"]) if isinstance(r["candidate"], str) else r["candidate"]
        r["outside_trained_range"] = json.loads(r["outside_trained_range"]) if r["outside_trained_range"] else {}
        # as the view's on_frontier: no other (precise) candidate at least as accurate and as fast, better in one
        r["on_frontier"] = not r["imprecise"] and not any(
            not o["imprecise"] and o["accuracy"] >= r["accuracy"] and o["latency_ms"] <= r["latency_ms"]
            and (o["accuracy"] > r["accuracy"] or o["latency_ms"] < r["latency_ms"]) for o in rows)
    return rows


def _any_rows(warehouse: Path, name: str) -> bool:
    """Whether the view has any row of the space ``name``, of any budget or mode."""
    from tracker.warehouse.load import connect_loaded

    con = connect_loaded(warehouse)
    try:
        return con.execute("SELECT count(*) FROM searchspace_candidates WHERE search_space = ?", [name]).fetchone()[0] > 0
    finally:
        con.close()


def shared_primitives(space: SearchSpace, rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per position, the primitives that appear on the frontier (ssprofile's shared primitives), in the space's order."""
    on = [r for r in rows if r["on_frontier"]]
    return {p.name: [c.name for c in p.candidates if any(r["candidate"].get(p.name) == c.name for r in on)]
            for p in space.positions}


def report(logger: Any, warehouse: Path, space: SearchSpace, source: str | None = None) -> dict[str, Any]:
    """The frontier of ``source`` (default: measured where there is any, else predicted), its shared
    primitives, the agreement of the predicted frontier with the measured one, and a ``searchspace``
    run carrying the Pareto plot. ``logger``: the RunLogger, or a function that opens it, called only
    where there is a frontier to log (a space never run made its experiment until 0.9.8). A space
    with no candidate to place is a NothingLoggedError."""
    from tracker.log.record import RunRecord
    from tracker.searchspace.plot import pareto_png

    hashes = candidate_hashes(space)
    mode, unreadable = None, None
    try:
        mode = measured_mode(space)
    except TrackerError as exc:  # measured figures cannot be told apart here: predicted ones alone, where asked for
        if source == "measured":
            raise
        unreadable = exc
    by_source = {"measured": frontier_rows(warehouse, space, "measured", hashes, mode) if mode else [],
                 "predicted": frontier_rows(warehouse, space, "predicted", hashes)}
    if unreadable is not None and source is None and not by_source["predicted"]:
        raise unreadable
    chosen = source or ("measured" if by_source["measured"] else "predicted")
    rows = by_source[chosen]
    if not rows:  # "predicted latency" was said of a space never run, where neither was there (until 0.9.5)
        latency = f"{chosen} latency" if source else "a latency (measured or predicted)"
        option = " --latency predicted" if source == "predicted" else ""  # a run that measures was named until 0.9.7
        b = space.accuracy
        other = (f" (it has this space's figures of another [accuracy] budget or [latency] mode only, not placed: the file "
                 f"asks for {b.dataset}, {b.epochs} epochs, batch {b.batch_size}, learning_rate {b.learning_rate:g}, seed "
                 f"{b.seed}{f', mode {mode}' if mode and source != 'predicted' else ''})"
                 if _any_rows(warehouse, space.name) else "")
        raise NothingLoggedError(f"search space {space.name}: no candidate of the file has both accuracy and {latency} in "
                                 f"the warehouse{other}; run `tracker searchspace run {shell_word(space.path)}{option}` (then the "
                                 "report loads the warehouse)")
    shared = shared_primitives(space, rows)
    out: dict[str, Any] = {
        "search_space": space.name, "latency_source": chosen, "device": space.latency.device,
        "batch_size": space.latency.batch_size, "space_candidates": space.count(),
        "candidates": [{"name": r["model"], "choices": r["candidate"], "accuracy": r["accuracy"],
                        "latency_ms": r["latency_ms"], "on_frontier": bool(r["on_frontier"]),
                        "outside_trained_range": r["outside_trained_range"], "latency_ci_rel": r["latency_ci_rel"],
                        "imprecise": bool(r["imprecise"]), "cpu_util_others_pct": r["cpu_util_others_pct"]}
                       for r in rows],
        # the device mode(s) the latencies are of: measured in, or learnt by the predicting version
        "modes": sorted({m for r in rows if (m := r["mode"] or r["fingerprint_mode"])}),
        "shared_primitives": shared,
    }
    metrics = {"candidates_count": float(len(rows)), "frontier_count": float(sum(r["on_frontier"] for r in rows)),
               "best_val_accuracy": max(r["accuracy"] for r in rows), "fastest_latency_ms": min(r["latency_ms"] for r in rows)}
    measured = {r["model"]: bool(r["on_frontier"]) for r in by_source["measured"]}
    predicted = {r["model"]: bool(r["on_frontier"]) for r in by_source["predicted"]}
    common = sorted(set(measured) & set(predicted))
    if common:
        mf, pf = {m for m in common if measured[m]}, {m for m in common if predicted[m]}
        measured_modes = sorted({r["mode"] for r in by_source["measured"] if r["model"] in common and r["mode"]})
        predicted_modes = sorted({r["fingerprint_mode"] for r in by_source["predicted"]
                                  if r["model"] in common and r["fingerprint_mode"]})
        comparison = {
            "candidates": len(common), "shared_frontier": len(mf & pf),
            # latencies of two device modes (a fingerprint that learnt one thread, candidates measured on two)
            # are not the same figure: said, since 0.9.0
            "measured_modes": measured_modes, "predicted_modes": predicted_modes,
            "modes_differ": bool(measured_modes and predicted_modes and measured_modes != predicted_modes),
            "agreement": sum(measured[m] == predicted[m] for m in common) / len(common),
            "jaccard": len(mf & pf) / len(mf | pf) if mf | pf else 1.0,
            "measured_frontier": sorted(mf), "predicted_frontier": sorted(pf),
            "measured_device_time_s": sum(r["device_time_s"] or 0.0 for r in by_source["measured"] if r["model"] in common),
            "predicted_device_time_s": sum(r["device_time_s"] or 0.0 for r in by_source["predicted"] if r["model"] in common),
        }
        out["comparison"] = comparison
        metrics.update(frontier_agreement_frac=comparison["agreement"], frontier_jaccard_frac=comparison["jaccard"],
                       measured_device_time_s=comparison["measured_device_time_s"],
                       predicted_device_time_s=comparison["predicted_device_time_s"])
    record = RunRecord(kind="searchspace", name=f"{space.name} · frontier · {chosen} · bs{space.latency.batch_size} · "
                                                 f"{space.latency.device}",
                       params={"search_space": space.name, "latency_source": chosen, "device": space.latency.device,
                               "batch_size": space.latency.batch_size, "shared_primitives": shared},
                       metrics=metrics, tags={"tracker.campaign": space.name},
                       # the comparison too: a report after predictions were added was the run logged before
                       # them, without its comparison, until 0.9.7
                       key_fields={"search_space": space.name, "source": chosen, "rows": out["candidates"],
                                   "comparison": out.get("comparison")},
                       description=f"Accuracy-latency Pareto frontier of search space {space.name} ({chosen} latency).")
    if callable(logger):
        logger = logger()
    # A report of the same rows as one logged before is that run (each report logged a run of its own,
    # four alike after four reports, until 0.9.0)
    same = logger.find(record.config_key)
    if same is not None:
        out["run_id"], out["logged"] = same.run_id, False
        return out
    record.artifacts["pareto.png"] = pareto_png(space.name, rows, chosen, by_source["measured"] if chosen == "predicted" else None)
    record.artifacts["report.json"] = json.dumps(out, indent=2)
    logger.log([record])
    out["run_id"], out["logged"] = record.run_id, True
    return out
