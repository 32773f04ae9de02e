"""Search-space profiling on the bundled digits: accuracy and measured latency tables filled
separately and only where missing, the frontier view and report with its shared primitives,
and clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.test_cli import in_process, run_cli
from tracker.cli.app import app
from tracker.settings import resolve_location

runner = CliRunner()
SPACE = """name = "tiny"
input_size = 16
num_classes = 10
stem_channels = 8
enumerate = "all"
[[positions]]
name = "a"
width = 16
candidates = ["vgg", "mobilenet"]
[[positions]]
name = "b"
width = 32
candidates = ["vgg", {name = "mb6", style = "mobilenet", expansion = 6}]
[accuracy]
epochs = 1
batch_size = 128
[latency]
batch_size = 1
threads = 1
"""


def _cli(runs: Path, *args: str) -> object:
    return runner.invoke(app, ["--tracking-uri", str(runs), *args])


def test_tables_fill_only_what_is_missing_and_the_report_keeps_the_frontier(tmp_path: Path) -> None:
    runs, wh, space = tmp_path / "runs", tmp_path / "w.duckdb", tmp_path / "tiny.toml"
    space.write_text(SPACE)
    out = _cli(runs, "searchspace", "run", str(space), "--skip-latency", "--format", "json")
    assert out.exit_code == 0, out.output
    first = json.loads(out.stdout)
    assert (first["candidates"], first["accuracy_done"], first["latency_done"]) == (4, 4, 0)
    out = _cli(runs, "searchspace", "run", str(space), "--skip-accuracy", "--time-cap", "0.5", "--format", "json")
    second = json.loads(out.stdout)
    assert (second["accuracy_done"], second["latency_done"], second["failed"]) == (0, 4, [])
    assert second["device_time_s"] > 0
    # the same time cap: a candidate imprecise within 0.5 s would be measured again under the default 5 s (as it
    # should: test_an_imprecise_candidate_is_measured_again_with_a_longer_time_cap), which a loaded machine made
    # happen here once (latency_done 1)
    again = json.loads(_cli(runs, "searchspace", "run", str(space), "--time-cap", "0.5", "--format", "json").stdout)
    assert (again["accuracy_done"], again["accuracy_skipped"], again["latency_done"], again["latency_skipped"]) == (0, 4, 0, 4)
    assert len(list((tmp_path / "tiny" / "networks").glob("*.json"))) == 4  # the candidates' spec files

    out = _cli(runs, "searchspace", "report", str(space), "--warehouse", str(wh), "--format", "json")
    assert out.exit_code == 0, out.output
    rep = json.loads(out.stdout)
    cands = rep["candidates"]
    assert rep["latency_source"] == "measured" and len(cands) == 4
    assert rep["modes"] == ["cpu-t1"]  # [latency] threads: the mode measured in
    assert all(0 <= c["accuracy"] <= 1 and c["latency_ms"] > 0 for c in cands)
    for c in cands:  # on the frontier exactly when no other precise candidate dominates it, and precise itself
        dominated = any(o["accuracy"] >= c["accuracy"] and o["latency_ms"] <= c["latency_ms"] and not o["imprecise"]
                        and (o["accuracy"] > c["accuracy"] or o["latency_ms"] < c["latency_ms"]) for o in cands)
        assert c["on_frontier"] is (not dominated and not c["imprecise"])
    on = [c for c in cands if c["on_frontier"]]
    assert on and rep["shared_primitives"] == {
        pos: [p for p in names if any(c["choices"][pos] == p for c in on)]
        for pos, names in (("a", ["vgg", "mobilenet"]), ("b", ["vgg", "mb6"]))}
    client = MlflowClient(resolve_location(str(runs)).uri)
    run = client.get_run(rep["run_id"])
    assert run.data.tags["tracker.kind"] == "searchspace" and run.data.metrics["frontier_count"] == len(on)
    assert {a.path for a in client.list_artifacts(rep["run_id"])} >= {"pareto.png", "report.json"}
    png = Path(client.download_artifacts(rep["run_id"], "pareto.png", str(tmp_path)))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    acc = client.search_runs([run.info.experiment_id], "tags.`tracker.kind` = 'accuracy'")
    assert len(acc) == 4 and all(r.data.params["dataset"] == "digits" for r in acc)
    # a space never run: neither latency is there ("predicted latency" alone was said until 0.9.5)
    other = tmp_path / "other.toml"
    other.write_text(SPACE.replace('name = "tiny"', 'name = "other"'))
    never = _cli(runs, "searchspace", "report", str(other), "--warehouse", str(wh))
    assert never.exit_code == 1 and str(never.exception).startswith(
        "search space other: no candidate of the file has both accuracy and a latency (measured or predicted) in the "
        "warehouse")
    assert all(int(r.data.params["val_count"]) > 300 for r in acc)  # a fifth of the 1797 digits

    # A candidate dropped from the file is not placed beside the file's own (until 0.9.7 it stood on
    # the frontier "of 4"), and the file's are placed among themselves.
    dropped = tmp_path / "dropped.toml"
    dropped.write_text(SPACE.replace('candidates = ["vgg", "mobilenet"]', 'candidates = ["vgg"]'))
    rep2 = json.loads(_cli(runs, "searchspace", "report", str(dropped), "--warehouse", str(wh), "--format", "json").stdout)
    kept = [c for c in cands if c["choices"]["a"] == "vgg"]
    assert sorted(c["name"] for c in rep2["candidates"]) == sorted(c["name"] for c in kept)
    assert rep2["space_candidates"] == 2
    for c in rep2["candidates"]:
        o = next(k for k in rep2["candidates"] if k is not c)
        dominated = (not o["imprecise"] and o["accuracy"] >= c["accuracy"] and o["latency_ms"] <= c["latency_ms"]
                     and (o["accuracy"] > c["accuracy"] or o["latency_ms"] < c["latency_ms"]))
        assert c["on_frontier"] is (not dominated and not c["imprecise"])
    # An edited candidate is another network: its new accuracy is not joined to the old one's latency
    # (a width-40 accuracy stood beside a width-32 latency until 0.9.7).
    edited = tmp_path / "edited.toml"
    edited.write_text(SPACE.replace("width = 32", "width = 40"))
    assert _cli(runs, "searchspace", "run", str(edited), "--skip-latency").exit_code == 0
    none = _cli(runs, "searchspace", "report", str(edited), "--warehouse", str(wh))
    assert none.exit_code == 1 and "no candidate of the file has both" in str(none.exception), none.output
    rep3 = json.loads(_cli(runs, "searchspace", "report", str(space), "--warehouse", str(wh), "--format", "json").stdout)
    assert {c["name"]: c["accuracy"] for c in rep3["candidates"]} == {c["name"]: c["accuracy"] for c in cands}
    import duckdb

    con = duckdb.connect(str(wh), read_only=True)
    try:  # the view keeps both versions, the edited one current, and draws the frontier among current rows
        rows = con.execute("SELECT current, on_frontier FROM searchspace_candidates WHERE search_space = 'tiny'").fetchall()
    finally:
        con.close()
    assert len(rows) == 4 and not any(cur or on for cur, on in rows)  # the edited have no latency: no current row

    # Predictions added after a report make another report, with the comparison (the one before was
    # answered, without it, until 0.9.7): a predicted candidate run of each, logged as run does.
    from tracker.log.logger import RunLogger
    from tracker.searchspace.run import _candidate_record, candidate_hashes
    from tracker.searchspace.space import load_space

    loaded = load_space(space)
    hashes = candidate_hashes(loaded)
    logger = RunLogger(str(runs), "searchspace-tiny")
    records = []
    for c in loaded.candidates():
        record = _candidate_record(loaded, c, hashes[c.name], "predicted", None, "latency_ms-inference-cpu/1", "cpu-t1")
        record.metrics.update(latency_ms=next(k["latency_ms"] for k in cands if k["name"] == c.name), device_time_s=0.01)
        records.append(record)
    logger.log(records)
    rep4 = json.loads(_cli(runs, "searchspace", "report", str(space), "--warehouse", str(wh), "--format", "json").stdout)
    assert rep4["logged"] is True and rep4["run_id"] != rep3["run_id"] and rep4["comparison"]["jaccard"] == 1.0
    assert client.get_run(rep4["run_id"]).data.metrics["frontier_agreement_frac"] == 1.0


def test_a_report_of_a_space_never_run_makes_nothing(tmp_path: Path) -> None:
    """A report of a space never run made its experiment (searchspace-NAME) and a warehouse, then said
    there was nothing to report, until 0.9.8. Now it says so in one line and leaves the store and the
    folders as they were: no experiment, no warehouse, no folder made for one."""
    from tests.conftest import ENV, network_record
    from tracker.errors import NothingLoggedError
    from tracker.log.logger import RunLogger

    runs, space = tmp_path / "runs", tmp_path / "never.toml"
    space.write_text(SPACE.replace('name = "tiny"', 'name = "never"'))
    RunLogger(str(runs), environment=ENV).log([network_record()])  # a store with other runs in it
    client = MlflowClient(resolve_location(str(runs)).uri)
    before = [e.name for e in client.search_experiments()]
    for extra in ([], ["--warehouse", str(tmp_path / "new" / "folder" / "w.duckdb")]):
        out = _cli(runs, "searchspace", "report", str(space), *extra)
        assert out.exit_code == 1 and isinstance(out.exception, NothingLoggedError), out.output
        assert str(out.exception).startswith("search space never: no candidate of the file has both accuracy and a "
                                              "latency") and "\n" not in str(out.exception)
        assert [e.name for e in client.search_experiments()] == before == ["Default"]
        assert not (runs / "warehouse.duckdb").exists() and not (tmp_path / "new").exists()
        assert sorted(p.name for p in runs.iterdir() if "warehouse" in p.name) == []


def test_a_long_list_of_candidates_is_cut_to_its_first_five_and_a_count() -> None:
    from tracker.cli.searchspace import some

    names = [f"c{i}" for i in range(27)]
    assert some(names) == "c0, c1, c2, c3, c4 and 22 more (--format json lists all)"
    assert some(names[:5]) == "c0, c1, c2, c3, c4" and some(names[:1]) == "c0"


def test_bad_space_and_missing_fingerprint_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(SPACE.replace('candidates = ["vgg", "mobilenet"]', 'candidates = ["vgg", "transformer"]'))
    proc = in_process(["--tracking-uri", str(tmp_path / "runs"), "searchspace", "run", str(bad)], tmp_path)
    assert proc.returncode == 1 and "positions[0].candidates[1]: unknown primitive 'transformer'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    both = _cli(tmp_path / "runs", "searchspace", "run", str(bad), "--skip-accuracy", "--skip-latency")  # ran, did nothing
    assert both.exit_code == 1 and str(both.exception) == ("--skip-accuracy and --skip-latency together leave nothing to "
                                                           "fill: give one at most")
    # a device this machine lacks: one line before anything (a FAILED run per candidate until 0.9.3)
    import torch

    if not torch.cuda.is_available():
        bad.write_text(SPACE.replace("[latency]", '[latency]\ndevice = "cuda"'))
        proc = in_process(["--tracking-uri", str(tmp_path / "runs"), "searchspace", "run", str(bad)], tmp_path)
        assert proc.returncode == 1 and proc.stderr == (
            "error: device 'cuda' (cuda:0) is not available on this machine (no CUDA GPU): measure on cpu\n"), proc.stderr
        assert not (tmp_path / "runs").exists()  # refused before the store is opened (an empty one made until 0.9.13)
    from tracker.errors import ConfigError
    from tracker.searchspace.space import load_space

    for old, new, message in [("epochs = 1", "epochs = 0", "[accuracy].epochs must be from 1 to 10000, got 0"),
                              # as a training job's num_epochs: any number was trained at until 0.9.14
                              ("epochs = 1", "epochs = 100000000000", "[accuracy].epochs must be from 1 to 10000, got "
                               "100000000000"),
                              ("[accuracy]", "[accuracy]\nlearning_rate = -0.5", "[accuracy].learning_rate must be greater than 0"),
                              ("input_size = 16", "input_size = 4", "spec key 'input_size' must be at least 8"),
                              # any name passed until 0.9.8 (the report's "  : vgg on the frontier")
                              ('name = "a"', 'name = ""', "positions[0].name: lower-case letters, digits and _ (e.g. "
                               "stage1), got ''"),
                              ('name = "b"', 'name = "Stage B"', "positions[1].name: lower-case letters, digits and _"),
                              # any name starting with cuda passed until 0.9.8 (as a campaign's devices since)
                              ("[latency]", '[latency]\ndevice = "cudaXYZ"', "[latency].device: unknown device 'cudaXYZ' "
                               "(cpu, cuda, cuda:N)"),
                              ("width = 32", "width = 32\ndepth = 0", "positions[1].depth: at least 1, got 0"),
                              ("input_size = 16", "input_sise = 16", "unknown key input_sise (known: name, input_size, "
                               "num_classes, activation, stem_channels, enumerate; tables: [[positions]], [accuracy], [latency])"),
                              # each a traceback, or unread, until 0.9.7
                              ("[accuracy]", "[accuracy]\nseed = -1", "[accuracy].seed must be between 0 and 4294967296, got -1"),
                              ("batch_size = 1\nthreads", "batch_size = 2000000\nthreads", "[latency].batch_size must be "
                               "from 1 to 1048576, got 2000000"),
                              ("expansion = 6}", "expanson = 6}", "positions[1].candidates[1]: unknown knob(s) expanson for "
                               "style mobilenet (it takes width, depth, expansion, kernel)"),
                              ('"mobilenet"]', '{style = "vgg", width = 17}]', "positions[0].candidates[1].width: a multiple "
                               "of 8, got 17"),
                              ('"mobilenet"]', '"inception"]', "candidate tiny-inception-vgg: inception at width 16: its "
                               "default branches need a width of at least 32"),
                              # 2 x 2 x 2**11 candidates: 78,125 spec files were written without a word until 0.9.7
                              ("[accuracy]", "".join(f'[[positions]]\nname = "p{i}"\nwidth = 8\ncandidates = ["vgg", '
                                                     '"mobilenet"]\n' for i in range(11)) + "[accuracy]",
                               "the space makes 8,192 candidates (enumerate = 'all'), more than 4,096")]:
        assert old in SPACE
        bad.write_text(SPACE.replace(old, new))
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_space(bad)
    # [latency].threads this machine lacks: before any candidate is trained (after all of them, said as
    # "--threads", until 0.9.7)
    bad.write_text(SPACE.replace("[latency]", '[latency]\ndevice = "cuda:0"'))
    assert load_space(bad).latency.device == "cuda"  # one device, one key: cuda:0 is cuda (until 0.9.8 two)
    bad.write_text(SPACE.replace("threads = 1", "threads = 999"))
    proc = in_process(["--tracking-uri", str(tmp_path / "runs"), "searchspace", "run", str(bad)], tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith(f"error: {bad}: [latency].threads = 999: expected a whole "
                                                           "number from 1 to "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "tiny").exists()  # no spec file written
    assert not (tmp_path / "runs").exists()  # nor a store (an empty one was made until 0.9.13)
    from tracker.searchspace.accuracy import load_split

    with pytest.raises(ConfigError) as info:  # it named a training job's key, [data].path, which a space has not
        load_split("imagenet", 16, 0, base=str(tmp_path))
    assert str(info.value).startswith(f"[accuracy].dataset 'imagenet': {tmp_path / 'imagenet'} is not a folder (give")
    space = tmp_path / "tiny.toml"
    space.write_text(SPACE)
    proc = run_cli("--tracking-uri", str(tmp_path / "runs"), "searchspace", "run", str(space), "--skip-accuracy",
                   "--latency", "predicted", cwd=tmp_path)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: no latency_ms fingerprint for phase 'inference' on device 'cpu'")
    assert proc.stderr.strip().endswith("or use --latency measured")
    # with the accuracy table too: said before any candidate is trained (after all of them until 0.9.8)
    proc = run_cli("--tracking-uri", str(tmp_path / "runs"), "searchspace", "run", str(space), "--latency", "predicted",
                   cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("error: no latency_ms fingerprint for phase 'inference'")
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "tiny").exists(), proc.stderr
    client = MlflowClient(resolve_location(str(tmp_path / "runs")).uri)
    exp = client.get_experiment_by_name("searchspace-tiny")
    assert exp is None or not client.search_runs([exp.experiment_id], "tags.`tracker.kind` = 'accuracy'")


def test_a_candidate_whose_training_fails_ends_alone_and_is_said(tmp_path: Path) -> None:
    """A fault of one candidate's training (here a learning rate whose loss leaves float's range) is
    that candidate's FAILED accuracy run with its message, the others trained (a traceback ended the
    whole run until 0.9.7); a dataset that cannot be made at the space's size is one line."""
    space = tmp_path / "lr.toml"
    space.write_text(SPACE.replace("[accuracy]", "[accuracy]\nlearning_rate = 1e300"))
    out = _cli(tmp_path / "runs", "searchspace", "run", str(space), "--skip-latency", "--format", "json")
    assert out.exit_code == 0, out.output  # a candidate's failure is its own, as a campaign's measurement's
    tally = json.loads(out.stdout)
    assert tally["accuracy_done"] == 4 and sorted(tally["failed"]) == sorted(tally["failures"]) and tally["failed"]
    assert all(m.startswith("accuracy: RuntimeError: ") for m in tally["failures"].values()), tally["failures"]
    client = MlflowClient(resolve_location(str(tmp_path / "runs")).uri)
    failed = client.search_runs([client.get_experiment_by_name("searchspace-tiny").experiment_id],
                                "tags.`tracker.kind` = 'accuracy' AND attributes.status = 'FAILED'")
    assert sorted(r.data.params["model"] for r in failed) == sorted(tally["failed"])
    assert all(r.data.tags["tracker.failure_message"] == tally["failures"][r.data.params["model"]].removeprefix("accuracy: ")
               and r.data.tags["tracker.failure_reason"] == "error" for r in failed)
    table = _cli(tmp_path / "runs", "searchspace", "run", str(space), "--skip-latency")  # said, each with why
    assert table.exit_code == 0 and f"  failed: {tally['failed'][0]}: accuracy: RuntimeError: " in table.stdout, table.output
    huge = tmp_path / "huge.toml"  # the digits at 2,048 px a side: 30 GB (a traceback until 0.9.7)
    huge.write_text(SPACE.replace("input_size = 16", "input_size = 2048"))
    proc = run_cli("--tracking-uri", str(tmp_path / "runs"), "searchspace", "run", str(huge), "--skip-latency", cwd=tmp_path)
    assert proc.returncode == 1 and f"error: {huge}: [accuracy].dataset 'digits' at input_size 2048 could not be made (" \
        in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    empty = _cli(tmp_path / "runs", "searchspace", "run", str(space), "--specs", "")  # the current folder until 0.9.7
    assert empty.exit_code == 1 and str(empty.exception).startswith("--specs names no folder"), empty.output


