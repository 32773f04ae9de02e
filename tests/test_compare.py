"""`tracker runs compare A B`: real measurement runs compared, their raw samples kept as an
artifact the metrics derive from, the latency verdict's rules, and bad input as one line."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.conftest import ENV, network_record
from tests.test_cli import in_process
from tracker.cli.app import app
from tracker.errors import TrackerError
from tracker.log.compare import ALPHA, Side, latency_verdict
from tracker.log.logger import RunLogger
from tracker.log.record import RunRecord
from tracker.log.samples import SAMPLES_ARTIFACT, Samples, read_samples

runner = CliRunner()


@pytest.mark.alone  # its verdict compares two measurements (a repeat read 2.3 times the first beside the other worker)
def test_two_measured_runs_are_compared_on_their_samples(tmp_path: Path) -> None:
    from tracker.profile.stats import summarize

    base = ["--tracking-uri", str(tmp_path / "s"), "-e", "cmp"]
    quick = ["--input-size", "96", "--time-cap", "0.5", "--precision", "0.1", "--threads", "1", "--format", "json"]

    def measure(batch: int, *extra: str, command: str = "network") -> str:
        out = runner.invoke(app, [*base, "profile", command, "squeezenet1_1", "--batch-size", str(batch), *quick, *extra])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["run_id"]

    # each with its layers and torch.profiler's operator table
    one, four = measure(1, "--trace", command="layers"), measure(4, "--trace", command="layers")
    again = measure(1, "--again")
    client = MlflowClient(f"sqlite:///{tmp_path / 's' / 'mlflow.db'}")
    # the raw samples are kept, and the run's figures derive from them
    local = Path(client.download_artifacts(one, SAMPLES_ARTIFACT, str(tmp_path)))
    samples = read_samples(local.read_text(), one)
    metrics = client.get_run(one).data.metrics
    derived = summarize(samples.samples_ms, samples.block_n)
    assert len(samples.samples_ms) == metrics["samples_count"] and len(samples.warmup_ms) == metrics["warmup_count"]
    assert derived.median == pytest.approx(metrics["latency_ms"], rel=1e-6)
    assert derived.ci_rel == pytest.approx(metrics["latency_ci_rel"], rel=1e-3, abs=1e-6)

    out = runner.invoke(app, [*base, "runs", "compare", one[:8], four, "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["a"]["run_id"] == one and data["b"]["run_id"] == four and data["a"]["samples"] and data["b"]["samples"]
    assert data["configuration_differences"] == [{"key": "batch_size", "a": "1", "b": "4"}]
    assert data["environment_differences"] == []  # one machine, one tracker
    lat = data["latency"]
    assert lat["ratio"] > 1.5 and lat["verdict"] == "significant" and lat["p_value"] < ALPHA, lat  # 4 images, not 1
    assert lat["repeats"] == [2, 1] and lat["repeat_drift_rel"] is not None and not lat["same_configuration"]
    rows = {r["metric"]: r for r in data["metrics"]}
    assert rows["latency_ms"]["a"] == metrics["latency_ms"] and "peak_mem_mb" in rows
    assert "power_w" not in rows  # this machine reads no power: absent, not zero
    # layer by layer, matched by name, those that moved most first
    layers = data["layers"]
    sums = [client.get_run(r).data.metrics["sum_of_layers_ms"] for r in (one, four)]
    assert layers["matched"] > 20 and layers["only_a"] == layers["only_b"] == 0
    assert [layers["sum_a_ms"], layers["sum_b_ms"]] == pytest.approx(sums)
    moved = [abs(r["change_ms"]) for r in layers["top"]]
    assert len(moved) == 10 and moved == sorted(moved, reverse=True) and layers["apart"] >= 1
    ops = data["operators"]
    assert ops["time_basis"] == "self_cpu_ms" and ops["total_b_ms"] > ops["total_a_ms"] > 0
    assert abs(ops["top"][0]["change_ms"]) == max(abs(r["change_ms"]) for r in ops["top"])

    repeat_data = json.loads(runner.invoke(app, [*base, "runs", "compare", one, again, "--format", "json"]).stdout)
    repeat = repeat_data["latency"]
    assert repeat["same_configuration"] and repeat["repeat_drift_rel"] is None  # its change is the drift itself
    # each measured beside the speed probe: the machine's speed, and the change at it (since 0.9.10)
    speed = data["machine_speed"]
    probes = [client.get_run(r).data.metrics["speed_probe_ms"] for r in (one, four)]
    assert speed["probe_change_rel"] == pytest.approx(probes[1] / probes[0] - 1)
    assert speed["latency_change_rel"] == pytest.approx(
        (metrics_four := client.get_run(four).data.metrics)["latency_ms"] / probes[1] / (metrics["latency_ms"] / probes[0]) - 1)
    assert rows["speed_probe_ms"]["a"] == probes[0] and metrics_four["speed_probe_ms"] == probes[1]
    text = runner.invoke(app, [*base, "runs", "compare", one, four])
    assert text.exit_code == 0 and "configurations differ: batch_size 1 -> 4" in text.stdout
    assert "machine speed: the speed probe " in text.stdout and "at the machine's speed (latency over probe)" in text.stdout
    assert "latency +" in text.stdout and ": significant (" in text.stdout
    assert f"layers: {layers['matched']} matched by name" in text.stdout and "operators (torch.profiler" in text.stdout
    # two layer runs: their CIs (relative half-widths) judged, and the layers' own differences said
    # ("not judged", and one shape apart, until 0.9.4); a network against a layer is refused
    exp = client.get_experiment_by_name("cmp").experiment_id
    first, other = (client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{four}' AND params.layer_name = '{name}'")[0]
                    for name in ("features.0", "classifier.3"))
    pair = json.loads(runner.invoke(app, [*base, "runs", "compare", first.info.run_id, other.info.run_id,
                                          "--format", "json"]).stdout)
    assert pair["latency"]["verdict"] != "not judged", pair["latency"]
    assert {d["key"] for d in pair["configuration_differences"]} >= {"layer_index", "layer_name", "op_type"}
    client.delete_run(again)  # a deleted run, found by its id, is compared and said to be deleted (unsaid until 0.9.4)
    gone = runner.invoke(app, [*base, "runs", "compare", one, again])
    assert gone.exit_code == 0 and f"B: {again[:12]}" in gone.stdout and "(deleted)" in gone.stdout.splitlines()[1]
    mixed = runner.invoke(app, [*base, "runs", "compare", four, first.info.run_id])
    assert mixed.exit_code == 1 and str(mixed.exception) == (
        f"run {first.info.run_id[:12]} is a layer run and {four[:12]} a network run: compare two layers, or two "
        "whole measurements")


def _side(run_id: str, median: float, ci_rel: float, samples: list[float] | None = None,
          repeats: list[float] | None = None, key: str | None = None) -> Side:
    metrics = {"latency_ms": median, "latency_ci_low_ms": median * (1 - ci_rel), "latency_ci_high_ms": median * (1 + ci_rel)}
    return Side(run_id, run_id, "network", {}, metrics, {"tracker.config_key": key or run_id},
                Samples(samples, [], 2, "precision") if samples else None, repeats or [median])


def test_a_comparison_says_where_either_side_was_bound_by_its_host() -> None:
    from tracker.log.compare import _host_bound

    gpu, bound, cpu = _side("a", 2.0, 0.01), _side("b", 2.4, 0.01), _side("c", 20.0, 0.01)
    gpu.metrics["host_share_pct"], bound.metrics["host_share_pct"] = 40.0, 97.5
    assert _host_bound(gpu, bound) == {"a": 40.0, "b": 97.5} and _host_bound(cpu, bound) == {"a": None, "b": 97.5}
    assert _host_bound(gpu, cpu) == {} and _host_bound(cpu, cpu) == {}  # none bound, or none split (a CPU)


def test_the_latency_verdict_follows_its_rules_in_order() -> None:
    verdict = latency_verdict(_side("a", 10.0, 0.05), _side("b", 10.5, 0.05))
    assert verdict["verdict"] == "not significant" and "overlap" in verdict["why"]
    # a layer run keeps only the CI's relative half-width: taken about its median
    layer_a, layer_b = _side("a", 10.0, 0.05), _side("b", 12.0, 0.05)
    for side in (layer_a, layer_b):
        side.metrics = {"latency_ms": side.metrics["latency_ms"], "latency_ci_rel": 0.05}
    assert latency_verdict(layer_a, layer_b)["verdict"] == "significant"
    layer_b.metrics["latency_ms"] = 10.5
    assert latency_verdict(layer_a, layer_b)["verdict"] == "not significant"
    # CIs apart, but block medians that do not tell the two apart (the p-value rule)
    mixed = [10.0, 10.0, 11.0, 11.0, 9.0, 9.0, 12.0, 12.0]
    verdict = latency_verdict(_side("a", 10.0, 0.01, mixed), _side("b", 10.5, 0.01, mixed[::-1]))
    assert verdict["verdict"] == "not significant" and verdict["p_value"] >= ALPHA and verdict["blocks"] == [4, 4]
    # apart, but repeats of a configuration lay further apart than the change
    verdict = latency_verdict(_side("a", 10.0, 0.01, repeats=[10.0, 11.5]), _side("b", 11.0, 0.01))
    assert verdict["verdict"] == "within drift" and verdict["repeat_drift_rel"] == pytest.approx(0.15)
    # a fall weighs as the rise by the same factor (the drift is max / min - 1): 11.5 to 10 ms (-13 %) is not
    # within repeats 14 % apart, as 10 to 11.5 ms (+15 %) is not; 11.5 to 10.1 (a factor 1.139) is
    for a, b, verdict_said in ((10.0, 11.5, "significant"), (11.5, 10.0, "significant"), (11.5, 10.1, "within drift")):
        verdict = latency_verdict(_side("a", a, 0.01, repeats=[10.0, 11.4]), _side("b", b, 0.01))
        assert verdict["verdict"] == verdict_said, (a, b, verdict)
    # a change past a float's B/A - 1 (null) is weighed as what it stood for: past any drift, rise or fall
    # (a fall from 1e300 to 1e-300 lay within repeats 6 times apart until 0.9.17, as a fall to a tenth did)
    verdict = latency_verdict(_side("a", 1e-300, 0.01, repeats=[1e-300, 1.1e-300]), _side("b", 1e300, 0.01))
    assert (verdict["change_rel"], verdict["verdict"]) == (None, "significant"), verdict
    for b in (1e-300, 1e299):
        verdict = latency_verdict(_side("a", 1e300, 0.01, repeats=[1e300, 6e300]), _side("b", b, 0.01))
        assert verdict["verdict"] == "significant", (b, verdict)
    verdict = latency_verdict(_side("a", 1e300, 0.01, repeats=[1e300, 6e300]), _side("b", 2e299, 0.01))
    assert verdict["verdict"] == "within drift", verdict  # a fall to a fifth: within a factor 6
    # apart on every count
    low, high = [10.0] * 8 + [10.1] * 8, [12.0] * 8 + [12.1] * 8
    verdict = latency_verdict(_side("a", 10.0, 0.01, low, [10.0, 10.2]), _side("b", 12.0, 0.01, high))
    assert verdict["verdict"] == "significant" and verdict["p_value"] < ALPHA and verdict["change_rel"] == pytest.approx(0.2)
    # no CI and no samples (a training job's steps, an imported run): nothing to test on
    bare = _side("b", 12.0, 0.01)
    bare.metrics = {"latency_ms": 12.0}
    verdict = latency_verdict(_side("a", 10.0, 0.01), bare)
    assert verdict["verdict"] == "not judged" and "nothing to test" in verdict["why"]
    # repeats of one configuration: the drift is what is measured, not a yardstick
    verdict = latency_verdict(_side("a", 10.0, 0.01, repeats=[10.0, 12.0], key="k"),
                              _side("b", 12.0, 0.01, repeats=[10.0, 12.0], key="k"))
    assert verdict["same_configuration"] and verdict["verdict"] == "significant" and "repeats of one" in verdict["why"]


def test_bad_runs_to_compare_are_one_line_errors(tmp_path: Path) -> None:
    store = tmp_path / "s"
    logger = RunLogger(str(store), experiment="bad", environment=ENV)
    done, failed, newer = network_record(batch_size=1), network_record(batch_size=2), network_record(batch_size=4)
    failed.metrics.clear()
    failed.fail("oom")
    memory_alone = network_record(batch_size=8, peak_mem_mb=900.0)  # as an import's memory-only configuration
    memory_alone.kind, memory_alone.params["phase"] = "training", "training"
    del memory_alone.metrics["latency_ms"], memory_alone.metrics["latency_ci_rel"]
    newer.artifacts[SAMPLES_ARTIFACT] = json.dumps({"format": 2, "samples_ms": [1.0]})
    logger.log([done, failed, newer, memory_alone])
    base = ["--tracking-uri", str(store), "-e", "bad", "runs", "compare"]
    cases = [
        ([done.run_id, done.run_id[:6]], "are the same run"),
        (["abc", done.run_id], "'abc' is not a run id"),
        (["ffffffff", done.run_id], "no measurement run whose id starts with ffffffff in experiment 'bad' or any other"),
        ([done.run_id, failed.run_id], "is FAILED (oom): nothing measured to compare"),
        ([done.run_id, newer.run_id], "is in format 2, which this tracker does not read"),
        # a run of a measured kind without a latency is said as that, not told to give a run of its own kind
        ([done.run_id, memory_alone.run_id], f"run {memory_alone.run_id[:12]} is a training run that has no latency "
                                             "(it measured memory alone, say): nothing to judge a change in latency on"),
    ]
    for args, message in cases:  # the library's errors (the entry point prints each as one line)
        out = runner.invoke(app, [*base, *args])
        assert out.exit_code == 1 and isinstance(out.exception, TrackerError) and message in str(out.exception), (
            args, out.output, out.exception)
    # a prefix found in another experiment, as a full id is (the id `profile -e other` prints, shown from Default)
    shown = runner.invoke(app, ["--tracking-uri", str(store), "runs", "show", done.run_id[:8], "--format", "json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["run_id"] == done.run_id, shown.output
    proc = in_process([*base, failed.run_id[:8], done.run_id], tmp_path)
    assert proc.returncode == 1 and proc.stdout == "", proc
    assert proc.stderr == f"error: run {failed.run_id[:12]} is FAILED (oom): nothing measured to compare\n", proc.stderr
    with pytest.raises(TrackerError, match="holds no samples"):
        read_samples(json.dumps({"format": 1, "samples_ms": []}), "x")


def test_operator_tables_are_compared_on_one_time_basis_only() -> None:
    from tracker.log.compare import compare_layers, compare_ops

    cpu = {"time_basis": "self_cpu_ms", "ops": [{"op": "aten::conv", "self_cpu_ms": 2.0}, {"op": "aten::add", "self_cpu_ms": 0.5}]}
    other = {"time_basis": "self_cpu_ms", "ops": [{"op": "aten::conv", "self_cpu_ms": 1.0}, {"op": "aten::cat", "self_cpu_ms": 0.75}]}
    out = compare_ops(cpu, other)
    assert out is not None and [(r["op"], r["change_ms"]) for r in out["top"]] == [
        ("aten::conv", -1.0), ("aten::cat", 0.75), ("aten::add", -0.5)]  # one a run lacks did not run there
    assert compare_ops(cpu, {"time_basis": "self_device_ms", "ops": []}) is None  # CPU time against kernel time: not compared
    layers = compare_layers({"l1": {"op_type": "Conv2d", "latency_ms": 1.0, "latency_ci_rel": 0.05},
                             "l2": {"op_type": "ReLU", "latency_ms": 0.1, "latency_ci_rel": 0.05}},
                            {"l1": {"op_type": "Conv2d", "latency_ms": 1.04, "latency_ci_rel": 0.05},
                             "l3": {"op_type": "ReLU", "latency_ms": 0.2, "latency_ci_rel": 0.05}})
    assert (layers["matched"], layers["only_a"], layers["only_b"], layers["apart"]) == (1, 1, 1, 0)  # 4 %: within CIs

    # two GPU traces: their kernels too, by device time; a CPU trace has none to compare
    from tracker.log.compare import compare_kernels

    gpu_a = {"time_basis": "self_device_ms", "traced_iteration_ms": 2.3, "ops": [],
             "kernels": [{"kernel": "xmma_fprop", "self_device_ms": 0.17}, {"kernel": "nchwToNhwc", "self_device_ms": 0.11}]}
    gpu_b = {"time_basis": "self_device_ms", "traced_iteration_ms": 5.8, "ops": [],
             "kernels": [{"kernel": "xmma_fprop", "self_device_ms": 2.1}, {"kernel": "bn_fw_inf", "self_device_ms": 0.4}]}
    kernels = compare_kernels(gpu_a, gpu_b)
    assert kernels is not None and [(r["kernel"], round(r["change_ms"], 6)) for r in kernels["top"]] == [
        ("xmma_fprop", 1.93), ("bn_fw_inf", 0.4), ("nchwToNhwc", -0.11)]
    assert (kernels["kernels"], kernels["busy_a_ms"], kernels["busy_b_ms"]) == ([2, 2], pytest.approx(0.28), pytest.approx(2.5))
    assert compare_kernels(cpu, other) is None and compare_kernels(gpu_a, cpu) is None


def test_two_gpu_traces_are_compared_kernel_by_kernel_too(tmp_path: Path) -> None:
    """Two runs traced on a GPU: the CLI shows their kernels that moved most after the operators,
    names cut as profile --trace cuts them; one table written before 0.7.3 is read with its
    kernels apart."""
    store = tmp_path / "s"
    logger = RunLogger(str(store), experiment="gpu", environment=ENV)
    a, b = network_record(batch_size=1, latency_ms=2.4), network_record(batch_size=32, latency_ms=5.8)
    long_name = "void at::native::vectorized_elementwise_kernel<4, " + "x" * 200 + ">"
    a.artifacts["trace/ops.json"] = json.dumps({  # as 0.7.2 wrote it: kernels among the operators
        "iterations": 3, "traced_iteration_ms": 2.3, "time_basis": "self_device_ms",
        "ops": [{"op": "aten::cudnn_convolution", "calls_per_iter": 20, "self_cpu_ms": 0.8, "cpu_total_ms": 2.3,
                 "self_device_ms": 0.28, "share_pct": 50.0},
                {"op": "xmma_fprop", "calls_per_iter": 16, "self_cpu_ms": 0.0, "cpu_total_ms": 0.0,
                 "self_device_ms": 0.17, "share_pct": 30.0},
                {"op": long_name, "calls_per_iter": 32, "self_cpu_ms": 0.0, "cpu_total_ms": 0.0,
                 "self_device_ms": 0.11, "share_pct": 20.0}]})
    b.artifacts["trace/ops.json"] = json.dumps({
        "iterations": 3, "traced_iteration_ms": 5.8, "time_basis": "self_device_ms",
        "ops": [{"op": "aten::cudnn_convolution", "calls_per_iter": 20, "self_cpu_ms": 0.8, "cpu_total_ms": 2.3,
                 "self_device_ms": 2.1, "share_pct": 100.0}],
        "kernels": [{"kernel": "xmma_fprop", "calls_per_iter": 16, "self_device_ms": 2.1, "share_pct": 100.0}],
        "device_busy_ms": 2.1})
    for record in (a, b):
        record.tags["tracker.trace"] = "trace/ops.json"
    logger.log([a, b])
    base = ["--tracking-uri", str(store), "-e", "gpu", "runs", "compare", a.run_id[:8], b.run_id[:8]]
    data = json.loads(runner.invoke(app, [*base, "--format", "json"]).stdout)
    assert data["operators"]["operators"] == [1, 1] and data["operators"]["top"][0]["change_ms"] == pytest.approx(1.82)
    assert data["kernels"]["kernels"] == [2, 1] and data["kernels"]["busy_a_ms"] == pytest.approx(0.28)
    text = runner.invoke(app, base).stdout
    assert "kernels (device time per iteration): busy 0.280 -> 2.100 ms (2 and 1 kernels)" in text
    assert long_name[:99] + "…" in text and long_name not in text


def test_an_operator_table_that_cannot_be_read_is_said_and_compared_without(tmp_path: Path) -> None:
    """A traced run whose operator table is gone, cut short or edited is compared without it, and the
    comparison says why (the operators' section was missing, unexplained, until 0.9.16)."""
    store = tmp_path / "s"
    logger = RunLogger(str(store), experiment="ops", environment=ENV)
    a, b = network_record(batch_size=1, latency_ms=2.4), network_record(batch_size=4, latency_ms=5.8)
    for record, ms in ((a, 2.3), (b, 5.7)):
        record.artifacts["trace/ops.json"] = json.dumps({
            "iterations": 3, "traced_iteration_ms": ms, "time_basis": "self_cpu_ms",
            "ops": [{"op": "aten::conv2d", "calls_per_iter": 2, "self_cpu_ms": ms, "cpu_total_ms": ms, "share_pct": 100.0}]})
        record.tags["tracker.trace"] = "trace/ops.json"
    logger.log([a, b])
    base = ["--tracking-uri", str(store), "-e", "ops", "runs", "compare", a.run_id[:8], b.run_id[:8]]
    whole = json.loads(runner.invoke(app, [*base, "--format", "json"]).stdout)
    assert whole["operators"]["operators"] == [1, 1] and whole["b"]["ops_unreadable"] is None
    [table] = (p for p in store.rglob("ops.json") if b.run_id in str(p))
    for damaged, said in ((b"{cut", "trace/ops.json: not JSON ("),
                          (b'{"ops": 3}', "trace/ops.json: not an operator table; cut short or edited?"),
                          (b'{"time_basis": "self_cpu_ms", "ops": [{"op": "x", "self_cpu_ms": "fast"}]}',
                           "trace/ops.json: could not convert string to float: 'fast'; cut short or edited?"),
                          (None, "trace/ops.json cannot be read (")):
        if damaged is None:
            table.unlink()
        else:
            table.write_bytes(damaged)
        out = runner.invoke(app, [*base, "--format", "json"])
        assert out.exit_code == 0, (damaged, out.output, out.exception)
        data = json.loads(out.stdout)
        assert "operators" not in data and data["a"]["ops_unreadable"] is None, data
        assert data["b"]["ops_unreadable"].startswith(said), data["b"]
        text = runner.invoke(app, base)
        assert text.exit_code == 0 and (f"(operator table unreadable: {data['b']['ops_unreadable']}; compared without "
                                        "it)") in text.stdout.splitlines()[1], text.stdout


def test_tracker_reads_its_artifacts_back_without_mlflows_progress_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a run's samples or tables back draws no MLflow progress bar on stderr (where tqdm is
    installed it drew one per artifact), unless the user asked for them."""
    from mlflow.environment_variables import MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR as BARS

    from tracker.log.artifacts import quiet_downloads

    monkeypatch.delenv(BARS.name, raising=False)
    assert BARS.get()
    with quiet_downloads():
        assert not BARS.get()
    assert BARS.get() and not BARS.is_set()
    monkeypatch.setenv(BARS.name, "true")
    with quiet_downloads():
        assert BARS.get()


def test_two_runs_apart_by_their_memory_cap_alone_say_so(tmp_path: Path) -> None:
    """One network and batch, measured without a cap and under --memory-limit-mb: until 0.9.1 the
    comparison listed no configuration difference (while its JSON said they were not one
    configuration), and read as the same set-up getting slower."""
    store = tmp_path / "s"
    logger = RunLogger(str(store), experiment="caps", environment=ENV)
    free, capped = network_record(batch_size=2, latency_ms=2.0), network_record(batch_size=2, latency_ms=2.3)
    capped.params["memory_limit_mb"] = 240.0
    capped.key_fields = {**capped.key_fields, "memory_limit_mb": 240.0}
    logger.log([free, capped])
    data = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "-e", "caps", "runs", "compare", free.run_id[:8],
                                          capped.run_id[:8], "--format", "json"]).stdout)
    assert data["configuration_differences"] == [{"key": "memory_limit_mb", "a": None, "b": "240.0"}]
    assert data["latency"]["same_configuration"] is False
    # two training jobs apart by their loader settings: those are the differences, their steps compared too
    jobs = [RunRecord(kind="training", name=f"job w{workers} p{prefetch}",
                      params=dict(model="m", model_hash="h", batch_size=4, phase="training", device="cpu",
                                  num_workers=workers, prefetch_factor=prefetch),
                      metrics={"latency_ms": latency, "latency_ci_low_ms": latency * 0.98,
                               "latency_ci_high_ms": latency * 1.02, "step_time_ms": step, "data_wait_frac": wait})
            for workers, prefetch, latency, step, wait in ((0, 2, 9.0, 12.0, 0.2), (2, 4, 9.1, 10.0, 0.05))]
    logger.log(jobs)
    data = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "-e", "caps", "runs", "compare", jobs[0].run_id[:8],
                                          jobs[1].run_id[:8], "--format", "json"]).stdout)
    assert data["configuration_differences"] == [{"key": "num_workers", "a": "0", "b": "2"},
                                                 {"key": "prefetch_factor", "a": "2", "b": "4"}]
    rows = {r["metric"]: r for r in data["metrics"]}
    assert rows["step_time_ms"]["change_rel"] == pytest.approx(-1 / 6) and rows["data_wait_frac"]["b"] == 0.05



def _store_of_experiments(store: Path) -> tuple[str, list[str], MlflowClient]:
    """A network run in experiment demo, three in experiment other, and a client of the store."""
    with RunLogger(str(store), experiment="demo", environment=ENV) as logger:
        [here] = logger.log([network_record(batch_size=1)])
    with RunLogger(str(store), experiment="other", environment=ENV) as logger:
        there = logger.log([network_record(batch_size=b) for b in (2, 4, 8)])
    return here, there, MlflowClient(f"sqlite:///{store / 'mlflow.db'}")


def test_a_prefix_of_another_kinds_run_in_any_experiment_is_said_as_that_kind(tmp_path: Path) -> None:
    """A prefix of a fingerprint's or another experiment's mode run is said as that run's kind, as
    its full id is ("no measurement run" until 0.9.8: only this experiment's runs of the record
    kinds were looked at)."""
    here, _, client = _store_of_experiments(tmp_path / "s")
    base = ["--tracking-uri", str(tmp_path / "s"), "-e", "demo", "runs", "compare"]
    for experiment, kind in (("fingerprints", "fingerprint"), ("modes", "mode")):
        rid = client.create_run(client.create_experiment(experiment), tags={"tracker.kind": kind}).info.run_id
        client.set_terminated(rid)
        for ref in (rid, rid[:8]):
            out = runner.invoke(app, [*base, ref, here])
            assert out.exit_code == 1 and isinstance(out.exception, TrackerError), out.output
            assert f"run {rid[:12]} is a {kind} run" in str(out.exception), out.exception


def test_a_deleted_run_of_another_experiment_is_found_by_a_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deleted run of another experiment is found by a prefix of its id, past a page of deleted
    runs (until 0.9.8 only this experiment's first 1000 deleted runs were looked at)."""
    import tracker.log.inspect as inspect

    here, gone, client = _store_of_experiments(tmp_path / "s")
    for rid in gone:
        client.delete_run(rid)
    base = ["--tracking-uri", str(tmp_path / "s"), "-e", "demo", "runs"]
    monkeypatch.setattr(inspect, "SEARCH_MOST", 2)  # deleted runs read two a page
    for rid in gone:
        shown = runner.invoke(app, [*base, "show", rid[:8], "--format", "json"])
        assert shown.exit_code == 0, (shown.output, shown.exception)
        data = json.loads(shown.stdout)
        assert data["run_id"] == rid and data["deleted"] and data["experiment"] == "other"
    out = runner.invoke(app, [*base, "compare", here[:8], gone[-1][:8], "--format", "json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["b"]["deleted"], (out.output, out.exception)


def test_a_run_of_an_old_experiment_is_found_in_a_store_of_more_than_a_thousand(tmp_path: Path) -> None:
    """MLflow's client lists 1000 experiments a call, the newest first: in a store of more, a run
    of an older experiment (active or deleted) was "no run whose id starts with" it, and store info
    counted 1000 experiments, until 0.9.8. And a search of every experiment at once binds each id
    as a SQL variable: past the database's bound (SQLite before 3.32.0: 999) MLflow's error; the
    experiments are searched a few at a time."""
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.pool import Pool

    here, gone, client = _store_of_experiments(tmp_path / "s")
    for rid in gone:
        client.delete_run(rid)
    for i in range(1000):  # newer than demo and other: listed before them
        client.create_experiment(f"newer-{i:04d}")
    base = ["--tracking-uri", str(tmp_path / "s"), "-e", "newer-0999", "runs"]
    for rid, deleted in ((here, False), (gone[0], True)):
        shown = runner.invoke(app, [*base, "show", rid[:8], "--format", "json"])
        assert shown.exit_code == 0, (shown.output, shown.exception)
        assert (json.loads(shown.stdout)["run_id"], json.loads(shown.stdout)["deleted"]) == (rid, deleted)
    info = runner.invoke(app, ["--tracking-uri", str(tmp_path / "s"), "store", "info", "--format", "json"])
    assert info.exit_code == 0 and json.loads(info.stdout)["experiments"] == 1003, info.output  # Default too

    def older_sqlite(dbapi_connection: sqlite3.Connection, *_: object) -> None:
        dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)  # SQLite's bound before 3.32.0

    event.listen(Pool, "checkout", older_sqlite)
    try:
        shown = runner.invoke(app, [*base, "show", gone[1][:8], "--format", "json"])
    finally:
        event.remove(Pool, "checkout", older_sqlite)
    assert shown.exit_code == 0 and json.loads(shown.stdout)["run_id"] == gone[1], (shown.output, shown.exception)


def test_a_run_whose_samples_are_damaged_is_shown_whole_and_compared_without_them(tmp_path: Path) -> None:
    """A samples artifact cut short or garbled refused the whole run in runs show and runs compare,
    garbled as "lacks or garbles could not convert string to float: 'a'" (until 0.9.8): the run is
    shown whole beside a note, and compared without its samples, said so."""
    from tracker.log.samples import samples_json

    store = tmp_path / "s"
    whole = samples_json({"stop_reason": "precision", "block_n": 1, "warmup_ms": [1.0, 1.1],
                          "samples_ms": [1.0 + i / 100 for i in range(30)]})
    cut, garbled, good = network_record(batch_size=1), network_record(batch_size=2), network_record(batch_size=4)
    deep, binary = network_record(batch_size=8), network_record(batch_size=16)
    folder = network_record(batch_size=32)
    cut.artifacts[SAMPLES_ARTIFACT] = whole[:50]
    deep.artifacts[SAMPLES_ARTIFACT] = "[" * 100_000  # a RecursionError's traceback until 0.9.15
    garbled.artifacts[SAMPLES_ARTIFACT] = json.dumps({"format": 1, "samples_ms": [1, 2, "a"]})
    good.artifacts[SAMPLES_ARTIFACT] = binary.artifacts[SAMPLES_ARTIFACT] = folder.artifacts[SAMPLES_ARTIFACT] = whole
    with RunLogger(str(store), experiment="dmg", environment=ENV) as logger:
        logger.log([cut, garbled, good, deep, binary, folder])

    def kept(record: RunRecord) -> Path:
        [path] = (p for p in store.rglob(SAMPLES_ARTIFACT.rsplit("/", 1)[-1]) if record.run_id in p.as_posix())
        return path

    # bytes that are not UTF-8 (a UnicodeDecodeError's traceback until 0.9.15)
    kept(binary).write_bytes(b"{\"format\": 1, \xff}")
    # listed among the run's artifacts, but a folder where the file was: an IsADirectoryError's traceback until 0.9.17
    emptied = kept(folder)
    emptied.unlink()
    emptied.mkdir()
    base = ["--tracking-uri", str(store), "-e", "dmg", "runs"]
    for record, said in ((cut, f"{SAMPLES_ARTIFACT}: not JSON ("),
                         (deep, f"{SAMPLES_ARTIFACT}: JSON nested too deeply to read; cut short or garbled?"),
                         (binary, f"{SAMPLES_ARTIFACT}: not UTF-8 text (byte 14: b'\\xff'); JSON is UTF-8 text; cut "
                                  "short or garbled?"),
                         (garbled, f"{SAMPLES_ARTIFACT}'s samples_ms holds 'a', not a number")):
        shown = runner.invoke(app, [*base, "show", record.run_id[:8], "--format", "json"])
        assert shown.exit_code == 0, (shown.output, shown.exception)
        data = json.loads(shown.stdout)
        assert data["samples"] is None and data["samples_unreadable"].startswith(said), data["samples_unreadable"]
        assert data["params"]["batch_size"] == str(record.params["batch_size"]) and data["metrics"]["latency_ms"] == 12.5
        assert SAMPLES_ARTIFACT in data["artifacts"]
        text = runner.invoke(app, [*base, "show", record.run_id[:8]]).stdout
        assert f"  raw samples unreadable: {said}" in text and "params:" in text and "metrics:" in text, text
        compared = runner.invoke(app, [*base, "compare", good.run_id[:8], record.run_id[:8]])
        assert compared.exit_code == 0, (compared.output, compared.exception)
        line = compared.stdout.splitlines()[1]
        assert line.startswith(f"B: {record.run_id[:12]}") and f"(raw samples unreadable: {said}" in line, line
        assert line.endswith("judged without them)") and "latency +0.0 %" in compared.stdout, compared.stdout
    # the folder holds no file: runs show lists no samples, runs compare judges without them and says why
    shown = runner.invoke(app, [*base, "show", folder.run_id[:8], "--format", "json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["samples"] is None, (shown.output, shown.exception)
    compared = runner.invoke(app, [*base, "compare", good.run_id[:8], folder.run_id[:8]])
    assert compared.exit_code == 0, (compared.output, compared.exception)
    line = compared.stdout.splitlines()[1]
    assert (f"(raw samples unreadable: {SAMPLES_ARTIFACT} cannot be read ([Errno 21] Is a directory" in line
            and line.endswith("judged without them)")), line
    with pytest.raises(TrackerError, match="samples_ms holds 'a', not a number"):
        read_samples(json.dumps({"format": 1, "samples_ms": [1, 2, "a"]}), "x")


def test_a_comparison_puts_the_latency_change_at_the_machines_speed() -> None:
    """Two runs that each timed the speed probe: how far the machine moved between them, and the
    latency change at its speed (latency over probe), warned of past PROBE_MOVED_REL; probes of two
    versions are not compared, and a run without one leaves it out (since 0.9.10)."""
    from tracker.log.compare import PROBE_MOVED_REL, machine_speed
    from tracker.profile.probe import PROBE_TAG

    def probed(run_id: str, latency: float, probe: float | None, version: str = "1") -> Side:
        side = _side(run_id, latency, 0.01)
        if probe is not None:
            side.metrics["speed_probe_ms"], side.tags[PROBE_TAG] = probe, version
        return side

    slow = machine_speed(probed("a", 10.0, 1.6), probed("b", 13.0, 2.0))  # the machine 25 % slower, latency 30 %
    assert slow["probe_change_rel"] == pytest.approx(0.25) and slow["latency_change_rel"] == pytest.approx(1.3 / 1.25 - 1)
    assert slow["moved"] and PROBE_MOVED_REL < 0.25
    steady = machine_speed(probed("a", 10.0, 1.6), probed("b", 13.0, 1.62))
    assert not steady["moved"] and steady["latency_change_rel"] == pytest.approx(1.3 / (1.62 / 1.6) - 1)
    assert machine_speed(probed("a", 10.0, 1.6), probed("b", 13.0, None)) == {}
    assert machine_speed(probed("a", 10.0, 1.6), probed("b", 13.0, 2.0, "2")) == {"probe_versions": ["1", "2"]}


def test_a_prefix_of_a_run_tracker_did_not_make_is_found_as_its_full_id_is(tmp_path: Path) -> None:
    """A run a user's own MLflow script logged into the store (no tracker kind tag) is found by a
    prefix of its id, in this experiment or another, and deleted too, as its full id is; runs compare
    says it is no tracker run (until 0.9.13: "no run whose id starts with", the prefix search looked
    at runs of tracker's kinds alone)."""
    here, _, client = _store_of_experiments(tmp_path / "s")
    mine = [client.create_run(client.get_experiment_by_name(e).experiment_id, run_name="own").info.run_id
            for e in ("demo", "other", "other")]
    for rid in mine:
        client.log_metric(rid, "loss", 0.5)
        client.set_terminated(rid)
    client.delete_run(mine[2])
    base = ["--tracking-uri", str(tmp_path / "s"), "-e", "demo", "runs"]
    for rid, experiment in zip(mine, ("demo", "other", "other")):
        shown = runner.invoke(app, [*base, "show", rid[:6], "--format", "json"])
        assert shown.exit_code == 0, (shown.output, shown.exception)
        data = json.loads(shown.stdout)
        assert (data["run_id"], data["kind"], data["experiment"], data["metrics"]) == (rid, "", experiment, {"loss": 0.5})
        assert data["deleted"] == (rid == mine[2])
    out = runner.invoke(app, [*base, "compare", here[:8], mine[1][:8]])
    assert out.exit_code == 1 and isinstance(out.exception, TrackerError), out.output
    assert f"run {mine[1][:12]} is not a tracker run, not a measurement" in str(out.exception), out.exception


def test_a_change_past_a_percentage_is_said_as_a_ratio_in_powers_of_ten(tmp_path: Path) -> None:
    """Latencies of 1e-300 and 1e300 ms (a user's own figures, or an import's) were compared as
    "+inf %" and "(infx)", a throughput of 1.7e308 against 1e-300 as "-100.0 %" (the float ratio
    underflows), one of 1e-10 against 1e290 ms as some 300 digits, and runs list showed 1e300 ms in
    301 digits and 1e-300 as 0.000 (until 0.9.14): past a ratio of 1000 either way the change is
    that ratio in powers of ten, as pyperf says a change as a ratio; an ordinary one is as it was.
    In JSON (until 0.9.14) such a change_rel was inf, null, or -1.0, and nothing said the change:
    now it is null there, and ratio_log10 beside it says log10(B/A)."""
    from tests.conftest import layer_record, timed_probe
    from tracker.console import change, fixed

    store = tmp_path / "s"
    a = timed_probe(network_record(batch_size=1, latency_ms=1e-300, throughput_per_s=1.7e308), 2.0)
    b = timed_probe(network_record(batch_size=2, latency_ms=1e300, throughput_per_s=1e-300), 2.1)
    layer_a, layer_b = layer_record(a, 1), layer_record(b, 1)
    layer_a.metrics["latency_ms"], layer_b.metrics["latency_ms"] = 1e-300, 1e300
    ordinary = [network_record(batch_size=4), network_record(batch_size=8, latency_ms=14.0)]  # 12.5 -> 14.0 ms
    endless = network_record(batch_size=16)  # its latency made infinite below, as a user's own script may log it
    with RunLogger(str(store), experiment="far", environment=ENV) as logger:
        logger.log([a, b, layer_a, layer_b, *ordinary, endless])
    base = ["--tracking-uri", str(store), "-e", "far", "runs"]
    out = runner.invoke(app, [*base, "compare", a.run_id[:8], b.run_id[:8]])
    assert out.exit_code == 0, (out.output, out.exception)
    assert "inf %" not in out.stdout and "infx" not in out.stdout, out.stdout
    assert re.search(r"latency_ms\s+1e-300 ±1.0%\s+1e\+300 ±1.0%\s+1e\+600x\s*\n", out.stdout), out.stdout
    assert re.search(r"throughput_per_s\s+1.7e\+308\s+1e-300\s+5.9e-609x\s*\n", out.stdout), out.stdout
    assert "\nlatency 1e+600x: significant (" in out.stdout and "speed probe +5.0 % from A to B" in out.stdout
    assert "at the machine's speed (latency over probe) latency 9.5e+599x" in out.stdout, out.stdout
    assert re.search(r"conv1\s+Conv2d\s+1e-300\s+1e\+300\s+1e\+600x", out.stdout), out.stdout  # a layer's too

    def compared(one: RunRecord, other: RunRecord) -> dict:
        shown = runner.invoke(app, [*base, "compare", one.run_id[:8], other.run_id[:8], "--format", "json"])
        assert shown.exit_code == 0, (shown.output, shown.exception)
        return json.loads(shown.stdout)

    data = compared(a, b)
    lat, speed, rows = data["latency"], data["machine_speed"], {r["metric"]: r for r in data["metrics"]}
    # the float B/A - 1 overflowed (inf) or underflowed (-1.0): null; log10(B/A) beside it says the change
    assert (lat["change_rel"], lat["ratio"], lat["ratio_log10"]) == (None, None, pytest.approx(600.0)), lat
    assert lat["verdict"] == "significant", lat
    assert (rows["latency_ms"]["change_rel"], rows["latency_ms"]["ratio_log10"]) == (None, pytest.approx(600.0)), rows
    assert (rows["throughput_per_s"]["change_rel"], rows["throughput_per_s"]["ratio_log10"]) == (
        None, pytest.approx(-300.0 - math.log10(1.7e308))), rows  # -608.23, where change_rel said -1.0
    assert (speed["latency_change_rel"], speed["latency_ratio_log10"]) == (
        None, pytest.approx(600.0 - math.log10(2.1 / 2.0))), speed  # 9.5e+599x at the machine's speed
    assert (speed["probe_change_rel"], speed["probe_ratio_log10"]) == (
        pytest.approx(0.05), pytest.approx(math.log10(1.05))), speed
    top = data["layers"]["top"][0]
    assert (top["layer"], top["change_rel"], top["ratio_log10"]) == ("conv1", None, pytest.approx(600.0)), top
    # an ordinary change keeps its change_rel and ratio, and says its log10 as well
    data = compared(*ordinary)
    lat, rows = data["latency"], {r["metric"]: r for r in data["metrics"]}
    assert (lat["change_rel"], lat["ratio"], lat["ratio_log10"]) == (
        pytest.approx(0.12), pytest.approx(1.12), pytest.approx(math.log10(1.12))), lat
    assert (rows["latency_ms"]["change_rel"], rows["latency_ms"]["ratio_log10"]) == (
        pytest.approx(0.12), pytest.approx(math.log10(1.12))), rows
    # to an infinite latency: no ratio at all (null, no log10), said as +inf % alone (where "(infx)" followed)
    MlflowClient(f"sqlite:///{store / 'mlflow.db'}").log_metric(endless.run_id, "latency_ms", math.inf, step=1)
    lat = compared(ordinary[0], endless)["latency"]
    assert (lat["change_rel"], lat["ratio"], "ratio_log10" in lat) == (None, None, False), lat
    out = runner.invoke(app, [*base, "compare", ordinary[0].run_id[:8], endless.run_id[:8]])
    assert out.exit_code == 0 and "\nlatency +inf %: not judged (" in out.stdout, (out.output, out.exception)
    listed = runner.invoke(app, [*base, "list"]).stdout
    assert re.search(r" 1e\+300 +│", listed) and re.search(r" 1e-300 +│", listed) and "0.000" not in listed, listed
    # an ordinary change is a percentage as before; the bounds, either way, a ratio of 1000
    assert [change(12.5, 14.0), change(10.0, 10.0), change(80.0, 70.0), change(1.0, 0.0)] == [
        "+12.0 %", "+0.0 %", "-12.5 %", "-100.0 %"]
    assert [change(1.0, 1000.0), change(1.0, 1001.0), change(1.0, 1e-3), change(1.0, 9e-4)] == [
        "+99900.0 %", "1e+03x", "-99.9 %", "9e-04x"]
    assert [change(-2.0, -3.0), change(1.0, float("inf")), change(1.0, 9.96e5)] == ["+50.0 %", "+inf %", "1e+06x"]
    assert [change(0.0, 0.0), change(0.0, 3.0)] == ["+0.0 %", "from 0"]  # a ZeroDivisionError until 0.9.17
    assert [fixed(12.5), fixed(0.0), fixed(0.0004), fixed(0.0005), fixed(1e11), fixed(1e12)] == [
        "12.500", "0.000", "0.0004", "0.001", "100000000000.000", "1e+12"]
