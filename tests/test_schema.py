import json

import pytest

from tracker.errors import SchemaError
from tracker.log.record import RunRecord, config_key, render
from tracker.log.schema import KINDS, load_schema, parse_schema_tag
from tracker.settings import project_dir

from tests.conftest import ENV, layer_record, network_record

UNIT_SUFFIXES = ("_ms", "_s", "_mb", "_w", "_j", "_pct", "_per_s", "_count", "_rel", "_frac", "_mhz")


def test_every_kind_has_a_schema_file_and_loads() -> None:
    files = {p.stem for p in project_dir("schemas").glob("*.json")} - {"_common"}
    assert files == set(KINDS)
    for kind in KINDS:
        schema = load_schema(kind)
        assert schema.kind == kind and schema.tag == f"{kind}/{schema.version}"
        assert "tracker.config_key" in schema.tags and schema.tags["env.host"].required


def test_metric_names_carry_their_units() -> None:
    dimensionless = {"loss", "val_accuracy", "train_loss", "step_loss", "epoch_loss", "sum_of_layers_ratio", "latency_ci_rel", "data_wait_frac",
                     "best_val_accuracy", "frontier_agreement_frac", "frontier_jaccard_frac"}
    for kind in KINDS:
        schema = load_schema(kind)
        for name, spec in [*schema.metrics.items(), *schema.patterns.get("metrics", {}).items()]:
            assert spec.unit, name
            assert name in dimensionless or name.endswith(UNIT_SUFFIXES), f"{kind}: {name} has no unit in its name"


def test_valid_records_pass() -> None:
    net = network_record()
    final = net.finalize(ENV)
    assert final.tags["tracker.kind"] == "network"
    assert final.tags["tracker.schema"] == "network/1"
    assert final.tags["mlflow.runName"] == net.name
    assert final.params["batch_size"] == "1"
    layer = layer_record(net, 0).finalize(ENV)
    assert layer.tags["mlflow.parentRunId"] == net.run_id


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda r: r.params.pop("batch_size"), "batch_size"),
        (lambda r: r.metrics.pop("latency_ms"), "latency_ms"),
        (lambda r: r.params.__setitem__("batch_size", "eight"), "batch_size"),
        (lambda r: r.params.__setitem__("phase", "sideways"), "phase"),
        (lambda r: r.metrics.__setitem__("latency", 3.0), "latency"),
        (lambda r: r.metrics.__setitem__("power_w", float("nan")), "power_w"),
        (lambda r: r.metrics.__setitem__("power_w", "3"), "power_w"),
        (lambda r: r.tags.__setitem__("colour", "red"), "colour"),
    ],
)
def test_a_record_that_breaks_the_schema_is_refused_naming_the_field(mutate, field) -> None:
    record = network_record()
    mutate(record)
    with pytest.raises(SchemaError, match=repr(field)):
        record.finalize(ENV)


def test_a_json_field_is_checked_as_json() -> None:
    from tracker.log.schema import FieldSpec, _check_value

    spec = FieldSpec(name="sweep", type="json")
    _check_value("run x", "tag", spec, '{"a": [1, 2]}')
    for bad in ('{"a": [1, 2]', "[" * 5000):  # cut short; nested past the recursion limit (a RecursionError before)
        with pytest.raises(SchemaError, match=r"^run x: tag 'sweep' should be json, got ") as refused:
            _check_value("run x", "tag", spec, bad)
        assert len(str(refused.value)) < 140, str(refused.value)


def test_environment_is_required() -> None:
    with pytest.raises(SchemaError, match="env.host"):
        network_record().finalize({})


def test_failed_runs_need_a_reason_but_no_metrics() -> None:
    record = network_record()
    record.metrics.clear()
    record.status = "FAILED"
    with pytest.raises(SchemaError, match="failure_reason"):
        record.finalize(ENV)
    record.fail("oom", stderr_tail="CUDA out of memory")
    final = record.finalize(ENV)
    assert final.status == "FAILED" and final.tags["tracker.failure_reason"] == "oom"


def test_metric_history_points_are_checked_and_the_last_step_is_latest() -> None:
    record = RunRecord(
        kind="training",
        name="t",
        params=dict(model="m", model_hash="h", batch_size=2, phase="training", device="cpu"),
        history={"latency_ms": [(0, 5.0), (1, 4.0), (2, 3.0)]},
    )
    final = record.finalize(ENV)
    assert final.latest_metrics()["latency_ms"][0] == 3.0
    record.history["latency_ms"].append((3, float("inf")))
    with pytest.raises(SchemaError, match="latency_ms"):
        record.finalize(ENV)


def test_config_key_is_deterministic_and_sensitive() -> None:
    a = {"model": "resnet18", "batch_size": 8, "software": {"torch": "2.14.1"}}
    assert config_key(a) == config_key(json.loads(json.dumps(a)))
    assert config_key(a) == config_key(dict(reversed(list(a.items()))))
    assert config_key(a) != config_key({**a, "batch_size": 16})
    assert config_key(a) != config_key({**a, "software": {"torch": "2.15.0"}})
    assert network_record().config_key == network_record().config_key
    assert network_record(batch_size=2).config_key != network_record().config_key


def test_render() -> None:
    assert render(True) == "true" and render(3) == "3" and render([1, 2]) == "[1,2]"
    assert render({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_unknown_schema_versions_are_loud() -> None:
    assert parse_schema_tag("network/1") == ("network", 1)
    with pytest.raises(SchemaError, match="not known"):
        parse_schema_tag("network/99")
    with pytest.raises(SchemaError, match="malformed"):
        parse_schema_tag("gizmo/1")
    # as tracker writes it, and of the run's kind where that is known (both passed until 0.9.7)
    with pytest.raises(SchemaError, match=r"^malformed tracker.schema tag 'network/01' \(tracker writes network/1\)$"):
        parse_schema_tag("network/01")
    with pytest.raises(SchemaError, match="^tracker.schema tag 'layer/1' is another kind's, on a network run"):
        parse_schema_tag("layer/1", "network")
    assert parse_schema_tag("layer/1", "layer") == ("layer", 1) and parse_schema_tag("layer/1") == ("layer", 1)
