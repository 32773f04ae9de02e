"""`tracker report` on a small real store: a picture is drawn again only when what it is drawn
from changed, logged once on each run, and one the previous report wrote but this one does not
draw is removed (nothing else in the folder is)."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tracker.cli.app import app

runner = CliRunner()


def test_a_report_draws_and_logs_only_what_changed(tmp_path: Path) -> None:
    store, folder = tmp_path / "store", tmp_path / "pictures"
    base = ["--tracking-uri", str(store), "-e", "rep"]
    quick = ["--time-cap", "0.3", "--precision", "0.2", "--threads", "1", "--format", "json"]

    def measure(command: str, batch: int) -> str:
        out = runner.invoke(app, [*base, "profile", command, "squeezenet1_1", "--batch-size", str(batch), *quick])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["run_id"]

    def report() -> dict:
        out = runner.invoke(app, [*base, "report", str(folder), "--warehouse", str(tmp_path / "w.duckdb"),
                                  "--format", "json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    layered = measure("layers", 1)
    measure("network", 2)
    first = report()
    # the machine's speed, the probe beside each measurement, too (since 0.9.10; logged on no run)
    assert first["by_kind"] == {"batch": 1, "layers": 1, "speed": 1} and first["drawn"] == 3 and first["unchanged"] == 0
    assert first["logged"] == 2  # the batch picture on the batch-2 run, the layer breakdown on the layered run
    again = report()
    assert (again["drawn"], again["unchanged"], again["logged"], again["removed"]) == (0, 3, 0, 0)

    # A picture the previous report wrote and this one does not draw goes; what tracker did not write stays.
    manifest = json.loads((folder / ".tracker-report.json").read_text())
    manifest["pictures"]["layers/gone.png"] = {"key": "x", "logged_on": {}}
    (folder / ".tracker-report.json").write_text(json.dumps(manifest))
    (folder / "layers" / "gone.png").write_bytes(b"old")
    (folder / "notes.txt").write_text("mine")
    batch4 = measure("network", 4)
    third = report()
    # the batch picture (a third batch) and the speed picture (a third probe), drawn again
    assert (third["drawn"], third["unchanged"], third["removed"]) == (2, 1, 1), third
    assert [p.name for p in (folder / "speed").iterdir()] == ["cpu-t1.png"]
    assert third["logged"] == 1 and not (folder / "layers" / "gone.png").exists() and (folder / "notes.txt").exists()
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    (batch_png,) = (folder / "batch").iterdir()  # named after the family, phase and device
    assert [a.path for a in client.list_artifacts(batch4, "report")] == [f"report/{batch_png.name}"]
    assert [a.path for a in client.list_artifacts(layered, "report")] == [f"report/squeezenet1_1-bs1-{layered[:8]}.png"]

    # A picture whose file was deleted is drawn again; an unreadable manifest redraws everything.
    batch_png.unlink()
    assert report()["drawn"] == 1
    (folder / ".tracker-report.json").write_text("{not json")
    redrawn = report()
    assert redrawn["drawn"] == 3 and redrawn["logged"] == 2

    # The same network at another input size: a line of its own in the same picture, told apart by its size
    # (two lines both labelled squeezenet1_1 until 0.8.9); what they share (the mode) said once in the title.
    for batch in (1, 2):
        out = runner.invoke(app, [*base, "profile", "network", "squeezenet1_1", "--batch-size", str(batch),
                                  "--input-size", "64", *quick])
        assert out.exit_code == 0, out.output
    report()
    from tracker.report.build import batch_pictures, speed_pictures
    from tracker.warehouse.load import connect

    con = connect(tmp_path / "w.duckdb", read_only=True)
    try:
        (picture,) = batch_pictures(con)
        (speed,) = speed_pictures(con)
    finally:
        con.close()
    probes = [r["speed_probe_ms"] for r in speed.args[1]]  # each whole measurement's probe, in time order
    assert len(probes) == 5 and all(p > 0 for p in probes) and speed.run_ids == []
    assert [r["end_time"] for r in speed.args[1]] == sorted(r["end_time"] for r in speed.args[1])
    title, lines = picture.args
    assert [line["label"] for line in lines] == ["squeezenet1_1 64 px", "squeezenet1_1 224 px"]
    assert [line["batch_sizes"] for line in lines] == [[1, 2], [1, 2, 4]] and ", mode cpu-t1" in title

    # where the report cannot write its page, or is given no folder: one line before anything is drawn (until
    # 0.9.6: said after the pictures were written; "" wrote into the current folder)
    other = tmp_path / "other"
    (other / "index.html").mkdir(parents=True)
    for where, message in ((str(other), f"{other / 'index.html'} is a folder: the report writes its index.html there"),
                           ("", "FOLDER '' names no folder: give the folder to write the pictures into")):
        refused = runner.invoke(app, [*base, "report", where, "--no-load", "--warehouse", str(tmp_path / "w.duckdb")])
        assert refused.exit_code == 1 and str(refused.exception).startswith(message), refused.exception
    assert [p.name for p in other.iterdir()] == ["index.html"]


def test_an_out_of_memory_batch_is_drawn_on_the_line_of_its_own_memory_cap() -> None:
    """squeezenet1_1 trained under a 60 MB cap (batch 1 ran out of memory) and a 300 MB cap (1 to 64
    fit, 128 did not): the cross at batch 1, labelled "cap +60 MB", was drawn on the 300 MB line until
    0.9.0, and the real boundary (128) not at all. Each cap is its own line now, with its own cross; since
    0.9.1 also a cap under which no batch fitted (its cross alone; it was drawn nowhere)."""
    import duckdb

    from tracker.report.build import batch_pictures

    con = duckdb.connect()
    con.execute("CREATE TABLE training_runs (run_id VARCHAR, data_wait_frac DOUBLE)")
    con.execute("CREATE TABLE latest_measurements (run_id VARCHAR, model VARCHAR, model_hash VARCHAR, input_size BIGINT, "
                "phase VARCHAR, device_name VARCHAR, mode VARCHAR, precision VARCHAR, memory_limit_mb DOUBLE, "
                "batch_size BIGINT, latency_ms DOUBLE, peak_mem_mb DOUBLE, latency_ci_rel DOUBLE)")
    con.execute("CREATE TABLE oom_boundary (model VARCHAR, model_hash VARCHAR, input_size BIGINT, phase VARCHAR, "
                "device_name VARCHAR, mode VARCHAR, precision VARCHAR, memory_limit_mb DOUBLE, smallest_oom_batch BIGINT)")
    for i, batch in enumerate((1, 2, 4, 8, 16, 32, 64)):
        con.execute("INSERT INTO latest_measurements VALUES (?, 'squeezenet1_1', 'h', 64, 'training', 'cpu', 'cpu-t1', "
                    "'float32', 300, ?, ?, ?, ?)", [f"r{i}", batch, 2.0 * batch, 100.0 + 3 * batch,
                                                    10.3 if batch == 4 else 0.02])
    con.execute("INSERT INTO oom_boundary VALUES ('squeezenet1_1', 'h', 64, 'training', 'cpu', 'cpu-t1', 'float32', 60, 1), "
                "('squeezenet1_1', 'h', 64, 'training', 'cpu', 'cpu-t1', 'float32', 300, 128)")
    (picture,) = batch_pictures(con)
    title, lines = picture.args
    assert [(line["oom_batch"], line["oom_cap_mb"], len(line["batch_sizes"])) for line in lines] == [
        (1, 60.0, 0), (128, 300.0, 7)], lines
    assert "cap" not in title and [line["label"] for line in lines] == ["squeezenet1_1, cap +60 MB",
                                                                        "squeezenet1_1, cap +300 MB"]
    assert " for 1 network (2 lines)," in picture.caption  # "for 2 networks" until 0.9.6
    assert picture.run_ids == ["r6"]  # logged on the runs it draws (the 60 MB line has none)
    assert lines[1]["latency_ci_rel"][2] == 10.3  # batch 4, measured beside other work: ringed when drawn
    assert picture.draw(*picture.args)[:8] == b"\x89PNG\r\n\x1a\n"
    # a picture of failures alone, no batch fitted under any cap (a matplotlib traceback, no report, until 0.9.6)
    alone = picture.draw(title, lines[:1])
    assert alone[:8] == b"\x89PNG\r\n\x1a\n" and len(alone) > 1000
    con.execute("DELETE FROM oom_boundary WHERE memory_limit_mb = 60")
    (picture,) = batch_pictures(con)
    title, lines = picture.args
    assert title.endswith(", cap +300 MB") and [line["label"] for line in lines] == ["squeezenet1_1"]
    # a second line under another cap: each says its cap, none in the title
    con.execute("INSERT INTO latest_measurements VALUES ('s1', 'squeezenet1_1', 'h', 64, 'training', 'cpu', 'cpu-t1', "
                "'float32', NULL, 1, 2.0, 100.0, 0.01), ('s2', 'squeezenet1_1', 'h', 64, 'training', 'cpu', 'cpu-t1', "
                "'float32', NULL, 2, 4.0, 106.0, 0.01)")
    (picture,) = batch_pictures(con)
    title, lines = picture.args
    assert [(line["label"], line["oom_batch"]) for line in lines] == [("squeezenet1_1, no cap", None),
                                                                       ("squeezenet1_1, cap +300 MB", 128)]
    assert "cap" not in title


def test_a_loader_picture_holds_each_input_size_apart() -> None:
    """resnet18 trained on one folder at 128 and 64 px (workers 0) and at 64 px with a worker: until
    0.9.8 two bars both labelled "workers 0 · prefetch 2 · bs4", the 128 px one drawn under the 64 px
    one, and the picture logged on the first size's fastest run alone."""
    import duckdb

    from tracker.report.build import loader_pictures

    con = duckdb.connect()
    con.execute("CREATE TABLE data_loading (model VARCHAR, dataset VARCHAR, data_path VARCHAR, device VARCHAR, mode VARCHAR, "
                "input_size BIGINT, num_workers BIGINT, prefetch_factor BIGINT, batch_size BIGINT, data_wait_fraction DOUBLE, "
                "images_per_s DOUBLE, run_id VARCHAR, is_best BOOLEAN)")
    con.execute("INSERT INTO data_loading VALUES ('resnet18', 'imagefolder:shapes', '/d/shapes', 'cpu', 'cpu-t1', 128, 0, 2, 4, "
                "0.01, 6.9, 'big', true), ('resnet18', 'imagefolder:shapes', '/d/shapes', 'cpu', 'cpu-t1', 64, 0, 2, 4, 0.02, "
                "27.6, 'small', true), ('resnet18', 'imagefolder:shapes', '/d/shapes', 'cpu', 'cpu-t1', 64, 1, 2, 4, 0.02, 25.3, "
                "'worker', false)")
    (picture,) = loader_pictures(con)
    title, settings = picture.args
    assert [s["label"] for s in settings] == ["64 px · workers 0 · prefetch 2 · bs4", "64 px · workers 1 · prefetch 2 · bs4",
                                              "128 px · workers 0 · prefetch 2 · bs4"]
    assert title == "resnet18 on imagefolder:shapes (cpu-t1)" and picture.caption.endswith(", at 2 input sizes")
    assert picture.run_ids == ["small", "big"]  # the fastest setting of each size
    assert picture.draw(*picture.args)[:8] == b"\x89PNG\r\n\x1a\n"
    # one size: said once, in the title; a picture of one-step jobs alone (none is_best) is drawn, logged on none
    con.execute("DELETE FROM data_loading WHERE input_size = 128")
    con.execute("UPDATE data_loading SET is_best = false")
    (picture,) = loader_pictures(con)
    title, settings = picture.args
    assert title == "resnet18 on imagefolder:shapes (cpu-t1), 64 px" and picture.run_ids == []
    assert [s["label"] for s in settings] == ["workers 0 · prefetch 2 · bs4", "workers 1 · prefetch 2 · bs4"]


