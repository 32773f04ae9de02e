"""Fingerprints end to end on a real store and warehouse: train with held-out networks,
register with the champion alias, predict a network never measured."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.conftest import ENV, layer_record, network_record, timed_probe
from tracker.cli.app import app
from tracker.describe import described as described_once
from tracker.errors import ConfigError
from tracker.fingerprint.dataset import FingerprintError, family, view_hash
from tracker.fingerprint.runtime import FORMAT
from tracker.fingerprint.train import CHAMPION, SELECTION_MARGIN, train
from tracker.log.artifacts import downloaded
from tracker.log.logger import RunLogger
from tracker.log.record import DESCRIPTION_ARTIFACT
from tracker.settings import resolve_location
from tracker.warehouse.load import load
from tracker.warehouse.source import open_source


def described(name: str, input_size: int) -> Any:
    """``describe``, once a network and size for this process (``tracker.describe.described``, as
    ``tracker predict`` describes): the tests build their warehouses from the same few networks,
    and predict networks they described."""
    from tracker.zoo import resolve

    return described_once(resolve(name), input_size)


#: ``measured``'s networks (ten until 0.9.16: each train of the fixture's store learnt four more, to no check's need)
NETWORKS = ("resnet18", "resnet34", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_0", "squeezenet1_1")


def _without_tracker(folder: Path) -> dict[str, str]:
    """The environment of a Python in which tracker cannot be imported (a ``sitecustomize`` on
    PYTHONPATH blocks it), as in a serving environment of a version's own requirements; checked."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text("import sys\nsys.modules['tracker'] = None  # not installed here\n")
    env = {**os.environ, "PYTHONPATH": str(folder),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    blocked = subprocess.run([sys.executable, "-c", "import tracker"], env=env, capture_output=True, text=True)
    assert blocked.returncode != 0 and "ModuleNotFoundError" in blocked.stderr, blocked.stderr
    return env


def _latency(flops: float, bs: int) -> float:
    """A device whose latency is a fixed cost plus a rate per FLOP (what the model must find)."""
    return 0.4 + 2.0e-9 * flops * bs


def _measure(root: Path, networks: tuple[str, ...], experiment: str = "fp",
             batches: dict[str, tuple[int, ...]] | None = None, slower: float = 1.0,
             loaded: bool = True, tensors: bool = False) -> tuple[Path, Path]:
    """A store and warehouse of ``networks`` at 64 px, batch 1 to 8 (or those ``batches`` names for a
    network), on the device of ``_latency`` (memory a floor plus FLOPs; ``slower`` times its
    latency), each with its description; resnet34's batch 8 disturbed. ``loaded=False`` leaves the
    warehouse to a later call's load, which takes these runs too. ``tensors``: each run counted its
    tensors' peak too (``_tensor_peak_mb``)."""
    runs, wh = root / "runs", root / "w.duckdb"
    logger = RunLogger(str(runs), experiment=experiment, environment=ENV)
    for name in networks:
        desc = described(name, 64)
        flops = _flops(desc)
        records = []
        for bs in (batches or {}).get(name, (1, 2, 4, 8)):
            r = network_record(name, bs, peak_mem_mb=100.0 + flops * bs / 1e7)
            r.params["model_hash"] = desc.description_hash
            r.metrics["latency_ms"] = slower * _latency(flops, bs)
            r.metrics["network_mem_mb"] = 4.0 + flops * bs / 2e7  # the network's own part of the peak
            if tensors:
                r.metrics["tensor_peak_mb"] = _tensor_peak_mb(desc, bs)
            if name == "resnet34" and bs == 8:  # a disturbed measurement: its CI says so; not learnt from
                r.metrics["latency_ms"], r.metrics["latency_ci_rel"] = 10 * _latency(flops, bs), 2.0
            if bs == 1:
                r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
            records.append(r)
        logger.log(records)
    logger.close()
    if loaded:
        load(wh, open_source(resolve_location(str(runs))))
    return runs, wh


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _measure(tmp_path_factory.mktemp("fp"), NETWORKS)


def _latency_champion(runs: Path, wh: Path) -> Any:
    """The champion latency fingerprint of ``measured``'s store (its MLflow model version), trained
    here only where no test before has trained one: a train of the same rows as every other test's
    of ``measured`` (each test trained its own until 0.9.16, two trains more of the module's time)."""
    from tracker.fingerprint.train import champion_version, registered_name

    uri = resolve_location(str(runs)).uri
    client, name = MlflowClient(uri), registered_name("latency_ms", "inference", "cpu")
    if champion_version(client, name) is None:  # this test alone, or first
        train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    return client.get_model_version_by_alias(name, CHAMPION)


def _tensor_peak_mb(desc, bs: int) -> float:  # noqa: ANN001
    """A CPU whose tensors' peak in inference is a tenth of a MB over its weights and the batch's activations
    alive at once, and those a twentieth more (as the demo's 25 networks' were a median 5 % over)."""
    from tracker.describe.features import aggregates

    counts = aggregates(desc)
    return 0.1 + (counts["weight_bytes"] + 1.05 * bs * counts["live_activation_bytes"]) / 2**20


def _flops(desc) -> float:  # noqa: ANN001
    from tracker.describe.features import aggregates

    return float(aggregates(desc)["flops"])


def test_family_strips_pruning_and_index_suffixes() -> None:
    assert family("resnet50_30") == "resnet50" and family("gen-s1-0003") == "gen-s1" and family("resnet18") == "resnet18"
    assert family("resnet18-p50-l1-s0") == "resnet18" and family("resnet18-p7.5-random-s3") == "resnet18"
    # torchvision's width multipliers: one family (mnasnet0 and mnasnet1 until 0.9.2), perf4sight's names alike
    assert {family(n) for n in ("mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3", "mnasnet_30")} == {"mnasnet"}
    assert {family(n) for n in ("shufflenet_v2_x0_5", "shufflenet_v2_x2_0", "shufflenet_v2_x1_0-p50-l1-s0")} == {
        "shufflenet_v2"}
    assert {family(n) for n in ("squeezenet1_0", "squeezenet1_1", "squeezenet_60")} == {"squeezenet"}
    assert family("mobilenetv2_0") == "mobilenetv2" and family("wide_resnet50_2") == "wide_resnet50"


def test_a_version_is_named_by_ascii_digits_within_the_registrys_64_bits(tmp_path: Path) -> None:
    """A version given to promote or to predict --use is a whole number of at least 1 in digits 0-9
    within MLflow's 64-bit column, or one line naming it, before any store is read. Until 0.9.13 each
    checked it with isdigit: ``²`` passed it and int refused it (a ValueError's traceback), ``٣`` was
    version 3, and a number past 64 bits was SQLite's OverflowError, a traceback of predict's."""
    from tracker.fingerprint.predict import split_version
    from tracker.fingerprint.train import promote

    name = "latency_ms-inference-cpu"
    for given in ("\u00b2", "\u0663", "0", "-1", "1" + "0" * 400, str(2**63)):
        with pytest.raises(FingerprintError, match=re.escape(f"version {given!r:.80}: expected a whole number of at "
                                                               "least 1, in digits 0-9, at most 9223372036854775807")):
            promote(str(tmp_path / "nowhere"), name, given)
        with pytest.raises(FingerprintError, match=re.escape(f"{f'{name}/{given}'!r:.80}: expected a registered "
                                                               "fingerprint and its version, NAME/VERSION (VERSION a "
                                                               "whole number of at least 1, in digits 0-9")):
            split_version(f"{name}/{given}")
    assert not (tmp_path / "nowhere").exists()
    assert split_version(f"{name}/{2**63 - 1}") == (name, str(2**63 - 1))
    assert split_version(f"{name}/007") == (name, "7")  # one version, one name


def test_too_few_networks_says_which_measurements_were_too_imprecise_to_learn_from(measured: tuple[Path, Path]) -> None:
    runs, wh = measured
    others = [n for n in NETWORKS if n not in ("resnet34", "resnet18")]
    with pytest.raises(FingerprintError) as info:
        train(wh, "latency_ms", "inference", "cpu", resolve_location(str(runs)).uri, exclude=others)
    assert str(info.value).startswith("a fingerprint needs inference measurements of latency_ms on 'cpu' from at least 3 "
                                      "networks, to hold whole networks out; the warehouse has 2 usable (resnet18, "
                                      f"resnet34); 1 of its {4 * len(NETWORKS)} measurements left out, their 95 % CI "
                                      "wider than 25 % of their latency")
    assert f"; --exclude left out {', '.join(sorted(others))}: measure more" in str(info.value)


def test_a_family_of_one_measurement_beside_one_other_family_trains(tmp_path: Path) -> None:
    """Two families, one of them a single row (a network of one's own measured once beside a
    family of many): held out by family, one fold had one row to fit on and LightGBM ended the
    train with a traceback ("Check failed: (num_data) > (0)"), until 0.9.0. It trains; that split
    is not scored (a row cannot teach a family), the split by network is."""
    runs, wh = _measure(tmp_path, ("squeezenet1_0", "squeezenet1_1", "resnet18"), "fp1", {"resnet18": (1,)})
    result = train(wh, "latency_ms", "inference", "cpu", resolve_location(str(runs)).uri, plots=False)
    assert result.evaluation["rows"] == 9 and "family_split_mape_pct" not in result.evaluation
    assert set(result.by_family) == {"squeezenet", "resnet18"}


def test_a_fingerprint_learns_from_the_experiments_it_is_told(tmp_path: Path) -> None:
    """A held-out set measured later into its own experiment went into training silently: every run
    of the device was learnt from, until 0.9.0. --from-experiment keeps to the experiments named."""
    _measure(tmp_path, NETWORKS[:4], "train-set", loaded=False)
    runs, wh = _measure(tmp_path, NETWORKS[4:6], "test-set")
    uri = resolve_location(str(runs)).uri
    # one train, through the CLI: its JSON is train's result (two trains of the same rows until 0.9.16)
    said = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms",
                                    "-w", str(wh), "--from-experiment", "train-set", "--no-plots", "--format", "json"])
    assert said.exit_code == 0, said.output
    result = json.loads(said.stdout)
    assert result["evaluation"]["rows"] == 4 * 4 - 1  # resnet34's disturbed batch 8 left out, the test set too
    assert (result["left_out_imprecise"], result["measured_rows"]) == (1, 16)
    version = MlflowClient(uri).get_model_version(result["name"], result["version"])
    assert version.tags["experiments"] == "train-set" and version.tags["networks"] == "4"
    # and said, as a note, when the fingerprint trains (only where too few were left until 0.9.2)
    assert ("note: 1 of its 16 measurements left out, their 95 % CI wider than 25 % of their latency") in said.stderr
    assert "note: the store has changed" not in said.stderr  # loaded just now
    # Runs measured and deleted since the load: said as the store's, of any experiment, phase or device (since
    # 0.9.3; "without them" of both until 0.9.4; until 0.9.8 "this fingerprint learns from 1 run deleted", where
    # the run deleted is of test-set, which it does not learn from)
    with RunLogger(str(runs), experiment="train-set", environment=ENV) as logger:
        logger.log([network_record("alexnet", 1)])
    client = MlflowClient(uri)
    client.delete_run(client.search_runs([client.get_experiment_by_name("test-set").experiment_id])[0].info.run_id)
    stale = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms",
                                     "-w", str(wh), "--from-experiment", "train-set", "--no-plots"])
    assert stale.exit_code == 0 and (
        f"note: the store has changed since the warehouse {wh} was loaded: 1 run new or changed and 1 run deleted, of "
        "any experiment, phase or device; this fingerprint learns from the warehouse as it was loaded (tracker "
        "warehouse load, then train again)") in stale.stderr, stale.output
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms",
                                   "-w", str(wh), "--from-experiment", "tset", "--no-plots"])
    assert out.exit_code == 1 and "in experiment 'tset'; those that have some: test-set, train-set" in str(out.exception)
    # none in any experiment: why, as without --from-experiment ("those that have some: none" until 0.9.4)
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms",
                                   "-w", str(wh), "--from-experiment", "train-set", "--dtype", "bfloat16", "--no-plots"])
    assert out.exit_code == 1 and "in bfloat16 in the warehouse; latency_ms was measured on: " in str(out.exception)


def test_a_store_in_a_folder_of_a_percent_sign_predicts_from_its_champion(tmp_path: Path) -> None:
    """MLflow keeps an embedded store's model folder as a plain path with a ``%`` written ``%25``
    (it percent-decodes plain paths too). tracker predict read that path as written, so a store
    under a folder with a ``%`` in its name could not load its champion ("cannot load its model
    from the store's artifacts ... were they moved?"), until 0.9.8; spaces, a ``#`` and non-ASCII
    beside it."""
    runs, wh = _measure(tmp_path / "a 10%41 ü#b", ("squeezenet1_0", "squeezenet1_1", "resnet18"), "pct")
    uri = resolve_location(str(runs)).uri
    first = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(runs / "mlflow.db")) as db:
        (stored,), = db.execute("SELECT storage_location FROM model_versions").fetchall()
    assert "%2541" in stored and "ü#b" in stored  # as MLflow keeps it: what this reads back
    runner = CliRunner()
    said = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--batch-size", "1",
                               "--input-size", "64", "--format", "json"])
    assert said.exit_code == 0, said.output
    answer = json.loads(said.stdout)
    assert answer["model_versions"] == {"latency_ms": f"{first.name}/{first.version}"}
    # a configuration it learnt from: about what was measured
    assert answer["predictions"]["latency_ms"] == pytest.approx(_latency(_flops(described("resnet18", 64)), 1), rel=0.1)
    named = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--batch-size", "1", "--input-size",
                                "64", "--format", "json", "--use", f"{first.name}/{first.version}"])
    assert named.exit_code == 0 and json.loads(named.stdout)["predictions"] == answer["predictions"], named.output


def test_a_fingerprint_told_its_experiments_learns_their_measurements_alone(tmp_path: Path) -> None:
    """The same configurations measured again later in another experiment (a slower machine, say):
    told to learn from the first, a fingerprint kept only the rows whose latest run was in it (none
    here: "no measurement in experiment 'train-set'") and labelled them with the median over every
    experiment's repeats, until 0.9.1. Its labels are now the named experiments' measurements."""
    from tracker.fingerprint.train import training_rows

    _measure(tmp_path, NETWORKS[:3], "train-set", loaded=False)
    _, wh = _measure(tmp_path, NETWORKS[:3], "retest", slower=3.0)
    first = training_rows(wh, "latency_ms", "inference", "cpu", experiments=["train-set"])
    later = training_rows(wh, "latency_ms", "inference", "cpu", experiments=["retest"])
    both = training_rows(wh, "latency_ms", "inference", "cpu", experiments=["train-set", "retest"])
    assert len(first) == len(later) == len(both) == 4 * 3 - 1  # resnet34's disturbed batch 8 in each
    assert set(first["experiment"]) == {"train-set"} and set(later["experiment"]) == {"retest"}
    assert list(later["latency_ms"]) == pytest.approx(list(3.0 * first["latency_ms"]))
    assert list(both["latency_ms"]) == pytest.approx(list(2.0 * first["latency_ms"]))  # the median of 1x and 3x
    assert set(both["label_repeats"]) == {2} and set(first["label_repeats"]) == {1}
    assert [list(e) for e in both["label_experiments"]][0] == ["retest", "train-set"]
    # what each learnt from: the named experiment's runs (the rows' run_id is every configuration's latest, retest's)
    from tracker.fingerprint.train import learnt_runs, runs_digest

    assert len(learnt_runs(first)) == len(learnt_runs(later)) == 11 and not set(learnt_runs(first)) & set(learnt_runs(later))
    assert set(learnt_runs(later)) == set(later["run_id"]) and sorted(learnt_runs(both)) == sorted(
        learnt_runs(first) + learnt_runs(later)) and runs_digest(first) != runs_digest(later)


def _repeats_store(runs: Path, wh: Path, repeats: list[tuple[str, str, float, float | None]]) -> list[str]:
    """``repeats`` (experiment, network, latency_ms, speed_probe_ms or None) logged in that order, each one
    a repeat of its network at batch 2 with a peak, a power and a CI of its own, then loaded; their run ids."""
    loggers: dict[str, RunLogger] = {}
    run_ids = []
    for k, (experiment, name, latency, probe) in enumerate(repeats):
        desc = described(name, 64)
        r = network_record(name, 2, peak_mem_mb=500.0 + 10 * k, power_w=5.0 + k, latency_ci_rel=0.01 * (k + 1))
        r.params["model_hash"] = desc.description_hash
        r.metrics["latency_ms"] = latency
        if probe is not None:
            timed_probe(r, probe)
        r.tags["tracker.repeat_key"] = f"r{k}"
        r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
        logger = loggers.setdefault(experiment, RunLogger(str(runs), experiment=experiment, environment=ENV))
        logger.log([r])
        run_ids.append(r.run_id)
    for logger in loggers.values():
        logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    return run_ids


def test_an_infinity_logged_by_hand_is_infinite_in_the_warehouse_and_no_label(tmp_path: Path) -> None:
    """MLflow's SQL store keeps an infinite metric (a user's ``log_metric``) as the largest float: the
    warehouse loaded it as that number, and a peak of 1.8e308 MB was a label to train on (until 0.9.13).
    It is infinite in the warehouse, as runs list shows it, and no configuration's label."""
    from tracker.fingerprint.dataset import load_rows

    runs, wh = _measure(tmp_path, ("squeezenet1_1", "resnet18"), batches={"squeezenet1_1": (1, 2), "resnet18": (1, 2)})
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    [blown] = client.search_runs([client.get_experiment_by_name("fp").experiment_id],
                                 "params.model = 'squeezenet1_1' AND params.batch_size = '2'")
    client.log_metric(blown.info.run_id, "peak_mem_mb", float("inf"))
    client.log_metric(blown.info.run_id, "loss", float("-inf"))
    load(wh, open_source(resolve_location(str(runs))))
    with duckdb.connect(str(wh), read_only=True) as con:
        values = dict(con.execute("SELECT key, value FROM metrics WHERE run_id = $r AND key IN ('peak_mem_mb', 'loss')",
                                  {"r": blown.info.run_id}).fetchall())
    assert values == {"peak_mem_mb": float("inf"), "loss": float("-inf")}
    peaks = load_rows(wh, "peak_mem_mb", "inference", "cpu")
    assert len(peaks) == 3 and blown.info.run_id not in set(peaks["run_id"]), peaks[["model", "batch_size"]]
    assert len(load_rows(wh, "latency_ms", "inference", "cpu")) == 4  # its latency is still a label


def test_labels_of_named_experiments_are_the_views_labels_over_their_measurements(tmp_path: Path) -> None:
    """One SQL definition of a configuration's labels (the table macro measurement_labels_of, since
    0.9.10; its medians had a twin in Python, which every new column had to be added to): the view
    measurement_labels is it over every experiment, and --from-experiment over the experiments named.
    Where they hold every measurement both give the same rows; where another experiment measured the
    same configuration, each gives the median of its own."""
    import pandas as pd

    from tracker.fingerprint.dataset import load_rows

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    one = _repeats_store(runs, wh, [("one", "squeezenet1_1", 4.0, 1.0), ("one", "squeezenet1_1", 6.0, 1.5),
                                    ("one", "squeezenet1_1", 9.0, None), ("one", "resnet18", 10.0, 1.0),
                                    ("one", "resnet18", 12.0, 2.0), ("one", "mobilenet_v3_small", 3.0, None)])
    extras = ["label_experiments", "label_run_ids"]
    for target in ("latency_ms", "peak_mem_mb", "power_w"):
        every = load_rows(wh, target, "inference", "cpu")
        named = load_rows(wh, target, "inference", "cpu", experiments=["one"])
        assert list(named["label_experiments"].map(list)) == [["one"]] * 3
        pd.testing.assert_frame_equal(named.drop(columns=extras), every, check_exact=True)
    assert list(every["model"]) == ["mobilenet_v3_small", "resnet18", "squeezenet1_1"]
    assert list(every["label_repeats"]) == [1, 2, 3] and list(every["power_w"]) == [10.0, 8.5, 6.0]
    latency = load_rows(wh, "latency_ms", "inference", "cpu", experiments=["one"])
    assert list(latency["latency_ms"]) == [3.0, 11.0, 6.0] and list(latency["label_probed_repeats"]) == [0, 2, 2]
    assert list(latency["label_probe_ratio"].fillna(-1)) == [-1, 8.0, 4.0]  # median of 10/1, 12/2; of 4/1, 6/1.5
    assert [sorted(ids) for ids in latency["label_run_ids"]] == [sorted(one[5:]), sorted(one[3:5]), sorted(one[:3])]

    # squeezenet1_1 measured again, later, in another experiment (a slower machine)
    two = _repeats_store(runs, wh, [("two", "squeezenet1_1", 20.0, 2.0), ("two", "squeezenet1_1", 24.0, None)])
    every = load_rows(wh, "latency_ms", "inference", "cpu").set_index("model")
    named_one = load_rows(wh, "latency_ms", "inference", "cpu", experiments=["one"]).set_index("model")
    named_two = load_rows(wh, "latency_ms", "inference", "cpu", experiments=["two"]).set_index("model")
    named_both = load_rows(wh, "latency_ms", "inference", "cpu", experiments=["two", "one"]).set_index("model")
    pd.testing.assert_frame_equal(named_both.drop(columns=extras), every, check_exact=True)
    assert (every.loc["squeezenet1_1", "latency_ms"], every.loc["squeezenet1_1", "label_repeats"]) == (9.0, 5)
    assert list(named_both.loc["squeezenet1_1", "label_experiments"]) == ["one", "two"]
    # each experiment's own: its median, its repeats, its newest measurement's experiment and CI, its runs
    assert list(named_two.index) == ["squeezenet1_1"]
    sq_one, sq_two = named_one.loc["squeezenet1_1"], named_two.loc["squeezenet1_1"]
    assert sq_one["run_id"] == sq_two["run_id"] == every.loc["squeezenet1_1", "run_id"]  # keyed by the latest run
    assert (sq_one["latency_ms"], sq_one["label_repeats"], sq_one["experiment"], sq_one["latency_ci_rel"]) == (6.0, 3, "one", 0.03)
    assert (sq_two["latency_ms"], sq_two["label_repeats"], sq_two["experiment"], sq_two["latency_ci_rel"]) == (22.0, 2, "two", 0.02)
    assert (sq_one["label_probe_ratio"], sq_two["label_probe_ratio"], sq_two["label_probed_repeats"]) == (4.0, 10.0, 1)
    assert sorted(sq_one["label_run_ids"]) == sorted(one[:3]) and sorted(sq_two["label_run_ids"]) == sorted(two)
    assert every.loc["squeezenet1_1", "experiment"] == "two"  # the view's rows: the latest run's
    pd.testing.assert_frame_equal(named_one.drop(index="squeezenet1_1"), named_both.drop(index="squeezenet1_1"),
                                  check_exact=True)  # the others, measured in "one" alone, as they were

    # the same definition in SQL: the view is the macro over every experiment; tracker sql calls it too
    with duckdb.connect(str(wh), read_only=True) as con:
        view = con.sql("SELECT * FROM measurement_labels ORDER BY run_id").fetchall()
        assert view == con.sql("SELECT * EXCLUDE (experiment, label_experiments, label_run_ids) "
                               "FROM measurement_labels_of(['one', 'two']) ORDER BY run_id").fetchall()
        assert [c[0] for c in con.sql("DESCRIBE measurement_labels").fetchall()] == [
            "run_id", "repeats", "latency_ms", "peak_mem_mb", "network_mem_mb", "tensor_peak_mb", "power_w", "energy_per_iter_j",
            "gpu_util_pct", "latency_probe_ratio", "speed_probe_ms", "probed_repeats", "speed_probe_version",
            "latency_ci_rel", "samples_count"]
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "sql", "-w", str(wh), "--format", "json",
                                   "SELECT latency_ms, repeats, label_experiments FROM measurement_labels_of(['two'])"])
    assert out.exit_code == 0 and json.loads(out.output) == [{"latency_ms": 22.0, "repeats": 2, "label_experiments": ["two"]}]

    # a warehouse last loaded by tracker 0.9.9 has no macro: one line saying to load it again
    with duckdb.connect(str(wh)) as con:
        con.execute("DROP MACRO TABLE measurement_labels_of")
    with pytest.raises(FingerprintError, match=r"has no measurement_labels_of, which learning from named experiments "
                                               r"reads .*: tracker warehouse load -w "):
        load_rows(wh, "latency_ms", "inference", "cpu", experiments=["one"])


def test_a_fingerprint_of_the_networks_own_memory(tmp_path: Path) -> None:
    """On a CPU a run's peak is mostly the process (about 550 MB for any small network): the part
    the network added, network_mem_mb, is a target of its own since 0.9.1, learnt and predicted
    beside the peak, with the peak's memory features (kept activations)."""
    from tracker.fingerprint.predict import champions, predict
    from tracker.fingerprint.train import training_rows

    runs, wh = _measure(tmp_path, NETWORKS[:5], "own")
    uri = resolve_location(str(runs)).uri
    rows = training_rows(wh, "network_mem_mb", "inference", "cpu")
    assert len(rows) == 4 * 5 and (rows["network_mem_mb"] < rows["peak_mem_mb"]).all()
    result = train(wh, "network_mem_mb", "inference", "cpu", uri, plots=False)
    assert result.name == "network_mem_mb-inference-cpu" and result.champion
    assert "batch_kept_activation_bytes" in result.features and 0 <= result.evaluation["mape_pct"] < 60
    models = champions(uri, "inference", "cpu", targets=("network_mem_mb",))
    small, large = (predict(uri, "efficientnet_b0", bs, "inference", "cpu", models=models) for bs in (1, 8))
    assert small["units"] == {"network_mem_mb": "MB"} and 0 < small["predictions"]["network_mem_mb"] < large[
        "predictions"]["network_mem_mb"]


def test_a_fingerprint_of_the_tensors_peak_learns_the_activations_alive_at_once(tmp_path: Path) -> None:
    """tensor_peak_mb, the most bytes of a step's tensors alive at once (a CPU run's since 0.9.31), is a target
    of its own since 0.9.34: a memory target that learns from the activation bytes alive at once too (its
    additive trend sums them), labelled by the median of its configuration's measurements, never predicted
    below its floor or above the peak it is a part of; a warehouse whose views an older tracker made says so."""
    from tracker.fingerprint.dataset import load_rows
    from tracker.fingerprint.predict import champions, predict
    from tracker.fingerprint.train import training_rows

    runs, wh = _measure(tmp_path, NETWORKS[:5], "tensors", tensors=True)
    uri = resolve_location(str(runs)).uri
    rows = training_rows(wh, "tensor_peak_mb", "inference", "cpu")
    assert len(rows) == 4 * 5
    assert rows["tensor_peak_mb"].tolist() == [_tensor_peak_mb(described(m, 64), b)
                                                for m, b in zip(rows["model"], rows["batch_size"])]
    result = train(wh, "tensor_peak_mb", "inference", "cpu", uri, plots=False)
    assert result.name == "tensor_peak_mb-inference-cpu" and result.champion and result.memory_floor
    assert {"batch_live_activation_bytes", "batch_kept_activation_bytes"} <= set(result.features)
    # what the tensors alive at once describe, learnt on networks held out within a few per cent
    assert result.evaluation["mape_pct"] < 5, result.evaluation
    models = champions(uri, "inference", "cpu", targets=("tensor_peak_mb",))
    got = {bs: predict(uri, "efficientnet_b0", bs, "inference", "cpu", models=models) for bs in (1, 8)}
    assert got[1]["units"] == {"tensor_peak_mb": "MB"}
    for bs, one in got.items():  # a network never seen, at its own 224 px: what its live activations say
        assert one["memory_floor_mb"]["tensor_peak_mb"] <= one["predictions"]["tensor_peak_mb"]
        assert one["predictions"]["tensor_peak_mb"] == pytest.approx(_tensor_peak_mb(described("efficientnet_b0", 224), bs),
                                                                     rel=0.01)

    # a warehouse whose labels an older tracker made (0.9.33's: no tensor_peak_mb) names the load that adds them
    with duckdb.connect(str(wh)) as con:
        con.execute("CREATE OR REPLACE VIEW measurement_labels AS "
                    "SELECT * EXCLUDE (tensor_peak_mb) FROM measurement_labels_of(CAST(NULL AS VARCHAR[]))")
    with pytest.raises(FingerprintError, match=r"views of an older tracker, whose labels have no tensor_peak_mb "
                                               r".*: tracker warehouse load -w "):
        load_rows(wh, "tensor_peak_mb", "inference", "cpu")
    assert len(load_rows(wh, "network_mem_mb", "inference", "cpu")) == 4 * 5  # the other targets learn as before


