"""The team path for real: PostgreSQL behind ``mlflow server``, two shards logging to it at
once, the warehouse loading from it, an outbox while the server is down, basic auth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.conftest import ENV, free_port, layer_record, network_record, running_mlflow_server
from tracker.cli.app import app
from tracker.log.logger import RunLogger
from tracker.log.outbox import pending
from tracker.settings import local_path, resolve_location
from tracker.warehouse.load import load
from tracker.warehouse.source import ApiSource, DatabaseSource, open_source

pytestmark = pytest.mark.slow

SHARDED = """
[campaign]
name = "team"
description = "Two small networks, sharded"
[networks]
zoo = ["squeezenet1_1", "mobilenet_v3_small"]
[measure]
batch_sizes = [1, 2]
phases = ["inference"]
precision = 0.2
time_cap_s = 0.3
timeout_s = 120
again_imprecise = false
"""


def test_two_shards_log_at_once_to_a_postgres_server_and_the_warehouse_loads_them(
    postgres_uri: str, tmp_path: Path
) -> None:
    campaign = tmp_path / "team.toml"
    campaign.write_text(SHARDED)
    with running_mlflow_server(tmp_path / "server", postgres_uri) as uri:
        shards = [
            subprocess.Popen([sys.executable, "-m", "tracker", "--tracking-uri", uri, "campaign", "run", str(campaign),
                              "--shard", f"{i}/2", "--format", "json"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in (1, 2)
        ]
        tallies = []
        for proc in shards:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err
            tallies.append(json.loads(out))
        assert sum(t["measured"] for t in tallies) == 4 and all(t["failed"] == 0 for t in tallies)

        wh = tmp_path / "w.duckdb"
        report = load(wh, open_source(resolve_location(uri), backend_store_uri=postgres_uri))
        assert report.mode == "full" and report.descriptions_added == 2
        con = duckdb.connect(str(wh), read_only=True)
        rows = con.execute("SELECT model, batch_size, config_key FROM measurements ORDER BY model, batch_size").fetchall()
        con.close()
        assert [(m, b) for m, b, _ in rows] == [("mobilenet_v3_small", 1), ("mobilenet_v3_small", 2),
                                                 ("squeezenet1_1", 1), ("squeezenet1_1", 2)]
        assert len({k for _, _, k in rows}) == 4  # nothing twice
        # Both shards ran on this machine's one CPU: they took turns (tracker.profile.devicelock).
        # Before, their children measured at once, each a thread a core on two cores, spinning on
        # each other's OpenMP threads: mobilenet_v3_small at batch 1 took 1.2 s an iteration, not 11 ms.
        client = MlflowClient(uri)
        # the campaign's description is the experiment's, over the REST API as in the embedded store
        assert client.get_experiment_by_name("team").tags["mlflow.note.content"] == "Two small networks, sharded"
        windows = sorted((r.info.start_time, r.info.end_time) for r in client.search_runs(
            [client.get_experiment_by_name("team").experiment_id], "tags.`tracker.kind` = 'network'"))
        assert len(windows) == 4, windows
        # ms: a run's end is stamped just after its lock is let go
        assert all(end - start < 500 for (_, end), (start, _) in zip(windows, windows[1:])), windows

        # The API fallback reads the same runs.
        api = load(tmp_path / "api.duckdb", ApiSource(uri))
        assert api.runs_total == report.runs_total and api.descriptions_added == 2
        assert isinstance(open_source(resolve_location(uri)), ApiSource)
        assert isinstance(open_source(resolve_location(uri), postgres_uri), DatabaseSource)

        # A second run of both shards measures nothing again.
        again = CliRunner().invoke(app, ["--tracking-uri", uri, "campaign", "run", str(campaign), "--format", "json"])
        assert again.exit_code == 0 and json.loads(again.stdout)["skipped"] == 4, again.output
        assert load(wh, open_source(resolve_location(uri), backend_store_uri=postgres_uri)).runs_changed == 0
        # A tag edited on the server to a value of the same length is read again, once.
        edited = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                    filter_string="tags.`tracker.campaign` = 'team'", max_results=1)[0]
        client.set_tag(edited.info.run_id, "tracker.campaign", "meat")
        reloads = [load(wh, open_source(resolve_location(uri), backend_store_uri=postgres_uri)).runs_changed for _ in "ab"]
        assert reloads == [1, 0]


def test_runs_wait_in_the_outbox_while_the_server_is_down_and_sync_sends_them_once(tmp_path: Path) -> None:
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    logger = RunLogger(uri, experiment="offline", environment=ENV)
    assert logger.offline and "connection refused" in logger.offline
    net = network_record("resnet18", 1)
    net.history["system/cpu_util_pct"] = [(0, 50.0), (20, 62.5)]  # a window's series, stamped from its start
    net.series_start_ms = 1_790_000_000_000
    layers, second = [layer_record(net, 0), layer_record(net, 1)], network_record("resnet18", 2)
    logger.log([net, *layers])
    logger.log([second])
    repeat = network_record("resnet18", 2)  # a deliberate repeat (profile --again): same config key, own repeat key
    repeat.tags["tracker.repeat_key"] = f"{repeat.config_key}#r2"
    logger.log([repeat])
    assert len(pending()) == 3 and logger.outboxed == {r.run_id for r in (net, *layers, second, repeat)}
    assert logger.measured("network") == {net.config_key, network_record("resnet18", 2).config_key}  # resume sees them
    assert logger.measured("network", having="tracker.repeat_key") == {repeat.config_key}  # runs carrying a tag too
    assert logger.measured("network", having="tracker.trace") == set()  # none waiting was traced

    runner = CliRunner()
    down = runner.invoke(app, ["--tracking-uri", uri, "sync"])
    assert down.exit_code == 1 and "cannot reach" in str(down.exception or down.output)
    assert len(pending()) == 3  # nothing lost
    # A campaign started while the server is down measures into the outbox and says so, as one whose server
    # went down midway does (it ended with "cannot reach" and status 1, its summary unsaid, until 0.8.9).
    campaign = tmp_path / "offline.toml"
    campaign.write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\nprecision = 0.2\ntime_cap_s = 0.3\n'
                        'again_imprecise = false\n')
    spooled = runner.invoke(app, ["--tracking-uri", uri, "-e", "offline", "campaign", "run", str(campaign),
                                  "--format", "json"])
    assert spooled.exit_code == 0, spooled.output
    tally = json.loads(spooled.stdout)  # each run says it waits in the outbox (said only on stderr until 0.9.5)
    assert (tally["measured"], tally["failed"], tally["skipped"]) == (1, 0, 0)
    assert [(r["network"], r.get("in_outbox")) for r in tally["runs"]] == [("squeezenet1_1", True)]
    assert tally["in_outbox"] == 1  # and counted where the summary says it (a warning per run alone until 0.9.9)
    again = runner.invoke(app, ["--tracking-uri", uri, "-e", "offline", "profile", "network", "squeezenet1_1",
                                "--time-cap", "0.3", "--precision", "0.2", "--format", "json"])
    reused = json.loads(again.stdout)  # found in the outbox: reused, and said to wait there
    assert (reused["reused"], reused.get("in_outbox"), reused["run_id"]) == (True, True, tally["runs"][0]["run_id"])
    assert len(pending()) == 5  # its mode run and its network run

    with running_mlflow_server(tmp_path / "server", f"sqlite:///{tmp_path / 'server.db'}", port=port):
        # One batch already reached the server before (say, an ack was lost): it is not sent twice.
        RunLogger(uri, experiment="offline", environment=ENV).log([network_record("resnet18", 2)])
        elsewhere = f"http://127.0.0.1:{free_port()}"  # runs spooled for another server stay for it, and are said
        RunLogger(elsewhere, experiment="offline", environment=ENV).log([network_record("resnet50", 1)])
        done = runner.invoke(app, ["--tracking-uri", uri, "sync"])
        assert done.exit_code == 0, done.output
        assert f"1 outbox file wait for another server: tracker --tracking-uri {elsewhere} sync" in done.output
        # The repeat is sent although its configuration is on the server: it is a new measurement.
        assert "sent 6 runs" in done.output and "1 already on the server" in done.output
        assert [item.uri for item in pending()] == [elsewhere]
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("offline")
        runs = client.search_runs([exp.experiment_id], max_results=100)
        keys = [r.data.tags["tracker.config_key"] for r in runs]
        assert len(runs) == 7 and len(set(keys)) == 6
        assert [r.data.tags.get("tracker.repeat_key") for r in runs].count(f"{repeat.config_key}#r2") == 1
        parents = {r.info.run_id for r in runs if r.data.tags["tracker.kind"] == "network"}
        assert all(r.data.tags["mlflow.parentRunId"] in parents for r in runs if r.data.tags["tracker.kind"] == "layer")
        sent = next(r for r in runs if r.data.tags["tracker.config_key"] == net.config_key)  # the server's own id
        series = client.get_metric_history(sent.info.run_id, "system/cpu_util_pct")  # kept in the outbox, sent as it was
        assert [(m.step, m.timestamp, m.value) for m in series] == [(0, 1_790_000_000_000, 50.0),
                                                                     (20, 1_790_000_000_020, 62.5)]
        assert "sent 0 runs from 0 outbox files" in runner.invoke(app, ["--tracking-uri", uri, "sync"]).output


def test_sync_sends_what_the_server_lacks_once_though_two_syncs_run_at_once(tmp_path: Path) -> None:
    """Until 0.9.2 sync took a configuration the server had in either status for this one: a
    measurement spooled beside a failure of its configuration on the server was dropped, and layers
    spooled beside the network measured whole there were dropped with their network run. And two
    syncs at once sent each batch twice."""
    from tests.test_cli import TRACKER

    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    offline = RunLogger(uri, experiment="gaps", environment=ENV)
    assert offline.offline
    finished = network_record("resnet18", 4)
    layered = network_record("resnet18", 8, sum_of_layers_ms=1.5)
    offline.log([finished])
    offline.log([layered, layer_record(layered, 0), layer_record(layered, 1)])
    for b in range(1, 9):  # files enough for two syncs to meet
        offline.log([network_record("resnet50", b)])
    assert len(pending()) == 10
    with running_mlflow_server(tmp_path / "server", f"sqlite:///{tmp_path / 'server.db'}", port=port):
        online = RunLogger(uri, experiment="gaps", environment=ENV)
        online.log([network_record("resnet18", 4).fail("oom")])  # its failure, measured elsewhere
        online.log([network_record("resnet18", 8)])  # measured whole, without layers
        procs = [subprocess.Popen([*TRACKER, "--tracking-uri", uri, "sync"], cwd=tmp_path, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert pending() == []
        client = MlflowClient(uri)
        runs = client.search_runs([client.get_experiment_by_name("gaps").experiment_id], max_results=100)
        # The id a run had in the outbox, which the command that measured it printed, finds it on the server
        shown = CliRunner().invoke(app, ["--tracking-uri", uri, "-e", "gaps", "runs", "show", finished.run_id[:8],
                                         "--format", "json"])
        assert shown.exit_code == 0, shown.output
        sent = json.loads(shown.stdout)
        assert sent["run_id"] != finished.run_id and sent["status"] == "FINISHED"
        assert client.get_run(sent["run_id"]).data.tags["tracker.config_key"] == finished.config_key
        # A deleted experiment is said, as the embedded store says it (its runs went to the outbox until 0.9.2),
        # and a batch spooled for it is refused naming its file.
        from tracker.errors import ExperimentDeletedError
        from tracker.log.outbox import spool

        client.delete_experiment(client.create_experiment("gone"))
        with pytest.raises(ExperimentDeletedError, match="^experiment 'gone' is deleted; restore it"):
            RunLogger(uri, experiment="gone", environment=ENV)
        path = spool(uri, "gone", [network_record("resnet18", 16).finalize(ENV)], "cannot reach tracking server")
        refused = CliRunner().invoke(app, ["--tracking-uri", uri, "sync"])
        assert refused.exit_code == 1 and str(refused.exception).startswith(
            f"outbox file {path}: experiment 'gone' is deleted; restore it"), refused.output
        path.unlink()
    nets = sorted((r.data.params["model"], int(r.data.params["batch_size"]), r.info.status,
                   "sum_of_layers_ms" in r.data.metrics) for r in runs if r.data.tags["tracker.kind"] == "network")
    assert nets == sorted([("resnet18", 4, "FAILED", False), ("resnet18", 4, "FINISHED", False),
                           ("resnet18", 8, "FINISHED", False), ("resnet18", 8, "FINISHED", True),
                           *[("resnet50", b, "FINISHED", False) for b in range(1, 9)]]), outs  # each once
    with_layers = next(r.info.run_id for r in runs if "sum_of_layers_ms" in r.data.metrics)
    assert sorted(r.data.tags["mlflow.parentRunId"] for r in runs if r.data.tags["tracker.kind"] == "layer") == [
        with_layers, with_layers]


def test_basic_auth_takes_credentials_from_the_environment_and_never_logs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cret-Pa55word-xyz"
    env = {"MLFLOW_AUTH_ADMIN_PASSWORD": secret, "MLFLOW_FLASK_SERVER_SECRET_KEY": "test-key"}
    with running_mlflow_server(tmp_path / "server", f"sqlite:///{tmp_path / 'server.db'}",
                               extra=("--app-name", "basic-auth"), env=env) as uri:
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "wrong-password")
        bad = RunLogger(uri, experiment="auth", environment=ENV)
        assert bad.offline and "credentials were refused" in bad.offline
        bad.log([network_record("resnet18", 1)])
        assert len(pending()) == 1
        # through MLflow's own client (the registry, a load through the API): the same line naming the
        # variables (a traceback of MLflow's, or its message with the server's page, until 0.9.4)
        for args in (["fingerprint", "list"], ["warehouse", "load", "-w", str(tmp_path / "w.duckdb")]):
            said = subprocess.run([sys.executable, "-m", "tracker", "--tracking-uri", uri, *args], capture_output=True,
                                  text=True, env={**os.environ}, timeout=120)
            assert said.returncode == 1 and said.stderr.startswith("error: tracking server") and said.stderr.count("\n") == 1
            assert "the credentials were refused" in said.stderr and "MLFLOW_TRACKING_PASSWORD" in said.stderr, said.stderr

        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", secret)
        result = CliRunner().invoke(app, ["--tracking-uri", uri, "sync"])
        assert result.exit_code == 0, result.output
        good = RunLogger(uri, experiment="auth", environment=ENV)
        good.log([network_record("resnet18", 4)])
        client = MlflowClient(uri)
        runs = client.search_runs([client.get_experiment_by_name("auth").experiment_id])
        assert len(runs) == 2
        for run in runs:
            assert secret not in json.dumps([run.data.params, run.data.tags, run.data.metrics])
        assert not any(secret in p.read_text() for p in Path(os.environ["TRACKER_RUNS_DIR"]).rglob("*") if p.is_file())


def test_the_readme_s_basic_auth_recipe_gives_the_admin_password_mlflow_takes() -> None:
    """MLflow (3.17.2) refuses to start a basic-auth server whose MLFLOW_AUTH_ADMIN_PASSWORD is
    shorter than 12 characters, or its old default; the README's recipe did not say so until 0.9.7.
    The rule the recipe gives is the one the server checks as it starts."""
    import re

    from mlflow.exceptions import MlflowException
    from mlflow.server.auth import _validate_bootstrap_admin_password

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    recipe = readme[readme.index("### A team's tracking server"):readme.index("- **Credentials**")]
    recipe = " ".join(line.split("#", 1)[-1].strip() for line in recipe.splitlines())
    found = re.search(r"the password of (\d+) characters or more, and not (\S+), or mlflow refuses to start", recipe)
    assert found, recipe
    least, old_default = int(found[1]), found[2]
    for refused in ("x" * (least - 1), old_default):
        with pytest.raises(MlflowException):
            _validate_bootstrap_admin_password("admin", refused)
    _validate_bootstrap_admin_password("admin", "x" * least)


def test_find_in_a_postgres_store_reads_past_a_newer_run_without_the_metric_asked_for(
    postgres_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metric's clause as PostgreSQL takes it (a parameter tested only for NULL is one it cannot type)."""
    from tests.test_sql_store import finds_the_newest_run_that_logged_a_metric

    monkeypatch.chdir(tmp_path)  # MLflow's default artifact location: ./mlruns
    finds_the_newest_run_that_logged_a_metric(RunLogger(postgres_uri, experiment="pg-find", environment=ENV))


