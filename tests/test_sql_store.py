"""The embedded store's fast writer against MLflow's own client, on real SQLite files."""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tracker.errors import SchemaError, StoreError
from tracker.log.logger import RunLogger
from tracker.log.record import RunRecord
from tracker.log.reference import log_with_client
from tracker.log.sql_store import SUPPORTED_SCHEMA

from tests.conftest import ENV, layer_record, network_record


@pytest.fixture()
def logger(tmp_path: Path) -> RunLogger:
    lg = RunLogger(str(tmp_path / "store"), experiment="tests", environment=ENV)
    yield lg
    lg.close()


def comparable(run) -> dict:
    """Everything search_runs returns about a run, minus what differs by nature (ids, times, and
    the batch a run was sent to a server in)."""
    info = run.info
    tags = {k: v for k, v in run.data.tags.items() if k not in ("mlflow.parentRunId", "tracker.write")}
    return {
        "status": info.status,
        "lifecycle_stage": info.lifecycle_stage,
        "user_id": info.user_id,
        "run_name": info.run_name,
        "experiment_id": info.experiment_id,
        "artifact_uri_tail": info.artifact_uri.rsplit("/", 1)[-1],
        "params": run.data.params,
        "metrics": run.data.metrics,
        "tags": tags,
        "has_parent": "mlflow.parentRunId" in run.data.tags,
    }


