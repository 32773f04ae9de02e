"""The HTTP writer against a real MLflow tracking server on loopback."""

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from tracker.errors import StoreError
from tracker.log.logger import RunLogger
from tracker.log.record import RunRecord
from tracker.log.reference import log_with_client

from tests.conftest import ENV, free_port, layer_record, network_record, sigint_default
from tests.test_sql_store import comparable, finds_the_newest_run_that_logged_a_metric


def test_runs_over_http_match_client_runs_and_nest(mlflow_server: str) -> None:
    logger = RunLogger(mlflow_server, experiment="http-tests", environment=ENV)
    client = MlflowClient(mlflow_server)
    nets = [network_record(model=f"m{i}") for i in range(3)]
    layers = [layer_record(n, i, model=n.params["model"]) for n in nets for i in range(10)]
    ids = logger.log([*layers, *nets])  # children first on purpose: the writer orders them
    assert len(set(ids)) == 33
    assert [r.run_id for r in [*layers, *nets]] == ids  # the server's ids are set on the records
    for net in nets:
        children = client.search_runs(
            [logger.experiment.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{net.run_id}'"
        )
        assert len(children) == 10
        assert {c.data.params["model"] for c in children} == {net.params["model"]}

    ref_id = log_with_client(client, logger.experiment.experiment_id, logger.finalize([network_record(model="m0")])[0])
    a, b = comparable(client.get_run(nets[0].run_id)), comparable(client.get_run(ref_id))
    assert a == b
    assert logger.measured(kind="network") == {n.config_key for n in nets}
    assert logger.find(nets[1].config_key).run_id == nets[1].run_id


def test_find_over_http_reads_past_a_newer_run_without_the_metric_asked_for(mlflow_server: str) -> None:
    finds_the_newest_run_that_logged_a_metric(RunLogger(mlflow_server, experiment="http-find", environment=ENV))


def test_history_and_artifacts_over_http(mlflow_server: str, tmp_path: Path) -> None:
    logger = RunLogger(mlflow_server, experiment="http-artifacts", environment=ENV)
    record = RunRecord(
        kind="training",
        name="job",
        params=dict(model="m", model_hash="h", batch_size=2, phase="training", device="cpu"),
        metrics={"latency_ms": 7.0},
        history={"step_time_ms": [(s, float(s)) for s in range(1500)]},  # more than one log-batch
        artifacts={"notes.txt": "hello"},
    )
    (run_id,) = logger.log([record])
    client = MlflowClient(mlflow_server)
    assert len(client.get_metric_history(run_id, "step_time_ms")) == 1500
    assert client.get_run(run_id).info.status == "FINISHED"
    path = client.download_artifacts(run_id, "notes.txt", str(tmp_path))
    assert Path(path).read_text() == "hello"


def test_an_unreachable_server_is_one_clear_error_where_nothing_can_be_spooled() -> None:
    logger = RunLogger(f"http://127.0.0.1:{free_port()}", environment=ENV)
    assert logger.offline and "connection refused" in logger.offline  # logging would spool (test_shared)
    with pytest.raises(StoreError, match="cannot reach tracking server .*connection refused"):
        logger.experiment


def test_measured_keys_over_http_cover_failed_runs_when_asked(mlflow_server: str) -> None:
    logger = RunLogger(mlflow_server, experiment="http-status", environment=ENV)
    done, failed, traced = network_record(model="a"), network_record(model="b"), network_record(model="c")
    failed.metrics.clear()
    failed.fail("oom")
    traced.tags["tracker.trace"] = "trace/ops.json"
    logger.log([done, failed, traced])
    assert logger.measured() == {done.config_key, traced.config_key}
    assert logger.measured(statuses=("FINISHED", "FAILED")) == {done.config_key, failed.config_key, traced.config_key}
    assert logger.measured(having="tracker.trace") == {traced.config_key}  # runs carrying a tag too
    # run ids by prefix, as runs compare finds them (the server's search scanned for them)
    for r in (done, failed, traced):
        assert logger.store.runs_with_prefix(logger.experiment, r.run_id[:6], ("network",)) == [(r.run_id, "network")]
    assert logger.store.runs_with_prefix(logger.experiment, done.run_id[:6], ("layer",)) == []
    # what runs list --status and runs show read, through the server as from a file
    from tracker.log.inspect import list_runs, show_run

    assert [(r["run_id"], r["failure_reason"]) for r in list_runs(logger, status="failed")] == [(failed.run_id, "oom")]
    shown = show_run(logger, failed.run_id[:8])
    assert (shown["run_id"], shown["status"], shown["failure_reason"], shown["kind"]) == (failed.run_id, "FAILED", "oom", "network")
    assert shown["params"] == {k: str(v) for k, v in failed.params.items()}
    # a run tracker did not make (a user's own MLflow script's) is found by a prefix too, as its full id is
    client = MlflowClient(mlflow_server)
    own = client.create_run(logger.experiment.experiment_id, run_name="own").info.run_id
    client.set_terminated(own)
    assert logger.store.runs_with_prefix(logger.experiment, own[:6], None) == [(own, "")]
    mine = show_run(logger, own[:8])
    assert (mine["run_id"], mine["kind"]) == (own, "")


def test_a_missing_experiment_over_http_is_nothing_logged(mlflow_server: str) -> None:
    """A command that only reads (a dry run, say) is told the experiment was never written."""
    from tracker.errors import NothingLoggedError

    with pytest.raises(NothingLoggedError, match="no experiment named 'never-made' on http") as info:
        RunLogger(mlflow_server, experiment="never-made", environment=ENV, create=False)  # not taken for "offline"
    # and the server's experiments are named, as an embedded store names its own (since 0.9.2)
    assert "(experiments: " in str(info.value) and "Default" in str(info.value), info.value


KILLED_MID_WRITE = r'''
import os, signal, sys
from tests.conftest import ENV, layer_record, network_record
from tracker.log import rest_store
from tracker.log.logger import RunLogger

real = rest_store.RestStore.call
finished = []

def call(self, method, endpoint, body=None, query=None, **kw):
    if endpoint == "runs/update":
        finished.append(body["run_id"])
        if len(finished) == 2:  # the network run and one layer run written; the others not, or half
            os.kill(os.getpid(), signal.SIGKILL)
    return real(self, method, endpoint, body, query, **kw)

rest_store.RestStore.call = call
net = network_record("resnet18", 1)
RunLogger(sys.argv[1], experiment=sys.argv[2], environment=ENV).log([net, *(layer_record(net, i) for i in range(3))])
'''


def test_a_write_killed_midway_waits_in_the_outbox_and_sync_finishes_it(
    mlflow_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process killed (SIGKILL) while it writes a network run and its layers to a server left
    runs RUNNING there and lost the rest, until 0.9.0: its batch is journalled in the outbox first
    now; `tracker sync` deletes the unfinished runs and sends the rest under the network run."""
    from typer.testing import CliRunner

    from tracker.cli.app import app
    from tracker.log.outbox import pending

    root = Path(__file__).resolve().parents[1]
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, mlflow_server, "cut-short"], cwd=root,
                            env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name("cut-short")
    before = client.search_runs([exp.experiment_id])
    assert "RUNNING" in {r.info.status for r in before} and len(before) < 5
    [journal] = pending()
    assert journal.writer and not journal.being_written() and len(journal.records) == 4

    # A command that measures on that server says the runs wait, and counts them as measured.
    logger = RunLogger(mlflow_server, experiment="cut-short", environment=ENV)
    assert "4 runs for this store wait in the outbox" in capsys.readouterr().err
    assert network_record("resnet18", 1).config_key in logger.measured("network")

    done = CliRunner().invoke(app, ["--tracking-uri", mlflow_server, "sync"])
    assert done.exit_code == 0, done.output
    assert "unfinished run" in done.output and pending() == []
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}
    [parent] = [r for r in runs if r.data.tags["tracker.kind"] == "network"]
    layers = [r for r in runs if r.data.tags["tracker.kind"] == "layer"]
    assert sorted(int(r.data.params["layer_index"]) for r in layers) == [0, 1, 2]
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in layers)
    assert "outbox is empty" in CliRunner().invoke(app, ["--tracking-uri", mlflow_server, "sync"]).output


@pytest.mark.parametrize("at", ["last", "first"])
def test_a_ctrl_c_as_the_server_takes_the_runs_says_where_they_are(
    mlflow_server: str, monkeypatch: pytest.MonkeyPatch, at: str
) -> None:
    """A Ctrl-C that landed while the server took a batch left the batch in the outbox, though the
    pool finished the runs it had begun: a single run was on the server whole, said to wait in the
    outbox, and `sync` found it "already on the server", until 0.9.8. Now a batch the server took
    whole is not in the outbox and the interrupt says so (``logged``: the server's ids); one cut
    short (the layers not begun) waits there, as before."""
    import threading

    from tracker.log import rest_store
    from tracker.log.outbox import pending

    real = rest_store.RestStore.call
    updated: list[str] = []
    net = network_record("resnet18", 1 if at == "last" else 2)
    records = [net, *(layer_record(net, i) for i in range(2))]
    stop_at = 3 if at == "last" else 1  # the last layer's update, or the network run's (its layers then never begun)

    def call(self: rest_store.RestStore, method: str, endpoint: str, body: dict | None = None,
             query: dict | None = None, **kw: Any) -> dict:
        if endpoint == "runs/update":
            updated.append(body["run_id"])  # type: ignore[index]
            if len(updated) == stop_at:  # a Ctrl-C, while this thread goes on writing the run
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]
        return real(self, method, endpoint, body, query, **kw)

    monkeypatch.setattr(rest_store.RestStore, "call", call)
    logger = RunLogger(mlflow_server, experiment=f"ctrl-c-{at}", environment=ENV)
    # Ctrl-C as Python takes it from a terminal: a suite started in the background (`make test &`, as CI
    # starts it) and its xdist workers inherit SIGINT ignored
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            logger.log(records)
    finally:
        signal.signal(signal.SIGINT, before)
    client = MlflowClient(mlflow_server)
    runs = client.search_runs([logger.experiment.experiment_id])
    if at == "last":
        assert pending() == []  # nothing waits in the outbox: the server has the batch whole
        assert sorted(info.value.logged) == sorted(r.info.run_id for r in runs) == sorted(updated)  # type: ignore[attr-defined]
        assert len(runs) == 3 and {r.info.status for r in runs} == {"FINISHED"}
        assert [r.run_id for r in records] == info.value.logged  # type: ignore[attr-defined]  # the server's ids
    else:
        assert not hasattr(info.value, "logged") and len(runs) == 1 and runs[0].info.status == "FINISHED"
        [waiting] = pending()
        assert len(waiting.records) == 3 and not waiting.being_written()


CTRL_C_AS_WRITTEN = r'''
import signal, sys, threading
from tracker.log import rest_store

real = rest_store.RestStore.call
network = []

def call(self, method, endpoint, body=None, query=None, **kw):
    if endpoint == "runs/update" and body["run_id"] in network:  # a Ctrl-C while the server takes the network
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # run, which this thread goes on writing
    answer = real(self, method, endpoint, body, query, **kw)
    if endpoint == "runs/create" and {"key": "tracker.kind", "value": "network"} in body["tags"]:
        network.append(answer["run"]["info"]["run_id"])
    return answer

rest_store.RestStore.call = call
sys.argv = ["tracker", *sys.argv[1:]]
from tracker.cli import main
main()
'''


def test_a_profile_interrupted_as_its_run_is_written_prints_its_figures(mlflow_server: str, tmp_path: Path) -> None:
    """profile network interrupted as the server took its run, which it took whole: "runs wait in the
    outbox" and no figures until 0.9.8 (and `sync` then found the run already there). Now its figures,
    and a line that says the server has the run."""
    root = Path(__file__).resolve().parents[1]
    said = subprocess.run([sys.executable, "-c", CTRL_C_AS_WRITTEN, "--tracking-uri", mlflow_server, "-e", "ctrl-c-cli",
                           "profile", "network", "squeezenet1_1", "--input-size", "32", "--time-cap", "0.3",
                           "--format", "json"],
                          cwd=root, capture_output=True, text=True, timeout=300, preexec_fn=sigint_default,
                          env={**os.environ, "PYTHONPATH": str(root), "TRACKER_RUNS_DIR": str(tmp_path / "runs")})
    assert said.returncode == 130, said.stderr
    assert said.stderr.strip().splitlines()[-1] == ("interrupted as its run was written: the tracking server has it "
                                                    "whole (none waits in the outbox)"), said.stderr
    import json

    shown = json.loads(said.stdout)
    run = MlflowClient(mlflow_server).get_run(shown["run_id"])  # the server's id, and the figures it has
    assert run.info.status == "FINISHED" and shown["latency_ms"] == run.data.metrics["latency_ms"] > 0
    assert not (tmp_path / "runs" / "outbox").exists() or not list((tmp_path / "runs" / "outbox").glob("*.json"))


@contextlib.contextmanager
def serving(handler: type) -> Iterator[str]:
    """A web server of ``handler`` (an ``http.server`` request handler) on a free loopback port, in a
    thread: its URI, then stopped and its port closed."""
    import threading
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Quiet(BaseHTTPRequestHandler):
    """A request handler that logs nothing to stderr."""

    def log_message(self, *args: object) -> None:
        pass


def test_a_server_is_asked_for_its_health_once_a_command() -> None:
    """A command that checks the server before it opens the store (location.require(), then the
    store's own check) asked /health twice, back to back, until 0.9.2; an answer stands
    HEALTH_FRESH_S, and a server that stops answering is said again after it."""
    import time

    from tracker.log import rest_store
    from tracker.settings import resolve_location

    asked: list[str] = []

    class Health(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"OK")

    with serving(Health) as uri:
        resolve_location(uri).require()
        rest_store.check_reachable(uri)
        assert asked == ["/health"]
    time.sleep(rest_store.HEALTH_FRESH_S)
    with pytest.raises(StoreError, match="cannot reach tracking server"):
        rest_store.check_reachable(uri)


def test_a_server_that_is_not_mlflow_is_one_line_and_nothing_is_spooled(tmp_path: Path) -> None:
    """A web server at the address that is not MLflow (a wrong path, another service): its 404 to
    /health spooled every run, for a URI that could never take them, until 0.9.4, and its HTML page
    came into the message over many lines. Now a 404 to /health is one line before anything is
    measured, and an MLflow request answered with a page says so in one line."""
    from typer.testing import CliRunner

    from tracker.cli.app import app
    from tracker.errors import ConfigError
    from tracker.log.outbox import pending

    class Pages(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            healthy = self.path == "/health"
            self.send_response(200 if healthy else 404)
            self.end_headers()
            self.wfile.write(b"OK" if healthy else b"<!DOCTYPE HTML>\n<html>\n<body>Not found</body>\n</html>\n")

        do_POST = do_GET

    with serving(Pages) as uri:
        wrong = CliRunner().invoke(app, ["--tracking-uri", f"{uri}/nothing", "profile", "network", "squeezenet1_1"])
        assert isinstance(wrong.exception, ConfigError) and str(wrong.exception).startswith(
            f"tracking server {uri}/nothing answered 404 to /health: no MLflow server at that address"), wrong.output
        assert pending() == []
        page = CliRunner().invoke(app, ["--tracking-uri", uri, "runs", "list"])
        assert isinstance(page.exception, StoreError) and "\n" not in str(page.exception)
        assert str(page.exception).endswith("a page of HTML, not MLflow's answer (is it an MLflow server, and is the "
                                            "URI's path right?)"), page.exception


def tracker_here(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``tracker ARGS`` through ``main`` in this process (``tests.test_cli.in_process``: its status, stdout
    and stderr) with ``env`` added while it runs: the line a command says of its environment or of a
    server's answer, without a new process importing MLflow (a ``python -m tracker`` each until 0.9.15)."""
    from tests.test_cli import in_process

    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return in_process(list(args), Path(__file__).resolve().parents[1])


def test_mlflow_http_variables_it_cannot_use_are_one_line_and_tracker_retries_as_they_say() -> None:
    """A value of an MLFLOW_HTTP_REQUEST_* variable that MLflow cannot use ended a command in MLflow's
    traceback at its first request (for the timeout: after the measurement, its run left RUNNING),
    and tracker's own client tried four times whatever MLFLOW_HTTP_REQUEST_MAX_RETRIES said, until
    0.9.7. Now each is one line before anything is asked, and the retries are the variable's."""
    asked: list[str] = []

    class Busy(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            asked.append(self.path)
            healthy = self.path == "/health"
            self.send_response(200 if healthy else 503)
            self.end_headers()
            self.wfile.write(b"OK" if healthy else b"busy")

        do_POST = do_GET

    with serving(Busy) as uri:
        for name, value, takes in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "abc", "a whole number of retries, 0 to 10"),
                                   ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "-1", "0 to 10"),
                                   ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1.5", "a whole number of seconds, 0 to 120"),
                                   ("MLFLOW_HTTP_REQUEST_TIMEOUT", "abc", "a whole number of seconds, 1 to 9223372036")):
            for args in (["runs", "list"], ["fingerprint", "list"]):
                said = tracker_here("--tracking-uri", uri, *args, **{name: value})
                assert said.returncode == 1 and said.stderr.count("\n") == 1, said.stderr
                assert said.stderr.startswith(f"error: {name}={value!r} in the environment: it takes "), said.stderr
                assert takes in said.stderr, said.stderr
        # a measurement is not begun: the server was never asked
        said = tracker_here("--tracking-uri", uri, "profile", "network", "squeezenet1_1", "--input-size", "32",
                            MLFLOW_HTTP_REQUEST_TIMEOUT="abc")
        assert said.returncode == 1 and "MLFLOW_HTTP_REQUEST_TIMEOUT='abc'" in said.stderr and asked == []

        said = tracker_here("--tracking-uri", uri, "runs", "list", MLFLOW_HTTP_REQUEST_MAX_RETRIES="1")
        assert said.returncode == 1 and said.stderr.endswith("experiments/get-by-name failed after 2 tries (HTTP 503)\n")
        assert asked.count("/api/2.0/mlflow/experiments/get-by-name?experiment_name=Default") == 2, asked


def test_an_http_variable_of_hundreds_of_digits_or_a_timeout_no_socket_takes_is_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole number past a float's range in an MLFLOW_HTTP_REQUEST_* variable was OverflowError's traceback
    (math.isfinite of it) before any command, and a timeout past what a socket's deadline holds (1e10 s) was
    OverflowError's traceback at the first request to a server, through either client, until 0.9.13: each
    is one line naming the variable, and the longest timeout a socket takes is taken. Digits of another
    script, which int() and float() read (\u0663 as 3), were taken until 0.9.14."""
    from tracker.errors import ConfigError
    from tracker.settings import check_http_environment, http_request_setting

    big = "1" + "0" * 400
    for name, value, takes in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", big, "a whole number of retries, 0 to 10"),
                               ("MLFLOW_HTTP_REQUEST_TIMEOUT", big, "a whole number of seconds, 1 to 9223372036"),
                               ("MLFLOW_HTTP_REQUEST_TIMEOUT", "10000000000", "a whole number of seconds, 1 to 9223372036"),
                               ("MLFLOW_HTTP_REQUEST_TIMEOUT", "\u0663", "a whole number of seconds, 1 to 9223372036"),
                               ("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "\u0660.\u0665", "a number of seconds, 0 or more")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigError, match=f"^{name}='{value}' in the environment: it takes {takes}"):
            check_http_environment()
        monkeypatch.delenv(name)
    monkeypatch.setenv("_MLFLOW_HTTP_REQUEST_MAX_RETRIES_LIMIT", big)  # a bound as large as one likes: taken
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "9223372036")
    check_http_environment()
    import socket

    with socket.socket() as sock:  # the longest timeout taken is one a socket takes
        sock.settimeout(http_request_setting("MLFLOW_HTTP_REQUEST_TIMEOUT", 120))


def test_mlflow_s_internal_bounds_it_cannot_use_are_one_line() -> None:
    """MLflow reads its internal bounds on the retries and the back-off factor at every request: one it
    cannot read (``abc``) or takes for wrong (``-1``) ended a command in MLflow's traceback until 0.9.8
    (tracker took it for MLflow's default). Now it is one line naming it, before the server is asked."""
    asked: list[str] = []

    class Busy(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            asked.append(self.path)
            self.send_response(200 if self.path == "/health" else 503)
            self.end_headers()

        do_POST = do_GET

    with serving(Busy) as uri:
        for name, value, args in (("_MLFLOW_HTTP_REQUEST_MAX_RETRIES_LIMIT", "abc", ["fingerprint", "list"]),
                                  ("_MLFLOW_HTTP_REQUEST_MAX_BACKOFF_FACTOR_LIMIT", "abc", ["fingerprint", "list"]),
                                  ("_MLFLOW_HTTP_REQUEST_MAX_RETRIES_LIMIT", "-1", ["runs", "list"])):
            said = tracker_here("--tracking-uri", uri, *args, **{name: value})
            assert said.returncode == 1 and said.stderr.count("\n") == 1, said.stderr
            assert said.stderr.startswith(f"error: {name}={value!r} in the environment: it takes a whole number of "), \
                said.stderr
            assert "0 or more" in said.stderr, said.stderr
    assert asked == []


def test_a_page_of_html_answered_with_200_is_one_line_through_either_client() -> None:
    """A server that answers every request with a page of HTML and status 200 (a login portal): its
    page was read as JSON until 0.9.7, said as "Expecting value: line 1 column 1 (char 0)" by
    tracker's client and in a traceback by MLflow's (fingerprint list). Now one line names the
    server and what its page began with, before anything is measured, and nothing is spooled."""
    from typer.testing import CliRunner

    from tracker.cli.app import app
    from tracker.errors import ConfigError
    from tracker.log.outbox import pending

    class Portal(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            healthy = self.path == "/health"
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"OK" if healthy else b"<html><body>Please log in</body></html>")

        do_POST = do_GET

    with serving(Portal) as uri:
        said = f"tracking server {uri} answered "
        page = "with a page that is not MLflow's JSON (it began '<html><body>Please log in</body></html>')"
        for args in (["runs", "list"], ["fingerprint", "list"]):
            run = tracker_here("--tracking-uri", uri, *args)
            assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
            assert run.stderr.startswith(f"error: {said}") and page in run.stderr, run.stderr
        measured = CliRunner().invoke(app, ["--tracking-uri", uri, "-e", "h", "profile", "network", "squeezenet1_1",
                                            "--input-size", "32", "--time-cap", "0.2", "--min-samples", "6"])
        assert isinstance(measured.exception, ConfigError), measured.output
        assert str(measured.exception).startswith(f"{said}experiments/get-by-name {page}"), measured.exception
        assert pending() == []


def test_an_error_answered_in_json_nested_too_deeply_is_one_line_through_either_client() -> None:
    """A server (a proxy) answering 400 with a body of arrays nested past Python's recursion limit: MLflow's
    client (fingerprint list) put the body in its error, which tracker read as JSON for its message, and
    tracker's own (runs list) read the answer as JSON: a RecursionError's traceback either way until 0.9.15.
    Now the body's first 200 characters are said as text, in one line, by either client."""

    class Nested(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            healthy = self.path == "/health"
            self.send_response(200 if healthy else 400)  # a 500 is retried: the same, four times slower
            self.end_headers()
            self.wfile.write(b"OK" if healthy else b"[" * 100_000)

        do_POST = do_GET

    with serving(Nested) as uri:
        for args in (["runs", "list"], ["fingerprint", "list"]):
            run = tracker_here("--tracking-uri", uri, *args)
            assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr[-2000:]
            assert run.stderr.startswith("error: tracking server ") and len(run.stderr) < 400, run.stderr[-2000:]


@pytest.mark.parametrize("refusal", [b"You are not authenticated.", b'{"error_code": "UNAUTHENTICATED", "message": "no"}'])
def test_a_refused_token_is_named_in_the_line_of_a_401(refusal: bytes) -> None:
    """A server that refuses the token given in MLFLOW_TRACKING_TOKEN: its 401 named only
    MLFLOW_TRACKING_USERNAME and _PASSWORD until 0.9.7, through tracker's client as MLflow's; it
    names the token now (and, with no token set, the account's variables as before). A refusal in
    MLflow's JSON (a proxy's) was MLflow's traceback (a RestException) through its client."""
    sent: list[str | None] = []

    class Refusing(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            healthy = self.path == "/health"
            sent.append(self.headers.get("Authorization"))
            self.send_response(200 if healthy else 401)
            self.end_headers()
            self.wfile.write(b"OK" if healthy else refusal)

        do_POST = do_GET

    with serving(Refusing) as uri:
        for args in (["runs", "list"], ["fingerprint", "list"]):
            said = tracker_here("--tracking-uri", uri, *args, MLFLOW_TRACKING_TOKEN="not-a-token")
            assert said.returncode == 1 and said.stderr.count("\n") == 1, said.stderr
            assert said.stderr.startswith("error: tracking server answered 401 to ") and said.stderr.endswith(
                "set MLFLOW_TRACKING_TOKEN (set now) to a token the server takes, or unset it and set "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD to an account of the server\n"), said.stderr
        assert "Bearer not-a-token" in sent
        said = tracker_here("--tracking-uri", uri, "runs", "list", MLFLOW_TRACKING_USERNAME="me",
                            MLFLOW_TRACKING_PASSWORD="wrong")
        assert said.stderr.endswith("the credentials were refused; set MLFLOW_TRACKING_USERNAME and "
                                    "MLFLOW_TRACKING_PASSWORD to an account of the server\n"), said.stderr


def test_tracker_s_client_waits_and_backs_off_as_mlflow_s_variables_say(monkeypatch: pytest.MonkeyPatch) -> None:
    """tracker's own client waited 30 s on each request and 0.1-0.4 s, doubling, between tries, whatever
    MLFLOW_HTTP_REQUEST_TIMEOUT, _BACKOFF_FACTOR and _BACKOFF_JITTER said, until 0.9.8. Now it waits as
    MLflow's client does: their values, and MLflow's defaults where unset."""
    import time

    from mlflow import environment_variables as mlflow_env

    from tracker.log import rest_store
    from tracker.settings import resolve_location

    asked: list[float] = []
    slow = [0.0]

    class Busy(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            healthy = self.path == "/health"
            if not healthy:
                asked.append(time.monotonic())
                time.sleep(slow[0])
            with contextlib.suppress(ConnectionError):  # a request given up on has closed its end
                self.send_response(200 if healthy else 503)
                self.end_headers()
                self.wfile.write(b"OK" if healthy else b"busy")

        do_POST = do_GET

    assert rest_store.TIMEOUT_S == mlflow_env.MLFLOW_HTTP_REQUEST_TIMEOUT.default  # 30 until 0.9.8
    assert rest_store.BACKOFF_JITTER == mlflow_env.MLFLOW_HTTP_REQUEST_BACKOFF_JITTER.default
    with serving(Busy) as uri:
        store = rest_store.RestStore(resolve_location(uri), workers=1)
        # the timeout: a request the server holds 3 s is given up after the variable's 1 s
        slow[0] = 3.0
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")
        began = time.monotonic()
        with pytest.raises(StoreError, match=r"experiments/search failed after one try \(timed out\)"):
            store.call("POST", "experiments/search", {})
        assert time.monotonic() - began < 2.5
        # the back-off: none after the first failure, then the factor times 2, 4... (no jitter asked)
        slow[0] = 0.0
        asked.clear()
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0")
        with pytest.raises(StoreError, match=r"failed after 3 tries \(HTTP 503\)"):
            store.call("POST", "experiments/search", {})
        gaps = [b - a for a, b in zip(asked, asked[1:])]
        assert len(gaps) == 2 and gaps[0] < 0.5 and 2.0 <= gaps[1] < 2.5, gaps
        store.close()
    # the jitter: up to its seconds at random, added after the first failure; all of it at most 120 s, as urllib3's
    monkeypatch.setattr(rest_store.random, "random", lambda: 0.5)
    assert [rest_store.backoff_s(n, 2, 1.0) for n in (1, 2, 3)] == [0.0, 4.5, 8.5]
    assert rest_store.backoff_s(2, 0, 3.0) == 1.5 and rest_store.backoff_s(9, 2, 1.0) == 120.0


def test_the_sync_commands_said_of_other_servers_paste_into_a_shell_as_one_word() -> None:
    """A server URI with a space in its path or an ``&`` in its query, named in a command sync
    suggests, is quoted: a shell read ``&`` as the end of the command and a space as two words
    (until 0.9.8)."""
    import shlex

    from typer.testing import CliRunner

    from tracker.cli.app import app
    from tracker.log.outbox import pending, spool

    server = f"http://127.0.0.1:{free_port()}/ml flow"  # behind a proxy at a path with a space
    logger = RunLogger(server, experiment="offline", environment=ENV)
    assert logger.offline
    logger.log([network_record("resnet18", 1)])
    database = f"postgresql://127.0.0.1:{free_port()}/tracker?sslmode=disable&connect_timeout=1"
    spool(database, "offline", [network_record("resnet18", 2).finalize(ENV)], "database down")
    assert sorted(item.uri for item in pending()) == sorted([server, database])

    other = CliRunner().invoke(app, ["--tracking-uri", f"http://127.0.0.1:{free_port()}", "sync"])
    assert other.exit_code == 0, other.output
    said = [line.split(": ", 1)[1] for line in other.output.splitlines() if "wait for another server" in line]
    assert sorted(shlex.split(command) for command in said) == sorted(
        ["tracker", "--tracking-uri", uri, "sync"] for uri in (server, database)), other.output
    assert f"tracker --tracking-uri {shlex.quote(server)} sync" in said

    refused = CliRunner().invoke(app, ["--tracking-uri", database, "sync"])
    line = str(refused.exception)
    # a database that is down asked for no credentials: it is said as it is (until 0.9.9 "keeps no credentials")
    assert refused.exit_code == 1 and "keeps no credentials" not in line and "127.0.0.1" in line, refused.output
    from tracker.errors import StoreError
    from tracker.log.outbox import _without_credentials
    from tracker.settings import resolve_location

    item = next(i for i in pending() if i.uri == database)
    asked = _without_credentials(StoreError("fe_sendauth: no password supplied"), resolve_location(database), item)
    command = str(asked).rsplit("give the URI with them, ", 1)[1].removesuffix(")")
    assert shlex.split(command) == ["tracker", "--tracking-uri", database.replace("//", "//USER:PASSWORD@"), "sync"], line
    assert len(pending()) == 2  # nothing lost


#: What a fault-injecting proxy does with a request: None forwards it; a status answers it with that status and
#: a page of HTML, unforwarded; DROP forwards it, then closes the connection without an answer (the server acted,
#: its reply lost).
DROP = "drop"


def forwarding(upstream: str, fault: Callable[[str, str], int | str | None]) -> type:
    """A request handler that forwards every request to ``upstream`` (a real server), save those
    ``fault(method, path)`` says otherwise (see :data:`DROP`)."""
    import requests

    class Forward(Quiet):
        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            said = fault(self.command, self.path)
            if isinstance(said, int):
                page = b"<!DOCTYPE HTML>\n<html>\n<head><title>Error</title></head>\n<body>No</body>\n</html>\n"
                self.send_response(said)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
            answer = requests.request(self.command, upstream + self.path, data=body, headers=headers, timeout=60)
            if said == DROP:  # the server has acted; the client hears nothing (a worker dying, a connection cut)
                self.close_connection = True
                return
            self.send_response(answer.status_code)
            for key, value in answer.headers.items():
                if key.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

    return Forward


def with_notes(record: RunRecord) -> RunRecord:
    record.artifacts["notes.txt"] = "hello"
    return record


@pytest.mark.parametrize("status", [501, 500])
def test_a_server_refusing_artifacts_spools_the_batch_and_sync_sends_it_once_it_takes_them(
    mlflow_server: str, status: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server whose artifact uploads fail (its artifact store a plain file: 500s; a proxy that takes
    no PUT: 501) ended a measurement in MLflow's traceback or its HTML page, the batch said to have been
    "interrupted" in the outbox, the run left RUNNING on the server, and `sync` failed the same way,
    until 0.9.8. Now the refusal is a write failure as any other: one warning line, the batch in the
    outbox with the true reason, the half-written run deleted (as sync deletes what a write cut short
    left); `sync` says it in one line while the server refuses, and sends the batch once it takes it."""
    from typer.testing import CliRunner

    from tracker.cli.app import app
    from tracker.log.outbox import pending

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's client gives up on a 500 at once
    refusing = [True]
    handler = forwarding(mlflow_server, lambda method, path: status if method == "PUT" and refusing[0] else None)
    experiment = f"artifacts-refused-{status}"
    with serving(handler) as uri:
        logger = RunLogger(uri, experiment=experiment, environment=ENV)
        net = with_notes(network_record("resnet18", status))
        ids = logger.log([net, layer_record(net, 0)])  # no exception: the caller goes on
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("warning: ") and "<" not in err, err
        reason = f"tracking server {uri} refused the artifacts of run {net.name!r}: HTTP {status}"
        assert reason in err and "runs go to the outbox" in err, err
        [waiting] = pending()
        assert waiting.reason.startswith(reason) and "\n" not in waiting.reason and "<" not in waiting.reason
        assert sorted(r.run_id for r in waiting.records) == sorted(ids) and logger.outboxed == set(ids)
        client = MlflowClient(mlflow_server)
        exp = client.get_experiment_by_name(experiment)
        assert client.search_runs([exp.experiment_id]) == []  # the run it made is deleted, not left RUNNING

        runner = CliRunner()
        refused = runner.invoke(app, ["--tracking-uri", uri, "sync"])
        assert refused.exit_code == 1 and isinstance(refused.exception, StoreError), refused.output
        assert str(refused.exception).startswith(reason) and "\n" not in str(refused.exception)
        assert len(pending()) == 1 and client.search_runs([exp.experiment_id]) == []

        refusing[0] = False
        sent = runner.invoke(app, ["--tracking-uri", uri, "sync"])
        assert sent.exit_code == 0 and "sent 2 runs" in sent.output, sent.output
    assert pending() == []
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}
    [parent] = [r for r in runs if r.data.tags["tracker.kind"] == "network"]
    assert [a.path for a in client.list_artifacts(parent.info.run_id)] == ["notes.txt"]


def test_a_run_made_though_its_answer_was_lost_is_not_made_twice(mlflow_server: str) -> None:
    """A runs/create the server acted on, its answer lost (the connection closed, a worker dying), was
    tried again, and made a second run: an empty RUNNING run stayed beside the real one for good (sync
    never saw it), until 0.9.8. Now a retry of runs/create first looks for the run by its write's tag."""
    import threading

    from tracker.log.outbox import pending

    lock, creates = threading.Lock(), []

    def fault(method: str, path: str) -> str | None:
        if path != "/api/2.0/mlflow/runs/create":
            return None
        with lock:
            creates.append(path)
            return DROP if len(creates) == 2 else None  # a layer run's: made, its answer lost

    with serving(forwarding(mlflow_server, fault)) as uri:
        logger = RunLogger(uri, experiment="answer-lost", environment=ENV)
        net = network_record("resnet18", 1)
        records = [net, layer_record(net, 0), layer_record(net, 1)]
        ids = logger.log(records)
    assert pending() == [] and not logger.outboxed
    client = MlflowClient(mlflow_server)
    runs = client.search_runs([logger.experiment.experiment_id])
    assert len(runs) == 3 and {r.info.status for r in runs} == {"FINISHED"}, [(r.info.run_name, r.info.status) for r in runs]
    assert sorted(r.info.run_id for r in runs) == sorted(ids) and len(creates) == 3
    assert all(r.data.metrics["latency_ms"] > 0 for r in runs)  # the run found again was written whole


def test_a_run_whose_making_cannot_be_asked_is_not_made_twice_and_sync_sends_it_once(
    mlflow_server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where the answer to a runs/create was lost and the server cannot then be asked whether it made
    the run, runs/create is not tried again: the batch waits in the outbox, and `sync` deletes the run
    that try made (RUNNING, tagged with the batch) before it sends the batch whole."""
    from typer.testing import CliRunner

    from tracker.cli.app import app
    from tracker.log.outbox import pending

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    broken = [True]

    def fault(method: str, path: str) -> int | str | None:
        if broken[0] and path == "/api/2.0/mlflow/runs/create":
            return DROP
        return 503 if broken[0] and path == "/api/2.0/mlflow/runs/search" else None

    with serving(forwarding(mlflow_server, fault)) as uri:
        logger = RunLogger(uri, experiment="answer-lost-unasked", environment=ENV)
        net = network_record("resnet18", 1)
        logger.log([net])
        err = capsys.readouterr().err
        assert f"tracking server {uri}: runs/create failed after one try (the connection was closed without an " \
               "answer)" in err, err
        assert "not tried again: whether the server had acted on it could not be asked" in err, err
        client = MlflowClient(mlflow_server)
        [made] = client.search_runs([logger.experiment.experiment_id])  # the one try's run, and no second
        assert made.info.status == "RUNNING" and len(pending()) == 1
        broken[0] = False
        sent = CliRunner().invoke(app, ["--tracking-uri", uri, "sync"])
        assert sent.exit_code == 0 and "sent 1 run" in sent.output and "deleted 1 unfinished run" in sent.output, \
            sent.output
    [run] = client.search_runs([logger.experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_id != made.info.run_id and pending() == []
