"""`tracker demo --quick` end to end on a fresh embedded store, then the MLflow UI in a real
headless Chromium (Debian's chromium and chromium-driver, driven by Selenium) over that store.

The quick demo runs the same flow as `tracker demo` with fewer networks and shorter caps;
its store is made once per module and shared by the tests below.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import alone_now, free_port, wait_ci_packages, wait_http

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "test-results"


#: The commentary's line that follows the demo's last measurement (the warehouse's load, after its campaigns).
MEASURED_LINE = "  warehouse "


def _demo(folder: Path) -> tuple[dict, str]:
    """``tracker demo --quick --format json`` run in ``folder``: its summary and its commentary. Its
    measurements are taken while no other test of the suite runs (``alone_now``), up to the commentary's
    line that follows the last of them; what it does after (a fingerprint's training, predictions, the
    report) beside the others' tests. The whole demo held the suite alone in 0.9.16's first commit."""
    env = {**os.environ, "TRACKER_RUNS_DIR": str(folder / "runs"), "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    import threading

    said: list[str] = []
    with (folder / "demo.json").open("w+") as out, alone_now() as alone:
        proc = subprocess.Popen([sys.executable, "-m", "tracker", "demo", "--quick", "--format", "json"], cwd=folder,
                                env=env, stdout=out, stderr=subprocess.PIPE, text=True)
        deadline = threading.Timer(600, proc.kill)  # its 600 s, as subprocess.run's timeout gave it: a hung demo ends
        deadline.start()
        try:
            for line in proc.stderr:  # type: ignore[union-attr]  # a pipe: stderr=PIPE
                said.append(line)
                if line.startswith(MEASURED_LINE):
                    alone.end()
            proc.wait()
        finally:
            deadline.cancel()
            proc.kill()
        out.seek(0)
        summary = out.read()
    commentary = "".join(said)
    assert proc.returncode == 0, commentary[-3000:]
    assert any(line.startswith(MEASURED_LINE) for line in said), commentary[-3000:]  # else alone to the end
    return json.loads(summary), commentary


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict, str]]:
    folder = tmp_path_factory.mktemp("demo")
    summary, commentary = _demo(folder)
    yield folder, summary, commentary


def test_quick_demo_measures_learns_predicts_and_reuses(demo_store: tuple[Path, dict, str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    folder, first, commentary = demo_store
    inference = first["campaigns"]["demo-inference"]
    assert inference["total"] == 7 and inference["measured"] == 6 and inference["skipped"] == 1, first["campaigns"]  # squeezenet1_1 bs1 came with its layers
    assert first["campaigns"]["demo-layers"]["measured"] == 1
    assert first["campaigns"]["demo-training"]["measured"] >= 1
    (fp,) = first["fingerprints"]
    assert "error" not in fp, f"the quick demo's fingerprint was not trained (a machine too loaded to measure?): {fp}"
    assert fp["name"] == "latency_ms-inference-cpu" and fp["champion"] and not fp["reused"], fp
    unseen = {r["model"] for r in first["unseen"]}
    assert "mnasnet0_5" in unseen and any(m.startswith("gen-") for m in unseen), first["unseen"]
    assert all(r["predicted_latency_ms"] > 0 and r["measured_latency_ms"] > 0 for r in first["unseen"])
    assert "never saw" in commentary and "tracker ui" in commentary
    # each prediction the next steps suggest answers on this store (the quick demo learns no
    # memory fingerprint, so they suggest no --largest-batch, which would need one)
    suggested = [line.split()[1:5] for line in commentary.splitlines() if line.startswith("  tracker predict ")]
    assert suggested and not any("--largest-batch" in args for args in suggested), commentary
    # run here, from the demo's folder, as its user would type them there (a new process for each
    # cost 6 s of imports; `tracker demo` itself ran as one above)
    from typer.testing import CliRunner

    from tracker.cli.app import app

    monkeypatch.chdir(folder)
    for args in suggested:
        out = CliRunner().invoke(app, args, env={"TRACKER_RUNS_DIR": str(folder / "runs"), "MLFLOW_TRACKING_URI": None})
        assert out.exit_code == 0 and "latency_ms" in out.stdout, (args, out.output, out.exception)
    report = first["report"]
    assert report["by_kind"].get("layers", 0) >= 1 and report["by_kind"].get("batch", 0) >= 1
    assert report["by_kind"].get("fingerprints", 0) >= 1 and report["logged"] >= 1
    index = (Path(report["folder"]) / "index.html").read_text()
    assert "layer-wise latency breakdown" in index

    # The unseen networks were measured but never learnt from.
    runs_json = next((folder / "runs" / "artifacts").rglob("evaluation/networks.json"))
    import duckdb

    con = duckdb.connect(first["warehouse"], read_only=True)
    learnt = set(json.loads(runs_json.read_text()))
    unseen_hashes = {h for (h,) in con.execute(
        "SELECT DISTINCT model_hash FROM latest_measurements WHERE list_contains($m, model)", {"m": sorted(unseen)}).fetchall()}
    con.close()
    assert unseen_hashes and not unseen_hashes & learnt

    # run twice, from another folder, naming the store: nothing measured or trained again, and its files (the
    # report, the network specs) are the store's, where they were (./runs of the current folder until 0.9.11)
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = CliRunner().invoke(app, ["--tracking-uri", str(folder / "runs"), "demo", "--quick", "--format", "json"],
                               env={"TRACKER_RUNS_DIR": None, "MLFLOW_TRACKING_URI": None})
    assert again.exit_code == 0, (again.output, again.exception)
    assert not any(elsewhere.iterdir()), list(elsewhere.rglob("*"))
    second = json.loads(again.stdout)
    assert all(t["measured"] == 0 and t["failed"] == 0 for t in second["campaigns"].values()), second["campaigns"]
    assert second["fingerprints"][0]["reused"] and second["fingerprints"][0]["version"] == fp["version"]
    assert {r["model"] for r in second["unseen"]} == unseen
    redrawn = second["report"]
    assert redrawn["folder"] == report["folder"] == str(folder / "runs" / "report"), redrawn
    assert (redrawn["drawn"], redrawn["logged"], redrawn["unchanged"]) == (0, 0, report["pictures"]), redrawn


def _chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture()
def browser() -> Iterator[object]:
    wait_ci_packages()
    found = _chromium()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have Debian's chromium and chromium-driver (.ci/run installs them)")
        pytest.skip("no chromium/chromedriver here: apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1800,1100"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(found[1]), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _page(driver, url: str, *texts: str, shot: str, any_of: tuple[str, ...] = ()) -> str:  # type: ignore[no-untyped-def]
    """Open ``url``, wait until every one of ``texts`` (and one of ``any_of``, if given: parts
    the page fills in after it first renders) is on the page, screenshot it, return the text."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    RESULTS.mkdir(exist_ok=True)
    try:
        WebDriverWait(driver, 60, poll_frequency=0.5).until(
            lambda d: (body := d.find_element("tag name", "body").text) is not None
            and all(t in body for t in texts) and (not any_of or any(t in body for t in any_of)))
    except TimeoutException:
        driver.save_screenshot(str(RESULTS / f"ui-{shot}-failed.png"))
        body = driver.find_element("tag name", "body").text
        raise AssertionError(f"{url}: not all of {texts} (and one of {any_of[:3]}...) on the page; "
                             f"it shows:\n{body[:2000]}") from None
    driver.save_screenshot(str(RESULTS / f"ui-{shot}.png"))
    return driver.find_element("tag name", "body").text