def test_fast_runs_are_indistinguishable_from_client_runs(logger: RunLogger) -> None:
    client = MlflowClient(logger.location.uri)
    net = network_record()
    layers = [layer_record(net, i) for i in range(3)]
    fast_ids = logger.log([net, *layers])

    twin_net, twin_layers = network_record(), []
    final = logger.finalize([twin_net])[0]
    ref_parent = log_with_client(client, logger.experiment.experiment_id, final)
    for i in range(3):
        twin_layers.append(layer_record(ref_parent, i))
    ref_ids = [ref_parent] + [
        log_with_client(client, logger.experiment.experiment_id, f) for f in logger.finalize(twin_layers)
    ]
    for fast_id, ref_id in zip(fast_ids, ref_ids):
        fast, ref = client.get_run(fast_id), client.get_run(ref_id)
        a, b = comparable(fast), comparable(ref)
        a["tags"].pop("tracker.config_key"), b["tags"].pop("tracker.config_key")  # same config
        assert a == b
        assert fast.info.artifact_uri.startswith(str(Path(logger.location.artifact_root)))

    found = client.search_runs(
        [logger.experiment.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{fast_ids[0]}' and metrics.latency_ms > 1",
    )
    assert sorted(r.info.run_id for r in found) == sorted(fast_ids[2:])
    by_kind = client.search_runs([logger.experiment.experiment_id], filter_string="tags.`tracker.kind` = 'layer'")
    assert len(by_kind) == 6


def test_metric_history_and_artifacts(logger: RunLogger, tmp_path: Path) -> None:
    src = tmp_path / "graph.json"
    src.write_text('{"nodes": []}')
    record = RunRecord(
        kind="training",
        name="job",
        params=dict(model="m", model_hash="h", batch_size=2, phase="training", device="cpu"),
        metrics={"latency_ms": 7.0},
        history={"step_time_ms": [(s, 10.0 - s) for s in range(5)]},
        artifacts={"description/graph.json": src, "notes.txt": "hello", "raw.bin": b"\x00\x01"},
    )
    (run_id,) = logger.log([record])
    client = MlflowClient(logger.location.uri)
    history = client.get_metric_history(run_id, "step_time_ms")
    assert [(m.step, m.value) for m in history] == [(s, 10.0 - s) for s in range(5)]
    assert client.get_run(run_id).data.metrics["step_time_ms"] == 6.0
    listed = {a.path for a in client.list_artifacts(run_id)}
    assert listed == {"description", "notes.txt", "raw.bin"}
    local = Path(client.download_artifacts(run_id, "description/graph.json", str(tmp_path / "dl")))
    assert local.read_text() == '{"nodes": []}'


def test_a_batch_with_one_bad_record_writes_nothing(logger: RunLogger) -> None:
    good, bad = network_record(), network_record(batch_size=2)
    bad.params.pop("device")
    with pytest.raises(SchemaError, match="device"):
        logger.log([good, bad])
    assert MlflowClient(logger.location.uri).search_runs([logger.experiment.experiment_id]) == []


def test_measured_keys_and_find_skip_what_is_done(logger: RunLogger) -> None:
    done, failed, traced = network_record(batch_size=1), network_record(batch_size=64), network_record(batch_size=2)
    failed.metrics.clear()
    failed.fail("oom")
    traced.tags["tracker.trace"] = "trace/ops.json"
    logger.log([done, failed, traced])
    assert logger.measured() == {done.config_key, traced.config_key}
    assert logger.measured(kind="layer") == set()
    assert logger.measured(having="tracker.trace") == {traced.config_key}  # runs carrying a tag too
    assert logger.measured(statuses=("FAILED",), having="tracker.trace") == set()
    again = logger.find(done.config_key)
    assert again is not None and again.run_id == done.run_id and again.metrics["latency_ms"] == 12.5
    assert logger.find(failed.config_key) is None
    # run ids by prefix, as runs compare finds them: of the kinds asked for, any status, by id
    store, exp = logger.store, logger.experiment
    everyone = sorted((r.run_id, "network") for r in (done, failed, traced))
    for r in (done, failed, traced):
        assert (r.run_id, "network") in store.runs_with_prefix(exp, r.run_id[:6], ("network", "layer"))
    assert [m for p in "0123456789abcdef" for m in store.runs_with_prefix(exp, p, ("network",))] == everyone
    assert store.runs_with_prefix(exp, done.run_id[:6], ("layer",)) == []
    with pytest.raises(ValueError, match="not a run id prefix"):
        store.runs_with_prefix(exp, "ab%", ("network",))  # a LIKE wildcard never reaches the query


def finds_the_newest_run_that_logged_a_metric(logger: RunLogger) -> None:
    """What each store (this SQLite file, a server, the outbox) answers ``find`` with a metric asked
    for: the newest run of the key that logged it, past a newer one that did not (a configuration
    measured with its layers, then whole only: until 0.9.23 a campaign read the newest alone, and
    measured the layers again)."""
    import time

    runs = []
    for metrics in ({"sum_of_layers_ms": 9.0}, {"sum_of_layers_ms": 8.0}, {}):
        runs.append(network_record(batch_size=1, **metrics))
        logger.log([runs[-1]])
        time.sleep(0.02)  # started a few milliseconds apart: the newest is the last
    key = runs[0].config_key
    assert {r.config_key for r in runs} == {key}
    assert logger.find(key).run_id == runs[2].run_id
    found = logger.find(key, having_metric="sum_of_layers_ms")
    assert found is not None and found.run_id == runs[1].run_id and found.metrics["sum_of_layers_ms"] == 8.0
    assert logger.find(key, having_metric="no_such_metric") is None
    assert logger.find(key, "FAILED", having_metric="sum_of_layers_ms") is None


def lists_runs_as_mlflows_search_does(logger: RunLogger) -> None:
    """``runs list``'s default listing of a database store, read in SQL since 0.9.33 (MLflow's client
    took three quarters of the command), is what MLflow's search gives: the same runs, in the same
    order, with the same fields, for each kind, status and limit. The store holds a network's layers
    (started together: by name), a failed run, and runs of a user's own script (no kind; one nested,
    one with a NaN and an infinite metric, two started in the same millisecond, one deleted). ``store info``'s
    counts, read in SQL too, are MLflow's."""
    from tracker.log.inspect import experiments_with_runs, list_runs, store_info

    parent = network_record("resnet18", 1)
    logger.log([parent, *(layer_record(parent, i) for i in (2, 0, 1))])
    logger.log([network_record("resnet34", 2)])
    logger.log([network_record("mobilenet_v2", 4).fail("oom", "killed")])
    client = MlflowClient(logger.location.uri)
    experiment = logger.experiment.experiment_id
    own = client.create_run(experiment, run_name="script-run")
    client.log_metric(own.info.run_id, "loss", float("nan"))
    client.log_metric(own.info.run_id, "latency_ms", float("-inf"))
    client.set_terminated(own.info.run_id, "KILLED")
    nested = client.create_run(experiment, run_name="script-child", tags={"mlflow.parentRunId": own.info.run_id})
    client.set_terminated(nested.info.run_id)
    at = own.info.start_time + 60_000
    for name in ("same-b", "same-a"):
        client.set_terminated(client.create_run(experiment, start_time=at, run_name=name).info.run_id)
    client.delete_run(client.create_run(experiment, run_name="deleted").info.run_id)

    everything = "attributes.status != 'NONE'"  # true of every run: MLflow's own search, as the default filters
    for kind in (None, "network", "layer"):
        for status in (None, "finished", "FAILED", "KILLED"):
            for limit in (1, 4, 100):
                ours = list_runs(logger, kind=kind, limit=limit, status=status)
                mlflows = list_runs(logger, kind=kind, limit=limit, status=status, where=everything)
                assert json.dumps(ours, sort_keys=True) == json.dumps(mlflows, sort_keys=True), (kind, status, limit)
    names = [r["name"] for r in list_runs(logger)]
    assert names[:2] == ["same-a", "same-b"] and "deleted" not in names and "script-child" not in names
    assert len(names) == 6 and not any(name.startswith("00") for name in names)  # layers under their network
    assert [r["name"] for r in list_runs(logger, kind="layer")] == [f"{i:03d} conv{i} (Conv2d)" for i in (0, 1, 2)]
    script = next(r for r in list_runs(logger, status="killed") if r["name"] == "script-run")
    assert script["kind"] == "" and script["metrics"]["latency_ms"] == float("-inf") and script["metrics"]["loss"] != 0
    failed = list_runs(logger, status="FAILED")
    assert [(r["name"], r["failure_reason"], r["stderr_tail"]) for r in failed] == [
        ("mobilenet_v2 · bs4", "oom", "killed")]
    # store info counts in SQL too: the active runs and experiments MLflow's search finds
    client.delete_experiment(client.create_experiment("gone", artifact_location=logger.location.artifact_root))
    info = store_info(logger)
    assert info["runs_in_experiment"] == len(client.search_runs([experiment], max_results=1000)) == 10
    listed = [e.name for e in client.search_experiments()]
    assert info["experiment_names"] == sorted(listed, key=str.lower) and "gone" not in listed
    assert info["experiments"] == len(listed)
    # and the experiments that hold a run, which runs list names where the current one holds none
    only_deleted = client.create_experiment("only-deleted", artifact_location=logger.location.artifact_root)
    client.delete_run(client.create_run(only_deleted).info.run_id)
    client.create_run(client.create_experiment("newer", artifact_location=logger.location.artifact_root))
    held = [e.name for e in client.search_experiments() if client.search_runs([e.experiment_id], max_results=1)]
    assert experiments_with_runs(logger) == held and "newer" in held and "only-deleted" not in held


def reads_the_registry_as_mlflows_searches_do(logger: RunLogger, source: str) -> None:
    """``fingerprint list``'s registry, read in SQL since 0.9.33, is what MLflow's searches give: every
    model by name with its aliases, its versions (a deleted one left out) in MLflow's order with their
    tags and times; a model without versions, one whose name holds a quote, a deleted model."""
    from tracker.log.search import registered_models

    client = MlflowClient(logger.location.uri)
    for name in ("b-model", "a'model", "empty-model", "gone-model"):
        client.create_registered_model(name)
    for name, count in (("b-model", 3), ("a'model", 2), ("gone-model", 1)):
        for i in range(count):
            client.create_model_version(name, source, tags={"features": "a,b", "n": str(i)} if i else None)
    client.set_model_version_tag("b-model", "1", "late", "tagged after")
    client.delete_model_version("b-model", "2")
    client.set_registered_model_alias("b-model", "champion", "3")
    client.set_registered_model_alias("b-model", "staging", "3")
    client.set_registered_model_alias("a'model", "champion", "1")
    client.delete_registered_model("gone-model")
    ours = logger.store.registered_models()
    assert ours == registered_models(client)
    assert [m.name for m in ours] == ["a'model", "b-model", "empty-model"]
    b_model = ours[1]
    by_number = {v.version: v.tags for v in b_model.versions}  # in MLflow's order, which the equality above checks
    assert b_model.aliases == {"champion": "3", "staging": "3"}
    assert by_number == {"1": {"late": "tagged after"}, "3": {"features": "a,b", "n": "2"}}
    assert all(isinstance(v.creation_timestamp, int) for v in b_model.versions) and ours[2].versions == []


def test_the_registry_reads_what_mlflows_searches_give(logger: RunLogger, tmp_path: Path) -> None:
    reads_the_registry_as_mlflows_searches_do(logger, str(tmp_path / "model"))


def test_runs_list_reads_what_mlflows_search_gives(logger: RunLogger) -> None:
    lists_runs_as_mlflows_search_does(logger)


def test_runs_show_reads_what_mlflows_client_gives(logger: RunLogger, monkeypatch: pytest.MonkeyPatch) -> None:
    shows_runs_as_mlflows_client_does(logger, monkeypatch)


def shows_runs_as_mlflows_client_does(logger: RunLogger, monkeypatch: pytest.MonkeyPatch) -> None:
    """``runs show`` of a database store's run, read in SQL and from its artifact folder since 0.9.34 (MLflow's
    client took 3.4 to 3.7 s of it), is what MLflow's client reads: a network run with its samples and layer
    runs (by a prefix and by its id), a layer run, a failed run, a run with damaged samples, a run of a user's
    own script (a NaN and an infinite metric, a system metric, a description, nested artifacts), a deleted run
    and another experiment's run (by their ids). What SQL does not look for (a prefix of several runs, of none,
    of a deleted run) MLflow's lookup still answers."""
    from tracker.errors import TrackerError
    from tracker.log import inspect
    from tracker.log.samples import SAMPLES_ARTIFACT, samples_json

    parent = network_record("resnet18", 1)
    parent.artifacts[SAMPLES_ARTIFACT] = samples_json({"stop_reason": "precision", "block_n": 2, "warmup_ms": [1.0],
                                                       "samples_ms": [1.5, 1.2, 1.4]})
    damaged = network_record("resnet34", 2)
    damaged.artifacts[SAMPLES_ARTIFACT] = json.dumps({"format": 1, "samples_ms": [1, 2, "a"]})
    layers = [layer_record(parent, i) for i in (1, 0)]
    net, bad, *layer_ids = logger.log([parent, damaged, *layers])
    [failed] = logger.log([network_record("mobilenet_v2", 4).fail("oom", "killed\nat the cap")])
    client = MlflowClient(logger.location.uri)
    experiment = logger.experiment.experiment_id
    own = client.create_run(experiment, run_name="script-run", tags={"mlflow.note.content": "my own run"})
    client.log_metric(own.info.run_id, "loss", float("nan"))
    client.log_metric(own.info.run_id, "latency_ms", float("-inf"))
    client.log_metric(own.info.run_id, "system/cpu_utilization_percentage", 40.0)
    client.log_param(own.info.run_id, "lr", "0.1")
    client.log_text(own.info.run_id, "hello", "notes/deep/a.txt")
    client.log_text(own.info.run_id, "b", "b.txt")
    client.set_terminated(own.info.run_id, "KILLED")
    gone = client.create_run(experiment, run_name="deleted")
    client.delete_run(gone.info.run_id)
    elsewhere = RunLogger(logger.location.uri, experiment="elsewhere", environment=ENV)
    [other] = elsewhere.log([network_record("squeezenet1_1", 1)])
    elsewhere.close()

    refs = [net[:8], net, layer_ids[0], failed[:10], bad, own.info.run_id[:12], gone.info.run_id, other]
    assert all(inspect._shown_in_sql(logger, ref) is not None for ref in refs)  # each read in SQL
    ours = [inspect.show_run(logger, ref) for ref in refs]
    with monkeypatch.context() as patched:
        patched.setattr(inspect, "_shown_in_sql", lambda *_: None)  # MLflow's client, as before
        mlflows = [inspect.show_run(logger, ref) for ref in refs]
    assert [json.dumps(o, sort_keys=True) for o in ours] == [json.dumps(m, sort_keys=True) for m in mlflows]
    shown = dict(zip(refs, ours))
    assert shown[net]["layer_runs"] == 2 and shown[net]["samples"]["count"] == 3 and shown[net[:8]] == shown[net]
    assert shown[bad]["samples"] is None and shown[bad]["samples_unreadable"]
    script = shown[own.info.run_id[:12]]
    assert list(script["artifacts"]) == ["b.txt", "notes/deep/a.txt"] and script["description"] == "my own run"
    assert script["metrics"]["latency_ms"] == float("-inf") and script["system_metrics"] == ["cpu_utilization_percentage"]
    assert shown[gone.info.run_id]["deleted"] and shown[other]["experiment"] == "elsewhere"
    assert shown[failed[:10]]["failure_reason"] == "oom"

    # a prefix of none, of a deleted run, of another experiment's run: MLflow's lookup, as before
    for ref in (gone.info.run_id[:10], other[:10]):
        assert inspect._shown_in_sql(logger, ref) is None and inspect.show_run(logger, ref)["run_id"] in (
            gone.info.run_id, other)
    with pytest.raises(TrackerError, match="no run whose id starts with"):
        inspect.show_run(logger, "0123456789ab")


def test_runs_compare_reads_what_mlflows_client_gives(logger: RunLogger, monkeypatch: pytest.MonkeyPatch) -> None:
    compares_runs_as_mlflows_client_does(logger, monkeypatch)


def compares_runs_as_mlflows_client_does(logger: RunLogger, monkeypatch: pytest.MonkeyPatch) -> None:
    """``runs compare`` of a database store's runs, read in SQL and from their artifact folders since 0.9.34
    (MLflow's client took about 4.3 s of it), compares what MLflow's client reads: two networks with their
    samples, operator tables, repeats and layers (one module called twice), two layers, a deleted run and
    another experiment's by their ids, damaged samples; and the same errors (one run twice, a failed run)."""
    from tracker.errors import TrackerError
    from tracker.log import compare
    from tracker.log.compare import compare_runs
    from tracker.log.samples import SAMPLES_ARTIFACT, samples_json

    def traced(record: RunRecord, ms: float) -> RunRecord:
        record.artifacts[SAMPLES_ARTIFACT] = samples_json({"stop_reason": "precision", "block_n": 1,
                                                           "warmup_ms": [ms], "samples_ms": [ms, ms * 1.01, ms * 0.99]})
        record.artifacts["trace/ops.json"] = json.dumps({
            "iterations": 3, "traced_iteration_ms": ms, "time_basis": "self_cpu_ms",
            "ops": [{"op": "aten::conv2d", "calls_per_iter": 2, "self_cpu_ms": ms, "cpu_total_ms": ms, "share_pct": 100.0}]})
        record.tags["tracker.trace"] = "trace/ops.json"
        return record

    a, b = traced(network_record("resnet18", 1, latency_ms=2.4), 2.3), traced(network_record("resnet18", 2, latency_ms=5.8), 5.7)
    layers = [layer_record(a, i) for i in (0, 1, 2)] + [layer_record(b, i) for i in (0, 1)]
    layers[2].params["layer_name"] = "conv1"  # a module called twice: conv1 and conv1#2
    ids = logger.log([a, b, *layers])
    [again] = logger.log([network_record("resnet18", 1, latency_ms=2.6)])  # a repeat of a's configuration
    damaged = network_record("resnet18", 4, latency_ms=9.0)
    damaged.artifacts[SAMPLES_ARTIFACT] = "{cut"
    [cut] = logger.log([damaged])
    [failed] = logger.log([network_record("resnet18", 8).fail("oom", "killed")])
    client = MlflowClient(logger.location.uri)
    [gone] = logger.log([network_record("resnet18", 16, latency_ms=30.0)])
    client.delete_run(gone)
    elsewhere = RunLogger(logger.location.uri, experiment="compared-elsewhere", environment=ENV)
    [other] = elsewhere.log([network_record("resnet18", 1, latency_ms=2.0)])
    elsewhere.close()

    pairs = [(ids[0][:8], ids[1][:8]), (ids[1], again), (ids[2], ids[5]), (ids[0], gone), (other, ids[0][:10]),
             (cut, ids[1])]
    experiment = logger.experiment
    assert all(compare._in_sql(logger.store, experiment, pair) is not None for pair in pairs)
    ours = [compare_runs(logger.store, experiment, *pair) for pair in pairs]
    wrong = [(again, again), (ids[0], failed)]
    said = []
    for pair in wrong:
        with pytest.raises(TrackerError) as exc:
            compare_runs(logger.store, experiment, *pair)
        said.append(str(exc.value))
    with monkeypatch.context() as patched:
        patched.setattr(compare, "_in_sql", lambda *_: None)  # MLflow's client, as before
        mlflows = [compare_runs(logger.store, experiment, *pair) for pair in pairs]
        for pair, message in zip(wrong, said):
            with pytest.raises(TrackerError) as exc:
                compare_runs(logger.store, experiment, *pair)
            assert str(exc.value) == message
    assert [json.dumps(o, sort_keys=True) for o in ours] == [json.dumps(m, sort_keys=True) for m in mlflows]
    first = ours[0]
    assert first["operators"]["operators"] == [1, 1] and first["a"]["samples"] and first["b"]["samples"]
    assert sorted(row["layer"] for row in first["layers"]["top"]) == ["conv0", "conv1"]
    assert first["latency"]["repeats"] == [2, 1] and ours[3]["b"]["deleted"]
    assert ours[5]["a"]["samples_unreadable"] and not ours[5]["a"]["samples"]
    # a trace tag naming a file outside the run's artifacts (set by hand): not read, said
    outside = network_record("resnet18", 32, latency_ms=40.0)
    outside.tags["tracker.trace"] = "../" * 12 + "etc/hostname"
    [nosy] = logger.log([outside])
    compared = compare_runs(logger.store, experiment, nosy, ids[1])
    assert compared["a"]["ops_unreadable"] == f"{'../' * 12}etc/hostname cannot be read (not a path inside the run's artifacts)"


def test_runs_list_store_info_and_fingerprint_list_of_a_database_store_import_no_mlflow(logger: RunLogger,
                                                                                      tmp_path: Path) -> None:
    """``runs list`` (any kind or status, in an experiment without runs too), ``store info``,
    ``fingerprint list`` and (since 0.9.34) ``runs show`` and ``runs compare`` on a database store, as a new
    process runs them: MLflow is not imported (about 2.5 s of each until 0.9.33), nor (since 0.9.35) SciPy,
    whose Mann-Whitney test took 1 s of a comparison's 1.5 to import."""
    rid, second = logger.log([network_record("resnet18", 1), network_record("resnet18", 2)])
    empty = RunLogger(str(tmp_path / "store"), experiment="empty", environment=ENV)
    assert empty.experiment.name == "empty"  # made
    empty.close()
    uri = ["--tracking-uri", str(tmp_path / "store")]
    commands = [[*uri, "-e", "tests", "runs", "list"], [*uri, "-e", "tests", "runs", "list", "--kind", "network",
                "--status", "finished", "--format", "json"], [*uri, "-e", "empty", "runs", "list"],
                [*uri, "-e", "tests", "store", "info"], [*uri, "fingerprint", "list"],
                [*uri, "-e", "tests", "runs", "show", rid[:12]], [*uri, "-e", "tests", "runs", "compare", rid, second[:8]]]
    code = ("import json, sys\nfrom tracker.cli.app import app\n"
            f"for args in {commands!r}:\n    app(args, standalone_mode=False)\n"
            "print(json.dumps(sorted(m for m in ('torch', 'mlflow', 'scipy') if m in sys.modules)), file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert ran.returncode == 0 and ran.stderr.strip().splitlines()[-1] == "[]", ran.stderr[-2000:]
    assert "resnet18 · bs1" in ran.stdout and '"model": "resnet18"' in ran.stdout  # the table, the JSON
    assert "runs_in_experiment: 2" in ran.stdout
    assert "no runs in experiment 'empty'; runs are in 'tests'" in ran.stdout
    assert "no fingerprints registered" in ran.stdout
    assert f"run {rid} · network · FINISHED" in ran.stdout and "latency +0.0 % (1.000x): not significant" in ran.stdout


def test_find_reads_past_a_newer_run_without_the_metric_asked_for(logger: RunLogger) -> None:
    finds_the_newest_run_that_logged_a_metric(logger)


def test_find_reads_past_a_newer_run_without_the_metric_asked_for_in_the_outbox() -> None:
    from tests.conftest import free_port

    logger = RunLogger(f"http://127.0.0.1:{free_port()}", experiment="outbox", environment=ENV)
    assert logger.offline  # the runs wait in the outbox, and find reads them there
    finds_the_newest_run_that_logged_a_metric(logger)


def test_reads_do_not_wait_on_a_writer(logger: RunLogger) -> None:
    """tracker's own reads (what is measured, a run by its key) read beside a writer holding the
    write lock, as WAL mode allows: until 0.9.7 each took the write lock too (BEGIN IMMEDIATE), and
    `runs list` waited its 60 s on a writer, then failed."""
    import time

    done = network_record(batch_size=1)
    logger.log([done])
    other = sqlite3.connect(logger.store.db_path, isolation_level=None, timeout=1)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process writing
        t0 = time.monotonic()
        assert logger.measured() == {done.config_key} and logger.find(done.config_key).run_id == done.run_id
        assert [r for r, _ in logger.store.runs_with_prefix(logger.experiment, done.run_id[:6], ("network",))] == [done.run_id]
        assert logger.store.schema_version() == SUPPORTED_SCHEMA
        assert time.monotonic() - t0 < 5
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_store_gone_since_it_was_opened_is_one_error(logger: RunLogger) -> None:
    """A store that cannot be read any more (its folder gone, or made read-only, after the command
    opened it): a StoreError naming it, not SQLAlchemy's traceback (until 0.9.7)."""
    import shutil

    logger.log([network_record(batch_size=1)])
    shutil.rmtree(logger.store.db_path.parent)
    with pytest.raises(StoreError, match=r"^cannot read tracking store .*: unable to open database file"):
        logger.store.measured_keys(logger.experiment)


def test_an_unsupported_schema_version_is_refused(tmp_path: Path) -> None:
    RunLogger(str(tmp_path / "s"), experiment="x", environment=ENV).close()
    db = tmp_path / "s" / "mlflow.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'abc123'")
    with pytest.raises(StoreError, match=f"abc123 is not supported.*{SUPPORTED_SCHEMA}") as refused:
        RunLogger(str(tmp_path / "s"), experiment="x", environment=ENV)
    assert f"`mlflow db upgrade sqlite:///{db}`" in str(refused.value)


def test_the_upgrade_command_a_refusal_gives_hides_a_databases_password() -> None:
    """Printed whole until 0.9.9: the password of postgresql://USER:PW@HOST/DB in an error line."""
    from tracker.log.sql_store import upgrade_command

    said = upgrade_command("postgresql://tracker:s3cret&x@db.example:5432/mlflow")
    assert "s3cret" not in said
    assert said == "`mlflow db upgrade 'postgresql://tracker:***@db.example:5432/mlflow'` (its password where *** stands)"


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="not an MLflow tracking store"):
        RunLogger(f"sqlite:///{db}", environment=ENV)
    garbage = tmp_path / "garbage" / "mlflow.db"
    garbage.parent.mkdir()
    garbage.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 8)
    with pytest.raises(StoreError) as info:  # the driver's line, without SQLAlchemy's second line linking its docs
        RunLogger(str(garbage.parent), environment=ENV).store.schema_version()
    assert str(info.value) == f"cannot read tracking database sqlite:///{garbage}: file is not a database"


