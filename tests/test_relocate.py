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
from tracker.log.relocate import moved_from, moved_message
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
    # a report logs its pictures on their runs: until 0.9.1 into the old folder (made again), as a copy's into the original's
    code, out = _cli(new, "report", str(tmp_path / "pictures"))
    assert code == 1 and out.startswith(f"this store ({new}) was moved or copied from {old}") and out.endswith(
        "(or draw without logging: --no-log)") and not (tmp_path / "a").exists()
    code, out = _cli(new, "store", "info", "--format", "json")
    assert code == 0 and json.loads(out)["moved_from"] == str(old)
    # runs show looks for a run's artifacts where the store was: it listed none without a word until 0.9.8
    shown = CliRunner().invoke(app, ["--tracking-uri", str(new), "-e", "moved", "runs", "show", first])
    assert shown.exit_code == 0 and shown.stderr.startswith(f"note: this store ({new}) was moved or copied from {old}"), \
        shown.stderr
    assert "are looked for where it was" in shown.stderr

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
    assert CliRunner().invoke(app, ["--tracking-uri", str(new), "-e", "moved", "runs", "show", first]).stderr == ""

    client = MlflowClient(resolve_location(str(new)).uri)
    assert Path(client.download_artifacts(first, "notes/note.txt", str(tmp_path))).read_text() == "measured resnet18"
    second = _log(new, "resnet34")
    assert (new / "artifacts" / "1" / second / "artifacts" / "notes" / "note.txt").read_text() == "measured resnet34"
    assert not (tmp_path / "a").exists()


def test_the_relocate_command_a_moved_store_is_told_to_run_pastes_into_a_shell_as_one(tmp_path: Path) -> None:
    """A store copied to a folder with a space in its name: the command the refusal suggests
    quotes the folder, so that a shell reads it as one word (until 0.9.8 it was split in two,
    ``--tracking-uri /tmp/moved`` and ``copy ü``, and failed when pasted)."""
    import re
    import shlex

    original, copy = tmp_path / "a" / "runs", tmp_path / "moved copy ü"
    _log(original, "resnet18")
    shutil.copytree(original, copy)

    code, out = _cli(copy, "profile", "network", "squeezenet1_1", "--batch-size", "1")
    assert code == 1 and f"run `tracker --tracking-uri {shlex.quote(str(copy))} store relocate` to keep them" in out, out
    [command] = re.findall(r"`(tracker [^`]*)`", out)
    words = shlex.split(command)
    assert words == ["tracker", "--tracking-uri", str(copy), "store", "relocate"]
    pasted = CliRunner().invoke(app, words[1:])
    assert pasted.exit_code == 0 and pasted.output.startswith(f"{original / 'artifacts'} -> {copy / 'artifacts'}: "), \
        pasted.output
    assert all(p.startswith(str(copy)) for p in _paths(copy))
    plain = tmp_path / "b"  # a path a shell reads as one word stays as it is
    assert f"run `tracker --tracking-uri {plain} store relocate`" in moved_message(resolve_location(str(plain)),
                                                                                 original / "artifacts")


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
    # a copy in part (one run's artifacts of two) is refused too: it was taken until 0.9.2
    second = _log(original, "resnet50")
    partial = tmp_path / "d" / "runs"
    shutil.copytree(original, partial)
    [gone] = [p for p in (partial / "artifacts").glob(f"*/{second}")]
    shutil.rmtree(gone)
    code, out = _cli(partial, "store", "relocate")
    assert code == 1 and out.startswith(f"{partial / 'artifacts'} lacks the artifacts of 1 of the 2 runs kept in "
                                        f"{original / 'artifacts'} (such as "), out
    assert second in out and out.endswith("copy them too first (nothing was changed)")

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