#: A ``sitecustomize`` that sends its process a real SIGINT at the Nth audit event ``SIGINT_EVENT`` (``open``
#: for writing, ``sqlite3.connect``) of a path that holds ``SIGINT_WHERE`` (N: ``SIGINT_AT``): a Ctrl-C
#: that lands there for sure.
SIGINT_AT_AN_EVENT = """\
import os, signal, sys

seen = []


def hook(event, args):
    if event != os.environ["SIGINT_EVENT"] or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(os.fspath(args[0]))
    if event == "open":
        mode, flags = args[1], args[2]
        if not (("w" in mode) if isinstance(mode, str) else flags & (os.O_WRONLY | os.O_RDWR)):
            return
    if os.environ["SIGINT_WHERE"] in path:
        seen.append(path)
        if len(seen) == int(os.environ["SIGINT_AT"]):
            os.kill(os.getpid(), signal.SIGINT)


if os.environ.get("SIGINT_EVENT"):
    sys.addaudithook(hook)
"""


def test_a_report_stopped_by_ctrl_c_says_what_it_kept_and_goes_on_from_there(tmp_path: Path) -> None:
    """A Ctrl-C in a report said main's "what was logged before is kept" (until 0.9.8), and the next
    report drew and logged everything again: its manifest was written at its end only. It says the
    pictures it drew and logged, keeps them whole and in its manifest, and the next report does the rest."""
    import os
    import subprocess
    import sys

    from tests.conftest import network_record, sigint_default
    from tracker.log.logger import RunLogger

    store, folder, wh = tmp_path / "store", tmp_path / "pictures", tmp_path / "w.duckdb"
    with RunLogger(str(store), "rep") as logger:  # three families, a batch picture each, logged on its batch-2 run
        logger.log([network_record(model, bs) for model in ("resnet18", "mobilenet_v2", "squeezenet1_1") for bs in (1, 2)])
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(SIGINT_AT_AN_EVENT)
    base = [sys.executable, "-m", "tracker", "--tracking-uri", str(store), "report", str(folder), "--warehouse", str(wh)]

    def report(event: str = "", where: str = "", at: int = 0, *args: str) -> subprocess.CompletedProcess:
        path = os.pathsep.join(p for p in (str(tmp_path / "hook"), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path, "SIGINT_EVENT": event, "SIGINT_WHERE": where, "SIGINT_AT": str(at)}
        return subprocess.run([*base, *args], env=env, capture_output=True, text=True, timeout=300, preexec_fn=sigint_default)

    # as the load reads the store: the load's line, nothing drawn
    stopped = report("sqlite3.connect", "mlflow.db?mode=ro", 1)
    assert (stopped.returncode, stopped.stdout) == (130, ""), stopped.stderr
    assert stopped.stderr == f"interrupted: the load stopped; no warehouse was made at {wh}, and no picture was drawn\n"
    assert not wh.exists() and not folder.exists()
    # as it writes its second picture: the first is kept, whole, and the next report draws the two others
    stopped = report("open", str(folder), 2)
    assert (stopped.returncode, stopped.stdout) == (130, ""), stopped.stderr
    assert stopped.stderr == (f"interrupted: the report stopped; kept: 1 picture drawn whole into {folder}; run the same "
                              "command again for the rest\n")
    (kept,) = (folder / "batch").iterdir()
    assert kept.read_bytes().startswith(b"\x89PNG") and kept.read_bytes().endswith(b"IEND\xaeB`\x82")
    assert sorted(p.name for p in folder.iterdir()) == [".tracker-report.json", "batch"]
    # as it logs its second picture on a run: what it drew and the one it logged are kept
    stopped = report("open", f"{os.sep}report{os.sep}", 2)
    assert (stopped.returncode, stopped.stdout) == (130, ""), stopped.stderr
    assert stopped.stderr == (f"interrupted: the report stopped; kept: 2 pictures drawn whole into {folder} and 1 picture "
                              "logged on its run; run the same command again for the rest\n")
    done = report("", "", 0, "--format", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["pictures"], result["drawn"], result["unchanged"], result["logged"]) == (3, 0, 3, 2), result
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def _probed_runs(tmp_path: Path, probes: list[tuple[str, float, int | None]]) -> tuple[Path, Path]:
    """A store of finished whole measurements, each ``(mode, speed_probe_ms, probe version)``, as tracker
    logs them (the probe's time and its version's tag; None: no tag, a version unsaid), loaded into a
    warehouse."""
    from tests.conftest import ENV, network_record, timed_probe
    from tracker.log.logger import RunLogger
    from tracker.profile.probe import PROBE_TAG
    from tracker.settings import resolve_location
    from tracker.warehouse.load import load
    from tracker.warehouse.source import open_source

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="speed", environment=ENV)
    for i, (mode, probe_ms, version) in enumerate(probes):
        record = timed_probe(network_record(f"net{i}", 1), probe_ms, version)  # no batch picture
        record.params["mode"] = mode
        if version is None:
            del record.tags[PROBE_TAG]
        logger.log([record])
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    return runs, wh