def test_an_imprecise_measurement_is_off_the_frontier_and_two_modes_are_said(tmp_path: Path) -> None:
    """A candidate measured while other processes took the CPU (CI ±169 %) was on the frontier and
    kept better ones off it, and a frontier measured on two threads was compared with one predicted
    by a fingerprint of one thread without a word, until 0.9.0. The view's threshold is the Python
    constant's (``IMPRECISE_CI_REL``, which a campaign measures again at and fingerprint train leaves out
    at): a CI of exactly it is precise, 4 % over it is not."""
    from tracker.log.logger import RunLogger
    from tracker.profile.stats import IMPRECISE_CI_REL
    from tracker.searchspace.run import _candidate_record, accuracy_record, candidate_hashes, measured_mode, report
    from tracker.searchspace.space import load_space
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    (tmp_path / "tiny.toml").write_text(SPACE)
    space = load_space(tmp_path / "tiny.toml")
    mode = measured_mode(space)  # the report places the file's own mode's measurements (since 0.9.9): cpu-t1 here
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="ss")
    cands = space.candidates()
    hashes = candidate_hashes(space)  # the report places the file's own candidates, by their networks (since 0.9.7)
    # accuracy rises and latency with it; the fastest, measured imprecisely, has the best accuracy too; the next
    # one's CI is at the edge, precise
    figures = {cands[0].name: (0.95, 0.2, IMPRECISE_CI_REL * 1.04), cands[1].name: (0.80, 1.0, IMPRECISE_CI_REL),
               cands[2].name: (0.85, 2.0, 0.02),
               cands[3].name: (0.90, 3.0, 0.02)}
    for c in cands:
        accuracy, latency_ms, ci_rel = figures[c.name]
        acc = accuracy_record(space, c, hashes[c.name])
        acc.params.update(train_count=100, val_count=20)
        acc.metrics.update(val_accuracy=accuracy, train_loss=0.1, train_time_s=1.0)
        measured = _candidate_record(space, c, hashes[c.name], "measured", mode)
        measured.metrics.update(latency_ms=latency_ms, latency_ci_rel=ci_rel, device_time_s=0.5)
        predicted = _candidate_record(space, c, hashes[c.name], "predicted", None, "latency_ms-inference-cpu/1", "cpu-t2")
        predicted.metrics.update(latency_ms=latency_ms, device_time_s=0.01)
        logger.log([acc, measured, predicted])
    load(wh, open_source(resolve_location(str(runs))))
    out = report(logger, wh, space, "measured")
    on = {c["name"] for c in out["candidates"] if c["on_frontier"]}
    assert on == {cands[1].name, cands[2].name, cands[3].name}  # the imprecise one off, and keeping none off
    assert [c["imprecise"] for c in out["candidates"]] == [True, False, False, False]
    cmp = out["comparison"]
    assert cmp["modes_differ"] and (cmp["measured_modes"], cmp["predicted_modes"]) == ([mode], ["cpu-t2"])
    # predicted (no CI), the fastest dominates every other: a frontier of one, which the measured one lacks
    assert cmp["shared_frontier"] == 0 and cmp["predicted_frontier"] == [cands[0].name] and out["modes"] == [mode]
    assert out["logged"] is True
    shown = _cli(runs, "-e", "ss", "searchspace", "report", str(tmp_path / "tiny.toml"), "--warehouse", str(wh),
                 "--latency", "measured")
    assert shown.exit_code == 0, shown.output
    assert f"note: measured in mode {mode}, predicted by a fingerprint that learnt cpu-t2" in shown.stdout
    assert "1 of 4 candidates measured too imprecisely to place" in shown.stdout
    assert "0 candidate(s) on both, of 1 predicted and 3 measured (Jaccard 0.00" in shown.stdout
    # the same rows again: the run logged before, not one more alike
    assert report(logger, wh, space, "measured")["logged"] is False
    client = MlflowClient(resolve_location(str(runs)).uri)
    assert len(client.search_runs([client.get_experiment_by_name("ss").experiment_id],
                                  "tags.`tracker.kind` = 'searchspace'")) == 1
    logger.close()