def test_a_store_in_a_folder_named_with_url_characters_keeps_everything_in_that_folder(tmp_path: Path) -> None:
    """SQLAlchemy and MLflow read a ``%XX`` in a store's path as an escape, and a colon inside a
    path is not a URI's scheme: the store still opens the folder named, MLflow's own client reads
    and writes its artifacts there, the warehouse reads them, and a copy relocates. DuckDB cannot
    keep a warehouse under a ``?``: one line."""
    from tracker.describe import describe
    from tracker.log.record import DESCRIPTION_ARTIFACT
    from tracker.settings import local_path

    odd = tmp_path / "50% a%20b#c 12:30"
    runs = odd / "runs"
    first = _log(runs, "resnet18")
    record = network_record("squeezenet1_1", 1)
    record.artifacts[DESCRIPTION_ARTIFACT] = json.dumps(describe("squeezenet1_1", 64).to_json())
    RunLogger(str(runs), experiment="moved", environment=ENV).log([record])
    location = resolve_location(str(runs))
    assert location.db_path == runs / "mlflow.db" and location.artifact_root == str(runs / "artifacts")
    assert (runs / "artifacts" / "1" / first / "artifacts" / "notes" / "note.txt").read_text() == "measured resnet18"
    client = MlflowClient(location.uri)
    assert Path(client.download_artifacts(first, "notes/note.txt", str(tmp_path))).read_text() == "measured resnet18"
    by_mlflow = client.create_run("1").info.run_id
    client.log_text(by_mlflow, "logged by mlflow", "mlflow.txt")
    client.set_terminated(by_mlflow)
    assert (runs / "artifacts" / "1" / by_mlflow / "artifacts" / "mlflow.txt").read_text() == "logged by mlflow"

    code, out = _cli(runs, "warehouse", "load", "--warehouse", str(odd / "w.duckdb"), "--format", "json")
    assert code == 0 and json.loads(out)["descriptions_added"] == 1, out
    # A sqlite:/// URI of the same store keeps its SQLAlchemy options (after the '?') for the engine.
    optioned = resolve_location(location.uri + "?timeout=20")
    assert optioned.uri == location.uri + "?timeout=20" and optioned.db_path == location.db_path
    listed = CliRunner().invoke(app, ["--tracking-uri", optioned.uri, "-e", "moved", "runs", "list", "--format", "json"])
    assert listed.exit_code == 0 and {first, by_mlflow} <= {r["run_id"] for r in json.loads(listed.stdout)}, listed.output

    copy = tmp_path / "copy 10%25" / "runs"
    shutil.copytree(runs, copy)
    code, out = _cli(copy, "store", "relocate")
    assert code == 0 and out.startswith(f"{runs / 'artifacts'} -> {copy / 'artifacts'}: "), out
    assert all(copy in local_path(p).parents for p in _paths(copy)), _paths(copy)
    copied = MlflowClient(resolve_location(str(copy)).uri)
    assert Path(copied.download_artifacts(by_mlflow, "mlflow.txt", str(tmp_path))).read_text() == "logged by mlflow"

    asked = tmp_path / "why?" / "runs"
    code, out = _cli(asked, "warehouse", "load")
    assert code == 1 and out.startswith(f"cannot keep a warehouse at {asked / 'warehouse.duckdb'}: DuckDB reads"), out


def test_a_store_relocate_cannot_read_or_write_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy cut short, one on a read-only mount, and one another process holds locked: each a
    line, worded as the commands that read a store word it (SQLite's and SQLAlchemy's tracebacks
    until 0.9.8); nothing changed."""
    import subprocess

    import tracker.log.sql_store as sql_store

    original = tmp_path / "a" / "runs"
    _log(original, "resnet18")
    cut = tmp_path / "cut" / "runs"
    cut.mkdir(parents=True)
    (cut / "mlflow.db").write_bytes((original / "mlflow.db").read_bytes()[:100_000])  # head -c 100000
    code, out = _cli(cut, "store", "relocate")
    assert (code, out) == (1, f"cannot read tracking database sqlite:///{cut / 'mlflow.db'}: database disk image is "
                              "malformed"), out

    locked = tmp_path / "locked" / "runs"
    shutil.copytree(original, locked)
    before = _paths(locked)
    monkeypatch.setattr(sql_store, "BUSY_TIMEOUT_S", 0.5)  # a wait for the lock of half a second, not a minute
    with closing(sqlite3.connect(locked / "mlflow.db", isolation_level=None)) as other:
        other.execute("BEGIN EXCLUSIVE")
        code, out = _cli(locked, "store", "relocate")
        other.execute("ROLLBACK")
    assert (code, out) == (1, f"tracking store {locked / 'mlflow.db'} is locked by another process (a command writing "
                              "to it, or an open MLflow UI's write): nothing was changed; run store relocate again once "
                              "it is done"), out
    assert _paths(locked) == before

    copy = tmp_path / "copy" / "runs"
    shutil.copytree(original, copy)
    mounted = tmp_path / "ro"
    mounted.mkdir()
    if subprocess.run(["mount", "--bind", str(copy), str(mounted)], capture_output=True).returncode != 0:
        return  # not root, or no mount namespace: the two above are this test's
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], capture_output=True).returncode == 0:
            code, out = _cli(mounted, "store", "relocate")
            assert code == 1 and out.startswith(f"cannot open tracking store {mounted / 'mlflow.db'}: its folder "
                                                f"{mounted} is not writable"), out
    finally:
        subprocess.run(["umount", str(mounted)], capture_output=True)
