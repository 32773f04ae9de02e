"""What ``tracker predict`` says of fit where a memory version's readings saturate (a hinge trend):
its budgets, order, notes and largest batch compare what a configuration needs, not the capped
reading. The version is made here, not trained (a hinge is offered only on a device that ran out
of memory): a booster that adds nothing to its trend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tracker.cli.app import app
from tracker.fingerprint import predict as fingerprint_predict
from tracker.fingerprint.predict import Champion
from tracker.fingerprint.runtime import MEMORY_ADDITIVE_FEATURES, Trend

NAME = "peak_mem_mb-training-jetson-tx2"
CEILING_MB = 3000.0
DEVICE_MB = 4000.0


class NothingBooster:
    """A booster of log(target) that adds 0 to the trend under it."""

    def predict(self, x: Any, num_threads: int = 0) -> Any:
        return np.zeros(len(x))


def hinge_champion(name: str = NAME) -> Champion:
    """A peak memory of 500 MB plus 2 MB per MB of kept activations, read no higher than
    ``CEILING_MB`` (a soft corner of 1 MB), on a device of ``DEVICE_MB``."""
    trend = Trend(500.0, (0.0, 2 / 2**20, 0.0, 0.0), MEMORY_ADDITIVE_FEATURES, "hinge", 100.0,
                  (1.0, CEILING_MB, 1.0), (1.0, 256.0), (0.0, 0.0))
    return Champion(name, "1", ["batch_size"], NothingBooster(), trend=trend,
                    ranges={"batch_size": [1.0, 256.0]}, device_memory_mb=DEVICE_MB, largest_peak_mb=CEILING_MB)


@pytest.fixture
def hinge_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The CLI's arguments before ``predict``'s own, its champions the hinge version."""
    monkeypatch.setattr(fingerprint_predict, "champions", lambda *a, **k: {"peak_mem_mb": hinge_champion()})
    return ["--tracking-uri", str(tmp_path / "runs")]


ARGS = ["--phase", "training", "--device", "jetson-tx2", "--input-size", "64"]


def _predicted(store: list[str], *args: str) -> Any:
    out = CliRunner().invoke(app, [*store, "predict", *args, *ARGS, "--format", "json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_a_memory_budget_and_order_take_what_a_saturating_configuration_needs(hinge_store: list[str]) -> None:
    everything = _predicted(hinge_store, "resnet18", "mobilenet_v2", "-b", "64", "-b", "256", "-b", "1024",
                            "--sort", "peak_mem_mb")
    demand = {(r["model"], r["batch_size"]): r["memory_demand_mb"]["peak_mem_mb"] for r in everything}
    reading = {(r["model"], r["batch_size"]): r["predictions"]["peak_mem_mb"] for r in everything}
    over = [k for k in demand if demand[k] > DEVICE_MB]
    assert over and all(reading[k] <= CEILING_MB for k in over)  # read under the budget below, needing more
    assert [demand[(r["model"], r["batch_size"])] for r in everything] == sorted(demand.values())
    kept = _predicted(hinge_store, "resnet18", "mobilenet_v2", "-b", "64", "-b", "256", "-b", "1024",
                      "--under", f"peak_mem_mb={DEVICE_MB:g}")
    assert {(r["model"], r["batch_size"]) for r in kept} == {k for k in demand if demand[k] <= DEVICE_MB}
    assert all(r["exceeds_device_memory"] == [] for r in kept)



def test_fit_notes_and_the_largest_batch_say_what_a_saturating_configuration_needs(hinge_store: list[str]) -> None:
    one = _predicted(hinge_store, "resnet18", "-b", "1024")
    demand, reading = one["memory_demand_mb"]["peak_mem_mb"], one["predictions"]["peak_mem_mb"]
    assert reading < CEILING_MB < DEVICE_MB < demand and one["exceeds_device_memory"] == ["peak_mem_mb"]
    table = CliRunner().invoke(app, [*hinge_store, "predict", "resnet18", "-b", "1024", *ARGS])
    assert table.exit_code == 0, table.output
    notes = [line for line in table.stdout.splitlines() if "would not fit" in line]
    assert notes == [f"note: peak_mem_mb needs {demand:,.0f} MB (predicted reading {reading:,.0f}), "
                     f"which is more than the device's memory ({DEVICE_MB:,.0f} MB, as its runs recorded): "
                     "it would not fit"], table.stdout
    found = CliRunner().invoke(app, [*hinge_store, "predict", "resnet18", *ARGS, "--largest-batch", "--format", "json"])
    found = json.loads(found.stdout)
    batch = found["largest_batch"]["device_memory"]
    at, past = _predicted(hinge_store, "resnet18", "-b", str(batch), "-b", str(batch + 1))
    assert at["memory_demand_mb"]["peak_mem_mb"] <= DEVICE_MB < past["memory_demand_mb"]["peak_mem_mb"]
    assert found["memory_demand_mb"]["device_memory"] == pytest.approx(at["memory_demand_mb"]["peak_mem_mb"])
    assert found["predicted_peak_mb"]["device_memory"] == pytest.approx(at["predictions"]["peak_mem_mb"])
    assert found["predicted_peak_mb"]["device_memory"] <= CEILING_MB
    lines = CliRunner().invoke(app, [*hinge_store, "predict", "resnet18", *ARGS, "--largest-batch"]).stdout
    assert (f"under the device's memory ({DEVICE_MB:,.0f} MB): {batch} ({found['memory_demand_mb']['device_memory']:,.0f} "
            f"MB needed; predicted reading {found['predicted_peak_mb']['device_memory']:,.0f} MB)"
            in lines), lines


def test_models_of_another_phase_or_device_are_refused() -> None:
    """``predict_grid``'s ``models`` are each checked against the phase, device and number format
    predicted (their values were labelled with those asked, whatever they learnt, until 0.9.8); a
    version of a device mode whose runs ran on the device asked is one of its (a search's)."""
    from tracker.fingerprint.dataset import FingerprintError
    from tracker.fingerprint.predict import predict_grid

    models = {"peak_mem_mb": hinge_champion()}
    for phase, device, dtype in (("inference", "jetson-tx2", "float32"), ("training", "cuda", "float32"),
                                 ("training", "jetson-tx2", "bfloat16")):
        with pytest.raises(FingerprintError, match=f"^{NAME} version 1 is not a peak_mem_mb fingerprint of {phase} on "
                                                   f"'{device}'"):
            predict_grid(None, ["resnet18"], [4], phase, device, 64, models=models, dtype=dtype)
    with pytest.raises(FingerprintError, match="is not a network_mem_mb fingerprint"):  # a version under another target
        predict_grid(None, ["resnet18"], [4], "training", "jetson-tx2", 64, models={"network_mem_mb": hinge_champion()})
    [mine] = predict_grid(None, ["resnet18"], [4], "training", "jetson-tx2", 64, models=models)
    assert mine["model_versions"] == {"peak_mem_mb": f"{NAME}/1"}
    mode = hinge_champion("peak_mem_mb-training-maxn-t4")
    mode.mode, mode.devices = "maxn-t4", ("jetson-tx2",)
    assert predict_grid(None, ["resnet18"], [4], "training", "jetson-tx2", 64, models={"peak_mem_mb": mode})
    mode.devices = ("cpu",)
    with pytest.raises(FingerprintError, match="is not a peak_mem_mb fingerprint of training on 'jetson-tx2'"):
        predict_grid(None, ["resnet18"], [4], "training", "jetson-tx2", 64, models={"peak_mem_mb": mode})
