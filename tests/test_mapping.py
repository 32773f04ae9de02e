"""Multi-DNN workloads: concurrent split networks logged as mapping runs, seeded generation and
its options, clear errors for bad mappings, and the slowdown view."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.test_cli import in_process
from tracker.cli.app import app
from tracker.errors import ConfigError
from tracker.profile.mapping import GenerateOptions, generate, layer_count, parse_mapping, validate
from tracker.settings import resolve_location

runner = CliRunner()
MODELS = ["mobilenet_v3_small", "squeezenet1_1", "mnasnet0_5", "shufflenet_v2_x0_5", "resnet18"]


def test_two_split_networks_run_at_once_log_a_mapping_run_and_resume(tmp_path: Path) -> None:
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    mapping = "mobilenet_v3_small@40:cpu>cpu,squeezenet1_1@30:cpu>cpu"
    args = ["--tracking-uri", str(runs), "mapping", "run", "--mapping", mapping, "--duration", "2", "--warmup", "0.5",
            "--format", "json"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    [w] = json.loads(out.stdout)
    assert w["status"] == "FINISHED" and w["mapping"] == mapping and not w["reused"]
    for net, split in zip(w["networks"], (40, 30)):
        assert net["split"] == split and net["devices"] == ["cpu", "cpu"] and net["inf_count"] > 0
        assert net["avg_inf_ms"] > 0 and 0 <= net["avg_transfer_ms"] < net["avg_inf_ms"]
        assert net["stage0_ms"] + net["stage1_ms"] <= net["avg_inf_ms"] * 1.001
    client = MlflowClient(resolve_location(str(runs)).uri)
    run = client.get_run(w["run_id"])
    assert run.data.tags["tracker.kind"] == "mapping" and run.data.params["mapping"] == mapping
    assert run.data.params["net1.model"] == "squeezenet1_1" and int(run.data.params["net0.params"]) > 1e6
    assert int(run.data.params["net0.layers"]) == layer_count("mobilenet_v3_small")
    assert run.data.tags["mlflow.note.content"] == (
        f"2 networks at once for 2 s after 0.5 s of warm-up, each split between two stages: {mapping}.")
    from tracker.profile.mapping import mapping_description

    whole = parse_mapping(f"squeezenet1_1@{layer_count('squeezenet1_1')}:cpu>cpu")  # all on its first device
    assert mapping_description(whole, 1, 0) == f"1 network for 1 s after 0 s of warm-up, whole: {whole.compact()}."
    assert run.data.metrics["cpu_util_pct"] > 0 and run.data.metrics["window_s"] == pytest.approx(2, rel=0.1)
    assert run.data.metrics["total_throughput_per_s"] == pytest.approx(
        sum(n["throughput_per_s"] for n in w["networks"]))
    cpu = client.get_metric_history(w["run_id"], "system/cpu_util_pct")  # the window's series (System metrics tab)
    assert len(cpu) >= 10 and max(m.step for m in cpu) <= 1000 * run.data.metrics["window_s"] + 1  # whole ms, rounded
    artifact = json.loads(Path(client.download_artifacts(w["run_id"], "mapping.json", str(tmp_path))).read_text())
    assert [n["split"] for n in artifact["networks"]] == [40, 30]

    again = runner.invoke(app, args)
    [w2] = json.loads(again.stdout)
    assert w2["reused"] and w2["run_id"] == w["run_id"]  # measured already: skipped

    # the baseline the view pairs with the workload (its throughput's value is not what this reads: 2 s of
    # sampling until 0.9.15)
    alone = runner.invoke(app, ["--tracking-uri", str(runs), "profile", "network", "squeezenet1_1", "--time-cap", "0.5",
                                "--precision", "0.2", "--format", "json"])
    assert alone.exit_code == 0, alone.output
    assert run.data.params["net1.input_size"] == "224"
    for other in (["--dtype", "int8"], ["--input-size", "64"]):  # measured later, but not as the workload runs it
        out = runner.invoke(app, ["--tracking-uri", str(runs), "profile", "network", "squeezenet1_1", "--time-cap", "0.5",
                                  "--precision", "0.2", *other, "--format", "json"])
        assert out.exit_code == 0 and json.loads(out.stdout)["status"] == "FINISHED", out.output
    assert runner.invoke(app, ["--tracking-uri", str(runs), "warehouse", "load", "--warehouse", str(wh)]).exit_code == 0
    rows = json.loads(runner.invoke(app, ["sql", "SELECT model, net_index, throughput_per_s, alone_throughput_per_s, slowdown, "
                                          "alone_run_id, mode, alone_mode FROM mapping_slowdown", "--warehouse", str(wh),
                                          "--format", "json"]).stdout)
    assert [r["model"] for r in rows] == ["mobilenet_v3_small", "squeezenet1_1"]
    assert rows[1]["alone_run_id"] == json.loads(alone.stdout)["run_id"]  # float32 at 224, as in the workload
    assert rows[0]["alone_throughput_per_s"] is None and rows[0]["alone_mode"] is None  # never measured alone
    assert rows[1]["alone_mode"] == json.loads(alone.stdout)["mode"]  # the baseline's mode, to hold against the workload's
    assert rows[1]["slowdown"] == pytest.approx(rows[1]["alone_throughput_per_s"] / rows[1]["throughput_per_s"])

    retain = runner.invoke(app, [*args[:-2], "--allocator", "retain", "--duration", "0.5", "--format", "json"])
    assert retain.exit_code == 0, retain.output
    [w3] = json.loads(retain.stdout)
    assert not w3["reused"]  # the allocator is part of the mode, and the mode of the key
    assert client.get_run(w3["run_id"]).data.params["mode"] == run.data.params["mode"] + "-retain"


def test_generation_is_seeded_and_honours_every_option() -> None:
    def draw(gpu: bool = False, **kw: object) -> list:
        return generate(GenerateOptions(models=MODELS, **kw), gpu)  # type: ignore[arg-type]

    first = [m.compact() for m in draw(seed=7, sets=3, samples=2)]
    assert first == [m.compact() for m in draw(seed=7, sets=3, samples=2)]
    assert first != [m.compact() for m in draw(seed=8, sets=3, samples=2)]
    many = draw(seed=1, sets=12, num_nets=(2, 3))
    assert {len(m.networks) for m in many} == {2, 3}
    assert all(n.model in MODELS for m in many for n in m.networks)
    assert all(len(m.networks) == 1 for m in draw(seed=1, sets=5, single=True))
    whole = draw(seed=2, sets=4, max_split=0)
    assert all(n.split == layer_count(n.model) and n.devices[0] == n.devices[1] for m in whole for n in m.networks)
    one = draw(seed=2, sets=6, max_split=1)
    assert all(sum(0 < n.split < layer_count(n.model) for n in m.networks) <= 1 for m in one)
    assert any(0 < n.split < layer_count(n.model) for m in one for n in m.networks)
    grouped = draw(seed=3, sets=2, samples=3)  # three mappings of each set of networks
    assert len({tuple(n.model for n in m.networks) for m in grouped}) == 2
    assert all(d == "cpu" for m in draw(seed=4, sets=4) for n in m.networks for d in n.devices)
    assert all(d == "cuda" for m in draw(True, seed=4, sets=4, gpu_only=True) for n in m.networks for d in n.devices)
    assert all(d == "cpu" for m in draw(True, seed=4, sets=4, device_priorities=(1, 0)) for n in m.networks for d in n.devices)
    mixed = {d for m in draw(True, seed=4, sets=8, device_priorities=(0.4, 0.6)) for n in m.networks for d in n.devices}
    assert mixed == {"cpu", "cuda"}
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        draw(seed=1, gpu_only=True)
    with pytest.raises(ConfigError, match="num-nets-range"):
        draw(seed=1, num_nets=(3, 2))


def test_bad_mappings_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"split index 999 is out of range for resnet18 \(0\.\.69"):
        validate(parse_mapping("resnet18@999:cpu>cpu"), gpu=False)
    with pytest.raises(ConfigError, match="unknown device 'tpu'"):
        validate(parse_mapping("resnet18@3:cpu>tpu"), gpu=False)
    with pytest.raises(ConfigError, match="not available on this machine"):
        validate(parse_mapping("resnet18@3:cpu>cuda"), gpu=False)
    # a CUDA index in digits 0-9 alone, as every other command takes it (on a machine with a GPU, cuda:٣ was taken,
    # and torch refused it in the child: a FAILED run, until 0.9.13)
    with pytest.raises(ConfigError, match=re.escape("unknown device 'cuda:\u0663' (known: cpu, cuda, cuda:N)")):
        validate(parse_mapping("resnet18@3:cpu>cuda:\u0663"), gpu=True)
    with pytest.raises(ConfigError, match=re.escape("'resnet18@3:cpu>cpu>cpu': 3 devices; a network is split between two")):
        parse_mapping("resnet18@3:cpu>cpu>cpu")  # it said: unknown device 'cpu>cpu'
    validate(parse_mapping("resnet18:cpu,squeezenet1_1@0:cpu>cpu"), gpu=False)  # whole on one device; all on the second
    # cuda:N in a mapping, as its `mapping` param logs it (cut at its last colon until 0.9.3)
    assert [(n.model, n.split, n.devices) for n in parse_mapping("resnet18@30:cpu>cuda:1,squeezenet1_1:cuda:1").networks] == [
        ("resnet18", 30, ("cpu", "cuda:1")), ("squeezenet1_1", 66, ("cuda:1", "cuda:1"))]
    # a mapping file's values of their types (a split of 3.7 was cut to 3, a third device dropped)
    from tracker.profile.mapping import from_json

    for net, message in [({"model": "resnet18", "split": 3.7, "devices": ["cpu", "cpu"]},
                          "network 1 (resnet18): split should be a whole number of layers, got 3.7"),
                         ({"model": "resnet18", "split": True, "devices": ["cpu", "cpu"]},
                          "network 1 (resnet18): split should be a whole number of layers, got True"),
                         ({"model": "resnet18", "split": 3, "devices": ["cpu", "cpu", "cpu"]},
                          "network 1 (resnet18): devices should be two device names [first, second], got ['cpu', 'cpu', 'cpu']"),
                         ({"model": "resnet18", "split": 3, "devices": "cp"},
                          "network 1 (resnet18): devices should be two device names [first, second], got 'cp'"),
                         ({"model": None, "split": 3, "devices": ["cpu", "cpu"]}, "network 1: model should name a network, got None")]:
        with pytest.raises(ConfigError) as info:
            from_json({"networks": [net]}, "m.json[0]")
        assert str(info.value) == f"m.json[0]: {message}"
    # what draws mappings, with mappings given: refused (ignored, unchecked, until 0.9.3)
    proc = in_process(["mapping", "run", "--mapping", "squeezenet1_1:cpu", "--models", "nosuch"], tmp_path)
    assert proc.returncode == 2 and ("error: --models is for mappings drawn at random; the mappings of --mapping are "
                                     "given whole: leave it out") in proc.stderr
    (tmp_path / "empty.json").write_text("[]")
    proc = in_process(["mapping", "run", "--file", str(tmp_path / "empty.json")], tmp_path)
    assert proc.returncode == 1 and f"{tmp_path / 'empty.json'}: holds no mapping (an empty list)" in proc.stderr
    proc = in_process(["--tracking-uri", str(tmp_path / "runs"), "mapping", "run", "--mapping", "resnet18@-2:cpu>cpu"],
                      tmp_path)
    assert proc.returncode == 2 and "split index -2 is out of range" in proc.stderr  # a usage error (1 until 0.9.10)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    proc = in_process(["mapping", "generate", "--device-priorities", "0.4"], tmp_path)
    assert proc.returncode == 2 and "--device-priorities" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    # options that would be passed over are refused (without a word until 0.9.5)
    for args, said in ((["--single", "--num-nets-range", "2", "3"], "--num-nets-range is for workloads of several "
                        "networks; --single runs each alone: give one"),
                       (["--models", " , "], "--models names no model: give a comma list of zoo names, or leave it "
                        "out for the default list")):
        refused = CliRunner().invoke(app, ["mapping", "generate", *args])
        assert refused.exit_code == 1 and str(refused.exception) == said, (args, refused.exception)
    assert not (tmp_path / "runs").exists()  # nothing was created for a bad mapping


def test_a_workload_that_runs_out_of_memory_fails_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracker.log.logger import RunLogger
    from tracker.profile.mapping import Workload, run_workloads

    monkeypatch.setenv("TRACKER_FAULT", "oom@4")  # the child of every workload at batch size >= 4 runs out of memory
    logger = RunLogger(str(tmp_path / "runs"), experiment="multi-dnn")
    m = parse_mapping("squeezenet1_1@10:cpu>cpu,shufflenet_v2_x0_5:cpu")
    results = run_workloads(logger, [Workload(m, 4, 0.5, 0.0), Workload(m, 1, 0.5, 0.0)])
    assert [(r["status"], r["reason"]) for r in results] == [("FAILED", "oom"), ("FINISHED", None)]
    assert results[0]["networks"][0]["inf_count"] is None  # nothing invented for the failed workload
    assert all(n["inf_count"] > 0 for n in results[1]["networks"])
    run = MlflowClient(logger.location.uri).get_run(results[0]["run_id"])
    assert run.info.status == "FAILED" and run.data.params["batch_size"] == "4"


def one_line(args: list[str], cwd: Path, status: int = 1) -> str:
    """``tracker ARGS`` in this process, refused: its one line of stderr (``status``: 1, or 2 for a usage
    error, an option's value; nothing on stdout)."""
    proc = in_process(args, cwd)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == status and len(lines) == 1 and not proc.stdout, (args, proc.returncode, proc.stdout,
                                                                                 proc.stderr)
    return lines[0]


def test_a_mapping_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe[")  # a traceback (UnicodeDecodeError) until 0.9.6
    line = one_line(["--tracking-uri", str(tmp_path / "runs"), "mapping", "run", "--file", "bin.json", "--duration", "0.5",
                     "--warmup", "0"], tmp_path)
    assert line == ("error: bin.json: not UTF-8 text (byte 0: b'\\xff'); a mapping file is JSON, as "
                    "`tracker mapping generate --out` writes")
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + b'[{"networks": [{"model": "squeezenet1_1", "split": 3, '
                                        b'"devices": ["cpu", "tpu"]}]}]')  # an editor's mark is read past
    assert "unknown device 'tpu'" in one_line(["mapping", "run", "--file", "bom.json"], tmp_path)
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)  # a RecursionError's traceback until 0.9.8
    assert one_line(["mapping", "run", "--file", "deep.json"], tmp_path) == (
        "error: deep.json: JSON nested too deeply to read; a mapping file is a mapping or a list of them, as "
        "`tracker mapping generate --out` writes")
    (tmp_path / "long.json").write_text('{"networks": [{"split": 1' + "0" * 5000 + "}]}")  # a traceback until 0.9.14
    assert one_line(["mapping", "run", "--file", "long.json"], tmp_path) == (
        "error: long.json: a whole number of more than 4,300 digits (more than Python reads); a mapping file is a "
        "mapping or a list of them, as `tracker mapping generate --out` writes")
    assert not (tmp_path / "runs").exists()


