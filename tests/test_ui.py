"""`tracker ui` serves the MLflow UI and API over the embedded store (browser test: issue 10)."""

import os
import subprocess
import sys

import psutil
from pathlib import Path

import requests

from tracker.log.logger import RunLogger
from tracker.ui import ui_environment

from tests.conftest import ENV, free_port, layer_record, network_record, wait_http


def test_ui_serves_the_embedded_store(tmp_path: Path) -> None:
    logger = RunLogger(str(tmp_path / "runs"), experiment="ui", environment=ENV)
    net = network_record()
    logger.log([net, layer_record(net, 0)])
    logger.close()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker", "--tracking-uri", str(tmp_path / "runs"), "ui", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health", proc)
        assert requests.get(base, timeout=5).status_code == 200  # the UI's page
        exp = requests.get(f"{base}/api/2.0/mlflow/experiments/get-by-name", params={"experiment_name": "ui"}, timeout=5).json()
        runs = requests.post(
            f"{base}/api/2.0/mlflow/runs/search",
            json={"experiment_ids": [exp["experiment"]["experiment_id"]], "filter": f"tags.`mlflow.parentRunId` = '{net.run_id}'"},
            timeout=5,
        ).json()["runs"]
        assert len(runs) == 1 and runs[0]["info"]["run_name"] == "000 conv0 (Conv2d)"
    finally:
        descendants = psutil.Process(proc.pid).children(recursive=True)
        commands = [" ".join(p.cmdline()) for p in descendants if p.is_running()]
        proc.terminate()  # `tracker ui` takes its server's whole process group down with it
        proc.wait(20)
    assert descendants, "the UI server runs as a child of `tracker ui`"
    # MLflow's job runner is off (tracker submits no jobs); a user who sets the variable gets it.
    assert not [c for c in commands if "huey_consumer" in c], commands
    assert ui_environment({})["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert ui_environment({"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "true"})["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "true"
    gone, alive = psutil.wait_procs(descendants, timeout=15)
    assert alive == [], f"the MLflow server or its workers outlived `tracker ui`: {alive}"
