"""tracker device show's reasons and notes: why a reading is absent, what moves measurements."""

from pathlib import Path

from tracker.profile.inventory import notes, rapl_reason


def test_rapl_is_said_absent_for_what_stops_it(tmp_path: Path) -> None:
    """No powercap at all, no package domain, a package domain without a readable counter: each
    said as what it is; a readable package counter is no reason at all."""
    root = tmp_path / "powercap"
    assert "is absent" in rapl_reason(root)
    root.mkdir()
    (root / "intel-rapl:0:0").mkdir()  # a subdomain (core) alone is not a package
    assert rapl_reason(root) == f"no RAPL package domain under {root}"
    psys = root / "intel-rapl:1"  # the platform's domain, which the package readings leave out
    psys.mkdir()
    (psys / "name").write_text("psys\n")
    assert rapl_reason(root) == f"no RAPL package domain under {root}"
    package = root / "intel-rapl:0"
    package.mkdir()
    (package / "name").write_text("package-0\n")
    assert "not readable by this user" in rapl_reason(root) and str(package / "energy_uj") in rapl_reason(root)
    (package / "energy_uj").write_text("123456\n")
    assert rapl_reason(root) is None


def test_notes_name_what_moves_measurements_and_only_that() -> None:
    quiet = {"device": "cpu", "governor": "performance", "cores": 8, "load_1min": 0.2, "hypervisor": False,
             "threads": 4, "allocator": "retain", "retain_available": True, "gpu_persistence": "enabled"}
    assert notes(quiet) == []
    noisy = notes({**quiet, "governor": "powersave", "cores": 2, "load_1min": 1.5, "hypervisor": True, "threads": 2,
                   "allocator": None, "gpu_persistence": "disabled"})
    assert len(noisy) == 6
    governor, load, vm, threads, allocator, persistence = noisy
    assert "'powersave'" in governor and "'performance' holds it" in governor
    assert load.startswith("load average 1.50 over the last minute on 2 cores")
    assert "virtual machine" in vm and "--threads 1" in threads
    assert "--allocator retain" in allocator and "nvidia-smi -pm 1" in persistence
    # no governor to read is said as such; a C library without mallopt gets no allocator advice
    assert notes({**quiet, "governor": None})[0].startswith("no CPU frequency governor to read")
    assert notes({**quiet, "allocator": "system", "retain_available": False}) == []


def test_one_device_has_one_name_wherever_it_is_given(tmp_path: Path) -> None:
    """cuda:0 is cuda (torch's current device in a fresh child): measured under one name, it has one
    configuration key, so a campaign resumes it and runs compare it whichever way it was written."""
    import typer

    from tracker.cli.options import device_name
    from tracker.profile.campaign import load_campaign
    from tracker.profile.device import canonical_device
    from tracker.profile.mapping import from_json
    from tracker.profile.network import NetworkSpec

    assert [canonical_device(d) for d in ("cpu", "cuda", "cuda:0", "cuda:00", "cuda:07", "cuda:1")] == [
        "cpu", "cuda", "cuda", "cuda", "cuda:7", "cuda:1"]
    assert canonical_device("jetson-tx2") == "jetson-tx2"  # no device name: as given, for its check to refuse
    assert NetworkSpec("resnet18", 1, device="cuda:0") == NetworkSpec("resnet18", 1, device="cuda")
    assert device_name("cuda:0") == "cuda" and device_name("cuda:02") == "cuda:2"
    try:
        device_name("gpu")
    except typer.BadParameter as e:
        assert "'gpu' is not a device" in str(e)
    else:
        raise AssertionError("gpu taken as a device")
    path = tmp_path / "c.toml"
    path.write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\ndevices = ["cpu", "cuda:0", "cuda", "cuda:01"]\n')
    assert load_campaign(path).devices == ["cpu", "cuda", "cuda:1"]  # cuda and cuda:0 measured once
    mapping = from_json({"networks": [{"model": "squeezenet1_1", "split": 3, "devices": ["cuda:0", "cpu"]}]}, "m.json")
    assert mapping.networks[0].compact() == "squeezenet1_1@3:cuda>cpu"  # its compact form parses back