def test_a_mapping_file_says_what_runs(tmp_path: Path) -> None:
    from tracker.profile.mapping import from_json

    net = {"model": "squeezenet1_1", "split": 66, "devices": ["cpu", "cpu"], "layers": 66}
    # what `generate --out` writes is read back; its "mapping" in either form (whole: short or long)
    for text in ("squeezenet1_1@66:cpu>cpu", "squeezenet1_1:cpu"):
        assert from_json({"networks": [net], "mapping": text}, "m.json[0]").compact() == "squeezenet1_1@66:cpu>cpu"
    # unknown keys and a "mapping" that says other than "networks": passed over without a word until 0.9.6
    for data, message in [({"networks": [net | {"speed": 9}]},
                           "network 1 (squeezenet1_1): unknown key 'speed' (known: model, split, devices, layers)"),
                          ({"networks": [net], "speed": 9, "Mapping": "x"},
                           "unknown keys 'speed', 'Mapping' (known: networks, mapping)"),
                          ({"networks": [net], "mapping": "resnet18:cpu"},
                           "\"mapping\" 'resnet18:cpu' disagrees with \"networks\" (squeezenet1_1@66:cpu>cpu): the "
                           "networks are what runs; make the two agree, or leave \"mapping\" out"),
                          ({"networks": [net], "mapping": "squeezenet1_1@3:cpu>cpu"}, "disagrees with \"networks\""),
                          ({"networks": [net], "mapping": 3}, "\"mapping\" should be the networks' compact form")]:
        with pytest.raises(ConfigError) as info:
            from_json(data, "m.json[0]")
        assert str(info.value).startswith("m.json[0]: ") and message in str(info.value), (data, str(info.value))
    (tmp_path / "m.json").write_text(json.dumps([{"networks": [net | {"speed": 9}]}]))
    assert one_line(["mapping", "run", "--file", "m.json"], tmp_path) == (
        "error: m.json[0]: network 1 (squeezenet1_1): unknown key 'speed' (known: model, split, devices, layers)")
    # written for a network of another layer count: its split would fall elsewhere (split there silently until 0.9.6)
    from tracker.profile.mapping import validate

    validate(from_json({"networks": [net]}, "m.json[0]"), gpu=False)  # its own count: as written
    with pytest.raises(ConfigError, match=r"^m.json\[0\]: network 1 \(squeezenet1_1\): the file says squeezenet1_1 has "
                                          r"70 layers, and it has 66 here"):
        validate(from_json({"networks": [net | {"layers": 70}]}, "m.json[0]"), gpu=False)
    with pytest.raises(ConfigError, match="layers should be its whole number of layers, got 'x'"):
        from_json({"networks": [net | {"layers": "x"}]}, "m.json[0]")