def test_the_networks_own_memory_an_older_tracker_measured_is_not_learnt(tmp_path: Path) -> None:
    """network_mem_mb of tracker 0.9.25 and before also counted what the network's first build left behind
    in the process (0.9.26 in int8: its float copy too): a network_mem_mb fingerprint leaves out what only
    such trackers measured, says how many, and learns a configuration again once this tracker measured it;
    the other targets keep them all."""
    from tracker.fingerprint.dataset import load_rows
    from tracker.fingerprint.train import training_rows

    runs, wh = _measure(tmp_path, NETWORKS[:4], "own")
    uri = resolve_location(str(runs)).uri
    client = MlflowClient(uri)
    by_model: dict[str, list[str]] = {}
    for r in client.search_runs([client.get_experiment_by_name("own").experiment_id], max_results=1000):
        by_model.setdefault(r.data.params["model"], []).append(r.info.run_id)
    for model, version in (("resnet18", "0.9.25"), ("resnet34", "0.9.9"), ("mobilenet_v2", "0.9.26")):
        for run_id in by_model[model]:
            client.set_tag(run_id, "tracker.version", version)
    load(wh, open_source(resolve_location(str(runs))))
    rows = load_rows(wh, "network_mem_mb", "inference", "cpu")
    assert sorted(set(rows["model"])) == ["mobilenet_v2", "mobilenet_v3_small"] and len(rows) == 8, rows["model"]
    assert rows.attrs["left_out_older"] == 8
    assert len(load_rows(wh, "peak_mem_mb", "inference", "cpu")) == 16  # what the version changed is its own
    with pytest.raises(FingerprintError, match=r"8 configurations measured only by a tracker before 0\.9\.26 "
                                               r"\(0\.9\.27 in int8\).*a campaign run again measures them again"):
        train(wh, "network_mem_mb", "inference", "cpu", uri, plots=False)
    # resnet18 measured again by this tracker: its label is this measurement's alone, not the median with the older
    logger = RunLogger(str(runs), experiment="own", environment=ENV)
    desc = described("resnet18", 64)
    again = []
    for bs in (1, 2, 4, 8):
        r = network_record("resnet18", bs, peak_mem_mb=100.0 + _flops(desc) * bs / 1e7)
        r.params["model_hash"] = desc.description_hash
        r.metrics["latency_ms"], r.metrics["network_mem_mb"] = _latency(_flops(desc), bs), 1.0 + bs
        again.append(r)
    logger.log(again)
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    rows = training_rows(wh, "network_mem_mb", "inference", "cpu")
    assert rows.attrs["left_out_older"] == 4 and len(rows) == 12
    # the repeats' spread of network_mem_mb is over the current ones alone (the older one counted more)
    with duckdb.connect(str(wh), read_only=True) as con:
        spread = con.execute("SELECT CAST(batch_size AS BIGINT), repeats, network_mem_repeats, min_network_mem_mb, "
                             "median_network_mem_mb, network_mem_spread_rel FROM measurement_repeats "
                             "WHERE model = 'resnet18' ORDER BY batch_size").fetchall()
    assert spread == [(bs, 2, 1, 1.0 + bs, 1.0 + bs, None) for bs in (1, 2, 4, 8)], spread
    mine = rows[rows["model"] == "resnet18"].sort_values("batch_size")
    assert list(mine["network_mem_mb"]) == [2.0, 3.0, 5.0, 9.0] and list(mine["label_repeats"]) == [2] * 4
    said = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "network_mem_mb",
                                    "-w", str(wh), "--no-plots", "--format", "json"])
    assert said.exit_code == 0, said.output
    result = json.loads(said.stdout)
    assert (result["left_out_older"], result["measured_rows"], result["evaluation"]["rows"]) == (4, 12, 12), result
    assert ("note: 4 configurations measured only by a tracker before 0.9.26 (0.9.27 in int8), whose network_mem_mb "
            "also counted") in said.stderr, said.stderr


def test_the_warehouse_and_the_campaign_agree_on_which_networks_own_memory_is_current() -> None:
    """labelled_measurements' network_mem_current (what a fingerprint learns) and records.counts_older_network_mem
    (what a campaign measures again) draw one line between trackers, in each number format."""
    from tracker.log.record import RunRecord
    from tracker.profile.records import counts_older_network_mem
    from tracker.warehouse.views import read_views

    view = next(v for v in read_views() if v.name == "labelled_measurements")
    con = duckdb.connect()
    con.execute("CREATE TABLE latest_measurements (run_id VARCHAR, config_key VARCHAR)")
    con.execute("CREATE TABLE measurements (run_id VARCHAR, config_key VARCHAR, experiment VARCHAR, end_time TIMESTAMP, "
                "latency_ci_rel DOUBLE, samples_count DOUBLE, latency_ms DOUBLE, peak_mem_mb DOUBLE, network_mem_mb DOUBLE, "
                "tensor_peak_mb DOUBLE, power_w DOUBLE, energy_per_iter_j DOUBLE, gpu_util_pct DOUBLE, speed_probe_ms DOUBLE, "
                "speed_probe_version INTEGER, tracker_version VARCHAR, precision VARCHAR)")
    versions = [None, "", "0.9", "0.9.9", "0.9.25", "0.9.26.dev0", "0.9.26", "0.9.27", "0.9.100", "0.10.0", "1.0", "1",
                "v1.0", "0.9.27rc1", "2026.1", "99999999999999999999999.1"]
    cases = [(f"{n}-{fmt}", version, fmt) for n, version in enumerate(versions) for fmt in ("float32", "bfloat16", "int8")]
    for key, version, fmt in cases:
        con.execute("INSERT INTO latest_measurements VALUES (?, ?)", [key, key])
        con.execute("INSERT INTO measurements (run_id, config_key, network_mem_mb, tracker_version, precision) "
                    "VALUES (?, ?, 12.5, ?, ?)", [key, key, version, fmt])
    con.execute(f"CREATE VIEW labelled_measurements AS {view.body}")
    current = dict(con.execute("SELECT run_id, network_mem_current FROM labelled_measurements").fetchall())
    said = {}
    for key, version, fmt in cases:
        record = RunRecord(kind="network", name=key, params={"precision": fmt}, metrics={"network_mem_mb": 12.5},
                           tags={} if version is None else {"tracker.version": version})
        said[key] = not counts_older_network_mem(record)
    assert current == said
    assert [key for key, is_current in said.items() if is_current and key.endswith("-int8")] == [
        "7-int8", "8-int8", "9-int8", "10-int8", "13-int8", "14-int8", "15-int8"], said
    assert said["6-float32"] and said["6-bfloat16"] and not said["6-int8"] and not said["4-float32"]
    gpu = RunRecord(kind="network", name="gpu", metrics={"peak_mem_mb": 5.0}, tags={"tracker.version": "0.1.0"})
    assert not counts_older_network_mem(gpu)  # no figure of its own: no question


def test_the_networks_own_memory_is_never_predicted_above_the_peak_it_is_part_of() -> None:
    from tracker.fingerprint.predict import cap_at_peak

    over = {"peak_mem_mb": 128_747.0, "network_mem_mb": 129_366.0, "latency_ms": 5.0}
    assert cap_at_peak(over) == ["network_mem_mb"] and over["network_mem_mb"] == over["peak_mem_mb"] == 128_747.0
    both = {"peak_mem_mb": 600.0, "network_mem_mb": 700.0, "tensor_peak_mb": 650.0}  # the tensors too (0.9.34)
    assert cap_at_peak(both) == ["network_mem_mb", "tensor_peak_mb"] and set(both.values()) == {600.0}
    for fine in ({"peak_mem_mb": 600.0, "network_mem_mb": 40.0}, {"network_mem_mb": 40.0}, {"peak_mem_mb": 600.0}):
        before = dict(fine)
        assert cap_at_peak(fine) == [] and fine == before  # under it, or either alone: as predicted


def test_a_configuration_past_64_bits_of_work_is_one_line() -> None:
    """A network whose activations times its batch are past a 64-bit count (predict -b 1048576 of a
    network of one's own, 8.8e12 FLOPs an input) was DuckDB's OutOfRangeException, a traceback, until
    0.9.5; the same network at that batch is a row."""
    import dataclasses

    from tracker.describe import describe
    from tracker.fingerprint.dataset import configuration_rows

    desc = describe("squeezenet1_1")
    huge = dataclasses.replace(desc, nodes=[dataclasses.replace(n, out_shape=[1, 64, 2**20, 2**20])
                                            if n.op == "call_module" else n for n in desc.nodes])
    with pytest.raises(FingerprintError, match=r"^at batch size 1,048,576 a network's work \(its FLOPs or activations "
                                               r"times the batch\) is past what a 64-bit whole number holds"):
        configuration_rows([huge], [2**20], "inference", "cpu")
    rows, _ = configuration_rows([desc], [2**20], "inference", "cpu")
    assert len(rows) == 1


def test_train_registers_a_champion_and_predicts_a_network_never_run(measured: tuple[Path, Path]) -> None:
    runs, wh = measured
    uri = resolve_location(str(runs)).uri
    first = train(wh, "latency_ms", "inference", "cpu", uri)
    assert first.champion and first.name == "latency_ms-inference-cpu"
    assert first.evaluation["rows"] == 4 * len(NETWORKS) - 1 and 0 <= first.evaluation["mape_pct"] < 60
    assert set(first.baseline) >= {"mape_pct", "rmspe_pct", "within_10pct"}
    client = MlflowClient(uri)
    version = client.get_model_version_by_alias(first.name, CHAMPION)
    assert str(version.version) == first.version and version.tags["view_sha256"] and version.tags["runs_digest"]
    assert version.tags["method"] == "network" and "layer_view_sha256" not in version.tags  # no layer runs here
    # The network-level model is the candidate with the lower held-out MAPE; a trend is stored with it.
    candidates = {"lgbm": first.evaluation["selection_lgbm_mape_pct"],
                  "trend+lgbm": first.evaluation["selection_trend_lgbm_mape_pct"],
                  "additive+lgbm": first.evaluation["selection_additive_lgbm_mape_pct"],
                  "factored+lgbm": first.evaluation["selection_factored_lgbm_mape_pct"]}
    chosen = version.tags["network_model"]
    if chosen == "lgbm":  # no trend beat LightGBM alone by the margin
        assert min(candidates.values()) > (1 - SELECTION_MARGIN) * candidates["lgbm"] - 1e-9
    else:
        assert candidates[chosen] == min(candidates.values()) <= (1 - SELECTION_MARGIN) * candidates["lgbm"]
    assert ("trend" in version.tags) == (chosen != "lgbm")
    if "trend" in version.tags:  # the kind of trend the candidate's name says
        assert json.loads(version.tags["trend"])["kind"] == {"trend+lgbm": "loglinear", "additive+lgbm": "additive",
                                                              "factored+lgbm": "factored"}[
            version.tags["network_model"]]
    with downloaded(uri, first.run_id, "evaluation/runs.json") as path:
        used = json.loads(path.read_text())
    assert len(used) == len(NETWORKS) * 4 - 1  # all but the imprecise resnet34 bs8 measurement
    assert "held out by network: MAPE" in version.description  # what the UI shows beside the version
    assert client.get_registered_model(first.name).description.startswith("Predicts latency_ms (ms)")
    artifacts = {a.path for a in client.list_artifacts(first.run_id, "evaluation")}
    assert {"evaluation/predicted_vs_measured.png", "evaluation/feature_importance.png",
            "evaluation/measurement_features.sql", "evaluation/heldout_predictions.csv",
            "evaluation/measurement_labels_of.sql"} <= artifacts  # the labels' macro too (0.9.10)
    # the version's run is listed and shown as any other (a kind fingerprint train logs through MLflow)
    runner = CliRunner()
    store = ["--tracking-uri", str(runs), "-e", "fingerprints"]
    listed = json.loads(runner.invoke(app, [*store, "runs", "list", "--kind", "fingerprint", "--format", "json"]).stdout)
    assert [r["run_id"] for r in listed] == [first.run_id]
    shown = json.loads(runner.invoke(app, [*store, "runs", "show", first.run_id[:8], "--format", "json"]).stdout)
    assert shown["kind"] == "fingerprint" and shown["metrics"] == client.get_run(first.run_id).data.metrics
    assert "evaluation/predicted_vs_measured.png" in shown["artifacts"]

    # Same data again, from the CLI: no network the champion has not seen, so the alias stays;
    # MLflow's registration lines are not repeated on stderr. The table names each family's
    # held-out scores, the worst first.
    again = runner.invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms",
                                "--warehouse", str(wh), "--no-plots"])
    assert again.exit_code == 0, again.output
    lines = again.stdout.splitlines()
    second = lines[0].split(" ")[2].rstrip(":")
    assert lines[0].startswith(f"{first.name} version ") and second != first.version
    assert lines[-1].startswith(f"not champion: version {first.version} stays champion")
    second_run = client.get_model_version(first.name, second).run_id
    with downloaded(uri, second_run, "evaluation/by_family.json") as path:
        by_family = json.loads(path.read_text())
    drawn = {a.path for a in client.list_artifacts(second_run, "evaluation")}
    assert "evaluation/heldout_predictions.csv" in drawn and not any(p.endswith(".png") for p in drawn)  # --no-plots
    assert len(by_family) == len({family(n) for n in NETWORKS}) > 1
    table = [line.split() for line in lines[2:-1]]
    assert [row[0] for row in table] == sorted(by_family, key=lambda f: -by_family[f]["mape_pct"])
    assert all(int(row[1]) == by_family[row[0]]["rows"] and float(row[2]) == round(by_family[row[0]]["mape_pct"], 2)
               for row in table)
    assert str(client.get_model_version_by_alias(first.name, CHAMPION).version) == first.version
    assert "Created version" not in again.stderr and "Registered model" not in again.stderr
    out = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet50", "--batch-size", "2",
                              "--input-size", "64", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["model_versions"]["latency_ms"] == f"latency_ms-inference-cpu/{first.version}"
    assert data["predictions"]["latency_ms"] > 0 and "power_w" in data["missing_targets"]
    # The version records the span it learnt from; resnet50 is larger than every network measured,
    # so its prediction says it extrapolates in FLOPs and parameters, though batch 2 was learnt.
    learnt = json.loads(version.tags["trained_ranges"])
    flops = [_flops(described(n, 64)) for n in NETWORKS]
    assert learnt["batch_size"] == [1, 8] and learnt["flops"] == [min(flops), max(flops)]
    beyond = data["outside_trained_range"]["latency_ms"]
    assert "batch_size" not in beyond and {"flops", "params"} <= set(beyond)
    assert beyond["flops"] == {"value": _flops(described("resnet50", 64)), "trained": learnt["flops"]}
    inside = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--batch-size", "4",
                                 "--input-size", "64", "--format", "json"])
    assert json.loads(inside.output)["outside_trained_range"] == {}
    assert learnt["input_size"] == [64, 64]  # and the input sizes it learnt from: another resolution says so
    other = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--batch-size", "4",
                                "--input-size", "48"])
    assert other.exit_code == 0, other.output
    assert "note: latency_ms extrapolates beyond what latency_ms-inference-cpu/" in other.output
    assert "input_size 48 (learnt 64 to 64)" in other.output
    audio = Path(str(runs) + "-own") / "audio.py"  # a network whose input is no image is outside it too
    audio.parent.mkdir(exist_ok=True)
    audio.write_text("from torch import nn\nINPUT_SHAPE = (1, 500)\n\n\ndef kws():\n"
                     "    return nn.Sequential(nn.Conv1d(1, 4, 9), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 492, 3))\n")
    sound = runner.invoke(app, ["--tracking-uri", str(runs), "predict", f"{audio}:kws", "--batch-size", "2"])
    assert sound.exit_code == 0, sound.output
    assert "input_size none (not images; learnt 64 to 64)" in sound.output
    # a network of your own (FILE.py:NAME) is described by the same code: torchvision's resnet18 built
    # in a file of one's own is the zoo's resnet18, and predicted the same
    own = Path(str(runs) + "-own") / "mine.py"
    own.parent.mkdir(exist_ok=True)
    own.write_text("import torchvision\n\ndef resnet():\n    return torchvision.models.resnet18(weights=None)\n")
    mine = runner.invoke(app, ["--tracking-uri", str(runs), "predict", f"{own}:resnet", "--batch-size", "4",
                               "--input-size", "64", "--format", "json"])
    assert mine.exit_code == 0, mine.output
    assert json.loads(mine.output)["model"] == "mine.resnet"
    assert json.loads(mine.output)["predictions"] == pytest.approx(json.loads(inside.output)["predictions"], rel=1e-9)
    # Many networks predicted in one pass of the feature SQL (search spaces do) are predicted as
    # one at a time: same features, same figures, same spans; a name given twice is one network.
    from tracker.fingerprint.predict import predict, predict_many

    names = ["resnet50"] + ["squeezenet1_1", "resnet18"] * 5  # more than ten: the order asked for is kept
    together = predict_many(uri, names, 2, "inference", "cpu", input_size=64)
    alone = {name: predict(uri, name, 2, "inference", "cpu", input_size=64) for name in set(names)}
    for name, out in zip(names, together):
        assert out["model"] == name and out["predictions"] == pytest.approx(alone[name]["predictions"], rel=1e-9)
        assert out["outside_trained_range"] == alone[name]["outside_trained_range"]
    assert together[0]["outside_trained_range"] and not together[2]["outside_trained_range"]
    # Several networks and batch sizes from the CLI: the champions loaded once, one object per network
    # and batch size (networks in the order given, then batch sizes; one given twice is one), each
    # as it is predicted alone; the table has a row each and a note naming the configuration that
    # extrapolates.
    grid = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "resnet50", "-b", "4", "-b", "2",
                               "-b", "4", "--input-size", "64", "--format", "json"])
    assert grid.exit_code == 0, grid.output
    listed = json.loads(grid.output)
    assert [(r["model"], r["batch_size"]) for r in listed] == [("resnet18", 4), ("resnet18", 2), ("resnet50", 4),
                                                                 ("resnet50", 2)]
    assert listed[0]["predictions"] == pytest.approx(json.loads(inside.output)["predictions"], rel=1e-9)
    assert listed[3]["predictions"] == pytest.approx(data["predictions"], rel=1e-9)
    rows = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "resnet50", "-b", "2",
                               "--input-size", "64"])
    assert rows.exit_code == 0, rows.output
    lines = rows.stdout.splitlines()
    assert lines[0].split()[:3] == ["model", "batch", "latency_ms"]
    assert [line.split()[:2] for line in lines[1:3]] == [["resnet18", "2"], ["resnet50", "2"]]
    assert float(lines[2].split()[2].rstrip("*^_")) == pytest.approx(data["predictions"]["latency_ms"], rel=1e-3)
    assert lines[3] == f"versions: latency_ms-inference-cpu/{first.version}"
    # the value that extrapolates is marked (a note a configuration until 0.9.0), the mark said once
    assert lines[2].split()[2].endswith("*") and not lines[1].split()[2].endswith("*")
    assert lines[4].startswith("*: beyond what its version learnt from") and lines[4].endswith("; 1 of 2 predictions")
    with pytest.raises(ConfigError, match="--features prints one configuration's features as a table"):
        runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "-b", "1", "-b", "2", "--features"],
                      catch_exceptions=False)
    table = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--batch-size", "64",
                                "--input-size", "64"])
    notes = [line for line in table.stdout.splitlines() if line.startswith("note:")]
    assert table.exit_code == 0 and len(notes) == 1, table.output
    assert notes[0].startswith(f"note: latency_ms extrapolates beyond what latency_ms-inference-cpu/{first.version} "
                               "learnt from: batch_size 64 (learnt 1 to 8)")
    listed = runner.invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format", "json"])
    assert {(r["version"], r["alias"]) for r in json.loads(listed.output)} >= {(first.version, CHAMPION)}
    # numbers as numbers (text until 0.9.0), and what it learnt from
    [mine] = [r for r in json.loads(listed.output) if r["version"] == first.version and r["name"] == first.name]
    assert mine["heldout_mape_pct"] == pytest.approx(first.evaluation["mape_pct"], abs=1e-4)
    assert mine["networks"] == len(NETWORKS) and mine["devices"] == "cpu" and mine["registered"].startswith("20")
    assert mine["registered"].endswith("Z") and mine["memory_floor"] is None  # UTC (local, unmarked, until 0.9.6)

    with pytest.raises(FingerprintError, match="no fingerprint for phase 'inference' on device 'tpu'"):
        runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet50", "--device", "tpu"],
                      catch_exceptions=False)
    with pytest.raises(FingerprintError, match="no training measurements of latency_ms"):
        train(wh, "latency_ms", "training", "cpu", uri, plots=False)

    # A misspelt --exclude is refused naming it alone (the CLI makes the error one line: test_cli),
    # and nothing is trained or registered.
    versions = len(client.search_model_versions(f"name = '{first.name}'"))
    with pytest.raises(FingerprintError) as typo:
        runner.invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms", "--warehouse",
                            str(wh), "--exclude", "resnet18", "--exclude", "resnet5O"], catch_exceptions=False)
    assert "cannot leave out resnet5O: no inference measurement of latency_ms on 'cpu'" in str(typo.value)
    assert "resnet18" not in str(typo.value) and "\n" not in str(typo.value)
    assert len(client.search_model_versions(f"name = '{first.name}'")) == versions

    # Two networks left: no held-out fold could train (LightGBM fails on one row); a clear error instead.
    with pytest.raises(FingerprintError, match=r"at least 3 networks.* has 2 usable \(mobilenet_v2, resnet18\)"):
        train(wh, "latency_ms", "inference", "cpu", uri, plots=False,
              exclude=[n for n in NETWORKS if n not in ("resnet18", "mobilenet_v2")])
    assert len(client.search_model_versions(f"name = '{first.name}'")) == versions

    # A span in a shape this version of tracker does not write is refused in one line naming the shape
    # it expects, not guessed at.
    for shape in ("[1, 8]", '{"batch_size": {"min": 1, "max": 8}}', '{"batch_size": [1]}', "{",
                  '{"batch_size": [8, 1]}'):
        client.set_model_version_tag(first.name, first.version, "trained_ranges", shape)
        with pytest.raises(FingerprintError, match=re.escape(
                f"version {first.version}: unreadable trained_ranges tag: expected a JSON object of "
                f"{{feature: [min, max]}}, got {shape!r}; retrain")):
            runner.invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--input-size", "64"],
                          catch_exceptions=False)
    client.set_model_version_tag(first.name, first.version, "trained_ranges", version.tags["trained_ranges"])


def _measured_two_ways(root: Path, param: str, ways: tuple[tuple[str, float], ...]) -> tuple[Path, Path]:
    """A store and warehouse of four networks at 64 px, batch 1, 2 and 4, each measured in each of
    ``ways``: the run param ``param`` (a key field too) set to its value, latency and peak memory
    those of ``_measure``'s device times its factor."""
    runs, wh = root / "runs", root / "w.duckdb"
    logger = RunLogger(str(runs), experiment=f"two-{param}", environment=ENV)
    for name in ("resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x0_5"):
        desc = described(name, 64)
        for k, (value, factor) in enumerate(ways):
            records = []
            for bs in (1, 2, 4):
                r = network_record(name, bs, peak_mem_mb=factor * (100.0 + _flops(desc) * bs / 1e7))
                r.params.update({"model_hash": desc.description_hash, param: value})
                r.key_fields[param] = value
                r.metrics["latency_ms"] = factor * _latency(_flops(desc), bs)
                if bs == 1 and k == 0:
                    r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
                records.append(r)
            logger.log(records)
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    return runs, wh


def test_a_fingerprint_learns_one_device_mode(tmp_path: Path) -> None:
    """The same networks measured in two modes (the second, with the allocator retaining memory,
    twice as fast) are refused together, naming both modes; --device MODE learns that mode's
    measurements alone, registered and predicted under its mode id; ``mode`` (the demo's) learns
    one mode under the device's name."""
    runs, wh = _measured_two_ways(tmp_path, "mode", (("cpu-t2", 1.0), ("cpu-t2-retain", 0.5)))
    uri = resolve_location(str(runs)).uri
    with pytest.raises(FingerprintError, match=re.escape(
            "the inference measurements of latency_ms on 'cpu' ran in 2 device modes: cpu-t2 (12 rows), "
            "cpu-t2-retain (12 rows); a fingerprint learns one: give its mode as --device")):
        train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    result = train(wh, "latency_ms", "inference", "cpu-t2-retain", uri, plots=False)
    assert result.name == "latency_ms-inference-cpu-t2-retain" and result.evaluation["rows"] == 12
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "-b", "2", "--input-size", "64",
                                   "--device", "cpu-t2-retain", "--format", "json"])
    assert out.exit_code == 0, out.output
    predicted = json.loads(out.output)["predictions"]["latency_ms"]
    assert predicted == pytest.approx(0.5 * _latency(_flops(described("resnet18", 64)), 2), rel=0.25)
    # The demo's way: one mode's measurements, registered under the device (other modes measured
    # in the same store are not learnt from).
    own = train(wh, "latency_ms", "inference", "cpu", uri, mode="cpu-t2", plots=False)
    assert own.name == "latency_ms-inference-cpu" and own.evaluation["rows"] == 12
    with pytest.raises(FingerprintError, match=r"no inference measurements of latency_ms on device 'cpu' in mode 'cpu-t9'"
                                               r" in the warehouse; latency_ms was measured on: cpu \(inference, mode cpu-t2\)"):
        train(wh, "latency_ms", "inference", "cpu", uri, mode="cpu-t9", plots=False)
    # a target nothing measured is said so (until 0.9.2 every device and phase was listed as "measured")
    with pytest.raises(FingerprintError, match="; no measurement in it has gpu_util_pct "):
        train(wh, "gpu_util_pct", "inference", "cpu", uri, plots=False)
    # a warehouse of no measurement at all is said to be one (what this machine measures was said until 0.9.6)
    RunLogger(str(tmp_path / "empty"), experiment="none").close()
    load(tmp_path / "empty.duckdb", open_source(resolve_location(str(tmp_path / "empty"))))
    with pytest.raises(FingerprintError, match="in the warehouse; it holds no measurement yet: measure networks"):
        train(tmp_path / "empty.duckdb", "latency_ms", "inference", "cpu", uri, plots=False)


