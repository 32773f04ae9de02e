"""The CLI through Typer's CliRunner and as a real process, on temporary stores."""

import contextlib
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tracker.cli.app import app
from tracker.errors import StoreError
from tracker.log.logger import RunLogger

from tests.conftest import free_port, sigint_default

runner = CliRunner()
TRACKER = [sys.executable, "-m", "tracker"]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*TRACKER, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def in_process(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``tracker ARGS`` through the command's own entry point (``tracker.cli.app.main``: its one-line
    errors and statuses) in this process: its status, stdout and stderr as a real process's. An
    exception it lets out is a test failure with its traceback, as "Traceback" on a process's stderr
    is; the environment, the folder and argv are put back."""
    import io

    from tracker.cli.app import main as entry

    saved, folder, argv = dict(os.environ), os.getcwd(), sys.argv
    out, err, code = io.StringIO(), io.StringIO(), 0
    try:
        os.chdir(cwd)
        sys.argv = ["tracker", *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                entry()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(folder)
        sys.argv = argv
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_help_imports_neither_torch_nor_mlflow() -> None:
    code = "import sys; from tracker.cli.app import app; print(sorted(m for m in ('torch', 'mlflow', 'sqlalchemy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "profile" in result.output


def test_version_names_tracker_and_its_packages_without_importing_them() -> None:
    """`tracker --version`, as pip's and mlflow's, for a bug report (no such option until 0.9.17)."""
    from importlib import metadata

    import tracker

    code = ("import sys; from tracker.cli.app import _versions; print(_versions()); "
            "print(sorted(m for m in ('torch', 'mlflow', 'lightgbm') if m in sys.modules))")
    line, imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True).stdout.splitlines()
    assert imported == "[]"
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == line + "\n", result.output
    assert line.startswith(f"tracker {tracker.__version__} (python ")
    assert f"mlflow {metadata.version('mlflow')}" in line and f"torch {metadata.version('torch')}" in line
    assert runner.invoke(app, ["--version", "zoo", "list"]).output == result.output  # eager: the command not run


def test_a_measurements_own_process_imports_neither_torch_nor_mlflow(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`tracker profile network` on a store it has written to before, a network described before:
    torch runs in the measuring child alone, and the run's rows go to the embedded store without
    MLflow (since 0.9.10: importing the two took about 4 s of each measurement's 7.5 here)."""
    env = {**os.environ, "TRACKER_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    args = ["--tracking-uri", str(tmp_path / "s"), "profile", "network", "squeezenet1_1", "--input-size", "64",
            "--time-cap", "0.3", "--precision", "0.5", "--format", "json"]
    from tracker.describe import described_json

    monkeypatch.setenv("TRACKER_CACHE_DIR", env["TRACKER_CACHE_DIR"])
    described_json.cache_clear()  # described in this process before, it would not be written to that cache
    first = runner.invoke(app, [*args, "-b", "1"])  # the store made, the network described, here
    assert first.exit_code == 0, first.output
    code = ("import json, runpy, sys\ncode = 0\n"
            f"sys.argv = ['tracker', *{args!r}, '-b', '2']\n"
            "try:\n    runpy.run_module('tracker', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
            "print(json.dumps([code, sorted(m for m in ('torch', 'mlflow') if m in sys.modules)]), file=sys.stderr)")
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=600)
    assert json.loads(second.stderr.strip().splitlines()[-1]) == [0, []], second.stderr[-2000:]
    run = json.loads(second.stdout)
    assert run["status"] == "FINISHED" and run["batch_size"] == 2 and run["latency_ms"] > 0
    client = MlflowClient(f"sqlite:///{tmp_path / 's' / 'mlflow.db'}")  # MLflow reads what was written without it
    logged = client.get_run(run["run_id"])
    assert logged.data.metrics["latency_ms"] == run["latency_ms"] and logged.data.tags["env.threads"] == "1"
    assert logged.info.artifact_uri == f"{tmp_path / 's' / 'artifacts'}/{logged.info.experiment_id}/{run['run_id']}/artifacts"
    assert "samples/latency_ms.json" in {a.path for a in client.list_artifacts(run["run_id"], "samples")}


def test_counts_are_said_in_words_that_agree_with_them() -> None:
    from tracker.console import counted, named, per

    assert [counted(n, "layer run") for n in (0, 1, 2)] == ["0 layer runs", "1 layer run", "2 layer runs"]
    assert counted(1, "unseen network") == "1 unseen network" and counted(3, "child", "children") == "3 children"
    # a mean under 10 keeps two digits ("0 page faults" of 0.59 until 0.9.4); one is one
    assert [per(v, "page fault", "step") for v in (0.59, 1.0, 1.04, 2.5, 1204.4)] == [
        "0.59 page faults per step", "1 page fault per step", "1 page fault per step", "2.5 page faults per step",
        "1,204 page faults per step"]
    assert named(["a, b", "c", " "]) == "'a, b', c, ' '"


def test_an_interrupted_command_counts_the_outbox_batches_it_wrote_alone() -> None:
    """Every file in the outbox was counted, another server's and an earlier command's too, until
    0.9.4 (a predict stopped said runs waited that it never made)."""
    import time

    from tracker.cli import INTERRUPTED_LINE, STARTED_S, interrupted_line
    from tracker.log.outbox import outbox_dir

    outbox_dir().mkdir(parents=True, exist_ok=True)
    earlier, ours = outbox_dir() / "earlier.json", outbox_dir() / "ours.json"
    earlier.write_text("{}")
    os.utime(earlier, (STARTED_S - 3600, STARTED_S - 3600))
    assert interrupted_line() == INTERRUPTED_LINE
    ours.write_text("{}")
    os.utime(ours, (time.time(), time.time()))
    assert interrupted_line() == ("interrupted: what was logged before is kept; runs wait in the outbox (1 batch: "
                                  "tracker sync sends them)\n")


def command_tree() -> list[tuple[list[str], object]]:
    """Every command of tracker's, groups and the root (``[]``) included, with its names below tracker."""
    import typer.main

    def walk(command: object, names: list[str]) -> list[tuple[list[str], object]]:
        found = [(names, command)]
        for name, sub in getattr(command, "commands", {}).items():
            found += walk(sub, [*names, name])
        return found

    return walk(typer.main.get_command(app), [])


def test_help_texts_have_no_line_break_within_a_paragraph() -> None:
    """Typer's rich help keeps a docstring's line breaks: a paragraph wrapped in the source was
    broken mid-sentence in --help and in its group's list of commands (until 0.9.4)."""
    texts = [(" ".join(["tracker", *names]), p) for names, command in command_tree()
             for p in (getattr(command, "help", None) or "").strip().split("\n\n")]
    broken = [(path, p) for path, p in texts if "\n" in p.strip()]
    assert not broken, broken


def test_every_command_of_one_configuration_refuses_an_axis_given_twice() -> None:
    """A command with an option that names what is measured (``OneConfiguration.AXES``: ``--batch-size``,
    ``--phase``, ...) taking one value is a ``OneConfiguration``, which refuses ``-b 1 -b 8`` (click keeps the
    last); a command added with such an option and without it would measure the last alone again, as until
    0.9.29. With --help the help wins."""
    from tracker.cli.options import OneConfiguration

    found = {" ".join(names): command for names, command in command_tree() if any(
        getattr(p, "name", None) in OneConfiguration.AXES and getattr(p, "param_type_name", "") == "option"
        and not getattr(p, "multiple", False) for p in getattr(command, "params", []))}
    assert {"profile network", "profile layers", "profile boundary", "describe", "mapping run", "predict",
            "fingerprint train", "campaign loader"} <= set(found), sorted(found)
    assert all(isinstance(command, OneConfiguration) for command in found.values()), {
        path: type(command).__name__ for path, command in found.items()}
    # --help beside an axis given twice is the help, as anywhere else (the usage error until 0.9.30)
    for path, command in found.items():
        option = next(p.opts[0] for p in command.params if getattr(p, "name", None) in OneConfiguration.AXES
                      and getattr(p, "param_type_name", "") == "option" and not getattr(p, "multiple", False))
        result = runner.invoke(app, [*path.split(), option, "1", option, "2", "--help"], env={"COLUMNS": "250"})
        assert result.exit_code == 0 and f"Usage: tracker {path} [OPTIONS]" in result.output, (path, result.output)


def test_help_names_paths_files_and_folders_not_python_types() -> None:
    """Every command's --help: a path argument or option shows FILE or FOLDER, and a repeatable or
    two-valued option a word of what it takes, where Typer shows a type (``<Path>``, ``<list[str]>``,
    ``<int,int>``) until given one (until 0.9.12: ``campaign run [OPTIONS] {path}`` with ``path <Path>``,
    ``--warehouse <Path>``, ``--exclude <list[str]>``, ``predict``'s ``models... <list[str]>``)."""
    commands = [names for names, _ in command_tree()]
    assert len(commands) > 40 and ["campaign", "run"] in commands and ["warehouse", "load"] in commands
    shown: dict[str, str] = {}
    for path in commands:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "250"})
        assert result.exit_code == 0, (path, result.output)
        shown[" ".join(path)] = result.output
    for command, text in shown.items():
        assert not re.search(r"<(Path|path|class|typing|pathlib)\b", text, re.IGNORECASE), (command, text)
        # an argument's row too: predict's models... showed <list[str]> until 0.9.12
        assert not re.search(r"<(list|tuple)\[", text), (command, text)
        for row in text.splitlines():  # an option's row: its type or metavar column
            if re.match(r"│\s+--", row):
                assert not re.search(r"<(list|tuple)\[|<\w+,\w+>", row), (command, row)
    assert "campaign run [OPTIONS] {FILE}" in shown["campaign run"]
    assert "import perf4sight [OPTIONS] {FOLDER}" in shown["import perf4sight"]
    assert re.search(r"--warehouse\s+-w\s+FILE\s", shown["warehouse load"])
    assert re.search(r"--num-nets-range\s+MIN MAX\s", shown["mapping run"])
    # an argument of several values: its values' type, as an option of several values shows it
    assert "predict [OPTIONS] {model}..." in shown["predict"]
    assert re.search(r"│ \*\s+model\s+<str>\.\.\.\s+Zoo name", shown["predict"]), shown["predict"]
    # a flag shows no type, as if it took a value (`--quick <bool>`, `--help <bool>` with Typer 0.29, until 0.9.17)
    assert not any("<bool>" in text for text in shown.values()), [c for c, t in shown.items() if "<bool>" in t]
    assert re.search(r"│ --quick\s+Seven small networks", shown["demo"]), shown["demo"]