def test_runs_list_of_a_postgres_store_reads_what_mlflows_search_gives(
    postgres_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runs list``'s SQL (since 0.9.33) as PostgreSQL runs it: its ordering of names and NULLs, its ``IN``."""
    from tests.test_sql_store import lists_runs_as_mlflows_search_does

    monkeypatch.chdir(tmp_path)  # MLflow's default artifact location: ./mlruns
    lists_runs_as_mlflows_search_does(RunLogger(postgres_uri, experiment="pg-list", environment=ENV))


def test_the_registry_of_a_postgres_store_reads_what_mlflows_searches_give(
    postgres_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fingerprint list``'s registry SQL (since 0.9.33) as PostgreSQL runs it."""
    from tests.test_sql_store import reads_the_registry_as_mlflows_searches_do

    monkeypatch.chdir(tmp_path)
    reads_the_registry_as_mlflows_searches_do(RunLogger(postgres_uri, experiment="pg-registry", environment=ENV),
                                              str(tmp_path / "model"))


def test_runs_show_and_compare_of_a_postgres_store_read_what_mlflows_client_gives(
    postgres_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runs show``'s and ``runs compare``'s SQL (since 0.9.34) as PostgreSQL runs it: its booleans, joins
    and counts."""
    from tests.test_sql_store import compares_runs_as_mlflows_client_does, shows_runs_as_mlflows_client_does

    monkeypatch.chdir(tmp_path)
    shows_runs_as_mlflows_client_does(RunLogger(postgres_uri, experiment="pg-show", environment=ENV), monkeypatch)
    compares_runs_as_mlflows_client_does(RunLogger(postgres_uri, experiment="pg-compare", environment=ENV), monkeypatch)


def test_a_database_batch_in_the_outbox_is_sent_with_the_credentials_sync_is_given(
    postgres_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outbox keeps a database's URI without its password; until 0.9.3 sync opened that URI,
    so a batch spooled while PostgreSQL was down could never be sent. And a database written
    directly, without a server, failed while it was empty (its password in the message) and
    wherever tracker made an experiment in it."""
    import psycopg

    from tracker.log.outbox import spool, strip_credentials

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.chdir(tmp_path)
    with psycopg.connect(postgres_uri.rsplit("/", 1)[0] + "/postgres", autocommit=True) as con:
        con.execute("CREATE DATABASE fresh")
    uri = postgres_uri.rsplit("/", 1)[0] + "/fresh"  # empty: no MLflow table yet
    path = spool(uri, "pg-outbox", [network_record("resnet18", 2).finalize(ENV)], "database down")
    assert "tracker-test-pw" not in path.read_text()
    bare = strip_credentials(uri)
    refused = CliRunner().invoke(app, ["sync"])  # every batch, each by the URI its file keeps
    assert refused.exit_code == 1 and path.exists(), refused.output
    line = str(refused.exception)
    assert "\n" not in line and f"outbox file {path} keeps no credentials" in line
    assert f"tracker --tracking-uri {bare.replace('//', '//USER:PASSWORD@')} sync" in line
    sent = CliRunner().invoke(app, ["--tracking-uri", uri, "sync"])
    assert sent.exit_code == 0, sent.output
    assert "sent 1 run from 1 outbox file" in sent.output and pending() == []
    shown = CliRunner().invoke(app, ["--tracking-uri", uri, "-e", "pg-outbox", "runs", "list", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert [(r["params"]["model"], r["params"]["batch_size"]) for r in json.loads(shown.stdout)] == [("resnet18", "2")]
    client = MlflowClient(uri)
    made = client.get_experiment_by_name("pg-outbox")  # MLflow's own default: ./mlruns where it ran
    assert local_path(made.artifact_location) == tmp_path / "mlruns" / made.experiment_id