def test_a_fingerprint_learns_one_dtype(tmp_path: Path) -> None:
    """Since 0.8.5 the same networks measured in bfloat16 (``profile --dtype``; faster and smaller
    here) are not mixed into a float32 fingerprint: ``--dtype bfloat16`` learns them alone,
    registered under a name that ends with it, keeping no memory floor (a description counts
    float32 bytes), and ``predict --dtype bfloat16`` answers from it; a dtype never measured is
    said in one line."""
    runs, wh = _measured_two_ways(tmp_path, "precision", (("float32", 1.0), ("bfloat16", 0.6)))
    uri = resolve_location(str(runs)).uri
    plain = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    assert plain.name == "latency_ms-inference-cpu" and plain.evaluation["rows"] == 12  # the float32 runs alone
    half = train(wh, "latency_ms", "inference", "cpu", uri, dtype="bfloat16", plots=False)
    assert half.name == "latency_ms-inference-cpu-bfloat16" and half.evaluation["rows"] == 12
    # a bfloat16 configuration that ran out of memory bounds the bfloat16 memory version, not float32's
    logger = RunLogger(str(runs), experiment="two-precision", environment=ENV)
    failed = network_record("resnet18", 4096).fail("oom")
    failed.params.update(model_hash=described("resnet18", 64).description_hash, precision="bfloat16")
    failed.key_fields["precision"] = "bfloat16"
    logger.log([failed])
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    client = MlflowClient(uri)
    memory = train(wh, "peak_mem_mb", "inference", "cpu", uri, dtype="bfloat16", plots=False)
    assert memory.memory_floor == "false (its runs are bfloat16: a description counts float32 bytes)"
    listed = json.loads(CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format",
                                                 "json"]).stdout)
    [row] = [r for r in listed if r["name"] == memory.name and r["version"] == str(memory.version)]
    # a boolean and its reason (the tag's text until 0.9.6)
    assert row["memory_floor"] is False
    assert row["memory_floor_not_why"] == "its runs are bfloat16: a description counts float32 bytes"
    assert client.get_model_version(memory.name, str(memory.version)).tags["oom_runs"] == "1"
    full = train(wh, "peak_mem_mb", "inference", "cpu", uri, plots=False)
    assert "largest_peak_mb" not in client.get_model_version(full.name, str(full.version)).tags
    assert client.get_model_version(half.name, str(half.version)).tags["dtype"] == "bfloat16"
    expected = _latency(_flops(described("resnet18", 64)), 2)
    for args, factor in (([], 1.0), (["--dtype", "bfloat16"], 0.6)):
        out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "-b", "2", "--input-size",
                                       "64", *args, "--format", "json"])
        assert out.exit_code == 0, out.output
        answer = json.loads(out.output)
        assert answer["dtype"] == ("bfloat16" if args else "float32")
        assert answer["predictions"]["latency_ms"] == pytest.approx(factor * expected, rel=0.2)
    assert set(answer["model_versions"].values()) == {"latency_ms-inference-cpu-bfloat16/1",
                                                      "peak_mem_mb-inference-cpu-bfloat16/1"}
    with pytest.raises(FingerprintError, match="no inference measurements of latency_ms on device 'cpu' in float16"):
        train(wh, "latency_ms", "inference", "cpu", uri, dtype="float16", plots=False)
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--dtype", "float16"])
    assert out.exit_code == 1 and str(out.exception).startswith(
        "no fingerprint for phase 'inference' on device 'cpu' in float16; registered: latency_ms-inference-cpu, ")


def test_a_search_space_predicted_beyond_the_fingerprint_says_so(measured: tuple[Path, Path], tmp_path: Path) -> None:
    """searchspace run --latency predicted keeps each candidate's extrapolation on its candidate run;
    the run's summary, the searchspace_candidates view and the report say which candidates it is."""
    from tests.test_searchspace import SPACE

    runs, wh = measured
    uri = resolve_location(str(runs)).uri
    client, champion = MlflowClient(uri), _latency_champion(runs, wh)
    name = champion.name
    learnt = json.loads(champion.tags["trained_ranges"])
    space = tmp_path / "tiny.toml"
    space.write_text(SPACE)  # 16-pixel digits networks: far smaller than any network the fingerprint learnt
    runner = CliRunner()

    def cli(*args: str) -> dict:
        out = runner.invoke(app, ["--tracking-uri", str(runs), *args, "--format", "json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    ran = cli("searchspace", "run", str(space), "--latency", "predicted")
    # the space asks for one thread, the fingerprint learnt these runs' two: said (unheeded until 0.9.2)
    assert (ran["mode"], ran["space_mode"]) == ("cpu-t2", "cpu-t1"), ran
    assert ran["latency_done"] == 4 and sorted(ran["extrapolated"]) == sorted(p.stem for p in (tmp_path / "tiny" / "networks").glob("*.json"))
    cands = client.search_runs(client.get_experiment_by_name("searchspace-tiny").experiment_id,
                               "tags.`tracker.kind` = 'candidate'")
    flops = {}
    for run in cands:
        beyond = json.loads(run.data.tags["tracker.outside_trained_range"])
        assert beyond["flops"]["trained"] == learnt["flops"] and beyond["flops"]["value"] < learnt["flops"][0]
        assert "batch_size" not in beyond  # batch 1 was learnt
        flops[run.data.params["model"]] = beyond["flops"]["value"]
    rep = cli("searchspace", "report", str(space), "--warehouse", str(tmp_path / "w.duckdb"))
    assert rep["latency_source"] == "predicted" and len(rep["candidates"]) == 4
    assert all(c["outside_trained_range"]["flops"]["value"] == flops[c["name"]] for c in rep["candidates"])

    # Run again: nothing is missing. The champion moved by hand (fingerprint promote) to another
    # version (a copy of it) makes each prediction missing again; the new ones name that version
    # and the view takes them.
    again = cli("searchspace", "run", str(space), "--latency", "predicted", "--skip-accuracy")
    assert again["latency_skipped"] == 4 and again["latency_done"] == 0
    import mlflow

    mlflow.set_tracking_uri(uri)  # the registry resolves the logged model through the global client
    copy = client.create_model_version(name, champion.source, champion.run_id, tags=champion.tags)
    assert cli("fingerprint", "promote", name, str(copy.version)) == {
        "name": name, "version": str(copy.version), "previous": str(champion.version), "moved": True}
    assert client.get_model_version_by_alias(name, CHAMPION).version == copy.version
    assert client.get_model_version(name, copy.version).tags["promoted"].endswith(f", after version {champion.version}")
    listed = runner.invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list"]).stdout.splitlines()
    assert [line.split()[1] for line in listed if "; promoted by hand" in line] == [f"v{copy.version}"]
    try:
        moved = cli("searchspace", "run", str(space), "--latency", "predicted", "--skip-accuracy")
        assert moved["latency_done"] == 4 and moved["latency_skipped"] == 0
    finally:
        back = runner.invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", name, str(champion.version)])
        assert back.exit_code == 0 and back.stdout == (
            f"{name}: champion moved from version {copy.version} to version {champion.version}\n"), back.output
    same = runner.invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", name, str(champion.version)])
    assert same.stdout == f"{name}: version {champion.version} is already champion\n"
    # What cannot be champion is one line naming what is wrong, and the alias stays.
    other = client.create_registered_model("not-a-fingerprint").name
    client.create_model_version(other, champion.source, champion.run_id)  # no features tag
    versions = ", ".join(str(n) for n in sorted(int(v.version) for v in client.search_model_versions(f"name = '{name}'")))
    for args, message in (((name, "99"), f"{name} has no version 99; versions: {versions}"),
                          ((name, "two"), "version 'two': expected a whole number of at least 1"),
                          (("latency_ms-inference-cdu", "1"), "no fingerprint named 'latency_ms-inference-cdu'; "
                                                               f"registered: {name}, not-a-fingerprint"),
                          ((other, "1"), "not-a-fingerprint version 1 was not registered by tracker fingerprint "
                                         "train (no features tag)")):
        with pytest.raises(FingerprintError, match=re.escape(message)):
            runner.invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", *args], catch_exceptions=False)
    client.delete_registered_model(other)
    # A version of the fingerprint's name registered otherwise is neither used nor listed (until 0.9.2: "cannot
    # load its model ... moved?", and a row of the list)
    foreign = client.create_model_version(name, champion.source, champion.run_id)  # no features tag
    try:
        used = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "squeezenet1_1", "--use",
                                   f"{name}/{foreign.version}"])
        assert used.exit_code == 1 and str(used.exception) == (
            f"{name} version {foreign.version} was not registered by tracker fingerprint train (no features tag): "
            "tracker predict cannot use it"), used.output
        listed = runner.invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format", "json"])
        assert str(foreign.version) not in {r["version"] for r in json.loads(listed.stdout) if r["name"] == name}
        assert "note: 1 registered model version not made by tracker fingerprint train left out" in listed.stderr
        # the alias moved onto it by hand (the MLflow UI): said as such ("cannot load ... moved?" until 0.9.4),
        # and the next version trained takes the alias from it (it stayed, unloadable, until 0.9.4)
        client.set_registered_model_alias(name, CHAMPION, foreign.version)
        used = runner.invoke(app, ["--tracking-uri", str(runs), "predict", "squeezenet1_1"])
        assert used.exit_code == 1 and str(used.exception).startswith(
            f"{name} version {foreign.version} was not registered by tracker fingerprint train (no features tag): "
            f"tracker predict cannot use it; move the champion alias to one of train's"), used.output
        from tracker.fingerprint.train import _maybe_promote

        assert _maybe_promote(client, uri, name, champion.version, None, None, None, None) == (
            True, f"version {foreign.version}, champion, was not registered by tracker fingerprint train")
        assert client.get_model_version_by_alias(name, CHAMPION).version == champion.version
    finally:
        client.delete_model_version(name, foreign.version)
    assert client.get_model_version_by_alias(name, CHAMPION).version == champion.version
    runs_by_version: dict[str, set[str]] = {}
    for run in client.search_runs(client.get_experiment_by_name("searchspace-tiny").experiment_id,
                                  "tags.`tracker.kind` = 'candidate'"):
        runs_by_version.setdefault(run.data.params["fingerprint_version"], set()).add(run.info.run_id)
    assert {v: len(ids) for v, ids in runs_by_version.items()} == {f"{name}/{champion.version}": 4,
                                                                     f"{name}/{copy.version}": 4}
    cli("searchspace", "report", str(space), "--warehouse", str(tmp_path / "w.duckdb"))
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    try:
        viewed = {r[0] for r in con.execute("SELECT latency_run_id FROM searchspace_candidates "
                                            "WHERE latency_source = 'predicted'").fetchall()}
    finally:
        con.close()
    assert viewed == runs_by_version[f"{name}/{copy.version}"]

    # A version whose span covers the two smallest candidates: only the two larger are marked.
    small, large = sorted(flops, key=flops.get)[:2], sorted(flops, key=flops.get)[2:]
    client.set_model_version_tag(name, champion.version, "trained_ranges",
                                 json.dumps({"flops": [flops[small[0]], flops[small[1]]]}))
    try:
        (tmp_path / "bs2.toml").write_text(SPACE.replace("[latency]\nbatch_size = 1", "[latency]\nbatch_size = 2"))
        ran = cli("searchspace", "run", str(tmp_path / "bs2.toml"), "--latency", "predicted", "--skip-accuracy")
        assert ran["latency_done"] == 4 and sorted(ran["extrapolated"]) == sorted(large)
        table = runner.invoke(app, ["--tracking-uri", str(runs), "searchspace", "report", str(tmp_path / "bs2.toml"),
                                    "--warehouse", str(tmp_path / "w.duckdb")])
        # the mode its fingerprint learnt (the version's tag mode: these runs' cpu-t2), said since 0.9.0
        assert table.exit_code == 0 and "(predicted latency, bs2 on cpu, mode cpu-t2)" in table.stdout, table.output
        frontier = [line.strip() for line in table.stdout.splitlines() if line.startswith("  tiny-")]
        assert frontier and all(line.endswith(" *") == (line.split(":")[0] in large) for line in frontier), table.output
        assert "* predicted beyond what the fingerprint learnt from (2 of 4 candidates)" in table.stdout
    finally:
        client.set_model_version_tag(name, champion.version, "trained_ranges", champion.tags["trained_ranges"])


def test_a_train_with_nothing_to_learn_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    RunLogger(str(runs), experiment="only-inference", environment=ENV).log([network_record("resnet18", 1)])
    load(wh, open_source(resolve_location(str(runs))))
    from tests.test_cli import in_process

    out = in_process(["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms", "--phase", "training",
                      "--warehouse", str(wh)], tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "no training measurements of latency_ms" in out.stderr
    names = {e.name for e in MlflowClient(resolve_location(str(runs)).uri).search_experiments()}
    assert "only-inference" in names and "fingerprints" not in names


def test_latency_past_the_largest_batch_learnt_grows_with_the_batch(measured: tuple[Path, Path]) -> None:
    """Trees answer past the largest batch they learnt as at it: `predict -b 64` of a version that
    learnt batches 1 to 8 gave batch 8's latency, until 0.9.0. A version without a trend now scales
    its prediction at batch 8 by the batch, and says so; one with a trend is left to it."""
    import dataclasses

    from tracker.fingerprint.predict import champions, predict_grid

    runs, wh = measured
    uri = resolve_location(str(runs)).uri
    _latency_champion(runs, wh)
    models = champions(uri, "inference", "cpu", targets=("latency_ms",))
    plain = {"latency_ms": dataclasses.replace(models["latency_ms"], trend=None)}
    assert plain["latency_ms"].ranges["batch_size"] == [1.0, 8.0]
    at4, at8, at64 = predict_grid(uri, ["resnet18"], [4, 8, 64], "inference", "cpu", 64, plain)
    assert at64["predictions"]["latency_ms"] == pytest.approx(8 * at8["predictions"]["latency_ms"], rel=1e-12)
    assert at64["scaled_from_batch"] == {"latency_ms": 8} and at8["scaled_from_batch"] == at4["scaled_from_batch"] == {}
    [alone] = predict_grid(uri, ["resnet18"], [4], "inference", "cpu", 64, plain)
    assert alone["predictions"] == at4["predictions"]  # the row made for batch 8 changes no other
    shown = CliRunner().invoke(app, ["--tracking-uri", uri, "predict", "resnet18", "-b", "64", "--input-size", "64"])
    if models["latency_ms"].trend is None:
        assert "the largest it learnt, times 64/8" in shown.output, shown.output
    else:
        assert "times 64/8" not in shown.output and "extrapolates" in shown.output, shown.output



def test_predict_ranks_and_budgets_a_search_and_marks_what_to_read_with_care(measured: tuple[Path, Path]) -> None:
    """A search's candidates: --under keeps those predicted within a budget, --sort ranks them; the
    table marks each value to read with care and says each mark once (a note a row before 0.9.0)."""
    runs, wh = measured
    uri = resolve_location(str(runs)).uri
    _latency_champion(runs, wh)
    base = ["--tracking-uri", str(runs), "predict", "resnet18", "squeezenet1_1", "mobilenet_v2", "--input-size", "64",
            "-b", "2", "-b", "64"]
    everything = json.loads(CliRunner().invoke(app, [*base, "--format", "json"]).stdout)
    latencies = sorted(r["predictions"]["latency_ms"] for r in everything)
    budget = latencies[2]  # three of the six under it, or at it
    ranked = CliRunner().invoke(app, [*base, "--sort", "latency_ms", "--under", f"latency_ms={budget!r}", "--format", "json"])
    assert ranked.exit_code == 0, ranked.output
    assert [r["predictions"]["latency_ms"] for r in json.loads(ranked.stdout)] == latencies[:3]
    assert ranked.stderr == f"3 of 6 configurations predicted under latency_ms {budget:g}\n"  # a table's only until 0.9.2
    table = CliRunner().invoke(app, [*base, "--sort", "latency_ms"])
    rows = [line for line in table.stdout.splitlines() if line.split()[0] in ("resnet18", "squeezenet1_1", "mobilenet_v2")]
    assert len(rows) == 6 and not any(line.startswith("note:") for line in table.stdout.splitlines()), table.output
    assert [line.split()[2].rstrip("*^_") for line in rows] == [f"{v:.4g}" for v in latencies]
    assert all("*" in line for line in rows if line.split()[1] == "64")  # batch 64: beyond batches 1 to 8
    assert "*: beyond what its version learnt from" in table.stdout and "3 of 6 predictions" in table.stdout
    # a version named with --use answers, whether or not it is the champion (here the first registered, which may
    # be): versions compared without promoting
    versions = sorted(int(v.version) for v in MlflowClient(uri).search_model_versions("name = 'latency_ms-inference-cpu'"))
    first = f"latency_ms-inference-cpu/{versions[0]}"
    used = json.loads(CliRunner().invoke(app, [*base[:4], "-b", "2", "--input-size", "64", "--use", first,
                                               "--format", "json"]).stdout)
    assert used["model_versions"]["latency_ms"] == first
    for wrong, said in ((["--under", "latency=3"], "expected TARGET=VALUE"), (["--under", "latency_ms=x"], "is not a number"),
                        (["--sort", "speed"], "--sort 'speed': not a target"),
                        (["--under", "power_w=3"], "no power_w fingerprint"),
                        (["--use", "latency_ms-inference-cpu/999"], "no fingerprint latency_ms-inference-cpu version 999"),
                        (["--use", "latency_ms-inference-cuda/1"], "not a fingerprint of inference on 'cpu'")):
        out = CliRunner().invoke(app, [*base, *wrong])
        assert out.exit_code == 1 and said in str(out.exception), (wrong, out.output)


def test_a_registered_fingerprint_answers_in_its_unit_through_mlflow(measured: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    """The registered version is an MLflow pyfunc: pyfunc.load_model and a real `mlflow models
    serve` in a Python without tracker answer in MB (not log MB), as tracker's own Champion does; a
    version of the older bare LightGBM format still loads in tracker; a format this tracker does
    not know is refused."""
    import lightgbm
    import mlflow
    import numpy as np
    import requests

    from tests.conftest import free_port, wait_http
    from tracker.fingerprint.predict import RegisteredVersion, champion_versions, load_champion

    runs, wh = measured
    uri = resolve_location(str(runs)).uri
    result = train(wh, "peak_mem_mb", "inference", "cpu", uri, plots=False)
    client = MlflowClient(uri)
    version = client.get_model_version(result.name, result.version)
    assert version.tags["format"] == str(FORMAT)
    con = duckdb.connect(str(wh), read_only=True)
    try:
        rows = con.execute("SELECT * FROM measurement_features WHERE phase = 'inference' ORDER BY run_id").df()
    finally:
        con.close()
    mlflow.set_tracking_uri(uri)
    served = mlflow.pyfunc.load_model(f"models:/{result.name}@{CHAMPION}").predict(rows)  # all columns: extras ignored
    ours = load_champion(uri, result.name, version).predict(rows)
    assert np.allclose(served, ours, rtol=1e-12)
    # tracker's own read of an embedded store's registry (no MLflow imported: a new process that predicts
    # takes 2.5 s instead of 4.7) finds the same version and answers the same
    [read] = champion_versions(uri, "inference", "cpu", targets=("peak_mem_mb",)).values()
    assert isinstance(read, RegisteredVersion)
    assert (read.name, read.version, read.run_id, read.tags) == (version.name, str(version.version), version.run_id, version.tags)
    assert np.array_equal(load_champion(uri, result.name, read).predict(rows), ours)
    probe = ("import sys; from tracker.fingerprint.predict import champions; "
             f"c = champions({uri!r}, 'inference', 'cpu', targets=('peak_mem_mb',)); "
             "print(c['peak_mem_mb'].version, 'mlflow' in sys.modules, 'lightgbm' in sys.modules)")
    alone = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    # nor LightGBM since 0.9.35: its booster's trees walked in numpy (runtime.TextBooster)
    assert alone.stdout.split() == [str(version.version), "False", "False"], alone.stderr
    measured_mb = rows["peak_mem_mb"].to_numpy(float)
    assert np.median(np.abs(served / measured_mb - 1)) < 0.2  # in MB: a logarithm would be 1-2 % of it
    with pytest.raises(mlflow.exceptions.MlflowException, match="missing inputs.*'batch_flops'"):
        mlflow.pyfunc.load_model(f"models:/{result.name}/{result.version}").predict(rows.drop(columns="batch_flops"))

    # A real scoring server over the registry, in a Python where tracker cannot be imported: the
    # version answers with the runtime it carries (its requirements name no tracker).
    port = free_port()
    env = {**_without_tracker(tmp_path / "no-tracker"), "MLFLOW_TRACKING_URI": uri}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "mlflow"), "models", "serve", "-m",
                             f"models:/{result.name}@{CHAMPION}", "--env-manager", "local", "-p", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/ping", proc, timeout_s=120)
        body = {"dataframe_split": json.loads(rows.head(6).to_json(orient="split", index=False))}
        answer = requests.post(f"http://127.0.0.1:{port}/invocations", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        assert np.allclose(answer.json()["predictions"], ours[:6], rtol=1e-9)
        # A network never run: tracker predict --features gives the row the server takes, and the
        # server answers what tracker predict does.
        new = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet50", "--batch-size", "2",
                                       "--input-size", "64", "--features", "--format", "json"])
        assert new.exit_code == 0, new.output
        data = json.loads(new.stdout)
        # (and the columns of a peak memory's floor, which no model learns from)
        assert set(data["features"]) == {*version.tags["features"].split(","), "layers", "live_activation_bytes",
                                         "batch_live_activation_bytes"}
        assert len(data["features"]["layers"]) > 50 and data["features"]["layers"][0]["category"] == "conv"
        row = {"dataframe_records": [data["features"]]}
        answer = requests.post(f"http://127.0.0.1:{port}/invocations", json=row, timeout=60)
        assert answer.json()["predictions"] == [pytest.approx(data["predictions"]["peak_mem_mb"], rel=1e-9)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    # The format before this one (a bare LightGBM model of log(target); tags as now but no
    # `format`), as older trackers registered it: tracker still reads it, and alike.
    booster = mlflow.pyfunc.load_model(f"models:/{result.name}/{result.version}").unwrap_python_model().booster
    booster = lightgbm.Booster(model_str=booster.model_to_string())  # LightGBM's own, which mlflow.lightgbm logs
    with mlflow.start_run():  # its requirements named: MLflow infers them in a process of its own (3 s; not read here)
        info = mlflow.lightgbm.log_model(booster, name="model", registered_model_name=result.name,
                                         pip_requirements=["lightgbm"])
    old = str(info.registered_model_version)
    for key, value in version.tags.items():
        if key != "format":
            client.set_model_version_tag(result.name, old, key, value)
    assert np.allclose(load_champion(uri, result.name, client.get_model_version(result.name, old)).predict(rows),
                       ours, rtol=1e-12)
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format", "json"])
    formats = {r["version"]: r["format"] for r in json.loads(listed.stdout) if r["name"] == result.name}
    assert formats[old] == 1 and formats[result.version] == FORMAT
    table = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list"]).stdout.splitlines()
    noted = {line.split()[1] for line in table if line.endswith("; format 1: MLflow serves log(target)")}
    assert f"v{old}" in noted and f"v{result.version}" not in noted

    # A format from a newer tracker: refused in one line, by predict and by promote; nothing moves.
    newer = FORMAT + 1
    # fingerprint list shows a newer format's number, and one that is no whole number as unreadable (its text
    # until 0.9.13)
    for tag, shown in (("2b", (None, ["format"])), (str(newer), (newer, []))):
        client.set_model_version_tag(result.name, old, "format", tag)
        listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format", "json"])
        assert {r["version"]: (r["format"], r["unreadable_tags"]) for r in json.loads(listed.stdout)
                if r["name"] == result.name}[old] == shown
    known = ", ".join(map(str, range(1, FORMAT + 1)))
    with pytest.raises(FingerprintError, match=re.escape(f"{result.name} version {old} has format '{newer}', which this "
                                                         f"tracker does not read (it reads {known}); upgrade tracker")):
        CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", result.name, old],
                           catch_exceptions=False)
    client.set_registered_model_alias(result.name, CHAMPION, old)
    try:
        with pytest.raises(FingerprintError, match=re.escape(f"{result.name} version {old} has format '{newer}'")):
            CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--input-size", "64"],
                               catch_exceptions=False)
        # Its model's files gone (a store moved or copied keeps their old paths): one line as well.
        client.set_model_version_tag(result.name, old, "format", "1")
        shutil.rmtree(mlflow.artifacts.download_artifacts(f"models:/{result.name}/{old}"))
        with pytest.raises(FingerprintError, match=re.escape(f"{result.name} version {old}: cannot load its model "
                                                             "from the store's artifacts (")):
            load_champion(uri, result.name, client.get_model_version(result.name, old))
    finally:
        client.set_registered_model_alias(result.name, CHAMPION, result.version)
        client.delete_model_version(result.name, old)


GPU_NETWORKS = ("mobilenet_v3_small", "squeezenet1_0", "squeezenet1_1", "shufflenet_v2_x0_5", "mnasnet0_5")


def test_gpu_utilisation_is_a_target_and_never_predicted_past_100_pct(tmp_path: Path) -> None:
    """Where a device reports GPU utilisation (NVML, tegrastats) it is learnt like the other
    targets; a reading of 0 is not learnt from (log scale), and no prediction passes 100 %."""
    import lightgbm
    import numpy as np
    import pandas as pd

    from tracker.fingerprint.predict import Champion

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="gpu", environment={**ENV, "env.gpu_name": "Test GPU"})
    records = []
    for name in GPU_NETWORKS:
        desc = described(name, 64)
        for bs in (1, 2, 4, 8):
            work = _flops(desc) * bs  # a GPU that fills up as the batch's work grows
            r = network_record(name, bs, gpu_util_pct=0.0 if (name, bs) == ("mnasnet0_5", 1) else 100 * work / (work + 4e8))
            r.params.update(model_hash=desc.description_hash, device="cuda", mode="cuda-default")
            if bs == 1:
                r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
            records.append(r)
    logger.log(records)
    load(wh, open_source(resolve_location(str(runs))))
    uri = resolve_location(str(runs)).uri
    result = train(wh, "gpu_util_pct", "inference", "cuda", uri, plots=False)
    assert result.name == "gpu_util_pct-inference-cuda" and result.champion
    assert result.evaluation["rows"] == 4 * len(GPU_NETWORKS) - 1  # the reading of 0 is left out
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet18", "--device", "cuda",
                                   "--batch-size", "4", "--input-size", "64", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["units"] == {"gpu_util_pct": "%"} and 0 < data["predictions"]["gpu_util_pct"] <= 100
    assert data["model_versions"]["gpu_util_pct"] == f"gpu_util_pct-inference-cuda/{result.version}"
    assert {"latency_ms", "power_w"} <= set(data["missing_targets"])

    # A model whose log-scale output lies above log(100) (a trend carried past the batches it
    # learnt can do that): capped for utilisation, not for latency.
    x = np.linspace(0, 1, 50)[:, None]
    booster = lightgbm.train({"verbose": -1, "min_data_in_leaf": 1}, lightgbm.Dataset(x, np.log(120 + 10 * x[:, 0])),
                             num_boost_round=5)
    rows = pd.DataFrame({"a": [0.1, 0.9]})
    assert Champion("gpu_util_pct-inference-cuda", "1", ["a"], booster).predict(rows).tolist() == [100.0, 100.0]
    assert (Champion("latency_ms-inference-cuda", "1", ["a"], booster).predict(rows) > 100).all()


def _cuda_runs(peak_mb: Any) -> list[Any]:
    """Inference runs on cuda of GPU_NETWORKS at 64 px, batch 1 to 8, each the peak
    ``peak_mb(index, description, batch_size)``; the description with batch 1."""
    records = []
    for i, name in enumerate(GPU_NETWORKS):
        desc = described(name, 64)
        for bs in (1, 2, 4, 8):
            r = network_record(name, bs, peak_mem_mb=peak_mb(i, desc, bs))
            r.params.update(model_hash=desc.description_hash, device="cuda", mode="cuda-default", input_size=64)
            if bs == 1:
                r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
            records.append(r)
    return records