def test_a_trace_is_taken_after_the_measurement_and_logged_with_its_operator_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--trace``: torch.profiler's Chrome trace and operator table are artifacts of the network run
    (the functional ops layer runs miss among them); a configuration measured before is measured
    again, as a repeat; the text output names the slowest operators."""
    store = tmp_path / "store"
    # a narrow terminal (or a pipe) throughout: the text output below is read at 80 columns, and a
    # command run with another environment would start another zygote (tracker.profile.zygote_client)
    monkeypatch.setenv("COLUMNS", "80")
    args = ["--tracking-uri", str(store), "-e", "cli", "profile", "network", "resnet18", "--batch-size", "1",
            "--input-size", "64", "--time-cap", "0.5", "--precision", "0.1", "--threads", "1"]
    first = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert "trace" not in first
    result = runner.invoke(app, [*args, "--trace", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert not data["reused"] and data["run_id"] != first["run_id"] and data["status"] == "FINISHED"
    trace = data["trace"]
    assert trace["iterations"] == 3 and trace["time_basis"] == "self_cpu_ms" and trace["traced_iteration_ms"] > 0
    assert trace["artifacts"] == ["trace/ops.json", "trace/trace.json"] and 0 < len(trace["ops"]) <= trace["operators"]
    names = [op["op"] for op in trace["ops"]]
    assert names[0].startswith("aten::") and "aten::add_" in names  # resnet18's residual additions: no module of their own
    assert all(a["self_cpu_ms"] >= b["self_cpu_ms"] for a, b in zip(trace["ops"], trace["ops"][1:]))
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    run = client.get_run(data["run_id"])
    assert run.data.tags["tracker.repeat_key"].startswith(run.data.tags["tracker.config_key"] + "#trace-")
    assert run.info.run_name.endswith(" · traced")  # as a campaign's trace is named (" · again" until 0.9.6)
    assert "latency_ms" in run.data.metrics and "tracker.trace_error" not in run.data.tags
    folder = Path(client.download_artifacts(data["run_id"], "trace", str(tmp_path)))
    events = json.loads((folder / "trace.json").read_text())["traceEvents"]
    assert sum(e.get("name") == "aten::conv2d" for e in events) == 3 * 20  # resnet18's 20 convolutions, 3 iterations
    table = json.loads((folder / "ops.json").read_text())
    assert len(table["ops"]) == trace["operators"] and sum(op["share_pct"] for op in table["ops"]) == pytest.approx(100)
    conv = next(op for op in table["ops"] if op["op"] == "aten::conv2d")
    assert conv["calls_per_iter"] == 20 and conv["cpu_total_ms"] >= conv["self_cpu_ms"]
    shown = runner.invoke(app, [*args, "--trace"])
    text, run_id = shown.stdout, shown.stdout.split("; run ")[1].split()[0]
    ops_file = Path(client.download_artifacts(run_id, "trace/ops.json", str(tmp_path / "shown")))
    top = json.loads(ops_file.read_text())["ops"][0]["op"]
    assert "torch.profiler, 3 iterations after the measurement: the 15 slowest" in text and f"│ {top} " in text
    assert "artifacts of the run: trace/ops.json, trace/trace.json" in text
    # in SQL: the warehouse loads each traced run's operator table, operator_time ranks them
    wh = str(tmp_path / "w.duckdb")
    assert runner.invoke(app, ["--tracking-uri", str(store), "warehouse", "load", "--warehouse", wh]).exit_code == 0
    sql = ("SELECT op, calls_per_iter, op_rank, model, latency_ms FROM operator_time WHERE run_id = '" + data["run_id"]
           + "' ORDER BY op_rank")
    rows = json.loads(runner.invoke(app, ["sql", sql, "--warehouse", wh, "--format", "json"]).stdout)
    assert sorted(r["op"] for r in rows) == sorted(op["op"] for op in table["ops"])
    assert (rows[0]["op"], rows[0]["op_rank"]) == (table["ops"][0]["op"], 1)
    assert {r["model"] for r in rows} == {"resnet18"} and rows[0]["latency_ms"] == pytest.approx(data["latency_ms"])
    assert next(r for r in rows if r["op"] == "aten::conv2d")["calls_per_iter"] == 20
    # a profiler that fails loses the trace, not the measurement
    monkeypatch.setenv("TRACKER_FAULT", "notrace")
    failed = runner.invoke(app, [*args, "--trace"])
    assert failed.exit_code == 0 and "no trace: torch.profiler failed (RuntimeError: injected" in failed.stdout
    run_id = re.search(r"\brun ([0-9a-f]{32})\b", failed.stdout).group(1)  # a note may follow the run's line
    kept = client.get_run(run_id)
    assert kept.info.status == "FINISHED" and kept.data.metrics["latency_ms"] > 0
    assert kept.data.tags["tracker.trace_error"].startswith("RuntimeError: injected")
    assert [a.path for a in client.list_artifacts(run_id, "trace")] == []


def test_a_host_bound_measurement_is_said_so(capsys: pytest.CaptureFixture[str]) -> None:
    """On a GPU, from HOST_BOUND_SHARE of each iteration spent launching, profile's lines say the
    latency is the host's (the network's and how many layers); under it, or absent, nothing."""
    from tracker.cli.profile import _report
    from tracker.cli.options import OutputFormat

    data = {"model": "resnet18", "batch_size": 1, "input_size": 224, "phase": "inference", "mode": "cuda0-sm1980",
            "status": "FINISHED", "reused": False, "latency_ms": 1.33, "ci_rel": 0.007, "samples": 144,
            "stop_reason": "precision", "peak_mem_mb": 88.0, "run_id": "r" * 32}
    for share, said in ((98.3, True), (74.9, False), (None, False)):
        layers = [{"host_share_pct": s} for s in (95.0, 60.0, 91.0)] if share is not None else [{}, {}, {}]
        _report({**data, **({"host_share_pct": share} if share is not None else {}), "layers": layers,
                 "sum_of_layers_ratio": 1.09}, OutputFormat.table)
        out = capsys.readouterr().out
        assert ("bound by the host's CPU" in out) is said, out
        assert ("% of each iteration" in out) is (share is not None), out
        assert share is None or f"host {share:.0f} % of each iteration" in out, out
        assert ("2 of them bound by the host" in out) is (share is not None), out


def test_profile_network_json_logs_a_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = runner.invoke(
        app,
        ["--tracking-uri", str(store), "-e", "cli", "profile", "network", "squeezenet1_1", "--batch-size", "1",
         "--time-cap", "1", "--precision", "0.05", "--threads", "1", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"run_id", "latency_ms", "ci_rel", "samples", "status"} <= set(data)
    assert data["status"] == "FINISHED" and data["samples"] >= 6 and data["latency_ms"] > 0
    run = MlflowClient(f"sqlite:///{store / 'mlflow.db'}").get_run(data["run_id"])
    assert run.data.params["model"] == "squeezenet1_1"
    assert run.data.metrics["samples_count"] == data["samples"]
    assert run.data.tags["env.cpu_count"] and run.data.tags["env.torch_version"]
    mem_total_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                        if line.startswith("MemTotal:"))
    assert int(run.data.tags["env.memory_total_mb"]) == mem_total_kb // 1024
    assert run.data.tags["tracker.stop_reason"] == data["stop_reason"]
    assert data["device"] == "cpu" and data["mode"] == run.data.params["mode"]
    assert "host_share_pct" not in data and "host_share_pct" not in run.data.metrics  # on a CPU the host is the device
    # what the network added to the process's peak (since 0.9.0): its weights (1.2 M parameters, 5 MB) at least,
    # far less than the process's whole peak (the interpreter and torch, about 550 MB)
    assert 4.9 < data["network_mem_mb"] == run.data.metrics["network_mem_mb"] < data["peak_mem_mb"] / 4
    # its tensors' own peak over a step (since 0.9.31): its weights (4.7 MB) and its activations alive at once
    assert 4.9 < data["tensor_peak_mb"] == run.data.metrics["tensor_peak_mb"] < data["peak_mem_mb"] / 4
    assert run.data.tags["tracker.tensor_peak"] == "1" and "tracker.tensor_peak_error" not in run.data.tags
    assert data["mode"].split("-")[:2] == ["cpu", "t1"]  # the thread count asked for, and said (cpu-t1[-governor])
    assert run.data.tags["env.threads"] == "1"  # the measuring child's, not the tracker process's
    # the mode's settings asked for are in its name (runs in two modes had one name in the UI's list until 0.8.9)
    assert run.data.tags["mlflow.runName"] == "squeezenet1_1 · bs1 · inference · cpu · t1"
    assert run.data.tags["mlflow.note.content"].startswith(
        f"squeezenet1_1 inference at batch 1 (1 image of 224x224) on cpu ({data['mode']}): median ")
    # device show foretells what the run records: its mode, the telemetry it measured and what it lacks
    shown = runner.invoke(app, ["device", "show", "--threads", "1", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.stdout)
    assert report["mode"]["id"] == run.data.params["mode"] and "psutil" in report["telemetry_sources"]
    assert set(report["measured"]) <= set(run.data.metrics) and not set(report["absent"]) & set(run.data.metrics)
    assert set(report["always"]) <= set(run.data.metrics) and all(report["absent"].values())
    # the resident memory read now is this command's own, and says so (bare until 0.9.4)
    assert report["measured"]["proc_rss_peak_mb"]["of"].startswith("this command's own process")
    # tail latency where there were samples enough to tell it (20 for p90, 200 for p99), else absent
    assert ("latency_p90_ms" in data) is (data["samples"] >= 20) and ("latency_p99_ms" in data) is (data["samples"] >= 200)
    assert {k: run.data.metrics[k] for k in ("latency_p90_ms", "latency_p99_ms") if k in run.data.metrics} == \
        {k: data[k] for k in ("latency_p90_ms", "latency_p99_ms") if k in data}
    if "latency_p90_ms" in data:
        assert run.data.metrics["latency_max_ms"] >= data["latency_p90_ms"] >= data["latency_ms"]
    # the telemetry this machine measured, as the run has it; what it could not (no RAPL, no GPU here) absent
    from tracker.profile.api import TELEMETRY_SHOWN as shown
    assert {k: data[k] for k in shown if k in data} == {k: run.data.metrics[k] for k in shown if k in run.data.metrics}
    assert 0 < data["cpu_util_pct"] <= 100 and "gpu_util_pct" not in data

    again = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "profile", "network", "squeezenet1_1",
                                "--time-cap", "1", "--precision", "0.05", "--threads", "1"])
    assert f"squeezenet1_1 bs1 inference in mode {data['mode']}: " in again.stdout and "(already measured: reused)" in again.stdout
    assert f"MB of it the network's, its tensors {data['tensor_peak_mb']:,.1f} MB at most)" in again.stdout
    assert data["run_id"] in again.stdout
    repeat = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "profile", "network", "squeezenet1_1",
                                            "--time-cap", "0.3", "--precision", "0.1", "--threads", "1", "--again", "--format", "json"]).stdout)
    assert not repeat["reused"] and repeat["run_id"] != data["run_id"]  # a repeat at another time: a second run
    repeat_tags = MlflowClient(f"sqlite:///{store / 'mlflow.db'}").get_run(repeat["run_id"]).data.tags
    assert repeat_tags["tracker.repeat_key"].startswith(run.data.tags["tracker.config_key"] + "#")
    wh = str(tmp_path / "w.duckdb")
    assert runner.invoke(app, ["--tracking-uri", str(store), "warehouse", "load", "--warehouse", wh]).exit_code == 0
    sql = ("SELECT (SELECT count(*) FROM measurements) AS every, (SELECT count(*) FROM latest_measurements) AS latest,"
           " (SELECT run_id FROM latest_measurements) AS newest")
    (counts,) = json.loads(runner.invoke(app, ["sql", sql, "--warehouse", wh, "--format", "json"]).stdout)
    assert counts == {"every": 2, "latest": 1, "newest": repeat["run_id"]}  # both kept; the repeat counts once
    (spread,) = json.loads(runner.invoke(app, ["sql", "SELECT * FROM measurement_repeats", "--warehouse", wh,
                                               "--format", "json"]).stdout)
    medians = sorted((data["latency_ms"], repeat["latency_ms"]))
    assert spread["repeats"] == 2 and spread["repeat_spread_rel"] == pytest.approx(medians[1] / medians[0] - 1)
    own = sorted((data["network_mem_mb"], repeat["network_mem_mb"]))  # the network's own memory moves too
    # its tensors do not: the same to the byte in another process, and the warehouse's column has it
    assert repeat["tensor_peak_mb"] == data["tensor_peak_mb"]
    tensors = json.loads(runner.invoke(app, ["sql", "SELECT DISTINCT tensor_peak_mb FROM measurements", "--warehouse", wh,
                                             "--format", "json"]).stdout)
    assert tensors == [{"tensor_peak_mb": data["tensor_peak_mb"]}]
    assert (spread["network_mem_repeats"], spread["min_network_mem_mb"], spread["max_network_mem_mb"]) == (2, *own)
    assert spread["network_mem_spread_rel"] == pytest.approx(own[1] / own[0] - 1)
    peaks = sorted((data["peak_mem_mb"], repeat["peak_mem_mb"]))
    assert spread["peak_mem_spread_rel"] == pytest.approx(peaks[1] / peaks[0] - 1)
    assert (spread["input_size"], spread["precision"]) == (224, "float32")  # what else tells repeats apart
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    assert data["speed_probe_ms"] == client.get_run(data["run_id"]).data.metrics["speed_probe_ms"]  # in its JSON too
    per_probe = sorted(r["latency_ms"] / r["speed_probe_ms"] for r in (data, repeat))
    assert spread["probe_spread_rel"] == pytest.approx(per_probe[1] / per_probe[0] - 1)  # the machine's speed taken out

    listed = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--kind", "network", "--format", "json"])
    assert {r["run_id"] for r in json.loads(listed.stdout)} == {data["run_id"], repeat["run_id"]}
    # MLflow's own search and order (since 0.9.1): the faster of the two first, the slower kept out by a metric
    fast, slow = sorted((data, repeat), key=lambda r: r["latency_ms"])
    found = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--where",
                                f"params.model = 'squeezenet1_1' AND metrics.latency_ms <= {fast['latency_ms']}",
                                "--order-by", "metrics.latency_ms ASC", "--format", "json"])
    assert [r["run_id"] for r in json.loads(found.stdout)] == [fast["run_id"]], found.output
    cut = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--kind", "network", "--limit", "1"])
    assert cut.exit_code == 0 and "the newest 1 shown; experiment 'cli' has more" in cut.stderr
    cut = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--kind", "network", "--limit", "1",
                              "--format", "json"])  # said in JSON too (in a table only until 0.9.4)
    assert len(json.loads(cut.stdout)) == 1 and "the newest 1 shown; experiment 'cli' has more" in cut.stderr
    ordered = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--kind", "network",
                                  "--limit", "1", "--order-by", "metrics.latency_ms DESC"])  # "the newest" until 0.9.2
    assert "the first 1 by metrics.latency_ms DESC shown; experiment 'cli' has more" in ordered.stderr
    # a run of another kind named where a measurement is wanted is said as that ("no run" until 0.9.2)
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    [mode_run] = client.search_runs([client.get_experiment_by_name("cli").experiment_id], "tags.`tracker.kind` = 'mode'")
    versus = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "compare", data["run_id"][:8],
                                 mode_run.info.run_id[:8]])
    assert versus.exit_code == 1 and str(versus.exception) == (
        f"run {mode_run.info.run_id[:12]} is a mode run, not a measurement: give a network, training or layer run")
    table = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--kind", "network"]).stdout
    line = next(row for row in table.splitlines() if data["run_id"][:12] in row)  # one line a run, however narrow the pipe
    assert f" {data['mode']} " in line and "squeezenet1_1 · bs1 · inference · cpu" in line, table
    # one run whole, by a prefix of its id: its figures, its raw samples' summary, its artifacts
    shown = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "show",
                                           data["run_id"][:8], "--format", "json"]).stdout)
    system = {k: v for k, v in run.data.metrics.items() if k.startswith("system/")}
    assert shown["run_id"] == data["run_id"] and shown["params"] == run.data.params
    assert {**shown["metrics"], **{f"system/{k}": system[f"system/{k}"] for k in shown["system_metrics"]}} == run.data.metrics
    # the telemetry over the window as system metrics (MLflow's System metrics tab): a point per
    # sample here (0.02 s apart), stepped in ms from the window's start and stamped in the run's time
    cpu = MlflowClient(f"sqlite:///{store / 'mlflow.db'}").get_metric_history(data["run_id"], "system/cpu_util_pct")
    steps = [m.step for m in cpu]
    assert len(cpu) >= 3 and steps == sorted(steps) and steps[0] >= 0
    assert run.info.start_time <= cpu[0].timestamp and cpu[-1].timestamp <= run.info.end_time
    assert [m.timestamp - cpu[0].timestamp for m in cpu] == [s - steps[0] for s in steps]
    assert statistics.fmean(m.value for m in cpu) == pytest.approx(run.data.metrics["cpu_util_pct"], rel=0.05)
    assert shown["samples"]["count"] == data["samples"] and shown["samples"]["stop_reason"] == data["stop_reason"]
    assert shown["samples"]["min_ms"] == run.data.metrics["latency_min_ms"] and shown["failure_reason"] is None
    assert shown["artifacts"]["samples/latency_ms.json"] > 0 and shown["environment"]["torch_version"]
    text = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "show", data["run_id"][:8]]).stdout
    assert text.startswith(f"run {data['run_id']} · network · FINISHED") and "samples/latency_ms.json" in text
    # what the MLflow UI shows above the run, its description, in both (since 0.9.1)
    assert shown["description"] == run.data.tags["mlflow.note.content"] and shown["deleted"] is False
    assert f"\n  {shown['description']}\n" in text
    # a full id names a run of any experiment, and the run's own experiment is said
    elsewhere = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "runs", "show", data["run_id"],
                                               "--format", "json"]).stdout)
    assert elsewhere["run_id"] == data["run_id"] and elsewhere["experiment"] == "cli"
    # an experiment with no run says which hold some
    empty = runner.invoke(app, ["--tracking-uri", str(store), "runs", "list"]).stdout
    assert empty == "no runs in experiment 'Default'; runs are in 'cli' (-e NAME selects one)\n", empty
    modes = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--kind", "mode", "--format", "json"])
    (mode,) = json.loads(modes.stdout)  # the device mode is described once
    assert mode["params"]["mode"] == run.data.params["mode"] and mode["params"]["cpu_threads"]
    info = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "store", "info", "--format", "json"])
    assert json.loads(info.stdout)["runs_in_experiment"] == 3
    assert json.loads(info.stdout)["experiment_names"] == ["cli", "Default"]
    for command in (["runs", "list"], ["store", "info"]):  # a misspelt experiment is said, and not made
        missing = runner.invoke(app, ["--tracking-uri", str(store), "-e", "clii", *command])
        assert isinstance(missing.exception, StoreError), missing.output  # the entry point prints it as one line
        assert str(missing.exception).startswith("no experiment named 'clii' in sqlite:")
        assert str(missing.exception).endswith("(experiments: cli, Default)")
    assert json.loads(info.stdout)["experiments"] == json.loads(runner.invoke(
        app, ["--tracking-uri", str(store), "-e", "cli", "store", "info", "--format", "json"]).stdout)["experiments"]
    # a deleted run is found by a prefix of its id, as by its full id (unfound until 0.9.2), and said deleted
    client.delete_run(repeat["run_id"])
    gone = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "show", repeat["run_id"][:8],
                               "--format", "json"])
    assert gone.exit_code == 0 and json.loads(gone.stdout)["deleted"] is True, gone.output


def test_a_configuration_measured_while_the_server_was_down_is_reused_from_the_outbox() -> None:
    """Until 0.9.3 a run waiting in the outbox answered nothing: each command measured it again
    while the server was down. Its layers come back with it, from the same batch."""
    from tracker.log.outbox import pending

    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    args = ["--tracking-uri", uri, "profile", "layers", "squeezenet1_1", "--input-size", "32", "--time-cap", "0.1",
            "--precision", "0.2", "--format", "json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert not data["reused"] and len(data["layers"]) > 20
    files = len(pending())
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    assert second["reused"] and second["run_id"] == data["run_id"] and second["latency_ms"] == data["latency_ms"]
    assert [r["run_id"] for r in second["layers"]] == [r["run_id"] for r in data["layers"]]
    assert len(pending()) == files  # nothing measured, nothing spooled
    whole = runner.invoke(app, [*args[:3], "network", *args[4:]])  # a network run with layers answers it too
    assert whole.exit_code == 0 and json.loads(whole.stdout)["run_id"] == data["run_id"], whole.output


def test_profile_layers_nests_layer_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    # alexnet: 21 layers (squeezenet1_1 has 57); each layer is measured for at least 8 blocks of 0.03 s; at 64 px,
    # the least its pools take (224 px until 0.9.15: its figures are not what this test reads)
    args = ["--tracking-uri", str(store), "profile", "layers", "alexnet", "--input-size", "64", "--time-cap", "0.1",
            "--precision", "0.1", "--format", "json"]
    # The same configuration measured whole first: it has no layers, so it does not answer `profile layers`.
    whole = runner.invoke(app, [*args[:3], "network", *args[4:]])
    assert whole.exit_code == 0, whole.output
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert not data["reused"] and data["run_id"] != json.loads(whole.stdout)["run_id"]
    assert len(data["layers"]) > 15 and data["sum_of_layers_ratio"] > 0
    again = json.loads(runner.invoke(app, args).stdout)  # measured with its layers: reused now
    assert again["reused"] and again["run_id"] == data["run_id"]
    shown = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "runs", "show", data["run_id"][:8],
                                           "--format", "json"]).stdout)
    assert shown["layer_runs"] == len(data["layers"])  # runs show counts the layer runs nested under it
    # runs list shows the network runs, its layers folded under them as the MLflow UI folds them (until
    # 0.9.4 the newest 50 were this network's layers); --kind layer lists them
    listed = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "runs", "list", "--format", "json"]).stdout)
    assert {r["kind"] for r in listed} == {"network", "mode"} and data["run_id"] in {r["run_id"] for r in listed}
    layers = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "runs", "list", "--kind", "layer",
                                            "--format", "json"]).stdout)
    assert {r["parent_run_id"] for r in layers} == {data["run_id"]} and len(layers) == len(data["layers"])
    assert [r["name"] for r in layers] == sorted(r["name"] for r in layers)  # in their order, 000 first
    convs = runner.invoke(app, ["--tracking-uri", str(store), "runs", "list", "--where", "params.op_type = 'Conv2d'"])
    assert convs.stdout.startswith("no runs") and "layer runs match: --kind layer lists them" in convs.stderr
    # A repeat of a configuration measured with layers is measured with layers too (the newest run
    # is where the layer-level fingerprint reads them), even through `profile network --again`.
    repeat = json.loads(runner.invoke(app, [*args[:3], "network", *args[4:], "--again"]).stdout)
    assert not repeat["reused"] and len(repeat["layers"]) == len(data["layers"])
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    # told apart from the first in the UI (one name until 0.9.2)
    assert client.get_run(repeat["run_id"]).info.run_name == f"{client.get_run(data['run_id']).info.run_name} · again"
    exp = client.get_experiment_by_name("Default")
    children = client.search_runs([exp.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{data['run_id']}'", max_results=1000)
    assert len(children) == len(data["layers"])
    assert {c.data.tags["tracker.kind"] for c in children} == {"layer"}
    # each layer's share is of the sum of layers (named so since 0.8.9: share_of_network_pct said otherwise)
    total = sum(c.data.metrics["latency_ms"] for c in children)
    assert all("share_of_network_pct" not in c.data.metrics for c in children)
    for c in children:
        assert c.data.metrics["share_of_layers_pct"] == pytest.approx(100 * c.data.metrics["latency_ms"] / total, rel=1e-6)


@pytest.mark.parametrize(("how", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_in_a_query_is_one_line_and_status_130(tmp_path: Path, how: str, status: int) -> None:
    """Typer turns a Ctrl-C into status 130 without a word, and DuckDB turns one during a query
    into an error of its own, or, as often, does not stop: the query stops, in one line. A SIGTERM
    too (the query ran on to its end, most times, until 0.9.4)."""
    import signal
    import time

    import duckdb
    import psutil

    duckdb.connect(str(tmp_path / "wh.duckdb")).close()
    duckdb.connect(str(tmp_path / "noviews.duckdb")).execute("CREATE TABLE runs (run_id VARCHAR)").close()
    proc = subprocess.Popen([*TRACKER, "sql", "SELECT sum(hash(range)) FROM range(50000000000)", "--warehouse", "wh.duckdb"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    try:
        # well into the query (minutes of work): 2.5 s of CPU, of which starting and importing take about 1 s (a
        # fixed 4 s here until 0.9.15, most of it the query's)
        running, deadline = psutil.Process(proc.pid), time.monotonic() + 60
        while sum(running.cpu_times()[:2]) < 2.5 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        proc.send_signal(getattr(signal, how))
        out, err = proc.communicate(timeout=20)
    finally:  # a query Ctrl-C did not stop must not go on loading the machine under the rest of the suite
        proc.kill()
    assert proc.returncode == status and not out, (out, err)  # said as a query's (a measurement's line until 0.9.1)
    assert err == "interrupted: the query stopped; the warehouse, opened read-only, is as it was\n", err


def test_ctrl_c_while_the_commands_load_is_one_line_and_status_130(tmp_path: Path) -> None:
    """A Ctrl-C in a command's first half-second, while typer and the commands import, was
    Python's KeyboardInterrupt traceback. Here it lands there for sure: an import hook on
    PYTHONPATH raises it as tracker.cli.app starts to load, under the console script and -m."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n\n\nclass CtrlC:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'tracker.cli.app':\n"
        "            raise KeyboardInterrupt\n\n\n"
        "sys.meta_path.insert(0, CtrlC())\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    script = Path(sys.executable).parent / "tracker"
    for command in ([[str(script)]] if script.is_file() else []) + [TRACKER]:
        proc = subprocess.run([*command, "store", "info"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 130 and proc.stderr == "interrupted: what was logged before is kept\n", (command, proc)
        assert not proc.stdout and not (tmp_path / "runs").exists()


def test_ctrl_c_in_a_command_that_logs_nothing_says_so(tmp_path: Path) -> None:
    """describe, zoo generate and zoo prune log nothing: a Ctrl-C in them said "what was logged before
    is kept" until 0.9.7. Here it lands in each for sure: an import hook raises it as the command's
    own code loads."""
    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys\n\n\nclass CtrlC:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == os.environ['CTRL_C_AT']:\n"
        "            raise KeyboardInterrupt\n\n\n"
        "sys.meta_path.insert(0, CtrlC())\n")
    kept = ("interrupted: nothing is logged by this command; the spec files written are whole: run the same command "
            "again to write the rest\n")
    for args, module, says in ((["describe", "squeezenet1_1"], "tracker.describe", "interrupted: describe logs nothing, "
                                                                                  "so nothing is lost\n"),
                               (["zoo", "generate", "--count", "2"], "tracker.zoo.generator", kept),
                               (["zoo", "prune", "squeezenet1_1", "--ratios", "0,50"], "tracker.zoo.pruning", kept)):
        env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "CTRL_C_AT": module}
        proc = subprocess.run([*TRACKER, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 130 and proc.stderr == says, (args, proc)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "experiments").exists()


def test_ctrl_c_after_the_command_ended_changes_nothing(tmp_path: Path) -> None:
    """A Ctrl-C while the interpreter shuts down (about a second after `fingerprint train`) ended
    the process with signal 2 or "Exception ignored" lines after its work was done. Here it lands
    there for sure: an exit handler registered at start-up sends it and goes on."""
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, os, signal, time\n\n\n"
        "def late():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.2)\n"
        "    print('shut down whole', flush=True)\n\n\n"
        "atexit.register(late)\n")
    proc = subprocess.run([*TRACKER, "views", "--warehouse", "none.duckdb"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=60,
                          preexec_fn=sigint_default)
    assert proc.returncode == 1 and proc.stdout == "shut down whole\n", proc
    assert proc.stderr == f"error: no warehouse at {tmp_path / 'none.duckdb'}: run `tracker warehouse load` first\n", proc


def test_bad_input_is_one_line_and_non_zero(tmp_path: Path) -> None:
    cases = [
        (["profile", "network", "resnet19"], 1, "unknown model 'resnet19'; did you mean resnet18"),
        (["profile", "network", "RESNET18"], 1, "unknown model 'RESNET18'; did you mean resnet18"),  # no hint until 0.9.4
        (["profile", "network", "resnet18", "--batch-size", "0"], 2, "--batch-size"),
        (["profile", "network", "resnet18", "--precision", "abc"], 2, "--precision"),
        (["profile", "network", "resnet18", "--min-samples", "3"], 2, "--min-samples"),
        # time limits at most an hour's sampling and a week's wait since 0.9.14 (stats.MAX_TIME_CAP_S,
        # settings.MAX_TIMEOUT_S), which say inf too: a typo's 1e308 let a hung child run on, before a store made
        *[(["--tracking-uri", "fresh", *args, "1e308"], 2, f"'{args[-1]}': Input should be less than or equal to {most}")
          for args, most in ((["profile", "network", "squeezenet1_1", "--time-cap"], 3600),
                             (["profile", "layers", "squeezenet1_1", "--timeout"], 604800),
                             (["profile", "boundary", "squeezenet1_1", "--timeout"], 604800),
                             (["mapping", "run", "--mapping", "squeezenet1_1:cpu", "--timeout"], 604800),
                             (["searchspace", "run", "space.toml", "--time-cap"], 3600))],
        # a run's params must be finite: measured, then lost, until 0.8.9 (said by its bound since 0.9.14)
        (["profile", "network", "resnet18", "--time-cap", "inf"], 2, "'--time-cap': Input should be less than or equal to 3600"),
        (["profile", "boundary", "resnet18", "--memory-limit-mb", "inf"], 2, "'--memory-limit-mb': must be a finite number"),
        # a day at most since 0.9.14 (mapping.MAX_WINDOW_S), which says inf too
        (["mapping", "run", "--mapping", "resnet18@3:cpu>cpu", "--duration", "inf"], 2,
         "'--duration': Input should be less than or equal to 86400"),
        # an empty entry was dropped silently until 0.9.2; a usage error, status 2 (1 until 0.9.10)
        (["mapping", "run", "--mapping", "resnet18@3:cpu>cpu,", "--duration", "1"], 2,
         "mapping 'resnet18@3:cpu>cpu,': entry 2 of 2 is empty (two commas together, or one at an end)"),
        (["profile", "layers", "resnet18", "--device", "cuda:x"], 2, "'cuda:x' is not a device: cpu, cuda or cuda:N"),
        (["device", "show", "gpu"], 2, "'gpu' is not a device: cpu, cuda or cuda:N"),
        # a choice its help names (any string until 0.9.32, refused by the library with status 2 all the same)
        (["data", "synth", "x", "--kind", "segmentation"], 2,
         "Invalid value for '--kind': 'segmentation' is not one of 'detection', 'classification'"),
        (["device", "show", "cuda:7"], 1, "device 'cuda:7' is not available on this machine"),
        # an option's name, not a campaign key's (until 0.9.2: "threads = 4096")
        # a usage error, status 2, as the parser's own for a value out of its range (1 until 0.9.8)
        (["device", "show", "--threads", "4096"], 2, "error: --threads 4096: expected a whole number from 1 to"),
        (["profile", "network", "resnet18", "--threads", "4096"], 2, "error: --threads 4096: expected a whole number"),
        (["profile", "network", "resnet18", "--memory-limit-mb", "1e30"], 2,
         "error: Invalid value for '--memory-limit-mb': must be at most 1,073,741,824 MB (1 PiB), got 1e+30"),
        # 0 as 4096: tracker's line (click's "Input should be greater than or equal to 1" until 0.9.5), status 2
        (["profile", "network", "resnet18", "--threads", "0"], 2, "error: --threads 0: expected a whole number from 1 to"),
        # before a store and an experiment are made (after, until 0.9.6)
        *[(["--tracking-uri", "fresh", "-e", "new", "profile", command, "squeezenet1_1", "--threads", "4096"], 2,
           "error: --threads 4096: expected a whole number from 1 to") for command in ("network", "layers", "boundary")],
        (["profile", "network", "resnet18", "--device", "cuda:0"], 1,
         "device 'cuda' (cuda:0) is not available on this machine (no CUDA GPU)"),
        # cuda:N is taken as campaigns take it, and refused where this machine lacks it (on a
        # machine without CUDA for that, on one with fewer GPUs for the count), before a store is made
        (["--tracking-uri", "fresh", "profile", "boundary", "resnet18", "--device", "cuda:7"], 1,
         "device 'cuda:7' is not available on this machine"),
        (["--tracking-uri", f"http://127.0.0.1:{free_port()}", "store", "info"], 1, "cannot reach tracking server"),
        # ... at once, where MLflow's client retried each request for minutes (until 0.8.9)
        *[(["--tracking-uri", f"http://127.0.0.1:{free_port()}", *args], 1, "cannot reach tracking server")
          for args in (["predict", "resnet18"], ["fingerprint", "list"], ["warehouse", "load", "-w", "w.duckdb"],
                       ["fingerprint", "train", "--target", "latency_ms", "-w", "w.duckdb"],
                       ["campaign", "run", "zoo.toml", "--dry-run"])],
        # a tracking URI malformed on its face: a usage error, status 2 (1 until 0.9.10)
        (["--tracking-uri", "ftp://example", "store", "info"], 2, "unsupported tracking URI"),
        (["--tracking-uri", "http://", "store", "info"], 2, "tracking URI 'http://' names no server: http://HOST:PORT"),
        # no file named "sqlite:" or ":memory:" made (until 0.9.2)
        (["--tracking-uri", "sqlite://", "store", "info"], 2, "tracking URI 'sqlite://' names no database file"),
        (["--tracking-uri", "sqlite:///:memory:", "profile", "network", "squeezenet1_1"], 2,
         "tracking URI 'sqlite:///:memory:' names no database file"),
        # a host's place, or no slashes: not a path (a store made at ./sqlite:/relative.db until 0.9.7)
        *[(["--tracking-uri", uri, "runs", "list"], 2, f"tracking URI {uri!r} is not a SQLite file's URI: "
           "sqlite:///PATH.db (three slashes, then a relative path) or sqlite:////ABSOLUTE/PATH.db")
          for uri in ("sqlite://relative.db", "sqlite:relative.db")],
        (["--tracking-uri", "sqlite://relative.db", "profile", "network", "squeezenet1_1"], 2,
         "tracking URI 'sqlite://relative.db' is not a SQLite file's URI"),
        # a PostgreSQL store that refuses: one line (an AssertionError's traceback until 0.9.1)
        (["--tracking-uri", f"postgresql://u@127.0.0.1:{free_port()}/db", "runs", "list"], 1,
         "cannot open tracking database postgresql://u@127.0.0.1:"),
        # a password is never said (since 0.9.2), and a server's credentials are refused in the URI
        (["--tracking-uri", f"postgresql://u:s3cret@127.0.0.1:{free_port()}/db", "runs", "list"], 1,
         "cannot open tracking database postgresql://u:***@127.0.0.1:"),
        (["--tracking-uri", f"http://u:s3cret@127.0.0.1:{free_port()}", "store", "info"], 2,
         "the tracking URI carries credentials: give them as MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"),
        (["runs", "list", "--kind", "gizmo"], 2, "unknown run kind 'gizmo'"),
        (["runs", "list", "--where", "params.model = "], 2, "--where: MLflow cannot search by it: "),
        (["runs", "list", "--status", "done"], 2, "unknown run status 'done': expected one of RUNNING"),
        (["runs", "show", "abc"], 2, "'abc' is not a run id: give a run id or its first 6 characters"),
        # a command that only reads leaves no new empty store behind
        (["--tracking-uri", "fresh", "fingerprint", "list"], 1, "no tracking store at"),
        (["--tracking-uri", "fresh", "fingerprint", "promote", "latency_ms-inference-cpu", "2"], 1, "no tracking store at"),
        (["frobnicate"], 2, "No such command"),
        # a warehouse that lacks what a load makes: one line (a CatalogException's traceback until 0.9.6)
        (["fingerprint", "train", "--target", "latency_ms", "-w", "noviews.duckdb"], 1,
         "the warehouse could not be read: Catalog Error: Table with name measurement_features does not exist"),
        # the database's password unsaid, and a bad one said as this option's (until 0.9.6: said, and "unsupported
        # tracking URI" alone)
        (["warehouse", "load", "-w", "w.duckdb", "--backend-store-uri", "postgresql://u:s3cret@127.0.0.1:5998/db"], 1,
         "--backend-store-uri (TRACKER_BACKEND_STORE_URI) postgresql://u:***@127.0.0.1:5998/db is the database behind"),
        (["warehouse", "load", "-w", "w.duckdb", "--backend-store-uri", "bogus://x"], 2,
         "--backend-store-uri (TRACKER_BACKEND_STORE_URI) bogus://x: unsupported tracking URI 'bogus://x'"),
        # a query beginning with its comment line is said as such ("No such option: -- best ..." until 0.9.6)
        (["sql", "-- best\nSELECT 1"], 2, "'-- best' was read as an option: a query that begins with a -- comment goes "
                                           "after a lone --"),
        # tracker's own option after a command: "No such option: -e", and no more, until 0.9.4
        (["runs", "list", "-e", "x"], 2,
         "-e is an option of tracker itself, not of runs list: give it before the command (tracker -e x runs list)"),
        (["report", "pics", "--no-load", "--warehouse", "none.duckdb"], 1, "no warehouse at"),
        (["report", "README.md", "--no-load", "--warehouse", "wh.duckdb"], 1, "README.md exists and is not a folder"),
        (["demo", "--tx2", "."], 2, "holds no architectures.json.gz"),
        (["sql", " ; ", "--warehouse", "wh.duckdb"], 2, "QUERY ' ; ' is empty"),
        # held by another process (this test's): DuckDB's lock message pointed at its own CLI until 0.9.4
        (["sql", "SELECT 1", "--warehouse", "held.duckdb"], 1,
         f"cannot open warehouse {tmp_path / 'held.duckdb'}: another process has it open ("),
        # a DuckDB file tracker never loaded: a traceback, or no views at all, until 0.9.4
        *[(args, 1, f"{tmp_path / 'wh.duckdb'} is a DuckDB database that tracker never loaded (it has no runs table)")
          for args in (["views", "-w", "wh.duckdb"], ["fingerprint", "train", "--target", "latency_ms", "-w", "wh.duckdb"])],
        (["campaign", "run", "zoo.toml", "--shard", ""], 2,
         "--shard takes I/N, e.g. 2/4; got ''"),  # not the whole campaign, as if --shard were not given
        (["campaign", "run", "zoo.toml", "--shard", "2/0"], 2,
         "--shard 2/0: N, the number of shards, must be at least 1"),  # "I must be between 1 and N" until 0.9.3
        # a file of something else, however small (DuckDB's own words: "Cannot launch in-memory database")
        (["sql", "SELECT 1", "--warehouse", "README.md"], 1,
         f"{tmp_path / 'README.md'} is not a DuckDB database: a warehouse is the file `tracker warehouse load` makes"),
        (["predict", "resnet18", "--phase", "trainig"], 2, "'trainig' is not one of 'inference', 'training'"),
        # predict's options that were let by unheeded, or the last of two kept, until 0.9.2
        (["predict", "resnet18", "--under", "latency_ms=5", "--under", "latency_ms=50"], 2,
         "--under latency_ms given twice (5 and 50): one budget a target"),
        (["predict", "resnet18", "--under", "latency_ms=0"], 2, "'latency_ms=0': the budget must be a finite number above 0"),
        (["predict", "resnet18", "--largest-batch", "--under", "peak_mem_mb=5", "--sort", "latency_ms"], 2,
         "--largest-batch answers one thing, the largest batch size, with the champions: leave out --under and --sort"),
        (["predict", "resnet18", "--use", "latency_ms-inference-cpu/1", "--use", "latency_ms-inference-cpu/2"], 2,
         "--use names two versions of latency_ms: one version a target"),
        # read as version 3 of "latency_ms-inference-cpu/2", and said to be of another device, until 0.9.4
        (["predict", "resnet18", "--use", "latency_ms-inference-cpu/2/3"], 2,
         "'latency_ms-inference-cpu/2/3': expected a registered fingerprint and its version, NAME/VERSION"),
        # DuckDB's overflow, a traceback, until 0.9.4
        (["predict", "resnet18", "-b", "3000000000"], 2, "Input should be less than or equal to 1048576"),
        # every command's batch size, as predict's (until 0.9.7 profile made a store and logged a FAILED run
        # of a C++ message; describe printed figures 10^20 times too large)
        *[(["--tracking-uri", "fresh", *args, "99999999999999999999"], 2, "Input should be less than or equal to 1048576")
          for args in (["profile", "network", "squeezenet1_1", "-b"], ["profile", "layers", "squeezenet1_1", "-b"],
                       ["describe", "squeezenet1_1", "-b"], ["profile", "boundary", "squeezenet1_1", "--max-batch"],
                       ["profile", "boundary", "squeezenet1_1", "--start"],
                       ["mapping", "run", "--mapping", "squeezenet1_1:cpu", "-b"])],
        # one batch size given twice, as predict takes several: the last alone was measured, without a word, until 0.9.29
        *[(["--tracking-uri", "fresh", *args], 2, f"Invalid value for '--batch-size'{said}")
          for args, said in (
              (["profile", "network", "squeezenet1_1", "-b", "1", "-b", "8"],
               " / '-b': given 2 times (1, 8): profile network takes one batch size; a campaign measures several "
               "(tracker campaign run)"),
              (["profile", "layers", "squeezenet1_1", "-b1", "--batch-size=4"],
               " / '-b': given 2 times (1, 4): profile layers takes one"),
              (["describe", "squeezenet1_1", "-b", "2", "-b", "3", "--batch-size", "4"],
               " / '-b': given 3 times (2, 3, 4): describe takes one batch size; run it once for each"),
              (["mapping", "run", "--mapping", "squeezenet1_1:cpu", "-b", "1", "-b", "2"],
               " / '-b': given 2 times (1, 2): mapping run"),
              (["campaign", "loader", str(Path(__file__).parents[1] / "experiments" / "train-classification.toml"),
                "--batch-size", "4", "--batch-size=8,16", "--dry-run"],
               ": given 2 times (4, 8,16): campaign loader takes several in one comma list (--batch-size 4,8,16)"))],
        # and each other option that names what is measured or predicted (predict's -b takes several)
        (["--tracking-uri", "fresh", "predict", "squeezenet1_1", "-b", "1", "-b", "2", "--phase", "inference", "--phase",
          "training"], 2, "'--phase': given 2 times (inference, training): predict takes one phase; run it once for each"),
        (["--tracking-uri", "fresh", "profile", "boundary", "squeezenet1_1", "--dtype", "float32", "--dtype=int8"], 2,
         "'--dtype': given 2 times (float32, int8): profile boundary takes one number format"),
        (["--tracking-uri", "fresh", "fingerprint", "train", "--target", "latency_ms", "--target", "peak_mem_mb"], 2,
         "'--target': given 2 times (latency_ms, peak_mem_mb): fingerprint train takes one target"),
        (["--tracking-uri", "fresh", "campaign", "run", "big.toml"], 1,
         "big.toml: [measure].batch_sizes must be from 1 to 1048576, got 2000000"),  # in check_bound's words (0.9.8)
        (["--tracking-uri", "fresh", "campaign", "loader", str(Path(__file__).parents[1] / "experiments" / "train-classification.toml"), "--batch-size",
          "4,2000000"], 2, "--batch-size must be from 1 to 1048576, got 2000000"),  # as -b's of the others (1 until 0.9.8)
        (["predict", "resnet18", "--features", "--sort", "latency_ms"], 2,
         "--features prints one configuration's features as a table"),
        # without pydantic's "Value error, " inside Typer's sentence (until 0.9.2)
        (["runs", "list", "--format", "xml"], 2, "Invalid value for '--format': 'xml' is not one of 'table', 'json'."),
        # a file where a folder should be: said before anything is measured
        (["--tracking-uri", "README.md/runs", "profile", "network", "squeezenet1_1"], 1,
         f"cannot make a tracking store in {tmp_path / 'README.md' / 'runs'}: Not a directory: "),
        # ... and by the commands that only read (not "nothing has been logged there yet" until 0.9.4)
        (["--tracking-uri", "README.md/runs", "store", "info"], 1,
         f"no tracking store at {tmp_path / 'README.md' / 'runs' / 'mlflow.db'}: {tmp_path / 'README.md'} is a file, "
         "not a folder"),
        (["--tracking-uri", f"sqlite:///{tmp_path}", "runs", "list"], 1,
         f"{tmp_path} is a folder, not a tracking store's database file"),
        # a file that is not an MLflow store: a traceback until 0.9.4
        *[(["--tracking-uri", f"sqlite:///{tmp_path / 'README.md'}", *args], 1,
           f"sqlite:///{tmp_path / 'README.md'} is not an MLflow tracking store (file is not a database)")
          for args in (["store", "relocate"], ["fingerprint", "list"])],
        # another SQLite database: MLflow's client would make its tables in it
        (["--tracking-uri", f"sqlite:///{tmp_path / 'other.db'}", "predict", "resnet18"], 1,
         f"sqlite:///{tmp_path / 'other.db'} is not an MLflow tracking store (a SQLite database without MLflow's tables)"),
        (["warehouse", "load", "--warehouse", "README.md/w.duckdb"], 1,
         f"cannot open warehouse {tmp_path / 'README.md' / 'w.duckdb'}: Not a directory: {tmp_path / 'README.md'}"),
        (["warehouse", "export", "README.md/parquet", "--warehouse", "wh.duckdb"], 1,
         "error: Not a directory: README.md/parquet"),
        # an option's value tracker checks, or options that do not go together: a usage error, status 2, as
        # the parser's own for a value out of its range (1 until 0.9.8, beside 2 for --batch-size 0)
        *[(args, 2, said) for args, said in (
            (["--tracking-uri", "fresh", "describe", "squeezenet1_1", "--input-size", "100000"],
             "Input should be less than or equal to 8192"),  # tried, and said as memory not given, status 1
            (["--tracking-uri", "fresh", "predict", "squeezenet1_1", "--input-size", "100000"],
             "Input should be less than or equal to 8192"),
            (["zoo", "generate", "--input-size", "16", "--out", "gen"], "--input-size: input_size must be at least 32"),
            (["zoo", "prune", "squeezenet1_1", "--ratios", "150", "--out", "pr"],
             "--ratios are percentages from 0 to under 100, got 150"),
            (["zoo", "prune", "squeezenet1_1", "--ratios", "0,x", "--out", "pr"], "--ratios takes percentages"),
            # a choice its help names since 0.9.32 (tracker's "unknown pruning method 'best'" before)
            (["zoo", "prune", "squeezenet1_1", "--method", "best", "--out", "pr"],
             "Invalid value for '--method': 'best' is not one of 'l1', 'random'"),
            (["zoo", "prune", "squeezenet1_1", "--seed", "5", "--out", "pr"], "a seed is for method random, got seed 5"),
            (["data", "synth", "shapes", "--images", "0"], "--images must be from 1 to 100,000, got 0"),
            (["data", "synth", "shapes", "--size", "8"], "--size must be from 32 to 4096 pixels, got 8"),
            (["--tracking-uri", "fresh", "mapping", "run", "--mapping", "squeezenet1_1:cpu", "--duration", "5",
              "--timeout", "5"], "--timeout 5: cannot cover --warmup 2 + --duration 5"),
            (["--tracking-uri", "fresh", "mapping", "run", "--mapping", "squeezenet1_1:cpu", "--sets", "2"],
             "--sets is for mappings drawn at random"),
            (["mapping", "generate", "--device-priorities", "0.4"], "--device-priorities '0.4': expected two numbers"),
            # digits of another script (\u0663 is 3, \u0665\u0660 50), read by int() and float() until 0.9.14,
            # and \u00b2, which they refuse
            (["zoo", "prune", "squeezenet1_1", "--ratios", "0,\u0665\u0660", "--out", "pr"],
             "--ratios takes percentages separated by commas, e.g. 0,10,50; got '0,\u0665\u0660'"),
            (["zoo", "prune", "squeezenet1_1", "--ratios", "\u00b2", "--out", "pr"], "--ratios takes percentages"),
            (["--tracking-uri", "fresh", "campaign", "loader", str(Path(__file__).parents[1] / "experiments" /
              "train-classification.toml"), "--num-workers", "0,\u0663", "--dry-run"],
             "--num-workers: expected whole numbers separated by commas, got '0,\u0663'"),
            (["--tracking-uri", "fresh", "campaign", "run", "zoo.toml", "--shard", "\u0661/\u0662", "--dry-run"],
             "--shard takes I/N, e.g. 2/4; got '\u0661/\u0662'"),
            (["--tracking-uri", "fresh", "campaign", "run", "zoo.toml", "--shard", "1/\u00b2"], "--shard takes I/N"),
            (["mapping", "generate", "--device-priorities", "0.5,\u0663"],
             "--device-priorities '0.5,\u0663': expected two numbers"),
            (["predict", "resnet18", "--under", "latency_ms=\u0663"], "--under 'latency_ms=\u0663': '\u0663' is not a number"),
            (["--tracking-uri", "fresh", "mapping", "run", "--mapping", "squeezenet1_1@\u0663:cpu", "--duration", "0.1"],
             "split index '\u0663' is not a whole number"),
            (["mapping", "generate", "--num-nets-range", "3", "1"], "--num-nets-range 3 1: need 1 <= A <= B"),
            (["predict", "resnet18", "--sort", "speed"], "--sort 'speed': not a target"),
            (["predict", "resnet18", "--under", "latency=3"], "--under 'latency=3': expected TARGET=VALUE"),
            (["predict", "resnet18", "--use", "latency_ms-inference-cuda/1"],
             "--use latency_ms-inference-cuda/1: not a fingerprint of inference on 'cpu'"),
            (["sql", "SELECT $bs", "--param", "bs", "--warehouse", "wh.duckdb"], "--param 'bs': give NAME=VALUE"),
            (["sql", "SELECT 1", "--format", "parquet", "--warehouse", "wh.duckdb"], "--format parquet writes a file"),
            (["sql", "SELECT 1", "--output", "out.xlsx", "--warehouse", "wh.duckdb"], "--output out.xlsx: tracker writes"),
            (["--tracking-uri", "fresh", "runs", "list", "--kind", "gizmo"], "unknown run kind 'gizmo'"))],
    ]
    (tmp_path / "README.md").write_text("not a folder")
    (tmp_path / "zoo.toml").write_text('[networks]\nzoo = ["squeezenet1_1"]\n')  # writes no spec file beside it
    (tmp_path / "big.toml").write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\nbatch_sizes = [1, 2000000]\n')
    import duckdb

    duckdb.connect(str(tmp_path / "wh.duckdb")).close()
    duckdb.connect(str(tmp_path / "noviews.duckdb")).execute("CREATE TABLE runs (run_id VARCHAR)").close()
    with contextlib.closing(sqlite3.connect(tmp_path / "other.db")) as other:
        other.execute("CREATE TABLE t (a INT)")
    RunLogger(str(tmp_path / "runs")).close()  # the default store, for the commands that read it
    # The entry point's own handling in this process (a process each took 21 s of the suite's time until
    # 0.9.4); a few as real processes: the console script's whole path, and a lock another process holds.
    real = {0, len(cases) - 1} | {i for i, (args, _, _) in enumerate(cases) if "held.duckdb" in args or args == ["frobnicate"]}
    held = duckdb.connect(str(tmp_path / "held.duckdb"))  # written to, so locked, while the cases run
    try:
        procs = [run_cli(*args, cwd=tmp_path) if i in real else in_process(args, tmp_path)
                 for i, (args, _, _) in enumerate(cases)]
    finally:
        held.close()
    for (args, code, message), proc in zip(cases, procs):
        assert proc.returncode == code, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "fresh").exists() and not list(tmp_path.glob("*:*"))  # no store, no "sqlite:" or ":memory:"
    assert not any((tmp_path / name).exists() for name in ("gen", "pr", "shapes", "experiments"))  # nothing written