def test_the_reports_page_lists_the_speed_pictures(tmp_path: Path) -> None:
    """index.html had no section for speed/: its pictures were drawn into the folder and on no page
    (until 0.9.12)."""
    from tracker.report.build import build_report
    from tracker.settings import resolve_location

    runs, wh = _probed_runs(tmp_path, [("cpu-t2", 1.0, 1), ("cpu-t2", 1.2, 1)])
    report = build_report(wh, tmp_path / "pictures", resolve_location(str(runs)).uri, log=False)
    assert [p.path for p in report.pictures] == ["speed/cpu-t2.png"]
    page = (tmp_path / "pictures" / "index.html").read_text()
    assert "<h2>The machine&#x27;s speed</h2>" in page and "src='speed/cpu-t2.png'" in page


def test_the_speed_pictures_draw_this_trackers_probe_version_alone_and_say_what_they_left_out(tmp_path: Path) -> None:
    """A measurement that timed another version of the speed probe timed another workload, another unit:
    its probe was drawn on the same axis as this version's, the median line over both (until 0.9.12).
    Now a mode's picture draws this tracker's version alone, its caption says how many it left out, and
    the report says each mode's left out in a line (on stderr, in its JSON and on its page), a mode with
    none of this version, so no picture, included."""
    # cpu-t4's second: a probe whose version goes unsaid (its tag removed by hand), no unit known either
    runs, wh = _probed_runs(tmp_path, [("cpu-t2", 1.0, 1), ("cpu-t2", 5.0, 2), ("cpu-t2", 1.2, 1), ("cpu-t2", 6.0, 2),
                                       ("cpu-t4", 7.0, 2), ("cpu-t4", 8.0, None)])
    folder = tmp_path / "pictures"
    out = runner.invoke(app, ["--tracking-uri", str(runs), "report", str(folder), "--warehouse", str(wh), "--no-log",
                              "--format", "json"])
    assert out.exit_code == 0, out.output
    said = json.loads(out.stdout)
    assert said["by_kind"] == {"speed": 1}
    lines = ["2 measurements in mode cpu-t2 timed speed probe version 2, not this tracker's version 1: another unit, "
             "left out of speed/cpu-t2.png",
             "2 measurements in mode cpu-t4 timed speed probe version 2 and a probe of no version said, not this "
             "tracker's version 1: another unit, left out of the report (no measurement of this version there to draw)"]
    assert said["left_out"] == lines
    assert out.stderr.splitlines() == [f"note: {line}" for line in lines]
    page = (folder / "index.html").read_text()
    assert "<h2>Left out</h2>" in page and "left out of speed/cpu-t2.png" in page
    assert sorted(p.name for p in (folder / "speed").iterdir()) == ["cpu-t2.png"]

    from tracker.report.build import speed_pictures
    from tracker.warehouse.load import connect

    con = connect(wh, read_only=True)
    try:
        (picture,) = speed_pictures(con)
    finally:
        con.close()
    assert [r["speed_probe_ms"] for r in picture.args[1]] == [1.0, 1.2]  # version 1's, in time order
    assert picture.caption == ("cpu-t2: the machine's speed over time, the speed probe (version 1) beside each of 2 "
                               "measurements; 2 measurements of another probe version left out")