def test_a_memory_prediction_above_the_devices_memory_says_it_would_not_fit(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs record the machine's memory and the GPU's (``env.*``); a CUDA run's device memory in
    the warehouse is the GPU's, a CPU run's the machine's. A peak-memory fingerprint records the
    device memory of what it learnt from, and a prediction above it says it cannot fit; where the
    device has run out of memory, above the largest peak that ran says it may not fit."""
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    env = {**ENV, "env.gpu_name": "Test GPU", "env.memory_total_mb": "64000", "env.gpu_memory_total_mb": "16000"}
    logger = RunLogger(str(runs), experiment="gpu", environment=env)
    records = _cuda_runs(lambda i, desc, bs: 100.0 + _flops(desc) * bs / 1e7)
    cpu = network_record("squeezenet1_1", 1, peak_mem_mb=300.0)
    cpu.params["model_hash"] = described("squeezenet1_1", 64).description_hash
    cpu.key_fields["device"] = "cpu"  # another configuration than the cuda one of the same network
    logger.log([*records, cpu])
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    with duckdb.connect(str(wh), read_only=True) as con:
        assert dict(con.sql("SELECT device, max(device_memory_mb) FROM measurements GROUP BY device").fetchall()) == {
            "cuda": 16000.0, "cpu": 64000.0}
        assert con.sql("SELECT DISTINCT device_memory_mb FROM oom_boundary WHERE device = 'cuda'").fetchall() == [
            (16000.0,)]
    uri = resolve_location(str(runs)).uri
    client = MlflowClient(uri)
    # Nothing ran out of memory on this GPU yet: the largest peak learnt from marks no limit.
    untried = client.get_model_version("peak_mem_mb-inference-cuda", train(wh, "peak_mem_mb", "inference", "cuda",
                                                                            uri, plots=False).version).tags
    assert untried["device_memory_mb"] == "16000" and "largest_peak_mb" not in untried
    # Once a configuration failed out of memory there, it does.
    oom = network_record("mnasnet0_5", 64)
    oom.params.update(model_hash=described("mnasnet0_5", 64).description_hash, device="cuda", mode="cuda-default")
    oom.metrics = {}
    # one that failed under a memory cap of tracker's (a smaller device) is not this device's evidence
    capped = network_record("mnasnet0_5", 32)
    capped.params.update(model_hash=oom.params["model_hash"], device="cuda", mode="cuda-default", memory_limit_mb=50.0)
    capped.metrics, capped.tags["tracker.memory_cap"] = {}, "resident"
    logger = RunLogger(str(runs), experiment="gpu", environment=env)
    logger.log([oom.fail("oom"), capped.fail("oom")])
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    result = train(wh, "peak_mem_mb", "inference", "cuda", uri, plots=False)
    tags = client.get_model_version(result.name, result.version).tags
    assert tags["device_memory_mb"] == "16000" and tags["oom_runs"] == "1"
    peaks = [r.metrics["peak_mem_mb"] for r in records]
    assert float(tags["largest_peak_mb"]) == pytest.approx(max(peaks), abs=0.05)
    client.set_registered_model_alias(result.name, CHAMPION, result.version)  # promoted by hand, as the CLI can
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list"]).stdout.splitlines()
    assert [line.endswith(f"; fits under: device 16,000 MB, largest peak run {max(peaks):,.0f} MB") for line in listed
            ] == [True, False] and listed[1].endswith("; fits under: device 16,000 MB")  # newest version first
    args = ["--tracking-uri", str(runs), "predict", "mnasnet0_5", "--device", "cuda", "-b", "1", "-b", "8",
            "--input-size", "64"]
    fits = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)
    assert [r["exceeds_device_memory"] for r in fits] == [[], []]
    assert fits[0]["device_memory_mb"] == {"peak_mem_mb": 16000.0}
    assert fits[0]["largest_peak_measured_mb"] == {"peak_mem_mb": float(tags["largest_peak_mb"])}
    assert [r["above_largest_peak_measured"] for r in fits] == [[], []]  # mnasnet0_5 is not the largest measured
    # The same version on a device of less memory than its batch-8 prediction (its tag set so).
    small, large = (r["predictions"]["peak_mem_mb"] for r in fits)
    client.set_model_version_tag(result.name, result.version, "device_memory_mb", f"{(small + large) / 2:.0f}")
    out = CliRunner().invoke(app, [*args, "--format", "json"])
    assert [r["exceeds_device_memory"] for r in json.loads(out.stdout)] == [[], ["peak_mem_mb"]]
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    notes = [line for line in table.stdout.splitlines() if "would not fit" in line]
    assert len(notes) == 1 and notes[0].startswith("note: peak_mem_mb (mnasnet0_5 at batch 8)"), table.stdout
    # Below the device's memory, above the largest peak it learnt from: never seen to run there.
    client.set_model_version_tag(result.name, result.version, "device_memory_mb", "16000")
    client.set_model_version_tag(result.name, result.version, "largest_peak_mb", f"{(small + large) / 2:.1f}")
    maybe = CliRunner().invoke(app, args)
    notes = [line for line in maybe.stdout.splitlines() if "fit" in line]
    assert len(notes) == 1 and notes[0].startswith("note: peak_mem_mb (mnasnet0_5 at batch 8)"), maybe.stdout
    assert "above the largest peak measured on the device" in notes[0] and notes[0].endswith("it may not fit")
    # The largest batch under each limit, found without running anything: its prediction is under
    # the limit and the next size's is over; a limit no size reaches up to the largest tried is None.
    found = json.loads(CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "mnasnet0_5", "--device", "cuda",
                                                "--input-size", "64", "--largest-batch", "--format", "json"]).stdout)
    limit = float(f"{(small + large) / 2:.1f}")
    assert found["limits_mb"] == {"largest_peak_measured": limit, "device_memory": 16000.0}
    batch = found["largest_batch"]["largest_peak_measured"]
    assert 1 <= batch < 8 < found["largest_batch"]["device_memory"] and found["beyond_max_batch"] == []
    assert found["measure_command"] == ("tracker profile boundary mnasnet0_5 --phase inference --device cuda "
                                        f"--input-size 64 --start {batch} --search")  # as profile takes it (the default store: none named)
    # a store a command would not find by itself is named (since 0.9.10); this process's training had MLflow set
    # MLFLOW_TRACKING_URI to it, which a new process's environment lacks: cleared here
    monkeypatch.setenv("TRACKER_RUNS_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    named = json.loads(CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "mnasnet0_5", "--device", "cuda",
                                                "--input-size", "64", "--largest-batch", "--format", "json"]).stdout)
    assert named["measure_command"] == found["measure_command"].replace("tracker ", f"tracker --tracking-uri {runs} ", 1)
    monkeypatch.setenv("TRACKER_RUNS_DIR", str(runs))
    edge = json.loads(CliRunner().invoke(app, [*args[:6], "-b", str(batch), "-b", str(batch + 1), "--input-size", "64",
                                               "--format", "json"]).stdout)
    assert edge[0]["predictions"]["peak_mem_mb"] == pytest.approx(found["predicted_peak_mb"]["largest_peak_measured"])
    assert edge[0]["predictions"]["peak_mem_mb"] <= limit < edge[1]["predictions"]["peak_mem_mb"]
    client.set_model_version_tag(result.name, result.version, "device_memory_mb", "1000000000")
    lines = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "mnasnet0_5", "--device", "cuda",
                                     "--input-size", "64", "--largest-batch"]).stdout
    assert lines.startswith(f"mnasnet0_5: largest batch under the largest peak learnt from ({limit:,.0f} MB): {batch} (")
    assert "under the device's memory (1,000,000,000 MB): more than 65,536" in lines
    with pytest.raises(ConfigError, match="--largest-batch answers one thing, the largest batch size, with the champions: leave out --batch-size"):
        CliRunner().invoke(app, [*args, "--largest-batch"], catch_exceptions=False)
    for unreadable in ("lots", "nan", "-5", "\u0663"):  # another script's 3: read as 3 until 0.9.14
        client.set_model_version_tag(result.name, result.version, "device_memory_mb", unreadable)
        bad = CliRunner().invoke(app, [*args, "--format", "json"])
        assert isinstance(bad.exception, FingerprintError)
        assert f"unreadable device_memory_mb tag '{unreadable}'" in str(bad.exception)


def test_the_command_that_measures_a_largest_batch_names_what_profile_takes() -> None:
    """predict --largest-batch ends with the profile boundary command that measures it: on the
    device and in the mode its version's runs ran in (a device mode's threads and allocator), never
    a device name profile refuses (perf4sight's jetson-tx2: said, with DEVICE to put)."""
    from tracker.fingerprint.predict import Champion, boundary_command
    from tracker.profile.device import is_device_name

    def command(device: str, devices: tuple[str, ...] | None, mode: str | None) -> str:
        return boundary_command("resnet18", "training", device, Champion("n", "1", [], None, devices=devices, mode=mode), 12)

    tail = "--start 12 --search"
    assert command("cpu-t1-retain", ("cpu",), "cpu-t1-retain") == (
        f"tracker profile boundary resnet18 --phase training --device cpu --threads 1 --allocator retain {tail}")
    assert command("Intel Xeon", ("cpu",), "cpu-t2-schedutil") == (
        f"tracker profile boundary resnet18 --phase training --device cpu --threads 2 {tail}")
    assert command("cpu-t2", None, None) == f"tracker profile boundary resnet18 --phase training --device cpu --threads 2 {tail}"
    assert command("NVIDIA H100", None, "cuda1-sm1980-pl700w-t8-performance") == (  # a version before its tags
        f"tracker profile boundary resnet18 --phase training --device cuda:1 --threads 8 {tail}")
    assert command("jetson-tx2", ("jetson-tx2",), None) == (
        "on jetson-tx2 (its DEVICE: cpu or cuda, as its runs ran): tracker profile boundary resnet18 --phase training "
        f"--device DEVICE {tail}")
    for device in ("cpu", "cuda"):
        assert f"--device {device} " in command(device, None, None) and is_device_name(device)
    # a network file in a folder with a space: one word when pasted (two until 0.9.8)
    spaced = boundary_command("my nets/net.py", "inference", "cpu", Champion("n", "1", [], None), 4)
    assert spaced == f"tracker profile boundary 'my nets/net.py' --phase inference --device cpu {tail.replace('12', '4')}"


def test_a_suggested_command_names_the_store_where_a_command_would_find_another(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A command tracker suggests (predict's measure command, the demo's next steps) names the store
    it read where a command given no --tracking-uri would find another (none named until 0.9.10: after
    `tracker --tracking-uri X ...`, pasted, it read or wrote the default store): an embedded store by
    its folder, a database's password as ***."""
    from tracker.fingerprint.predict import Champion, boundary_command
    from tracker.settings import resolve_location, store_words

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("TRACKER_RUNS_DIR", str(tmp_path / "runs"))
    default, other = resolve_location(None).uri, resolve_location(str(tmp_path / "my store")).uri
    assert store_words(default) == [] and store_words(other) == ["--tracking-uri", str(tmp_path / "my store")]
    assert store_words("postgresql://me:pw@db/mlflow") == ["--tracking-uri", "postgresql://me:***@db/mlflow"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")  # what a command finds by itself
    assert store_words("http://127.0.0.1:5000") == [] and store_words(default)[0] == "--tracking-uri"
    command = boundary_command("resnet18", "inference", "cpu", Champion("n", "1", [], None), 4, store=store_words(other))
    assert command == f"tracker --tracking-uri '{tmp_path / 'my store'}' profile boundary resnet18 --phase inference " \
                      "--device cpu --start 4 --search"


def _inference_floor_mb(desc, bs: int, activations: str = "live_activation_bytes") -> float:  # noqa: ANN001
    """Weights and the activations alive at once at batch ``bs`` (tracker 0.7.8: the largest
    activation), from describe's own totals."""
    from tracker.describe.features import aggregates

    a = aggregates(desc, bs)
    return (a["weight_bytes"] + a[activations]) / 2**20


def test_a_peak_memory_is_never_predicted_below_what_its_own_tensors_hold(tmp_path: Path) -> None:
    """Trees answer past the largest batch they learnt as at that batch: a peak-memory fingerprint
    learnt at batches 1 to 8 put batch 65,536 at batch 8's peak, and --largest-batch said "more than
    65,536" on any device. A version whose training runs all held at least their floor (weights and
    the activations alive at once in inference) raises a prediction to it, in tracker predict and
    in MLflow's pyfunc alike, and says so; --largest-batch then finds a size and says the floor put
    it there. A version of 0.7.8 (no tag memory_floor_columns) keeps its own floor, the largest
    activation. A version that learnt a run below its floor keeps none."""
    import mlflow
    import numpy as np
    import pandas as pd

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    env = {**ENV, "env.gpu_name": "Test GPU", "env.gpu_memory_total_mb": "16000"}
    logger = RunLogger(str(runs), experiment="gpu", environment=env)
    # a process's resident memory of a library's pools, set when it starts (on cpu, say): no trend
    # of the network's work follows it, so LightGBM alone is kept, flat past batch 8
    logger.log(_cuda_runs(lambda i, desc, bs: 600.0 + 25.0 * i))
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    uri = resolve_location(str(runs)).uri
    result = train(wh, "peak_mem_mb", "inference", "cuda", uri, plots=False)
    client = MlflowClient(uri)
    tags = client.get_model_version(result.name, result.version).tags
    assert tags["memory_floor"] == result.memory_floor == "true"
    assert tags["memory_floor_columns"] == "weight_bytes,batch_live_activation_bytes"
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list"]).stdout
    assert "(ExtraTrees" in listed and "networks, mode cuda-default); never below its tensors' floor; fits under: device 16,000 MB" in listed
    # the tensors' own peak asked of a GPU: peak_mem_mb is that figure there (since 0.9.35 said)
    asked = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "-w", str(wh), "--target",
                                     "tensor_peak_mb", "--device", "cuda"])
    assert asked.exit_code == 1 and isinstance(asked.exception, FingerprintError), asked.output
    assert str(asked.exception).endswith("; on a GPU, peak_mem_mb is the tensors' own peak "
                                         "(torch.cuda.max_memory_allocated, cuda_max_allocated_mb): --target peak_mem_mb")
    resnet = described("resnet18", 64)  # never measured
    base = ["--tracking-uri", str(runs), "predict", "resnet18", "--device", "cuda", "--input-size", "64"]
    out = CliRunner().invoke(app, [*base, "-b", "4", "-b", "65536", "--format", "json", "--features"])
    assert out.exit_code == 0, out.output
    near, far = json.loads(out.stdout)
    assert near["at_memory_floor"] == [] and near["predictions"]["peak_mem_mb"] > near["memory_floor_mb"]["peak_mem_mb"]
    floor = _inference_floor_mb(resnet, 65536)
    assert far["memory_floor_mb"]["peak_mem_mb"] == pytest.approx(floor, rel=1e-9)
    assert far["at_memory_floor"] == ["peak_mem_mb"] and far["predictions"]["peak_mem_mb"] == pytest.approx(floor)
    assert far["exceeds_device_memory"] == ["peak_mem_mb"]  # 65,536 at 0.25 MB each do not fit in 16,000 MB
    text = CliRunner().invoke(app, [*base, "-b", "65536"]).stdout
    assert ("note: peak_mem_mb is its floor, what the network's own tensors hold at once (its weights and the "
            f"activations alive at once at the fullest point of its forward pass): {result.name}/{result.version} "
            "predicted less") in text
    # MLflow's pyfunc of the version answers the same for the same features
    mlflow.set_tracking_uri(uri)
    served = mlflow.pyfunc.load_model(f"models:/{result.name}/{result.version}").predict(
        pd.DataFrame([{k: v for k, v in far["features"].items() if k != "layers"}]))
    assert np.allclose(served, [far["predictions"]["peak_mem_mb"]], rtol=1e-9)
    # The largest batch under the GPU's 16,000 MB: where the floor passes it, said so
    found = json.loads(CliRunner().invoke(app, [*base, "--largest-batch", "--format", "json"]).stdout)
    batch = found["largest_batch"]["device_memory"]
    assert found["over_by_memory_floor"] == {"device_memory": True} and found["learnt_batch_sizes"] == [1.0, 8.0]
    assert found["predicted_peak_mb"]["device_memory"] <= 16000 < _inference_floor_mb(resnet, batch + 1)
    assert _inference_floor_mb(resnet, batch) <= 16000
    lines = CliRunner().invoke(app, [*base, "--largest-batch"]).stdout
    assert f"resnet18: largest batch under the device's memory (16,000 MB): {batch} (" in lines
    assert (f"note: batch {batch + 1} passes the device's memory by what the network's own tensors hold at once "
            f"(its weights and the activations alive at once at the fullest point of its forward pass), where "
            f"{result.name}/{result.version}'s prediction had stopped "
            "growing (it learnt batch sizes 1 to 8): an upper bound") in lines
    assert lines.endswith(f"\nmeasure it: tracker profile boundary resnet18 --phase inference --device cuda "
                          f"--input-size 64 --start {batch} --search\n")
    # A version before 0.8.0 learnt from features that counted a tensor batched in another than its
    # first dimension as one of it (a detector's proposals): predicting such a network says so
    from tracker.describe.features import NODE_ROWS_VERSION

    assert tags["node_rows_version"] == str(NODE_ROWS_VERSION)
    detector = [*base[:3], "fasterrcnn_mobilenet_v3_large_320_fpn", *base[4:], "-b", "1"]
    assert json.loads(CliRunner().invoke(app, [*detector, "--format", "json"]).stdout)["learnt_from_other_counts"] == []
    # A version of tracker 0.9.23 (node rows version 8) learnt mnasnet's mean as a reshape, no work and no
    # memory: predicting a network that pools by one says so, and one that does not, nothing
    client.set_model_version_tag(result.name, result.version, "node_rows_version", "8")
    mnasnet = [*base[:3], "mnasnet0_5", *base[4:], "-b", "1"]
    said = json.loads(CliRunner().invoke(app, [*mnasnet, "--format", "json"]).stdout)
    assert said["counted_otherwise"] == {"peak_mem_mb": {"mean": 9}} and said["node_rows_version"] == {"peak_mem_mb": 8}
    assert said["learnt_from_other_counts"] == ["peak_mem_mb"] and said["batched_otherwise"] == []
    assert (f"note: peak_mem_mb: {result.name}/{result.version} learnt from node rows version 8 (tracker 0.9.23 on), "
            "and this network's mean (tracker 0.9.24) is counted otherwise since: retrain with tracker fingerprint "
            "train") in CliRunner().invoke(app, mnasnet).stdout
    plain = json.loads(CliRunner().invoke(app, [*base, "-b", "4", "--format", "json"]).stdout)
    assert plain["learnt_from_other_counts"] == [] and plain["counted_otherwise"] == {}
    # and so does the largest batch predicted to fit (its one memory version's)
    largest = [*mnasnet[:-2], "--largest-batch"]
    found = json.loads(CliRunner().invoke(app, [*largest, "--format", "json"]).stdout)
    assert (found["counted_otherwise"], found["node_rows_version"], found["batched_otherwise"]) == (
        {"mean": 9}, 8, False)
    assert (f"\nnote: {result.name}/{result.version} learnt from node rows version 8 (tracker 0.9.23 on), and this "
            "network's mean (tracker 0.9.24) is counted otherwise since") in CliRunner().invoke(app, largest).stdout
    # and fingerprint list says which node rows each version learnt from, where not this tracker's
    listed = ["--tracking-uri", uri, "fingerprint", "list"]
    row = next(r for r in json.loads(CliRunner().invoke(app, [*listed, "--format", "json"]).stdout)
               if r["version"] == result.version and r["name"] == result.name)
    assert row["node_rows_version"] == 8 and row["unreadable_tags"] == []
    assert (f"; learnt from node rows version 8 (tracker 0.9.23 on), where this tracker's are {NODE_ROWS_VERSION}: "
            "tracker predict names what of a network it counted otherwise") in CliRunner().invoke(app, listed).stdout
    client.set_model_version_tag(result.name, result.version, "node_rows_version", "eight")
    assert "unreadable tags: node_rows_version" in CliRunner().invoke(app, listed).stdout
    client.delete_model_version_tag(result.name, result.version, "node_rows_version")  # as a version of 0.7.9
    said = json.loads(CliRunner().invoke(app, [*detector, "--format", "json"]).stdout)
    assert said["learnt_from_other_counts"] == said["batched_otherwise"] == ["peak_mem_mb"]
    assert said["counted_otherwise"] == {} and said["node_rows_version"] == {"peak_mem_mb": None}
    largest = json.loads(CliRunner().invoke(app, [*detector[:-2], "--largest-batch", "--format", "json"]).stdout)
    assert largest["batched_otherwise"] is True and largest["node_rows_version"] is None
    assert "; learnt from features counted before tracker 0.8.0, where this tracker's" in CliRunner().invoke(
        app, ["--tracking-uri", uri, "fingerprint", "list"]).stdout
    assert (f"note: peak_mem_mb: {result.name}/{result.version} learnt from features counted before tracker 0.8.0, "
            "which took every tensor's first dimension for its batch") in CliRunner().invoke(app, detector).stdout
    assert json.loads(CliRunner().invoke(app, [*base, "-b", "4", "--format", "json"]).stdout)["learnt_from_other_counts"] == []
    # A version of tracker 0.7.8 recorded only that it keeps a floor: the largest activation's
    client.delete_model_version_tag(result.name, result.version, "memory_floor_columns")
    first = json.loads(CliRunner().invoke(app, [*base, "-b", "65536", "--format", "json"]).stdout)
    legacy = _inference_floor_mb(resnet, 65536, "largest_activation_bytes")
    assert first["memory_floor_mb"]["peak_mem_mb"] == pytest.approx(legacy, rel=1e-9) and legacy < floor / 2
    assert first["memory_floor_columns"] == {"peak_mem_mb": ["weight_bytes", "batch_largest_activation_bytes"]}
    assert "(its weights and its largest activation)" in CliRunner().invoke(app, [*base, "-b", "65536"]).stdout
    # One run measured below its floor: the description says more than the device held, no floor
    below = network_record("resnet18", 8, peak_mem_mb=1.0)
    below.params.update(model_hash=resnet.description_hash, device="cuda", mode="cuda-default", input_size=64)
    below.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(resnet.to_json())
    logger = RunLogger(str(runs), experiment="gpu", environment=env)
    logger.log([below])
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    trained = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "peak_mem_mb",
                                       "--device", "cuda", "--warehouse", str(wh), "--no-plots"])
    assert trained.exit_code == 0 and "\nmemory floor: none, 1 run measured below it\n" in trained.stdout, trained.output
    second = client.get_model_version(result.name, "2")
    assert second.tags["memory_floor"] == "false (1 run measured below it)"
    client.set_registered_model_alias(second.name, CHAMPION, second.version)
    unfloored = json.loads(CliRunner().invoke(app, [*base, "-b", "65536", "--format", "json"]).stdout)
    assert unfloored["memory_floor_mb"] == {} and unfloored["at_memory_floor"] == []
    assert unfloored["predictions"]["peak_mem_mb"] < floor


def test_the_largest_batch_under_a_limit_doubles_then_bisects() -> None:
    from tracker.fingerprint.predict import largest_under

    asked: list[list[int]] = []

    def peak_mb(sizes: list[int]) -> list[float]:  # 100 MB and 10 MB per image
        asked.append(list(sizes))
        return [100.0 + 10.0 * s for s in sizes]

    assert largest_under(peak_mb, 1000.0, 1024) == 90 and asked[0] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert all(len(a) == 1 for a in asked[1:]) and len(asked) <= 1 + 7  # bisecting 64..128
    assert largest_under(peak_mb, 105.0, 1024) == 0  # batch 1 is over already
    assert largest_under(peak_mb, 1e9, 1024) is None  # nothing up to 1024 is over
    assert largest_under(peak_mb, 110.0, 1) is None  # batch 1, the only size tried, is under
    assert largest_under(peak_mb, 119.0, 3) == 1  # batch 2 is over