def test_device_speed_times_the_probe_in_a_measurements_mode_beside_the_warehouses(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """`tracker device speed`: the speed probe timed alone in a measuring child, in the mode a
    measurement with those settings runs in (since 0.9.10), beside the median of the warehouse's
    finished measurements in that mode that timed one; the figure predict --speed-probe-ms takes."""
    import json

    from typer.testing import CliRunner

    from tests.conftest import ENV, network_record, timed_probe
    from tracker.cli.app import app
    from tracker.log.logger import RunLogger
    from tracker.profile.probe import PROBE_RUNS, SPEED_NOW_BRACKETS

    runs = tmp_path / "runs"
    base = ["--tracking-uri", str(runs)]
    alone = json.loads(CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1", "--format", "json"]).stdout)
    assert alone["mode"] == "cpu-t1" and alone["speed_probe_count"] == SPEED_NOW_BRACKETS * PROBE_RUNS
    low, high = alone["quartiles_ms"]
    assert 0 < low <= alone["speed_probe_ms"] <= high and alone["warehouse"] is None and "slower_than_usual_rel" not in alone
    ci_low, ci_high = alone["median_ci_ms"]  # the CI of the median, within the quartiles
    assert low <= ci_low <= alone["speed_probe_ms"] <= ci_high <= high
    said = CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1"]).stdout  # no warehouse yet: said so
    assert f"no warehouse at {runs / 'warehouse.duckdb'} to compare with: tracker warehouse load makes it" in said
    records = [timed_probe(network_record("resnet18", 1), 2.0), timed_probe(network_record("resnet18", 2), 3.0),
               timed_probe(network_record("resnet18", 4), 9.0), network_record("resnet18", 8),  # the last, no probe
               timed_probe(network_record("resnet18", 16), 40.0, version=2)]
    for r in records:
        r.params["mode"] = "cpu-t1"
    records[2].params["mode"] = "cpu-t2"  # another mode's: not this one's speed
    # another version of the probe, another unit: not this one's speed either (its median was over all, until 0.9.11)
    logger = RunLogger(str(runs), experiment="e", environment=ENV)
    logger.log(records)
    logger.close()
    assert CliRunner().invoke(app, [*base, "warehouse", "load"]).exit_code == 0
    out = CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1", "--format", "json"])
    now = json.loads(out.stdout)
    assert (now["warehouse"]["speed_probe_ms"], now["warehouse"]["measurements"]) == (2.5, 2)
    assert (now["speed_probe_version"], now["warehouse"]["speed_probe_version"], now["warehouse"]["other_versions"]) == (1, 1, 1)
    assert now["slower_than_usual_rel"] == now["speed_probe_ms"] / 2.5 - 1
    text = CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1"])
    assert text.exit_code == 0 and text.stdout.startswith("speed probe on cpu in mode cpu-t1: ")
    assert "the warehouse's 2 measurements in this mode: median 2.5 ms; the probe takes " in text.stdout
    assert ("% longer now: this machine is slower than usual" in text.stdout
            or "% less time now: this machine runs " in text.stdout
            or "this machine runs about as fast as usual" in text.stdout)  # a loaded machine's probe near 2.5 ms
    assert ("1 measurement in this mode timed another version of the speed probe than this one's (1): another unit, "
            "left out\n") in text.stdout
    assert now["fingerprints"] == [] and "no latency fingerprint of cpu in mode cpu-t1 learnt at a reference speed" in text.stdout
    # the command it names learns this mode alone (--device cpu was refused where the store held two modes, as
    # here, and learnt the other mode where the store held that alone, until 0.9.11)
    assert "tracker fingerprint train --target latency_ms --device cpu-t1 learns one from this mode's measurements" \
        in text.stdout
    # the latency champions predict --device cpu loads (since 0.9.11): each beside the speed now, where it is of this mode
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    for name, tags in (("latency_ms-inference-cpu", {"mode": "cpu-t1", "speed_reference_ms": "2.0", "speed_probe_version": "1"}),
                       ("latency_ms-training-cpu", {"mode": "cpu-t2", "speed_reference_ms": "3.0"}),
                       ("latency_ms-inference-cpu-t1", {"mode": "cpu-t1"})):
        client.create_registered_model(name)
        client.create_model_version(name, source=str(tmp_path), tags=tags)
        client.set_registered_model_alias(name, "champion", "1")
    now = json.loads(CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1", "--format", "json"]).stdout)
    by_name = {f["name"]: f for f in now["fingerprints"]}
    assert set(by_name) == {"latency_ms-inference-cpu", "latency_ms-training-cpu", "latency_ms-inference-cpu-t1"}
    assert by_name["latency_ms-inference-cpu"]["slower_than_reference_rel"] == now["speed_probe_ms"] / 2.0 - 1
    assert "slower_than_reference_rel" not in by_name["latency_ms-training-cpu"]  # another mode's
    assert by_name["latency_ms-inference-cpu-t1"]["speed_reference_ms"] is None  # learnt as measured
    text = CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1"]).stdout
    assert "latency_ms-inference-cpu version 1 learnt at speed probe 2 ms: at this speed its latencies are " in text
    assert "latency_ms-training-cpu version 1 learnt in mode cpu-t2, not this one" in text
    assert "latency_ms-inference-cpu-t1 version 1 learnt its latencies as measured" in text
    assert "predict at this speed: tracker predict MODEL --device cpu --speed-probe-ms " in text
    # one learnt at the speed of another version of the probe: another unit, not compared (since 0.9.11)
    client.set_model_version_tag("latency_ms-inference-cpu", "1", "speed_probe_version", "2")
    now = json.loads(CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1", "--format", "json"]).stdout)
    assert "slower_than_reference_rel" not in {f["name"]: f for f in now["fingerprints"]}["latency_ms-inference-cpu"]
    text = CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1"]).stdout
    assert ("latency_ms-inference-cpu version 1 learnt at the speed of speed probe version 2, not this one's (1): "
            "another unit, not compared") in text and "predict at this speed" not in text
    # a warehouse whose views an older tracker made: said, beside the probe's figure (since 0.9.11)
    import duckdb

    from tracker.settings import warehouse_path

    with duckdb.connect(str(warehouse_path(None, str(runs)))) as con:
        con.execute("CREATE OR REPLACE VIEW whole_network_runs AS SELECT run_id, mode, status, speed_probe_ms FROM network_runs")
    old = CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1"])
    assert old.exit_code == 0 and old.stdout.startswith("speed probe on cpu in mode cpu-t1: "), old.output
    assert ("cannot compare with the warehouse's measurements: the warehouse " in old.stdout
            and "has the views of an older tracker, without speed_probe_version" in old.stdout)
    monkeypatch.setenv("TRACKER_FAULT", "noprobe")  # a probe that fails: one line, nothing invented
    failed = CliRunner().invoke(app, [*base, "device", "speed", "--threads", "1"])
    assert failed.exit_code == 1 and str(failed.exception).startswith(
        "the speed probe failed on cpu: RuntimeError: injected: the probe failed"), failed.exception


def test_device_speed_says_a_usual_speed_within_the_probes_ci_is_as_usual() -> None:
    """`device speed` called the machine slower (or faster) than usual whatever the difference: a probe 0.6 %
    over the warehouse's median, inside the 95 % CI of its own median, was "this machine is slower than usual"
    until 0.9.12. Within that CI it says the machine runs about as fast as usual, the difference given; outside
    it, slower or faster as before."""
    from tracker.cli.device import _speed_change

    now = {"device": "cpu", "mode": "cpu-t1", "speed_probe_ms": 1.627, "speed_probe_count": 60, "quartiles_ms": [1.59, 1.67],
           "median_ci_ms": [1.60, 1.65], "speed_probe_version": 1, "device_wait_s": 0.0}  # speed_now's

    def beside(usual_ms: float) -> dict[str, object]:  # and the warehouse's median beside it, as device speed puts it
        return {**now, "warehouse": {"path": "runs/warehouse.duckdb", "speed_probe_ms": usual_ms, "measurements": 40,
                                     "speed_probe_version": 1, "other_versions": 0},
                "slower_than_usual_rel": now["speed_probe_ms"] / usual_ms - 1.0}

    assert _speed_change(beside(1.617)) == ("the probe takes 0.6 % longer now, within the 95 % CI of its median (1.6 to "
                                            "1.65 ms): this machine runs about as fast as usual")
    assert _speed_change(beside(1.64)) == ("the probe takes 0.8 % less time now, within the 95 % CI of its median (1.6 "
                                           "to 1.65 ms): this machine runs about as fast as usual")
    assert _speed_change(beside(1.5)) == "the probe takes 8.5 % longer now: this machine is slower than usual"
    assert _speed_change(beside(2.0)) == ("the probe takes 18.6 % less time now: this machine runs 1.23 times as fast as "
                                          "usual")


def test_device_speed_gives_a_training_fingerprints_phase_to_predict(tmp_path: Path) -> None:
    """Where the one latency fingerprint of this mode learnt at a reference speed is a training step's, the
    predict line `tracker device speed` gives names its phase: without --phase training it asked for the
    inference fingerprint, which is not there (until 0.9.11)."""
    from mlflow.tracking import MlflowClient
    from typer.testing import CliRunner

    from tracker.cli.app import app

    runs = tmp_path / "runs"
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    client.create_registered_model("latency_ms-training-cpu")
    client.create_model_version("latency_ms-training-cpu", source=str(tmp_path),
                                tags={"mode": "cpu-t1", "speed_reference_ms": "2.0"})
    client.set_registered_model_alias("latency_ms-training-cpu", "champion", "1")
    text = CliRunner().invoke(app, ["--tracking-uri", str(runs), "device", "speed", "--threads", "1"])
    assert text.exit_code == 0, text.output
    assert "latency_ms-training-cpu version 1 learnt at speed probe 2 ms: at this speed its latencies are " in text.stdout
    assert "predict at this speed: tracker predict MODEL --phase training --device cpu --speed-probe-ms " in text.stdout
