"""An embedded store moved or copied to another folder: refused where it would write its
artifacts into the old folder, and `tracker store relocate` points its paths at its own."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.conftest import ENV, network_record
from tracker.cli.app import app
from tracker.errors import StoreError
from tracker.log.logger import RunLogger
from tracker.log.relocate import moved_from
from tracker.settings import resolve_location


def _log(runs: Path, model: str) -> str:
    record = network_record(model, 1)
    record.artifacts["notes/note.txt"] = f"measured {model}"
    logger = RunLogger(str(runs), experiment="moved", environment=ENV)
    try:
        return logger.log([record])[0]
    finally:
        logger.close()


def _paths(runs: Path) -> list[str]:
    with closing(sqlite3.connect(runs / "mlflow.db")) as conn:
        return [r[0] for r in conn.execute("SELECT artifact_location FROM experiments UNION ALL "
                                           "SELECT artifact_uri FROM runs UNION ALL "
                                           "SELECT storage_location FROM model_versions")]


def _cli(runs: Path, *args: str) -> tuple[int, str]:
    """Exit code, and the output or the error the command line prints as its one line."""
    out = CliRunner().invoke(app, ["--tracking-uri", str(runs), *args])
    if isinstance(out.exception, StoreError):
        return 1, str(out.exception)
    return out.exit_code, out.output


def test_a_moved_store_is_refused_until_relocated_then_writes_in_its_own_folder(tmp_path: Path) -> None:
    old, new = tmp_path / "a" / "runs", tmp_path / "b" / "runs"
    first = _log(old, "resnet18")
    client = MlflowClient(resolve_location(str(old)).uri)
    client.create_registered_model("m")
    client.create_model_version("m", str(old / "artifacts" / "1" / first / "artifacts" / "notes"), first)
    new.parent.mkdir()
    shutil.move(old, new)
    shutil.rmtree(tmp_path / "a")

    code, out = _cli(new, "profile", "network", "squeezenet1_1", "--batch-size", "1")
    assert code == 1 and out == (
        f"this store ({new}) was moved or copied from {old}: its artifacts would go to {old / 'artifacts'}; "
        f"run `tracker --tracking-uri {new} store relocate` to keep them in {new / 'artifacts'}"), out
    assert not (tmp_path / "a").exists()  # nothing measured, nothing written, the old folder not made again
    with pytest.raises(StoreError, match="was moved or copied from"):
        RunLogger(str(new), experiment="moved").require_artifacts_here()
    code, out = _cli(new, "store", "info", "--format", "json")
    assert code == 0 and json.loads(out)["moved_from"] == str(old)

    code, out = _cli(new, "store", "relocate", "--format", "json")
    assert code == 0, out
    [done] = json.loads(out)
    assert done["old_root"] == str(old / "artifacts") and done["new_root"] == str(new / "artifacts")
    assert done["rows"] == {"experiments.artifact_location": 2, "runs.artifact_uri": 1,
                            "model_versions.storage_location": 1, "model_versions.source": 1}
    assert all(p.startswith(str(new)) for p in _paths(new))
    assert _cli(new, "store", "relocate") == (0, f"nothing to relocate: every experiment keeps its artifacts in "
                                                 f"{new / 'artifacts'}\n")
    assert "moved_from" not in json.loads(_cli(new, "store", "info", "--format", "json")[1])

    client = MlflowClient(resolve_location(str(new)).uri)
    assert Path(client.download_artifacts(first, "notes/note.txt", str(tmp_path))).read_text() == "measured resnet18"
    second = _log(new, "resnet34")
    assert (new / "artifacts" / "1" / second / "artifacts" / "notes" / "note.txt").read_text() == "measured resnet34"
    assert not (tmp_path / "a").exists()


def test_a_copy_is_told_apart_from_its_original_and_needs_its_artifacts(tmp_path: Path) -> None:
    original, copy, bare = tmp_path / "a" / "runs", tmp_path / "b" / "runs", tmp_path / "c" / "runs"
    _log(original, "resnet18")
    shutil.copytree(original, copy)
    bare.mkdir(parents=True)
    shutil.copy(original / "mlflow.db", bare / "mlflow.db")  # the database without its artifacts

    before = _paths(bare)
    code, out = _cli(bare, "store", "relocate")
    assert code == 1 and out == (f"{bare / 'artifacts'} holds none of the artifacts of the 1 runs kept in "
                                         f"{original / 'artifacts'}: copy that folder to {bare / 'artifacts'} first "
                                         "(nothing was changed)"), out
    assert _paths(bare) == before

    code, out = _cli(copy, "store", "relocate")
    assert code == 0 and out.startswith(f"{original / 'artifacts'} -> {copy / 'artifacts'}: "), out
    assert all(p.startswith(str(copy)) for p in _paths(copy))
    assert all(p.startswith(str(original)) for p in _paths(original))  # the original is its own, untouched
    assert _cli(original, "store", "relocate")[1].startswith("nothing to relocate")

    # Artifacts kept elsewhere on purpose (MLflow's own ./mlruns, a shared disk) are not a move.
    location = resolve_location(str(copy))
    assert moved_from(location, str(tmp_path / "mlruns" / "1")) is None
    assert moved_from(location, "s3://bucket/artifacts/1") is None
    (tmp_path / "shared" / "artifacts").mkdir(parents=True)
    assert moved_from(location, str(tmp_path / "shared" / "artifacts" / "1")) is None
    assert moved_from(location, f"file://{original / 'artifacts' / '1'}") == original / "artifacts"