def test_mapping_run_options_are_checked_before_any_note(tmp_path: Path) -> None:
    import os

    # one line, the note that every stage runs on cpu not said first (two lines until 0.9.6)
    for value in ("0", "-1", str((os.cpu_count() or 1) + 1)):
        line = one_line(["mapping", "run", "--mapping", "squeezenet1_1:cpu", "--threads", value], tmp_path, status=2)
        assert line.startswith(f"error: --threads {value}: expected a whole number from 1 to"), line


def test_generate_out_that_cannot_be_written_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "mf").mkdir()
    (tmp_path / "afile").write_text("")
    args = ["mapping", "generate", "--models", "squeezenet1_1", "--single"]
    # "error: Is a directory: mf" after the note, not naming --out, until 0.9.6
    assert one_line([*args, "--out", "mf"], tmp_path) == "error: --out mf is a folder: give a file name (e.g. mf/mappings.json)"
    assert one_line([*args, "--out", "afile/m.json"], tmp_path) == (
        "error: --out afile/m.json: cannot write the mappings (Not a directory: afile)")
    written = in_process([*args, "--out", "new/m.json"], tmp_path)
    assert written.returncode == 0 and json.loads((tmp_path / "new" / "m.json").read_text())[0]["mapping"] in written.stdout


def test_a_bad_network_is_named_as_it_was_given(tmp_path: Path) -> None:
    from tracker.profile.mapping import from_json

    # as typed (its compact form, mobilenet_v3_small@157:tpu>tpu, until 0.9.6)
    for typed, said in [("mobilenet_v3_small:tpu", "unknown device 'tpu' (known: cpu, cuda, cuda:N)"),
                        ("squeezenet1_1@3:cpu>cuda:0", "device cuda is not available on this machine (no CUDA GPU)"),
                        ("squeezenet1_1@999:cpu", "split index 999 is out of range for squeezenet1_1 (0..66, its 66 layers)")]:
        with pytest.raises(ConfigError) as info:
            validate(parse_mapping(f"squeezenet1_1:cpu,{typed}"), gpu=False)
        assert str(info.value) == f"mapping entry {typed!r}: {said}"
    with pytest.raises(ConfigError) as info:  # a file's network by its place
        validate(from_json({"networks": [{"model": "squeezenet1_1", "split": 3, "devices": ["cpu", "tpu"]}]}, "m.json[0]"), gpu=False)
    assert str(info.value) == "m.json[0]: network 1 (squeezenet1_1): unknown device 'tpu' (known: cpu, cuda, cuda:N)"
    assert parse_mapping("squeezenet1_1:cpu") == parse_mapping("squeezenet1_1@66:cpu>cpu")  # where it was given is no part of it
    assert one_line(["mapping", "run", "--mapping", "squeezenet1_1:tpu"], tmp_path, status=2) == (
        "error: mapping entry 'squeezenet1_1:tpu': unknown device 'tpu' (known: cpu, cuda, cuda:N)")


