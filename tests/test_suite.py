"""The suite's own scheduling (tests/conftest.py): what `make test` relies on to run in two workers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_the_suites_groups_hold_in_two_workers(tmp_path: Path) -> None:
    """Under ``pytest -n 2 --dist loadgroup`` (``make test``), the ``alone`` tests run in one worker
    and a module's tests that share a fixture made once per module run in one worker, which makes
    it once, as do the tests of any module that use a session's server (since 0.9.15). Until 0.9.10 no group held (xdist 3.8 wrote a test's group where pytest 9.2 no longer
    reads it) and nothing said so; conftest reaches into pytest's private ids to put it there, so
    this runs the suite's conftest on a small suite of its own and reads where each test ran."""
    suite = tmp_path / "tests"
    suite.mkdir()
    (suite / "__init__.py").write_text("")
    shutil.copy(HERE / "conftest.py", suite / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    alone: runs alone\n    slow: slow\n")
    record = tmp_path / "ran.txt"
    head = ("import os\nfrom pathlib import Path\n\nimport pytest\n\n\n"
            f"def _ran(name: str) -> None:\n    with open({str(record)!r}, 'a') as f:\n"
            "        from tracker.profile.devicelock import lock_folder\n\n"
            "        f.write(f\"{name} {os.environ.get('PYTEST_XDIST_WORKER', 'main')} {lock_folder()}\\n\")\n\n\n")
    body = "".join(f"@pytest.mark.alone\ndef test_alone_{i}() -> None:\n    _ran('alone')\n\n\n"
                   f"def test_plain_{i}() -> None:\n    _ran('plain')\n\n\n" for i in range(6))
    # an alone test whose parameter's id holds "@", as xdist's group suffix does (ungrouped until 0.9.20)
    body += ("@pytest.mark.alone\n@pytest.mark.parametrize('line', ['x@12C', 'x'])\n"
             "def test_alone_at(line: str, request: pytest.FixtureRequest) -> None:\n"
             "    _ran('alone' if request.node.nodeid.endswith('@alone') else 'ungrouped')\n\n\n")
    (suite / "test_a.py").write_text(head + body)
    shared = ("@pytest.fixture(scope='module')\ndef made() -> int:\n    _ran('made')\n    return 1\n\n\n"
              + "".join(f"def test_shared_{i}(made: int) -> None:\n    _ran('shared')\n\n\n" for i in range(6)))
    (suite / "test_b.py").write_text(head + shared)
    # tests of two modules that use a session's server (conftest's SERVER_FIXTURES; here one that starts nothing)
    servers = suite / "servers"
    servers.mkdir()
    (servers / "__init__.py").write_text("")
    (servers / "conftest.py").write_text(head.replace("\n\n\ndef _ran", "\n\n\n@pytest.fixture(scope='session')\n"
                                                      "def mlflow_server() -> str:\n    _ran('server')\n"
                                                      "    return 'http://server'\n\n\ndef _ran"))
    for module in "cd":
        (servers / f"test_{module}.py").write_text(head + "".join(
            f"def test_served_{i}(mlflow_server: str) -> None:\n    _ran('served')\n\n\n" for i in range(4)))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("TRACKER_SUITE_TURNS", None)  # its own lock files, not this suite's: it runs alone tests too
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", str(suite)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran: dict[str, list[str]] = {}
    locks: dict[str, set[str]] = {}
    for line in record.read_text().splitlines():
        name, worker, lock_folder = line.split()
        ran.setdefault(name, []).append(worker)
        locks.setdefault(worker, set()).add(lock_folder)
    assert len(ran["alone"]) == 8 and len(set(ran["alone"])) == 1, ran  # the alone tests, one worker
    assert len(ran["shared"]) == 6 and len(set(ran["shared"])) == 1, ran  # the module's tests, one worker
    assert len(ran["made"]) == 1, ran  # so its fixture was made once
    # and the tests of a session's server, of any module, one worker: it starts once (once a worker until 0.9.15)
    assert len(ran["served"]) == 8 and len(set(ran["served"])) == 1 and len(ran["server"]) == 1, ran
    assert set(ran["plain"]) <= {"gw0", "gw1"} and len(ran["plain"]) == 6, ran
    # each worker measures under device locks of its own (both took turns on one until 0.9.16)
    assert set(locks) == {"gw0", "gw1"} and all(len(folders) == 1 for folders in locks.values()), locks
    assert locks["gw0"] != locks["gw1"], locks