def test_a_store_on_a_read_only_mount_says_so(logger: RunLogger, tmp_path: Path) -> None:
    """SQLite writes a WAL store's journal beside it even to read: a store on a read-only mount said it
    was 'not an MLflow tracking store (unable to open database file)' until 0.8.9."""
    logger.log([network_record()])
    mounted = tmp_path / "ro"
    mounted.mkdir()
    source = logger.location.db_path.parent
    if subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (not root, or no mount namespace)")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        with pytest.raises(StoreError) as info:
            RunLogger(str(mounted), environment=ENV, create=False).store.schema_version()
        assert str(info.value).startswith(f"cannot open tracking store {mounted / 'mlflow.db'}: its folder {mounted} is "
                                          "not writable")
    finally:
        subprocess.run(["umount", str(mounted)], capture_output=True)


WRITER = textwrap.dedent(
    """
    import sys
    from tests.conftest import ENV, layer_record, network_record
    from tracker.log.logger import RunLogger
    store, who, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
    logger = RunLogger(store, experiment="shared", environment=ENV)
    for b in range(batches):
        net = network_record(model=f"{who}-{b}")
        logger.log([net, *[layer_record(net, i, model=f"{who}-{b}") for i in range(19)]])
    print("ok")
    """
)


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    store = str(tmp_path / "shared")
    RunLogger(store, experiment="shared", environment=ENV).close()  # created once, as `tracker` does on first use
    root = Path(__file__).resolve().parent.parent
    writers, batches = 4, 15
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, store, f"w{w}", str(batches)], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(writers)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "ok", err[-2000:]
        assert "locked" not in err
    logger = RunLogger(store, experiment="shared", environment=ENV)
    runs = MlflowClient(logger.location.uri).search_runs([logger.experiment.experiment_id], max_results=10000)
    assert len(runs) == writers * batches * 20
    parents = {r.info.run_id for r in runs if r.data.tags["tracker.kind"] == "network"}
    assert all(r.data.tags["mlflow.parentRunId"] in parents for r in runs if r.data.tags["tracker.kind"] == "layer")