def test_the_demo_in_the_mlflow_ui_in_a_real_browser(demo_store: tuple[Path, dict, str],
                                                     request: pytest.FixtureRequest) -> None:
    """`tracker --tracking-uri STORE ui` serves MLflow's UI and API over the demo's store, without
    MLflow's job runner, and takes its server down with it when it is stopped; then a real
    Chromium reads the demo's runs, nested layer runs and fingerprint in that UI."""
    import psutil

    from tracker.ui import ui_url

    folder, summary, _ = demo_store
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "--tracking-uri", str(folder / "runs"), "ui",
                             "--port", str(port)], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    descendants: list[psutil.Process] = []
    try:
        wait_http(f"{base}/health", proc)
        assert requests.get(base, timeout=10).status_code == 200  # the UI's page
        api = f"{base}/api/2.0/mlflow"
        exp_id = requests.get(f"{api}/experiments/get-by-name", params={"experiment_name": "demo"},
                              timeout=10).json()["experiment"]["experiment_id"]
        layer = requests.post(f"{api}/runs/search", json={"experiment_ids": [exp_id], "max_results": 1,
                                                         "filter": "tags.`tracker.kind` = 'layer'"}, timeout=10).json()["runs"][0]
        tags = {t["key"]: t["value"] for t in layer["data"]["tags"]}
        parent = requests.get(f"{api}/runs/get", params={"run_id": tags["mlflow.parentRunId"]}, timeout=10).json()["run"]
        parent_name = parent["info"]["run_name"]
        children = requests.post(f"{api}/runs/search", json={
            "experiment_ids": [exp_id], "filter": f"tags.`mlflow.parentRunId` = '{parent['info']['run_id']}'"},
            timeout=10).json()["runs"]
        assert len(children) > 10, "squeezenet1_1 is measured layer by layer"
        assert all(re.fullmatch(r"\d{3} \S+ \(\w+\)", c["info"]["run_name"]) for c in children), children[0]["info"]
        latency = next(m["value"] for m in parent["data"]["metrics"] if m["key"] == "latency_ms")
        descendants = psutil.Process(proc.pid).children(recursive=True)
        commands = [" ".join(p.cmdline()) for p in descendants if p.is_running()]
        assert descendants, "the UI server runs as a child of `tracker ui`"
        # MLflow's job runner is off (tracker submits no jobs).
        assert not [c for c in commands if "huey_consumer" in c], commands
        # one process serves (UI_WORKERS): MLflow's four workers, their supervisor and a resource tracker until 0.9.20
        assert len([c for c in commands if " -m uvicorn " in f" {c} "]) == 1, commands
        assert not [c for c in commands if "multiprocessing" in c], commands

        browser = request.getfixturevalue("browser")  # skips here, the server checked, where there is no Chromium
        _page(browser, ui_url(port), "demo", "fingerprints", shot="experiments")
        runs = _page(browser, ui_url(port, f"/experiments/{exp_id}"), "Runs", parent_name, shot="demo-runs")
        assert "matching runs" in runs
        run_page = _page(browser, ui_url(port, f"/experiments/{exp_id}/runs/{parent['info']['run_id']}"),
                         parent_name, "latency_ms", "sum_of_layers_ratio", "Child runs", shot="network-run",
                         any_of=tuple(c["info"]["run_name"] for c in children))
        shown = [c["info"]["run_name"] for c in children if c["info"]["run_name"] in run_page]
        assert shown, "the network run's page lists its nested layer runs"
        assert f"{latency}"[:6] in run_page  # the metric's value as logged
        # the telemetry over its measurement window, charted against time in the System metrics tab
        _page(browser, ui_url(port, f"/experiments/{exp_id}/runs/{parent['info']['run_id']}/system-metrics"),
              "System metrics", "(system/cpu_util_pct)", "(system/proc_rss_mb)", shot="system-metrics")  # drawn: legends
        layer_page = _page(browser, ui_url(port, f"/experiments/{exp_id}/runs/{layer['info']['run_id']}"),
                           "Parent run", parent_name, "op_type", shot="layer-run")
        assert "layer_index" in layer_page
        name = summary["fingerprints"][0]["name"]
        _page(browser, ui_url(port, "/models"), name, shot="models")
        model = _page(browser, ui_url(port, f"/models/{name}"), "Version 1", "champion", "heldout_mape_pct", shot="model")
        assert "@ champion" in model or "@champion" in model.replace(" ", "")
    finally:
        from tracker.ui import stop_process_group

        proc.terminate()  # `tracker ui` takes its server's whole process group down with it
        try:
            proc.wait(20)
        finally:
            _, alive = psutil.wait_procs(descendants, timeout=15)
            stop_process_group(proc)  # whatever it left, so that a failure here leaks nothing
    assert alive == [], f"the MLflow server or its workers outlived `tracker ui`: {alive}"
    said = proc.stdout.read() if proc.stdout else ""  # Starlette's four deprecation warnings, MLflow's, until 0.9.4
    assert "DeprecationWarning" not in said and "Invalid -W option" not in said, said[-3000:]


