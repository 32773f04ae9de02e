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

from tests.test_cli import run_cli
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
    again = json.loads(_cli(runs, "searchspace", "run", str(space), "--format", "json").stdout)
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
        "search space other: no candidate has both accuracy and a latency (measured or predicted) in the warehouse")
    assert all(int(r.data.params["val_count"]) > 300 for r in acc)  # a fifth of the 1797 digits


def test_a_long_list_of_candidates_is_cut_to_its_first_five_and_a_count() -> None:
    from tracker.cli.searchspace import some

    names = [f"c{i}" for i in range(27)]
    assert some(names) == "c0, c1, c2, c3, c4 and 22 more (--format json lists all)"
    assert some(names[:5]) == "c0, c1, c2, c3, c4" and some(names[:1]) == "c0"


def test_bad_space_and_missing_fingerprint_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(SPACE.replace('candidates = ["vgg", "mobilenet"]', 'candidates = ["vgg", "transformer"]'))
    proc = run_cli("--tracking-uri", str(tmp_path / "runs"), "searchspace", "run", str(bad), cwd=tmp_path)
    assert proc.returncode == 1 and "positions[0].candidates[1]: unknown primitive 'transformer'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    both = _cli(tmp_path / "runs", "searchspace", "run", str(bad), "--skip-accuracy", "--skip-latency")  # ran, did nothing
    assert both.exit_code == 1 and str(both.exception) == ("--skip-accuracy and --skip-latency together leave nothing to "
                                                           "fill: give one at most")
    # a device this machine lacks: one line before anything (a FAILED run per candidate until 0.9.3)
    import torch

    if not torch.cuda.is_available():
        bad.write_text(SPACE.replace("[latency]", '[latency]\ndevice = "cuda"'))
        proc = run_cli("--tracking-uri", str(tmp_path / "runs"), "searchspace", "run", str(bad), cwd=tmp_path)
        assert proc.returncode == 1 and proc.stderr == (
            "error: device 'cuda' (cuda:0) is not available on this machine (no CUDA GPU): measure on cpu\n"), proc.stderr
    from tracker.errors import ConfigError
    from tracker.searchspace.space import load_space

    for old, new, message in [("epochs = 1", "epochs = 0", "[accuracy].epochs must be at least 1, got 0"),
                              ("[accuracy]", "[accuracy]\nlearning_rate = -0.5", "[accuracy].learning_rate must be greater than 0"),
                              ("input_size = 16", "input_size = 4", "spec key 'input_size' must be at least 8"),
                              ("width = 32", "width = 32\ndepth = 0", "positions[1].depth: at least 1, got 0"),
                              ("input_size = 16", "input_sise = 16", "unknown key input_sise (known: name, input_size, "
                               "num_classes, activation, stem_channels, enumerate; tables: [[positions]], [accuracy], [latency])")]:
        assert old in SPACE
        bad.write_text(SPACE.replace(old, new))
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_space(bad)
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


def test_an_imprecise_measurement_is_off_the_frontier_and_two_modes_are_said(tmp_path: Path) -> None:
    """A candidate measured while other processes took the CPU (CI ±169 %) was on the frontier and
    kept better ones off it, and a frontier measured on two threads was compared with one predicted
    by a fingerprint of one thread without a word, until 0.9.0."""
    from tracker.log.logger import RunLogger
    from tracker.searchspace.run import _candidate_record, accuracy_record, report
    from tracker.searchspace.space import load_space
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    (tmp_path / "tiny.toml").write_text(SPACE)
    space = load_space(tmp_path / "tiny.toml")
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="ss")
    cands = space.candidates()
    # accuracy rises and latency with it; the fastest, measured imprecisely, has the best accuracy too
    figures = {cands[0].name: (0.95, 0.2, 1.69), cands[1].name: (0.80, 1.0, 0.02), cands[2].name: (0.85, 2.0, 0.02),
               cands[3].name: (0.90, 3.0, 0.02)}
    for c in cands:
        accuracy, latency_ms, ci_rel = figures[c.name]
        acc = accuracy_record(space, c, f"h-{c.name}")
        acc.params.update(train_count=100, val_count=20)
        acc.metrics.update(val_accuracy=accuracy, train_loss=0.1, train_time_s=1.0)
        measured = _candidate_record(space, c, f"h-{c.name}", "measured", "cpu-t2")
        measured.metrics.update(latency_ms=latency_ms, latency_ci_rel=ci_rel, device_time_s=0.5)
        predicted = _candidate_record(space, c, f"h-{c.name}", "predicted", None, "latency_ms-inference-cpu/1", "cpu-t1")
        predicted.metrics.update(latency_ms=latency_ms, device_time_s=0.01)
        logger.log([acc, measured, predicted])
    load(wh, open_source(resolve_location(str(runs))))
    out = report(logger, wh, space, "measured")
    on = {c["name"] for c in out["candidates"] if c["on_frontier"]}
    assert on == {cands[1].name, cands[2].name, cands[3].name}  # the imprecise one off, and keeping none off
    assert [c["imprecise"] for c in out["candidates"]] == [True, False, False, False]
    cmp = out["comparison"]
    assert cmp["modes_differ"] and (cmp["measured_modes"], cmp["predicted_modes"]) == (["cpu-t2"], ["cpu-t1"])
    # predicted (no CI), the fastest dominates every other: a frontier of one, which the measured one lacks
    assert cmp["shared_frontier"] == 0 and cmp["predicted_frontier"] == [cands[0].name] and out["modes"] == ["cpu-t2"]
    assert out["logged"] is True
    shown = _cli(runs, "-e", "ss", "searchspace", "report", str(tmp_path / "tiny.toml"), "--warehouse", str(wh),
                 "--latency", "measured")
    assert shown.exit_code == 0, shown.output
    assert "note: measured in mode cpu-t2, predicted by a fingerprint that learnt cpu-t1" in shown.stdout
    assert "1 of 4 candidates measured too imprecisely to place" in shown.stdout
    assert "0 candidate(s) on both, of 1 predicted and 3 measured (Jaccard 0.00" in shown.stdout
    # the same rows again: the run logged before, not one more alike
    assert report(logger, wh, space, "measured")["logged"] is False
    client = MlflowClient(resolve_location(str(runs)).uri)
    assert len(client.search_runs([client.get_experiment_by_name("ss").experiment_id],
                                  "tags.`tracker.kind` = 'searchspace'")) == 1
    logger.close()