def test_a_whole_network_short_or_long_is_one_workload() -> None:
    from tracker.profile.mapping import Workload

    # the README's `model:cpu` is what generate writes as `model@N:cpu>cpu` (its layer count): one key
    short, long = parse_mapping("squeezenet1_1:cpu"), parse_mapping("squeezenet1_1@66:cpu>cpu")
    assert short.compact() == long.compact() == "squeezenet1_1@66:cpu>cpu"
    assert Workload(short).key_fields("cpu-t1") == Workload(long).key_fields("cpu-t1")
    whole = generate(GenerateOptions(models=["squeezenet1_1"], single=True, max_split=0), False)[0].networks[0]
    assert whole.compact() == f"squeezenet1_1@{layer_count('squeezenet1_1')}:cpu>cpu"
    assert "the same as model:cpu" in " ".join(runner.invoke(app, ["mapping", "generate", "--help"]).output.split())


def test_a_workload_runs_at_most_max_nets_networks(tmp_path: Path) -> None:
    from tracker.profile.mapping import MAX_NETS, from_json

    # one workload of ~50,000 networks was drawn, and any number given was taken, until 0.9.6
    assert one_line(["mapping", "generate", "--num-nets-range", "2", "100000", "--models", "mobilenet_v3_small,squeezenet1_1"],
                    tmp_path, status=2) == (f"error: --num-nets-range 2 100000: a workload runs at most {MAX_NETS} networks at once "
                                  "(all in one child, a thread each: more share the device too thinly to be measured)")
    assert len(generate(GenerateOptions(models=["squeezenet1_1"], num_nets=(MAX_NETS, MAX_NETS), max_split=0), False)[0].networks) == MAX_NETS
    many = ",".join(["squeezenet1_1:cpu"] * (MAX_NETS + 1))
    with pytest.raises(ConfigError, match=rf"^mapping 'squeezenet1_1:cpu,.*\.\.\.': {MAX_NETS + 1} networks; a workload runs at most {MAX_NETS} at once"):
        validate(parse_mapping(many), gpu=False)
    net = {"model": "squeezenet1_1", "split": 66, "devices": ["cpu", "cpu"]}
    with pytest.raises(ConfigError, match=rf"^m.json\[0\]: {MAX_NETS + 1} networks; a workload runs at most"):
        validate(from_json({"networks": [net] * (MAX_NETS + 1)}, "m.json[0]"), gpu=False)