def test_a_loss_gone_nan_is_that_candidates_failed_run_and_the_others_train(tmp_path: Path) -> None:
    """A learning rate whose loss goes NaN: each such candidate is a FAILED accuracy run "loss is nan",
    every candidate tried (the log's refusal of the NaN ended the whole run, nothing logged, until
    0.9.8); a run the log refuses is logged FAILED without its figures and the run goes on."""
    import math

    from tracker.log.logger import RunLogger
    from tracker.searchspace.run import Tally, _log, accuracy_record, candidate_hashes
    from tracker.searchspace.space import load_space

    space = tmp_path / "lr.toml"
    space.write_text(SPACE.replace("[accuracy]", "[accuracy]\nlearning_rate = 1e4"))
    runs = tmp_path / "runs"
    out = _cli(runs, "searchspace", "run", str(space), "--skip-latency", "--format", "json")
    tally = json.loads(out.stdout)
    assert tally["accuracy_done"] == 4 and len(tally["failed"]) >= 2, out.output  # here 3: one stays finite
    assert any(m.startswith("accuracy: loss is nan at epoch 1 of 1") for m in tally["failures"].values())
    assert all(re.match(r"accuracy: loss is (nan|inf) at epoch 1 of 1 \(learning_rate 10000: a smaller one\)$", m)
               for m in tally["failures"].values()), tally["failures"]
    client = MlflowClient(resolve_location(str(runs)).uri)
    exp = client.get_experiment_by_name("searchspace-tiny").experiment_id
    failed = client.search_runs([exp], "tags.`tracker.kind` = 'accuracy' AND attributes.status = 'FAILED'")
    assert sorted(r.data.params["model"] for r in failed) == sorted(tally["failed"])
    assert all("val_accuracy" not in r.data.metrics for r in failed)
    assert out.exit_code == 0 and (tally["accuracy_failed"], tally["latency_failed"]) == (len(failed), 0)
    # each failed one tried again, none ends the run; each kind's failures its own (the failed accuracies were
    # said as the latency's until 0.9.8); status 0, as a campaign's: a candidate's failure is its own
    both = _cli(runs, "searchspace", "run", str(space), "--time-cap", "0.1")
    n = len(failed)
    assert both.exit_code == 0 and (f"tiny: 4 candidates; accuracy {n} trained, {4 - n} already there, {n} failed; latency "
                                    "(measured) 4 new, 0 already there, 0 failed; ") in both.stdout, both.output

    loaded = load_space(space)
    c = loaded.candidates()[0]
    record = accuracy_record(loaded, c, candidate_hashes(loaded)[c.name])
    record.metrics.update(val_accuracy=0.1, train_loss=math.nan, train_time_s=1.0)
    logger, refused = RunLogger(str(runs), experiment="refused"), Tally()
    _log(logger, record, c.name, "accuracy", refused)
    logger.close()
    assert refused.failed == [c.name] and "metric 'train_loss' is nan" in refused.failures[c.name]
    run = client.get_run(record.run_id)
    assert run.info.status == "FAILED" and not run.data.metrics