def test_a_value_no_axis_holds_is_left_out_of_its_picture_and_said_at_its_foot(monkeypatch) -> None:  # noqa: ANN001
    """A latency, a peak memory, a speed probe, a loader's throughput or a candidate's latency near a float's
    largest (1.7e308, finite; an infinity too), or a latency of 1e-300 ms on a log axis, overflowed in
    matplotlib's axis arithmetic: numpy's RuntimeWarnings on stderr ("overflow encountered in exp") and, for a
    speed probe, a layer, a loader or a search space's candidates, a traceback and no report (until 0.9.14).
    Each picture leaves such a value out and names it in a line at its foot; one without any has none."""
    import datetime
    import warnings

    import tracker.report.plots as plots
    from tracker.searchspace.plot import pareto_png

    notes: list[list[str]] = []
    real = plots.figure_png

    def noted(fig, left_out=()):  # noqa: ANN001, ANN202 - the real picture, its note kept to read
        notes.append(list(left_out))
        return real(fig, left_out)

    monkeypatch.setattr(plots, "figure_png", noted)
    top, times = 1.7e308, [datetime.datetime(2026, 1, 1, h) for h in (1, 2, 3)]

    def batch(value: float) -> bytes:
        return plots.batch_scaling_png("t", [{"label": "resnet18", "batch_sizes": [1, 2, 4], "latency_ms": [12.5, value, 30.0],
                                              "peak_mem_mb": [100.0, value, None], "latency_ci_rel": [0.01, 0.5, 0.01]}])

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarning a failure
        pictures = [
            batch(top), batch(1e-300), batch(20.0),
            plots.machine_speed_png("t", [{"end_time": t, "speed_probe_ms": p} for t, p in zip(times, (2.0, top, 2.1))]),
            plots.layer_breakdown_png("t", [{"layer_name": "conv1", "op_type": "Conv2d", "latency_ms": float("inf")},
                                            {"layer_name": "relu", "op_type": "ReLU", "latency_ms": 1.0}], 5.0),
            plots.data_wait_png("t", [{"label": "w0", "data_wait_fraction": 0.1, "images_per_s": top, "is_best": True},
                                      {"label": "w1", "data_wait_fraction": 0.2, "images_per_s": 5.0, "is_best": False}]),
            pareto_png("s", [{"model": "s-a", "latency_ms": top, "accuracy": 0.5, "on_frontier": False},
                             {"model": "s-b", "latency_ms": 3.0, "accuracy": 0.6, "on_frontier": True}], "measured"),
            # a held-out prediction of inf or 0 on log axes: a ValueError (geomspace) until 0.9.15
            plots.predicted_vs_measured_png("f", [10.0, 12.0, 20.0, 8.0], [11.0, float("inf"), 0.0, 8.5],
                                            ["resnet", "resnet", "mobilenet", "mobilenet"], "ms"),
            plots.predicted_vs_measured_png("f", [10.0], [float("inf")], ["resnet"], "ms")]
    assert all(png[:8] == b"\x89PNG\r\n\x1a\n" for png in pictures)
    assert notes == [["latency 1.7e+308 ms at batch 2", "peak memory 1.7e+308 MB at batch 2"],
                     ["latency 1e-300 ms at batch 2", "peak memory 1e-300 MB at batch 2"], [],
                     ["1.7e+308 ms at 2026-01-01 02:00"], ["conv1 inf ms"], ["w0 images/s 1.7e+308"],
                     ["s-a 1.7e+308 ms, accuracy 0.5"],
                     ["measured 12 ms, predicted inf", "measured 20 ms, predicted 0"], ["measured 10 ms, predicted inf"]]
    assert not plots.drawable(1e300) and not plots.drawable(float("nan")) and not plots.drawable(None)
    assert plots.drawable(0.0) and plots.drawable(-3.5) and plots.drawable(1e100)