def test_the_demo_measures_with_the_c_librarys_own_allocator_where_it_cannot_retain(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import tracker.profile.modes as modes
    from tracker.demo import FULL, for_this_machine

    assert modes.allocator_available("retain") and modes.allocator_available("system")  # glibc here
    assert for_this_machine(FULL) == (FULL, None) and FULL.allocator == "retain" and FULL.threads == 1
    monkeypatch.setattr(modes, "allocator_available", lambda name: name == "system")  # as on macOS or musl
    plan, note = for_this_machine(FULL)
    assert plan.allocator is None and plan.threads == 1 and note and "no glibc mallopt" in note
    assert modes.read_mode("cpu", plan.threads, plan.allocator).mode_id.startswith("cpu-t1")
    assert "retain" not in modes.read_mode("cpu", plan.threads, plan.allocator).mode_id


def test_the_next_steps_name_the_demos_store_and_report(tmp_path: Path) -> None:
    """After `tracker --tracking-uri X demo` each next step names that store (none did until 0.9.10,
    and pasted they read the default store), and the report command its own folder."""
    from rich.console import Console

    from tracker.demo import _next_steps

    console = Console(record=True, width=2000)  # a long folder's commands on one line each
    _next_steps(console, [], 4, ("resnet18", "a" * 32, "b" * 32), store=["--tracking-uri", str(tmp_path / "my store")],
                report_folder=tmp_path / "my store" / "report")
    lines = [line.strip() for line in console.export_text().splitlines() if line.strip().startswith("tracker")]
    assert len(lines) >= 7 and all(line.startswith(f"tracker --tracking-uri '{tmp_path / 'my store'}' ") for line in lines)
    assert f"report '{tmp_path / 'my store' / 'report'}'" in "\n".join(lines)
    assert any(" -e demo runs compare aaaaaaaa bbbbbbbb" in line for line in lines)