def test_the_report_places_the_files_own_budget_and_mode(tmp_path: Path) -> None:
    """Figures of another [accuracy] budget (2 epochs) and another [latency] mode (2 threads) stood in
    the report of a file asking for 1 epoch on 1 thread, the newest of any budget or mode taken, and a
    re-run of the file did not bring its own back (until 0.9.8): the view keeps a row per budget and
    mode, the report places the file's own, and says so where only others are there."""
    from tracker.log.logger import RunLogger
    from tracker.searchspace.run import _candidate_record, accuracy_record, candidate_hashes, measured_mode, report
    from tracker.searchspace.space import load_space
    from tracker.errors import NothingLoggedError
    from tracker.warehouse.load import connect_loaded, load
    from tracker.warehouse.source import open_source

    own, other = tmp_path / "own.toml", tmp_path / "other.toml"
    own.write_text(SPACE)
    other.write_text(SPACE.replace("epochs = 1", "epochs = 2").replace("threads = 1", "threads = 2"))
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="ss")

    def log(path: Path, accuracy: float, latency_ms: float, mode: str) -> None:
        space = load_space(path)
        hashes = candidate_hashes(space)
        for i, c in enumerate(space.candidates()):
            acc = accuracy_record(space, c, hashes[c.name])
            acc.metrics.update(val_accuracy=accuracy + i / 100, train_loss=0.1)
            lat = _candidate_record(space, c, hashes[c.name], "measured", mode)
            lat.metrics.update(latency_ms=latency_ms + i, latency_ci_rel=0.01)
            logger.log([acc, lat])

    own_space = load_space(own)
    log(own, 0.5, 1.0, measured_mode(own_space))  # the file's own: 1 epoch, its mode here
    log(other, 0.9, 10.0, "cpu-t2")  # then another budget and mode, newer
    load(wh, open_source(resolve_location(str(runs))))
    out = report(logger, wh, own_space, "measured")
    assert sorted(c["accuracy"] for c in out["candidates"]) == [0.5, 0.51, 0.52, 0.53]
    assert sorted(c["latency_ms"] for c in out["candidates"]) == [1.0, 2.0, 3.0, 4.0]
    assert out["modes"] == [measured_mode(own_space)]
    con = connect_loaded(wh)
    try:  # each budget beside each mode in the view, a row each, with the budget's columns
        rows = con.execute("SELECT epochs, learning_rate, seed, accuracy_batch_size, mode, count(*), "
                           "count(*) FILTER (WHERE current) FROM searchspace_candidates GROUP BY ALL ORDER BY ALL").fetchall()
    finally:
        con.close()
    ours = measured_mode(own_space)
    assert rows == sorted([(1, 0.05, 0, 128, ours, 4, 0), (1, 0.05, 0, 128, "cpu-t2", 4, 0),
                           (2, 0.05, 0, 128, ours, 4, 0), (2, 0.05, 0, 128, "cpu-t2", 4, 4)])
    # a file whose own budget is not there: said, the others not placed
    third = tmp_path / "third.toml"
    third.write_text(SPACE.replace("epochs = 1", "epochs = 3"))
    with pytest.raises(NothingLoggedError, match=re.escape(
            "no candidate of the file has both accuracy and measured latency in the warehouse (it has this space's figures "
            "of another [accuracy] budget or [latency] mode only, not placed: the file asks for digits, 3 epochs, batch "
            f"128, learning_rate 0.05, seed 0, mode {ours}); run `tracker searchspace run ")):
        report(logger, wh, load_space(third), "measured")
    logger.close()


