"""The warehouse: full and incremental loads from a real embedded store, typed tables,
views on empty and loaded warehouses, deletions, descriptions into node rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ENV, layer_record, network_record, timed_probe
from tracker.describe import describe
from tracker.errors import OptionError, StoreError
from tracker.log.logger import RunLogger
from tracker.log.record import DESCRIPTION_ARTIFACT, RunRecord
from tracker.settings import resolve_location
from tracker.warehouse.load import connect, ensure_tables, load
from tracker.warehouse.source import open_source
from tracker.warehouse.views import create_views, read_sql_files, read_views


def _load(runs: Path, wh: Path, full: bool = False):
    return load(wh, open_source(resolve_location(str(runs))), full=full)


def _logger(runs: Path) -> RunLogger:
    return RunLogger(str(runs), experiment="wh", environment=ENV)


def test_every_view_builds_on_an_empty_warehouse(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    ensure_tables(con)
    names = create_views(con)
    assert {v.name for v in read_views()} == set(names) and len(names) >= 9
    for name in names:
        assert con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0] == 0
    comments = dict(con.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal").fetchall())
    assert all(comments[n] for n in names)
    # the table macros the views read (measurement_labels_of, layer_labels_of, since 0.9.10): made, with their header as comment
    macros = {v.name: v for v in read_sql_files() if v.kind == "macro"}
    assert {"measurement_labels_of", "layer_labels_of"} <= set(macros) and not set(macros) & set(names)
    made = dict(con.execute("SELECT function_name, comment FROM duckdb_functions() WHERE function_type = 'table_macro' "
                            "AND schema_name = 'main'").fetchall())
    assert {n: made.get(n) for n in macros} == {n: m.comment for n, m in macros.items()}
    assert con.execute("SELECT count(*) FROM measurement_labels_of(NULL)").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM layer_labels_of(['demo'])").fetchall() == [(0,)]


def test_a_table_macro_of_sql_is_made_before_the_views_that_read_it(tmp_path: Path) -> None:
    """A file of sql/ may hold one table macro named after it, which a view reads (a view file that began
    with anything but a SELECT was refused until 0.9.10); one misnamed, or anything else, is one line."""
    folder = tmp_path / "sql"
    folder.mkdir()
    # alphabetically the view comes first: it is made after the macro it names
    (folder / "a_view.sql").write_text("-- Runs of the batch sizes named, counted.\nSELECT count(*) AS n FROM z_of([2, 4])\n")
    (folder / "z_of.sql").write_text("-- Runs of some batch sizes.\n-- z_of(sizes): a list of batch sizes.\n"
                                     "CREATE MACRO z_of(sizes) AS TABLE\nSELECT run_id\nFROM network_runs\n"
                                     "WHERE list_contains(CAST(sizes AS BIGINT[]), batch_size);\n")
    con = connect(tmp_path / "w.duckdb")
    ensure_tables(con)
    assert create_views(con, folder) == ["a_view"]
    con.execute("INSERT INTO network_runs (run_id, status, batch_size) VALUES ('r1', 'FINISHED', 2), ('r2', 'FINISHED', 8)")
    assert con.execute("SELECT n FROM a_view").fetchall() == [(1,)]
    assert con.execute("SELECT run_id FROM z_of([8])").fetchall() == [("r2",)]
    assert con.execute("SELECT comment FROM duckdb_functions() WHERE function_name = 'z_of'").fetchall() == [
        ("Runs of some batch sizes. z_of(sizes): a list of batch sizes.",)]
    assert [v.name for v in read_views(folder)] == ["a_view"]
    (folder / "z_of.sql").write_text("-- Misnamed.\nCREATE MACRO y_of(sizes) AS TABLE SELECT 1\n")
    with pytest.raises(StoreError, match=r"^z_of\.sql: a macro file holds the macro named after it \(z_of\), not y_of$"):
        read_sql_files(folder)
    (folder / "z_of.sql").write_text("-- A scalar macro.\nCREATE MACRO z_of(a) AS a + 1\n")
    with pytest.raises(StoreError, match=r"^z_of\.sql: a view file holds one SELECT after its header comment"):
        read_sql_files(folder)


def test_a_store_of_failed_runs_alone_loads(tmp_path: Path) -> None:
    """No run logged a metric (a first campaign that failed throughout): the store's metrics
    read back with no rows, hence no column types, and the load still goes through."""
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    failed = network_record("resnet18", 64)
    failed.metrics = {}
    # a write cut short (a process killed while it wrote to a server) leaves a run RUNNING: not a measurement
    cut = network_record("resnet18", 32)
    cut.metrics, cut.status = {}, "RUNNING"
    log = _logger(runs)
    log.log([failed.fail("oom"), cut])
    log.close()
    assert _load(runs, wh).runs_changed == 2
    with duckdb.connect(str(wh), read_only=True) as con:
        assert con.sql("SELECT w.status, r.failure_reason, w.batch_size FROM whole_network_runs w JOIN runs r USING (run_id)").fetchall() == [
            ("FAILED", "oom", 64)]
        assert con.sql("SELECT status FROM network_runs ORDER BY status").fetchall() == [("FAILED",), ("RUNNING",)]
        assert con.sql("SELECT count(*) FROM metrics").fetchall() == [(0,)]


def test_batch_views_tell_a_network_at_two_input_sizes_apart_and_leave_training_jobs_out(tmp_path: Path) -> None:
    """batch_scaling, oom_boundary, device_comparison and measurements_by_mode had no input_size
    until 0.9.0 (one network at 64 and 224 px read as two unlabelled chains); batch_scaling took a
    training job's throughput (its data wait counted) beside steps' (batch over median)."""
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    records = []
    for size, model_hash in ((64, "h64"), (224, "h224")):
        for bs in (1, 2):
            r = network_record("squeezenet1_1", bs)
            r.params.update(input_size=size, model_hash=model_hash)
            r.key_fields["input_size"] = size
            records.append(r)
        oom = network_record("squeezenet1_1", 4)
        oom.params.update(input_size=size, model_hash=model_hash)
        oom.key_fields["input_size"] = size
        oom.metrics = {}
        records.append(oom.fail("oom"))
    job = RunRecord(kind="training", name="job", params=dict(network_record("resnet18", 8).params, phase="training"),
                    metrics={"latency_ms": 100.0, "samples_count": 5.0, "throughput_per_s": 60.0, "data_wait_frac": 0.2,
                             "step_time_ms": 120.0}, key_fields={"job": 1})
    log = _logger(runs)
    log.log([*records, job])
    log.close()
    _load(runs, wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        assert con.sql("SELECT input_size, batch_size, latency_vs_smallest_batch FROM batch_scaling").fetchall() == [
            (64, 1, 1.0), (64, 2, 1.0), (224, 1, 1.0), (224, 2, 1.0)]  # the job left out
        assert con.sql("SELECT input_size, largest_fitting_batch, smallest_oom_batch FROM oom_boundary "
                       "WHERE model = 'squeezenet1_1' ORDER BY input_size").fetchall() == [(64, 2, 4), (224, 2, 4)]
        for view in ("device_comparison", "measurements_by_mode"):
            assert "input_size" in [c[0] for c in con.sql(f"DESCRIBE {view}").fetchall()]


def test_full_then_incremental_load_with_types_failures_and_deletions(tmp_path: Path) -> None:
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    log = _logger(runs)
    net = network_record("resnet18", 1, peak_mem_mb=100.0)
    desc = describe("resnet18", 64)
    net.params["model_hash"] = desc.description_hash
    net.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
    layers = [layer_record(net, i) for i in range(3)]
    failed = network_record("resnet18", 512).fail("oom", "CUDA out of memory")
    failed.params["memory_limit_mb"] = 4000.0  # under a cap: the view says which (since 0.9.1)
    log.log([net, *layers, failed])

    first = _load(runs, wh)
    assert first.mode == "full" and first.runs_changed == 5 and first.descriptions_added == 1
    con = duckdb.connect(str(wh), read_only=True)
    types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'network_runs'").fetchall())
    assert types["batch_size"] == "BIGINT" and types["latency_ms"] == "DOUBLE" and types["end_time"] == "TIMESTAMP"
    assert con.execute("SELECT batch_size, latency_ms, peak_mem_mb FROM latest_measurements").fetchall() == [(1, 12.5, 100.0)]
    assert con.execute("SELECT failure_reason, batch_size, input_size, memory_limit_mb FROM failed_runs").fetchall() == [
        ("oom", 512, 224, 4000.0)]
    assert con.execute("SELECT count(*) FROM layer_latency").fetchall()[0][0] == 3
    nodes = con.execute("SELECT count(*) FROM network_nodes WHERE model_hash = ?", [desc.description_hash]).fetchall()[0][0]
    assert nodes == len(desc.nodes)
    assert con.execute("SELECT host, threads FROM environments WHERE run_id = ?", [net.run_id]).fetchall()[0] == ("test-host", 2)
    con.close()

    again = _load(runs, wh)
    assert again.mode == "incremental" and again.runs_changed == 0 and again.runs_deleted == 0

    newer = network_record("resnet18", 4)
    log.log([newer])
    MlflowClient(resolve_location(str(runs)).uri).delete_run(layers[0].run_id)
    inc = _load(runs, wh)
    assert (inc.runs_changed, inc.runs_deleted) == (1, 1)
    con = duckdb.connect(str(wh), read_only=True)
    assert sorted(con.execute("SELECT batch_size FROM measurements").fetchall()) == [(1,), (4,)]
    assert con.execute("SELECT count(*) FROM layer_runs").fetchall()[0][0] == 2
    assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 5
    con.close()

    # Edits of a finished run (a note from the UI, a tag set by hand, a metric logged late)
    # are picked up by the next incremental load; untouched runs are not read again.
    client = MlflowClient(resolve_location(str(runs)).uri)
    client.set_tag(net.run_id, "mlflow.note.content", "fan was broken")
    client.log_metric(failed.run_id, "retries", 2.0)
    edited = _load(runs, wh)
    assert (edited.mode, edited.runs_changed, edited.runs_deleted) == ("incremental", 2, 0)
    con = duckdb.connect(str(wh), read_only=True)
    assert con.execute("SELECT value FROM tags WHERE run_id = ? AND key = 'mlflow.note.content'",
                       [net.run_id]).fetchall() == [("fan was broken",)]
    assert con.execute("SELECT value FROM metrics WHERE run_id = ? AND key = 'retries'", [failed.run_id]).fetchall() == [(2.0,)]
    assert con.execute("SELECT count(*) FROM network_runs").fetchall()[0][0] == 3  # no duplicates
    con.close()
    assert _load(runs, wh).runs_changed == 0
    # An edit that keeps the value's length moves the token too.
    client.set_tag(net.run_id, "mlflow.note.content", "fan was mended")
    assert (_load(runs, wh).runs_changed, _load(runs, wh).runs_changed) == (1, 0)
    con = duckdb.connect(str(wh), read_only=True)
    assert con.execute("SELECT value FROM tags WHERE run_id = ? AND key = 'mlflow.note.content'",
                       [net.run_id]).fetchall() == [("fan was mended",)]
    con.close()

    # A warehouse made by an older tracker, before a schema field (here repeat_key) was added: the
    # typed table is made again and every run loaded again, instead of an insert that fails.
    con = duckdb.connect(str(wh))
    con.execute("ALTER TABLE network_runs DROP COLUMN repeat_key")
    con.close()
    upgraded = _load(runs, wh)
    assert (upgraded.mode, upgraded.runs_changed) == ("full", 5)
    con = duckdb.connect(str(wh), read_only=True)
    assert "repeat_key" in {r[0] for r in con.execute("DESCRIBE network_runs").fetchall()}
    assert con.execute("SELECT count(*) FROM network_runs").fetchall()[0][0] == 3
    con.close()


def test_the_speed_probes_version_is_a_column_where_its_time_is(tmp_path: Path) -> None:
    """Another version of the speed probe is another unit, and the warehouse had its time, speed_probe_ms,
    but not its version (the tag's text in a column speed_probe of the typed tables alone, until 0.9.11):
    speed_probe_version, an integer, NULL where a run has no probe, in the typed tables, whole_network_runs
    and the views over it; repeats of two versions have no probe_spread_rel. A warehouse an older tracker
    loaded says so where the column is read, and its next load loads it again in full."""
    from tracker.profile.probe import measured_speed

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    log = _logger(runs)
    one = timed_probe(network_record("resnet18", 1, latency_ms=10.0), 2.0)
    layers = [timed_probe(layer_record(one, 0), 2.5), layer_record(one, 1)]  # the second layer without a probe
    two = timed_probe(network_record("resnet18", 1, latency_ms=20.0), 3.0, version=2)  # a repeat, another probe
    two.tags["tracker.repeat_key"] = "r1"
    same = [timed_probe(network_record("mobilenet_v2", 1, latency_ms=latency), probe) for latency, probe in ((8.0, 1.0), (9.0, 1.5))]
    same[1].tags["tracker.repeat_key"] = "r1"
    bare = network_record("squeezenet1_1", 1)  # no probe (a run of tracker 0.9.8, an import)
    log.log([one, *layers, two, *same, bare])
    log.close()
    assert _load(runs, wh).mode == "full"
    with duckdb.connect(str(wh), read_only=True) as con:
        for table in ("network_runs", "layer_runs", "training_runs"):
            types = dict(con.sql(f"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = "
                                 f"'{table}'").fetchall())
            assert types.get("speed_probe_version") == "INTEGER" and "speed_probe" not in types, table
        version = dict(con.sql("SELECT run_id, speed_probe_version FROM whole_network_runs").fetchall())
        assert version == {one.run_id: 1, two.run_id: 2, same[0].run_id: 1, same[1].run_id: 1, bare.run_id: None}
        assert dict(con.sql("SELECT run_id, speed_probe_version FROM measurements").fetchall()) == version
        assert dict(con.sql("SELECT layer_index, speed_probe_version FROM layer_runs").fetchall()) == {0: 1, 1: None}
        spread = dict(con.sql("SELECT model, probe_spread_rel FROM measurement_repeats").fetchall())
        assert spread["resnet18"] is None and spread["mobilenet_v2"] == pytest.approx((8.0 / 1.0) / (9.0 / 1.5) - 1)
    # the machine's usual speed in a mode: over its own probe version's measurements alone
    assert measured_speed(wh, "cpu-t2") == {"speed_probe_ms": 1.5, "measurements": 3, "speed_probe_version": 1,
                                            "other_versions": 1}
    assert measured_speed(wh, "cpu-t2", 2) == {"speed_probe_ms": 3.0, "measurements": 1, "speed_probe_version": 2,
                                               "other_versions": 3}

    with duckdb.connect(str(wh)) as con:  # as tracker 0.9.10 left it: the tag's text, views without the version
        for table in ("network_runs", "training_runs", "layer_runs"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN speed_probe_version")
            con.execute(f"ALTER TABLE {table} ADD COLUMN speed_probe VARCHAR")
        con.execute("CREATE OR REPLACE VIEW whole_network_runs AS SELECT run_id, mode, status, speed_probe_ms FROM network_runs")
    with pytest.raises(StoreError, match=r"has the views of an older tracker, without speed_probe_version .*: "
                                         r"tracker warehouse load -w "):
        measured_speed(wh, "cpu-t2")
    upgraded = _load(runs, wh)
    assert (upgraded.mode, upgraded.runs_changed) == ("full", 7)
    with duckdb.connect(str(wh), read_only=True) as con:
        assert dict(con.sql("SELECT run_id, speed_probe_version FROM whole_network_runs").fetchall()) == version
    assert measured_speed(wh, "cpu-t2")["speed_probe_ms"] == 1.5


def test_device_and_mode_views_carry_power_and_gpu_utilisation(tmp_path: Path) -> None:
    """device_comparison and measurements_by_mode carry every target a device reports, power and
    GPU utilisation included; a device that reports neither has them NULL, not 0."""
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    boards = (("jetson-agx-orin", 10.0, 21.0, 35.0), ("jetson-tx2", 40.0, 9.5, 71.0), ("cpu-box", 80.0, None, None))
    for board, latency, power, util in boards:
        record = network_record("resnet18", 1, latency_ms=latency,
                                **({"power_w": power, "gpu_util_pct": util} if power is not None else {}))
        record.key_fields = {"model": "resnet18", "batch_size": 1, "board": board}
        RunLogger(str(runs), experiment="wh", environment={**ENV, "env.device_model": board}).log([record])
    _load(runs, wh)
    con = duckdb.connect(str(wh), read_only=True)
    try:
        compared = con.execute("SELECT device_name, latency_vs_fastest, power_w, gpu_util_pct, devices "
                               "FROM device_comparison ORDER BY latency_ms").fetchall()
        by_mode = con.execute("SELECT device_name, power_w, gpu_util_pct FROM measurements_by_mode "
                              "ORDER BY latency_ms").fetchall()
    finally:
        con.close()
    assert compared == [(b, lat / 10.0, p, u, 3) for b, lat, p, u in boards]
    assert by_mode == [(b, p, u) for b, _, p, u in boards]


def _loaded(tmp_path: Path) -> tuple[Path, Path, RunRecord]:
    runs, wh = tmp_path / "runs", tmp_path / "runs" / "warehouse.duckdb"
    net = network_record("mobilenet_v3_small", 2)
    desc = describe("mobilenet_v3_small", 64)
    net.params["model_hash"] = desc.description_hash
    net.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
    _logger(runs).log([net])
    return runs, wh, net


def test_sql_features_are_the_feature_modules_aggregates(tmp_path: Path) -> None:
    from tracker.describe.features import aggregates

    runs, wh, net = _loaded(tmp_path)
    _load(runs, wh)
    con = duckdb.connect(str(wh), read_only=True)
    row = con.sql("SELECT * FROM network_features").to_arrow_table().to_pylist()[0]
    con.close()
    expected = aggregates(describe("mobilenet_v3_small", 64))
    shared = set(row) & set(expected) - {"model_hash", "model"}
    assert len(shared) >= 30
    assert {k: row[k] for k in shared} == {k: expected[k] for k in shared}


@pytest.mark.parametrize("older", ["kept_activation_bytes", "live_activation_bytes", "version 3", "no version"])
def test_node_rows_another_version_computed_are_computed_again_in_full(tmp_path: Path, older: str) -> None:
    """Node rows of warehouses made before a node column was added (kept activations; live ones,
    0.7.9), or computed by other feature code (a NODE_ROWS_VERSION of its own; before 0.8.0, none
    kept): every network is described again, once, and the features view has this version's."""
    from tracker.describe.features import NODE_ROWS_VERSION, aggregates

    runs, wh, net = _loaded(tmp_path)
    _load(runs, wh)
    con = duckdb.connect(str(wh))  # as an older tracker made it
    if older.endswith("_bytes"):
        con.execute(f"ALTER TABLE network_nodes DROP COLUMN {older}")
    if older == "version 3":
        con.execute("UPDATE network_nodes SET live_activation_bytes = 1")
        con.execute("UPDATE node_rows_version SET version = 3")
    else:
        con.execute("DROP TABLE node_rows_version")
    con.close()
    report = _load(runs, wh)
    assert report.mode == "full" and report.descriptions_added == 1
    # said, with the version that had counted them (none recorded before 0.8.0): since 0.9.25
    assert report.node_rows_recounted and report.node_rows_version_before == (3 if older == "version 3" else None)
    again = _load(runs, wh)
    assert again.mode == "incremental" and not again.node_rows_recounted  # once
    if older == "version 3":  # and the command says which fingerprints to train again
        from typer.testing import CliRunner

        from tracker.cli.app import app

        with duckdb.connect(str(wh)) as con:
            con.execute("UPDATE node_rows_version SET version = 8")
        said = CliRunner().invoke(app, ["--tracking-uri", str(runs), "warehouse", "load", "-w", str(wh)])
        assert said.exit_code == 0 and said.stdout.startswith("full load") and said.stdout.endswith(
            f"\nnote: node rows version 8 counted again as this tracker's version {NODE_ROWS_VERSION}: a fingerprint "
            "learnt from the old ones says so in tracker predict (tracker fingerprint list marks it); train it again "
            "on this warehouse\n"), said.output
        assert "note:" not in CliRunner().invoke(app, ["--tracking-uri", str(runs), "warehouse", "load", "-w",
                                                      str(wh)]).stdout
    con = duckdb.connect(str(wh), read_only=True)
    values = con.execute("SELECT kept_activation_bytes, batch_kept_activation_bytes, live_activation_bytes, "
                         "batch_live_activation_bytes FROM measurement_features").fetchall()
    version = con.execute("SELECT version FROM node_rows_version").fetchall()
    con.close()
    agg = aggregates(describe("mobilenet_v3_small", 64))
    kept, live = agg["kept_activation_bytes"], agg["live_activation_bytes"]
    assert kept > 0 and live > 0 and values and all(v == (kept, 2 * kept, live, 2 * live) for v in values), values
    assert version == [(NODE_ROWS_VERSION,)]


def test_a_warehouse_from_before_traces_is_loaded_again_in_full(tmp_path: Path) -> None:
    """A run traced meanwhile (profile --trace) gets its operator rows: a warehouse without
    trace_ops is loaded again in full, once; a broken operator table costs its rows, not the load."""
    runs, wh, net = _loaded(tmp_path)
    _load(runs, wh)
    traced, broken, deep = network_record("resnet18", 1), network_record("resnet18", 2), network_record("resnet18", 4)
    ops = [{"op": "aten::conv2d", "calls_per_iter": 20.0, "self_cpu_ms": 0.5, "cpu_total_ms": 9.0, "share_pct": 80.0},
           {"op": "aten::add_", "calls_per_iter": 8.0, "self_cpu_ms": 0.125, "cpu_total_ms": 0.125, "share_pct": 20.0}]
    traced.artifacts["trace/ops.json"] = json.dumps({"iterations": 3, "time_basis": "self_cpu_ms", "ops": ops})
    broken.artifacts["trace/ops.json"] = "{not json"
    deep.artifacts["trace/ops.json"] = "[" * 100_000  # a RecursionError that ended the load until 0.9.15
    binary = network_record("resnet18", 8)
    binary.artifacts["trace/ops.json"] = traced.artifacts["trace/ops.json"]
    for record in (traced, broken, deep, binary):
        record.tags["tracker.trace"] = "trace/ops.json"
    _logger(runs).log([traced, broken, deep, binary])  # as if traced by 0.7.1 while the warehouse was older
    # bytes that are not UTF-8, in the store's own folder: a UnicodeDecodeError that ended the load until 0.9.15
    [kept] = (p for p in runs.rglob("ops.json") if binary.run_id in p.as_posix())
    kept.write_bytes(b"\xff" + kept.read_bytes())
    con = duckdb.connect(str(wh))
    con.execute("DROP TABLE trace_ops")  # as a tracker before 0.7.1 made it
    con.close()
    assert _load(runs, wh).mode == "full"
    con = duckdb.connect(str(wh), read_only=True)
    rows = con.execute("SELECT run_id, op, calls_per_iter, self_ms, op_rank FROM operator_time ORDER BY op_rank").fetchall()
    con.close()
    assert rows == [(traced.run_id, "aten::conv2d", 20.0, 0.5, 1), (traced.run_id, "aten::add_", 8.0, 0.125, 2)]
    assert _load(runs, wh).mode == "incremental"


def test_a_gpu_trace_loads_its_kernels_and_a_warehouse_without_them_is_loaded_again(tmp_path: Path) -> None:
    """A run traced on a GPU (tracker 0.7.3 on) has its kernels beside its operators: they load
    into trace_kernels (view kernel_time: ranked, with the device's busy time); a warehouse made
    before that table is loaded again in full, once."""
    runs, wh, net = _loaded(tmp_path)
    _load(runs, wh)
    traced = network_record("resnet18", 1)
    ops = [{"op": "aten::cudnn_convolution", "calls_per_iter": 20.0, "self_cpu_ms": 0.8, "cpu_total_ms": 2.3,
            "self_device_ms": 0.32, "share_pct": 80.0},
           {"op": "aten::clamp_min_", "calls_per_iter": 17.0, "self_cpu_ms": 0.14, "cpu_total_ms": 0.29,
            "self_device_ms": 0.08, "share_pct": 20.0}]
    kernels = [{"kernel": "sm80_xmma_fprop_implicit_gemm", "calls_per_iter": 16.0, "self_device_ms": 0.17, "share_pct": 42.5},
               {"kernel": "nchwToNhwcKernel", "calls_per_iter": 32.0, "self_device_ms": 0.15, "share_pct": 37.5},
               {"kernel": "vectorized_elementwise_kernel", "calls_per_iter": 17.0, "self_device_ms": 0.08, "share_pct": 20.0}]
    traced.artifacts["trace/ops.json"] = json.dumps({"iterations": 3, "time_basis": "self_device_ms", "ops": ops,
                                                     "kernels": kernels, "device_busy_ms": 0.4})
    traced.tags["tracker.trace"] = "trace/ops.json"
    _logger(runs).log([traced])
    con = duckdb.connect(str(wh))
    con.execute("DROP TABLE trace_kernels")  # as a tracker before 0.7.3 made it
    con.close()
    assert _load(runs, wh).mode == "full"
    con = duckdb.connect(str(wh), read_only=True)
    rows = con.execute("SELECT run_id, kernel, calls_per_iter, kernel_rank, round(device_busy_ms, 6) FROM kernel_time "
                       "ORDER BY kernel_rank").fetchall()
    ops_rows = con.execute("SELECT op, self_ms, op_rank FROM operator_time ORDER BY op_rank").fetchall()
    con.close()
    assert rows == [(traced.run_id, k["kernel"], k["calls_per_iter"], i + 1, 0.4) for i, k in enumerate(kernels)]
    assert ops_rows == [("aten::cudnn_convolution", 0.32, 1), ("aten::clamp_min_", 0.08, 2)]  # the device's time
    assert _load(runs, wh).mode == "incremental"


def test_cli_load_query_views_export_and_a_read_only_warehouse(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tracker.cli.app import app

    runs, wh, net = _loaded(tmp_path)
    runner = CliRunner()
    loaded = runner.invoke(app, ["--tracking-uri", str(runs), "warehouse", "load", "--format", "json"])
    assert loaded.exit_code == 0, loaded.output
    assert json.loads(loaded.output)["runs_changed"] == 1
    out = runner.invoke(app, ["sql", "SELECT model, batch_size FROM latest_measurements", "--format", "json"])
    assert out.exit_code == 0 and json.loads(out.output) == [{"model": "mobilenet_v3_small", "batch_size": 2}]
    csv_out = runner.invoke(app, ["sql", "SELECT batch_size, latency_ms FROM measurements", "--format", "csv"])
    assert csv_out.output.splitlines() == ["batch_size,latency_ms", "2,12.5"]
    pq = tmp_path / "m.parquet"
    assert runner.invoke(app, ["sql", "SELECT * FROM measurements", "--format", "parquet", "-o", str(pq)]).exit_code == 0
    assert duckdb.sql(f"SELECT count(*) FROM '{pq}'").fetchall() == [(1,)]

    for bad in ("DROP VIEW measurements", "DELETE FROM runs", "CREATE TABLE x (a INT)"):
        refused = runner.invoke(app, ["sql", bad])
        assert refused.exit_code == 1 and "read-only" in str(refused.exception)
    # nor reaches a file: COPY ... TO wrote over any, the warehouse's own included, until 0.9.3
    for bad in (f"COPY (SELECT 1 AS a) TO '{tmp_path / 'leak.csv'}' (FORMAT csv)", f"SELECT * FROM read_csv('{pq}')",
                f"ATTACH '{tmp_path / 'other.duckdb'}'"):
        refused = runner.invoke(app, ["sql", bad])
        assert refused.exit_code == 1 and "file system operations are disabled" in str(refused.exception), bad
    assert not (tmp_path / "leak.csv").exists() and not (tmp_path / "other.duckdb").exists()
    # nor -o over a database, the warehouse or a store's (a table's text was written over either until 0.9.4),
    # nor into a file of a suffix tracker does not write (the table's text went into out.xlsx)
    store_db, before = runs / "mlflow.db", (runs / "mlflow.db").read_bytes()
    for target, extra in ((wh, ["--format", "csv"]), (store_db, ["--format", "json"]), (tmp_path / "copy.csv", [])):
        if target.name == "copy.csv":
            target.write_bytes(before)
        refused = runner.invoke(app, ["sql", "SELECT 1 AS a", "-o", str(target), *extra])
        assert refused.exit_code == 1 and str(refused.exception) == (
            f"--output {target} is a database (a warehouse, or a tracking store's): a result is not written over it; "
            "choose another file")
    assert store_db.read_bytes() == before and runner.invoke(app, ["sql", "SELECT 1 AS a"]).exit_code == 0
    # nor over a database's side file: a result over mlflow.db-wal lost the commits not yet in the database (until 0.9.6)
    for base, side in (("mlflow.db", "-wal"), ("mlflow.db", "-shm"), ("mlflow.db", "-journal"), (wh.name, ".wal")):
        target = (runs if base == "mlflow.db" else wh.parent) / (base + side)
        kept = target.read_bytes() if target.exists() else None
        refused = runner.invoke(app, ["sql", "SELECT 1 AS a", "-o", str(target), "--format", "csv"])
        assert refused.exit_code == 1 and str(refused.exception).startswith(
            f"--output {target} is where the database {base} keeps"), refused.exception
        assert (target.read_bytes() if target.exists() else None) == kept
    unknown = runner.invoke(app, ["sql", "SELECT 1 AS a", "-o", str(tmp_path / "out.xlsx")])
    assert unknown.exit_code == 1 and str(unknown.exception).startswith(f"--output {tmp_path / 'out.xlsx'}: tracker "
                                                                         "writes .csv, .json, .parquet files")
    assert not (tmp_path / "out.xlsx").exists()
    mixed = runner.invoke(app, ["sql", "SELECT 1 AS a", "-o", str(tmp_path / "out.parquet"), "--format", "csv"])
    assert mixed.exit_code == 1 and str(mixed.exception).startswith(  # CSV in out.parquet until 0.9.6
        f"--output {tmp_path / 'out.parquet'} with --format csv: its suffix says parquet")
    assert runner.invoke(app, ["sql", "SELECT 1 AS a", "--format", "csv"]).output == "a\n1\n"  # CRLF until 0.9.6
    text = runner.invoke(app, ["sql", "SELECT 1 AS a", "-o", str(tmp_path / "out.txt"), "--format", "table"])
    assert text.exit_code == 0 and (tmp_path / "out.txt").read_text().endswith("(1 row)\n")
    for empty, said in ((";", "is empty"), ("-- a comment alone", "holds no statement, only comments"),
                        ("/* another */", "holds no statement, only comments")):  # "(0 rows)" until 0.9.4
        refused = runner.invoke(app, ["sql", "--", empty])  # a usage error (OptionError: status 2 through main)
        assert isinstance(refused.exception, OptionError) and f"{empty!r} {said}" in str(refused.exception), empty
    one = runner.invoke(app, ["sql", "SELECT 1 AS a"])
    assert one.exit_code == 0 and one.output.rstrip().endswith("(1 row)")
    typo = runner.invoke(app, ["sql", "SELEC 1"])
    assert typo.exit_code == 1 and "syntax error" in str(typo.exception)
    near = runner.invoke(app, ["sql", "SELECT * FROM measurement"])  # DuckDB's hint is kept, on the same line
    assert near.exit_code == 1 and str(near.exception).endswith('Did you mean "measurements"?')
    assert "\n" not in str(near.exception) and "LINE 1" not in str(near.exception)
    assert runner.invoke(app, ["sql", "SELECT count(*) AS n FROM measurements", "--format", "json"]).output.count('"n": 1')
    # --param binds the query's $NAME (text, cast where compared), never pasted into the SQL: a quote is a value's
    bound = "SELECT model FROM measurements WHERE batch_size = $bs AND model <> $other"
    for bs, rows in (("2", [{"model": "mobilenet_v3_small"}]), ("4", [])):
        got = runner.invoke(app, ["sql", bound, "--param", f"bs={bs}", "--param", "other=x' OR '1'='1", "--format", "json"])
        assert got.exit_code == 0 and json.loads(got.output) == rows, got.output
    for params, line in ((["bs=2"], "the query's $other not given: add --param other=VALUE"),
                         (["bs=2", "other=x", "z=1"], "--param z: the query has no $z"),
                         (["bs"], "--param 'bs': give NAME=VALUE, NAME a parameter of the query ($NAME) such as bs"),
                         (["bs=2", "bs=3"], "--param bs is given twice"),
                         (["bs=2", "BS=3"], "--param bs and --param BS are one parameter (SQL names ignore case): "
                                            "give one")):
        refused = runner.invoke(app, ["sql", bound, *(a for p in params for a in ("--param", p))])
        assert refused.exit_code == 1 and str(refused.exception) == line, (params, refused.exception)
    for query, line in (("SELECT 1", "the query has no parameter ($NAME): leave out --param"),

                        ("SELECT ?", "the query has positional parameters (? or $1): name them ($bs) and give "
                                     "--param bs=VALUE")):
        refused = runner.invoke(app, ["sql", query, "--param", "bs=1"])
        assert refused.exit_code == 1 and str(refused.exception) == line, (query, refused.exception)
    summed = runner.invoke(app, ["sql", "SELECT $bs + 1 AS b", "--param", "bs=1"])  # text in arithmetic: a cast named
    assert summed.exit_code == 1 and str(summed.exception).startswith("Binder Error: Could not choose a best candidate")
    assert str(summed.exception).endswith("(a --param is text: cast it where a number is meant, $bs::INTEGER)")
    two = runner.invoke(app, ["sql", "SELECT $a + 1 AS x, $b AS y", "--param", "b=1", "--param", "a=2"])
    assert str(two.exception).endswith("(a --param is text: cast it where a number is meant, $NAME::INTEGER)")
    cast = runner.invoke(app, ["sql", "SELECT $bs::INTEGER + 1 AS b", "--param", "bs=1", "--format", "json"])
    assert json.loads(cast.output) == [{"b": 2}]

    # A join's two run_id columns: each its own values in every format (until 0.9.1 the first's values were shown
    # under both, or the second dropped); values shown as they are, never read as markup; ids never cut
    join = "SELECT m.run_id, m.model AS run_id, '[/] :x: ' || m.model AS m FROM measurements m"
    assert json.loads(runner.invoke(app, ["sql", join, "--format", "json"]).output) == [
        {"run_id": net.run_id, "run_id_1": "mobilenet_v3_small", "m": "[/] :x: mobilenet_v3_small"}]
    assert runner.invoke(app, ["sql", join, "--format", "csv"]).output.splitlines() == [
        "run_id,run_id_1,m", f"{net.run_id},mobilenet_v3_small,[/] :x: mobilenet_v3_small"]
    table = runner.invoke(app, ["sql", join])
    assert table.exit_code == 0 and f"│ {net.run_id} │ mobilenet_v3_small │ [/] :x: mobilenet_v3_small │" in table.output
    odd = json.loads(runner.invoke(app, ["sql", "SELECT 1/0 AS x, [1, 2] AS l", "--format", "json"]).output)
    assert odd == [{"x": None, "l": [1, 2]}]  # not Infinity, which is no JSON
    # in a CSV as DuckDB's export writes them, apart from a value that is absent (all empty until 0.9.6)
    edges = "SELECT 1/0 AS a, -1/0 AS b, 'nan'::DOUBLE AS c, NULL::DOUBLE AS d, ['nan'::DOUBLE] AS l"
    assert runner.invoke(app, ["sql", edges, "--format", "csv"]).output.splitlines() == ["a,b,c,d,l", "inf,-inf,nan,,[NaN]"]
    two = runner.invoke(app, ["sql", "SELECT 1; SELECT 2"])  # DuckDB ran both and answered the last
    # a usage error, main's status 2 (1 until 0.9.11)
    # said as what to do (it said "give one (tracker sql runs each on its own)", as if it ran them one by one,
    # until 0.9.11)
    assert isinstance(two.exception, OptionError) and str(two.exception) == (
        "QUERY holds 2 statements: tracker sql runs one; give each to a tracker sql of its own")
    by_suffix = tmp_path / "out" / "m.csv"  # a file's suffix says its format (a table went into it), its folder made
    assert runner.invoke(app, ["sql", "SELECT batch_size FROM measurements", "-o", str(by_suffix)]).exit_code == 0
    assert by_suffix.read_text().splitlines() == ["batch_size", "2"]

    views = runner.invoke(app, ["views", "--format", "json"])
    listed = {v["view"]: v["comment"] for v in json.loads(views.output)}
    assert {v.name for v in read_views()} == set(listed) and all(listed.values())
    exported = runner.invoke(app, ["warehouse", "export", str(tmp_path / "pq")])
    assert exported.exit_code == 0
    names = {p.stem for p in (tmp_path / "pq").glob("*.parquet")}
    assert {"runs", "network_runs", "network_nodes", "latest_measurements", "measurement_features"} <= names
    assert exported.output == f"wrote {len(names)} Parquet files to {tmp_path / 'pq'}\n"
    for fmt, word in (("csv", "CSV"), ("json", "JSON")):  # Parquet only until 0.9.5
        again = runner.invoke(app, ["warehouse", "export", str(tmp_path / fmt), "--format", fmt])
        assert again.output == f"wrote {len(names)} {word} files to {tmp_path / fmt}\n", again.output
        assert {p.stem for p in (tmp_path / fmt).glob(f"*.{fmt}")} == names
    rows = (tmp_path / "csv" / "measurements.csv").read_text().splitlines()
    assert "run_id" in rows[0].split(",") and len(rows) == 2 and net.run_id in rows[1]
    assert json.loads((tmp_path / "json" / "measurements.json").read_text().splitlines()[0])["run_id"] == net.run_id
    # in JSON a NaN or an infinity is null, as sql writes it (NaN and Infinity, which JSON has not, until 0.9.6)
    odd_wh = tmp_path / "odd.duckdb"
    shutil.copy(wh, odd_wh)
    with duckdb.connect(str(odd_wh)) as con:
        con.execute("UPDATE metrics SET value = CASE WHEN key = 'latency_ms' THEN 'nan'::DOUBLE ELSE 'inf'::DOUBLE END")
    assert runner.invoke(app, ["warehouse", "export", str(tmp_path / "oddjson"), "--format", "json", "-w",
                               str(odd_wh)]).exit_code == 0

    def strict(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    rows = [json.loads(line, parse_constant=strict) for line in (tmp_path / "oddjson" / "metrics.json").read_text().splitlines()]
    assert rows and all(r["value"] is None for r in rows)
    (tmp_path / "blocked" / "runs.csv").mkdir(parents=True)  # a folder where a file goes: before any is written
    blocked = runner.invoke(app, ["warehouse", "export", str(tmp_path / "blocked"), "--format", "csv"])
    assert blocked.exit_code == 1 and str(blocked.exception).startswith(f"{tmp_path / 'blocked' / 'runs.csv'} is a folder")
    assert [p.name for p in (tmp_path / "blocked").iterdir()] == ["runs.csv"]
    nowhere = runner.invoke(app, ["warehouse", "export", ""])  # the current folder, written into, until 0.9.4
    assert nowhere.exit_code == 1 and str(nowhere.exception).startswith("FOLDER '' names no folder")
    other = tmp_path / "other.duckdb"  # a DuckDB file of something else: refused before a file is written
    duckdb.connect(str(other)).execute("CREATE TABLE t (a INT)").close()
    foreign = runner.invoke(app, ["warehouse", "export", str(tmp_path / "pq2"), "-w", str(other)])
    assert foreign.exit_code == 1 and "the warehouse lacks tables" in str(foreign.exception)
    assert not list((tmp_path / "pq2").iterdir())


def test_an_export_stopped_by_ctrl_c_says_how_many_files_it_wrote(tmp_path: Path) -> None:
    """A Ctrl-C during an export said main's "what was logged before is kept" (until 0.9.10), of a
    command that logs nothing and had written some of its files. Here a real SIGINT lands while the
    last view is written (a view of the user's own that would take hours to compute), after every other
    file: the export stops at once (until 0.9.15 DuckDB ran that view's COPY to its end first, most
    times: this test waited ~20 s for it), the line says how many of how many were written, and the
    older file of that view stays as it was. A Ctrl-C after the last file says that all were written."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import sigint_default
    from tracker.cli.warehouse import export_stopped
    from tracker.warehouse.query import ExportProgress

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = _logger(runs)
    logger.log([network_record("resnet18", 1)])
    logger.close()
    _load(runs, wh)
    with duckdb.connect(str(wh)) as con:  # sorted last, and hours to compute: the signal lands in its COPY
        con.execute("CREATE VIEW zz_slow AS SELECT sum(hash(i)) AS h FROM range(3000000000000) t(i)")
        total = con.execute("SELECT (SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main') + "
                            "(SELECT count(*) FROM duckdb_views() WHERE NOT internal AND schema_name = 'main')").fetchone()[0]
    out = tmp_path / "out"
    out.mkdir()
    (out / "zz_slow.csv").write_text("an older export\n")
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "warehouse", "export", str(out), "--format", "csv",
                             "-w", str(wh)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob("*.csv"))) < total and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.2)  # the last of the others finished, the slow view's COPY under way
        os.kill(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)  # not the hours of the view's query
    finally:
        proc.kill()
    assert stdout == "" and proc.returncode == 130, (proc.returncode, stdout, stderr)
    # the signal taken in the slow view's COPY: the others written, its older file as it was
    assert stderr == (f"interrupted: the export stopped; {total - 1} of {total} CSV files written to {out}, each "
                      "whole; run the same command again to write them all\n")
    assert (out / "zz_slow.csv").read_text() == "an older export\n"
    assert duckdb.sql(f"SELECT count(*) FROM read_csv('{out / 'runs.csv'}')").fetchall() == [(1,)]
    # a Ctrl-C in the moment after the last COPY ended: every file written, and said
    done = ExportProgress(total=total, written=sorted(out.glob("*.csv")))
    assert export_stopped(done, "CSV", str(out)) == f"all {total} CSV files were written to {out} before it stopped"


def test_each_embedded_store_has_its_own_default_warehouse(tmp_path: Path) -> None:
    """Loading another store's folder never overwrites the default store's warehouse."""
    from typer.testing import CliRunner

    from tracker.cli.app import app

    other = tmp_path / "other"
    _logger(other).log([network_record("resnet18", 8)])
    runner = CliRunner()
    loaded = runner.invoke(app, ["--tracking-uri", str(other), "warehouse", "load", "--format", "json"])
    assert loaded.exit_code == 0, loaded.output
    assert json.loads(loaded.output)["warehouse"] == str((other / "warehouse.duckdb").resolve())
    assert not (tmp_path / "runs" / "warehouse.duckdb").exists()  # the default store's (TRACKER_RUNS_DIR)
    out = runner.invoke(app, ["--tracking-uri", str(other), "sql", "SELECT batch_size FROM measurements",
                              "--format", "json"])
    assert out.exit_code == 0 and json.loads(out.output) == [{"batch_size": 8}]
    missing = runner.invoke(app, ["sql", "SELECT 1"])
    assert missing.exit_code != 0 and "warehouse" in str(missing.exception)
    # a server's database option naming another embedded store loaded its runs into this store's warehouse
    _logger(tmp_path / "runs").log([network_record("resnet34", 2)])
    other_db = f"sqlite:///{other / 'mlflow.db'}"
    refused = runner.invoke(app, ["warehouse", "load", "--backend-store-uri", other_db])
    assert refused.exit_code == 1 and "give it as --tracking-uri" in str(refused.exception)
    assert not (tmp_path / "runs" / "warehouse.duckdb").exists()
    own = runner.invoke(app, ["warehouse", "load", "--backend-store-uri", f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"])
    assert own.exit_code == 0, own.output  # its own database: as without the option


def test_each_tracking_server_has_its_own_default_warehouse(tmp_path: Path) -> None:
    """A server's runs never share the default store's warehouse, nor another server's (a load
    from one would count the other's runs as deleted); the file name shows no credentials."""
    from tracker.settings import warehouse_path

    default = warehouse_path()
    assert default == (tmp_path / "runs" / "warehouse.duckdb").resolve()  # TRACKER_RUNS_DIR
    servers = [warehouse_path(tracking_uri=uri) for uri in
               ("http://127.0.0.1:5000", "http://127.0.0.1:5001", "https://mlflow.lab.org/team/",
                "http://[::1]:5000", "http://[fe80::1]:5000")]
    assert [p.name for p in servers] == ["warehouse-127.0.0.1-5000.duckdb", "warehouse-127.0.0.1-5001.duckdb",
                                         "warehouse-mlflow.lab.org-team.duckdb", "warehouse-__1-5000.duckdb",
                                         "warehouse-fe80__1-5000.duckdb"]
    assert all(p.parent == default.parent for p in servers)
    assert warehouse_path(tracking_uri="http://127.0.0.1:5000/") == servers[0]  # one server, one file
    # credentials in the URI: refused (since 0.9.2; the file name left them out before)
    with pytest.raises(StoreError, match="the tracking URI carries credentials"):
        warehouse_path(tracking_uri="https://ann:s3cret@mlflow.lab.org/team/")
    # TRACKER_RUNS_DIR set but empty: runs/ (the current folder until 0.9.2)
    from tracker.settings import runs_dir

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACKER_RUNS_DIR", "")
        mp.chdir(tmp_path)
        assert runs_dir() == tmp_path / "runs"
        for blank in ("", " "):  # TRACKER_WAREHOUSE blank: unset (" " was a file named " " until 0.9.11)
            mp.setenv("TRACKER_WAREHOUSE", blank)
            assert warehouse_path() == tmp_path / "runs" / "warehouse.duckdb"
    # two databases in one folder, a warehouse each (one, shared, until 0.9.2)
    assert [warehouse_path(tracking_uri=f"sqlite:///{tmp_path / name}") for name in ("a.db", "b.db", "mlflow.db")] == [
        tmp_path / "warehouse-a.duckdb", tmp_path / "warehouse-b.duckdb", tmp_path / "warehouse.duckdb"]


def test_a_load_keeps_this_processs_store_connections_whole(tmp_path: Path) -> None:
    """A load in a process that holds the store open (MLflow's pooled connections: the demo,
    a notebook) leaves their locks alone: another process that then opens and closes the store
    does not take itself for its last user and delete the WAL, so what this process writes next
    is seen by others. The ADBC driver's own SQLite, loaded into this process, dropped those locks."""
    import subprocess
    import sys

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    net = network_record("resnet18", 1)
    _logger(runs).log([net])
    uri = resolve_location(str(runs)).uri
    client = MlflowClient(uri)
    run_id = client.search_runs([client.get_experiment_by_name("wh").experiment_id])[0].info.run_id
    client.set_tag(run_id, "note", "good")  # the pool now holds a connection open
    assert _load(runs, wh).runs_changed == 1
    read = ("import sys; from mlflow.tracking import MlflowClient; "
            "print(MlflowClient(sys.argv[1]).get_run(sys.argv[2]).data.tags['note'])")

    def elsewhere() -> str:
        out = subprocess.run([sys.executable, "-c", read, uri, run_id], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert elsewhere() == "good"
    client.set_tag(run_id, "note", "poor")  # the same length: the next load sees it too
    assert elsewhere() == "poor"
    again = _load(runs, wh)
    assert again.runs_changed == 1
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("SELECT value FROM tags WHERE run_id = ? AND key = 'note'", [run_id]).fetchall() == [("poor",)]
    finally:
        con.close()


def test_the_sqlite_reader_says_in_one_line_what_went_wrong(tmp_path: Path) -> None:
    """Reading the store's file through the child reader: a file that is not SQLite, a bad query
    and a reader that died each end in one StoreError naming the store; the reader goes on after
    a bad query and leaves no files behind."""
    import signal

    from tracker.warehouse.sqlite_reader import SqliteReader

    runs = tmp_path / "runs"
    _logger(runs).log([network_record("resnet18", 1)])
    db = runs / "mlflow.db"
    reader = SqliteReader(db, "the store")
    try:
        with pytest.raises(StoreError, match=r"^reading the store failed: .*no such table: missing_table"):
            reader.query("SELECT * FROM missing_table")
        table = reader.query("SELECT run_uuid, status FROM runs WHERE status = ?", ["FINISHED"])
        assert table.num_rows == 1 and table.column_names == ["run_uuid", "status"]
        assert reader.folder.is_dir() and not list(reader.folder.iterdir())  # each result is removed once read
        reader._proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        with pytest.raises(StoreError, match=r"^reading the store failed: its reader process ended \(exit -9\)"):
            reader.query("SELECT 1")
    finally:
        reader.close()
    assert not reader.folder.exists()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not sqlite at all" * 300)
    bad = SqliteReader(garbage, "garbage")
    try:
        with pytest.raises(StoreError, match="^reading garbage failed: .*file is not a database"):
            bad.query("SELECT * FROM runs")
    finally:
        bad.close()


def test_a_ctrl_c_during_a_load_leaves_the_warehouse_as_it_was(tmp_path: Path) -> None:
    """A real SIGINT at points spread over a load, first and full: each load either finishes or
    ends in KeyboardInterrupt (DuckDB's 'Query interrupted' included), never a half warehouse, and
    an interrupted first load leaves no empty file behind."""
    import os
    import signal
    import threading
    import time

    store = tmp_path / "runs"
    log = _logger(store)
    for n in range(4):
        nets = [network_record(f"net{n}-{i}", 1 + i % 8) for i in range(50)]
        log.log([*nets, *(layer_record(net, j) for net in nets for j in range(4))])
    log.close()
    t0 = time.perf_counter()
    expected = _load(store, tmp_path / "timed.duckdb").runs_total
    seconds = time.perf_counter() - t0

    armed = threading.Event()

    def on_sigint(signum: int, frame: object) -> None:
        if armed.is_set():  # only inside load: a signal that arrives late is dropped, not raised in the test
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    outcomes = []
    try:
        for k in range(1, 13):
            wh = tmp_path / ("first.duckdb" if k % 2 else "full.duckdb")
            if k % 2:
                wh.unlink(missing_ok=True)
            elif not wh.exists():  # the timed load's warehouse: the one a first load makes, not made again
                shutil.copyfile(tmp_path / "timed.duckdb", wh)
            timer = threading.Timer(seconds * k / 13, os.kill, (os.getpid(), signal.SIGINT))
            armed.set()
            timer.start()
            try:
                _load(store, wh, full=True)
                outcome = "finished"
            except KeyboardInterrupt:
                outcome = "interrupted"
            finally:
                armed.clear()
                timer.cancel()
                timer.join()
            outcomes.append(outcome)
            if outcome == "interrupted" and k % 2 and not wh.exists():
                continue  # a first load that did not finish: no warehouse, as before it
            with duckdb.connect(str(wh), read_only=True) as con:  # whole: every run, and the views
                assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == expected, (k, outcome)
                assert con.execute("SELECT count(*) FROM latest_measurements").fetchall()[0][0] == 200
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "interrupted" in outcomes, outcomes


def test_a_schema_tag_tracker_never_writes_stops_the_load_as_an_unknown_format_does(tmp_path: Path) -> None:
    """A run logged by a newer tracker (its tracker.schema tag network/9) was loaded as if its format
    were known until 0.9.2; the load now names it and keeps nothing of itself. A network run tagged
    with another kind's schema (layer/1) or a version written otherwise (network/01) was loaded
    without a word until 0.9.7; each stops it now, named, and nothing of the load is kept."""
    from tracker.errors import SchemaError

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = _logger(runs)
    first = logger.log([network_record("resnet18", 1)])[0]
    logger.close()
    _load(runs, wh)
    logger = _logger(runs)
    odd = logger.log([network_record("resnet18", 2)])[0]
    logger.close()
    client = MlflowClient(resolve_location(str(runs)).uri)
    for tag, said in (("network/9", "run record format network/9 is not known to this tracker (it reads network/1); "
                                    "nothing was loaded"),
                      ("layer/1", "tracker.schema tag 'layer/1' is another kind's, on a network run (tracker writes "
                                  "network/1); nothing was loaded (a tag set by hand? set it as tracker writes it)"),
                      ("network/01", "malformed tracker.schema tag 'network/01' (tracker writes network/1); nothing "
                                     "was loaded"),
                      ("network/x", "malformed tracker.schema tag 'network/x'; nothing was loaded")):
        client.set_tag(odd, "tracker.schema", tag)
        with pytest.raises(SchemaError, match=rf"^run {odd}: ") as info:
            _load(runs, wh)
        assert str(info.value).startswith(f"run {odd}: {said}"), info.value
        con = duckdb.connect(str(wh), read_only=True)
        try:
            assert con.execute("SELECT run_id FROM runs").fetchall() == [(first,)]  # the load before it, whole
        finally:
            con.close()
    client.set_tag(odd, "tracker.schema", "network/1")
    _load(runs, wh)


def test_an_interrupted_first_load_says_no_warehouse_was_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C in a first load leaves no warehouse, and says so; it said "the warehouse ... is as it
    was before it" of one that never was (until 0.9.6). A later load's says that."""
    from typer.testing import CliRunner

    import tracker.warehouse.load as loading
    from tracker.cli.app import app

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    _logger(runs).close()
    real = loading.load

    def stopped(*args: object, **kwargs: object) -> None:  # a Ctrl-C where the load would begin
        raise KeyboardInterrupt

    monkeypatch.setattr(loading, "load", stopped)
    args = ["--tracking-uri", str(runs), "warehouse", "load", "-w", str(wh)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 130 and f"no warehouse was made at {wh}" in first.output and not wh.exists()
    real(wh, open_source(resolve_location(str(runs))))
    later = CliRunner().invoke(app, args)
    assert later.exit_code == 130 and f"the warehouse {wh} is as it was before it" in later.output


def test_a_sum_of_integers_and_a_decimal_are_json_numbers() -> None:
    """DuckDB's sum of integers is a HUGEINT and a literal such as 1.5 a DECIMAL, both read as Python's
    Decimal, which `sql --format json` wrote as strings ("187", "1.5") until 0.9.12: a reader adding them
    up failed. They are numbers now, a whole one exactly (past 2**64 too), in a list or struct as in a plain
    column; a CSV cell keeps a decimal's digits as written."""
    import csv
    import io

    import duckdb

    from tracker.warehouse.query import render

    con = duckdb.connect()
    table = con.sql("SELECT sum(b) AS s, 1.5 AS d, 2.00 AS w, '123456789012345678901234567890'::HUGEINT AS h, "
                    "[0.25, 1.5] AS l, {'a': 1.5} AS st FROM (VALUES (2), (185)) t(b)").to_arrow_table()
    text = render(table, "json")
    assert json.loads(text) == [{"s": 187, "d": 1.5, "w": 2.0, "h": 123456789012345678901234567890,
                                 "l": [0.25, 1.5], "st": {"a": 1.5}}], text
    assert '"s": 187,' in text and '"h": 123456789012345678901234567890,' in text  # not "187", nor a float
    header, row = csv.reader(io.StringIO(render(table, "csv")))
    assert header[:4] == ["s", "d", "w", "h"] and row[:4] == ["187", "1.5", "2.00", "123456789012345678901234567890"]


def test_an_integer_wider_than_arrows_is_given_exactly_in_every_format(tmp_path: Path) -> None:
    """DuckDB's Arrow export gives a UHUGEINT past 2**127 - 1 as a negative number (2**128 - 1 as -1) and a
    BIGNUM (an integer past 128 bits: a literal of 40 digits or more) as its internal bytes, which `tracker
    sql` showed in every format until 0.9.13 (-1; hex). Each is its exact digits: a number in JSON, as a
    HUGEINT is, its digits in the table and in CSV; in a list, struct or map too, a number in JSON and in a
    CSV cell's JSON text (until 0.9.14 the whole list or struct was DuckDB's text, its other values text as
    well), each its own digits in Parquet, marked whole."""
    import csv
    import io

    from typer.testing import CliRunner

    import pyarrow.parquet as pq

    from tracker.cli.app import app
    from tracker.warehouse.query import WHOLE_DIGITS

    wh = tmp_path / "wh.duckdb"
    duckdb.connect(str(wh)).close()
    top, big = 2**128 - 1, 10**45
    query = f"SELECT {top} AS u, 5::UHUGEINT AS small, {big} AS b, [{big}] AS l, NULL::UHUGEINT AS n, 2 AS i"
    said = {fmt: CliRunner().invoke(app, ["sql", query, "--warehouse", str(wh), "--format", fmt])
            for fmt in ("json", "csv", "table")}
    assert all(out.exit_code == 0 for out in said.values()), {f: o.output for f, o in said.items()}
    assert json.loads(said["json"].stdout) == [{"u": top, "small": 5, "b": big, "l": [big], "n": None, "i": 2}]
    assert list(csv.reader(io.StringIO(said["csv"].stdout)))[1] == [str(top), "5", str(big), f"[{big}]", "", "2"]
    row = said["table"].stdout.splitlines()[3]
    assert [cell.strip() for cell in row.strip("│").split("│")] == [str(top), "5", str(big), f"[{big}]", "", "2"]
    # in a list, a struct or a map: each wide integer a number, the rest as they are; in Parquet its digits
    nested = (f"SELECT [{top}::UHUGEINT, NULL] AS l, {{'b': {big}, 'n': 'x', 'i': 3}} AS s, "
              f"MAP {{{top}::UHUGEINT: [{big}]}} AS m")
    said = {fmt: CliRunner().invoke(app, ["sql", nested, "--warehouse", str(wh), "--format", fmt])
            for fmt in ("json", "csv", "table")}
    assert all(out.exit_code == 0 for out in said.values()), {f: o.output for f, o in said.items()}
    assert json.loads(said["json"].stdout) == [{"l": [top, None], "s": {"b": big, "n": "x", "i": 3}, "m": [[top, [big]]]}]
    assert list(csv.reader(io.StringIO(said["csv"].stdout)))[1] == [
        f"[{top}, null]", f'{{"b": {big}, "n": "x", "i": 3}}', f"[[{top}, [{big}]]]"]
    row = said["table"].stdout.splitlines()[3]
    assert [cell.strip() for cell in row.strip("│").split("│")] == [
        f"[{top}, NULL]", f"{{'b': {big}, 'n': 'x', 'i': 3}}", f"[({top}, [{big}])]"]
    out = CliRunner().invoke(app, ["sql", nested, "--warehouse", str(wh), "-o", str(tmp_path / "n.parquet")])
    assert out.exit_code == 0, out.output
    written = pq.read_table(tmp_path / "n.parquet")
    assert written.to_pylist() == [{"l": [str(top), None], "s": {"b": str(big), "n": "x", "i": 3},
                                    "m": [(str(top), [str(big)])]}]
    assert written.schema.field("s").type.field("b").metadata == {WHOLE_DIGITS: b"1"}


def test_the_sql_table_shows_a_decimal_in_a_list_or_struct_as_duckdb_does(tmp_path: Path) -> None:
    """`tracker sql`'s table showed a DECIMAL inside a list or struct as Python's repr,
    ``[Decimal('1.50')]``, and a date there as ``datetime.date(2024, 1, 2)`` (until 0.9.13): each is
    its text, as DuckDB shows it, an absent one NULL; a plain column as it was."""
    from typer.testing import CliRunner

    from tracker.cli.app import app

    wh = tmp_path / "wh.duckdb"
    duckdb.connect(str(wh)).close()
    query = ("SELECT [1.50::DECIMAL(4,2), NULL] AS l, {'a': 1.50::DECIMAL(4,2), 'b': 'x'} AS s, "
             "1.50::DECIMAL(4,2) AS d, [DATE '2024-01-02'] AS dates, [0.5::DOUBLE] AS f, NULL AS n")
    shown = CliRunner().invoke(app, ["sql", query, "--warehouse", str(wh)])
    assert shown.exit_code == 0, shown.output
    row = shown.stdout.splitlines()[3]
    assert [cell.strip() for cell in row.strip("│").split("│")] == [
        "[1.50, NULL]", "{'a': 1.50, 'b': 'x'}", "1.50", "[2024-01-02]", "[0.5]", ""], shown.stdout
    # a CSV cell's JSON text: a DECIMAL there a number, as --format json writes one (a string, "1.50", until
    # 0.9.13), a whole one whole; a plain DECIMAL column keeps its digits
    csv_out = CliRunner().invoke(app, ["sql", query.replace("NULL] AS l", "NULL, 2::DECIMAL(4,0)] AS l")
                                       + ", [3::DECIMAL(4,0)] AS w", "--warehouse", str(wh), "--format", "csv"])
    assert csv_out.exit_code == 0, csv_out.output
    assert csv_out.stdout.splitlines()[1] == ('"[1.5, null, 2.0]","{""a"": 1.5, ""b"": ""x""}",1.50,'
                                              '"[""2024-01-02""]",[0.5],,[3]'), csv_out.stdout


def test_a_nan_in_a_list_is_told_from_an_absent_value_as_in_a_plain_column() -> None:
    """`sql ... --format csv` wrote a list's NaN as null, an absent value's word, where a plain NaN
    column wrote nan (until 0.9.8). A list or struct in a CSV cell is JSON text: its NaN and
    infinities are NaN, Infinity and -Infinity now, which Python's json and DuckDB read back; in
    --format json every NaN and infinity is null, in a list as in a plain column (JSON has neither)."""
    import csv
    import io

    import duckdb

    from tracker.warehouse.query import render

    con = duckdb.connect()
    table = con.sql("SELECT ['nan'::DOUBLE, 1.5, 'inf'::DOUBLE, '-inf'::DOUBLE, NULL] AS l, 'nan'::DOUBLE AS d, "
                    "{'a': 'nan'::DOUBLE, 'b': NULL::DOUBLE} AS s").to_arrow_table()
    header, row = csv.reader(io.StringIO(render(table, "csv")))
    assert header == ["l", "d", "s"] and row == ["[NaN, 1.5, Infinity, -Infinity, null]", "nan", '{"a": NaN, "b": null}']
    back = json.loads(row[0])
    assert back[0] != back[0] and back[1:] == [1.5, float("inf"), float("-inf"), None]
    assert con.execute("SELECT ?::JSON::DOUBLE[]", [row[0]]).fetchone()[0][2:] == [float("inf"), float("-inf"), None]
    assert json.loads(render(table, "json")) == [{"l": [None, 1.5, None, None, None], "d": None,
                                                   "s": {"a": None, "b": None}}]


def test_a_column_of_this_trackers_views_missing_from_an_older_warehouse_asks_for_a_load() -> None:
    """A warehouse an older tracker loaded lacks the columns a newer one added (``tensor_peak_mb``, 0.9.31):
    DuckDB's binder said `Referenced column "tensor_peak_mb" not found ... Candidate bindings: ...`, with no
    word of the load that brings it. Said so where no table or view of the warehouse has the column and this
    tracker's views or typed tables do; a column the warehouse has elsewhere, or one no tracker has, is left
    to DuckDB's line."""
    import duckdb

    from tracker.warehouse.query import _older_warehouse

    con = duckdb.connect()
    con.execute("CREATE TABLE measurements (latency_ms DOUBLE)")

    def said(sql: str) -> str | None:
        with pytest.raises(duckdb.Error) as caught:
            con.sql(sql)
        return _older_warehouse(con, str(caught.value))

    assert said("SELECT tensor_peak_mb FROM measurements") == (
        "no column tensor_peak_mb in this warehouse, which an older tracker loaded: this tracker's views have it; "
        "run `tracker warehouse load` to load it anew")
    assert said("SELECT tensor_peak_error FROM measurements") is not None  # a typed table's column (a tag's)
    assert said("SELECT no_such_column FROM measurements") is None
    con.execute("CREATE TABLE layer_runs (tensor_peak_mb DOUBLE)")
    assert said("SELECT tensor_peak_mb FROM measurements") is None  # the warehouse has it: the query looked amiss