def test_a_train_stopped_part_way_leaves_no_version_half_made(mlflow_server: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real tracking server: a Ctrl-C between a fingerprint's run and its comparison with the
    champion (raised here just after the version is registered, then while it is compared)
    withdraws the version that run registered. The registry holds only versions that were
    compared, the champion keeps the alias, and the run ends KILLED. Before, such a version
    stayed, never compared, perhaps without the tags tracker predict reads. And `--format json`
    prints JSON alone: MLflow writes a server's run links to stdout."""
    import tracker.fingerprint.train as fingerprint_train

    wh = tmp_path / "w.duckdb"
    records = []
    for name in GPU_NETWORKS[:3]:  # the fewest a fingerprint learns from: each of its three trains evaluates them
        desc = described(name, 64)
        for bs in (1, 2, 4):
            r = network_record(name, bs, latency_ms=_latency(_flops(desc), bs))
            r.params.update(model_hash=desc.description_hash, device="jetson-test")  # its own device: its own name
            if bs == 1:
                r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
            records.append(r)
    RunLogger(mlflow_server, experiment="fp-stopped", environment=ENV).log(records)
    load(wh, open_source(resolve_location(mlflow_server)))
    client = MlflowClient(mlflow_server)
    name = "latency_ms-inference-jetson-test"

    def statuses() -> list[str]:
        experiment = client.get_experiment_by_name("fingerprints")
        return sorted(r.info.status for r in client.search_runs([experiment.experiment_id],
                                                                  "tags.`fingerprint.device` = 'jetson-test'"))

    def fingerprint_train_json() -> dict:
        out = CliRunner().invoke(app, ["--tracking-uri", mlflow_server, "fingerprint", "train", "--target", "latency_ms",
                                       "--device", "jetson-test", "--warehouse", str(wh), "--format", "json", "--no-plots"])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    logged = fingerprint_train._log_served_model

    def registered_then_ctrl_c(*args: object, **kwargs: object) -> object:
        logged(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(fingerprint_train, "_log_served_model", registered_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train(wh, "latency_ms", "inference", "jetson-test", mlflow_server, plots=False)
    assert client.search_registered_models(f"name = '{name}'") == [] and statuses() == ["KILLED"]  # its empty model too

    monkeypatch.undo()
    first = fingerprint_train_json()
    assert first["name"] == name and first["champion"] and first["champion_reason"] == "first version"
    # its held-out metrics are its logged model's too (MLflow's Models page shows them)
    run = client.get_run(client.get_model_version(name, first["version"]).run_id)
    model_metrics = client.get_logged_model(run.outputs.model_outputs[0].model_id).metrics
    assert {"heldout_mape_pct", "baseline_extratrees_mape_pct"} <= {m.key for m in model_metrics}

    def compared_then_ctrl_c(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(fingerprint_train, "_maybe_promote", compared_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train(wh, "latency_ms", "inference", "jetson-test", mlflow_server, plots=False)
    assert [str(v.version) for v in client.search_model_versions(f"name = '{name}'")] == [first["version"]]
    assert str(client.get_model_version_by_alias(name, CHAMPION).version) == first["version"]
    assert statuses() == ["FINISHED", "KILLED", "KILLED"]


#: ``tracker ARGS...`` in a process that takes Ctrl-C as a terminal gives it (CI starts the suite with
#: SIGINT ignored), sent to itself by a real SIGINT just after train's step AT (a function of
#: tracker.fingerprint.train) has run.
CTRL_C_AFTER = """\
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import tracker.fingerprint.train as fingerprint_train
step = getattr(fingerprint_train, sys.argv[1])
def then_ctrl_c(*args, **kwargs):
    out = step(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)
    return out
setattr(fingerprint_train, sys.argv[1], then_ctrl_c)
from tracker.cli import main
sys.argv = ["tracker", *sys.argv[2:]]
main()
"""


def test_a_train_stopped_by_ctrl_c_says_nothing_is_registered(tmp_path: Path) -> None:
    """`fingerprint train` stopped by Ctrl-C registers nothing: stopped before its run (here once it has
    read its rows, before it evaluates: after its evaluation until 0.9.16, an evaluation more of the
    test's time), there is no run; stopped once its version is registered, the version is withdrawn and
    its run ends KILLED. Each says so, status 130: main's "what was logged before is kept" until 0.9.11."""
    runs, wh = _measure(tmp_path, ("squeezenet1_0", "squeezenet1_1", "resnet18"), "stopped", {"resnet18": (1, 2)})
    uri = resolve_location(str(runs)).uri
    client = MlflowClient(uri)
    args = ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms", "--warehouse", str(wh),
            "--no-plots"]

    def fingerprint_runs() -> list[Any]:
        experiment = client.get_experiment_by_name("fingerprints")
        return [] if experiment is None else client.search_runs([experiment.experiment_id])

    before = subprocess.run([sys.executable, "-c", CTRL_C_AFTER, "training_rows", *args], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600)
    assert (before.returncode, before.stdout, before.stderr.strip().splitlines()[-1:]) == (
        130, "", ["interrupted: nothing is registered, and no fingerprint run is logged"]), before.stderr[-2000:]
    assert fingerprint_runs() == [] and client.search_registered_models() == []

    registered = subprocess.run([sys.executable, "-c", CTRL_C_AFTER, "_log_served_model", *args], cwd=tmp_path,
                                capture_output=True, text=True, timeout=600)
    [run] = fingerprint_runs()
    assert run.info.status == "KILLED" and client.search_registered_models() == []  # withdrawn, its empty model too
    assert (registered.returncode, registered.stdout, registered.stderr.strip().splitlines()[-1:]) == (
        130, "", [f"interrupted: nothing is registered; its run {run.info.run_id[:12]} (experiment fingerprints) is "
                  "logged KILLED"]), registered.stderr[-2000:]

LAYERED = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1", "shufflenet_v2_x0_5", "mnasnet0_5",
           "regnet_x_400mf", "googlenet")


def _layer_ms(row: dict, bs: int) -> float:
    """A device where a module call costs a launch plus a rate per FLOP and per output byte."""
    return 0.003 + 3.0e-9 * float(row["flops"] or 0) * bs + 2.0e-8 * float(row["activation_out_bytes"] or 0) * bs


def test_layer_level_fingerprint_sums_layers_and_serves_predict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from tracker.describe.features import node_rows

    scratch = tmp_path / "tmp"  # the temporary folder: training and predicting leave nothing in it
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-layers", environment=ENV)
    for name in LAYERED:
        desc = described(name, 64)
        model_hash = desc.description_hash
        modules = [r for r in node_rows(desc) if r["op"] == "call_module"]
        for bs in (1, 4):
            net = network_record(name, bs)
            net.params["model_hash"] = model_hash
            if bs == 1:
                net.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
            layers = []
            for i, row in enumerate(modules):
                layer = layer_record(net, i, model=name)
                layer.params.update(model_hash=model_hash, layer_name=row["target"], op_type=row["kind"],
                                    batch_size=bs)
                layer.metrics["latency_ms"] = _layer_ms(row, bs)
                layer.key_fields = {"model": name, "bs": bs, "layer": i}
                layers.append(layer)
            net.metrics["latency_ms"] = 1.25 * sum(l.metrics["latency_ms"] for l in layers)
            logger.log([net, *layers])
    load(wh, open_source(resolve_location(str(runs))))
    uri = resolve_location(str(runs)).uri

    # Version 1 never sees two networks; version 2 is compared with it on exactly those, and
    # version 1 predicts them as `tracker predict` would: through its own layer-level model.
    unseen = ("googlenet", "regnet_x_400mf")
    first = train(wh, "latency_ms", "inference", "cpu", uri, exclude=unseen, plots=False)
    assert first.champion and first.method != "network"
    result = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    assert f"version {first.version} ({first.method}-level)" in result.champion_reason
    assert "on 2 " in result.champion_reason
    ev = result.evaluation
    assert ev["layer_networks"] == len(LAYERED)
    compared = {"network": ev["network_level_mape_on_layer_networks_pct"], "layer": ev["layer_level_mape_pct"],
                "blend": ev["blend_mape_pct"]}
    assert result.method == min(compared, key=compared.get)
    # the layer level held out by family too, as the network level's family_split_mape_pct
    assert ev["layer_level_family_split_mape_pct"] > 0 and 0 <= ev["layer_level_within_10pct"] <= 100
    assert 0 <= ev["layer_level_family_split_within_10pct"] <= 100
    # Latency here is exactly a sum over layers: summing predicted layers must not lose to the network model.
    assert result.method != "network" and ev["mape_pct"] == pytest.approx(compared[result.method], rel=1e-6)
    version = MlflowClient(uri).get_model_version(result.name, result.version)
    assert version.tags["method"] == result.method
    # The layer views it learnt from are hashed beside the network views, which keep their hash.
    assert version.tags["layer_view_sha256"] == view_hash("layer_features", "layer_labels", "layer_labels_of",
                                                          "latest_layer_measurements") != version.tags["view_sha256"]
    assert version.tags["view_sha256"] == view_hash()
    # Through MLflow it answers as tracker predict does when a row carries its module calls (tracker
    # predict --features prints them), and with its network-level model when not; its description says so.
    assert f"a row answers with the {result.method} prediction when it carries the network's module calls" in \
        version.description
    import mlflow
    import pandas as pd

    from tracker.fingerprint.predict import load_champion, predict

    mine = {"latency_ms": load_champion(uri, result.name, version)}
    ours = predict(uri, "resnet34", 2, "inference", "cpu", input_size=64, models=mine, with_features=True)
    mlflow.set_tracking_uri(uri)
    served = mlflow.pyfunc.load_model(f"models:/{result.name}/{result.version}")
    row = pd.DataFrame([ours["features"]])
    assert served.predict(row)[0] == pytest.approx(ours["predictions"]["latency_ms"], rel=1e-12)
    network_level = served.predict(row.drop(columns="layers"))[0]
    assert network_level != pytest.approx(ours["predictions"]["latency_ms"], rel=1e-3)
    with pytest.raises(FingerprintError, match="module calls in layers lack out_h"):
        served.predict(row.assign(layers=[[{k: v for k, v in c.items() if k != "out_h"}
                                           for c in ours["features"]["layers"]]]))
    # Where tracker is not installed, the runtime logged with the version answers, layers and all.
    (tmp_path / "row.json").write_text(json.dumps(ours["features"]))
    alone = subprocess.run(
        [sys.executable, "-c", "import json, sys, mlflow, pandas as pd\n"
         "m = mlflow.pyfunc.load_model(sys.argv[1])\n"
         "row = pd.DataFrame([json.load(open(sys.argv[2]))])\n"
         "print(json.dumps([type(m.unwrap_python_model()).__module__, *map(float, m.predict(row)),"
         " *map(float, m.predict(row.drop(columns='layers')))]))",
         f"models:/{result.name}/{result.version}", str(tmp_path / "row.json")],
        env={**_without_tracker(tmp_path / "no-tracker"), "MLFLOW_TRACKING_URI": uri},
        capture_output=True, text=True, timeout=300)
    assert alone.returncode == 0, alone.stderr[-2000:]
    module, with_layers, without = json.loads(alone.stdout.splitlines()[-1])
    assert module == "tracker_fingerprint_runtime"
    assert with_layers == pytest.approx(ours["predictions"]["latency_ms"], rel=1e-12)
    assert without == pytest.approx(network_level, rel=1e-12)

    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet34", "--batch-size", "2",
                                   "--input-size", "64", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    champion = result if result.champion else first
    assert data["methods"]["latency_ms"] == champion.method
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list"]).stdout.splitlines()
    line = next(row for row in listed if "champion" in row)
    assert f" v{champion.version} " in line and f" {champion.method} " in line
    assert re.search(r"MAPE \d+\.\d %, \d+\.\d % within ±10 %", line), line
    assert data["model_versions"]["latency_ms"] == f"{result.name}/{champion.version}"
    desc = described("resnet34", 64)
    truth = 1.25 * sum(_layer_ms(r, 2) for r in node_rows(desc) if r["op"] == "call_module")
    assert data["predictions"]["latency_ms"] == pytest.approx(truth, rel=0.35)
    # No copies of downloaded artifacts left behind (torch's compiler cache, torchinductor_<user>, is torch's own).
    assert sorted(p.name for p in scratch.iterdir() if not p.name.startswith("torchinductor_")) == []


def test_labels_are_the_median_of_a_configurations_repeats(tmp_path: Path) -> None:
    """Three measurements of one configuration (a campaign with repeats = 3): one training row, the
    latest run's, labelled with the median of the three; a configuration measured once keeps its value."""
    from tracker.fingerprint.dataset import load_rows

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-labels", environment=ENV)
    desc = described("squeezenet1_1", 64)
    repeats = []
    for k, (latency, memory) in enumerate([(4.0, 110.0), (3.0, 130.0), (9.0, 100.0)]):  # the newest is not the median
        r = network_record("squeezenet1_1", 2, peak_mem_mb=memory)
        r.metrics["latency_ms"] = latency
        r.params["model_hash"] = desc.description_hash
        r.tags["tracker.repeat_key"] = f"r{k}"
        if k == 0:
            r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
        logger.log([r])
        repeats.append(r)
    once = network_record("squeezenet1_1", 4, peak_mem_mb=150.0)
    once.params["model_hash"] = desc.description_hash
    once.metrics["latency_ms"] = 7.0
    logger.log([once])
    load(wh, open_source(resolve_location(str(runs))))

    rows = load_rows(wh, "latency_ms", "inference", "cpu").set_index("batch_size")
    assert (rows.loc[2, "run_id"], rows.loc[2, "latency_ms"], rows.loc[2, "label_repeats"]) == (repeats[-1].run_id, 4.0, 3)
    assert (rows.loc[4, "latency_ms"], rows.loc[4, "label_repeats"]) == (7.0, 1)
    assert load_rows(wh, "peak_mem_mb", "inference", "cpu").set_index("batch_size").loc[2, "peak_mem_mb"] == 110.0


def test_labels_leave_out_a_disturbed_repeat_where_the_configuration_has_a_precise_one(tmp_path: Path) -> None:
    """A repeat whose 95 % CI is wider than IMPRECISE_CI_REL (a campaign's first try, measured again at
    twice the cap) is left out of the labels of a configuration measured within it, newest or not: the
    label is the median of the precise ones, its CI and runs theirs, and it is learnt from. A configuration
    with no precise measurement keeps them all, and its CI leaves it out of training, as before. The SQL's
    figure is the Python constant's: a CI of exactly IMPRECISE_CI_REL is precise in both, 4 % over it in neither."""
    from tracker.fingerprint.dataset import load_rows
    from tracker.fingerprint.train import training_rows
    from tracker.profile.stats import IMPRECISE_CI_REL

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-again", environment=ENV)
    desc = described("squeezenet1_1", 64)
    ids: dict[int, list[str]] = {2: [], 4: []}
    # batch 2: a disturbed first try, its again at twice the cap, and a later disturbed repeat (the newest);
    # batch 4: disturbed twice
    edge, over = IMPRECISE_CI_REL, IMPRECISE_CI_REL * 1.04
    for k, (bs, latency, ci, memory) in enumerate([(2, 9.0, 0.90, 100.0), (2, 4.0, edge, 120.0), (2, 30.0, over, 90.0),
                                                   (4, 7.0, 0.95, 150.0), (4, 8.0, over, 160.0)]):
        r = network_record("squeezenet1_1", bs, peak_mem_mb=memory, latency_ci_rel=ci)
        r.metrics["latency_ms"] = latency
        r.params["model_hash"] = desc.description_hash
        r.tags["tracker.repeat_key"] = f"r{k}"
        r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
        logger.log([r])
        ids[bs].append(r.run_id)
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))

    for named in ((), ("fp-again",)):
        rows = load_rows(wh, "latency_ms", "inference", "cpu", experiments=named).set_index("batch_size")
        two, four = rows.loc[2], rows.loc[4]
        assert two["run_id"] == ids[2][-1]  # keyed by the latest run, as every configuration is
        assert (two["latency_ms"], two["label_repeats"], two["latency_ci_rel"]) == (4.0, 1, edge), named
        assert (four["latency_ms"], four["label_repeats"], four["latency_ci_rel"]) == (7.5, 2, over), named
        if named:
            assert list(two["label_run_ids"]) == [ids[2][1]] and sorted(four["label_run_ids"]) == sorted(ids[4])
    memory = load_rows(wh, "peak_mem_mb", "inference", "cpu").set_index("batch_size")
    assert (memory.loc[2, "peak_mem_mb"], memory.loc[4, "peak_mem_mb"]) == (120.0, 155.0)
    with pytest.raises(FingerprintError, match=r"has 1 usable \(squeezenet1_1\); 1 of its 2 measurements left out, "
                                               rf"their 95 % CI wider than {100 * IMPRECISE_CI_REL:g} %"):
        training_rows(wh, "latency_ms", "inference", "cpu")


def test_two_names_of_one_architecture_are_one_network(tmp_path: Path) -> None:
    """Three names but two architectures: folds hold out architectures, so too few to train on."""
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-names", environment=ENV)
    for name, arch in (("resnet18", "resnet18"), ("my-resnet18", "resnet18"), ("mobilenet_v2", "mobilenet_v2")):
        desc = described(arch, 64)
        for bs in (1, 2):
            r = network_record(name, bs)
            r.params["model_hash"] = desc.description_hash
            r.metrics["latency_ms"] = 1.0 + bs
            if bs == 1:
                r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
            logger.log([r])
    load(wh, open_source(resolve_location(str(runs))))
    with pytest.raises(FingerprintError, match=r"at least 3 networks.* has 2 usable \(mobilenet_v2, my-resnet18, resnet18\)"):
        train(wh, "latency_ms", "inference", "cpu", resolve_location(str(runs)).uri, plots=False)


def test_layer_labels_are_the_median_of_a_configurations_repeats(tmp_path: Path) -> None:
    """Three measurements of one configuration with its layers, and a fourth without: the
    layer-level fingerprint learns the layers of the latest run that ran them, each labelled with
    its median over the three that ran layers, as the network label is the median over all four."""
    from tracker.describe.features import node_rows
    from tracker.fingerprint.dataset import load_rows
    from tracker.fingerprint.layers import load_layer_rows

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-layer-labels", environment=ENV)
    desc = described("squeezenet1_1", 64)
    modules = [r for r in node_rows(desc) if r["op"] == "call_module"][:3]
    newest: list = []
    for k, scale in enumerate([2.0, 1.0, 5.0, None]):  # rounds with layers (the newest is not the median), then none
        net = network_record("squeezenet1_1", 2)
        net.params["model_hash"] = desc.description_hash
        net.metrics["latency_ms"] = 10.0 + k
        net.tags["tracker.repeat_key"] = f"r{k}"
        if k == 0:
            net.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
        layers = []
        for i, row in enumerate(modules if scale is not None else []):
            layer = layer_record(net, i, model="squeezenet1_1")
            layer.params.update(model_hash=desc.description_hash, layer_name=row["target"], op_type=row["kind"],
                                batch_size=2)
            layer.metrics["latency_ms"] = scale * (i + 1)
            layer.key_fields = {"model": "squeezenet1_1", "round": k, "layer": i}
            layers.append(layer)
        logger.log([net, *layers])
        newest = layers or newest
    load(wh, open_source(resolve_location(str(runs))))

    (latest,) = load_rows(wh, "latency_ms", "inference", "cpu")["run_id"]
    rows = load_layer_rows(wh, "inference", "cpu").sort_values("layer_index")
    # The fourth round measured no layers: those of the third stand for the configuration, under the
    # run that measured them (until 0.9.11 the view had none: keyed by the latest run, the fourth)
    assert list(rows["run_id"]) == [layer.run_id for layer in newest]
    assert set(rows["parent_run_id"]) == {newest[0].parent_id} != {latest} == set(rows["config_run_id"])
    assert list(rows["label_repeats"]) == [3, 3, 3]
    assert list(rows["latency_ms"]) == [2.0 * (i + 1) for i in range(3)]  # median of 2, 1, 5 (x (i + 1))
    # the whole network beside them, over the same three rounds (10, 11, 12 ms), not the four
    assert list(rows["network_latency_ms"]) == [11.0] * 3
    net_rows = load_rows(wh, "latency_ms", "inference", "cpu")
    assert (net_rows.loc[0, "latency_ms"], net_rows.loc[0, "label_repeats"]) == (11.5, 4)

    # Re-log the newest round with layers as the latest measurement: its layers are labelled
    # with the median over the three rounds that ran them (2 x (i + 1)), not their own 5 x (i + 1).
    net = network_record("squeezenet1_1", 2)
    net.params["model_hash"] = desc.description_hash
    net.metrics["latency_ms"] = 20.0
    net.tags["tracker.repeat_key"] = "r4"
    layers = []
    for i, row in enumerate(modules):
        layer = layer_record(net, i, model="squeezenet1_1")
        layer.params.update(model_hash=desc.description_hash, layer_name=row["target"], op_type=row["kind"], batch_size=2)
        layer.metrics["latency_ms"] = 7.0 * (i + 1)
        layer.key_fields = {"model": "squeezenet1_1", "round": 4, "layer": i}
        layers.append(layer)
    logger.log([net, *layers])
    load(wh, open_source(resolve_location(str(runs))))
    rows = load_layer_rows(wh, "inference", "cpu").sort_values("layer_index")
    assert list(rows["run_id"]) == [layer.run_id for layer in layers]
    assert list(rows["label_repeats"]) == [4, 4, 4]
    assert list(rows["latency_ms"]) == [3.5 * (i + 1) for i in range(3)]  # median of 1, 2, 5, 7 (x (i + 1))


#: The networks of ``_layered_experiment`` (k = 1, 2, 3).
LAYERED_THREE = ("squeezenet1_1", "resnet18", "mobilenet_v3_small")


def _layered_experiment(runs: Path, wh: Path, experiment: str, scale: float,
                        probe_ms: float | None = None) -> dict[str, tuple[str, list[str]]]:
    """Three networks at batch 2 measured in ``experiment`` with three module layers each, layer i taking
    ``scale * (i + 1) * k`` ms (k the network's number) and the whole network 1.5 times their sum, then loaded;
    per network, its run id and its layer runs' ids. ``probe_ms``: every run timed the speed probe at that."""
    from tracker.describe.features import node_rows

    logger = RunLogger(str(runs), experiment=experiment, environment=ENV)
    logged = {}
    for k, name in enumerate(LAYERED_THREE, start=1):
        desc = described(name, 64)
        modules = [r for r in node_rows(desc) if r["op"] == "call_module"][:3]
        net = network_record(name, 2)
        if probe_ms is not None:
            timed_probe(net, probe_ms)
        net.params["model_hash"] = desc.description_hash
        net.metrics["latency_ms"] = 1.5 * sum(scale * (i + 1) * k for i in range(3))
        net.tags["tracker.repeat_key"] = experiment
        net.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
        layers = []
        for i, row in enumerate(modules):
            layer = layer_record(net, i, model=name)
            layer.params.update(model_hash=desc.description_hash, layer_name=row["target"], op_type=row["kind"],
                                batch_size=2)
            layer.metrics.update(latency_ms=scale * (i + 1) * k)
            if probe_ms is not None:
                timed_probe(layer, probe_ms)
            layer.key_fields = {"model": name, "experiment": experiment, "layer": i}
            layers.append(layer)
        logger.log([net, *layers])
        logged[name] = (net.run_id, [layer.run_id for layer in layers])
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    return logged


def _whole_only(runs: Path, wh: Path, experiment: str, times: float, probe_ms: float | None = None) -> dict[str, str]:
    """The networks of ``_layered_experiment`` measured whole only in ``experiment`` (same configurations, no
    layer runs), each ``times`` as slow as there at scale 1 (9 k ms), then loaded; per network, its run id."""
    logger = RunLogger(str(runs), experiment=experiment, environment=ENV)
    logged = {}
    for k, name in enumerate(LAYERED_THREE, start=1):
        net = network_record(name, 2)
        if probe_ms is not None:
            timed_probe(net, probe_ms)
        net.params["model_hash"] = described(name, 64).description_hash
        net.metrics["latency_ms"] = times * 9.0 * k
        net.tags["tracker.repeat_key"] = f"{experiment}-whole"
        logger.log([net])
        logged[name] = net.run_id
    logger.close()
    load(wh, open_source(resolve_location(str(runs))))
    return logged


def test_a_configuration_measured_again_whole_only_keeps_its_layers(tmp_path: Path) -> None:
    """`profile layers X`, then X measured again whole only, later (`profile network X` in another experiment,
    a campaign's repeat without layers): its layer runs dropped out of layer_features and layer_labels, both
    keyed by the configuration's latest measurement, and the layer level learnt nothing of X, until 0.9.11.
    They stay with the measurement that ran them (parent_run_id), beside the configuration's latest
    (config_run_id, its network row); --from-experiment still takes the named experiments' runs alone."""
    import numpy as np

    from tracker.fingerprint.layers import out_of_fold, training_layer_rows
    from tracker.fingerprint.train import training_rows

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    one = _layered_experiment(runs, wh, "one", 1.0)
    two = _whole_only(runs, wh, "two", 4.0)
    with duckdb.connect(str(wh), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM latest_measurements WHERE experiment = 'two'").fetchall() == [(3,)]
        features = set(con.sql("SELECT run_id, parent_run_id, config_run_id FROM layer_features").fetchall())
        labels = {r[0]: r[1:] for r in con.sql(
            "SELECT run_id, repeats, latency_ms, network_latency_ms FROM layer_labels").fetchall()}
    assert features == {(rid, net, two[name]) for name, (net, ids) in one.items() for rid in ids}
    assert labels == {rid: (1, (i + 1) * k, 9.0 * k)  # the whole network measured with them: one's, not two's
                      for k, name in enumerate(LAYERED_THREE, start=1) for i, rid in enumerate(one[name][1])}

    for experiments in ((), ("one",), ("one", "two")):
        frame = training_rows(wh, "latency_ms", "inference", "cpu", experiments=experiments)
        rows = training_layer_rows(wh, frame, "inference", "cpu")
        assert set(rows["run_id"]) == {rid for _, ids in one.values() for rid in ids}, experiments
        assert set(rows["config_run_id"]) == set(frame["run_id"]) == set(two.values())
        # each network held out as train holds them out has its sum of layers predicted
        held_out = out_of_fold(rows, frame, frame["model_hash"].to_numpy())
        assert not np.isnan(held_out).any() and (held_out > 0).all(), experiments
    # two measured no layers: learning from it alone, the layer level has none (not one's)
    frame = training_rows(wh, "latency_ms", "inference", "cpu", experiments=("two",))
    assert training_layer_rows(wh, frame, "inference", "cpu").empty

    # measured with layers again, later (three times as slow): its layers stand for the configuration,
    # labelled with the median over both measurements that ran them
    three = _layered_experiment(runs, wh, "three", 3.0)
    with duckdb.connect(str(wh), read_only=True) as con:
        features = set(con.sql("SELECT run_id, parent_run_id, config_run_id FROM layer_features").fetchall())
        labels = {r[0]: r[1:] for r in con.sql("SELECT run_id, repeats, latency_ms FROM layer_labels").fetchall()}
    assert features == {(rid, net, net) for net, ids in three.values() for rid in ids}
    assert labels == {rid: (2, 2.0 * (i + 1) * k)
                      for k, name in enumerate(LAYERED_THREE, start=1) for i, rid in enumerate(three[name][1])}


def test_the_calibration_pairs_the_layers_with_the_whole_network_measured_with_them(tmp_path: Path) -> None:
    """The calibration paired the sum of a configuration's layer labels (medians over its measurements that
    ran layers) with its network label (the median over all its measurements, those measured whole only
    too), until 0.9.11: here 4.5 times the sum as measured, 2.625 at the reference speed, where each whole
    network measured with its layers took 1.5 times their sum. It pairs them with the whole network of the
    same measurements now, in the same unit, and a later measurement whole only changes nothing."""
    from tracker.fingerprint.layers import calibration, fit, training_layer_rows
    from tracker.fingerprint.train import training_rows

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    _whole_only(runs, wh, "whole", 5.0, probe_ms=4.0)  # first whole only, five times as slow (probe 4 ms)
    one = _layered_experiment(runs, wh, "one", 1.0, probe_ms=2.0)  # then with layers, the whole 1.5 times their sum

    def calibrated(*experiments: str, as_measured: bool = False) -> dict[str, float]:
        """The calibration as fingerprint train fits it, on the layer rows it reads beside its network rows."""
        frame = training_rows(wh, "latency_ms", "inference", "cpu", experiments=experiments, as_measured=as_measured)
        assert (frame.attrs.get("speed_reference_ms") is None) == as_measured  # every run timed the probe
        rows = training_layer_rows(wh, frame, "inference", "cpu")
        assert len(rows) == 9
        # beside each layer, the whole network of the measurements its label is the median of, in its unit
        sums = rows.groupby("parent_run_id")["latency_ms"].sum()
        whole = rows.groupby("parent_run_id")["network_latency_ms"].agg(["min", "max"])
        assert set(sums.index) == {net for net, _ in one.values()}
        assert (whole["min"] == whole["max"]).all() and list(whole["min"] / sums) == pytest.approx([1.5] * 3)
        return {k: v for k, v in fit(rows).calibration().items() if k != "work"}

    def as_until_0_9_11(*experiments: str, as_measured: bool = False) -> float:
        """The factor of the pairing before: each sum of layers against its configuration's network label."""
        frame = training_rows(wh, "latency_ms", "inference", "cpu", experiments=experiments, as_measured=as_measured)
        rows = training_layer_rows(wh, frame, "inference", "cpu")
        label = dict(zip(frame["run_id"], frame["latency_ms"]))
        return calibration(rows, {p: label[c] for p, c in zip(rows["parent_run_id"], rows["config_run_id"])})[0]

    assert as_until_0_9_11(as_measured=True) == pytest.approx(4.5) and as_until_0_9_11() == pytest.approx(2.625)
    expected = {"factor": pytest.approx(1.5), "per_call_ms": 0.0, "per_out_mb_ms": 0.0}
    for experiments in ((), ("one",), ("one", "whole")):
        assert calibrated(*experiments, as_measured=True) == expected, experiments
        # at the reference speed (3 ms, the labels' probes' median): the layers' and the whole network's
        # latency over their probes, both times it
        assert calibrated(*experiments) == expected, experiments
    # measured again whole only, later, ten times as slow: the layers keep their own whole network
    _whole_only(runs, wh, "two", 10.0, probe_ms=2.0)
    for experiments in ((), ("one", "two")):
        assert calibrated(*experiments, as_measured=True) == calibrated(*experiments) == expected, experiments


def test_the_layer_level_learns_the_named_experiments_layers_alone(tmp_path: Path) -> None:
    """--from-experiment took the network labels from the experiments named (0.9.1), but each layer's label
    was its median over every experiment's layer runs, and the calibration paired the named experiments'
    network latency with that sum, until 0.9.10. The layer labels are now the table macro layer_labels_of
    over the experiments the network labels were taken over, which the view layer_labels reads over all."""
    import pandas as pd

    from tracker.fingerprint.layers import calibration, load_layer_rows, training_layer_rows
    from tracker.fingerprint.train import learnt_runs, training_rows

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    one = _layered_experiment(runs, wh, "one", 1.0)

    def layer_rows(*experiments: str) -> pd.DataFrame:
        frame = training_rows(wh, "latency_ms", "inference", "cpu", experiments=experiments)
        return training_layer_rows(wh, frame, "inference", "cpu").set_index("run_id").sort_index()

    def factor(*experiments: str) -> float:  # the calibration, as train fits it: frame's latency against the sums
        frame = training_rows(wh, "latency_ms", "inference", "cpu", experiments=experiments)
        rows = training_layer_rows(wh, frame, "inference", "cpu")
        return calibration(rows, dict(zip(frame["run_id"], frame["latency_ms"])))[0]

    # one experiment holding everything: the same rows with it named as without
    every, named = layer_rows(), layer_rows("one")
    assert len(every) == 9 and set(every.index) == {rid for _, ids in one.values() for rid in ids}
    pd.testing.assert_frame_equal(named.drop(columns=["label_experiments", "label_run_ids"]), every, check_exact=True)
    assert all(list(ids) == [rid] for rid, ids in named["label_run_ids"].items())
    assert factor() == factor("one") == pytest.approx(1.5)

    # every network measured again, later, in another experiment, its layers and itself three times as slow
    two = _layered_experiment(runs, wh, "two", 3.0)
    every, named_one, named_two = layer_rows(), layer_rows("one"), layer_rows("two")
    latest_layers = {rid for _, ids in two.values() for rid in ids}  # keyed by the latest measurement's layers
    assert set(every.index) == set(named_one.index) == set(named_two.index) == latest_layers
    for name, k in (("squeezenet1_1", 1), ("resnet18", 2), ("mobilenet_v3_small", 3)):
        for i, rid in enumerate(two[name][1]):
            assert (every.loc[rid, "latency_ms"], every.loc[rid, "label_repeats"]) == (2.0 * (i + 1) * k, 2)
            assert (named_one.loc[rid, "latency_ms"], named_one.loc[rid, "label_repeats"]) == (1.0 * (i + 1) * k, 1)
            assert (named_two.loc[rid, "latency_ms"], named_two.loc[rid, "label_repeats"]) == (3.0 * (i + 1) * k, 1)
            assert list(named_one.loc[rid, "label_run_ids"]) == [one[name][1][i]]
            assert list(named_two.loc[rid, "label_run_ids"]) == [rid]
    assert set(named_one["label_experiments"].map(tuple)) == {("one",)}
    assert set(named_two["label_experiments"].map(tuple)) == {("two",)}
    # the calibration pairs each network's latency with the sum of its layers in the same experiments
    # (one's network labels against both experiments' layers: 0.75, two's: 2.25, until 0.9.10)
    assert factor("one") == factor("two") == factor() == factor("one", "two") == pytest.approx(1.5)
    # what the version records it learnt from (runs.json): the measurements whose layers it learnt
    assert learnt_runs(training_rows(wh, "latency_ms", "inference", "cpu", experiments=["one"])) == sorted(
        net for net, _ in one.values())
    # the view is the macro over every experiment, its columns as they were; tracker sql calls the macro
    with duckdb.connect(str(wh), read_only=True) as con:
        assert [c[0] for c in con.sql("DESCRIBE layer_labels").fetchall()] == [  # the whole network's since 0.9.11
            "run_id", "repeats", "latency_ms", "latency_probe_ratio", "probed_repeats", "speed_probe_version",
            "network_latency_ms", "network_probe_ratio", "network_probed_repeats", "network_speed_probe_version"]
        assert con.sql("SELECT * FROM layer_labels ORDER BY run_id").fetchall() == con.sql(
            "SELECT * EXCLUDE (label_experiments, label_run_ids) FROM layer_labels_of(['two', 'one']) ORDER BY run_id"
        ).fetchall()
    # a warehouse loaded before the macro: one line saying to load it again
    with duckdb.connect(str(wh)) as con:
        con.execute("DROP MACRO TABLE layer_labels_of")
    with pytest.raises(FingerprintError, match=r"has no layer_labels_of, which learning from named experiments "
                                               r"reads .*: tracker warehouse load -w "):
        load_layer_rows(wh, "inference", "cpu", experiments=["one"])
    # its layer labels as tracker 0.9.10 made them, without the whole network's latency: one line too
    with duckdb.connect(str(wh)) as con:
        con.execute("CREATE OR REPLACE VIEW layer_labels AS SELECT run_id, 1 AS repeats, latency_ms, "
                    "NULL AS latency_probe_ratio, 0 AS probed_repeats FROM layer_runs")
    with pytest.raises(FingerprintError, match=r"has the layer labels of an older tracker, without network_latency_ms, "
                                               r".*: tracker warehouse load -w "):
        load_layer_rows(wh, "inference", "cpu")
    load(wh, open_source(resolve_location(str(runs))))  # which a load makes anew
    assert len(load_layer_rows(wh, "inference", "cpu", experiments=["one"])) == 9


def test_a_measured_configuration_is_predicted_like_a_new_one(tmp_path: Path) -> None:
    """The layer rows the champion comparison builds from the warehouse are the rows `tracker
    predict` builds from a fresh description: same module calls, same features."""
    from tracker.fingerprint.dataset import configuration_rows, load_rows, unmeasured_layer_rows
    from tracker.fingerprint.runtime import layer_matrix

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-rows", environment=ENV)
    desc = described("mobilenet_v3_small", 64)
    net = network_record("mobilenet_v3_small", 4)
    net.params.update(model_hash=desc.description_hash, input_size=64)
    net.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
    logger.log([net])
    load(wh, open_source(resolve_location(str(runs))))

    frame = load_rows(wh, "latency_ms", "inference", "cpu")
    from_warehouse = unmeasured_layer_rows(wh, frame, "inference", "cpu")
    _, fresh = configuration_rows([desc], [4], "inference", "cpu", with_layers=True)
    assert len(from_warehouse) == len(fresh) > 50
    assert set(from_warehouse["parent_run_id"]) == set(frame["run_id"])
    assert layer_matrix(from_warehouse).reset_index(drop=True).equals(layer_matrix(fresh).reset_index(drop=True))


def test_a_prediction_reads_its_layer_rows_beside_its_feature_rows_and_leaves_nothing_behind() -> None:
    """configuration_rows reads the feature rows and the layer rows on two connections of the
    scratch warehouse at once, each writing the rows it reads in a transaction of its own: the
    feature rows are those of a prediction without layers, every configuration has its network's
    module calls at its batch size, two threads predicting at once each get their own rows, and
    the scratch warehouse is empty after (for the next network), also after a call that fails."""
    import threading

    from tracker.describe.graph import Description
    from tracker.fingerprint import dataset

    descs = [described("mobilenet_v3_small", 64), described("squeezenet1_1", 64)]
    plain, none = dataset.configuration_rows(descs, [1, 4], "inference", "cpu")
    rows, layers = dataset.configuration_rows(descs, [1, 4], "inference", "cpu", with_layers=True)
    assert none is None and rows.equals(plain) and list(rows["model"]) == ["mobilenet_v3_small"] * 2 + ["squeezenet1_1"] * 2
    calls = layers.groupby("parent_run_id").agg(model=("model", "first"), calls=("layer_index", "size"),
                                                 batch=("batch_size", "first"))
    assert sorted(calls.index) == sorted(rows["run_id"])
    for row in rows.itertuples():
        assert calls.loc[row.run_id, "model"] == row.model and calls.loc[row.run_id, "batch"] == row.batch_size
    assert calls["calls"].min() > 20 and calls.groupby("model")["calls"].nunique().eq(1).all()

    got: dict[int, Any] = {}

    def one(i: int) -> None:
        got[i] = dataset.configuration_rows([descs[i % 2]], [i + 1], "inference", "cpu", with_layers=True)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (r, lay) in got.items():
        assert list(r["batch_size"]) == [i + 1] and list(r["model"]) == [descs[i % 2].name]
        assert set(lay["batch_size"]) == {i + 1} and len(lay) == calls.loc[calls["model"] == descs[i % 2].name, "calls"].iloc[0]

    # A network whose node rows the warehouse refuses (a stride past INTEGER's range), beside a new
    # good one: the database's own error, and nothing of either stays, nor any run (since 0.9.17 the
    # networks predicted before keep their description and node rows for the next prediction)
    held = set(dataset._SCRATCH_NETWORKS)
    assert {descs[0].description_hash, descs[1].description_hash} <= held
    broken = descs[1].to_json()
    conv = next(n for n in broken["nodes"] if n.get("kind") == "Conv2d")
    conv["attrs"]["stride"] = [3_000_000_000, 3_000_000_000]
    broken["description_hash"] = "broken"
    with pytest.raises(duckdb.ConversionException, match="stride_h"):
        dataset.configuration_rows([described("resnet18", 64), Description.from_json(broken)], [1], "inference", "cpu",
                                   with_layers=True)
    for con in (dataset._SCRATCH, dataset._SCRATCH_LAYERS):
        for table in ("network_runs", "layer_runs"):
            assert con.execute(f"SELECT count(*) FROM {table}").fetchall() == [(0,)], table
        for table in ("network_nodes", "network_descriptions"):
            assert {h for (h,) in con.execute(f"SELECT DISTINCT model_hash FROM {table}").fetchall()} == held, table
        assert con.execute("SELECT count(*) FROM network_descriptions").fetchall() == [(len(held),)]
    assert set(dataset._SCRATCH_NETWORKS) == held


def test_the_networks_a_prediction_holds_change_no_other_prediction(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scratch warehouse holds the description and node rows of the networks predicted last
    (since 0.9.17), at most SCRATCH_NETWORKS_KEPT beside those predicted now: a network's rows are
    those it gets alone, in an empty scratch warehouse, and rows written again where the bookkeeping
    lost them are not counted twice."""
    from tracker.fingerprint import dataset

    names = ["mobilenet_v3_small", "squeezenet1_1", "resnet18", "mnasnet0_5"]
    descs = [described(name, 64) for name in names]
    monkeypatch.setattr(dataset, "SCRATCH_NETWORKS_KEPT", 1)

    def empty() -> None:  # an empty scratch warehouse, and none held (as other tests left it, else)
        dataset.scratch_warehouse().execute("DELETE FROM network_nodes; DELETE FROM network_descriptions")
        dataset._SCRATCH_NETWORKS.clear()

    empty()
    try:
        _networks_held(dataset, names, descs)
    finally:
        empty()


def _networks_held(dataset: Any, names: list[str], descs: list[Any]) -> None:
    alone = [dataset.configuration_rows([d], [1, 4], "inference", "cpu", with_layers=True) for d in descs]
    assert list(dataset._SCRATCH_NETWORKS) == [d.description_hash for d in descs[2:]]  # the one kept, the latest
    together = dataset.configuration_rows(descs[:3], [1, 4], "inference", "cpu", with_layers=True)
    assert set(dataset._SCRATCH_NETWORKS) == {d.description_hash for d in descs}  # those predicted now, one more
    for i, (rows, layers) in enumerate(alone[:3]):
        mine = together[1]["model"] == names[i]
        assert together[0].iloc[2 * i:2 * i + 2].drop(columns="run_id").reset_index(drop=True).equals(
            rows.drop(columns="run_id"))
        assert together[1][mine].drop(columns=["run_id", "parent_run_id", "config_run_id"]).reset_index(drop=True).equals(
            layers.drop(columns=["run_id", "parent_run_id", "config_run_id"]))
    dataset._SCRATCH_NETWORKS.clear()  # as if a call stopped after its commit: its networks are written again
    again = dataset.configuration_rows(descs[:1], [1, 4], "inference", "cpu", with_layers=True)
    assert again[0].equals(alone[0][0]) and again[1].equals(alone[0][1])


def test_a_better_fingerprint_of_the_same_measurements_becomes_champion(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A champion that has seen every network (the same measurements trained again, by a newer
    tracker) is compared on both versions' held-out predictions of the same networks: a better
    recipe takes the alias, the same recipe does not. (It stayed champion for good before.)"""
    import tracker.fingerprint.train as fingerprint_train

    names = ("squeezenet1_1", "mobilenet_v3_small", "shufflenet_v2_x0_5", "mnasnet0_5", "resnet18")
    runs, wh = _measure(tmp_path, names)
    uri = resolve_location(str(runs)).uri
    with monkeypatch.context() as weak:  # an older, weaker recipe: two trees, no trend
        weak.setattr(fingerprint_train, "LGBM_PARAMS", {**fingerprint_train.LGBM_PARAMS, "n_estimators": 2})
        weak.setattr(fingerprint_train, "NETWORK_MODELS", {"lgbm": fingerprint_train.lgbm})
        first = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    assert first.champion and first.champion_reason == "first version"
    better = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    assert better.evaluation["mape_pct"] < first.evaluation["mape_pct"]
    assert better.champion, better.champion_reason
    assert better.champion_reason == (f"beats version {first.version} on the {len(names)} networks both held out (it "
                                      f"has seen every network): MAPE {better.evaluation['mape_pct']:.2f} % vs "
                                      f"{first.evaluation['mape_pct']:.2f} %")
    same = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    assert not same.champion and same.champion_reason.startswith(
        f"version {better.version} stays champion on the {len(names)} networks both held out")
    client = MlflowClient(uri)
    assert str(client.get_model_version_by_alias(better.name, CHAMPION).version) == better.version


def test_the_layer_calibration_has_a_cost_per_call_and_per_mb_and_falls_back_to_a_ratio() -> None:
    """Whole-network latency from isolated layers: a factor on their sum, a cost per module call
    and per MB the calls write, non-negative, fitted on the relative error; a version written
    before the two terms (format 2) reads as the factor alone; with too few configurations to fit
    three terms, the median ratio, as before."""
    import numpy as np
    import pandas as pd

    from tracker.fingerprint.layers import MIN_CALIBRATION_CONFIGS, calibration
    from tracker.fingerprint.runtime import LayerModel

    rng = np.random.default_rng(0)
    rows, whole = [], {}
    for i in range(2 * MIN_CALIBRATION_CONFIGS):
        calls = int(rng.integers(20, 200))
        latency = rng.uniform(0.01, 0.5, calls)
        out_bytes = rng.uniform(1e4, 2e6, calls)
        rows += [{"parent_run_id": f"r{i}", "latency_ms": a, "layer_batch_out_bytes": b} for a, b in zip(latency, out_bytes)]
        whole[f"r{i}"] = 1.2 * latency.sum() + 0.02 * calls + 0.05 * out_bytes.sum() / 1e6
    layer_rows = pd.DataFrame(rows)
    assert calibration(layer_rows, whole) == pytest.approx((1.2, 0.02, 0.05), rel=1e-6)
    few = layer_rows[layer_rows["parent_run_id"].isin([f"r{i}" for i in range(MIN_CALIBRATION_CONFIGS - 1)])]
    sums = few.groupby("parent_run_id")["latency_ms"].sum()
    assert calibration(few, whole) == (pytest.approx(float(np.median([whole[p] / s for p, s in sums.items()]))), 0.0, 0.0)
    old = LayerModel.from_calibration(None, {"factor": 1.3, "inputs": []})
    assert old.calibration() == {"factor": 1.3, "per_call_ms": 0.0, "per_out_mb_ms": 0.0}
    new = LayerModel(None, 1.2, 0.02, 0.05)
    assert new.calibrate(np.array([10.0]), np.array([100.0]), np.array([20.0])) == pytest.approx([15.0])


def test_the_layer_model_learns_a_calls_time_per_unit_of_work_and_so_holds_for_sizes_it_never_saw() -> None:
    """A module call's latency is learnt over its work (FLOPs, elementwise ops and bytes,
    runtime.LAYER_WORK): convolutions and poolings of a size beyond every one fitted are predicted
    at their own cost, where a booster of the latency itself gave them the largest it saw. A
    version's calibration carries the work (format 5); one written before (format 4) is a booster
    of the latency itself, and a work this tracker does not know is refused."""
    import numpy as np
    import pandas as pd

    from tracker.fingerprint.layers import fit
    from tracker.fingerprint.runtime import FORMAT, LAYER_NUMBERS, LAYER_WORK, FingerprintError, LayerModel

    def calls(sizes: Any, parent: str) -> pd.DataFrame:
        rows = []
        for i, size in enumerate(sizes):
            for category, kind, flops, ops in (("conv", "Conv2d", 2e6 * size, 0.0), ("pool", "MaxPool2d", 0.0, 1e5 * size)):
                row = {c: 1.0 for c in LAYER_NUMBERS}
                row.update(category=category, kind=kind, parent_run_id=f"{parent}{i}", out_h=7.0 * size,
                           layer_batch_flops=flops, layer_batch_elementwise_ops=ops, layer_batch_bytes=4e4 * size,
                           layer_batch_out_bytes=1e4 * size,
                           # 20 GFLOP/s for a convolution; 2.5 ns an elementwise op
                           latency_ms=flops / 2e7 + ops * 2.5e-6)
                rows.append(row)
        return pd.DataFrame(rows)

    seen, beyond = calls(np.linspace(1, 8, 40), "s"), calls([16.0, 32.0], "b")
    model = fit(seen, {p: 1.0 for p in seen["parent_run_id"]})
    assert model.work == {**LAYER_WORK, "floor": pytest.approx(1000.0)} and model.calibration()["work"] == model.work
    truth = beyond["latency_ms"].to_numpy()
    # trees of the latency itself answer at most the largest they saw, under 60 % of each of these
    largest = beyond["category"].map(seen.groupby("category")["latency_ms"].max()).to_numpy()
    assert np.all(largest < 0.6 * truth)
    assert model.call_latency(beyond) == pytest.approx(truth, rel=0.1)
    # a version's spec: format 5 carries the work; format 4 and before, none (the latency itself)
    assert FORMAT == 5
    read = LayerModel.from_calibration(model.booster, model.calibration())
    assert read.work == model.work and np.array_equal(read.call_latency(beyond), model.call_latency(beyond))
    assert LayerModel.from_calibration(model.booster, {"factor": 1.0}).work is None
    with pytest.raises(FingerprintError, match="layer work .* is not one this tracker reads"):
        LayerModel.from_calibration(model.booster, {"factor": 1.0, "work": {"layer_batch_flops": 1.0}})


def test_the_readme_names_the_format_train_registers() -> None:
    """The README's paragraph on serving a version (in docs/fingerprints.md since 0.9.31) said `format` 4 after
    the layer model's work made every version train registers format 5 (0.9.12): a reader serving one, or
    checking its tag, read another number than the registry shows."""
    readme = (Path(__file__).resolve().parents[1] / "docs" / "fingerprints.md").read_text()
    said = re.search(r"A registered version is an MLflow pyfunc model \(version tag `format` (\d+)", readme)
    assert said is not None and int(said.group(1)) == FORMAT, said


def test_layer_rows_carry_padded_channel_ratios_and_kinds_and_older_boosters_get_their_own_columns() -> None:
    """A module call's channels padded to the CPU's vector block, over its channels (40 -> 48/40),
    NaN where it has none; its module class coded (SiLU apart from ReLU, an unknown class after
    the known ones, no kind NaN). A booster fitted before those columns existed (13, then 15 of
    them) is given its own, and its module calls need not carry what it never read."""
    import lightgbm
    import numpy as np
    import pandas as pd

    from tracker.fingerprint.runtime import (CHANNEL_BLOCK, KINDS, LAYER_FEATURES, LAYER_INPUTS, LAYER_NUMBERS,
                                             FingerprintError, LayerModel, layer_array, layer_inputs, layer_matrix,
                                             layer_sums)

    call = {c: 1.0 for c in LAYER_NUMBERS}
    rows = pd.DataFrame([{**call, "category": "conv", "kind": "Conv2d", "in_channels": 40.0, "out_channels": 64.0,
                          "parent_run_id": "a"},
                         {**call, "category": "act", "kind": "SiLU", "in_channels": 0.0, "out_channels": 0.0,
                          "parent_run_id": "a"},
                         {**call, "category": "act", "kind": "ReLU", "parent_run_id": "a"},
                         {**call, "category": "act", "kind": None, "parent_run_id": "a"}])
    x = layer_matrix(rows)
    assert list(x.columns) == LAYER_FEATURES and CHANNEL_BLOCK == 16
    assert x["in_channels_pad_ratio"].iloc[0] == pytest.approx(48 / 40) and x["out_channels_pad_ratio"].iloc[0] == 1.0
    assert np.isnan(x["in_channels_pad_ratio"].iloc[1])
    assert x["kind_code"].iloc[0] == len(KINDS) and x["kind_code"].iloc[1] == KINDS.index("SiLU") != x["kind_code"].iloc[2]
    assert np.isnan(x["kind_code"].iloc[3])
    assert np.array_equal(layer_array(rows), x.to_numpy(), equal_nan=True)  # what a prediction hands the booster
    assert set(layer_inputs()) == set(LAYER_INPUTS) and "kind" not in layer_inputs(15)
    rng = np.random.default_rng(0)
    records = rows.drop(columns=["kind", "parent_run_id"]).to_dict("records")
    for old in (13, 15):
        assert list(layer_matrix(rows, old).columns) == LAYER_FEATURES[:old]
        booster = lightgbm.train({"verbose": -1, "min_data_in_leaf": 1},
                                 lightgbm.Dataset(rng.random((50, old)), rng.random(50)), num_boost_round=2)
        assert LayerModel(booster, 1.0).network_latency(rows).index.tolist() == ["a"]  # its columns given, not 16
        assert np.isfinite(layer_sums(LayerModel(booster, 1.0), [records])).all()  # calls without a kind
    assert LAYER_FEATURES[:13] == ["category_code", *LAYER_NUMBERS]
    booster = lightgbm.train({"verbose": -1, "min_data_in_leaf": 1},
                             lightgbm.Dataset(rng.random((50, len(LAYER_FEATURES))), rng.random(50)), num_boost_round=2)
    with pytest.raises(FingerprintError, match="module calls in layers lack kind"):
        layer_sums(LayerModel(booster, 1.0), [records])
    # a row's calls as JSON text (as a served version is sent them), nested past the recursion limit: the
    # row's error, as text that is not JSON is (a RecursionError until 0.9.15)
    for text in ("[" * 100_000, "[{cut"):
        with pytest.raises(FingerprintError, match=r"^row 1: layers is not JSON \(expected a list of module calls\)$"):
            layer_sums(LayerModel(booster, 1.0), [None, text])




def test_a_kind_of_operation_no_training_network_has_is_beyond_what_was_learnt() -> None:
    """perf4sight's TX2 networks have no grouped convolution: 199 of 200 generated candidates, ResNeXt
    blocks among them, were predicted as inside what the version learnt, until 0.9.0. A ``*_count``
    feature never above 0 in training is recorded as [0, 0], so a network that has one is beyond."""
    import pandas as pd

    from tracker.fingerprint.dataset import outside_ranges, trained_ranges

    frame = pd.DataFrame({"batch_size": [1.0, 8.0], "flops": [1e9, 2e9], "gconv_count": [0.0, 0.0],
                          "conv_count": [10.0, 20.0], "input_size": [224, 224]})
    ranges = trained_ranges(frame, ["batch_size", "flops", "gconv_count", "conv_count"])
    assert ranges["gconv_count"] == [0.0, 0.0] and "conv_count" not in ranges  # a kind seen: its count not bounded
    assert outside_ranges(ranges, {"batch_size": 4, "flops": 1.5e9, "gconv_count": 3, "conv_count": 40,
                                   "input_size": 224}) == {"gconv_count": {"value": 3.0, "trained": [0.0, 0.0]}}
    assert outside_ranges(ranges, {"batch_size": 4, "flops": 1.5e9, "gconv_count": 0, "input_size": 224}) == {}


def test_a_tag_of_names_holds_each_once_and_cuts_between_names() -> None:
    """--exclude or --from-experiment named twice was in the version's tag twice, and a long list was
    cut mid-name at 500 characters, until 0.9.2."""
    from tracker.fingerprint.train import NAMES_TAG_CHARS, names_tag

    assert names_tag(["train-set", "retest", "train-set"]) == "retest,train-set"
    many = [f"gen-s7-{i:04d}" for i in range(100)]
    tag = names_tag(many)
    assert len(tag) <= NAMES_TAG_CHARS and tag.endswith(",... (100 in all)")
    assert all(name in many for name in tag.removesuffix(",... (100 in all)").split(","))


def test_a_champion_whose_networks_cannot_be_read_stays_in_one_line(tmp_path: Path) -> None:
    """The champion's ``evaluation/networks.json`` gone (or unreadable): ``train`` registers the new
    version and says in its line why the champion stays (a traceback until 0.9.8)."""
    names = ("squeezenet1_1", "mobilenet_v3_small", "shufflenet_v2_x0_5", "mnasnet0_5")
    runs, wh = _measure(tmp_path, names)
    uri = resolve_location(str(runs)).uri
    first = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    client = MlflowClient(uri)
    run_id = client.get_model_version(first.name, first.version).run_id
    artifacts = Path(client.get_run(run_id).info.artifact_uri.removeprefix("file://"))
    for damage in ("unlink", "garbage"):
        networks = artifacts / "evaluation" / "networks.json"
        if damage == "unlink":
            networks.unlink()
        else:
            networks.write_text("[unfinished")
        out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms",
                                       "--warehouse", str(wh), "--no-plots"])
        assert out.exit_code == 0, out.output
        assert out.stdout.splitlines()[-1].startswith(
            f"not champion: version {first.version} stays champion: the networks it learnt from cannot be read"), out.stdout
        assert str(client.get_model_version_by_alias(first.name, CHAMPION).version) == first.version


def test_a_damaged_model_file_is_one_line(tmp_path: Path) -> None:
    """A version's fingerprint.json cut short, or a booster.txt that is not one: ``predict`` says in a
    line which version cannot be read (a JSONDecodeError or a LightGBMError traceback until 0.9.8)."""
    from tracker.fingerprint.predict import sqlite_champions

    names = ("squeezenet1_1", "mobilenet_v3_small", "shufflenet_v2_x0_5", "mnasnet0_5")
    runs, wh = _measure(tmp_path, names)
    location = resolve_location(str(runs))
    result = train(wh, "latency_ms", "inference", "cpu", location.uri, plots=False)
    folder = Path(sqlite_champions(location.db_path, [result.name])[result.name].storage_location.removeprefix("file://"))
    args = ["--tracking-uri", str(runs), "predict", "resnet18", "--input-size", "64"]
    assert CliRunner().invoke(app, args).exit_code == 0
    # nested past Python's recursion limit (a RecursionError), or not an object (an AttributeError): each a
    # traceback until 0.9.15
    for file, damaged in (("fingerprint.json", lambda text: text[: len(text) // 2]),
                          ("fingerprint.json", lambda text: "[" * 100_000), ("fingerprint.json", lambda text: "[]"),
                          ("booster.txt", lambda text: "not a booster\n" + text[:200]),
                          # cut in a tree: LightGBM 4.7's reader ended the process (a core dump) until 0.9.35
                          ("booster.txt", lambda text: text[: len(text) // 2])):
        path = next(folder.rglob(file))
        kept = path.read_text()
        path.write_text(damaged(kept))
        out = CliRunner().invoke(app, args)
        assert isinstance(out.exception, FingerprintError), out.output
        assert str(out.exception).startswith(f"{result.name} version {result.version}: cannot read its model from "
                                             "the store's artifacts (")
        assert "are they damaged?" in str(out.exception)
        if file == "booster.txt":  # and on the terminal, one line: LightGBM's own "[LightGBM] [Fatal]" above it until 0.9.24
            ran = subprocess.run([sys.executable, "-m", "tracker", *args], capture_output=True, text=True, timeout=120)
            assert ran.returncode == 1 and len(ran.stderr.splitlines()) == 1, ran.stderr
            assert ran.stderr.startswith(f"error: {result.name} version {result.version}: cannot read its model")
        path.write_text(kept)


def test_a_format_1_layer_versions_damaged_calibration_is_one_line(tmp_path: Path) -> None:
    """A layer version of format 1 (a bare LightGBM model) keeps its layer model as a run artifact,
    evaluation/layer_model: its calibration.json nested past Python's recursion limit (a RecursionError),
    or not an object (an AttributeError), was a traceback until 0.9.15; it is said in a line, as a
    version's other damaged files are."""
    import lightgbm
    import mlflow
    import numpy as np

    from tracker.fingerprint.predict import load_champion

    uri = resolve_location(str(tmp_path / "runs")).uri
    with RunLogger(str(tmp_path / "runs"), experiment="fp1", environment=ENV):  # the store, its artifacts inside it
        pass
    mlflow.set_tracking_uri(uri)
    x = np.random.default_rng(0).random((40, 2))
    booster = lightgbm.train({"objective": "regression", "verbose": -1, "min_data_in_leaf": 5},
                             lightgbm.Dataset(x, x[:, 0] + x[:, 1]), num_boost_round=2)
    name = "latency_ms-inference-cpu"
    experiment = MlflowClient(uri).get_experiment_by_name("fp1").experiment_id
    with mlflow.start_run(experiment_id=experiment):  # as tracker before format 2 registered a layer version
        mlflow.log_text(booster.model_to_string(), "evaluation/layer_model/booster.txt")
        mlflow.log_text(json.dumps({"factor": 1.0}), "evaluation/layer_model/calibration.json")
        mlflow.lightgbm.log_model(booster, name="model", registered_model_name=name, pip_requirements=["lightgbm"])
    client = MlflowClient(uri)
    for key, value in {"features": "a,b", "method": "layer", "target": "latency_ms"}.items():
        client.set_model_version_tag(name, "1", key, value)
    version = client.get_model_version(name, "1")
    assert load_champion(uri, name, version).layer.factor == 1.0
    [calibration] = (tmp_path / "runs").rglob("calibration.json")
    for damaged in ("[" * 100_000, "{cut", "[]", '{"factor": "fast"}'):
        calibration.write_text(damaged)
        with pytest.raises(FingerprintError) as caught:
            load_champion(uri, name, version)
        assert str(caught.value).startswith(f"{name} version 1: cannot read its model from the store's artifacts ("), \
            caught.value
        assert "are they damaged?" in str(caught.value) and "\n" not in str(caught.value)


def test_the_runtime_a_version_carries_imports_and_reads_where_tracker_is_not_installed(tmp_path: Path) -> None:
    """The runtime module a version carries (served where tracker is not installed) imports nothing of
    tracker but its error's base: 0.9.15's JSON reader, imported unguarded, left it unimportable there.
    A damaged spec and a row's module calls nested past the recursion limit are a ValueError there too."""
    from tracker.fingerprint import runtime

    env = _without_tracker(tmp_path / "no-tracker")
    shutil.copy(runtime.__file__, tmp_path / "tracker_fingerprint_runtime.py")
    (tmp_path / "deep.json").write_text("[" * 100_000)
    (tmp_path / "list.json").write_text("[]")
    script = ("import sys\nimport tracker_fingerprint_runtime as rt\n"
              "for call in (lambda: rt.read_fingerprint({rt.SPEC: sys.argv[1]}),\n"
              "             lambda: rt.read_fingerprint({rt.SPEC: sys.argv[2]}), lambda: rt.Trend.from_json('[]')):\n"
              "    try:\n        call()\n    except ValueError as exc:\n        print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "deep.json"), str(tmp_path / "list.json")],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["ValueError JSON nested too deeply to read",
                                       "ValueError fingerprint spec is not a JSON object",
                                       "ValueError a trend is not a JSON object"], out.stdout


def test_train_json_says_the_memory_floor_as_list_does() -> None:
    """``fingerprint train --format json``'s ``memory_floor`` is a boolean with ``memory_floor_not_why``
    beside it, as ``fingerprint list --format json`` gives them (the tag's text, "true", until 0.9.8)."""
    from tracker.fingerprint.train import TrainResult

    def printed(tag: str | None) -> dict:
        return json.loads(json.dumps(TrainResult("peak_mem_mb-training-cpu", "1", "r", {}, {}, {}, True, "first version",
                                                 memory_floor=tag).to_dict()))

    assert [(d["memory_floor"], d["memory_floor_not_why"]) for d in map(printed, (
        "true", "false (3 runs measured below it)", None))] == [(True, None), (False, "3 runs measured below it"),
                                                                 (None, None)]


def test_list_gives_a_format_that_is_not_a_whole_number_as_unreadable(tmp_path: Path) -> None:
    """A version's format tag that is not a whole number is null in ``fingerprint list --format json`` and
    named in ``unreadable_tags``, as its other numeric tags are: its text was given as the format (until
    0.9.13), and a digit int cannot read (``²``) was a traceback, for list and predict alike."""
    from tracker.fingerprint.served import model_format

    runs = tmp_path / "runs"
    client = MlflowClient(resolve_location(str(runs)).uri)
    name = "latency_ms-inference-cpu"
    client.create_registered_model(name)
    for form in ("two", "2", "\u00b2"):
        client.create_model_version(name, str(tmp_path / "model"), tags={"features": "a,b", "format": form})
    args = ["--tracking-uri", str(runs), "fingerprint", "list"]
    listed = CliRunner().invoke(app, [*args, "--format", "json"])
    assert listed.exit_code == 0, listed.output
    assert {r["version"]: (r["format"], r["unreadable_tags"]) for r in json.loads(listed.stdout)} == {
        "1": (None, ["format"]), "2": (2, []), "3": (None, ["format"])}
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0 and table.stdout.count("; unreadable tags: format\n") == 2, table.output
    with pytest.raises(FingerprintError, match="has format '\u00b2', which this tracker does not read"):
        model_format({"format": "\u00b2"}, f"{name} version 3")


def test_a_fingerprint_named_after_a_stores_hundredth_model_is_listed_promoted_and_named(tmp_path: Path) -> None:
    """MLflow answers 100 registered models a search, by name: in a store of more (a team's server with
    other projects' models), a fingerprint named after the hundredth was left out of ``fingerprint
    list``, ``fingerprint promote`` said there was none of its name and named the first hundred (until
    0.9.33). Every page is read (by predict's error and the report too, through the same search). A model
    whose name holds a quote was a traceback of both: its versions were searched by a filter naming it."""
    runs = tmp_path / "runs"
    client = MlflowClient(resolve_location(str(runs)).uri)
    for i in range(101):  # other models, named before the fingerprint
        client.create_registered_model(f"a-model-{i:03d}")
    client.create_registered_model("o'brien")  # a name MLflow's filter cannot hold: a traceback until 0.9.33
    client.create_model_version("o'brien", str(tmp_path / "model"))
    name = "latency_ms-inference-cpu"
    client.create_registered_model(name)
    client.create_model_version(name, str(tmp_path / "model"), tags={"features": "a,b", "format": str(FORMAT)})
    assert len(client.search_registered_models()) == 100  # MLflow's one page
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    assert [(r["name"], r["version"]) for r in json.loads(listed.stdout)] == [(name, "1")]
    assert json.loads(listed.stdout)[0]["alias"] == ""
    assert listed.stderr == "note: 1 registered model version not made by tracker fingerprint train left out\n"
    other = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", "o'brien", "1"])
    assert other.exit_code == 1 and "o'brien version 1 was not registered by tracker fingerprint train" in str(
        other.exception)
    promoted = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", name, "1"])
    # found, and judged: this version has no model to load (none was logged here), which predict would refuse
    assert promoted.exit_code == 1 and f"{name} version 1: its model cannot be loaded" in str(promoted.exception)
    for alias in ("staging", CHAMPION):  # two aliases on one version: both shown (the one MLflow gave last until 0.9.33)
        client.set_registered_model_alias(name, alias, "1")
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format", "json"])
    assert [r["alias"] for r in json.loads(listed.stdout)] == [f"{CHAMPION},staging"]
    unknown = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", "zz-none", "1"])
    assert unknown.exit_code == 1 and "a-model-100" in str(unknown.exception) and name in str(unknown.exception)


def test_list_says_where_the_champion_sits_on_a_version_it_leaves_out(tmp_path: Path) -> None:
    """A version registered otherwise (MLflow's own register_model) is left out of ``fingerprint
    list``; where the champion alias is on it, the list names it and the command that moves the
    alias (a count of versions left out alone, while predict failed for its target, until 0.9.8)."""
    runs = tmp_path / "runs"
    client = MlflowClient(resolve_location(str(runs)).uri)
    name = "latency_ms-inference-cpu"
    client.create_registered_model(name)
    for _ in range(2):
        client.create_model_version(name, str(tmp_path / "model"))  # no features tag
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list"])
    assert listed.stderr == "note: 2 registered model versions not made by tracker fingerprint train left out\n"
    client.set_registered_model_alias(name, CHAMPION, "2")
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format", "json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout) == []
    assert listed.stderr.splitlines() == [
        "note: 2 registered model versions not made by tracker fingerprint train left out",
        f"note: {name} version 2, left out, holds the champion alias: tracker predict cannot use it; tracker "
        f"fingerprint promote {name} VERSION moves the alias to a version of train's"]


def test_list_shows_a_malformed_numeric_tag_as_unreadable_never_nan(tmp_path: Path) -> None:
    """A version's numeric tag that is not a finite number of its kind (``nan``, ``inf``, a speed
    reference of 0, a count of 2.5) is absent from ``fingerprint list`` and named unreadable: the table
    showed ``MAPE nan %`` and ``at speed probe inf ms``, the JSON ``NaN`` and ``Infinity`` (not JSON),
    and a networks tag of ``nan`` was a traceback, until 0.9.12."""
    names = ("squeezenet1_1", "mobilenet_v3_small", "shufflenet_v2_x0_5", "mnasnet0_5")
    runs, wh = _measure(tmp_path, names)
    uri = resolve_location(str(runs)).uri
    result = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    client = MlflowClient(uri)
    args = ["--tracking-uri", str(runs), "fingerprint", "list"]
    for tags in ({"heldout_mape_pct": "nan", "speed_reference_ms": "inf", "speed_probe_version": "nan", "networks": "nan"},
                 {"heldout_mape_pct": "-inf", "speed_reference_ms": "0", "speed_probe_version": "1.5", "networks": "2.5"},
                 # another script's digits: read as 3 until 0.9.14
                 {key: "\u0663" for key in ("heldout_mape_pct", "speed_reference_ms", "speed_probe_version", "networks")}):
        for key, text in tags.items():
            client.set_model_version_tag(result.name, result.version, key, text)
        table = CliRunner().invoke(app, args)
        assert table.exit_code == 0, table.output
        line = table.stdout.splitlines()[-1]
        assert "nan" not in line.lower() and "inf " not in line, line
        assert "MAPE ?, " in line and "? networks" in line, line
        assert "speed probe" not in line and "latencies as measured" not in line, line
        assert line.endswith("; unreadable tags: heldout_mape_pct, speed_reference_ms, speed_probe_version, networks"), line
        listed = CliRunner().invoke(app, [*args, "--format", "json"])
        assert listed.exit_code == 0, listed.output
        row, = json.loads(listed.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
        assert (row["heldout_mape_pct"], row["speed_reference_ms"], row["networks"]) == (None, None, None)
        assert row["speed_probe_version"] is None  # unlisted, and an unreadable one unsaid, until 0.9.12
        assert row["unreadable_tags"] == ["heldout_mape_pct", "speed_reference_ms", "speed_probe_version", "networks"]
        assert row["heldout_within_10pct"] is not None and row["baseline_extratrees_mape_pct"] is not None
    # a whole number written as a decimal: predict refuses a version of 9.0, and list gives it as unreadable (as 9,
    # and 1, until 0.9.25)
    client.set_model_version_tag(result.name, result.version, "node_rows_version", "9.0")
    client.set_model_version_tag(result.name, result.version, "speed_probe_version", "1.0")
    row, = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)
    assert row["node_rows_version"] is None and row["speed_probe_version"] is None
    assert {"node_rows_version", "speed_probe_version"} <= set(row["unreadable_tags"]), row["unreadable_tags"]


def test_the_champion_is_compared_as_predict_answers_past_the_largest_batch_it_learnt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new version that learnt larger batches is compared with the champion's predictions as
    ``tracker predict`` makes them: past the largest batch the champion learnt, its prediction at
    that batch times the batch over it (its trees' answer there, unscaled, until 0.9.8)."""
    import tracker.fingerprint.train as fingerprint_train
    from tracker.fingerprint.predict import champions, predict_grid

    small = ("squeezenet1_1", "mobilenet_v3_small", "shufflenet_v2_x0_5", "mnasnet0_5")
    runs, wh = _measure(tmp_path, small, batches={n: (1, 2, 4) for n in small})
    uri = resolve_location(str(runs)).uri
    with monkeypatch.context() as alone:  # trees alone: a trend would carry the champion past batch 4 itself
        alone.setattr(fingerprint_train, "NETWORK_MODELS", {"lgbm": fingerprint_train.lgbm})
        first = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    champ = champions(uri, "inference", "cpu", targets=("latency_ms",))
    assert champ["latency_ms"].trend is None and champ["latency_ms"].ranges["batch_size"] == [1, 4]
    unseen = ("resnet18", "mobilenet_v2")
    _measure(tmp_path, unseen)  # batch 1 to 8, into the same store and warehouse
    expected = predict_grid(uri, list(unseen), [1, 2, 4, 8], "inference", "cpu", 64, models=champ)
    assert [r["scaled_from_batch"] for r in expected if r["batch_size"] == 8] == [{"latency_ms": 4}] * 2
    compared: list[Any] = []
    verdict = fingerprint_train._verdict

    def kept(client, name, version, y, new, old, beats, stays, y_old=None, note=""):  # noqa: ANN001, ANN202
        compared.append(old)
        return verdict(client, name, version, y, new, old, beats, stays, y_old, note)

    monkeypatch.setattr(fingerprint_train, "_verdict", kept)
    second = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    assert re.search(rf"version {first.version} .*on 2 (networks it never saw|unseen networks)", second.champion_reason), \
        second.champion_reason
    [old] = compared
    assert sorted(old) == pytest.approx(sorted(r["predictions"]["latency_ms"] for r in expected), rel=1e-9)


def _probed_store(tmp_path: Path, probed: dict[str, list[tuple[float, float | None]]],
                  versions: dict[str, int] | None = None) -> tuple[Path, Path]:
    """A store of ``{network: [(latency_ms, speed_probe_ms or None), ...]}`` at batch 2 (each
    pair one repeat of its configuration), loaded into a warehouse; each probe of this tracker's
    version, or of ``versions[network]``'s."""
    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-speed", environment=ENV)
    for name, repeats in probed.items():
        desc = described(name, 64)
        for k, (latency, probe) in enumerate(repeats):
            r = network_record(name, 2)
            r.params["model_hash"] = desc.description_hash
            r.metrics["latency_ms"] = latency
            if probe is not None:
                timed_probe(r, probe, (versions or {}).get(name))
            r.tags["tracker.repeat_key"] = f"r{k}"
            if k == 0:
                r.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
            logger.log([r])
    load(wh, open_source(resolve_location(str(runs))))
    return runs, wh


def test_latency_labels_are_put_at_the_machines_median_speed_where_every_measurement_timed_the_probe(
        tmp_path: Path) -> None:
    """The machine slowed down between repeats (its probe 1.0, 1.5, 2.0 ms) and the network with it
    (4, 6, 8 ms): in the machine's units the network did not change. Labels are the median of latency
    over probe, times the median probe of the rows (1.5 ms); as measured, beside; and all as measured
    where one measurement has no probe (a run of tracker 0.9.8), or when asked."""
    from tracker.fingerprint.dataset import feature_columns
    from tracker.fingerprint.train import training_rows

    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, 1.5), (9.0, 2.0)],
                                        "resnet18": [(10.0, 1.0)], "mobilenet_v2": [(30.0, 2.0)]})
    rows = training_rows(wh, "latency_ms", "inference", "cpu").set_index("model")
    assert rows.attrs["speed_reference_ms"] == 1.5
    assert rows["latency_ms"].to_dict() == pytest.approx({"squeezenet1_1": 6.0, "resnet18": 15.0, "mobilenet_v2": 22.5})
    assert rows["measured_latency_ms"].to_dict() == pytest.approx({"squeezenet1_1": 6.0, "resnet18": 10.0,
                                                                   "mobilenet_v2": 30.0})
    assert not {"label_probe_ratio", "label_speed_probe_ms", "measured_latency_ms"} & set(
        feature_columns(list(rows.columns), "latency_ms"))  # what the label is made of is no feature
    raw = training_rows(wh, "latency_ms", "inference", "cpu", as_measured=True).set_index("model")
    assert "speed_reference_ms" not in raw.attrs and raw.loc["resnet18", "latency_ms"] == 10.0

    result = train(wh, "latency_ms", "inference", "cpu", resolve_location(str(runs)).uri, plots=False)
    assert result.speed_reference_ms == 1.5 and "as_measured_mape_pct" in result.evaluation
    version = MlflowClient(resolve_location(str(runs)).uri).get_model_version(result.name, result.version)
    assert version.tags["speed_reference_ms"] == "1.5" and version.tags["speed_probe_version"] == "1"
    at = {}
    for extra in ([], ["--speed-probe-ms", "3"]):
        out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet34", "-b", "2", "--input-size",
                                       "64", "--format", "json", *extra])
        assert out.exit_code == 0, out.output
        data = json.loads(out.stdout)
        assert data["speed_reference_ms"] == {"latency_ms": 1.5}
        at[bool(extra)] = data["predictions"]["latency_ms"]
        if extra:  # the figure at the reference speed beside it
            assert data["predictions_at_reference_speed"]["latency_ms"] == pytest.approx(at[False])
    assert at[True] == pytest.approx(2 * at[False])  # at a machine half as fast
    said = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet34", "-b", "2", "--input-size", "64"])
    assert "at the machine's median speed over the runs" in said.stdout and "speed probe 1.5 ms" in said.stdout
    from tracker.errors import OptionError

    # a usage error, before anything is loaded; 1e308 answered a latency of inf, Infinity in the JSON (until 0.9.10)
    for bad in ("0", "-1", "nan", "1e308", "60001"):
        refused = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet34", "--speed-probe-ms", bad,
                                           "--format", "json"])
        assert isinstance(refused.exception, OptionError), refused.output  # main says it, status 2
        assert str(refused.exception).startswith("--speed-probe-ms must be a positive number of ms, at most 60,000")
    slowest = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet34", "-b", "2", "--input-size",
                                       "64", "--speed-probe-ms", "60000", "--format", "json"])
    assert slowest.exit_code == 0, slowest.output
    assert json.loads(slowest.stdout)["predictions"]["latency_ms"] == pytest.approx(40_000 * at[False])
    # fingerprint list says how each latency version's labels were put (since 0.9.11)
    train(wh, "latency_ms", "inference", "cpu", resolve_location(str(runs)).uri, plots=False, as_measured=True)
    listed = json.loads(CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format",
                                                 "json"]).stdout)
    assert {r["version"]: r["speed_reference_ms"] for r in listed if r["name"] == result.name} == {"1": 1.5, "2": None}
    table = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list"]).stdout.splitlines()
    mine = {line.split()[1]: line for line in table if line.startswith(result.name)}  # newest first
    assert mine["v1"].endswith("; at speed probe 1.5 ms") and mine["v2"].endswith("; latencies as measured")