def _measured_candidates(tmp_path: Path, measured: list[tuple[float, float | None]]) -> tuple[Path, Path, list, list[str]]:
    """The tiny space's file and store, its candidates, each logged as measured (latency 1 ms) with the
    ``(latency_ci_rel, time_cap_s)`` given in turn (a cap of None: a store from before caps were recorded),
    and their runs' ids."""
    from tracker.log.logger import RunLogger
    from tracker.searchspace.run import _candidate_record, candidate_hashes, measured_mode
    from tracker.searchspace.space import load_space

    path, runs = tmp_path / "tiny.toml", tmp_path / "runs"
    path.write_text(SPACE)
    space = load_space(path)
    cands, hashes, mode = space.candidates(), candidate_hashes(space), measured_mode(space)
    logger = RunLogger(str(runs), experiment="searchspace-tiny")
    ids: list[str] = []
    for c, (ci_rel, cap) in zip(cands, measured):
        record = _candidate_record(space, c, hashes[c.name], "measured", mode)
        if cap is not None:
            record.params["time_cap_s"] = cap
        record.metrics.update(latency_ms=1.0, latency_ci_rel=ci_rel, device_time_s=0.1)
        ids += logger.log([record])
    logger.close()
    return path, runs, cands, ids


def test_an_imprecise_candidate_is_measured_again_with_a_longer_time_cap(tmp_path: Path) -> None:
    """The note advised measuring imprecise candidates again with a longer --time-cap, but a re-run
    counted them as already there, and said nothing of them (until 0.9.8): a run whose --time-cap is
    longer than the one an imprecise candidate had measures it again; one it does not is named again."""
    # two imprecise under a 0.1 s cap, one imprecise of a store before caps were recorded (5 s), one precise
    path, runs, cands, _ = _measured_candidates(tmp_path, [(0.9, 0.1), (0.8, 0.1), (0.7, None), (0.01, 0.1)])
    out = _cli(runs, "searchspace", "run", str(path), "--skip-accuracy", "--time-cap", "0.2", "--format", "json")
    assert out.exit_code == 0, out.output
    tally = json.loads(out.stdout)
    assert tally["measured_again"] == [cands[0].name, cands[1].name]
    assert (tally["latency_done"], tally["latency_skipped"]) == (2, 2) and cands[2].name in tally["imprecise"]
    client = MlflowClient(resolve_location(str(runs)).uri)
    newest = client.search_runs([client.get_experiment_by_name("searchspace-tiny").experiment_id],
                                f"params.model = '{cands[0].name}' AND tags.`tracker.kind` = 'candidate'", order_by=["attributes.start_time DESC"])
    assert len(newest) == 2 and newest[0].data.params["time_cap_s"] == "0.2"
    # the same cap again: nothing measured, the imprecise one named again
    again = _cli(runs, "searchspace", "run", str(path), "--skip-accuracy", "--time-cap", "0.2")
    assert again.exit_code == 0 and "latency (measured) 0 new, 4 already there" in again.stdout, again.output
    assert re.search(r"note: \d measured latencies have a 95 % CI wider than 25 %: left off the frontier \(measure again "
                     r"with a longer --time-cap, or on a quieter machine\): .*" + re.escape(cands[2].name), again.stdout)