def test_concurrent_first_use_creates_one_store(tmp_path: Path) -> None:
    store = str(tmp_path / "fresh")
    root = Path(__file__).resolve().parent.parent
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, store, f"w{w}", "1"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(3)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    logger = RunLogger(store, experiment="shared", environment=ENV)
    assert len(MlflowClient(logger.location.uri).search_runs([logger.experiment.experiment_id])) == 60


def _schema(db: Path) -> dict[tuple[str, str], list[str]]:
    """Each table and index with the clauses of its SQL, in any order (MLflow's migrations
    themselves write a table's constraints in an order that differs from run to run)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return {(kind, name): sorted(line.strip().rstrip(",") for line in (sql or "").splitlines()) for kind, name, sql in rows}


def test_an_old_template_that_cannot_be_removed_does_not_cost_the_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cleaning the cache is beside the point of making a template: a file of an older MLflow
    that cannot be removed (here a folder of that name) stays, and the new template is used."""
    from tracker.log import sql_store

    monkeypatch.setenv("TRACKER_CACHE_DIR", str(tmp_path / "cache"))
    blocked = tmp_path / "cache" / "mlflow-3.16.0-abc123-empty.db"
    (blocked / "inside").mkdir(parents=True)
    gone = tmp_path / "cache" / "mlflow-3.15.0-abc123-empty.db"
    gone.write_bytes(b"")
    template = sql_store.schema_template()
    assert template == tmp_path / "cache" / f"mlflow-3.17.2-{SUPPORTED_SCHEMA}-empty.db"
    assert blocked.is_dir() and not gone.exists()