def test_a_latency_fingerprint_trained_again_on_the_same_runs_does_not_beat_its_twin(tmp_path: Path) -> None:
    """The reference speed was tagged to 6 digits, so a champion compared with its twin (the same runs
    trained again) had its predictions put at a speed a millionth off, and the twin "beat" it,
    "MAPE 49.99 % vs 49.99 %" (until 0.9.10). The tag is the speed to the last bit, and a version beats
    the champion only by what the reason can say."""
    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.1, 1.23456789), (6.3, 1.87654321)],
                                        "resnet18": [(10.7, 1.13579246)], "mobilenet_v2": [(30.3, 2.46813579)]})
    uri = resolve_location(str(runs)).uri
    first = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    tag = MlflowClient(uri).get_model_version(first.name, first.version).tags["speed_reference_ms"]
    assert float(tag) == first.speed_reference_ms and len(tag) > 8
    twin = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    assert twin.evaluation["mape_pct"] == first.evaluation["mape_pct"]
    assert not twin.champion and twin.champion_reason.startswith(f"version {first.version} stays champion"), \
        twin.champion_reason
    assert str(MlflowClient(uri).get_model_version_by_alias(first.name, CHAMPION).version) == first.version
    import numpy as np

    from tracker.fingerprint.train import _verdict

    y = np.array([10.0, 20.0])  # a millionth of a point ahead stays behind; a hundredth beats it
    kept, reason = _verdict(None, "x", "2", y, np.array([11.0, 22.0]), np.array([11.0, 22.0000001]), "beats", "stays")
    assert (kept, reason) == (False, "stays: 10.00 % vs 10.00 %")
    ahead = MlflowClient(uri)
    kept, reason = _verdict(ahead, first.name, twin.version, y, np.array([11.0, 22.0]), np.array([11.0, 22.004]),
                            "beats", "stays")
    assert (kept, reason) == (True, "beats: MAPE 10.00 % vs 10.01 %")
    assert str(ahead.get_model_version_by_alias(first.name, CHAMPION).version) == twin.version