def test_a_time_cap_edited_into_no_number_is_read_as_none_recorded(tmp_path: Path) -> None:
    """An imprecise candidate's time_cap_s param edited in the store's database into what is no number
    ("0,1", a decimal comma) ended searchspace run in a ValueError's traceback until 0.9.21. It is read
    as a run of a store before caps were recorded (DEFAULT_TIME_CAP_S): a shorter --time-cap does not
    measure it again, and it is named imprecise."""
    import sqlite3

    from tracker.searchspace.run import DEFAULT_TIME_CAP_S

    # the first imprecise under a 0.1 s cap, the others precise
    path, runs, cands, ids = _measured_candidates(tmp_path, [(0.9, 0.1), (0.01, 0.1), (0.01, 0.1), (0.01, 0.1)])
    with sqlite3.connect(runs / "mlflow.db") as db:
        assert db.execute("UPDATE params SET value = '0,1' WHERE key = 'time_cap_s' AND run_uuid = ?",
                          (ids[0],)).rowcount == 1
    # a --time-cap over its 0.1 s but under the default: nothing measured, the candidate named imprecise
    out = _cli(runs, "searchspace", "run", str(path), "--skip-accuracy", "--time-cap", str(DEFAULT_TIME_CAP_S / 2),
               "--format", "json")
    assert out.exit_code == 0, out.output
    tally = json.loads(out.stdout)
    assert tally["measured_again"] == [] and tally["imprecise"] == [cands[0].name], tally
    assert (tally["latency_done"], tally["latency_skipped"]) == (0, 4)


