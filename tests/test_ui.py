"""`tracker ui`'s server environment. The UI itself is tested over the demo's store in
tests/test_demo.py: `tracker --tracking-uri STORE ui`, its API, its process group, a real browser."""

from tracker.ui import ui_environment


def test_the_ui_server_runs_without_mlflows_job_runner_unless_asked() -> None:
    """tracker submits no MLflow jobs: its server starts without the job runner's seven consumer
    processes; a user who sets the variable gets them."""
    assert ui_environment({})["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert ui_environment({"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "true"})["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "true"
    assert ui_environment({"PATH": "/x"})["PATH"] == "/x"