def test_labels_stay_as_measured_where_a_measurement_timed_no_probe(tmp_path: Path) -> None:
    from tracker.fingerprint.train import training_rows

    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, None)],
                                        "resnet18": [(10.0, 1.0)], "mobilenet_v2": [(30.0, 2.0)]})
    rows = training_rows(wh, "latency_ms", "inference", "cpu").set_index("model")
    assert "speed_reference_ms" not in rows.attrs and "measured_latency_ms" not in rows.columns
    assert rows["latency_ms"].to_dict() == pytest.approx({"squeezenet1_1": 5.0, "resnet18": 10.0, "mobilenet_v2": 30.0})
    result = train(wh, "latency_ms", "inference", "cpu", resolve_location(str(runs)).uri, plots=False)
    assert result.speed_reference_ms is None and "as_measured_mape_pct" not in result.evaluation
    assert result.as_measured_why == ("1 of its 3 labels has measurements without a speed probe (runs before tracker "
                                      "0.9.9, imports, a probe that failed)")  # said on train's line (since 0.9.11)
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet34", "-b", "2", "--input-size", "64",
                                   "--speed-probe-ms", "3", "--format", "json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["speed_reference_ms"] == {}, out.output
    assert "--speed-probe-ms changes nothing" in out.stderr  # not silently ignored


def test_labels_stay_as_measured_where_a_measurement_timed_another_probe_version(tmp_path: Path) -> None:
    """A run whose probe is of another version (tag tracker.speed_probe 2) times another workload, another
    unit: its ratio of latency over probe was put at one median speed with version 1's (resnet18 here at
    10 / 4 * 1.25 ms), until 0.9.11. Now every label stays as measured, as where a run has no probe, and
    train says why on its line about the labels; a warehouse whose views an older tracker made is one line."""
    from tracker.fingerprint.train import training_rows

    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, 1.5)], "resnet18": [(10.0, 4.0)],
                                        "mobilenet_v2": [(30.0, 2.0)]}, versions={"resnet18": 2})
    rows = training_rows(wh, "latency_ms", "inference", "cpu").set_index("model")
    assert "speed_reference_ms" not in rows.attrs and "measured_latency_ms" not in rows.columns
    assert rows["latency_ms"].to_dict() == pytest.approx({"squeezenet1_1": 5.0, "resnet18": 10.0, "mobilenet_v2": 30.0})
    assert rows["label_speed_probe_version"].to_dict() == {"squeezenet1_1": 1, "resnet18": 2, "mobilenet_v2": 1}
    assert rows.attrs["as_measured_why"] == ("1 of its 3 labels has measurements that timed speed probe version 2, not "
                                             "this tracker's version 1 (another unit)")
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms",
                                   "--device", "cpu", "-w", str(wh), "--no-plots"])
    assert out.exit_code == 0, out.output
    assert ("  latency learnt as measured, not at the machine's median speed: 1 of its 3 labels has measurements that "
            "timed speed probe version 2, not this tracker's version 1 (another unit)\n") in out.stdout
    name = "latency_ms-inference-cpu"
    assert "speed_reference_ms" not in MlflowClient(resolve_location(str(runs)).uri).get_model_version(name, "1").tags
    # the repeats of one label of two versions: no version of theirs, no reference either
    mixed, mixed_wh = _probed_store(tmp_path / "mixed", {"squeezenet1_1": [(4.0, 1.0)], "resnet18": [(10.0, 1.0)],
                                                         "mobilenet_v2": [(30.0, 2.0)]})
    logger = RunLogger(str(mixed), experiment="fp-speed", environment=ENV)
    again = timed_probe(network_record("squeezenet1_1", 2, latency_ms=6.0), 1.5, version=2)
    again.params["model_hash"] = described("squeezenet1_1", 64).description_hash
    again.tags["tracker.repeat_key"] = "r1"
    logger.log([again])
    load(mixed_wh, open_source(resolve_location(str(mixed))))
    rows = training_rows(mixed_wh, "latency_ms", "inference", "cpu").set_index("model")
    assert "speed_reference_ms" not in rows.attrs and rows.loc["squeezenet1_1", "label_repeats"] == 2
    assert rows.attrs["as_measured_why"].startswith("1 of its 3 labels has measurements that timed speed probes of "
                                                    "versions that differ or go unsaid")
    # all of this tracker's version (the repeat's tag said so by hand): at the median speed again
    MlflowClient(resolve_location(str(mixed)).uri).set_tag(again.run_id, "tracker.speed_probe", "1")
    load(mixed_wh, open_source(resolve_location(str(mixed))))
    rows = training_rows(mixed_wh, "latency_ms", "inference", "cpu")
    assert rows.attrs["speed_reference_ms"] == 1.25 and rows.attrs["speed_probe_version"] == 1  # of 1.25, 1 and 2
    assert rows.attrs["as_measured_why"] is None
    with duckdb.connect(str(mixed_wh)) as con:  # its views as tracker 0.9.10 made them, without the version
        con.execute("CREATE OR REPLACE VIEW measurement_labels AS SELECT * EXCLUDE (speed_probe_version) "
                    "FROM measurement_labels_of(NULL)")
    with pytest.raises(FingerprintError, match=r"has the views of an older tracker, without speed_probe_version .*: "
                                               r"tracker warehouse load -w "):
        training_rows(mixed_wh, "latency_ms", "inference", "cpu")


def test_a_warehouse_of_another_trackers_node_rows_is_refused_for_training(tmp_path: Path) -> None:
    """Node rows computed by another description (``NODE_ROWS_VERSION``) are refused in one line that says
    to load the warehouse: a version learnt from them was tagged with this tracker's version and given this
    tracker's features at predict (until 0.9.12); a load computes them again, and training goes on."""
    from tracker.describe.features import NODE_ROWS_VERSION
    from tracker.fingerprint.train import training_rows

    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0)], "resnet18": [(10.0, 1.0)],
                                        "mobilenet_v2": [(30.0, 1.0)]})
    assert len(training_rows(wh, "latency_ms", "inference", "cpu")) == 3
    with duckdb.connect(str(wh)) as con:  # as a tracker of the version before left them
        con.execute("UPDATE node_rows_version SET version = ?", [NODE_ROWS_VERSION - 1])
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms",
                                   "--device", "cpu", "-w", str(wh), "--no-plots"])
    assert out.exit_code == 1 and isinstance(out.exception, FingerprintError), out.output  # the CLI's one line
    assert str(out.exception) == (f"the warehouse {wh} has node rows of another tracker's description (version "
                                  f"{NODE_ROWS_VERSION - 1}, this tracker's {NODE_ROWS_VERSION}), which a fingerprint "
                                  "learnt from them would not be given at predict; a load by this tracker describes "
                                  f"every network again: tracker warehouse load -w {wh}")
    assert not MlflowClient(resolve_location(str(runs)).uri).search_registered_models()  # nothing registered
    load(wh, open_source(resolve_location(str(runs))))
    assert len(training_rows(wh, "latency_ms", "inference", "cpu")) == 3


