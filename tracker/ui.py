"""``tracker ui``: the MLflow UI on the same store the runs are logged to."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from tracker.errors import TrackerError, terminate
from tracker.settings import UI_WORKERS, mlflow_path, resolve_location

HOST = "127.0.0.1"


def ui_command(tracking_uri: str | None, port: int, workers: int = UI_WORKERS) -> list[str]:
    """The ``mlflow server`` command line that serves the UI over this store, in ``workers`` processes."""
    location = resolve_location(tracking_uri)
    if location.is_http:
        raise TrackerError(f"{location.uri} is a tracking server with its own UI: open it in a browser")
    from tracker.log.store import open_store

    store = open_store(location)
    store.engine()  # type: ignore[attr-defined]  # creates the embedded store on first use, checks its schema
    store.close()
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", location.uri, "--host", HOST, "--port", str(port),
           "--workers", str(workers)]
    if location.artifact_root:
        cmd += ["--default-artifact-root", mlflow_path(location.artifact_root)]
    return cmd


#: MLflow 3's server starts a job runner (seven huey consumer processes, each importing MLflow:
#: about 15 CPU-seconds and 4 to 5 s longer to start on two cores) for GenAI jobs that tracker
#: never submits. ``tracker ui`` turns it off unless the user set the variable.
JOBS_VARIABLE = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"


def ui_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment ``tracker ui`` starts ``mlflow server`` in: ``environ`` (default: ours),
    with MLflow's job runner off unless ``environ`` says otherwise."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault(JOBS_VARIABLE, "false")
    # Starlette's deprecation warnings, four at each start, are MLflow's to mend, not the user's (0.9.4)
    env.setdefault("PYTHONWARNINGS", STARLETTE_WARNINGS)
    return env


#: The warnings filter ``tracker ui`` starts the server with (``PYTHONWARNINGS`` of the environment wins).
STARLETTE_WARNINGS = "ignore:starlette.middleware.wsgi is deprecated:UserWarning"


#: MLflow 3 opens experiments in its GenAI view by default; tracker's runs read best in the
#: "Model training" view (runs table, nested runs, metrics), chosen by this query parameter.
WORKFLOW = "workflowType=machine_learning"


def ui_url(port: int, route: str = "/experiments") -> str:
    """The address of a page of the UI, in the view tracker's runs are meant for."""
    return f"http://{HOST}:{port}/#{route}?{WORKFLOW}"


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def serve_ui(tracking_uri: str | None, port: int, workers: int = UI_WORKERS) -> None:
    cmd = ui_command(tracking_uri, port, workers)
    if not port_free(port):
        raise TrackerError(f"port {port} on {HOST} is in use; pick another with --port")
    print(f"MLflow UI on {ui_url(port)} (Ctrl-C to stop)", flush=True)
    # The server runs in its own process group with its workers; whatever stops us
    # (Ctrl-C, SIGTERM) stops the whole group, so no worker is left behind.
    proc = subprocess.Popen(cmd, start_new_session=True, env=ui_environment())
    # SIGTERM as the tracker command takes it (tracker.errors.terminate: a Ctrl-C, marked so that the
    # command ends with 143), here too where the command's own handler is not set (a CliRunner)
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # said by the command, status 130 (143 for SIGTERM); it returned, status 0, until 0.9.8
        stop_process_group(proc)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if code not in (0, -2, 130):
        raise TrackerError(f"the MLflow UI exited with status {code}")


def stop_process_group(proc: subprocess.Popen) -> None:
    """Stop a process started with ``start_new_session=True`` and everything it spawned."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