def test_the_load_a_warehouse_never_loaded_is_told_to_run_names_it_as_a_shell_reads_it(tmp_path: Path) -> None:
    """A DuckDB file in a folder with a space in its name: the load the line suggests quotes it
    (two words, the command failing when pasted, until 0.9.8)."""
    import shlex

    import duckdb

    (tmp_path / "team share").mkdir()
    duckdb.connect(str(tmp_path / "team share" / "wh.duckdb")).close()
    proc = in_process(["views", "-w", "team share/wh.duckdb"], tmp_path)
    assert proc.returncode == 1 and "never loaded" in proc.stderr, proc.stderr
    command = proc.stderr.strip().rsplit("(it has no runs table): ", 1)[1]
    assert shlex.split(command) == ["tracker", "warehouse", "load", "-w", str(tmp_path / "team share" / "wh.duckdb")]


def test_a_blank_tracking_uri_is_refused_and_an_empty_one_is_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tracking URI of spaces, given or in MLFLOW_TRACKING_URI, is refused in one line, as an
    experiment named by spaces is, before anything is written (a store was made in a folder named
    " " until 0.9.8); an empty one is no URI: the embedded store in runs/."""
    from tests.test_import_perf4sight import small_folder

    small_folder(tmp_path / "mini")
    refusal = "error: a tracking URI needs a store, got ' ' (--tracking-uri or MLFLOW_TRACKING_URI):"
    given = in_process(["--tracking-uri", " ", "-e", "ws", "import", "perf4sight", "mini"], tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", " \t")
    from_environment = in_process(["-e", "ws", "import", "perf4sight", "mini"], tmp_path)
    for proc, shown in ((given, "' '"), (from_environment, "' \\t'")):
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr  # a usage error (1 until 0.9.10)
        assert lines[0].startswith(refusal.replace("' '", shown)), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mini"]  # no store, in " " or runs/
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    empty = in_process(["-e", "ws", "import", "perf4sight", "mini", "--format", "json"], tmp_path)
    assert empty.returncode == 0 and json.loads(empty.stdout)["imported"] == 4, empty.stderr
    assert (tmp_path / "runs" / "mlflow.db").is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["mini", "runs"]


def test_what_the_command_line_gave_wrong_on_its_face_is_a_usage_error_and_nothing_is_done(tmp_path: Path) -> None:
    """An argument or an option's value wrong on its face (empty, out of its range, not of its form), or
    options that do not go together: one line, status 2, as the parser says its own, before a store is
    read or made, and nothing written (each was status 1, or taken, until 0.9.10: "" for a folder wrote
    into the current one, a negative seed was taken for its positive). What a file, the store or the
    machine holds stays status 1."""
    seeds = [(args, seed) for args in (["zoo", "generate", "-n", "1", "--out", "gen"],
                                       ["zoo", "prune", "squeezenet1_1", "--method", "random", "--ratios", "0", "--out", "pr"],
                                       ["data", "synth", "shapes", "--images", "1"], ["mapping", "generate"],
                                       ["mapping", "run"])
             for seed in ("-1", str(2**32))]
    usage = [
        (["report", ""], "FOLDER '' names no folder: give the folder to write the pictures into (. for this one)"),
        (["report", "  "], "FOLDER '  ' names no folder"),
        (["warehouse", "export", "", "--format", "csv"], "FOLDER '' names no folder: give the folder to write the CSV"),
        (["data", "synth", "", "--images", "1"], "FOLDER '' names no folder: give the folder to write the dataset into"),
        (["sql", ""], "QUERY '' is empty: give one SQL statement"),
        (["zoo", "generate", "-n", "1", "--out", ""], "--out '' names no folder: give the folder for the specs"),
        (["zoo", "prune", "squeezenet1_1", "--ratios", "0", "--out", " "], "--out ' ' names no folder"),
        (["mapping", "generate", "--out", ""], "--out '' names no file: give the JSON file to write the mappings into"),
        (["-e", "a/b", "zoo", "generate", "-n", "1"], "-e 'a/b' names a folder, and the specs' default folder"),
        (["--tracking-uri", " ", "runs", "list"], "a tracking URI needs a store, got ' '"),
        (["--tracking-uri", "ftp://x", "predict", "squeezenet1_1"], "unsupported tracking URI 'ftp://x'"),
        (["warehouse", "load", "--backend-store-uri", "ftp://x"],
         "--backend-store-uri (TRACKER_BACKEND_STORE_URI) ftp://x: unsupported tracking URI 'ftp://x'"),
        (["mapping", "run", "--mapping", "garbage"], "mapping entry 'garbage': expected model@split:device>device"),
        (["mapping", "run", "--mapping", "squeezenet1_1@x:cpu"], "split index 'x' is not a whole number"),
        (["mapping", "run", "--mapping", "squeezenet1_1@3:cpu>cpu>cpu"], "3 devices; a network is split between two"),
        (["mapping", "run", "--mapping", ""], "mapping '': a mapping needs at least one network"),
        (["mapping", "run", "--mapping", "squeezenet1_1:tpu"], "unknown device 'tpu' (known: cpu, cuda, cuda:N)"),
        (["mapping", "run", "--mapping", "squeezenet1_1@67:cpu"], "split index 67 is out of range for squeezenet1_1 (0..66"),
        # a version not in ASCII digits, or past the registry's 64 bits: a traceback with a store (ValueError, SQLite's
        # OverflowError), and "no tracking store" without one, until 0.9.13
        *[(["predict", "squeezenet1_1", "--use", f"latency_ms-inference-cpu/{version}"],
           f"{f'latency_ms-inference-cpu/{version}'!r:.80}: expected a registered fingerprint and its version, "
           "NAME/VERSION (VERSION a whole number of at least 1, in digits 0-9, at most 9223372036854775807")
          for version in ("\u00b2", "1" + "0" * 400)],
        (["runs", "show", ""], "'' is not a run id"),  # not "no tracking store at ...": its form first
        (["runs", "compare", "abcdef", "xyz"], "'xyz' is not a run id"),
        (["fingerprint", "train", "--target", "latency"], "--target 'latency': not a target; one of latency_ms, "),
        (["profile", "network", "squeezenet1_1", "--dtype", "int8", "--phase", "training"],
         "dtype int8: a network quantized to int8 (torch.ao's x86 backend) runs inference on a CPU, not training"),
        (["describe", ""], "Invalid value for 'model': '' names no network: give a zoo name, a spec file or FILE.py:NAME"),
        (["profile", "layers", " "], "Invalid value for 'model': ' ' names no network"),
        *[([*args, "--seed", seed], "Invalid value for '--seed'") for args, seed in seeds],
    ]
    (tmp_path / "m.json").write_text('{"networks": [{"model": "squeezenet1_1", "split": 67, "devices": ["cpu", "cpu"]}]}')
    not_usage = [  # the file's, the store's: status 1 as before
        (["mapping", "run", "--file", "m.json"], "m.json: network 1 (squeezenet1_1): split index 67 is out of range"),
        (["mapping", "run", "--mapping", "nosuch:cpu"], "mapping entry 'nosuch:cpu': unknown model 'nosuch'"),
        (["--tracking-uri", "nowhere", "runs", "list"], "no tracking store at"),
        (["runs", "show", "abcdef"], "no tracking store at"),
    ]
    for cases, code in ((usage, 2), (not_usage, 1)):
        for args, message in cases:
            proc = in_process(args, tmp_path)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == code and len(lines) == 1 and not proc.stdout, (args, proc.returncode, proc.stderr)
            assert lines[0].startswith("error: ") and message in lines[0], (args, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]  # no store, no spec, no image, no mapping file


def test_a_number_of_hundreds_of_digits_is_said_in_80(tmp_path: Path) -> None:
    """A value of 400 digits is said in its first 80 and an ellipsis, in whichever check refuses it: until
    0.9.13 every check but check_bound's said it whole, an error line of some 450 characters."""
    big = "1" + "0" * 400
    for args, said in ((["data", "synth", "shapes", "--images", big], "--images must be from 1 to 100,000, got "),
                       (["mapping", "generate", "--sets", big], "--sets "),
                       (["predict", "squeezenet1_1", "--under", f"latency_ms={big}"], "--under 'latency_ms="),
                       (["mapping", "run", "--mapping", f"squeezenet1_1@{big}:cpu"], "mapping entry 'squeezenet1_1@")):
        proc = in_process(args, tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert lines[0].startswith(f"error: {said}") and f"{big[:80]}…" in lines[0] and big[:81] not in lines[0], lines
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_an_empty_path_is_a_usage_error_before_anything_is_read_or_made(tmp_path: Path) -> None:
    """Every PATH argument and option of a file or folder: "" (or blanks) is one line naming it, status 2,
    before anything is read or made. Until 0.9.11 "" was Path(""), the current folder: `campaign run ""`
    said "cannot read campaign .: Is a directory", `views -w ""` opened the current folder as a warehouse,
    each status 1. And SQL of comments alone (`sql -- "-- best runs"`) is refused as "" is: status 2, no
    warehouse needed (status 1 until 0.9.11, and said only once a warehouse was there)."""
    empty = [
        (["campaign", "run", ""], "Invalid value for 'FILE': '' is an empty path: give the campaign file, e.g. "
                                  "experiments/zoo-dozen.toml"),
        (["campaign", "loader", " "], "Invalid value for 'FILE': ' ' is an empty path: give the training job file"),
        (["profile", "training", ""], "Invalid value for 'FILE': '' is an empty path: give the training job file"),
        (["searchspace", "run", ""], "Invalid value for 'FILE': '' is an empty path: give the search space file"),
        (["searchspace", "report", ""], "Invalid value for 'FILE': '' is an empty path"),
        (["searchspace", "report", "s.toml", "--warehouse", ""], "Invalid value for '--warehouse': '' is an empty path"),
        (["import", "perf4sight", ""], "Invalid value for 'FOLDER': '' is an empty path: give perf4sight's TX2 data folder"),
        (["demo", "--tx2", ""], "Invalid value for '--tx2': '' is an empty path"),  # ". holds no ..." until 0.9.11
        (["mapping", "run", "--file", ""], "Invalid value for '--file': '' is an empty path: give the mapping file"),
        (["sql", "SELECT 1", "-o", ""], "Invalid value for '--output' / '-o': '' is an empty path"),
        *[([*command, flag, ""], "Invalid value for '--warehouse' / '-w': '' is an empty path: give the DuckDB file, "
                                 "or leave --warehouse out")
          for command in (["views"], ["sql", "SELECT 1"], ["warehouse", "load"], ["warehouse", "export", "out"],
                          ["report", "pics"], ["fingerprint", "train", "--target", "latency_ms"])
          for flag in ("-w", "--warehouse")],
        (["sql", "--", "-- best runs"], "QUERY '-- best runs' holds no statement, only comments: give one SQL statement"),
        (["sql", "/* none */ ;"], "QUERY '/* none */ ;' holds no statement, only comments"),
    ]
    for args, message in empty:
        proc = in_process(args, tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and not proc.stdout, (args, proc.returncode, proc.stderr)
        assert lines[0] == f"error: {message}" or lines[0].startswith(f"error: {message}"), (args, proc.stderr)
    assert list(tmp_path.iterdir()) == []  # no store, no warehouse, nothing written


def test_ui_refuses_a_busy_port(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        proc = run_cli("ui", "--port", str(s.getsockname()[1]), cwd=tmp_path)
    assert proc.returncode == 1 and "is in use" in proc.stderr
    (fresh := tmp_path / "fresh").mkdir()
    none = run_cli("ui", "--workers", "0", cwd=fresh)  # the option's range, before a store is opened
    assert none.returncode == 2 and none.stderr == ("error: Invalid value for '--workers' / '-w': Input should be greater "
                                                    "than or equal to 1\n"), none.stderr
    assert list(fresh.iterdir()) == []


def test_the_ui_asks_mlflow_for_the_workers_it_is_given(tmp_path: Path) -> None:
    """One by default (MLflow's own default is four; tests/test_demo.py reads the one process serving)."""
    from tracker.settings import UI_WORKERS
    from tracker.ui import ui_command

    def workers(cmd: list[str]) -> str:
        assert cmd.count("--workers") == 1, cmd
        return cmd[cmd.index("--workers") + 1]

    store = str(tmp_path / "runs")
    assert workers(ui_command(store, 5000)) == str(UI_WORKERS) and workers(ui_command(store, 5000, 3)) == "3"


def test_a_failed_runs_line_says_what_was_measured_as_a_measured_runs_does(capsys: pytest.CaptureFixture[str]) -> None:
    from tracker.cli.options import OutputFormat
    from tracker.cli.profile import _report

    _report({"status": "FAILED", "model": "squeezenet1_1", "batch_size": 128, "input_size": 64, "phase": "training",
             "mode": "cpu-t1", "dtype": "float32", "failure_reason": "oom", "run_id": "f" * 32}, OutputFormat.table)
    assert capsys.readouterr().out.startswith("squeezenet1_1 bs128 at 64 px training in mode cpu-t1: FAILED (oom); run ")


def test_a_loader_campaign_line_says_a_setting_failed_after_its_steps() -> None:
    """The loader campaign's table: a job that failed part-way shows its figures and how it ended."""
    from tracker.cli.campaign import _loader_line

    base = {"num_workers": 1, "prefetch_factor": 2, "batch_size": 8, "median_step_ms": 90.0, "data_wait_fraction": 0.125,
            "images_per_s": 43.25}
    assert _loader_line({**base, "status": "FINISHED", "reason": None, "steps": 6}) == \
        "workers 1 prefetch 2 batch 8: median step 90.0 ms; over its measured steps: data wait 12.5 %, 43.2 images/s"
    assert _loader_line({**base, "status": "FAILED", "reason": "timeout", "steps": 2}) == \
        ("workers 1 prefetch 2 batch 8: median step 90.0 ms; over its measured steps: data wait 12.5 %, 43.2 images/s, then FAILED "
         "(timeout) after 2 steps")
    assert _loader_line({"num_workers": 0, "prefetch_factor": 2, "batch_size": 64, "status": "FAILED", "reason": "oom",
                         "steps": 0}) == "workers 0 prefetch 2 batch 64: FAILED (oom)"
    assert _loader_line({"num_workers": 0, "prefetch_factor": 2, "batch_size": 4, "status": "skipped (measured)"}) == \
        "workers 0 prefetch 2 batch 4: skipped (measured)"


def test_boundary_summary_says_what_happened_in_words() -> None:
    """The table's last line of `profile boundary`: no "None" when nothing failed or nothing fitted."""
    from tracker.cli.profile import _boundary_line

    def line(ok: int | None, failed: int | None, reason: str | None) -> str:
        return _boundary_line({"largest_ok_batch_size": ok, "first_failed_batch_size": failed,
                               "failure_reason": reason}, max_batch=8)

    assert line(2, 4, "oom") == "largest batch size that fits: 2; first failure: 4 (oom)"
    assert line(8, None, None) == "every batch size tried fits, up to 8: nothing failed (the next would pass --max-batch 8)"
    assert line(None, 1, "oom") == "no batch size fits: the first, 1, failed (oom)"
    capped = _boundary_line({"largest_ok_batch_size": 4, "first_failed_batch_size": 8, "failure_reason": "oom",
                             "memory_limit_mb": 300.0, "memory_cap": "resident"}, max_batch=64)
    assert capped == "largest batch size that fits under a 300 MB resident memory cap: 4; first failure: 8 (oom)"
    # a library caller's start over its max_batch: nothing tried, and said so ("up to None" until 0.9.8)
    assert line(None, None, None) == "no batch size tried: none from the start up to --max-batch 8"


def test_a_layers_profile_whose_child_was_killed_in_its_layers_says_so_and_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child killed (SIGKILL from outside) while its layers were measured keeps the network's run, with
    tag tracker.child_note: until 0.9.8 `profile layers` printed the network's line alone, with status 0,
    the note in neither the table nor the JSON. Now it says the note, and a layers profile that measured
    none of its layers ends with status 3."""
    monkeypatch.setenv("TRACKER_FAULT", "layers:kill")
    args = ["--tracking-uri", "s", "profile", "layers", "squeezenet1_1", "--input-size", "32", "--time-cap", "0.1",
            "--precision", "0.5", "--threads", "1"]
    note = ("note: its child was killed while its layers were measured (child ended by signal 9): the network's "
            "measurement is kept, without them")
    table = in_process(args, tmp_path)
    assert table.returncode == 3, table
    lines = table.stdout.splitlines()
    # the network's line, its note (and any other of its notes: other processes taking the CPU), no layers
    assert lines[0].startswith("squeezenet1_1 bs1 at 32 px inference") and lines[1] == note, table
    assert all(line.startswith("note: ") for line in lines[1:]), table
    as_json = in_process([*args, "--format", "json"], tmp_path)
    assert as_json.returncode == 3, as_json
    assert json.loads(as_json.stdout)["child_note"] == note[len("note: "):] and note in as_json.stderr, as_json


def test_a_bad_zygote_or_memory_cap_setting_is_refused_before_anything_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRACKER_ZYGOTE=2, TRACKER_ZYGOTE_IDLE_S=abc and TRACKER_MEMORY_CAP=bogus (capped) were refused
    only after the store, a mode run and the experiment were made (prestart passed over the zygote's,
    plan the cap's; until 0.9.8): now each is one line before the store is opened."""
    cases = [
        ({"TRACKER_ZYGOTE": "2"}, ["profile", "network", "squeezenet1_1"], "TRACKER_ZYGOTE must be 0"),
        ({"TRACKER_ZYGOTE_IDLE_S": "abc"}, ["profile", "layers", "squeezenet1_1"],
         "TRACKER_ZYGOTE_IDLE_S must be a number of seconds of at least 0"),
        # digits of another script: float() read \u0663 as 3 until 0.9.14
        ({"TRACKER_ZYGOTE_IDLE_S": "\u0663"}, ["profile", "network", "squeezenet1_1"],
         "TRACKER_ZYGOTE_IDLE_S must be a number of seconds of at least 0"),
        ({"TRACKER_MEMORY_CAP": "bogus"}, ["profile", "boundary", "squeezenet1_1", "--memory-limit-mb", "100"],
         "TRACKER_MEMORY_CAP must be auto"),
        ({"TRACKER_MEMORY_CAP": "bogus"}, ["profile", "network", "squeezenet1_1", "--memory-limit-mb", "100"],
         "TRACKER_MEMORY_CAP must be auto"),
    ]
    for env, args, message in cases:
        with monkeypatch.context() as m:
            m.delenv("TRACKER_ZYGOTE", raising=False)
            for k, v in env.items():
                m.setenv(k, v)
            proc = in_process(["--tracking-uri", "fresh", *args], tmp_path)
        assert proc.returncode == 1 and proc.stdout == "", (env, proc)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), (env, proc.stderr)
        assert not (tmp_path / "fresh").exists(), env


def test_a_boundary_start_over_its_max_batch_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    """--start 8 --max-batch 4 tried nothing, after making the store and a mode run, and said "every
    batch size tried fits, up to None" (until 0.9.8): now a usage error, before anything is made."""
    from tracker.errors import ConfigError
    from tracker.profile.api import find_boundary
    from tracker.profile.stats import Stopping

    proc = in_process(["--tracking-uri", "fresh", "profile", "boundary", "squeezenet1_1", "--start", "8",
                       "--max-batch", "4"], tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr == ("error: Invalid value for '--start': 8 is over --max-batch 4: no batch size would be "
                           "tried\n"), proc
    assert not (tmp_path / "fresh").exists()
    logger = RunLogger(str(tmp_path / "lib"), experiment="boundary")
    with pytest.raises(ConfigError, match="the boundary's start, batch size 8, is over its largest, 4"):
        find_boundary(logger, "squeezenet1_1", Stopping(), start=8, max_batch=4)
    assert logger.measured(kind="mode") == set()  # no mode run logged


def test_many_page_faults_in_the_default_allocator_mode_point_to_retain(capsys: pytest.CaptureFixture[str]) -> None:
    """A measurement with glibc's defaults that faults in its activations every iteration says that
    `--allocator retain` exists; one that retains already, or faults little, says nothing of it."""
    from tracker.cli.options import OutputFormat
    from tracker.cli.profile import PAGE_FAULT_HINT, _report

    data = {"status": "FINISHED", "reused": False, "model": "m", "batch_size": 1, "phase": "inference", "mode": "cpu-t1",
            "latency_ms": 3.9, "ci_rel": 0.02, "samples": 60, "stop_reason": "precision", "run_id": "r",
            "peak_mem_mb": 560.0}
    for mode, faults, hint in (("cpu-t1", 1160.0, True), ("cpu-t1-retain", 1160.0, False),
                               ("cpu-t1", PAGE_FAULT_HINT - 1, False), ("cpu-t1", None, False)):
        _report({**data, "mode": mode, "page_faults_per_iter_count": faults}, OutputFormat.table)
        out = capsys.readouterr().out
        assert ("--allocator retain keeps them" in out) is hint, (mode, faults, out)
    # telemetry is said where measured: a GPU run's power, energy and utilisation
    _report({**data, "mode": "cuda0-sm1980-mem3201-pl700w-t16", "power_w": 120.2413, "energy_per_iter_j": 0.301114,
             "gpu_util_pct": 12.46, "cpu_util_pct": 7.45}, OutputFormat.table)  # resnet18 at batch 1 on an H200
    assert ", peak 560 MB, 120.2 W, 0.301 J per iteration, GPU 12 % busy, CPUs 7 % busy; run r" in capsys.readouterr().out
    _report({**data, "gpu_sm_clock_mhz": 1712.5, "gpu_sm_clock_min_mhz": 345.0}, OutputFormat.table)
    assert ", SM clock 1,712 MHz (lowest 345); run r" in capsys.readouterr().out


@pytest.mark.alone
def test_a_measurement_beside_other_work_says_how_much_cpu_it_took(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Another process burning a core while a network is measured on one thread: the run keeps the
    share of the machine's CPU other processes took (about that core's), and profile says so."""
    from tests.conftest import busy_elsewhere
    from tracker.cli.options import OutputFormat
    from tracker.cli.profile import _report
    from tracker.profile.records import OTHERS_CPU_NOTE_PCT

    with busy_elsewhere():
        result = runner.invoke(app, ["--tracking-uri", str(tmp_path / "s"), "profile", "network", "squeezenet1_1",
                                     "--threads", "1", "--time-cap", "0.5", "--precision", "0.1", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    run = MlflowClient(f"sqlite:///{tmp_path / 's' / 'mlflow.db'}").get_run(data["run_id"])
    assert data["cpu_util_others_pct"] == run.data.metrics["cpu_util_others_pct"] > 0.6 * 100 / (os.cpu_count() or 1)
    assert f"Other processes took {data['cpu_util_others_pct']:.0f} % of the machine's CPU" in run.data.tags[
        "mlflow.note.content"]  # the run's description, where the MLflow UI shows it
    _report(data, OutputFormat.table)
    assert f"note: other processes took {data['cpu_util_others_pct']:.0f} % of this machine's CPU" in capsys.readouterr().out
    # under OTHERS_CPU_NOTE_PCT with a core left idle: no note
    _report({**data, "cpu_util_others_pct": OTHERS_CPU_NOTE_PCT - 1, "cpu_util_pct": 60.0}, OutputFormat.table)
    assert "other processes took" not in capsys.readouterr().out
    # compared with a repeat, the runs say how busy the machine was beside each
    args = ["--tracking-uri", str(tmp_path / "s"), "profile", "network", "squeezenet1_1", "--threads", "1",
            "--time-cap", "0.5", "--precision", "0.1", "--again", "--format", "json"]
    repeat = json.loads(runner.invoke(app, args).stdout)
    compared = runner.invoke(app, ["--tracking-uri", str(tmp_path / "s"), "runs", "compare", data["run_id"],
                                   repeat["run_id"], "--format", "json"])
    busy = json.loads(compared.stdout)["busy_beside"]
    assert busy == {"a": data["cpu_util_others_pct"], "b": repeat.get("cpu_util_others_pct")}
    assert json.loads(compared.stdout)["host_bound"] == {}  # CPU runs: no host part to tell apart


def test_min_samples_buys_a_tail_latency(tmp_path: Path) -> None:
    """``--min-samples 200``: sampling goes on past the precision until 200 samples, so the run has
    its p99; the rule is a param of the run. At 64 px: 200 samples of 224 px took about 4 s."""
    store = tmp_path / "store"
    out = runner.invoke(app, ["--tracking-uri", str(store), "profile", "network", "squeezenet1_1", "--input-size", "64",
                              "--precision", "0.2", "--time-cap", "20", "--min-samples", "200", "--threads", "1",
                              "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["samples"] >= 200 and data["stop_reason"] == "precision", data
    assert data["latency_ms"] <= data["latency_p90_ms"] <= data["latency_p99_ms"]
    run = MlflowClient(f"sqlite:///{store / 'mlflow.db'}").get_run(data["run_id"])
    assert run.data.params["min_samples"] == "200" and run.data.metrics["latency_p99_ms"] == data["latency_p99_ms"]


def test_a_network_runs_in_the_number_format_asked_for(tmp_path: Path) -> None:
    """--dtype (since 0.8.5): the network's weights and inputs cast to bfloat16, another
    configuration than float32 (its own run, param precision, named with it; the line says it); a
    campaign's [measure].dtypes is a dimension of its product, listed by a dry run; a dtype it does
    not know is one line."""
    store = tmp_path / "s"
    base = ["--tracking-uri", str(store), "profile", "network", "squeezenet1_1", "-b", "2", "--input-size", "32",
            "--time-cap", "0.3", "--precision", "0.2"]
    half = json.loads(runner.invoke(app, [*base, "--dtype", "bfloat16", "--format", "json"]).stdout)
    full = json.loads(runner.invoke(app, [*base, "--format", "json"]).stdout)
    assert (half["status"], half["dtype"], full["dtype"]) == ("FINISHED", "bfloat16", "float32")
    assert half["run_id"] != full["run_id"] and not full["reused"]
    run = MlflowClient(f"sqlite:///{store}/mlflow.db").get_run(half["run_id"])
    assert run.data.params["precision"] == "bfloat16"
    assert run.data.tags["mlflow.runName"] == "squeezenet1_1 · bs2 · 32px · inference · cpu · bfloat16"
    line = runner.invoke(app, [*base, "--dtype", "bfloat16"]).stdout
    assert line.startswith("squeezenet1_1 bs2 at 32 px in bfloat16 inference in mode ") and "reused" in line
    # the views keep the two apart: each number format's batch sizes are a chain of their own
    assert runner.invoke(app, ["--tracking-uri", str(store), "warehouse", "load"]).exit_code == 0
    rows = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "sql", "SELECT precision, "
                                          "latency_vs_smallest_batch FROM batch_scaling ORDER BY precision",
                                          "--format", "json"]).stdout)
    assert rows == [{"precision": "bfloat16", "latency_vs_smallest_batch": 1.0},
                    {"precision": "float32", "latency_vs_smallest_batch": 1.0}]
    bad = runner.invoke(app, [*base, "--dtype", "int4"])
    assert bad.exit_code == 2 and "'--dtype'" in bad.output and "'int4' is not one of" in bad.output
    campaign = tmp_path / "c.toml"
    campaign.write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\nbatch_sizes = [1, 2]\n'
                        'dtypes = ["float32", "bfloat16", "float32"]\n')
    planned = json.loads(runner.invoke(app, ["--tracking-uri", str(tmp_path / "c"), "campaign", "run", str(campaign),
                                             "--dry-run", "--format", "json"]).stdout)
    assert [(c["batch_size"], c["dtype"]) for c in planned["configurations"]] == [
        (1, "float32"), (2, "float32"), (1, "bfloat16"), (2, "bfloat16")]
    campaign.write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\ndtypes = ["float32", "int4"]\n')
    out = runner.invoke(app, ["--tracking-uri", str(tmp_path / "c"), "campaign", "run", str(campaign)])
    assert out.exit_code == 1 and str(out.exception) == (
        f"{campaign}: [measure].dtypes: unknown dtype 'int4' (float32, float16, bfloat16, int8)")


def test_a_network_quantized_to_int8_is_a_number_format_of_its_own(tmp_path: Path) -> None:
    """--dtype int8 (since 0.8.6): the network quantized after training as torch.ao's FX graph mode
    does with the x86 backend's defaults, calibrated on the measurement's input, measured in CPU
    inference as a configuration of its own (its layers the quantized modules and the quantize and
    dequantize calls between them); training and a network torch.fx cannot trace say why in a line;
    a campaign measures int8 in CPU inference only."""
    import torch

    from tracker.profile.network import NetworkSpec, capture_layers, in_format

    store = tmp_path / "s"
    base = ["--tracking-uri", str(store), "profile", "network", "squeezenet1_1", "-b", "2", "--input-size", "32",
            "--time-cap", "0.3", "--precision", "0.2", "--dtype", "int8"]
    q = json.loads(runner.invoke(app, [*base, "--format", "json"]).stdout)
    assert (q["status"], q["dtype"]) == ("FINISHED", "int8") and q["latency_ms"] > 0
    run = MlflowClient(f"sqlite:///{store}/mlflow.db").get_run(q["run_id"])
    assert run.data.tags["mlflow.runName"] == "squeezenet1_1 · bs2 · 32px · inference · cpu · int8"
    # its weights are packed objects, not tensors: its tensors' peak is absent, and the run says why
    assert "tensor_peak_mb" not in q and "tensor_peak_mb" not in run.data.metrics
    assert run.data.tags["tracker.tensor_peak_error"].startswith("not counted in int8: a quantized network's weights")
    trained = runner.invoke(app, [*base, "--phase", "training"])
    assert trained.exit_code == 1 and str(trained.exception) == (
        "dtype int8: a network quantized to int8 (torch.ao's x86 backend) runs inference on a CPU, not training")
    fresh = tmp_path / "fresh"  # refused before a store is made, as a typo is
    refused = runner.invoke(app, ["--tracking-uri", str(fresh), *base[2:], "--phase", "training"])
    assert refused.exit_code == 1 and str(refused.exception) == str(trained.exception) and not fresh.exists()

    # quantized, the network computes what it did in float32, to int8's resolution
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3)).eval()
    spec = NetworkSpec("seq", batch_size=2, input_size=16, precision="int8")
    quantized = in_format(model, spec)
    assert in_format(quantized, spec) is quantized  # quantized once: the child's layers reuse it
    # its layers: the quantized modules, the first fused with its ReLU, and the quantize and
    # dequantize calls between them (function layers)
    layers = [(c.kind, c.op_type) for c in capture_layers(quantized, spec)]
    assert layers == [("function", "quantize_per_tensor"), ("module", "ConvReLU2d"), ("module", "Conv2d"),
                      ("function", "dequantize")], layers
    from tracker.profile.network import example_input

    x = example_input(spec)
    with torch.inference_mode():
        want, got = model(x), quantized(x)
    assert got.dtype == torch.float32 and (got - want).abs().max() < 0.05 * want.abs().max()

    own = tmp_path / "branchy.py"
    own.write_text("import torch\nfrom torch import nn\n\nINPUT_SIZE = 16\n\n\nclass Branchy(nn.Module):\n"
                   "    def __init__(self) -> None:\n        super().__init__()\n        self.conv = nn.Conv2d(3, 4, 3)\n\n"
                   "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
                   "        y = self.conv(x)\n        return y if y.sum() > 0 else -y\n")
    failed = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "profile", "network", f"{own}:Branchy",
                                            "--dtype", "int8", "--time-cap", "0.3", "--format", "json"]).stdout)
    assert failed["status"] == "FAILED" and failed["failure_message"].startswith(
        "MeasurementError: branchy.Branchy cannot be quantized to int8 by torch.ao's FX graph mode (TraceError: ")

    campaign = tmp_path / "c.toml"
    campaign.write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\nbatch_sizes = [1]\n'
                        'phases = ["inference", "training"]\ndtypes = ["float32", "int8"]\n')
    planned = json.loads(runner.invoke(app, ["--tracking-uri", str(tmp_path / "c"), "campaign", "run", str(campaign),
                                             "--dry-run", "--format", "json"]).stdout)
    assert sorted((c["phase"], c["dtype"]) for c in planned["configurations"]) == [
        ("inference", "float32"), ("inference", "int8"), ("training", "float32")]


def test_runs_list_shows_a_failures_message_as_it_is_and_reads_past_mlflows_page(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed run's message with brackets in it was read as Rich markup: ``[/]`` a MarkupError's
    traceback, ``[enforce fail at ...]`` gone as a tag (until 0.9.6). And ``--limit`` past MLflow's
    50,000 a search is read page by page (50,000 itself was refused as "the search")."""
    import tracker.log.inspect as inspect
    from tests.conftest import network_record

    store = tmp_path / "store"
    with RunLogger(str(store), "cli") as logger:
        records = [network_record("resnet18", bs) for bs in (1, 2, 3)]
        records[0].fail("crash", "Traceback ...\nRuntimeError: [/] boom [bold]x [enforce fail at alloc_cpu.cpp:127]")
        logger.log(records)
    table = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--kind", "network"])
    assert table.exit_code == 0, table.output
    assert "RuntimeError: [/] boom [bold]x [enforce fail at alloc_cpu.cpp:127]" in table.stdout
    monkeypatch.setattr(inspect, "SEARCH_MOST", 2)  # pages of two runs
    for limit, shown, more in ((2, 2, True), (3, 3, False), (50_000, 3, False)):
        listed = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--kind", "network",
                                     "--limit", str(limit), "--format", "json"])
        assert listed.exit_code == 0, listed.output
        assert len(json.loads(listed.stdout)) == shown and ("has more" in listed.stderr) == more


def test_other_work_is_said_under_its_share_where_no_core_was_left_idle(capsys: pytest.CaptureFixture[str]) -> None:
    """A measurement whose threads filled every core lost to one core of other work (an H200's host,
    16 cores: squeezenet1_1 on 16 threads took 626 ms, ±69 %, while others took 6.4 % of the machine),
    unsaid under OTHERS_CPU_NOTE_PCT until 0.9.21. Where the machine's CPU was all busy
    (SATURATED_CPU_PCT), SATURATED_OTHERS_NOTE_PCT of others is said, as such; with a core idle it is not."""
    from tracker.cli.options import OutputFormat
    from tracker.cli.profile import _report
    from tracker.profile.records import (OTHERS_CPU_NOTE_PCT, SATURATED_CPU_PCT, SATURATED_OTHERS_NOTE_PCT,
                                         beside_other_work, other_work_said)

    data = {"status": "FINISHED", "mode": "cpu-t16-retain", "model": "squeezenet1_1", "batch_size": 1, "latency_ms": 626.0,
            "cpu_util_others_pct": 6.4, "cpu_util_pct": 100.0}
    _report(data, OutputFormat.json)
    assert capsys.readouterr().err == ("note: other processes took 6 % of this machine's CPU (no core left idle) while it "
                                       "was measured: they compete for its cores, caches and memory, so this may be "
                                       "slower than the machine alone would run it (tracker device show; the run keeps "
                                       "cpu_util_others_pct)\n")
    at = SATURATED_OTHERS_NOTE_PCT
    assert beside_other_work({"cpu_util_others_pct": at, "cpu_util_pct": SATURATED_CPU_PCT})
    assert not beside_other_work({"cpu_util_others_pct": at - 0.1, "cpu_util_pct": 100.0})  # too little to say
    assert not beside_other_work({"cpu_util_others_pct": at, "cpu_util_pct": SATURATED_CPU_PCT - 0.1})  # a core idle
    assert not beside_other_work({"cpu_util_others_pct": OTHERS_CPU_NOTE_PCT - 0.1})  # no machine figure: not seen busy
    # from OTHERS_CPU_NOTE_PCT others are said whatever the machine's use, and said without the idle clause
    assert beside_other_work({"cpu_util_others_pct": OTHERS_CPU_NOTE_PCT, "cpu_util_pct": 20.0})
    assert other_work_said({"cpu_util_others_pct": 12.0, "cpu_util_pct": 100.0}) == "12 % of the machine's CPU"


def test_a_measurements_notes_go_beside_its_json_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """``--format json`` printed the JSON alone: a measurement's notes (many page faults, other work
    beside it) were unsaid until 0.9.6; they go to stderr, the JSON alone on stdout."""
    from tracker.cli.options import OutputFormat
    from tracker.cli.profile import _report

    data = {"status": "FINISHED", "mode": "cpu-t1", "page_faults_per_iter_count": 345.0, "cpu_util_others_pct": 50.1,
            "model": "tiny", "batch_size": 8, "latency_ms": 1.0}
    _report(data, OutputFormat.json)
    out, err = capsys.readouterr()
    assert json.loads(out) == data
    assert [line.split(":")[0] for line in err.splitlines()] == ["note", "note"]
    assert "345 page faults per iteration" in err and "other processes took 50 %" in err
    _report({**data, "mode": "cpu-t1-retain", "cpu_util_others_pct": 2.0}, OutputFormat.json)
    assert capsys.readouterr().err == ""  # nothing to say: nothing said


def test_a_misplaced_option_of_tracker_is_said_with_the_command_line_to_give(tmp_path: Path) -> None:
    """The line suggested is the command given, with tracker's option moved before the command: the
    command's own options keep their names (dropped, their values kept, until 0.9.8)."""
    for args, line in (
            (["profile", "network", "shufflenet_v2_x0_5", "-b", "1", "--threads", "1", "--allocator", "retain",
              "--experiment", "demo"],
             "--experiment is an option of tracker itself, not of profile network: give it before the command "
             "(tracker --experiment demo profile network shufflenet_v2_x0_5 -b 1 --threads 1 --allocator retain)"),
            (["--tracking-uri", "r", "sql", "SELECT 1 AS a", "-w", "w.duckdb", "--experiment=x y"],
             "--experiment is an option of tracker itself, not of sql: give it before the command "
             "(tracker --tracking-uri r '--experiment=x y' sql 'SELECT 1 AS a' -w w.duckdb)"),
            (["runs", "list", "-e"],
             "-e is an option of tracker itself, not of runs list: give it before the command (tracker -e VALUE runs list)")):
        out = in_process(args, tmp_path)
        assert out.returncode == 2 and out.stderr == f"error: {line}\n", out.stderr


@pytest.mark.parametrize("args", [["zoo", "list"], ["zoo", "list", "--format", "json"], ["--help"]])
def test_a_closed_pipe_ends_a_command_quietly_with_status_141(tmp_path: Path, args: list[str]) -> None:
    """`tracker runs show RUN | head -1`: the reader gone before the command wrote, it exited 1 without a
    word (rich's table, click's echo) or with Python's "Exception ignored ... BrokenPipeError" (the
    buffer flushed at exit), until 0.9.8; now 141, as the shell says of any program a closed pipe ends."""
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the command writes
    proc = subprocess.run([*TRACKER, *args], cwd=tmp_path, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert (proc.returncode, proc.stderr) == (141, ""), (args, proc.returncode, proc.stderr)


def _ctrl_c(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(("args", "where", "line"), [
    (["store", "info"], "tracker.cli.options.State.logger", "nothing is written by this command"),
    (["runs", "list"], "tracker.cli.options.State.logger", "nothing is written by this command"),
    (["runs", "show", "abcdef"], "tracker.cli.options.State.logger", "nothing is written by this command"),
    (["runs", "compare", "abcdef", "fedcba"], "tracker.cli.options.State.logger", "nothing is written by this command"),
    (["fingerprint", "list"], "tracker.cli.options.State.location", "nothing is written by this command"),
    (["device", "show"], "tracker.profile.inventory.device_report", "nothing is written by this command"),
    (["views"], "tracker.warehouse.query.list_views", "nothing is written by this command"),
    (["sql", "SELECT 1"], "tracker.settings.warehouse_path", "the warehouse, opened read-only, is as it was"),
])
def test_a_command_that_writes_nothing_says_so_when_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 args: list[str], where: str, line: str) -> None:
    """main's "interrupted: what was logged before is kept", of commands that log nothing, until 0.9.8."""
    monkeypatch.setattr(where, _ctrl_c)
    result = CliRunner().invoke(app, ["--tracking-uri", str(tmp_path / "s"), *args])
    assert (result.exit_code, result.stderr) == (130, f"interrupted: {line}\n"), (args, result.exit_code, result.output)


def test_a_query_a_ctrl_c_stopped_is_said_as_the_commands_interrupt(capsys: pytest.CaptureFixture[str]) -> None:
    """DuckDB turns a Ctrl-C in a query into an error of its own, not a KeyboardInterrupt: in a command
    that writes nothing (predict's in-memory warehouse) it was said as main's "what was logged before
    is kept" (until 0.9.8). Here DuckDB's own interrupt stops a query of minutes."""
    import threading

    import duckdb
    import typer

    from tracker.cli.options import READ_ONLY_LINE, logging_nothing

    con = duckdb.connect()
    timer = threading.Timer(1.0, con.interrupt)
    timer.start()
    try:
        with pytest.raises(typer.Exit) as stopped, logging_nothing(READ_ONLY_LINE.removeprefix("interrupted: ")):
            con.execute("SELECT sum(hash(range)) FROM range(50000000000)").fetchall()
    finally:
        timer.cancel()
        con.close()
    assert stopped.value.exit_code == 130 and capsys.readouterr().err == f"{READ_ONLY_LINE}\n"


def test_runs_list_names_the_option_mlflow_cannot_read(tmp_path: Path) -> None:
    """--where and --order-by are each read by MLflow's parser before the search: an ordering by a
    bare metric name was said as --where's fault where both were given (until 0.9.8)."""
    from tests.conftest import network_record

    store = tmp_path / "store"
    with RunLogger(str(store), "cli") as logger:
        logger.log([network_record("squeezenet1_1", 1)])
    base = ["--tracking-uri", str(store), "-e", "cli", "runs", "list"]
    for args, option, said in (
        (["--where", "params.model = 'squeezenet1_1'", "--order-by", "latency_ms ASC"], "--order-by",
         "Invalid attribute key 'latency_ms'"),
        (["--where", "params.model = ", "--order-by", "metrics.latency_ms ASC"], "--where", "Invalid clause(s)"),
        (["--order-by", "latency_ms ASC"], "--order-by", "Invalid attribute key 'latency_ms'"),
    ):
        out = runner.invoke(app, [*base, *args])
        assert out.exit_code == 1 and str(out.exception).startswith(f"{option}: MLflow cannot search by it: "), out.exception
        assert said in str(out.exception)
    good = runner.invoke(app, [*base, "--where", "params.model = 'squeezenet1_1'", "--order-by", "metrics.latency_ms ASC",
                               "--format", "json"])
    assert good.exit_code == 0 and len(json.loads(good.stdout)) == 1, good.output


def test_runs_list_keeps_a_long_run_name_on_one_row_in_a_pipe(tmp_path: Path) -> None:
    """In a pipe or a file the table is as wide as its names need: a name past 120 columns was
    wrapped over two rows (until 0.9.8)."""
    from tests.conftest import network_record

    store = tmp_path / "store"
    long = network_record("resnet18", 1)
    long.name = " · ".join(f"part{i} of a long run name" for i in range(8))
    with RunLogger(str(store), "cli") as logger:
        logger.log([long, network_record("resnet18", 2)])
    table = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list"])
    assert table.exit_code == 0, table.output
    [row] = [line for line in table.stdout.splitlines() if long.run_id[:12] in line]
    assert long.name in row and " FINISHED " in row and "12.500" in row, table.stdout


def _strict_json(text: str):  # noqa: ANN202
    """``text`` read as strict JSON readers read it: NaN and Infinity are no JSON."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in the JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_nan_logged_to_a_run_is_null_in_the_json_of_runs_list_and_show(tmp_path: Path) -> None:
    """A run of the experiment logged by MLflow itself (a user's training script) may carry a NaN
    metric (a loss that diverged): runs list and runs show wrote it as NaN, which strict JSON readers
    refuse (until 0.9.12); it is null, absent, and the other metrics as they were."""
    from tests.conftest import network_record

    store = tmp_path / "store"
    with RunLogger(str(store), "cli") as logger:
        logger.log([network_record("resnet18", 1)])
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    run_id = client.create_run(client.get_experiment_by_name("cli").experiment_id, run_name="diverged").info.run_id
    client.log_metric(run_id, "loss", float("nan"))
    client.log_metric(run_id, "accuracy", 0.25)
    client.set_terminated(run_id)
    listed = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "list", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    [mine] = [r for r in _strict_json(listed.stdout) if r["run_id"] == run_id]
    assert mine["metrics"] == {"loss": None, "accuracy": 0.25}
    shown = runner.invoke(app, ["--tracking-uri", str(store), "-e", "cli", "runs", "show", run_id, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert _strict_json(shown.stdout)["metrics"] == {"loss": None, "accuracy": 0.25}


def test_an_infinity_logged_to_a_run_is_shown_infinite_by_runs_list_show_and_compare(tmp_path: Path) -> None:
    """MLflow's SQL store keeps an infinite metric (a user's script's ``log_metric("x", float("inf"))``)
    as the largest float, 1.797e308: runs list printed its 309 digits, and runs list, show and compare
    carried it as that number, in JSON too (until 0.9.13); it is infinite, null in JSON."""
    from tests.conftest import network_record

    store = tmp_path / "store"
    a, b = network_record("resnet18", 1), network_record("resnet18", 2)
    with RunLogger(str(store), "cli") as logger:
        logger.log([a, b])
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    run_id = client.create_run(client.get_experiment_by_name("cli").experiment_id, run_name="blown").info.run_id
    client.log_metric(run_id, "latency_ms", float("inf"))
    client.log_metric(run_id, "loss", float("-inf"))
    client.log_metric(run_id, "accuracy", 0.25)
    client.set_terminated(run_id)
    client.log_metric(b.run_id, "peak_mem_mb", float("inf"))
    base = ["--tracking-uri", str(store), "-e", "cli", "runs"]
    table = runner.invoke(app, [*base, "list"])
    assert table.exit_code == 0, table.output
    [row] = [line for line in table.stdout.splitlines() if run_id[:12] in line]
    assert " inf " in row and "1797" not in table.stdout, table.stdout
    listed = runner.invoke(app, [*base, "list", "--format", "json"])
    [mine] = [r for r in _strict_json(listed.stdout) if r["run_id"] == run_id]
    assert mine["metrics"] == {"latency_ms": None, "loss": None, "accuracy": 0.25}
    shown = runner.invoke(app, [*base, "show", run_id])
    assert shown.exit_code == 0 and re.search(r"loss\s+-inf\n", shown.stdout), shown.output
    assert _strict_json(runner.invoke(app, [*base, "show", run_id, "--format", "json"]).stdout)["metrics"] == {
        "latency_ms": None, "loss": None, "accuracy": 0.25}
    compared = runner.invoke(app, [*base, "compare", a.run_id, b.run_id])
    assert compared.exit_code == 0 and re.search(r"peak_mem_mb\s+absent\s+inf\s*\n", compared.stdout), compared.output
    rows = _strict_json(runner.invoke(app, [*base, "compare", a.run_id, b.run_id, "--format", "json"]).stdout)["metrics"]
    assert {"metric": "peak_mem_mb", "a": None, "b": None} in rows