def test_an_image_folder_with_nothing_to_train_on_is_one_line(tmp_path: Path) -> None:
    """One image a class: the stratified split holds every image out, and each candidate was a FAILED
    run ("Expected positive integer total_steps, but got 0") at every re-run, until 0.9.8."""
    from PIL import Image

    for label in ("a", "b"):
        (tmp_path / "imgs" / label).mkdir(parents=True)
        Image.new("RGB", (8, 8), (40, 90, 200) if label == "a" else (200, 40, 90)).save(tmp_path / "imgs" / label / "0.png")
    space = tmp_path / "imgs.toml"
    space.write_text(SPACE.replace("[accuracy]", '[accuracy]\ndataset = "imgs"'))
    runs = tmp_path / "runs"
    out = _cli(runs, "searchspace", "run", str(space), "--skip-latency")
    assert out.exit_code == 1 and str(out.exception) == (
        "[accuracy].dataset 'imgs': its 2 image(s) in 2 class(es) are all held out for validation (20% of each class, at "
        "least one): none left to train on; give each class two images or more"), out.output
    client = MlflowClient(resolve_location(str(runs)).uri)
    exp = client.get_experiment_by_name("searchspace-tiny")
    assert exp is None or not client.search_runs([exp.experiment_id], "tags.`tracker.kind` = 'accuracy'")


def test_two_candidates_of_one_network_are_refused(tmp_path: Path) -> None:
    """["vgg", {name = "vgg2", style = "vgg"}]: one network under two names, trained and measured twice
    until 0.9.8; refused in one line naming both, before anything is written."""
    space = tmp_path / "twin.toml"
    space.write_text(SPACE.replace('candidates = ["vgg", "mobilenet"]', 'candidates = ["vgg", {name = "vgg2", style = "vgg"}]'))
    for args in (["run", str(space), "--skip-latency"], ["report", str(space), "--warehouse", str(tmp_path / "w.duckdb")]):
        out = _cli(tmp_path / "runs", "searchspace", *args)
        assert out.exit_code == 1 and re.fullmatch(
            re.escape(f"{space}: candidates tiny-vgg-vgg and tiny-vgg2-vgg are the same network (model_hash ")
            + r"[0-9a-f]+\): keep one of their primitives", str(out.exception)), out.output
    assert not (tmp_path / "tiny").exists() and not (tmp_path / "w.duckdb").exists()  # no spec file, no warehouse