def test_predict_refuses_a_speed_probe_time_of_another_version_than_the_fingerprint_learnt_at(tmp_path: Path) -> None:
    """``--speed-probe-ms X`` is a time of this tracker's probe (what ``tracker device speed`` prints); a
    version whose reference speed is a time of another probe version (tag speed_probe_version 2, as a
    tracker with another probe registers it) was rescaled by X over it all the same, across two units (until
    0.9.12). Now predict refuses in one line naming both versions and what to do; without the option it
    answers at the version's own speed, as before."""
    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, 1.5)], "resnet18": [(10.0, 1.0)],
                                        "mobilenet_v2": [(30.0, 2.0)]})
    uri = resolve_location(str(runs)).uri
    result = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    base = ["--tracking-uri", str(runs), "predict", "resnet34", "-b", "2", "--input-size", "64", "--format", "json"]
    same = CliRunner().invoke(app, [*base, "--speed-probe-ms", "3"])
    assert same.exit_code == 0, same.output  # of this tracker's version: rescaled
    MlflowClient(uri).set_model_version_tag(result.name, result.version, "speed_probe_version", "2")
    refused = CliRunner().invoke(app, [*base, "--speed-probe-ms", "3"])
    assert refused.exit_code == 1 and isinstance(refused.exception, FingerprintError), refused.output
    assert str(refused.exception) == (
        f"{result.name} version {result.version} learnt at the speed of speed probe version 2, and the speed probe "
        "time given is of this tracker's version 1: another unit, not rescaled; predict without --speed-probe-ms (at "
        "the speed it learnt at), or train one from measurements of probe version 1 (tracker fingerprint train)")
    plain = CliRunner().invoke(app, base)
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["predictions"]["latency_ms"] == pytest.approx(
        json.loads(same.stdout)["predictions_at_reference_speed"]["latency_ms"])
    # its note and JSON say the reference's probe version, and that --speed-probe-ms cannot move it (the note
    # offered "--speed-probe-ms for another", which was then refused, until 0.9.12's last)
    assert json.loads(plain.stdout)["speed_probe_version"] == {"latency_ms": 2}
    assert json.loads(same.stdout)["speed_probe_version"] == {"latency_ms": 1}
    table = CliRunner().invoke(app, base[:-2])
    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines()[-1] == (
        f"note: latency_ms at the machine's median speed over the runs {result.name}/{result.version} learnt from "
        f"(its speed probe {result.speed_reference_ms:.4g} ms, a time of speed probe version 2: --speed-probe-ms, a "
        "time of this tracker's version 1, cannot put it at another speed)"), table.stdout
    # and fingerprint list says it beside the reference, which it gave alone (since 0.9.12's last)
    listed = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list"])
    assert listed.exit_code == 0 and listed.stdout.splitlines()[-1].endswith(
        f"; at speed probe {result.speed_reference_ms:.4g} ms (probe version 2, not this tracker's 1: predict "
        "--speed-probe-ms cannot move it)"), listed.stdout
    (row,) = json.loads(CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format",
                                                 "json"]).stdout)
    assert (row["speed_probe_version"], row["unreadable_tags"]) == (2, [])
    # a run's probe time, of its run's version (the demo's): of version 2, rescaled; of version 1, refused
    from tracker.fingerprint.predict import predict

    at_two = predict(uri, "resnet34", 2, "inference", "cpu", 64, speed_probe_ms=3.0, speed_probe_version=2)
    assert at_two["predictions"]["latency_ms"] == pytest.approx(
        3.0 / result.speed_reference_ms * json.loads(plain.stdout)["predictions"]["latency_ms"])
    with pytest.raises(FingerprintError, match=r"speed probe time given is of its run's version 1: another unit"):
        predict(uri, "resnet34", 2, "inference", "cpu", 64, speed_probe_ms=3.0, speed_probe_version=1)
    # the demo predicts an unseen network at its run's speed: where the run timed another probe version than the
    # fingerprint learnt at, at the fingerprint's own speed instead, and said
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from tracker import demo

    measured = {("resnet34", 2): {"latency_ms": 20.0, "ci_rel": 0.01, "peak_mem_mb": None, "network_mem_mb": None,
                                  "run_id": "r", "speed_probe_ms": 3.0, "speed_probe_version": 1}}
    shown = io.StringIO()
    (row,) = demo._unseen_table(Console(file=shown, width=300), measured, uri, [demo.Unseen("resnet34", "resnet34", "zoo")],
                                SimpleNamespace(batch_sizes=(2,)))
    assert row["predicted_latency_ms"] == pytest.approx(predict(uri, "resnet34", 2, "inference", "cpu")["predictions"]["latency_ms"])
    assert "predicted_latency_at_reference_ms" not in row
    assert ("1 latency predicted at the fingerprint's median speed, not at the speed each was measured at "
            f"({result.name} version {result.version} learnt at the speed of speed probe version 2") in shown.getvalue()
    for text in ("two", "\u0663"):  # another script's 3: read as 3 until 0.9.14
        MlflowClient(uri).set_model_version_tag(result.name, result.version, "speed_probe_version", text)
        unreadable = CliRunner().invoke(app, base)
        assert unreadable.exit_code == 1 and str(unreadable.exception).startswith(
            f"{result.name} version {result.version}: unreadable speed_probe_version tag {text!r}"), unreadable.output
    (row,) = json.loads(CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format",
                                                 "json"]).stdout)
    assert (row["speed_probe_version"], row["unreadable_tags"]) == (None, ["speed_probe_version"])


def test_a_champion_with_a_tag_predict_refuses_gives_its_place_to_the_version_train_registers(tmp_path: Path) -> None:
    """A champion whose tag predict reads was edited past reading: predict refuses it, saying to retrain with
    tracker fingerprint train. Until 0.9.23 that train failed on the same champion with the same line where
    it compared them on networks the champion never saw, and compared it on its labels as measured where it
    had seen them all. The version train registers takes its place now, saying why, and predict answers with it;
    `fingerprint promote` refuses to make it champion again."""
    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, 1.5)], "resnet18": [(10.0, 1.0)],
                                        "mobilenet_v2": [(30.0, 2.0)], "resnet34": [(20.0, 1.2)]})
    uri = resolve_location(str(runs)).uri
    client = MlflowClient(uri)
    predict = ["--tracking-uri", str(runs), "predict", "resnet34", "-b", "2", "--input-size", "64", "--format", "json"]
    # one that never saw resnet34 (compared on it), then one that saw every network (on their held-out predictions)
    for tag, value, exclude in (("speed_reference_ms", "lots", ("resnet34",)), ("trained_ranges", "[1, 2]", ())):
        edited = train(wh, "latency_ms", "inference", "cpu", uri, plots=False, exclude=exclude)
        client.set_registered_model_alias(edited.name, CHAMPION, edited.version)
        client.set_model_version_tag(edited.name, edited.version, tag, value)
        refused = CliRunner().invoke(app, predict)
        assert refused.exit_code == 1 and str(refused.exception).startswith(
            f"{edited.name} version {edited.version}: unreadable {tag} tag"), refused.output
        then = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
        assert then.champion and then.champion_reason == (
            f"version {edited.version}, champion, has an unreadable {tag} tag {value!r}, which tracker predict refuses")
        answered = CliRunner().invoke(app, predict)
        assert answered.exit_code == 0, answered.output
        assert json.loads(answered.stdout)["model_versions"] == {"latency_ms": f"{then.name}/{then.version}"}
        # nor is it made champion again by hand (promoted without a word until 0.9.23)
        promoted = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", edited.name,
                                            edited.version])
        assert promoted.exit_code == 1 and str(promoted.exception) == (
            f"{edited.name} version {edited.version} has an unreadable {tag} tag {value!r}: tracker predict would "
            "refuse it as champion; promote another version"), promoted.output
        assert str(client.get_model_version_by_alias(then.name, CHAMPION).version) == then.version


def test_a_champion_whose_model_predict_cannot_load_gives_its_place_to_the_version_train_registers(
        tmp_path: Path) -> None:
    """A champion whose model files are damaged or gone: predict refuses it, saying to retrain. Until 0.9.24
    that train failed on it with the same line where it compared the two on networks the champion never
    saw (the new version withdrawn), and kept it champion where it had seen them all. The version train
    registers takes its place now, saying why, and `fingerprint promote` refuses to make it champion again."""
    from tracker.fingerprint.predict import sqlite_champions

    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, 1.5)], "resnet18": [(10.0, 1.0)],
                                        "mobilenet_v2": [(30.0, 2.0)], "resnet34": [(20.0, 1.2)]})
    location = resolve_location(str(runs))
    client = MlflowClient(location.uri)
    predict = ["--tracking-uri", str(runs), "predict", "resnet34", "-b", "2", "--input-size", "64", "--format", "json"]

    def damaged(folder: Path) -> str:
        path = next(folder.rglob("booster.txt"))
        path.write_text("not a booster\n")
        return "its model cannot be read (LightGBMError: "

    def gone(folder: Path) -> str:
        shutil.rmtree(folder)
        return "its model cannot be loaded ("

    # one that never saw resnet34 (compared on it), then one that saw every network (on their held-out predictions)
    for spoil, exclude in ((damaged, ("resnet34",)), (gone, ())):
        edited = train(wh, "latency_ms", "inference", "cpu", location.uri, plots=False, exclude=exclude)
        client.set_registered_model_alias(edited.name, CHAMPION, edited.version)
        stored = sqlite_champions(location.db_path, [edited.name])[edited.name].storage_location
        why = spoil(Path(stored.removeprefix("file://")))
        refused = CliRunner().invoke(app, predict)
        said = str(refused.exception)
        assert refused.exit_code == 1 and said.startswith(f"{edited.name} version {edited.version}: cannot "), said
        assert "etrain with tracker fingerprint train" in said  # "Retrain with" damaged, "else retrain with" gone
        then = train(wh, "latency_ms", "inference", "cpu", location.uri, plots=False)
        assert then.champion and then.champion_reason.startswith(f"version {edited.version}, champion, {why}"), \
            then.champion_reason
        assert then.champion_reason.endswith("), which tracker predict refuses")
        if spoil is gone:  # the path whole (cut at 120 characters until 0.9.25)
            assert stored.removeprefix("file://") in then.champion_reason, then.champion_reason
        answered = CliRunner().invoke(app, predict)
        assert answered.exit_code == 0, answered.output
        assert json.loads(answered.stdout)["model_versions"] == {"latency_ms": f"{then.name}/{then.version}"}
        promoted = CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "promote", edited.name,
                                            edited.version])
        assert promoted.exit_code == 1 and str(promoted.exception).startswith(
            f"{edited.name} version {edited.version}: {why}"), promoted.output
        assert "tracker predict would refuse it as champion; promote another version" in str(promoted.exception)
        assert str(client.get_model_version_by_alias(then.name, CHAMPION).version) == then.version


def test_a_champion_of_a_newer_format_that_saw_every_network_is_compared_on_its_held_out_predictions(
        tmp_path: Path) -> None:
    """A champion a newer tracker registered (a format this one does not read) is not this tracker's to
    replace for that alone: where it has seen every network, train compares the two on their held-out
    predictions, which need no model loaded, as before 0.9.24 loaded every champion's model first."""
    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, 1.5)], "resnet18": [(10.0, 1.0)],
                                        "mobilenet_v2": [(30.0, 2.0)]})
    uri = resolve_location(str(runs)).uri
    first = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    MlflowClient(uri).set_model_version_tag(first.name, first.version, "format", str(FORMAT + 1))
    then = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    assert f"version {first.version}" in then.champion_reason and "format" not in then.champion_reason, \
        then.champion_reason


def test_device_speed_says_a_latency_fingerprints_unreadable_speed_tags_as_predict_refuses_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tracker device speed` read a latency version's speed_reference_ms tag that is not a positive number as no
    reference, and said the version "learnt its latencies as measured" (it did not), and an unreadable
    speed_probe_version tag as this tracker's version, comparing it, while predict refuses both (until 0.9.12).
    It says the tag is unreadable now, naming it and the version, and compares nothing, as fingerprint list
    names its unreadable tags."""
    from tracker.profile import probe

    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, 1.5)], "resnet18": [(10.0, 1.0)],
                                        "mobilenet_v2": [(30.0, 2.0)]})
    uri = resolve_location(str(runs)).uri
    result = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    client = MlflowClient(uri)
    speed = ["--tracking-uri", str(runs), "device", "speed", "--threads", "2"]  # the runs' mode, cpu-t2
    where = f"{result.name} version {result.version}"

    def fingerprint(said: dict) -> dict:
        (f,) = [f for f in said["fingerprints"] if f["name"] == result.name]
        return f

    now = json.loads(CliRunner().invoke(app, [*speed, "--format", "json"]).stdout)
    assert now["mode"] == "cpu-t2" and fingerprint(now)["unreadable_tags"] == []  # read: compared
    # the probe timed once, above: each command below reads the tags beside that real figure (its own
    # timing is test_device's), as six probes in measuring children took half a minute
    timed = {k: v for k, v in now.items() if k in ("device", "mode", "speed_probe_ms", "speed_probe_count", "quartiles_ms",
                                                   "median_ci_ms", "speed_probe_version", "device_wait_s")}
    monkeypatch.setattr(probe, "speed_now", lambda *args, **kwargs: dict(timed))
    assert fingerprint(now)["slower_than_reference_rel"] == now["speed_probe_ms"] / result.speed_reference_ms - 1

    for said in ("\u0663", "fast"):  # another script's 3: compared as 3 ms until 0.9.14
        client.set_model_version_tag(result.name, result.version, "speed_reference_ms", said)
        text = CliRunner().invoke(app, speed)
        assert text.exit_code == 0, text.output
        assert (f"{where}: unreadable speed_reference_ms tag, not compared (predict refuses it; retrain with tracker "
                "fingerprint train)\n") in text.stdout
    assert "learnt its latencies as measured" not in text.stdout and "predict at this speed" not in text.stdout
    f = fingerprint(json.loads(CliRunner().invoke(app, [*speed, "--format", "json"]).stdout))
    assert f["unreadable_tags"] == ["speed_reference_ms"] and f["speed_reference_ms"] is None
    assert "slower_than_reference_rel" not in f
    predicted = CliRunner().invoke(app, ["--tracking-uri", str(runs), "predict", "resnet34", "-b", "2", "--input-size",
                                         "64"])
    assert predicted.exit_code == 1 and str(predicted.exception).startswith(
        f"{where}: unreadable speed_reference_ms tag 'fast'"), predicted.output
    listed = json.loads(CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format",
                                                 "json"]).stdout)
    assert [r["unreadable_tags"] for r in listed if r["name"] == result.name] == [["speed_reference_ms"]]

    # a reference read, of a probe version unread: taken as this tracker's version and compared until 0.9.12
    client.set_model_version_tag(result.name, result.version, "speed_reference_ms", str(result.speed_reference_ms))
    client.set_model_version_tag(result.name, result.version, "speed_probe_version", "two")
    text = CliRunner().invoke(app, speed)
    assert text.exit_code == 0, text.output
    assert f"{where}: unreadable speed_probe_version tag, not compared (predict refuses it; " in text.stdout
    assert "learnt at speed probe" not in text.stdout and "predict at this speed" not in text.stdout
    f = fingerprint(json.loads(CliRunner().invoke(app, [*speed, "--format", "json"]).stdout))
    assert f["unreadable_tags"] == ["speed_probe_version"] and "slower_than_reference_rel" not in f
    assert f["speed_reference_ms"] is None and f["speed_probe_version"] is None
    listed = json.loads(CliRunner().invoke(app, ["--tracking-uri", str(runs), "fingerprint", "list", "--format", "json"]).stdout)
    assert [r["unreadable_tags"] for r in listed if r["name"] == result.name] == [["speed_probe_version"]]
    client.set_model_version_tag(result.name, result.version, "speed_reference_ms", "0")  # both: said together
    assert (f"{where}: unreadable speed_reference_ms and speed_probe_version tags, not compared"
            in CliRunner().invoke(app, speed).stdout)


def test_a_champion_learnt_at_another_probe_versions_speed_is_compared_as_measured_not_rescaled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """train put the champion's predictions at the challenger's reference speed by the ratio of the two
    reference times whatever probe version each was a time of (until 0.9.12): with the champion's a time of
    probe version 2 (125 ms, another workload), its predictions were divided by 100 and it lost on that. Two
    units are not rescaled now: the champion is scored on the latencies as measured, as one learnt as
    measured is, and the reason says so."""
    import numpy as np

    from tracker.fingerprint import train as fingerprint_train

    runs, wh = _probed_store(tmp_path, {"squeezenet1_1": [(4.0, 1.0), (6.0, 1.5)], "resnet18": [(10.0, 1.0)],
                                        "mobilenet_v2": [(30.0, 2.0)]})
    uri = resolve_location(str(runs)).uri
    first = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)
    client = MlflowClient(uri)
    for tag, value in (("speed_probe_version", "2"), ("speed_reference_ms", "125.0")):  # as a tracker of probe 2 tags it
        client.set_model_version_tag(first.name, first.version, tag, value)
    compared: list[tuple[Any, Any, Any]] = []
    verdict = fingerprint_train._verdict

    def kept(client, name, version, y, new, old, beats, stays, *rest):  # noqa: ANN001, ANN002, ANN202
        compared.append((new, old, rest[0] if rest else None))
        return verdict(client, name, version, y, new, old, beats, stays, *rest)

    monkeypatch.setattr(fingerprint_train, "_verdict", kept)
    second = train(wh, "latency_ms", "inference", "cpu", uri, plots=False)  # the same runs: its twin
    [(new, old, y_old)] = compared
    assert np.asarray(old) == pytest.approx(np.asarray(new))  # the twin's predictions, not a hundredth of them
    rows = fingerprint_train.training_rows(wh, "latency_ms", "inference", "cpu")
    assert sorted(y_old) == pytest.approx(sorted(rows["measured_latency_ms"]))  # scored as measured
    assert second.champion_reason.endswith(
        f" (version {first.version} learnt at the speed of speed probe version 2, this one at version 1's: another "
        f"unit, so version {first.version} is scored on the latencies as measured, not rescaled)"), second.champion_reason


def test_layer_labels_are_put_at_the_reference_speed_with_the_network_labels(tmp_path: Path) -> None:
    """A layer's label is its median of latency over the probe that bracketed the layers, times the
    network labels' reference, where every layer timed one; where one did not, every layer stays as
    measured (a network's sum of layers in one unit)."""
    from tracker.describe.features import node_rows
    from tracker.fingerprint.layers import load_layer_rows

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-layer-speed", environment=ENV)
    desc = described("squeezenet1_1", 64)
    modules = [r for r in node_rows(desc) if r["op"] == "call_module"][:2]
    net = network_record("squeezenet1_1", 2)
    net.params["model_hash"] = desc.description_hash
    net.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
    layers = []
    for i, row in enumerate(modules):
        layer = layer_record(net, i, model="squeezenet1_1")
        layer.params.update(model_hash=desc.description_hash, layer_name=row["target"], op_type=row["kind"], batch_size=2)
        layer.metrics["latency_ms"] = 2.0
        timed_probe(layer, 4.0)
        layers.append(layer)
    logger.log([net, *layers])
    load(wh, open_source(resolve_location(str(runs))))
    as_measured = load_layer_rows(wh, "inference", "cpu").set_index("layer_index")["latency_ms"].to_dict()
    at_speed = load_layer_rows(wh, "inference", "cpu", 1.0).set_index("layer_index")["latency_ms"].to_dict()
    assert as_measured == {0: 2.0, 1: 2.0} and at_speed == {0: 0.5, 1: 0.5}
    con = duckdb.connect(str(wh))
    con.execute("UPDATE layer_runs SET speed_probe_ms = NULL WHERE layer_index = 1")  # a layer without a probe
    con.close()
    mixed = load_layer_rows(wh, "inference", "cpu", 1.0).set_index("layer_index")["latency_ms"].to_dict()
    assert mixed == {0: 2.0, 1: 2.0}  # all as measured: one unit in a network's sum
    con = duckdb.connect(str(wh))  # a layer that timed another version of the probe: another unit (since 0.9.11)
    con.execute("UPDATE layer_runs SET speed_probe_ms = 4.0, speed_probe_version = 2 WHERE layer_index = 1")
    con.close()
    other = load_layer_rows(wh, "inference", "cpu", 1.0).set_index("layer_index")
    assert other["latency_ms"].to_dict() == {0: 2.0, 1: 2.0} and other["label_speed_probe_version"].to_dict() == {0: 1, 1: 2}


def _layered_store(tmp_path: Path, nets: dict[str, tuple[float, float, float | None, int | None]]) -> tuple[Path, Path]:
    """A store of one measurement per network at batch 2, ``{network: (latency_ms, its speed_probe_ms, its
    layers' speed_probe_ms or None, their probe version or None: this tracker's)}``, its first three module
    calls measured alone (each a tenth of the network's latency), loaded into a warehouse."""
    from tracker.describe.features import node_rows

    runs, wh = tmp_path / "runs", tmp_path / "w.duckdb"
    logger = RunLogger(str(runs), experiment="fp-layer-speed", environment=ENV)
    for name, (latency, probe, layer_probe, version) in nets.items():
        desc = described(name, 64)
        net = timed_probe(network_record(name, 2, latency_ms=latency), probe)
        net.params["model_hash"] = desc.description_hash
        net.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(desc.to_json())
        layers = []
        for i, row in enumerate([r for r in node_rows(desc) if r["op"] == "call_module"][:3]):
            layer = layer_record(net, i, model=name)
            layer.params.update(model_hash=desc.description_hash, layer_name=row["target"], op_type=row["kind"],
                                batch_size=2)
            layer.metrics["latency_ms"] = latency / 10
            if layer_probe is not None:
                timed_probe(layer, layer_probe, version)
            layers.append(layer)
        logger.log([net, *layers])
    load(wh, open_source(resolve_location(str(runs))))
    return runs, wh


def test_layer_labels_are_put_at_the_reference_speed_by_the_layers_of_the_networks_learnt_alone(tmp_path: Path) -> None:
    """Whether the layer labels could be put at the network labels' reference speed was asked of every
    layer of the phase and device, those of a network left out with --exclude too: one network's layers
    without a probe kept every layer as measured while the network labels were put at the reference (until
    0.9.12). Now it is asked of the layers of the networks learnt alone."""
    from tracker.fingerprint.layers import training_layer_rows
    from tracker.fingerprint.train import training_rows

    runs, wh = _layered_store(tmp_path, {"squeezenet1_1": (4.0, 1.0, 1.0, None), "resnet18": (10.0, 1.0, 1.0, None),
                                         "mobilenet_v2": (30.0, 2.0, 2.0, None), "resnet34": (50.0, 2.0, None, None)})
    frame = training_rows(wh, "latency_ms", "inference", "cpu", exclude=["resnet34"])
    assert frame.attrs["speed_reference_ms"] == 1.0
    rows = training_layer_rows(wh, frame, "inference", "cpu")
    assert set(rows["model"]) == {"squeezenet1_1", "resnet18", "mobilenet_v2"}
    at_speed = rows.groupby("model")["latency_ms"].first().to_dict()  # a tenth of the network over its probe
    assert at_speed == pytest.approx({"squeezenet1_1": 0.4, "resnet18": 1.0, "mobilenet_v2": 1.5})


def test_train_says_why_the_layer_labels_stay_as_measured_where_the_network_labels_are_put_at_the_reference(
        tmp_path: Path) -> None:
    """The network labels put at the machine's median speed, the layer labels kept as measured (a layer
    without a probe, or with another version's) were said nowhere (until 0.9.12), where the network labels
    kept so are (as_measured_why): train says it in a line now (JSON layers_as_measured_why)."""
    from tracker.fingerprint.layers import training_layer_rows
    from tracker.fingerprint.train import training_rows

    runs, wh = _layered_store(tmp_path, {"squeezenet1_1": (4.0, 1.0, None, None), "resnet18": (10.0, 1.0, 1.0, 2),
                                         "mobilenet_v2": (30.0, 2.0, 2.0, None)})
    frame = training_rows(wh, "latency_ms", "inference", "cpu")
    rows = training_layer_rows(wh, frame, "inference", "cpu")
    assert frame.attrs["speed_reference_ms"] == 1.0 and rows.groupby("model")["latency_ms"].first().to_dict() == \
        pytest.approx({"squeezenet1_1": 0.4, "resnet18": 1.0, "mobilenet_v2": 3.0})  # as measured
    why = ("3 of its 9 layer labels have measurements without a speed probe (runs before tracker 0.9.9, imports, a "
           "probe that failed); 3 of its 9 layer labels have measurements that timed speed probe version 2, not this "
           "tracker's version 1 (another unit)")
    assert rows.attrs["as_measured_why"] == why
    base = ["--tracking-uri", str(runs), "fingerprint", "train", "--target", "latency_ms", "--device", "cpu", "-w",
            str(wh), "--no-plots"]
    out = CliRunner().invoke(app, base)
    assert out.exit_code == 0, out.output
    assert f"\n  layer latencies learnt as measured, not at the network labels' median speed: {why}\n" in out.stdout
    assert "latency learnt as measured" not in out.stdout  # the network labels were put at it
    said = CliRunner().invoke(app, [*base, "--format", "json"])
    assert said.exit_code == 0 and json.loads(said.stdout)["layers_as_measured_why"] == why, said.output
    # every layer of this tracker's probe: at the reference, nothing said
    fine, fine_wh = _layered_store(tmp_path / "fine", {"squeezenet1_1": (4.0, 1.0, 1.0, None),
                                                       "resnet18": (10.0, 1.0, 1.0, None),
                                                       "mobilenet_v2": (30.0, 2.0, 2.0, None)})
    frame = training_rows(fine_wh, "latency_ms", "inference", "cpu")
    assert training_layer_rows(fine_wh, frame, "inference", "cpu").attrs["as_measured_why"] is None


def test_predict_stopped_by_ctrl_c_says_it_wrote_nothing(tmp_path: Path) -> None:
    """A Ctrl-C in predict said main's "what was logged before is kept" (until 0.9.8), of a command that
    writes nothing. Here a real SIGINT lands while it builds the network to describe it (the network's
    own code sends it)."""
    import hashlib

    from tests.conftest import sigint_default

    runs, wh = _measure(tmp_path, ("squeezenet1_0", "squeezenet1_1", "resnet18"), "fpc")
    train(wh, "latency_ms", "inference", "cpu", resolve_location(str(runs)).uri, plots=False)
    (tmp_path / "stops.py").write_text("import os\nimport signal\nimport time\n\nfrom torch import nn\n\n\n"
                                       "def net():\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(30)\n"
                                       "    return nn.Conv2d(3, 4, 3)\n")
    store = hashlib.sha256((runs / "mlflow.db").read_bytes()).hexdigest()
    proc = subprocess.run([sys.executable, "-m", "tracker", "--tracking-uri", str(runs), "predict", "./stops.py:net",
                           "--input-size", "64"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          preexec_fn=sigint_default)
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "interrupted: nothing is written by this command\n")
    assert hashlib.sha256((runs / "mlflow.db").read_bytes()).hexdigest() == store


def test_a_champion_that_learnt_in_other_units_is_compared_in_this_versions() -> None:
    """Both at a reference speed: its predictions put at this version's; the champion as measured and
    this one at a reference: each scored on its own labels (until 0.9.9's first release a champion's
    predictions in its units were scored on this version's)."""
    import numpy as np
    import pandas as pd

    from tracker.fingerprint.train import _in_its_units

    rows = pd.DataFrame({"measured_latency_ms": [10.0, 20.0]})
    rows.attrs["speed_reference_ms"] = 2.0
    old, y = np.array([5.0, 10.0]), np.array([6.0, 12.0])
    scaled, on, note = _in_its_units({"speed_reference_ms": 1.0}, rows, old, y)
    assert list(scaled) == [10.0, 20.0] and on is y and note == ""
    same, measured, note = _in_its_units({}, rows, old, y)
    assert same is old and list(measured) == [10.0, 20.0] and note == ""
    rows.attrs.clear()
    untouched, labels, note = _in_its_units({"speed_reference_ms": 1.0}, rows, old, y)
    assert untouched is old and labels is y and note == ""