def test_a_new_store_copied_from_the_schema_template_is_the_store_mlflow_migrations_make(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    from tracker.log import sql_store

    monkeypatch.setenv("TRACKER_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    # what an older MLflow left, and a partial one of a process that was killed: removed once the
    # template of this version is made; a partial one of a process still running is its own
    stale = [tmp_path / "cache" / name for name in ("mlflow-3.16.0-abc123-empty.db", ".mlflow-3.16.0-abc123-empty.db.999999999.new")]
    running = tmp_path / "cache" / f".mlflow-3.16.0-abc123-empty.db.{os.getpid()}.new"
    for path in (*stale, running):
        path.write_bytes(b"")
    migrated = tmp_path / "migrated"
    migrated.mkdir()
    SqlAlchemyStore(f"sqlite:///{migrated / 'mlflow.db'}", str(migrated / "artifacts"))  # MLflow alone
    first = RunLogger(str(tmp_path / "a"), experiment="t", environment=ENV)  # makes the template, then copies it
    template, left = sorted((tmp_path / "cache").iterdir(), key=lambda p: p.name.startswith("."))
    assert template.name == f"mlflow-3.17.2-{SUPPORTED_SCHEMA}-empty.db" and left == running
    second = RunLogger(str(tmp_path / "b"), experiment="t", environment=ENV)
    second.log([network_record()])
    for store in ("a", "b"):
        assert _schema(tmp_path / store / "mlflow.db") == _schema(migrated / "mlflow.db")
        client = MlflowClient(f"sqlite:///{tmp_path / store / 'mlflow.db'}")
        default = client.get_experiment("0")
        assert default.name == "Default" and default.artifact_location == str(tmp_path / store / "artifacts" / "0")
    assert len(MlflowClient(second.location.uri).search_runs([second.experiment.experiment_id])) == 1
    first.close()
    second.close()
    with sqlite3.connect(template) as conn:  # the template itself holds no experiment, only the schema
        assert conn.execute("SELECT count(*) FROM experiments").fetchone() == (0,)

    template.write_bytes(b"not a database")  # a broken cache is passed over: the migrations make the store
    assert sql_store.schema_template() is None
    third = RunLogger(str(tmp_path / "c"), experiment="t", environment=ENV)
    assert _schema(tmp_path / "c" / "mlflow.db") == _schema(migrated / "mlflow.db")
    third.close()


FULL_DISK = textwrap.dedent("""
    import json, resource, signal, sys
    sys.path.insert(0, sys.argv[1])
    from tests.conftest import ENV, network_record
    from tracker.errors import StoreError
    from tracker.log.logger import RunLogger

    logger = RunLogger(sys.argv[2], "full", environment=ENV)
    logger.log([network_record("resnet18", 1)])  # the store made while there is room
    # From here on the disk is full for this process: a write past 16 KB of a file fails (EFBIG, as
    # ENOSPC would), so the store's database and its write-ahead log (a run's rows are several 4 KB
    # pages) cannot take the batch, while a small file, the outbox's, can be written
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, resource.RLIM_INFINITY))
    try:
        ids = logger.log([network_record("resnet18", 2, latency_ms=7.5)])
    except StoreError as exc:
        print(json.dumps({"error": str(exc)}))
    else:  # reads go on on a full disk; this one's limit would stop SQLite's opening too
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print(json.dumps({"ids": ids, "measured": len(logger.measured())}))
""")


def test_a_full_disk_keeps_the_batch_in_the_outbox_until_sync(tmp_path: Path) -> None:
    """A batch the embedded store cannot take (its disk full) was lost with a traceback until 0.9.1.
    It waits in the outbox, counts as measured, and `tracker sync` writes it once there is room;
    where the outbox cannot be written either, one line says it is not kept, with its figures."""
    from typer.testing import CliRunner

    from tracker.cli.app import app

    root, store = Path(__file__).resolve().parents[1], tmp_path / "store"
    env = {**os.environ, "TRACKER_RUNS_DIR": str(tmp_path / "runs")}
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(root), str(store)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["measured"] == 2 and "failed: disk I/O error; 1 run waits in the outbox" in proc.stderr
    assert len(list((tmp_path / "runs" / "outbox").glob("*.json"))) == 1
    assert [r.data.params["batch_size"] for r in MlflowClient(f"sqlite:///{store}/mlflow.db").search_runs(
        [MlflowClient(f"sqlite:///{store}/mlflow.db").get_experiment_by_name("full").experiment_id])] == ["1"]
    synced = CliRunner().invoke(app, ["--tracking-uri", str(store), "sync"], env=env)
    assert synced.exit_code == 0, synced.output
    client = MlflowClient(f"sqlite:///{store}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("full").experiment_id])
    assert sorted(r.data.params["batch_size"] for r in runs) == ["1", "2"] and out["ids"][0] in {r.info.run_id for r in runs}
    assert not list((tmp_path / "runs" / "outbox").glob("*.json"))

    # the outbox on the same full disk (here: a file where its folder should be)
    (tmp_path / "runs2").mkdir()
    (tmp_path / "runs2" / "outbox").write_text("")
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(root), str(tmp_path / "store2")], capture_output=True,
                          text=True, env={**env, "TRACKER_RUNS_DIR": str(tmp_path / "runs2")}, timeout=120)
    error = json.loads(proc.stdout.splitlines()[-1])["error"]
    assert "Traceback" not in proc.stderr and "\n" not in error
    assert "failed: disk I/O error; nor to the outbox" in error and "1 run not kept; measured resnet18 · bs2: latency_ms 7.5" in error


def test_sync_says_in_one_line_what_is_wrong_with_an_outbox_file(tmp_path: Path) -> None:
    """A batch without its store's URI was a KeyError's traceback, and one for an embedded store that
    is not there (moved, deleted) made a new empty store there, until 0.9.1."""
    from typer.testing import CliRunner

    from tracker.cli.app import app
    from tracker.log.outbox import FORMAT, outbox_dir

    outbox_dir().mkdir(parents=True)
    broken = outbox_dir() / "broken.json"
    broken.write_text(json.dumps({"format": FORMAT, "experiment": "e", "records": []}))
    out = CliRunner().invoke(app, ["sync"])
    assert out.exit_code == 1 and str(out.exception) == f"outbox file {broken} is not a whole batch (KeyError: 'uri'); " \
        "move it away to go on"
    gone = tmp_path / "gone"
    broken.write_text(json.dumps({"format": FORMAT, "uri": f"sqlite:///{gone}/mlflow.db", "experiment": "e",
                                  "records": []}))
    out = CliRunner().invoke(app, ["sync"])
    assert out.exit_code == 1 and f"is for the store {gone}, which is not there" in str(out.exception)
    assert not gone.exists()
    # a file's URI malformed is the file's fault, status 1: not a usage error, as --tracking-uri's is (0.9.10)
    from tracker.errors import OptionError

    broken.write_text(json.dumps({"format": FORMAT, "uri": "ftp://x", "experiment": "e", "records": []}))
    out = CliRunner().invoke(app, ["sync"])
    assert not isinstance(out.exception, OptionError) and str(out.exception) == (
        f"outbox file {broken}: unsupported tracking URI 'ftp://x': use http(s)://HOST:PORT for a tracking server, "
        "sqlite:///PATH.db or a folder for an embedded store, or postgresql://... for a database; move it away to go on")
    # a file that is not UTF-8 is one line too (a UnicodeDecodeError's traceback until 0.9.2) ...
    broken.write_bytes(b"\xff")
    out = CliRunner().invoke(app, ["sync"])
    assert out.exit_code == 1 and str(out.exception) == f"outbox file {broken} is not valid JSON; move it away to go on"
    broken.write_text("[" * 100_000)  # nested past Python's recursion limit: a traceback until 0.9.15
    out = CliRunner().invoke(app, ["sync"])
    assert out.exit_code == 1 and str(out.exception) == f"outbox file {broken} is not valid JSON; move it away to go on"
    # ... and, for whatever store it was, it blocks no measurement: their runs are counted without it
    from tests.conftest import ENV, network_record
    from tracker.log.logger import RunLogger

    logger = RunLogger(str(tmp_path / "store"), experiment="e", environment=ENV)
    logger.log([network_record("resnet18", 1)])
    assert logger.measured("network") == {network_record("resnet18", 1).config_key}
    logger.close()


def _ctrl_c_in_the_write(monkeypatch: pytest.MonkeyPatch, *, at_table: str = "metrics") -> list[str]:
    """The embedded store's write transaction, a Ctrl-C landing in it as the ``at_table`` rows go in
    (SIGINT to the main thread, acted on by Python as soon as the insert returns); what was inserted."""
    import signal
    import threading

    from tracker.log import sql_store

    real = sql_store.SqlStore.transaction
    inserted: list[str] = []

    def transaction(self: sql_store.SqlStore, work):  # type: ignore[no-untyped-def]
        def interrupted_work(conn):  # type: ignore[no-untyped-def]
            execute = conn.execute

            def execute_then_ctrl_c(statement, *args, **kwargs):  # type: ignore[no-untyped-def]
                result = execute(statement, *args, **kwargs)
                inserted.append(statement.table.name)
                if statement.table.name == at_table:
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]
                return result

            conn.execute = execute_then_ctrl_c
            return work(conn)

        return real(self, interrupted_work)

    monkeypatch.setattr(sql_store.SqlStore, "transaction", transaction)
    return inserted


