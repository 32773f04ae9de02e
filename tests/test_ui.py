"""`tracker ui`'s server environment and how it stops. The UI itself is tested over the demo's store in
tests/test_demo.py: `tracker --tracking-uri STORE ui`, its API, its process group, a real browser."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port, sigint_default
from tracker.ui import ui_environment

ROOT = Path(__file__).resolve().parents[1]


def test_the_ui_server_runs_without_mlflows_job_runner_unless_asked() -> None:
    """tracker submits no MLflow jobs: its server starts without the job runner's seven consumer
    processes; a user who sets the variable gets them."""
    assert ui_environment({})["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert ui_environment({"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "true"})["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "true"
    assert ui_environment({"PATH": "/x"})["PATH"] == "/x"


@pytest.mark.parametrize(("how", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_the_ui_stopped_by_ctrl_c_or_sigterm_says_so_and_ends_its_process_group(tmp_path: Path, how: str,
                                                                                status: int) -> None:
    """Ctrl-C is how the UI stops; it ended with status 0, as if it had not been stopped, until 0.9.8
    (every other command: 130, and 143 for SIGTERM). Its server's process group goes with it. The
    server here is a stand-in that waits (MLflow's own is started over the demo's store in
    tests/test_demo.py)."""
    (tmp_path / "server.py").write_text(
        # its pid written whole, then named: the test reads the file once it exists (written in place, it was
        # read empty once, between its creation and its write)
        "import os, pathlib, time\npathlib.Path('server.pid.part').write_text(str(os.getpid()))\n"
        "os.replace('server.pid.part', 'server.pid')\ntime.sleep(120)\n")
    start = ("import sys, tracker.ui as ui\n"
             "ui.ui_command = lambda uri, port, workers: [sys.executable, 'server.py']\n"
             "sys.argv = ['tracker', 'ui', '--port', sys.argv[1]]\n"
             "from tracker.cli import main\nmain()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", start, str(free_port())], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    try:
        deadline = time.time() + 60
        while not (tmp_path / "server.pid").exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        server = int((tmp_path / "server.pid").read_text())
        proc.send_signal(getattr(signal, how))
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert out.startswith("MLflow UI on http://127.0.0.1:")
    assert proc.returncode == status, (proc.returncode, err)
    assert err == "interrupted: the MLflow UI is stopped, its server's processes with it\n", err
    with pytest.raises(ProcessLookupError):
        os.killpg(server, 0)  # the server's group is gone