def test_a_predicted_vs_measured_picture_labels_its_log_axes_in_plain_numbers(monkeypatch) -> None:  # noqa: ANN001
    """matplotlib's own labels of a log axis spanning a decade or two ran into each other ("3x10^1 4x10^1": a
    fingerprint's predicted-vs-measured picture of 5 to 70 MB, until 0.9.34). Both axes now read plain numbers,
    the powers of ten and 2x, 3x, 5x between them; an x axis past two decades its powers of ten alone."""
    import numpy as np

    import tracker.report.plots as plots

    labels: list[dict[str, list[str]]] = []
    real = plots.figure_png

    def read(fig, left_out=()):  # noqa: ANN001, ANN202 - the real picture, its labels in view kept to read
        ax = fig.axes[0]
        fig.canvas.draw()
        shown = {}
        for which, ticks, (lo, hi) in (("x", ax.xaxis, ax.get_xlim()), ("y", ax.yaxis, ax.get_ylim())):
            at = [(t.get_loc(), t.label1.get_text()) for t in [*ticks.get_major_ticks(), *ticks.get_minor_ticks()]]
            shown[which] = [text for loc, text in sorted(at) if text and lo <= loc <= hi]
        labels.append(shown)
        return real(fig, left_out)

    monkeypatch.setattr(plots, "figure_png", read)
    for low, high in ((4.5, 90.0), (0.5, 900.0)):
        measured = np.geomspace(low, high, 12)
        plots.predicted_vs_measured_png("f", list(measured), list(measured * 1.04), ["a"] * 12, "MB")
    assert labels[0] == {"x": ["5", "10", "20", "30", "50", "100"], "y": ["5", "10", "20", "30", "50", "100"]}
    assert labels[1]["x"] == ["1", "10", "100", "1000"]
    assert labels[1]["y"] == ["0.5", "1", "2", "3", "5", "10", "20", "30", "50", "100", "200", "300", "500", "1000"]