def test_a_ctrl_c_while_the_store_takes_a_batch_acts_once_it_has_it_whole(
        logger: RunLogger, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C as the rows go in rolled the transaction back until 0.9.8: the batch lost (a KILLED
    job's run and its steps, to a second Ctrl-C) as the command said "what was logged before is kept".
    It acts once the batch is written whole, the exception saying so (``logged``, as a server's)."""
    import signal

    net = network_record(batch_size=8)
    records = [net, *(layer_record(net, i) for i in range(2))]
    inserted = _ctrl_c_in_the_write(monkeypatch)
    # Ctrl-C as Python takes it from a terminal (CI's workers inherit SIGINT ignored)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            logger.log(records)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler put back
    finally:
        signal.signal(signal.SIGINT, before)
    assert inserted == ["runs", "tags", "params", "metrics", "latest_metrics"]  # it landed mid-write, and waited
    client = MlflowClient(logger.location.uri)
    runs = {r.info.run_id: r for r in client.search_runs([logger.experiment.experiment_id])}
    assert sorted(runs) == sorted(r.run_id for r in records) == sorted(info.value.logged)  # type: ignore[attr-defined]
    assert runs[net.run_id].data.metrics["latency_ms"] == net.metrics["latency_ms"]


def test_a_ctrl_c_while_the_store_is_locked_acts_before_it_is_waited_on_again(
        logger: RunLogger, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held while the store takes a batch, a Ctrl-C is not held through the locked store's retries
    (up to 20 minutes): it acts at the first, nothing of the batch written."""
    import signal
    import threading

    import sqlalchemy

    from tracker.log import sql_store

    logger.log([network_record(batch_size=1)])  # the store made, before its lock is lost
    real = sql_store.SqlStore.transaction
    tries: list[int] = []

    def transaction(self: sql_store.SqlStore, work):  # type: ignore[no-untyped-def]
        def locked(conn):  # type: ignore[no-untyped-def]  # another writer holds the store past the busy wait
            tries.append(len(tries))
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]
            raise sqlalchemy.exc.OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))

        return real(self, locked)

    monkeypatch.setattr(sql_store.time, "sleep", lambda s: None)
    monkeypatch.setattr(sql_store.SqlStore, "transaction", transaction)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            logger.log([network_record(batch_size=2)])
    finally:
        signal.signal(signal.SIGINT, before)
    assert tries == [0] and not hasattr(info.value, "logged")