def test_a_timeout_that_cannot_cover_the_window_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from tracker.log.logger import RunLogger
    from tracker.profile.mapping import Workload, run_workloads

    # taken, then each workload a FAILED run of reason timeout, until 0.9.6
    assert one_line(["--tracking-uri", str(tmp_path / "runs"), "mapping", "run", "--mapping", "squeezenet1_1:cpu",
                     "--duration", "30", "--timeout", "5"], tmp_path, status=2) == (
        "error: --timeout 5: cannot cover --warmup 2 + --duration 30 = 32 s, let alone the child's start-up: give more, "
        "or leave it out (default: 120 + 3 x (warm-up + duration) = 216 s)")
    assert not (tmp_path / "runs").exists()
    logger = RunLogger(str(tmp_path / "lib"), experiment="multi-dnn")
    m = parse_mapping("squeezenet1_1:cpu")
    with pytest.raises(ConfigError, match=r"^--timeout 3: cannot cover --warmup 0 \+ --duration 3 = 3 s"):
        run_workloads(logger, [Workload(m, 1, 0.5, 0.0), Workload(m, 1, 3.0, 0.0)], timeout_s=3)
    assert logger.measured("mapping", statuses=("FINISHED", "FAILED")) == set()  # not even the first one ran


def test_generate_draws_at_most_max_draws_and_its_ctrl_c_says_what_is_true(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import tracker.cli.mapping as cli
    import tracker.profile.mapping as mapping
    import tracker.files as files
    from tracker.profile.mapping import MAX_DRAWS

    # any number was drawn until 0.9.8: 100,000,000 x 1,000 grew to 1 GB in 8 s
    GenerateOptions(sets=MAX_DRAWS // 2, samples=2).check()
    with pytest.raises(ConfigError, match=f"at most {MAX_DRAWS:,} mappings"):
        GenerateOptions(sets=MAX_DRAWS // 2 + 1, samples=2).check()
    assert one_line(["mapping", "generate", "--sets", "100000000", "--samples", "1000"], tmp_path, status=2) == (
        f"error: --sets 100000000 x --samples 1000: at most {MAX_DRAWS:,} mappings are drawn at once (each a workload "
        "of its own): draw fewer")
    assert "at most" in one_line(["mapping", "run", "--sets", str(MAX_DRAWS), "--samples", "2"], tmp_path, status=2)
    assert not (tmp_path / "runs").exists()
    # a Ctrl-C said main's "what was logged before is kept" until 0.9.8: generate logs nothing
    args = ["mapping", "generate", "--models", "squeezenet1_1", "--single"]

    def ctrl_c(*_: object) -> None:
        raise KeyboardInterrupt

    for where, module, name, out, says in [
            ("drawing", mapping, "generate", [], "interrupted: generate logs nothing, and the mappings were not all printed"),
            ("writing", files, "write_whole", ["--out", "m.json"], "interrupted: generate logs nothing, and --out m.json was not written"),
            ("printing", cli, "_say", ["--out", "m.json"], "interrupted: generate logs nothing; the mappings are written to m.json")]:
        with monkeypatch.context() as patched:
            patched.setattr(module, name, ctrl_c)
            proc = in_process([*args, *out], tmp_path)
        assert proc.returncode == 130 and proc.stderr == says + "\n", (where, proc)
        assert (tmp_path / "m.json").exists() == (where == "printing"), where


def test_a_networks_own_errors_name_where_it_was_given(tmp_path: Path) -> None:
    from tracker.errors import UnknownModelError
    from tracker.profile.mapping import from_json

    # an unknown model, no network at all and a missing file were said without the mapping or network until 0.9.8
    def file_net(net: dict) -> dict:
        return {"networks": [{"model": "squeezenet1_1", "split": 3, "devices": ["cpu", "cpu"]}, net]}

    with pytest.raises(UnknownModelError, match=re.escape("m.json[0]: network 2 (resnet18@3:cpu): unknown model 'resnet18@3:cpu'")):
        validate(from_json(file_net({"model": "resnet18@3:cpu", "split": 3, "devices": ["cpu", "cpu"]}), "m.json[0]"), gpu=False)
    with pytest.raises(ConfigError) as info:
        validate(from_json(file_net({"model": "nofile.py:Net", "split": 1, "devices": ["cpu", "cpu"]}), "m.json[0]"), gpu=False)
    assert str(info.value) == "m.json[0]: network 2 (nofile.py:Net): network file nofile.py does not exist"
    with pytest.raises(ConfigError) as info:
        validate(from_json({"networks": []}, "m.json[1]"), gpu=False)
    assert str(info.value) == "m.json[1]: a mapping needs at least one network"
    with pytest.raises(UnknownModelError, match=r"^mapping entry 'nosuch:cpu': unknown model 'nosuch'"):
        parse_mapping("squeezenet1_1:cpu,nosuch:cpu")
    (tmp_path / "m.json").write_text(json.dumps([file_net({"model": "squeezenet1_1", "split": 3, "devices": ["cpu", "cpu"]}),
                                                 {"networks": []}]))
    assert one_line(["mapping", "run", "--file", "m.json"], tmp_path) == "error: m.json[1]: a mapping needs at least one network"


def test_the_readmes_given_mappings_say_where_they_run() -> None:
    """The README's `mapping run --mapping "resnet18@30:cpu>cuda,..."` was "one given workload", and it
    said "on a machine without a GPU every stage is cpu", true of drawn mappings only: that one is refused
    there. Each given mapping in it now runs on a CPU, or is said to be a GPU machine's, refused as it says."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    given = re.findall(r'tracker mapping run --mapping "([^"]+)"([^\n|]*)', readme)
    assert len(given) >= 3
    for text, rest in given:
        mapping = parse_mapping(text)
        if not mapping.uses_cuda:
            validate(mapping, gpu=False)
            continue
        assert "on a GPU" in rest, (text, rest)
        with pytest.raises(ConfigError) as info:
            validate(mapping, gpu=False)
        assert f"`{info.value}`" in " ".join(readme.split()), str(info.value)
    assert "every stage of a drawn mapping is `cpu`" in " ".join(readme.split())


def test_a_mapping_file_may_hold_one_mapping(tmp_path: Path) -> None:
    from tracker.cli.mapping import _read_file

    # the README's {"networks": [...]} alone was refused, "expected a list of mappings", until 0.9.8
    net = {"model": "squeezenet1_1", "split": 3, "devices": ["cpu", "cpu"]}
    (tmp_path / "one.json").write_text(json.dumps({"networks": [net]}))
    (one,) = _read_file(tmp_path / "one.json")
    assert one.compact() == "squeezenet1_1@3:cpu>cpu" and one.given == str(tmp_path / "one.json")
    (tmp_path / "list.json").write_text(json.dumps([{"networks": [net]}]))  # as a list of one
    assert [m.compact() for m in _read_file(tmp_path / "list.json")] == [one.compact()]
    (tmp_path / "m.json").write_text(json.dumps({"networks": [net | {"devices": ["cpu", "tpu"]}]}))
    assert one_line(["mapping", "run", "--file", "m.json"], tmp_path) == (
        "error: m.json: network 1 (squeezenet1_1): unknown device 'tpu' (known: cpu, cuda, cuda:N)")
    (tmp_path / "m.json").write_text("3")
    assert one_line(["mapping", "run", "--file", "m.json"], tmp_path) == (
        'error: m.json: expected a mapping {"networks": [...]} or a list of them (as `tracker mapping generate --out` '
        "writes)")


def test_a_mapping_on_cuda_n_reads_that_gpu() -> None:
    """A mapping whose stages use cuda:1 reads cuda:1's mode and telemetry (GPU 0's until 0.9.8); one that
    uses two GPUs reads the first it names and says so in its run."""
    from tracker.environment import cuda_index
    from tracker.profile.mapping import Workload, workload_record
    from tracker.profile.modes import read_mode

    on_one = parse_mapping("squeezenet1_1@30:cpu>cuda:1")
    assert on_one.read_device == "cuda:1" and cuda_index(on_one.read_device) == 1 and on_one.unread_note() is None
    w = Workload(on_one, threads=1)
    assert w.device() == "cuda:1" and w.name().endswith("· cuda:1")
    mode = read_mode(w.device(), threads=1)
    assert mode.device == "cuda:1" and mode.mode_id.startswith("cuda1-")
    record = workload_record(w, mode.mode_id, None, 0, ("crash", "x", ""))
    assert record.params["device"] == "cuda:1" and "tracker.gpus_unread" not in record.tags
    assert parse_mapping("squeezenet1_1@30:cpu>cuda").read_device == "cuda"  # cuda:0 is cuda, as before
    assert parse_mapping("squeezenet1_1@30:cpu>cpu").read_device == "cpu"
    assert cuda_index(parse_mapping("squeezenet1_1@30:cpu>cpu").read_device) is None  # no GPU read

    two = Workload(parse_mapping("squeezenet1_1@30:cuda:2>cpu,squeezenet1_1@20:cuda>cuda:2"), threads=1)
    assert two.mapping.gpus == ("cuda:2", "cuda") and two.device() == "cuda:2"
    record = workload_record(two, "cuda2-t1", None, 0, ("crash", "x", ""))
    assert record.tags["tracker.gpus_unread"] == "cuda"
    assert "its stages use 2 GPUs (cuda:2, cuda): the mode, GPU power, utilisation and memory are cuda:2's alone " \
           "(cuda not read)" in record.description


@pytest.mark.parametrize("weights", ["nan,1", "inf,1", "1,-inf"])
def test_device_priorities_must_be_finite(tmp_path: Path, weights: str) -> None:
    """nan and inf were taken without a word (a traceback, "Total of weights must be finite", on a GPU) until 0.9.8."""
    assert one_line(["mapping", "generate", "--device-priorities", weights, "--models", "squeezenet1_1"], tmp_path,
                    status=2) == f"error: --device-priorities '{weights}': expected two finite numbers (cpu, cuda), e.g. 0.4,0.6"
    with pytest.raises(ConfigError, match="need two finite weights >= 0"):
        a, b = (float(v) for v in weights.split(","))
        GenerateOptions(device_priorities=(a, b)).check()


@pytest.mark.alone  # it reads the machine's CPU, another process burning a core
def test_mapping_run_says_what_other_processes_took_and_why_a_workload_timed_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Until 0.9.8 a mapping run logged others' CPU as a series and not as its metric, and said nothing
    of it; a timeout was "FAILED (timeout)" alone; and a given CPU mapping got the drawn ones' note
    "no CUDA GPU on this machine"."""
    from tests.conftest import busy_elsewhere

    mapping = "squeezenet1_1@10:cpu>cpu"
    with busy_elsewhere():
        proc = in_process(["--tracking-uri", str(tmp_path / "runs"), "mapping", "run", "--mapping", mapping,
                           "--duration", "1", "--warmup", "0", "--threads", "1"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no CUDA GPU" not in proc.stderr  # a given mapping names its devices
    said = re.search(r"note: other processes took (\d+) % of this machine's CPU while it was measured", proc.stderr)
    assert said, proc.stderr
    run_id = re.search(r"run ([0-9a-f]{12})", proc.stdout).group(1)
    client = MlflowClient(resolve_location(str(tmp_path / "runs")).uri)
    [run] = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])
             if r.info.run_id.startswith(run_id)]
    assert round(run.data.metrics["cpu_util_others_pct"]) == int(said.group(1)) and int(said.group(1)) >= 10

    monkeypatch.setenv("TRACKER_FAULT", "hang")
    proc = in_process(["--tracking-uri", str(tmp_path / "runs"), "mapping", "run", "--mapping", mapping,
                       "--duration", "0.5", "--warmup", "0", "--timeout", "2"], tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith(
        f"{mapping}: FAILED (timeout): no result within 2 s: its child starts, builds and traces 1 network, then runs "
        "0 s of warm-up and 0.5 s of window; give it at least 121.5 s (--timeout); run "), proc.stdout


@pytest.mark.parametrize(("args", "said"), [
    # taken until 0.9.14: the workload was measured (a store made, a run begun) until it was stopped. (Its device
    # is none, refused once the options are read: without their bound this test fails at once, not in 1e308 s.)
    (["run", "--mapping", "squeezenet1_1:tpu", "--duration", "1e308"], "--duration': Input should be less than or "
                                                                       "equal to 86400"),
    (["run", "--mapping", "squeezenet1_1:tpu", "--warmup", "1e308"], "--warmup': Input should be less than or equal "
                                                                     "to 86400"),
    # no more networks are cut than a workload runs (any number was taken until 0.9.14)
    (["generate", "--max-split", "33"], "--max-split': Input should be less than or equal to 32"),
    (["run", "--max-split", "1" + "0" * 30], "--max-split': Input should be less than or equal to 32"),
])
def test_a_window_warm_up_or_max_split_past_its_bound_is_refused_before_anything_is_made(
        tmp_path: Path, args: list[str], said: str) -> None:
    assert one_line(["--tracking-uri", str(tmp_path / "runs"), "mapping", *args], tmp_path,
                    status=2) == f"error: Invalid value for '{said}"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("max_split", [-1, 33])
def test_a_max_split_past_a_workloads_networks_is_refused_by_the_library(max_split: int) -> None:
    with pytest.raises(ConfigError) as info:
        GenerateOptions(max_split=max_split).check()
    assert str(info.value) == f"--max-split must be from 0 to 32 (a workload runs at most 32 networks), got {max_split}"
    GenerateOptions(max_split=32).check()


def test_a_warm_up_or_window_past_what_one_wait_takes_is_waited_until_stopped() -> None:
    """A Workload's warm-up and window take any finite number of seconds (--duration and --warmup at most a
    day since 0.9.14); the child waited each in one Event.wait, which raises OverflowError past the platform's
    time_t (1e10 s here): until 0.9.13 such a workload was a FAILED run of that error. It waits in slices, and
    ends as soon as the workload is stopped."""
    import threading
    import time

    from tracker.profile.mapping import wait_or_stop

    stop = threading.Event()
    timer = threading.Timer(0.2, stop.set)
    timer.start()
    began = time.perf_counter()
    for seconds in (1e10, 1e300):
        wait_or_stop(stop, seconds)  # returns once stopped, whatever is left
    assert stop.is_set() and time.perf_counter() - began < 10
    began = time.perf_counter()
    wait_or_stop(threading.Event(), 0.05)  # not stopped: the whole wait
    assert 0.05 <= time.perf_counter() - began < 5
