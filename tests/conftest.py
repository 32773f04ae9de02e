from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tracker.log.record import RunRecord
from tracker.ui import stop_process_group

#: A fixed environment so store tests need not import torch.
ENV = {"env.host": "test-host", "env.cpu_count": "2", "env.threads": "2", "env.torch_version": "2.14.1"}

COMMON = dict(phase="inference", device="cpu", precision="float32", mode="cpu-t2")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own runs/ folder and no tracking URI from the outside."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("TRACKER_RUNS_DIR", str(tmp_path / "runs"))


def network_record(model: str = "resnet18", batch_size: int = 1, **metrics: float) -> RunRecord:
    return RunRecord(
        kind="network",
        name=f"{model} · bs{batch_size}",
        params=dict(model=model, model_hash="abc123", batch_size=batch_size, input_size=224, **COMMON),
        metrics={"latency_ms": 12.5, "latency_ci_rel": 0.01, "samples_count": 30, "throughput_per_s": 80.0, **metrics},
        tags={"tracker.stop_reason": "precision"},
        key_fields={"model": model, "batch_size": batch_size},
    )


def layer_record(parent: RunRecord | str, index: int, model: str = "resnet18") -> RunRecord:
    return RunRecord(
        kind="layer",
        name=f"{index:03d} conv{index} (Conv2d)",
        parent=parent,
        params=dict(model=model, model_hash="abc123", layer_index=index, layer_name=f"conv{index}", op_type="Conv2d", batch_size=1, **COMMON),
        metrics={"latency_ms": 0.5 + index, "latency_ci_rel": 0.02, "samples_count": 20},
        key_fields={"model": model, "layer": index},
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout_s: float = 90.0) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise TimeoutError(url)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real MLflow tracking server on loopback, serving artifacts, on a SQLite backend."""
    root = tmp_path_factory.mktemp("server")
    port = free_port()
    cmd = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{root / 'server.db'}",
        "--artifacts-destination", str(root / "artifacts"),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "2",
    ]
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{uri}/health", proc)
        yield uri
    finally:
        stop_process_group(proc)
        log.close()
