"""Profilers end to end on CPU: child processes, faults, OOM boundary, campaigns and resume."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.conftest import count_runs, sigint_default
from tracker.cli.app import app
from tracker.errors import ConfigError
from tracker.log.logger import RunLogger
from tracker.profile.api import find_boundary, profile_network
from tracker.profile.child import run_child
from tracker.profile.stats import MIN_SAMPLES, Stopping

FAST = Stopping(target_ci_rel=0.2, time_cap_s=0.3, warmup_cap_s=0.2)
TINY = "squeezenet1_1"


def job(**extra):
    return {"model": TINY, "batch_size": 1, "input_size": 64, "rule": {"target_ci_rel": 0.2, "time_cap_s": 0.3, "warmup_cap_s": 0.2}, **extra}


@pytest.mark.parametrize(
    "fault, reason",
    [("oom", "oom"), ("kill", "killed"), ("crash", "crash")],
)
def test_a_faulty_child_comes_back_as_a_reason(fault: str, reason: str) -> None:
    result = run_child(job(), timeout_s=120, env={"TRACKER_FAULT": fault})
    assert not result.ok and result.reason == reason


def test_a_hung_child_is_killed_at_its_time_limit() -> None:
    t0 = time.time()
    result = run_child(job(), timeout_s=3, env={"TRACKER_FAULT": "hang"})  # hung, or still starting: a timeout
    assert not result.ok and result.reason == "timeout" and time.time() - t0 < 30


def test_a_time_limit_under_what_a_measurement_may_take_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--timeout 1 with a 3 s warm-up cap and a 0.3 s time cap: a configuration that needs them is
    killed, and until 0.9.1 its run said only "no result within 1 s". It now says what the limit
    was under and the least that lets it finish; a limit above that is left to its own line."""
    monkeypatch.setenv("TRACKER_FAULT", "hang")  # the child hangs: only the time limit ends it
    store = tmp_path / "s"
    said = {}
    for limit in ("1", "6"):
        out = CliRunner().invoke(app, ["--tracking-uri", str(store), "profile", "network", TINY, "-b", "1", "--time-cap",
                                       "0.3", "--timeout", limit, "--again", "--format", "json"])
        run = json.loads(out.stdout)
        assert run["status"] == "FAILED" and run["failure_reason"] == "timeout"
        assert out.exit_code == 3  # measured, and failed: a script can tell (0 until 0.9.1)
        said[limit] = run["failure_message"]
    assert said["1"].startswith("no result within 1 s: a time limit under what a measurement may take, its warm-up up to "
                                "3 s, its sampling up to 0.3 s (--time-cap, a campaign's time_cap_s)")
    assert "give it at least 5.3 s" in said["1"]
    assert said["6"] == "no result within 6 s"


def test_a_timeout_in_the_layers_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A layers profile whose time ran out in its layers, past the network's measurement: until 0.9.8 its
    message was "no result within 4 s" alone (the hint, "at least 2.5 s", counted the network alone). It
    now says where the time ran out, and the hint under the network's own time counts the layers too."""
    monkeypatch.setenv("TRACKER_FAULT", "layers:hang")  # the network measured, then its layers never end
    monkeypatch.setenv("TRACKER_FAULT_MARK", str(tmp_path / "mark"))
    logger = RunLogger(str(tmp_path / "s"), experiment="layers")
    layer_rule = FAST.for_layers()
    r = profile_network(logger, TINY, 1, FAST, layers=True, layer_rule=layer_rule, timeout_s=4, input_size=64)
    assert r.network.status == "FAILED" and r.network.tags["tracker.failure_reason"] == "timeout"
    each = layer_rule.warmup_cap_s + layer_rule.time_cap_s
    assert r.network.tags["tracker.failure_message"] == (
        "no result within 4 s: the time ran out while its layers were measured, after the network's own measurement "
        f"(which took up to 2.5 s with its child's start), then each of its layers alone up to {each:g} s (its warm-up "
        "and sampling caps): a network has tens to hundreds of them; give it more (--timeout), or a lower --time-cap")


def test_a_timeout_is_measured_again_under_a_larger_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeout failure records its limit (tag tracker.timeout_s). Until 0.9.8 it answered whatever the
    new limit: a boundary under a larger --timeout reused it (its line without "reused"), and a campaign
    whose timeout_s was raised skipped it. Now a larger limit measures it again; the same one reuses it."""
    store = tmp_path / "s"
    monkeypatch.setenv("TRACKER_FAULT", "hang")  # only the time limit ends it
    logger = RunLogger(str(store), experiment="limits")
    hung = profile_network(logger, TINY, 2, FAST, timeout_s=1, input_size=64)
    assert hung.network.tags["tracker.failure_reason"] == "timeout" and hung.network.tags["tracker.timeout_s"] == "1"
    same = find_boundary(logger, TINY, FAST, phase="inference", start=2, max_batch=4, timeout_s=1, input_size=64)
    assert [r.reused for r in same.results] == [True] and same.failure_reason == "timeout"  # it would come again
    monkeypatch.delenv("TRACKER_FAULT")
    out = CliRunner().invoke(app, ["--tracking-uri", str(store), "-e", "limits", "profile", "boundary", TINY, "--phase",
                                   "inference", "--start", "2", "--max-batch", "2", "--input-size", "64", "--time-cap",
                                   "0.3", "--precision", "0.2", "--timeout", "30"])
    assert out.exit_code == 0 and out.stdout.startswith(f"{TINY} bs2 at 64 px inference in mode "), out.stdout
    assert "(already measured: reused)" not in out.stdout and "every batch size tried fits, up to 2" in out.stdout
    # a reused failure says so, as a reused measurement does (unsaid until 0.9.8)
    monkeypatch.setenv("TRACKER_FAULT", "hang@4")
    find_boundary(logger, TINY, FAST, phase="inference", start=4, max_batch=4, timeout_s=1, input_size=64)
    again = CliRunner().invoke(app, ["--tracking-uri", str(store), "-e", "limits", "profile", "boundary", TINY,
                                     "--phase", "inference", "--start", "4", "--max-batch", "4", "--input-size", "64",
                                     "--timeout", "1"])
    assert again.exit_code == 0 and "FAILED (timeout: no result within 1 s" in again.stdout, again.stdout
    assert ") (already measured: reused); run " in again.stdout, again.stdout
    # a campaign: skipped under the limit it failed under, measured again under a larger one
    monkeypatch.setenv("TRACKER_FAULT", "hang")
    path = tmp_path / "limits.toml"
    for timeout_s, fault, tally in ((1, "hang", {"failed": 1}), (1, "hang", {"skipped": 1}), (60, "", {"measured": 1})):
        monkeypatch.setenv("TRACKER_FAULT", fault)
        path.write_text('[campaign]\nname = "limits"\n[networks]\nzoo = ["squeezenet1_1"]\n[measure]\nbatch_sizes = [1]\n'
                        f'input_sizes = [64]\ntime_cap_s = 0.3\nprecision = 0.2\ntimeout_s = {timeout_s}\nagain_imprecise = false\n')
        ran = CliRunner().invoke(app, ["--tracking-uri", str(tmp_path / "c"), "campaign", "run", str(path), "--format",
                                       "json"])
        counts = json.loads(ran.stdout)
        assert {k: counts[k] for k in tally} == tally, (timeout_s, counts)


def test_a_child_that_does_not_end_after_its_result_is_killed_and_its_result_stands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that wrote its result and then hangs (a thread that never joins, say) is killed
    EXIT_GRACE_S later: the measurement was made, so the run is FINISHED with its figures and a
    note that the child had to be killed, not a ``timeout`` that loses them."""
    import psutil

    from tracker.profile import child

    monkeypatch.setattr(child, "EXIT_GRACE_S", 1.0)
    monkeypatch.setenv("TRACKER_FAULT", "linger")
    before = {p.pid for p in psutil.Process().children(recursive=True)}  # the suite's servers, say
    t0 = time.monotonic()
    r = profile_network(RunLogger(str(tmp_path / "s")), TINY, 1, FAST, timeout_s=120)
    assert time.monotonic() - t0 < 60  # not the 120 s limit, nor the hour it would sleep
    assert r.network.status == "FINISHED" and r.network.metrics["latency_ms"] > 0 and r.network.metrics["samples_count"] >= 3
    assert "did not end within 1 s: killed" in r.network.tags["tracker.child_note"]
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and "zygote" not in " ".join(p.cmdline())]
    assert not left, [p.cmdline() for p in left]
    monkeypatch.setenv("TRACKER_FAULT", "oom")  # an error result is the error it says, lingering or not
    monkeypatch.setattr(child, "EXIT_GRACE_S", 0.0)
    failed = run_child(job(), timeout_s=120)
    assert (failed.ok, failed.reason) == (False, "oom")


def test_a_child_whose_zygote_dies_mid_measurement_is_waited_for_and_its_result_stands(tmp_path: Path) -> None:
    """The zygote is killed while its child measures: the child goes on, and the parent waits for
    it (through a pidfd, not being its parent), keeps the result it writes, and notes that its
    exit status is not known. The next child gets a new zygote."""
    import threading

    import psutil

    from tracker.profile import zygote_client

    rule = Stopping(target_ci_rel=1e-6, time_cap_s=3.0, warmup_cap_s=0.2)  # about 3 s of measuring
    got: list = []
    worker = threading.Thread(target=lambda: got.append(
        profile_network(RunLogger(str(tmp_path / "s")), TINY, 1, rule, timeout_s=120)))
    worker.start()
    deadline = time.monotonic() + 60
    zygote = measuring = None
    while measuring is None and time.monotonic() < deadline:
        for z in list(zygote_client._ZYGOTES.values()):  # a zygote of another test's environment closes meanwhile
            try:
                zygote = psutil.Process(z.proc.pid)
                # its forks lead process groups of their own; its own-code fork (a training child's) does not
                measuring = next((c for c in zygote.children() if os.getpgid(c.pid) == c.pid), None)
            except (psutil.NoSuchProcess, ProcessLookupError):
                continue
            if measuring is not None:
                break
        time.sleep(0.05)
    assert zygote is not None and measuring is not None, "no zygote started the measuring child"
    zygote.kill()
    worker.join(timeout=120)
    (r,) = got
    assert not measuring.is_running() or measuring.status() == psutil.STATUS_ZOMBIE  # waited for to its end
    assert r.network.status == "FINISHED" and r.network.metrics["samples_count"] >= 2
    assert "its zygote ended before it told the child's exit status" in r.network.tags["tracker.child_note"]
    # Below the measurement: a new zygote's child waits for its job on stdin; the zygote is killed.
    child = zygote_client.spawn(dict(os.environ))
    psutil.Process(psutil.Process(child.pid).ppid()).kill()
    time.sleep(0.5)
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.5)  # still running, though the zygote that would tell its end is gone
    child.stdin.close()  # no job: it ends
    assert child.wait(timeout=60) is None  # ended, its exit status unknown
    # The same where the zygote's own-code fork (a training child's) is killed, the zygote alive:
    # its child goes on, and is waited for to its end; the next such child gets a new fork.
    child = zygote_client.spawn(dict(os.environ), own_code=True)
    fork = psutil.Process(psutil.Process(child.pid).ppid())
    assert "tracker.profile.zygote" in " ".join(fork.parent().cmdline())  # a fork of the zygote
    fork.kill()
    time.sleep(0.5)
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.5)
    child.stdin.close()
    assert child.wait(timeout=60) is None
    after = zygote_client.spawn(dict(os.environ), own_code=True)
    assert psutil.Process(after.pid).ppid() not in (fork.pid, psutil.Process(psutil.Process(after.pid).ppid()).ppid())
    after.stdin.close()
    assert after.wait(timeout=60) == 1  # no job: it ends with an error, told by the new fork


def test_a_peak_that_cannot_be_started_afresh_is_absent_not_the_programs(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the child cannot reset its peak resident memory once its network is built, the peak
    since it started would count the building and, forked, the zygote's pages: another quantity.
    The CPU peak is then absent from the run, and the table says none, not a figure."""
    from typer.testing import CliRunner

    from tracker.cli.app import app

    monkeypatch.setenv("TRACKER_FAULT", "noreset")
    r = profile_network(RunLogger(str(tmp_path / "s")), TINY, 1, FAST, timeout_s=120)
    assert r.network.status == "FINISHED" and r.network.metrics["latency_ms"] > 0
    assert "peak_mem_mb" not in r.network.metrics
    out = CliRunner().invoke(app, ["--tracking-uri", str(tmp_path / "s"), "profile", "network", TINY,
                                   "--time-cap", "0.3", "--precision", "0.2"])
    assert out.exit_code == 0 and "reused" in out.stdout and "peak" not in out.stdout, out.output
    monkeypatch.delenv("TRACKER_FAULT")
    assert "peak_rss_mb" in run_child(job(), timeout_s=120).payload["memory"]


def test_children_are_forks_of_one_zygote_per_environment_and_measure_as_started_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked from the zygote (torch imported once) is a process of its own, in its own
    process group, and starts from the memory of a started child: its peak is within a few MB of a
    started child's (without the zygote's resident library pages mapped again, 230 MB lower)."""
    import psutil

    from tracker.profile import zygote_client
    from tracker.profile.child import _start_worker

    monkeypatch.delenv("TRACKER_ZYGOTE", raising=False)
    first = _start_worker(None, job())
    second = _start_worker({"TRACKER_FAULT": "", "MLFLOW_TRACKING_URI": "elsewhere", "COLUMNS": "37"}, job())  # read at run time only
    threads = "2" if os.environ.get("OMP_NUM_THREADS") == "1" else "1"  # the suite's is 1 (conftest)
    other = _start_worker({"OMP_NUM_THREADS": threads}, job())  # read as torch loads: a zygote of its own
    # a child that imports torch._dynamo (a training one): forked from the zygote's own-code fork,
    # which has imported it; another such child from the same fork
    training = [_start_worker(None, job(phase="training")) for _ in "ab"]
    children = (first, second, other, *training)
    try:
        parents = [psutil.Process(c.pid).ppid() for c in children]
        assert parents[0] == parents[1] != parents[2] and parents[0] != os.getpid()
        assert all("tracker.profile.zygote" in " ".join(psutil.Process(p).cmdline()) for p in parents)
        assert all(os.getpgid(c.pid) == c.pid for c in children)  # killed as a group
        assert parents[3] == parents[4] not in parents[:3] and psutil.Process(parents[3]).ppid() == parents[0]
        # the fork keeps no end of its children's pipes: a child's output ends when the child does
        # (the fork made for the first had that child's pipes open until it was closed, 30 s on)
        pipes = {f"pipe:[{os.fstat(getattr(c, s).fileno()).st_ino}]" for c in training for s in ("stdin", "stdout", "stderr")}
        held = {os.readlink(f"/proc/{parents[3]}/fd/{fd}") for fd in os.listdir(f"/proc/{parents[3]}/fd")}
        assert not pipes & held, pipes & held
    finally:
        for c in children:
            c.stdin.close()  # no job: each ends with an error
            c.wait(timeout=60)
    # a child forked from its zygote (or its own-code fork) starts from a started child's memory
    for measured in (job(), job(phase="training")):
        monkeypatch.delenv("TRACKER_ZYGOTE", raising=False)
        forked = run_child(measured, timeout_s=120)
        assert zygote_client._ZYGOTES  # it came from a zygote
        monkeypatch.setenv("TRACKER_ZYGOTE", "0")
        started = run_child(measured, timeout_s=120)
        assert forked.ok and started.ok, (forked.stderr_tail, started.stderr_tail)
        peaks = [r.payload["memory"]["peak_rss_mb"] for r in (forked, started)]
        assert abs(peaks[0] - peaks[1]) < 8, (measured, peaks)  # 2.6 MB apart here in inference
    monkeypatch.setenv("TRACKER_ZYGOTE", "off")  # not silently on
    with pytest.raises(ConfigError, match="TRACKER_ZYGOTE must be 0 .* or 1 .*, got 'off'"):
        run_child(job(), timeout_s=120)


def test_an_idle_zygote_is_closed_and_a_later_child_gets_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A zygote with no child running for TRACKER_ZYGOTE_IDLE_S ends (its memory given back
    between campaigns); the next child is forked from a new one, not started the plain way."""
    import psutil

    from tracker.profile import zygote_client

    monkeypatch.delenv("TRACKER_ZYGOTE", raising=False)
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("TRACKER_ZYGOTE_IDLE_S", bad)
        with pytest.raises(ConfigError, match=f"TRACKER_ZYGOTE_IDLE_S must be a number of seconds of at least 0 .*got '{bad}'"):
            zygote_client.spawn(dict(os.environ))
    monkeypatch.setenv("TRACKER_ZYGOTE_IDLE_S", "1")
    first_child = zygote_client.spawn(dict(os.environ))
    first_child.stdin.close()  # no job: it ends with an error at once
    first_child.wait(timeout=60)
    (closing,) = zygote_client._ZYGOTES.values()
    first = closing.proc.pid
    deadline = time.monotonic() + 30
    while zygote_client._ZYGOTES and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not zygote_client._ZYGOTES
    # the reaper does not hold the zygotes' lock while the zygote ends (torch's teardown, ~0.8 s)
    assert zygote_client._ZYGOTES_LOCK.acquire(timeout=0.3)
    zygote_client._ZYGOTES_LOCK.release()
    assert closing.proc.wait(timeout=30) == 0  # it saw its socket end and ended itself, not killed 10 s later
    deadline = time.monotonic() + 5
    while psutil.pid_exists(first) and time.monotonic() < deadline:  # reaped by the client's exit thread
        time.sleep(0.05)
    assert not psutil.pid_exists(first)
    child = zygote_client.spawn(dict(os.environ))
    try:
        (second,) = [z.proc.pid for z in zygote_client._ZYGOTES.values()]
        assert second != first and psutil.Process(child.pid).ppid() == second
        time.sleep(2.5)  # longer than its idle limit: a zygote with a child running is kept
        assert psutil.pid_exists(second)
    finally:
        child.stdin.close()
        child.wait(timeout=60)


@pytest.mark.parametrize("way", ["madvise", "page_reads"])
def test_populate_maps_file_pages_into_the_page_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str) -> None:
    """A fork's page table lacks the file pages its zygote had touched; ``populate`` maps those
    ``resident_file_pages`` found, with madvise(MADV_POPULATE_READ) or, where the kernel has no
    such advice (before Linux 5.14: a Jetson's 4.9 or 5.10), by reading a byte of each page."""
    import ctypes
    import mmap

    from tracker.profile import zygote

    if way == "page_reads":  # an advice the kernel does not know: EINVAL, as an older kernel answers
        monkeypatch.setattr(zygote, "MADV_POPULATE_READ", 0x7FFF)
    pages = 64
    path = tmp_path / "library.so"
    path.write_bytes(os.urandom(pages * mmap.PAGESIZE))
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    view = ctypes.c_char.from_buffer(mapped)  # its address, not a read
    address = ctypes.addressof(view)
    del view

    def present() -> int:
        with open("/proc/self/pagemap", "rb") as pagemap:
            pagemap.seek(address // mmap.PAGESIZE * 8)
            entries = pagemap.read(pages * 8)
        return sum(int.from_bytes(entries[i:i + 8], "little") >> 63 for i in range(0, len(entries), 8))

    try:
        assert present() == 0 and not any(a <= address < a + n for a, n in zygote.resident_file_pages())
        zygote.populate([(address, pages * mmap.PAGESIZE)])
        assert present() == pages
        assert (address, pages * mmap.PAGESIZE) in zygote.resident_file_pages()
    finally:
        mapped.close()


def test_a_zygote_started_early_serves_the_first_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """``prestart`` starts the zygote in the background (a measuring command calls it once its input
    is checked); the first child is forked from that zygote, though importing MLflow meanwhile set
    a variable of MLflow's. Where zygotes are off or their settings are wrong it does nothing."""
    import psutil

    from tracker.profile import zygote_client

    marker = "an environment no other test's zygote has"

    def zygotes() -> set[int]:
        """This test's zygotes: another test's may still be starting in the background meanwhile."""
        found = set()
        for p in psutil.Process().children():
            try:
                if ("tracker.profile.zygote" in " ".join(p.cmdline())
                        and p.environ().get("TRACKER_TEST_PRESTART") == marker):
                    found.add(p.pid)
            except psutil.Error:  # ended meanwhile
                pass
        return found

    monkeypatch.delenv("TRACKER_ZYGOTE", raising=False)
    monkeypatch.setenv("TRACKER_TEST_PRESTART", marker)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # read as torch loads: a zygote of its own
    before = zygotes()
    for off in ({"TRACKER_ZYGOTE": "0"}, {"TRACKER_ZYGOTE": "maybe"}, {"TRACKER_ZYGOTE_IDLE_S": "soon"}):
        with monkeypatch.context() as m:
            for k, v in off.items():
                m.setenv(k, v)
            zygote_client.prestart()  # nothing started, nothing raised
            time.sleep(0.3)
            assert zygotes() == before, off
    zygote_client.prestart()
    deadline = time.monotonic() + 30  # other tests' idle zygotes are closed first
    while not zygotes() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    (early,) = zygotes() - before
    monkeypatch.setenv("_MLFLOW_TELEMETRY_SESSION_ID", "set by importing MLflow after the zygote started")
    child = zygote_client.spawn(dict(os.environ))
    try:
        assert psutil.Process(child.pid).ppid() == early and zygotes() - before == {early}
    finally:
        child.stdin.close()
        child.wait(timeout=60)


# A fresh interpreter that has built a zoo network, as the zygote's children start: what a pruned network's first
# build leaves behind (its base built and run once at batch 1 to plan its widths, code run for the first time) and
# what its build holds once built. Printed as JSON: MB over the weights, and whether the weights match a plain build.
_FIRST_BUILD = r"""
import json, sys, torch
from tracker.profile.measure import build_once
from tracker.profile.network import NetworkSpec
from tracker.profile.worker import current_rss_mb, give_back_freed
from tracker.zoo.spec import resolve
torch.set_num_threads(1)
resolve("resnet18").build(224)
ref = resolve(sys.argv[1])
torch.manual_seed(0)
if sys.argv[2] == "once":
    build_once(ref, NetworkSpec(model=ref.name, batch_size=1, input_size=224))
give_back_freed()
held_mb = current_rss_mb()
model = ref.build(224)
give_back_freed()
weights_mb = sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 2**20
over_weights_mb = current_rss_mb() - held_mb - weights_mb
torch.manual_seed(0)
plain = ref.build(224).state_dict()
same = all(torch.equal(v, plain[k]) for k, v in model.state_dict().items())
print(json.dumps({"over_weights_mb": over_weights_mb, "same_weights": same}))
"""


def test_a_networks_own_memory_holds_none_of_what_its_first_build_left_behind() -> None:
    """run_job builds the network once before it reads what the process holds (build_once), so
    that network_mem_mb is the network's: before 0.9.26, resnet18 pruned 25 % counted about 7 MB
    more (its unpruned base built and run to plan its widths, code run the first time), here 17 MB
    of resnet18 pruned 75 %, whose weights are 3 MB. The network built after it has the same weights."""
    spec = str(Path(__file__).resolve().parents[1] / "experiments" / "cpu-forty" / "networks" / "resnet18-p75-l1-s0.json")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def first_build(how: str) -> dict:
        out = subprocess.run([sys.executable, "-c", _FIRST_BUILD, spec, how], capture_output=True, text=True,
                             timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    plain, once = first_build("plain"), first_build("once")
    assert plain["over_weights_mb"] > 8, plain  # what build_once keeps out: there to be kept out
    assert abs(once["over_weights_mb"]) < 2, once
    assert once["same_weights"], once


# A fresh interpreter that quantizes resnet18 to int8 as a run does (build_once first, then the network measured):
# what the quantized network holds beyond its int8 weights, and what is left once it is let go. Printed as JSON.
_QUANTIZED = r"""
import json, torch
from tracker.profile.measure import build_once
from tracker.profile.network import NetworkSpec, in_format
from tracker.profile.worker import current_rss_mb, give_back_freed
from tracker.zoo.spec import resolve
torch.set_num_threads(1)
ref = resolve("resnet18")
spec = NetworkSpec(model=ref.name, batch_size=1, input_size=224, precision="int8")
build_once(ref, spec)
give_back_freed()
held_mb = current_rss_mb()
model = in_format(ref.build(224), spec)
# a quantized layer's state_dict unpacks its weights afresh: what that took is given back before the read
weights_mb = sum(t.numel() * t.element_size() for t in model.state_dict().values() if torch.is_tensor(t)) / 2**20
give_back_freed()
over_weights_mb = current_rss_mb() - held_mb - weights_mb
del model
give_back_freed()
print(json.dumps({"weights_mb": weights_mb, "over_weights_mb": over_weights_mb, "left_mb": current_rss_mb() - held_mb}))
"""


def test_an_int8_networks_own_memory_holds_no_float_copy_of_it() -> None:
    """A network quantized by torch.ao's FX graph mode held, until 0.9.27, the network prepared for
    quantization in torch.ao's module cache for the process's life and float copies of its layers in
    its graph's meta (resnet18: 57 MB beyond its 11 MB of int8 weights, 68 MB left when let go), and
    its first quantization left 54 MB more: all counted in its network_mem_mb (118 MB). What it holds
    now is its int8 weights and their packed copies."""
    out = subprocess.run([sys.executable, "-c", _QUANTIZED], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    held = json.loads(out.stdout.strip().splitlines()[-1])
    assert 10 < held["weights_mb"] < 12, held  # resnet18's int8 weights, the float ones a quarter of that
    assert held["over_weights_mb"] < held["weights_mb"] + 4, held  # their packed copies; not the float network
    assert held["left_mb"] < 3, held


def test_a_child_measures_and_returns_raw_samples() -> None:
    from tracker.profile.worker import peak_rss_mb

    ballast_mb = 2048  # the parent grows; the child's peak is its own, not inherited through fork and exec
    ballast = bytearray(ballast_mb * 2**20)
    ballast[::4096] = b"\x01" * len(range(0, len(ballast), 4096))
    result = run_child(job(phase="training", batch_size=2), timeout_s=300)
    parent_peak_mb = peak_rss_mb()
    del ballast
    assert result.ok, result.stderr_tail
    p = result.payload
    assert len(p["timing"]["samples_ms"]) >= 6 and p["timing"]["stop_reason"] in ("precision", "time_cap")
    assert 50 < p["memory"]["peak_rss_mb"] < ballast_mb < parent_peak_mb, (p["memory"], parent_peak_mb)
    # the network's own part: its weights, gradients, momentum and activations at 64 px (about 35 MB), not the
    # torch._dynamo its optimizer imports (about 150 MB more until 0.9.1)
    assert 10 < p["memory"]["network_mem_mb"] < 100, p["memory"]
    assert p["mode"]["mode_id"].startswith("cpu-t")
    assert p["telemetry"]["telemetry_samples_count"] >= 1 and "gpu_util_pct" not in p["telemetry"]
    assert "host_ms" not in p["timing"]  # on a CPU the host is the device: no host part to tell apart
    assert p["model_name"] == TINY and "description" not in p  # the parent describes; the child only measures


@pytest.mark.parametrize("choice", ["auto", "address-space"])
def test_a_real_out_of_memory_under_a_cap_is_a_failed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           choice: str) -> None:
    """``auto``: a memory cgroup of resident memory where one can be made (root, here), whose
    out-of-memory kill is counted by the cgroup itself; ``address-space``: RLIMIT_AS, where the
    allocator fails. Either is on the run (tag and param), and no cgroup is left behind."""
    from tracker.profile import memcap

    monkeypatch.setenv("TRACKER_MEMORY_CAP", choice)
    kind = memcap.planned_kind()
    if choice == "auto" and kind != memcap.RESIDENT:
        pytest.skip("no memory cgroup can be made here: the cap is the address-space one")
    stale = [parent / "tracker-999999999-1" for parent, _, _ in memcap._parents()[:1] if kind == memcap.RESIDENT]
    for group in stale:  # left by a tracker process killed before it could remove it (no such pid)
        group.mkdir()
    # this process's groups only: another tracker measuring meanwhile makes and removes its own
    mine = f"tracker-{os.getpid()}-*"
    before = {p for parent, _, _ in memcap._parents() for p in parent.glob(mine)}
    logger = RunLogger(str(tmp_path / "s"), experiment="oom")
    res = profile_network(logger, TINY, 64, FAST, phase="training", memory_limit_mb=200, timeout_s=300)
    assert res.network.status == "FAILED" and res.network.tags["tracker.failure_reason"] == "oom"
    run = MlflowClient(logger.location.uri).get_run(res.network.run_id)
    assert run.info.status == "FAILED" and run.data.tags["tracker.failure_reason"] == "oom"
    assert "latency_ms" not in run.data.metrics  # nothing invented for a failed measurement
    assert run.data.tags["tracker.memory_cap"] == kind and float(run.data.params["memory_limit_mb"]) == 200
    if kind == memcap.RESIDENT:  # killed, and the kill was the cap's cgroup's, not the machine's
        assert "at the memory cap (signal 9; the child's memory cgroup counted the kill)" in run.data.tags["mlflow.note.content"]
        # one that fits says how much of its cap it took
        fits = profile_network(logger, TINY, 1, FAST, phase="training", memory_limit_mb=1000, timeout_s=300).network
        assert fits.status == "FINISHED" and 0 < fits.metrics["memory_cap_used_mb"] <= 1000
        assert fits.metrics["memory_cap_used_mb"] <= fits.metrics["peak_mem_mb"]  # growth, within the peak resident
        # not torch._dynamo, which a training step imports whatever the network (about 130 MB of the cap until 0.9.6)
        assert fits.metrics["memory_cap_used_mb"] < fits.metrics["network_mem_mb"] + 50, fits.metrics
    else:
        tail = run.data.tags["tracker.stderr_tail"]
        assert "allocate" in tail or "memory" in tail.lower()
    assert {p for parent, _, _ in memcap._parents() for p in parent.glob(mine)} == before
    assert not any(group.exists() for group in stale)  # a dead process's group is cleared


def test_a_configuration_under_a_memory_cap_is_another_configuration(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch size that failed under a cap fits without one: it is measured again, not taken from
    the capped failure (which made a boundary search without a cap say nothing fits), and each
    cap has its own boundary in the warehouse."""
    from tracker.warehouse.load import connect, load
    from tracker.warehouse.source import open_source

    logger = RunLogger(str(tmp_path / "s"), experiment="caps")
    capped = find_boundary(logger, TINY, FAST, phase="inference", start=2, max_batch=2, memory_limit_mb=1, timeout_s=120)
    assert (capped.largest_ok, capped.first_failed, capped.failure_reason) == (None, 2, "oom")
    free = find_boundary(logger, TINY, FAST, phase="inference", start=2, max_batch=2, timeout_s=120)
    assert (free.largest_ok, free.first_failed) == (2, None) and not free.results[0].reused
    assert "memory_limit_mb" not in free.results[0].network.params
    again = find_boundary(logger, TINY, FAST, phase="inference", start=2, max_batch=2, memory_limit_mb=1, timeout_s=120)
    assert again.results[0].reused and again.results[0].network.run_id == capped.results[0].network.run_id
    # a campaign under a cap finds its capped runs when it runs again: nothing is measured twice
    path = campaign_file(tmp_path, "capped")
    path.write_text(path.read_text() + "memory_limit_mb = 1\n")
    tallies = [json.loads(tracker("--tracking-uri", str(tmp_path / "c"), "campaign", "run", str(path), "--format",
                                  "json", cwd=tmp_path).stdout) for _ in range(2)]
    assert [(t["measured"], t["failed"]) for t in tallies] == [(0, 2), (0, 0)], tallies
    load(tmp_path / "w.duckdb", open_source(logger.location))
    con = connect(tmp_path / "w.duckdb", read_only=True)
    try:
        rows = con.sql("SELECT memory_limit_mb, memory_cap, largest_fitting_batch, smallest_oom_batch, smallest_failed_batch, "
                       "smallest_failed_reason FROM oom_boundary ORDER BY memory_limit_mb NULLS FIRST").fetchall()
    finally:
        con.close()
    kind = capped.results[0].network.tags["tracker.memory_cap"]
    assert rows == [(None, None, 2, None, None, None), (1.0, kind, None, 2, 2, "oom")]
    monkeypatch.setenv("TRACKER_MEMORY_CAP", "cgroup")  # not silently one or the other, and refused before anything is logged
    modes = count_runs(tmp_path / "s", "mode")
    with pytest.raises(ConfigError, match="TRACKER_MEMORY_CAP must be auto .* or address-space, got 'cgroup'"):
        profile_network(logger, TINY, 4, FAST, memory_limit_mb=1, threads=1)
    with pytest.raises(ConfigError, match="TRACKER_MEMORY_CAP must be auto"):
        find_boundary(logger, TINY, FAST, phase="inference", start=4, max_batch=4, memory_limit_mb=1, threads=1)
    assert (count_runs(tmp_path / "s", "network"), count_runs(tmp_path / "s", "mode")) == (2, modes)


def test_a_cap_on_a_cuda_device_is_on_its_memory_and_is_another_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU the cap is the GPU's memory (``device``: torch's allocator, set in the child), whatever
    TRACKER_MEMORY_CAP says of the host's; the child gets no capped cgroup; cuDNN's failed workspace
    under it is out of memory. What runs on a GPU is in benchmarks/gpu_paths.py."""
    from tracker.profile import memcap
    from tracker.profile.api import plan
    from tracker.errors import is_oom

    host = plan(TINY, 4, device="cpu", memory_limit_mb=500)
    gpu = plan(TINY, 4, device="cuda:1", memory_limit_mb=500)
    assert gpu.memory_cap == memcap.DEVICE != host.memory_cap and gpu.keys["memory_cap"] == "device"
    monkeypatch.setenv("TRACKER_MEMORY_CAP", "address-space")
    assert memcap.planned_kind("cuda") == memcap.DEVICE and memcap.planned_kind("cpu") == memcap.ADDRESS_SPACE
    monkeypatch.delenv("TRACKER_MEMORY_CAP")
    job, group = memcap.for_job({"device": "cuda:1", "memory_limit_mb": 500.0})
    try:
        assert "memory_cgroup" not in job and (group is None or not group.capped)
    finally:
        if group is not None:
            group.remove(wait_s=0)
    training, group = memcap.for_job({"kind": "training", "config": {"device": "cuda", "memory_limit_mb": 500.0}})
    if group is not None:
        group.remove(wait_s=0)
    assert "memory_cgroup" not in training
    monkeypatch.setenv("TRACKER_MEMORY_CAP", "cgroup")
    with pytest.raises(ConfigError, match="TRACKER_MEMORY_CAP must be"):
        memcap.planned_kind("cuda")
    failed = RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED")
    assert is_oom(failed, capped=True) and not is_oom(failed, capped=False)
    from tracker.log.schema import load_schema

    for kind in ("network", "training"):  # such a run's tag is one its schema knows
        assert memcap.DEVICE in load_schema(kind).lookup("tags", "tracker.memory_cap").choices


def test_boundary_doubles_to_the_first_failure_then_bisects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_FAULT", "oom@3")  # every batch size >= 3 runs out of memory
    logger = RunLogger(str(tmp_path / "s"), experiment="boundary")
    b = find_boundary(logger, TINY, FAST, phase="inference", start=1, max_batch=64, search=True, timeout_s=120)
    assert (b.largest_ok, b.first_failed, b.failure_reason) == (2, 3, "oom")
    tried = [int(r.network.params["batch_size"]) for r in b.results]
    assert tried == [1, 2, 4, 3]  # doubled to the first failure, then bisected between 2 and 4
    client = MlflowClient(logger.location.uri)
    failed = client.search_runs([logger.experiment.experiment_id], "attributes.status = 'FAILED'")
    assert sorted(int(r.data.params["batch_size"]) for r in failed) == [3, 4]
    again = find_boundary(logger, TINY, FAST, phase="inference", start=1, max_batch=64, search=True, timeout_s=120)
    assert (again.largest_ok, again.first_failed) == (2, 3) and all(r.reused for r in again.results)
    # A start that does not fit (predict --largest-batch's answer, too hopeful): halved until a size
    # fits, then bisected; the sizes already answered are not run again
    high = find_boundary(logger, TINY, FAST, phase="inference", start=16, max_batch=64, search=True, timeout_s=120)
    assert (high.largest_ok, high.first_failed, high.failure_reason) == (2, 3, "oom")
    assert [int(r.network.params["batch_size"]) for r in high.results] == [16, 8, 4, 2, 3]
    assert [r.reused for r in high.results] == [False, False, True, True, True]
    # without --search a start that does not fit is the answer, as before
    alone = find_boundary(logger, TINY, FAST, phase="inference", start=16, max_batch=64, timeout_s=120)
    assert (alone.largest_ok, alone.first_failed, len(alone.results)) == (None, 16, 1)
    monkeypatch.setenv("TRACKER_FAULT", "oom@1")  # nothing fits: halved down to 1, then said
    none = find_boundary(logger, TINY, FAST, phase="inference", start=8, max_batch=64, search=True, timeout_s=120,
                         input_size=64)
    assert (none.largest_ok, none.first_failed, [int(r.network.params["batch_size"]) for r in none.results]) == (
        None, 1, [8, 4, 2, 1])


def test_only_an_out_of_memory_failure_is_a_boundarys_evidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FAILED run of another reason than ``oom`` (a kill -9 from outside, a crash) says nothing of the
    boundary. Until 0.9.8 a search reused a killed batch as out of memory (3 fitted; it said "2; first
    failure: 3 (oom)"), and bisected on a fresh crash as on an out-of-memory, calling it ``oom``."""
    logger = RunLogger(str(tmp_path / "s"), experiment="boundary")
    monkeypatch.setenv("TRACKER_FAULT", "kill")  # the user's kill -9 of the child at batch 3
    killed = find_boundary(logger, TINY, FAST, phase="inference", start=3, max_batch=3, timeout_s=120, input_size=64)
    assert (killed.largest_ok, killed.first_failed, killed.failure_reason) == (None, 3, "killed")
    monkeypatch.setenv("TRACKER_FAULT", "oom@4")
    b = find_boundary(logger, TINY, FAST, phase="inference", start=1, max_batch=64, search=True, timeout_s=120,
                      input_size=64)
    assert (b.largest_ok, b.first_failed, b.failure_reason) == (3, 4, "oom")
    assert [(int(r.network.params["batch_size"]), r.reused) for r in b.results] == [
        (1, False), (2, False), (4, False), (3, False)]  # the killed 3 measured again, and it fits
    # a fresh failure of another reason inside the bisection ends the search, said as what it was
    monkeypatch.setenv("TRACKER_FAULT", "oom@8")
    other = RunLogger(str(tmp_path / "s"), experiment="crash")
    find_boundary(other, TINY, FAST, phase="inference", start=4, max_batch=8, timeout_s=120, input_size=64)  # 4; 8: oom
    monkeypatch.setenv("TRACKER_FAULT", "crash@6")
    ended = find_boundary(other, TINY, FAST, phase="inference", start=4, max_batch=8, search=True, timeout_s=120,
                          input_size=64)
    assert [(int(r.network.params["batch_size"]), r.reused) for r in ended.results] == [(4, True), (8, True), (6, False)]
    assert (ended.largest_ok, ended.first_failed, ended.failure_reason) == (4, 6, "crash")


def test_a_child_the_kernel_kills_for_memory_is_an_oom_and_the_boundary_bisects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child_cgroups: None) -> None:
    """No memory cap of tracker's: the child at batch 4 takes memory until the kernel's
    out-of-memory killer ends it (for real, in a 1.5 GB memory cgroup). That is ``oom``, not
    ``killed``, so the boundary search bisects as it does for an allocator's failure."""
    monkeypatch.setenv("TRACKER_FAULT", "oomkill@4")
    logger = RunLogger(str(tmp_path / "s"), experiment="boundary")
    b = find_boundary(logger, TINY, FAST, phase="inference", start=1, max_batch=64, search=True, timeout_s=300)
    assert (b.largest_ok, b.first_failed, b.failure_reason) == (3, 4, "oom")
    assert [int(r.network.params["batch_size"]) for r in b.results] == [1, 2, 4, 3]
    failed = MlflowClient(logger.location.uri).get_run(b.results[2].network.run_id)
    assert "out-of-memory killer" in failed.data.tags["tracker.stderr_tail"]
    monkeypatch.setenv("TRACKER_FAULT", "kill")  # a SIGKILL while the kernel killed nothing: killed
    assert run_child(job(), timeout_s=120).reason == "killed"


def test_another_process_killed_for_memory_meanwhile_does_not_make_a_killed_child_an_oom(
        monkeypatch: pytest.MonkeyPatch, child_cgroups: None) -> None:
    """While a child runs, the kernel's out-of-memory killer ends another process (for real, in a
    64 MB cgroup of its own), and then the child is killed by a SIGKILL of no out-of-memory
    killer: the machine-wide count rose, the child's own cgroup's did not, so it is ``killed``."""
    import threading

    from tracker.profile import memcap
    from tracker.profile.child import oom_kills

    monkeypatch.setenv("TRACKER_FAULT", "hang")
    results: list = []
    runner = threading.Thread(target=lambda: results.append(run_child(job(), timeout_s=300)))
    runner.start()
    own = memcap._parents()[0][0]
    deadline = time.monotonic() + 120
    pids: list[int] = []
    while not pids and time.monotonic() < deadline:  # the child, once it is in a cgroup of its own
        time.sleep(0.2)
        pids = [int(p) for g in own.glob(f"tracker-{os.getpid()}-*") for p in (g / "cgroup.procs").read_text().split()]
    assert pids, "no child in a cgroup of its own"
    before = oom_kills()
    other = memcap.MemoryCgroup.make(nested_only=True)
    assert other is not None and other.limit_growth(64) is not None
    hog = subprocess.run([sys.executable, "-c", f"import os; open({str(other.path / 'cgroup.procs')!r}, 'w')"
                          ".write(str(os.getpid())); b = []\nwhile True: b.append(bytearray(2**24))"], timeout=120)
    other.remove()
    assert hog.returncode == -signal.SIGKILL and oom_kills() > before  # killed for memory, elsewhere
    os.kill(pids[0], signal.SIGKILL)
    runner.join(timeout=120)
    assert results[0].reason == "killed", results[0]


def test_a_configuration_measured_under_another_measurement_protocol_is_another_configuration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose measurement meant something else (tracker 0.1.0's CPU peak memory) is not reused:
    runs are reused by configuration key (the boundary test above), and the protocol is part of it."""
    from tracker import environment
    from tracker.log.record import config_key
    from tracker.profile.api import plan
    from tracker.profile.job import JobConfig, job_key_fields

    now = plan(TINY, 1, input_size=64)
    assert now.config_key == plan(TINY, 1, input_size=64).config_key
    job = JobConfig(TINY, Path("data"))
    job_now = config_key({"kind": "training", **job_key_fields(job)})
    monkeypatch.setattr(environment, "MEASUREMENT_PROTOCOL", environment.MEASUREMENT_PROTOCOL - 1)
    assert plan(TINY, 1, input_size=64).config_key != now.config_key
    assert config_key({"kind": "training", **job_key_fields(job)}) != job_now  # training jobs too
    monkeypatch.undo()
    assert config_key({"kind": "training", **job_key_fields(job)}) == job_now
    monkeypatch.setattr(environment, "JOB_MEASUREMENT_PROTOCOL", environment.JOB_MEASUREMENT_PROTOCOL - 1)
    assert config_key({"kind": "training", **job_key_fields(job)}) != job_now  # and theirs alone
    assert plan(TINY, 1, input_size=64).config_key == now.config_key


CAMPAIGN = """
[campaign]
name = "{name}"
[networks]
zoo = ["squeezenet1_1", "mobilenet_v3_small"]
[measure]
batch_sizes = [1, 2, 4]
phases = ["inference"]
precision = 0.2
time_cap_s = 0.3
till_first_fail = {tff}
timeout_s = 120
again_imprecise = false
"""


def campaign_file(tmp_path: Path, name: str, tff: bool = True) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(CAMPAIGN.format(name=name, tff="true" if tff else "false"))
    return path


def tracker(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command line run in this process (Typer's CliRunner) from ``cwd``, with ``env`` added to
    the environment while it runs: its measuring children are forked from the suite's zygote, as a
    campaign's are from its own, instead of a new process importing torch twice for each command."""
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(app, list(args), env=env)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, stderr)


def network_runs(store: Path, experiment: str) -> list:
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    if exp is None:  # the store exists before the campaign's experiment does
        return []
    return client.search_runs([exp.experiment_id], "tags.`tracker.kind` = 'network'", max_results=1000)


def test_a_campaign_with_layers_measures_again_what_was_measured_whole_only(tmp_path: Path) -> None:
    """A configuration measured whole (a campaign without layers) does not answer a campaign that
    wants its layers, as `profile layers` would not take it: it is measured again, with them, once.
    Measured whole only again after that (another campaign's second round), it is still measured with
    its layers: the campaign that wants them, and `profile layers`, reuse them (until 0.9.23 each
    read the newest run alone, and measured the layers again)."""
    whole = campaign_file(tmp_path, "whole", tff=False)
    whole.write_text(whole.read_text().replace('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'zoo = ["squeezenet1_1"]')
                     .replace("batch_sizes = [1, 2, 4]", "batch_sizes = [1]"))
    layered = tmp_path / "layered.toml"
    layered.write_text(whole.read_text().replace('name = "whole"', 'name = "layered"') + "layers = true\n")
    store = str(tmp_path / "s")
    assert tracker("--tracking-uri", store, "-e", "both", "campaign", "run", str(whole), cwd=tmp_path).returncode == 0
    planned = dry_run(tmp_path / "s", layered, "-e", "both")
    assert planned["states"] == {"to measure again: without its layers": 1}, planned
    tallies = [json.loads(tracker("--tracking-uri", store, "-e", "both", "campaign", "run", str(path), "--format",
                                  "json", cwd=tmp_path).stdout) for path in (whole, layered, layered, whole)]
    assert [(t["measured"], t["skipped"]) for t in tallies] == [(0, 1), (1, 0), (0, 1), (0, 1)], tallies
    runs = network_runs(tmp_path / "s", "both")
    with_layers = [r for r in runs if "sum_of_layers_ms" in r.data.metrics]
    assert len(runs) == 2 and len(with_layers) == 1 and {r.data.tags["tracker.campaign"] for r in with_layers} == {"layered"}
    rounds = tmp_path / "rounds.toml"  # its second round, whole only, is the configuration's newest run
    rounds.write_text(whole.read_text().replace('name = "whole"', 'name = "rounds"') + "repeats = 2\n")
    assert tracker("--tracking-uri", store, "-e", "both", "campaign", "run", str(rounds), cwd=tmp_path).returncode == 0
    newest = max(network_runs(tmp_path / "s", "both"), key=lambda r: r.info.start_time)
    assert newest.data.tags["tracker.campaign"] == "rounds" and "sum_of_layers_ms" not in newest.data.metrics
    assert dry_run(tmp_path / "s", layered, "-e", "both")["states"] == {"measured": 1}
    reused = json.loads(tracker("--tracking-uri", store, "-e", "both", "profile", "layers", "squeezenet1_1", "-b", "1",
                                "--format", "json", cwd=tmp_path).stdout)
    assert reused["reused"] and reused["run_id"] == with_layers[0].info.run_id, reused
    assert len(network_runs(tmp_path / "s", "both")) == 3


def test_a_networks_own_memory_an_older_tracker_measured_is_measured_again(tmp_path: Path) -> None:
    """network_mem_mb of tracker 0.9.25 and before also counted what the network's first build left behind in
    the process, and no fingerprint learns it (labelled_measurements' network_mem_current): a campaign
    measures such a configuration again, once, and says so (its dry run too), as `profile network` does;
    one this tracker measured is reused as before (until 0.9.27 every one was)."""
    path = campaign_file(tmp_path, "own", tff=False)
    path.write_text(path.read_text().replace('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'zoo = ["squeezenet1_1"]')
                    .replace("batch_sizes = [1, 2, 4]", "batch_sizes = [1, 2]"))
    store = str(tmp_path / "s")
    assert tracker("--tracking-uri", store, "campaign", "run", str(path), cwd=tmp_path).returncode == 0
    runs = {int(r.data.params["batch_size"]): r for r in network_runs(tmp_path / "s", "own")}
    assert sorted(runs) == [1, 2] and all("network_mem_mb" in r.data.metrics for r in runs.values()), runs
    client = MlflowClient(f"sqlite:///{tmp_path / 's' / 'mlflow.db'}")
    client.set_tag(runs[1].info.run_id, "tracker.version", "0.9.25")
    states = dry_run(tmp_path / "s", path)["states"]
    assert states == {"measured": 1, "to measure again: its network_mem_mb an older tracker's": 1}, states
    proc = tracker("--tracking-uri", store, "campaign", "run", str(path), cwd=tmp_path)
    assert proc.returncode == 0 and "own: 1 measured, 0 failed, 1 skipped of 2" in proc.stdout, proc.stdout + proc.stderr
    assert "note: 1 configuration that a tracker before 0.9.26 (0.9.27 in int8) had measured was measured again" in \
        proc.stdout, proc.stdout
    again = json.loads(tracker("--tracking-uri", store, "campaign", "run", str(path), "--format", "json",
                               cwd=tmp_path).stdout)
    assert (again["measured"], again["skipped"], again["older_network_mem"]) == (0, 2, 0), again
    assert len(network_runs(tmp_path / "s", "own")) == 3

    def profiled() -> dict:
        proc = tracker("--tracking-uri", store, "-e", "own", "profile", "network", "squeezenet1_1", "-b", "2",
                       "--time-cap", "0.3", "--precision", "0.2", "--format", "json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    assert profiled()["run_id"] == runs[2].info.run_id  # this tracker's: reused
    client.set_tag(runs[2].info.run_id, "tracker.version", "0.9.9")
    fresh = profiled()
    assert not fresh["reused"] and fresh["run_id"] != runs[2].info.run_id and fresh["network_mem_mb"] > 0, fresh
    assert profiled()["run_id"] == fresh["run_id"]


def test_a_campaign_measures_an_imprecise_measurement_again_at_twice_its_time_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A measurement whose 95 % CI came out wider than IMPRECISE_CI_REL and the precision asked for (here every
    one: the threshold put below any CI, and 0.1 % asked) is measured again straight away, at twice the
    campaign's time cap, as the repeat
    CONFIG_KEY#again; the summary says so; a re-run measures nothing; ``again_imprecise = false`` does not.
    A layer measurement is measured again with its layers."""
    from tracker.profile import stats

    monkeypatch.setattr(stats, "IMPRECISE_CI_REL", -1.0)
    path = campaign_file(tmp_path, "again", tff=False)  # the suite's campaigns say again_imprecise = false: not this one
    path.write_text(path.read_text().replace('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'zoo = ["squeezenet1_1"]')
                    .replace("batch_sizes = [1, 2, 4]", "batch_sizes = [1]").replace("again_imprecise = false\n", "")
                    .replace("precision = 0.2", "precision = 0.001"))  # asked for: a CI over it is the time cap's
    store = str(tmp_path / "s")
    done = tracker("--tracking-uri", store, "campaign", "run", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "again: 1 measured, 0 failed, 0 skipped of 1" in done.stdout
    assert ("note: 1 measurement came out too imprecise (95 % CI wider than -100 % of the latency) and was measured "
            "again at twice the time cap: 0 of them precise the second time") in done.stdout, done.stdout
    runs = network_runs(tmp_path / "s", "again")
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    (first,) = [r for r in runs if "tracker.repeat_key" not in r.data.tags]
    (second,) = [r for r in runs if "tracker.repeat_key" in r.data.tags]
    key = first.data.tags["tracker.config_key"]
    assert second.data.tags["tracker.config_key"] == key and second.data.tags["tracker.repeat_key"] == f"{key}#again"
    assert (float(first.data.params["time_cap_s"]), float(second.data.params["time_cap_s"])) == (0.3, 0.6)
    again = json.loads(tracker("--tracking-uri", store, "campaign", "run", str(path), "--format", "json", cwd=tmp_path).stdout)
    assert (again["measured"], again["skipped"], again["measured_again"]) == (0, 1, 0)
    assert len(network_runs(tmp_path / "s", "again")) == 2
    text = path.read_text()
    path.write_text(text.replace('name = "again"', 'name = "once"') + "again_imprecise = false\n")
    once = json.loads(tracker("--tracking-uri", store, "campaign", "run", str(path), "--format", "json", cwd=tmp_path).stdout)
    assert (once["measured"], once["measured_again"], len(once["runs"])) == (1, 0, 1)
    assert len(network_runs(tmp_path / "s", "once")) == 1
    # with its layers: measured again with them, so the newest run has them and a re-run measures nothing
    path.write_text(text.replace('name = "again"', 'name = "layered"') + "layers = true\ninput_sizes = [32]\n")
    layered = json.loads(tracker("--tracking-uri", store, "campaign", "run", str(path), "--format", "json", cwd=tmp_path).stdout)
    assert (layered["measured"], layered["measured_again"], [r.get("again", False) for r in layered["runs"]]) == (
        1, 1, [False, True]), layered
    runs = network_runs(tmp_path / "s", "layered")
    assert len(runs) == 2 and all("sum_of_layers_ms" in r.data.metrics for r in runs)
    rerun = json.loads(tracker("--tracking-uri", store, "campaign", "run", str(path), "--format", "json", cwd=tmp_path).stdout)
    assert (rerun["measured"], rerun["skipped"]) == (0, 1) and len(network_runs(tmp_path / "s", "layered")) == 2


def test_an_imprecise_measurement_is_measured_again_only_where_twice_the_cap_fits_the_timeout() -> None:
    """Twice the time cap, at most MAX_TIME_CAP_S; none where that, the warm-up and a child's start pass
    the campaign's timeout_s (the configuration is measured already: a time-out would only end it)."""
    from tracker.profile.api import CHILD_START_S
    from tracker.profile.campaign import again_stopping
    from tracker.profile.stats import MAX_TIME_CAP_S

    rule = Stopping(target_ci_rel=0.05, time_cap_s=0.3, warmup_cap_s=0.2)
    assert again_stopping(rule, 120.0) == Stopping(target_ci_rel=0.05, time_cap_s=0.6, warmup_cap_s=0.2)
    assert again_stopping(rule, 0.6 + 0.2 + CHILD_START_S) is not None
    assert again_stopping(rule, 0.6 + 0.2 + CHILD_START_S - 0.01) is None
    assert again_stopping(Stopping(time_cap_s=MAX_TIME_CAP_S), 2 * MAX_TIME_CAP_S).time_cap_s == MAX_TIME_CAP_S


@pytest.mark.alone
def test_a_campaign_counts_what_it_measured_beside_other_work(tmp_path: Path) -> None:
    """A configuration measured while another process burns a core (on one thread, the other
    core) is counted as measured beside other work, and the campaign's line says so."""
    from tests.conftest import busy_elsewhere

    path = campaign_file(tmp_path, "busy", tff=False)
    path.write_text(path.read_text().replace('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'zoo = ["squeezenet1_1"]')
                    .replace("batch_sizes = [1, 2, 4]", "batch_sizes = [1]") + "threads = [1]\n")
    with busy_elsewhere():
        done = tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "busy: 1 measured, 0 failed, 0 skipped of 1" in done.stdout
    assert ("note: 1 of them measured while other processes took 10 % or more of the CPU (5 % where no core was left "
            "idle)") in done.stdout, done.stdout
    (run,) = network_runs(tmp_path / "s", "busy")
    assert run.data.metrics["cpu_util_others_pct"] >= 10
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 's' / 'mlflow.db'}")
    assert "mlflow.note.content" not in client.get_experiment_by_name("busy").tags  # it has no description
    path.write_text(path.read_text().replace('name = "busy"', 'name = "busy"\ndescription = "One network, beside a busy core"'))
    assert tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), cwd=tmp_path).returncode == 0
    path.write_text(path.read_text().replace("beside a busy core", "beside other work"))  # described again: replaced
    assert tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), cwd=tmp_path).returncode == 0
    assert client.get_experiment_by_name("busy").tags["mlflow.note.content"] == "One network, beside other work"


def test_a_traced_campaign_traces_each_configuration_once(tmp_path: Path) -> None:
    """``trace = true``: each configuration is traced with torch.profiler once. One measured before
    without its trace is measured again, as a repeat (``CONFIG_KEY#trace``); one whose trace failed
    keeps its error and is not measured again; a re-run measures nothing."""
    whole = campaign_file(tmp_path, "whole", tff=False)
    whole.write_text(whole.read_text().replace('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'zoo = ["squeezenet1_1"]')
                     .replace("batch_sizes = [1, 2, 4]", "batch_sizes = [1]"))
    traced = tmp_path / "traced.toml"
    traced.write_text(whole.read_text().replace('name = "whole"', 'name = "traced"')
                      .replace("batch_sizes = [1]", "batch_sizes = [1, 2]") + "trace = true\n")
    wider = tmp_path / "wider.toml"
    wider.write_text(traced.read_text().replace("batch_sizes = [1, 2]", "batch_sizes = [1, 2, 4]"))
    store = str(tmp_path / "s")

    def run(path: Path, fault: str = "") -> tuple[int, int, int]:
        proc = tracker("--tracking-uri", store, "-e", "t", "campaign", "run", str(path), "--format", "json",
                       cwd=tmp_path, env={"TRACKER_FAULT": fault})
        assert proc.returncode == 0, proc.stderr
        tally = json.loads(proc.stdout)
        return tally["measured"], tally["skipped"], tally["failed"]

    assert run(whole) == (1, 0, 0)
    assert [(c["batch_size"], c["state"]) for c in dry_run(tmp_path / "s", traced, "-e", "t")["configurations"]] == [
        (1, "to measure again: without its trace"), (2, "to measure")]
    assert run(traced) == (2, 0, 0)  # batch 1 again, with its trace; batch 2 for the first time
    assert run(traced) == (0, 2, 0)
    assert run(wider, fault="notrace") == (1, 2, 0)  # batch 4: measured, its trace failed
    assert run(wider) == (0, 3, 0)
    runs = network_runs(tmp_path / "s", "t")
    by_batch: dict[str, list] = {}
    for r in sorted(runs, key=lambda r: r.info.start_time):
        by_batch.setdefault(r.data.params["batch_size"], []).append(r)
    assert {b: len(rs) for b, rs in by_batch.items()} == {"1": 2, "2": 1, "4": 1}
    first, again = by_batch["1"]
    assert "tracker.trace" not in first.data.tags and "tracker.repeat_key" not in first.data.tags
    assert again.data.tags["tracker.trace"] == "trace/ops.json"
    assert again.data.tags["tracker.repeat_key"] == again.data.tags["tracker.config_key"] + "#trace"
    assert by_batch["2"][0].data.tags["tracker.trace"] == "trace/ops.json"
    assert "tracker.repeat_key" not in by_batch["2"][0].data.tags
    assert by_batch["4"][0].data.tags["tracker.trace_error"].startswith("RuntimeError: injected")
    assert "tracker.trace" not in by_batch["4"][0].data.tags


def dry_run(store: Path, path: Path, *args: str) -> dict:
    """``campaign run --dry-run --format json``'s answer: it must exit 0."""
    proc = tracker("--tracking-uri", str(store), *args, "campaign", "run", str(path), "--dry-run", "--format", "json",
                   cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_dry_run_writes_no_spec_file_and_says_what_a_run_would_write(tmp_path: Path) -> None:
    """``campaign run --dry-run`` "measures nothing", yet wrote the spec files of ``[networks.generate]``
    and ``[networks.prune]`` (until 0.9.8). It plans them in memory (a pruned one of a generated one too),
    writes none, and says which a run would write; its plan is the one a run makes from the files."""
    from tracker.profile.campaign import load_campaign

    path = tmp_path / "gp.toml"
    path.write_text('[campaign]\nname = "gp"\n[networks.generate]\ncount = 2\nseed = 4\ninput_size = 64\n'
                    '[networks.prune]\nmodel = "gp/networks/gen-s4-0001.json"\nratios = [0, 50]\n'
                    "[measure]\nbatch_sizes = [1]\n")
    folder = tmp_path / "gp" / "networks"
    names = ["gen-s4-0000", "gen-s4-0001", "gen-s4-0001-p0-l1-s0", "gen-s4-0001-p50-l1-s0"]
    planned = dry_run(tmp_path / "s", path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gp.toml"]  # no spec, no folder, no store
    assert planned["would_write"] == [str(folder / f"{n}.json") for n in names]
    assert [c["network"] for c in planned["configurations"]] == names
    table = tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), "--dry-run", cwd=tmp_path)
    assert table.returncode == 0 and f"a run would write 4 spec files to {folder} (a dry run writes none)\n" in table.stdout
    assert not folder.exists()
    with contextlib.chdir(tmp_path):
        load_campaign(Path("gp.toml"))  # as a run loads it: the files written
    assert sorted(p.stem for p in folder.iterdir()) == sorted(names)
    written = dry_run(tmp_path / "s", path)
    assert written["would_write"] == [] and written["configurations"] == planned["configurations"]
    assert "would write" not in tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), "--dry-run",
                                        cwd=tmp_path).stdout


def test_pruning_ratios_that_look_like_fractions_are_said_before_a_campaign_measures(tmp_path: Path) -> None:
    """A campaign's ``[networks.prune] ratios = [0, 0.25, 0.5]`` (fractions, where percentages are asked for)
    measured networks pruned 0.25 % and 0.5 %, all but the unpruned one, without a word until 0.9.30: planned
    as asked, and said on stderr before anything is measured (a dry run too); whole percentages say nothing."""
    from tracker.profile.campaign import load_campaign

    path = tmp_path / "pc.toml"
    for ratios, notes in (("[0, 0.25, 0.5]", [f"{path}: [networks.prune].ratios are percentages, none above 1 here "
                                              "(0, 0.25, 0.5 % of the channels pruned); for those fractions of the "
                                              "channels give [networks.prune].ratios = [0, 25, 50]"]),
                          ("[0, 25]", []), ("[1]", [])):
        path.write_text(f'[campaign]\nname = "pc"\n[networks.prune]\nmodel = "squeezenet1_1"\nratios = {ratios}\n')
        assert load_campaign(path, dry_run=True).notes == notes, ratios
    path.write_text('[campaign]\nname = "pc"\n[networks.prune]\nmodel = "squeezenet1_1"\nratios = [0.5]\n')
    proc = tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr.startswith(f"note: {path}: [networks.prune].ratios are percentages, "
                                                           "none above 1 here (0.5 % of"), proc.stderr
    assert "squeezenet1_1-p0.5-l1-s0" in proc.stdout and not (tmp_path / "s").exists()


def test_a_bad_shard_is_refused_before_any_spec_file_is_written(tmp_path: Path) -> None:
    """``campaign run FILE --shard 3/2`` wrote the spec files of ``[networks.generate]`` before it
    refused the shard (until 0.9.13): a usage error leaves the folder as it was."""
    path = tmp_path / "gp.toml"
    path.write_text('[campaign]\nname = "gp"\n[networks.generate]\ncount = 2\nseed = 4\ninput_size = 64\n'
                    "[measure]\nbatch_sizes = [1]\n")
    for shard, says in (("3/2", "--shard 3/2: I must be between 1 and N"), ("x", "--shard takes I/N")):
        for extra in ((), ("--dry-run",)):
            proc = tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), "--shard", shard, *extra,
                           cwd=tmp_path)
            # in this process the OptionError is the result's exception (status 2 from the real CLI: test_cli)
            assert proc.returncode != 0 and says in proc.stderr, proc.stderr
            assert sorted(p.name for p in tmp_path.iterdir()) == ["gp.toml"]  # no spec, no folder, no store


def test_a_failing_configuration_ends_its_chain_not_the_campaign(tmp_path: Path) -> None:
    """A failure ends its till_first_fail chain; a dry run (--dry-run) says what a run would do with
    each configuration, before it (no store yet, and none made) and after it."""
    path = campaign_file(tmp_path, "faulty")
    before = dry_run(tmp_path / "s", path)
    assert before["states"] == {"to measure": 6} and not (tmp_path / "s").exists()
    assert [(c["network"], c["batch_size"]) for c in before["configurations"]] == [
        (n, b) for n in ("squeezenet1_1", "mobilenet_v3_small") for b in (1, 2, 4)]  # in the order a run takes them
    proc = tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), "--format", "json",
                   cwd=tmp_path, env={"TRACKER_FAULT": "kill@2"})
    assert proc.returncode == 0, proc.stderr
    tally = json.loads(proc.stdout)
    assert tally == {**tally, "total": 6, "measured": 2, "failed": 2, "skipped": 2}
    after = dry_run(tmp_path / "s", path)
    assert [(c["batch_size"], c["state"]) for c in after["configurations"]] == [
        (1, "measured"), (2, "failed"), (4, "after a failure")] * 2
    keys = {r.data.params["batch_size"]: r.data.tags["tracker.config_key"] for r in network_runs(tmp_path / "s", "faulty")
            if r.data.params["model"] == "squeezenet1_1"}
    assert [c["config_key"] for c in after["configurations"][:2]] == [keys["1"], keys["2"]]
    assert len(network_runs(tmp_path / "s", "faulty")) == 4  # the dry runs measured nothing
    # the failed ones listed with why they failed, and only they
    listed = tracker("--tracking-uri", str(tmp_path / "s"), "-e", "faulty", "runs", "list", "--status", "failed",
                     "--format", "json", cwd=tmp_path)
    assert [(r["params"]["batch_size"], r["status"], r["failure_reason"]) for r in json.loads(listed.stdout)] == [
        ("2", "FAILED", "killed")] * 2, listed.stderr
    table = tracker("--tracking-uri", str(tmp_path / "s"), "-e", "faulty", "runs", "list", "--kind", "network", cwd=tmp_path)
    assert table.stdout.count("│ killed") == 2 and table.stdout.count("FINISHED") == 2, table.stdout
    failed = json.loads(listed.stdout)[0]
    shown = tracker("--tracking-uri", str(tmp_path / "s"), "-e", "faulty", "runs", "show", failed["run_id"][:10], cwd=tmp_path)
    assert shown.stdout.startswith(f"run {failed['run_id']} · network · FAILED (killed)"), shown.stderr
    assert shown.stdout.rstrip().endswith(failed["stderr_tail"].strip().splitlines()[-1].strip())  # its stderr, whole
    runs = network_runs(tmp_path / "s", "faulty")
    failed = [r for r in runs if r.info.status == "FAILED"]
    assert {r.data.tags["tracker.failure_reason"] for r in failed} == {"killed"}
    assert sorted(r.data.params["batch_size"] for r in failed) == ["2", "2"]
    assert all(r.data.tags["tracker.campaign"] == "faulty" for r in runs)


def test_an_interrupted_campaign_resumes_without_duplicates(tmp_path: Path) -> None:
    path = campaign_file(tmp_path, "resume", tff=False)
    path.write_text(path.read_text().replace("batch_sizes = [1, 2, 4]", "batch_sizes = [1, 2]"))  # four configurations
    store = tmp_path / "s"
    args = [sys.executable, "-m", "tracker", "--tracking-uri", str(store), "campaign", "run", str(path)]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    deadline = time.time() + 300
    while time.time() < deadline:
        if count_runs(store, "network") >= 1:
            break
        time.sleep(0.5)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130 and err.count("interrupted") == 1 and "run the same command again to resume" in err
    first = len(network_runs(store, "resume"))
    assert 1 <= first < 4
    done = tracker("--tracking-uri", str(store), "campaign", "run", str(path), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    tally = json.loads(done.stdout)
    assert tally["skipped"] == first and tally["measured"] == 4 - first
    runs = network_runs(store, "resume")
    keys = [r.data.tags["tracker.config_key"] for r in runs]
    assert len(runs) == 4 and len(set(keys)) == 4


@pytest.mark.parametrize("how", ["ctrl-c", "child killed"])
def test_a_network_interrupted_while_its_layers_are_measured_keeps_the_network(tmp_path: Path, how: str) -> None:
    """Until 0.9.3 a Ctrl-C while the layers were measured lost the network's measurement, made
    before them, with them. Now the network run is logged, without layers and saying why, and a
    later `profile layers` measures it again with them (it does not answer for layers). Through a
    campaign, whose summary counts it (it did not, until 0.9.4): the same path as `profile layers`.
    A measuring child killed from outside there (SIGKILL) keeps it too, and the campaign goes on (a
    FAILED run lost it until 0.9.4)."""
    store, mark = tmp_path / "s", tmp_path / "layers-started"
    path = tmp_path / "layered.toml"
    path.write_text('[campaign]\nname = "layered"\n[networks]\nzoo = ["squeezenet1_1"]\n[measure]\nbatch_sizes = [1]\n'
                    'input_sizes = [32]\ntime_cap_s = 0.3\nprecision = 0.5\nlayers = true\nagain_imprecise = false\n')
    args = [sys.executable, "-m", "tracker", "--tracking-uri", str(store), "campaign", "run", str(path), "--format", "json"]
    env = {**os.environ, "TRACKER_FAULT": "layers:hang", "TRACKER_FAULT_MARK": str(mark)}
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=sigint_default)
    try:
        deadline = time.time() + 300
        while not mark.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert mark.exists(), proc.communicate()[1][-2000:] if proc.poll() is not None else "no layer phase"
        if how == "ctrl-c":
            proc.send_signal(signal.SIGINT)
        else:
            for child in _measuring_children(proc.pid):
                os.kill(child, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    [run] = network_runs(store, "layered")
    summary = json.loads(out)
    assert run.info.status == "FINISHED" and run.data.metrics["latency_ms"] > 0 and "sum_of_layers_ms" not in run.data.metrics
    if how == "ctrl-c":
        assert proc.returncode == 130 and "interrupted" in err, err[-2000:]
        assert summary["interrupted"] and summary["measured"] == 1 and summary["runs"] == [
            {"network": "squeezenet1_1", "batch_size": 1, "phase": "inference", "input_size": 32, "device": "cpu",
             "threads": None, "dtype": "float32", "repeat": 1, "status": "FINISHED", "run_id": run.info.run_id,
             "without_layers": True}]
        assert run.data.tags["tracker.child_note"].startswith("interrupted while its layers were measured")
    else:
        assert proc.returncode == 0 and not summary["interrupted"] and summary["measured"] == 1, (summary, err[-2000:])
        assert run.data.tags["tracker.child_note"] == ("its child was killed while its layers were measured (child "
                                                       "ended by signal 9): the network's measurement is kept, without them")
    again = tracker("--tracking-uri", str(store), "-e", "layered", "profile", "layers", "squeezenet1_1", "--input-size", "32",
                    "--time-cap", "0.1", "--precision", "0.5", "--format", "json", cwd=tmp_path)
    assert again.returncode == 0 and not json.loads(again.stdout)["reused"], again.stderr[-2000:]


def _holds_device(pid: int, device: str = "cpu") -> bool:
    """Whether ``pid`` holds the device's lock now (its holder writes its pid, then the device it measures
    on, into the lock file)."""
    import fcntl

    from tracker.profile import devicelock

    path = devicelock.lock_folder() / devicelock.lock_name(device)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        if devicelock._named(fd)[0] != pid:  # read as a waiting note reads it
            return False
        try:  # the lock must be taken still (a holder killed leaves its pid in the file)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _measuring_children(parent: int) -> list[int]:
    """Pids of the measuring children under ``parent`` (forks of its zygote, or started workers)."""
    import psutil

    found = []
    try:
        children = psutil.Process(parent).children()
    except psutil.Error:  # ended
        return []
    for child in children:
        try:
            if "tracker.profile.zygote" in " ".join(child.cmdline()):  # its forks run under the zygote's command line
                found += [fork.pid for fork in child.children()]
            else:
                found.append(child.pid)
        except psutil.Error:  # ended, or a zombie, while being looked at
            pass
    return found


def test_a_configuration_another_process_measured_while_this_one_waited_for_the_device_is_reused(
        tmp_path: Path) -> None:
    """Two campaigns (or a campaign and a profile) of one configuration each planned it before the
    other had measured it, and measured it twice, until 0.8.9: the one that waited for the device
    now asks again once the device is its own. The second a campaign here: a campaign plans what it
    measures itself, and it measured it again until 0.9.4 (the same campaign run twice at once
    measured everything twice)."""
    store = tmp_path / "s"
    args = ["--tracking-uri", str(store), "-e", "shared", "profile", "network", "squeezenet1_1", "--time-cap", "3",
            "--precision", "0.001", "--format", "json"]
    (tmp_path / "one.toml").write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\nbatch_sizes = [1]\n'
                                       'time_cap_s = 0.3\nprecision = 0.5\nagain_imprecise = false\n')
    first = subprocess.Popen([sys.executable, "-m", "tracker", *args], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        # measuring, and holding the device: a child of its own (its mode's reading, say) may come before the lock,
        # and a second started then could take the device first (the suite failed so once)
        deadline = time.time() + 120
        while time.time() < deadline and not (_measuring_children(first.pid) and _holds_device(first.pid)):
            time.sleep(0.1)
        assert _measuring_children(first.pid) and _holds_device(first.pid), "the first never started measuring"
        # planned now, while the first measures: it waits for the device
        second = tracker("--tracking-uri", str(store), "-e", "shared", "campaign", "run", "one.toml", "--format", "json",
                         cwd=tmp_path)
        out, err = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0 and second.returncode == 0, (err, second.stderr)
    measured, tally = json.loads(out), json.loads(second.stdout)
    assert not measured["reused"] and (tally["measured"], tally["skipped"], tally["runs"]) == (0, 1, []), (tally, second.stderr)
    assert count_runs(store, "network") == 1


def test_a_campaign_reuses_what_was_logged_since_it_planned_though_it_never_waited(tmp_path: Path) -> None:
    """Two campaigns taking turns on one store find the device free between configurations: one that
    had not waited measured again what the other had just logged, until 0.9.7 (two copies of a
    4-configuration campaign left 7 runs). A campaign asks the store again once the device is its own."""
    from tracker.log.logger import RunLogger
    from tracker.profile.api import measure_planned, plan
    from tracker.profile.stats import Stopping

    logger = RunLogger(str(tmp_path / "s"), "turns")
    planned = plan("squeezenet1_1", 1, input_size=32)  # planned first, then measured by "the other"
    rule = Stopping(time_cap_s=0.2, min_samples=6)
    first = measure_planned(logger, planned, rule, reuse=False, campaign="a")
    again = measure_planned(logger, planned, rule, reuse=False, campaign="b")  # the device free, no wait
    assert not first.reused and again.reused and again.network.run_id == first.network.run_id
    assert count_runs(tmp_path / "s", "network") == 1
    logger.close()


@pytest.mark.parametrize(("how", "zygote"), [("SIGTERM", "1"), ("SIGKILL", "1"), ("SIGKILL", "0")])
def test_a_campaign_ended_by_a_signal_takes_its_measuring_child_with_it(tmp_path: Path, how: str, zygote: str) -> None:
    """Until 0.8.9 a campaign killed (or terminated) mid-measurement left its child measuring,
    orphaned, for the rest of its time cap, beside whatever took the device after it (its lock
    died with the campaign). Now SIGTERM stops a campaign as Ctrl-C does (status 143), and a
    measuring child dies with whatever made it."""
    import psutil

    path = tmp_path / "long.toml"
    path.write_text('[networks]\nzoo = ["resnet18"]\n[measure]\nprecision = 0.001\ntime_cap_s = 60\nmin_samples = 100000\n')
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "--tracking-uri", str(tmp_path / "s"), "campaign", "run",
                             str(path)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TRACKER_ZYGOTE": zygote})  # 0: a started child, killed with its parent
    try:
        deadline, children = time.time() + 120, []
        while time.time() < deadline and not children:
            time.sleep(0.2)
            children = _measuring_children(proc.pid)
        assert children, "no measuring child started"
        time.sleep(1.0 if zygote == "1" else 6.0)  # measuring (a started child imports torch first)
        proc.send_signal(getattr(signal, how))
        _, err = proc.communicate(timeout=60)
        gone = time.time() + 10
        while time.time() < gone and any(psutil.pid_exists(c) and psutil.Process(c).status() != "zombie" for c in children):
            time.sleep(0.1)
        assert not any(psutil.pid_exists(c) and psutil.Process(c).status() != "zombie" for c in children), how
    finally:
        proc.kill()
    if how == "SIGTERM":
        assert proc.returncode == 143 and err.count("interrupted") == 1, (proc.returncode, err)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("precision = 0.2", "precision = 2", "[measure].precision must be from 0.001 to 0.5 (0.02 is 2 %), got 2"),
    # --precision's and --min-samples' bounds (0.9 and 1,000,000 were taken until 0.9.8)
    ("precision = 0.2", "precision = 0.9", "[measure].precision must be from 0.001 to 0.5 (0.02 is 2 %), got 0.9"),
    ("precision = 0.2", "precision = 0.0001", "[measure].precision must be from 0.001 to 0.5 (0.02 is 2 %), got 0.0001"),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\nmin_samples = 1000000",
     "[measure].min_samples must be from 6 to 100000, got 1000000"),
    ("time_cap_s = 0.3", "time_cap_s = 0", "[measure].time_cap_s must be from 0.1 to 3600, got 0"),
    ("timeout_s = 120", "timeout_s = -5", "[measure].timeout_s must be from 1 to 604800, got -5"),
    # --time-cap's, --timeout's and --memory-limit-mb's least (any above 0 was taken until 0.9.13: a timeout of
    # 0.001 s a FAILED run of each configuration, where --timeout 0.001 was refused)
    ("time_cap_s = 0.3", "time_cap_s = 5e-324", "[measure].time_cap_s must be from 0.1 to 3600, got 5e-324"),
    ("timeout_s = 120", "timeout_s = 0.001", "[measure].timeout_s must be from 1 to 604800, got 0.001"),
    # and their most, --time-cap's and --timeout's (any finite number until 0.9.14: a typo's 1e308 let a hung child
    # run until it was stopped)
    ("time_cap_s = 0.3", "time_cap_s = 1e308", "[measure].time_cap_s must be from 0.1 to 3600, got 1e+308"),
    ("timeout_s = 120", "timeout_s = 1e308", "[measure].timeout_s must be from 1 to 604800, got 1e+308"),
    ("timeout_s = 120", "timeout_s = 120\nmemory_limit_mb = 0.5", "[measure].memory_limit_mb must be at least 1, got 0.5"),
    ("timeout_s = 120", "timeout_s = inf", "[measure].timeout_s must be a finite number, got inf"),
    # a whole number past a float's range where a float is asked for: taken until 0.9.13
    ("timeout_s = 120", "timeout_s = 1" + "0" * 400, "[measure].timeout_s must be a finite number, got 1" + "0" * 400),
    # a cap past a 64-bit count of bytes read as a tiny one: every run a false out-of-memory until 0.9.5
    ("timeout_s = 120", "timeout_s = 120\nmemory_limit_mb = 1e30",
     "[measure].memory_limit_mb must be at most 1,073,741,824 MB (1 PiB), got 1e+30"),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\nrepeats = 0",
     "[measure].repeats must be from 1 to 1000 (each repeat is a whole pass over the campaign), got 0"),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\nrepeats = 1000000",
     "[measure].repeats must be from 1 to 1000 (each repeat is a whole pass over the campaign), got 1000000"),
    # a whole number past a float's range: OverflowError's traceback until 0.9.13; said in 80 characters
    ("phases = [\"inference\"]", "phases = [\"inference\"]\nrepeats = " + "9" * 400,
     "[measure].repeats must be from 1 to 1000 (each repeat is a whole pass over the campaign), got " + "9" * 400),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\nmin_samples = " + "9" * 400,
     "[measure].min_samples must be from 6 to 100000, got " + "9" * 400),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\nmin_samples = 2", "[measure].min_samples must be from 6 to 100000, got 2"),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\nthreads = [4096]", "[measure].threads = 4096: expected a whole"),
    ("phases = [\"inference\"]", "phases = []", "[measure].phases names no phase (inference, training); leave it out"),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\ndevices = []", "[measure].devices names no device (cpu, cuda"),
    # a product of nothing ran as an empty campaign, "the shard has no network", until 0.9.3
    ("phases = [\"inference\"]", "phases = [\"training\"]\ndtypes = [\"int8\"]",
     "[measure] plans nothing: dtypes int8 in phases training on cpu (int8 is measured in CPU inference only)"),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\ndevices = [\"cuda:x\"]",
     "[measure].devices: unknown device 'cuda:x' (cpu, cuda, cuda:N)"),
    ("phases = [\"inference\"]", "phases = [\"inference\"]\nallocator = \"jemalloc\"",
     "[measure].allocator = 'jemalloc': expected one of system, retain"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'prune = { model = "resnet18", ratios = [10, "a"] }',
     "[networks.prune].ratios are percentages from 0 to under 100, got 'a'"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'prune = { model = "resnet18", ratios = [50, 100] }',
     "[networks.prune].ratios are percentages from 0 to under 100, got 100"),
    # a whole number past a float's range: OverflowError's traceback until 0.9.13
    *[('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', f'prune = {{ model = "resnet18", ratios = [10, {big}] }}',
       f"[networks.prune].ratios are percentages from 0 to under 100, got {big[:80]}") for big in ("1" + "0" * 400,
                                                                                                  "-1" + "0" * 400)],
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'prune = { model = "resnet18", ratios = [] }',
     "[networks.prune].ratios needs at least one percentage"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', "generate = { count = 2, input_size = 16 }",
     "[networks.generate]: input_size must be at least 32"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', "generate = { count = 0 }",
     "[networks.generate].count must be from 1 to 100000, got 0"),
    # unbounded (a dry run of 100,000,000 hung drawing them) until 0.9.8: zoo generate --count's bound
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', "generate = { count = 100000000 }",
     "[networks.generate].count must be from 1 to 100000, got 100000000"),
    # zoo generate's and zoo prune's --seed bounds (0 to 2**32 - 1): -1, and 2**32 and past, taken until 0.9.11
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', "generate = { count = 1, seed = -1 }",
     "[networks.generate].seed must be from 0 to 4294967295, got -1"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', "generate = { count = 1, seed = 4294967296 }",
     "[networks.generate].seed must be from 0 to 4294967295, got 4294967296"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]',
     'prune = { model = "squeezenet1_1", method = "random", ratios = [10], seed = -3 }',
     "[networks.prune].seed must be from 0 to 4294967295, got -3"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]',
     'prune = { model = "squeezenet1_1", method = "random", ratios = [10], seed = 9223372036854775807 }',
     "[networks.prune].seed must be from 0 to 4294967295, got 9223372036854775807"),
    # since 0.9.1: a name that is none (an experiment it cannot make) or a path (its specs' folder outside the file's)
    ('name = "bad"', 'name = ""', "[campaign].name '' should be a name, not empty nor a path"),
    ('name = "bad"', 'name = "../../elsewhere"', "[campaign].name '../../elsewhere' should be a name, not empty nor a path"),
    ('name = "bad"', 'name = "a\\tb"', "[campaign].name 'a\\tb' should be a name, not empty nor a path"),
    # passed a dry run, and the real one failed making the experiment, until 0.9.8
    ('name = "bad"', f'name = "{"a" * 501}"', "[campaign].name is 501 characters long: it names the experiment, whose "
     "name MLflow takes up to 500 characters"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', "zoo = [1]", "[networks].zoo: 1 is not a model name (a string)"),
    ('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'prune = { model = "nope.json", ratios = [10] }',
     "[networks.prune].model: "),
])
def test_a_bad_campaign_is_refused_before_anything_is_written(tmp_path: Path, old: str, new: str, message: str) -> None:
    from tracker.errors import ConfigError
    from tracker.profile.campaign import load_campaign

    path = campaign_file(tmp_path, "bad", tff=False)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    with pytest.raises(ConfigError) as info:
        load_campaign(path)
    assert str(info.value) == f"{path}: {message}" or str(info.value).startswith(f"{path}: {message}"), str(info.value)
    assert not (tmp_path / "bad").exists()  # no spec folder of generated or pruned networks either


def test_a_campaign_measures_what_it_names_twice_once_and_prunes_a_spec_file(tmp_path: Path) -> None:
    """A network, phase or thread count named twice was two configurations (the second "measured"
    in a dry run of an empty store), and a spec file as [networks.prune].model an "unknown model",
    until 0.9.1; a zoo name it lacks says which file and key."""
    from tracker.errors import UnknownModelError
    from tracker.profile.campaign import load_campaign
    from tracker.zoo.pruning import pruned_spec
    from tracker.zoo.spec import write_specs

    path = campaign_file(tmp_path, "twice", tff=False)
    path.write_text(path.read_text().replace('zoo = ["squeezenet1_1", "mobilenet_v3_small"]',
                                             'zoo = ["squeezenet1_1", "squeezenet1_1"]').replace(
        'phases = ["inference"]', 'phases = ["inference", "inference"]\nthreads = [1, 1]'))
    c = load_campaign(path)
    assert (c.networks, c.phases, c.threads) == (["squeezenet1_1"], ["inference"], [1])
    [base] = write_specs([pruned_spec("squeezenet1_1", 0.5)], tmp_path / "specs")
    path.write_text(path.read_text().replace('zoo = ["squeezenet1_1", "squeezenet1_1"]',
                                             'prune = { model = "specs/squeezenet1_1-p50-l1-s0.json", ratios = [10] }'))
    c = load_campaign(path)
    assert [Path(n).name for n in c.networks] == ["squeezenet1_1-p50-l1-s0-p10-l1-s0.json"] and base.is_file()
    path.write_text(path.read_text().replace('prune = { model = "specs/squeezenet1_1-p50-l1-s0.json", ratios = [10] }',
                                             'zoo = ["resnt18"]'))
    with pytest.raises(UnknownModelError, match=rf"^{path}: \[networks\].zoo: unknown model 'resnt18'; did you mean"):
        load_campaign(path)


def test_a_campaigns_specs_may_name_a_folder_or_a_pattern_and_say_where_they_were_looked_for(tmp_path: Path) -> None:
    """A folder of specs (as zoo generate --out writes them) or a glob pattern, relative to the campaign
    file; one that names nothing says where it looked (the entry as written was all it said)."""
    from tracker.errors import ConfigError
    from tracker.profile.campaign import load_campaign
    from tracker.zoo.generator import generate
    from tracker.zoo.spec import write_specs

    written = write_specs(generate(3, 0), tmp_path / "specs")
    (tmp_path / "camp").mkdir()
    path = tmp_path / "camp" / "c.toml"
    for entry, expected in (("../specs", written), ("../specs/*-000[02].json", [written[0], written[2]]),
                            (str(written[1]), [written[1]])):
        path.write_text(f'[networks]\nspecs = ["{entry}"]\n')
        assert [Path(p).resolve() for p in load_campaign(path).networks] == [p.resolve() for p in expected]
    for entry, says in (("../nothing/*.json", "matches no file"), ("../camp", "is a folder without spec files (*.json)"),
                        ("specs/gen-s0-0000.json", "does not exist")):
        path.write_text(f'[networks]\nspecs = ["{entry}"]\n')
        with pytest.raises(ConfigError) as info:
            load_campaign(path)
        assert str(info.value) == f"{path}: [networks].specs: {entry} ({path.parent / entry}) {says}"


def test_a_campaign_file_that_is_not_utf8_is_one_line_and_a_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    from tracker.errors import ConfigError
    from tracker.profile.campaign import load_campaign

    path = campaign_file(tmp_path, "bom", tff=False)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as some editors save UTF-8
    assert load_campaign(path).name == "bom"
    path.write_text('model = "resnet18"\n[data]\npath = "images"\n')  # a training job's file
    with pytest.raises(ConfigError) as info:
        load_campaign(path)
    assert str(info.value) == (f"{path}: unknown key model outside a section (a campaign has the sections [campaign], "
                               "[networks], [measure]); it looks like a training job file: tracker profile training FILE")
    path.write_bytes(b"\xff\xfe[campaign]\n")
    with pytest.raises(ConfigError) as info:
        load_campaign(path)
    assert str(info.value) == f"{path}: not UTF-8 text (byte 0: b'\\xff'); a campaign is a TOML file"


@pytest.mark.parametrize("reader", ["campaign", "job", "space"])
@pytest.mark.parametrize(("text", "said"), [
    ("[measure]\nrepeats = 1" + "0" * 5000 + "\n", "a whole number of more than 4,300 digits (more than Python reads)"),
    ("[measure]\nrepeats = " + "[" * 100_000 + "\n", "TOML nested too deeply to read"),  # a traceback until 0.9.15
])
def test_a_toml_file_with_a_number_of_more_digits_than_python_reads_is_one_line(tmp_path: Path, reader: str,
                                                                               text: str, said: str) -> None:
    """tomllib raises a plain ValueError for a whole number of more than 4,300 digits (a typo's run of zeros),
    and a RecursionError for arrays in arrays past Python's limit: the traceback of every command that read
    such a campaign, job or search space file until 0.9.14 and 0.9.15."""
    from tracker.profile.campaign import load_campaign
    from tracker.profile.job import load_job
    from tracker.searchspace.space import load_space

    path = tmp_path / "file.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        {"campaign": load_campaign, "job": load_job, "space": load_space}[reader](path)
    assert str(info.value) == f"{path}: {said}"


def test_a_retaining_allocator_is_a_mode_of_its_own_and_ends_the_page_faults(tmp_path: Path) -> None:
    """mobilenet_v2 at 224 px, batch 4: with glibc's defaults its large activations are mapped afresh
    and given back at every iteration (thousands of page faults each); with the allocator retaining
    freed memory, about none here (2.4 per iteration). A CI host counted 124 against 2,568: faults
    the allocator does not cause (NUMA balancing's hinting faults, where the kernel has it on, which
    the runs' env tags now record) stay, so the bound is a tenth. Each is its own mode (and
    configuration), recorded by a mode run.

    glibc's defaults are not the same every run: its mmap threshold moves with what the process
    frees, and now and then (1 measurement in 25 here, at batch 1: 146 and 1.4 faults per iteration
    against 2,400-3,500) it settles early enough that the defaults fault no more than retaining. So
    the default mode is measured again (``again``, a repeat) while it shows no faults, up to 3 times.
    Batch 4, not 1, since 0.9.27: the network built once and let go before it is measured
    (``build_once``, 0.9.26) frees its largest weight (the classifier's 5 MB), which sets the threshold
    above every activation of batch 1 (1.4 faults per iteration by default, 9,555 at batch 4)."""
    logger = RunLogger(str(tmp_path / "s"), experiment="alloc")
    rule = Stopping(target_ci_rel=0.2, time_cap_s=1.0, warmup_cap_s=0.5)
    system = profile_network(logger, "mobilenet_v2", 4, rule, threads=1, timeout_s=300)
    system_faults = [system.network.metrics["page_faults_per_iter_count"]]
    while max(system_faults) <= 500 and len(system_faults) < 3:
        repeat = profile_network(logger, "mobilenet_v2", 4, rule, threads=1, timeout_s=300, again=True)
        assert repeat.network.config_key == system.network.config_key
        system_faults.append(repeat.network.metrics["page_faults_per_iter_count"])
    retain = profile_network(logger, "mobilenet_v2", 4, rule, threads=1, timeout_s=300, allocator="retain")
    assert system.network.status == retain.network.status == "FINISHED"
    assert retain.network.params["mode"] == system.network.params["mode"] + "-retain"
    assert retain.network.config_key != system.network.config_key
    faults = max(system_faults), retain.network.metrics["page_faults_per_iter_count"]
    client = MlflowClient(logger.location.uri)
    tags = client.get_run(retain.network.run_id).data.tags
    kernel = {k: tags.get(k) for k in ("env.numa_balancing", "env.transparent_hugepage")}
    assert faults[0] > 500 and faults[1] < 0.1 * faults[0], (faults, kernel)
    numa = Path("/proc/sys/kernel/numa_balancing")
    if numa.exists():
        assert kernel["env.numa_balancing"] == numa.read_text().strip()
    assert system.as_dict()["page_faults_per_iter_count"] == system_faults[0]  # its own, whatever a repeat read
    exp = client.get_experiment_by_name("alloc")
    mode_runs = {r.data.params["mode"]: r.data.params for r in client.search_runs([exp.experiment_id],
                                                                              "tags.`tracker.kind` = 'mode'")}
    assert mode_runs[retain.network.params["mode"]]["cpu_allocator"] == "retain"
    assert "cpu_allocator" not in mode_runs[system.network.params["mode"]]
    logger.close()


def test_shards_split_networks_between_devices(tmp_path: Path) -> None:
    from tracker.profile.campaign import chains, load_campaign

    c = load_campaign(campaign_file(tmp_path, "sharded"))
    one, two = chains(c, (1, 2)), chains(c, (2, 2))
    assert {x[0] for x in one} == {"squeezenet1_1"} and {x[0] for x in two} == {"mobilenet_v3_small"}
    assert sorted(one + two) == sorted(chains(c, (1, 1)))


def test_repeats_are_measured_in_rounds_and_resume(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tracker.cli.app import app

    path = tmp_path / "twice.toml"
    path.write_text(CAMPAIGN.format(name="twice", tff="false").replace('"squeezenet1_1", "mobilenet_v3_small"', '"squeezenet1_1"')
                    .replace("[1, 2, 4]", "[1, 2]") + "repeats = 2\n")
    store, runner = tmp_path / "s", CliRunner()

    def cli(*args: str) -> object:
        result = runner.invoke(app, ["--tracking-uri", str(store), *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout) if "json" in args else result

    first = cli("campaign", "run", str(path), "--format", "json")
    assert first == {**first, "total": 4, "measured": 4, "skipped": 0}
    runs = sorted(network_runs(store, "twice"), key=lambda r: r.info.start_time)
    keys = [r.data.tags["tracker.config_key"] for r in runs]
    assert len(set(keys)) == 2 and keys[:2] == keys[2:]  # round 1 went through both batch sizes before round 2
    assert [r.data.tags.get("tracker.repeat_key") for r in runs] == [None, None, f"{keys[0]}#r2", f"{keys[1]}#r2"]
    # a repeat's name says which (one name for both until 0.9.2)
    assert [r.info.run_name.endswith(" · repeat 2") for r in runs] == [False, False, True, True]
    assert runs[2].info.run_name == f"{runs[0].info.run_name} · repeat 2"
    # the JSON names the runs it logged, in the order measured (it carried none until 0.9.2)
    assert [(x["run_id"], x["batch_size"], x["repeat"], x["status"]) for x in first["runs"]] == [
        (r.info.run_id, int(r.data.params["batch_size"]), 1 + k // 2, "FINISHED") for k, r in enumerate(runs)]
    # each as a dry run plans it: its input size, threads and dtype too (two runs of two input sizes were alike
    # but for their run ids until 0.9.8)
    planned = cli("campaign", "run", str(path), "--format", "json", "--dry-run")["configurations"]
    fields = ("network", "batch_size", "phase", "input_size", "device", "threads", "dtype", "repeat")
    assert [{k: x[k] for k in fields} for x in first["runs"]] == [{k: x[k] for k in fields} for x in planned]
    again = cli("campaign", "run", str(path), "--format", "json")
    assert again == {**again, "total": 4, "measured": 0, "skipped": 4, "runs": []}
    # a shard without a network says so, as its dry run does (until 0.9.2: "0 measured, ... of 0")
    empty = cli("campaign", "run", str(path), "--shard", "2/2")
    assert empty.stdout == "twice: no configuration (shard 2/2 has no network: the campaign has 1)\n"
    whole = cli("campaign", "run", str(path), "--shard", "1/2")  # a shard's counts say they are its (since 0.9.5)
    assert whole.stdout == "twice (shard 1/2): 0 measured, 0 failed, 4 skipped of 4\n"
    dry = cli("campaign", "run", str(path), "--shard", "2/2", "--dry-run")  # in the same words (since 0.9.3)
    assert dry.stdout.rstrip().endswith("dry run, nothing measured: no configuration (shard 2/2 has no network: the "
                                        "campaign has 1)")
    wh = str(tmp_path / "w.duckdb")
    cli("warehouse", "load", "--warehouse", wh)
    rows = cli("sql", "SELECT batch_size, repeats FROM measurement_repeats ORDER BY batch_size", "--warehouse", wh,
               "--format", "json")
    assert rows == [{"batch_size": 1, "repeats": 2}, {"batch_size": 2, "repeats": 2}]
    # Each run carries the description its parent process made: the warehouse has its node rows.
    described = cli("sql", "SELECT count(DISTINCT m.run_id) AS runs, count(n.node_index) > 50 AS nodes "
                    "FROM latest_measurements m JOIN network_nodes n USING (model_hash)", "--warehouse", wh, "--format", "json")
    assert described == [{"runs": 2, "nodes": True}]


def test_a_spec_file_edited_after_planning_is_measured_as_planned(tmp_path: Path) -> None:
    """Planning reads a spec file once: the child's job carries that network, not the file's name
    alone, so an edit made since is not measured under the planned description; planning the
    edited file describes it afresh (not with the description of the old one)."""
    from tracker.describe import spec_json
    from tracker.profile.api import _graph_artifact, job_for, plan
    from tracker.profile.measure import run_job
    from tracker.zoo.generator import generate_spec

    spec = generate_spec(3, 0, input_size=32, num_classes=10)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(spec))
    planned = plan(str(path), 1)
    path.write_text(json.dumps({**spec, "num_classes": 12}))  # another network under the same file name
    replanned = plan(str(path), 1)
    assert replanned.model_hash != planned.model_hash
    # The graph artifact logged with each configuration is made once per network, by content too.
    for p in (planned, replanned, planned):
        graph = json.loads(_graph_artifact(p.spec.model, spec_json(p.network_spec), p.spec.input_size))
        assert graph["graph"]["description_hash"] == p.model_hash
    path.write_text("{ no longer a spec")  # edited again before the child starts: it must not read it
    payload = run_job(job_for(planned, FAST, False, None))  # what the child runs, here in-process
    assert payload["model_name"] == spec["name"] and len(payload["timing"]["samples_ms"]) >= 2


def test_a_run_on_a_second_gpu_carries_that_gpus_name_and_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's env tags name its first CUDA device; a run on cuda:1 of a machine whose GPUs
    differ is tagged with GPU 1's name and memory, and so is its row in the warehouse (its device
    name, the memory a fingerprint says fits under). CUDA_VISIBLE_DEVICES renumbers the devices.
    (NVML is a stand-in, no NVIDIA driver here; the child fails without CUDA: a FAILED run on
    cuda:1 all the same.)"""
    from tests.test_telemetry import FakeNvml
    from tracker import environment
    from tracker.warehouse.load import connect, load
    from tracker.warehouse.source import open_source

    def fresh() -> None:
        environment._gpu_tags.cache_clear()
        environment.nvml_info.cache_clear()

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fresh()
    try:
        assert environment.gpu_tags("cpu") == {} and environment.gpu_tags("cuda:7") == {}  # no such GPU: absent
        logger = RunLogger(str(tmp_path / "s"), experiment="gpus")
        assert logger.environment["env.gpu_name"] == "Small GPU 16GB"  # the machine's first CUDA device
        second = profile_network(logger, TINY, 1, FAST, device="cuda:1", timeout_s=120).network
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc1")  # cuda:0 is NVML's GPU 1
        visible = profile_network(logger, TINY, 2, FAST, device="cuda:0", timeout_s=120).network
        logger.close()
    finally:
        fresh()
    client = MlflowClient(logger.location.uri)
    for run in (second, visible):
        tags = client.get_run(run.run_id).data.tags
        assert run.status == "FAILED" and run.params["device"] in ("cuda:1", "cuda")  # cuda:0 is cuda
        assert (tags["env.gpu_name"], tags["env.gpu_memory_total_mb"]) == ("Large GPU 80GB", "81920")
    load(tmp_path / "w.duckdb", open_source(logger.location))
    con = connect(tmp_path / "w.duckdb", read_only=True)
    try:
        rows = con.sql("SELECT DISTINCT device_name, device_memory_mb FROM whole_network_runs").fetchall()
    finally:
        con.close()
    assert rows == [("Large GPU 80GB", 81920.0)]


def test_a_detection_network_trains_on_boxes_of_its_own_at_the_size_it_is_given() -> None:
    """Since 0.8.5 ``profile network --phase training`` measures a torchvision detection network's
    step (it failed: ``targets should not be none``): fixed random boxes of class 1 within each
    image, masks filling them for Mask R-CNN, visible keypoints inside them for Keypoint R-CNN; the
    sum of its losses backward. And it computes at the input size it is given (it resized every
    input to its own 320 or 800 px before)."""
    import torch

    from tracker.profile.measure import _detection_step, detection_targets
    from tracker.profile.network import NetworkSpec
    from tracker.zoo import build_model

    targets = detection_targets(2, 64, keypoints=17, masks=True, device="cpu")
    again = detection_targets(2, 64, keypoints=17, masks=True, device="cpu")
    assert all(torch.equal(a["boxes"], b["boxes"]) for a, b in zip(targets, again))  # the same every step and run
    for t in targets:
        boxes = t["boxes"]
        assert boxes.shape == (3, 4) and bool((boxes >= 0).all() and (boxes <= 64).all())
        assert bool((boxes[:, 2:] - boxes[:, :2] >= 16).all()) and t["labels"].tolist() == [1, 1, 1]
        areas = ((boxes[:, 2].ceil() - boxes[:, 0].ceil()) * (boxes[:, 3].ceil() - boxes[:, 1].ceil()))
        assert t["masks"].shape == (3, 64, 64) and torch.equal(t["masks"].sum((1, 2)).float(), areas)
        points = t["keypoints"]
        assert points.shape == (3, 17, 3) and bool((points[..., 2] == 1).all())
        assert bool((points[..., :2] >= boxes[:, None, :2]).all() and (points[..., :2] <= boxes[:, None, 2:]).all())
    model = build_model("fasterrcnn_mobilenet_v3_large_320_fpn", input_size=64)
    assert (model.transform.min_size, model.transform.max_size) == ((64,), 64)
    step = _detection_step(model, NetworkSpec(model="fasterrcnn_mobilenet_v3_large_320_fpn", batch_size=2,
                                              input_size=64, device="cpu"))
    step()
    assert model.training and model.roi_heads.box_predictor.bbox_pred.weight.grad is not None


HOLD_DEVICE = """\
import sys, time
from tracker.profile.devicelock import measuring_on
with measuring_on([sys.argv[2]]):
    print("held", flush=True)
    if sys.argv[1] == "-":  # held until told, a line on stdin
        sys.stdin.readline()
    else:
        time.sleep(float(sys.argv[1]))
    print(round(time.time() * 1000), flush=True)  # let go just after
"""


def test_two_processes_take_turns_measuring_on_one_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Since 0.8.7 a measuring child runs while its parent holds its device's lock: a `tracker
    profile` started while another tracker process measures on the CPU waits for it, says so once
    naming it, and its run starts when the device is its own; a holder killed lets go at once;
    a GPU's lock is its physical GPU's (CUDA_VISIBLE_DEVICES)."""
    from tracker.profile import devicelock

    args = ("--tracking-uri", str(tmp_path / "s"), "profile", "network", TINY, "-b", "1", "--time-cap", "0.3",
            "--precision", "0.2", "--format", "json")
    assert tracker(*args, cwd=tmp_path).returncode == 0  # its store made and its network described: the next waits at once
    holder = subprocess.Popen([sys.executable, "-c", HOLD_DEVICE, "2", "cpu"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        out = tracker(*args, "--again", cwd=tmp_path)
        let_go_ms = int(holder.stdout.readline())
    finally:
        holder.kill()
        holder.wait()
    assert out.returncode == 0, out.stderr
    assert (f"note: another tracker process (pid {holder.pid}) is measuring on cpu: waiting for it (two "
            "measurements at once on one device would each time the other's work too)") in out.stderr
    run = MlflowClient(f"sqlite:///{tmp_path / 's' / 'mlflow.db'}").get_run(json.loads(out.stdout)["run_id"])
    assert run.info.start_time >= let_go_ms - 50, (run.info.start_time, let_go_ms)  # its wait is not its measurement

    # a device no other test measures on (the suite may run beside another process of it)
    import fcntl

    def free() -> bool:
        fd = os.open(devicelock.lock_folder() / devicelock.lock_name("cuda:97"), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    holder = subprocess.Popen([sys.executable, "-c", HOLD_DEVICE, "600", "cuda:97"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held" and not free()
    holder.kill()  # SIGKILL: nothing of it lets go but the kernel
    holder.wait()
    assert free()

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5fb2/x, 3")
    assert [devicelock.lock_name(d) for d in ("cpu", "cuda", "cuda:1", "cuda:2")] == \
        ["cpu.lock", "cuda-GPU-5fb2_x.lock", "cuda-3.lock", "cuda-2.lock"]


def test_a_gpu_measurement_and_a_cpu_one_take_turns_on_the_host_and_two_gpus_do_not() -> None:
    """Since 0.9.21 a GPU measurement holds the CPU's lock too, shared: its host thread launches the
    device's work from a core a CPU measurement's threads fill (on an H200's host of 16 cores, one core
    of other work made squeezenet1_1 on 16 threads 2.9 times slower). So a CPU measurement waits for a
    GPU one and a GPU one for a CPU one, each saying what the other measures on, while measurements on
    two GPUs run at once; a mapping's, on the CPU and a GPU, holds the CPU's exclusive. Locks alone:
    holding a GPU's lock needs no GPU (devices no other test measures on: cuda:97, cuda:98)."""
    from tracker.profile.devicelock import measuring_on

    host = ("(a GPU measurement launches its work from a core of the CPU, which a CPU measurement's threads fill: "
            "each would time the other's work too)")

    def beside(held: str, asked: list[str]) -> tuple[float, list[str], int]:
        """Another process holds ``held`` for a second; this one asks for ``asked``: how long it waited,
        what it said, and the holder's pid."""
        holder = subprocess.Popen([sys.executable, "-c", HOLD_DEVICE, "1", held], stdout=subprocess.PIPE, text=True)
        said: list[str] = []
        try:
            assert holder.stdout.readline().strip() == "held"
            with measuring_on(asked, said.append) as waited:
                pass
        finally:
            holder.kill()
            holder.wait()
        return waited, said, holder.pid

    assert beside("cuda:97", ["cuda:98"])[:2] == (0.0, [])  # another GPU: at once, beside it
    for held, asked, theirs in (("cuda:97", ["cpu"], "cuda:97"),  # the CPU: after the GPU's measurement
                                ("cpu", ["cuda:98"], "cpu"),  # a GPU: after the CPU's
                                ("cuda:97", ["cpu", "cuda:98"], "cuda:97")):  # a mapping's stages: the CPU exclusive
        waited, said, pid = beside(held, asked)
        assert waited > 0.5, (held, asked, waited)  # the holder's second, less its start
        assert said == [f"another tracker process (pid {pid}) is measuring on {theirs}: waiting for it {host}"]


def test_a_cpu_measurement_waiting_for_a_gpu_one_no_lock_file_names_says_a_gpu_holds_the_host() -> None:
    """The lock file names one shared holder of the CPU's lock, the first GPU measurement to take it: where
    that one lets go while a second GPU measurement still holds it, a CPU measurement's waiting note said
    "measuring on cpu" with a CPU's reason (until 0.9.22); it says a GPU holds it, and why it waits."""
    from tracker.profile.devicelock import measuring_on

    named = subprocess.Popen([sys.executable, "-c", HOLD_DEVICE, "-", "cuda:95"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    other = None
    said: list[str] = []
    try:
        assert named.stdout.readline().strip() == "held"
        other = subprocess.Popen([sys.executable, "-c", HOLD_DEVICE, "3", "cuda:96"], stdout=subprocess.PIPE, text=True)
        assert other.stdout.readline().strip() == "held"  # beside the first, shared, named nowhere
        named.communicate("go\n", timeout=60)  # the named holder lets go: the lock file is blank
        with measuring_on(["cpu"], said.append) as waited:
            pass
    finally:
        for p in (named, other):
            if p is not None:
                p.kill()
                p.wait()
    assert waited > 0.5, waited
    assert said == ["another tracker process is measuring on a GPU: waiting for it (a GPU measurement launches its work "
                    "from a core of the CPU, which a CPU measurement's threads fill: each would time the other's work too)"]


def test_a_lock_whose_holder_lets_go_as_the_waiter_looks_is_taken_without_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiter that finds the CPU's lock held and no holder named probes it with a shared lock of its own,
    which is granted beside GPU measurements, and also where the holder has just let go. Until 0.9.23 the
    note then said a GPU held it; the waiter tries once more right after the probe, and takes the lock
    without a note. (The holder's letting go is put between the waiter's try and its look.)"""
    import fcntl

    from tracker.profile import devicelock

    # the lock file as a measurement opens it (its folder made where no test before it in this worker did)
    holder = [devicelock._open(devicelock.lock_folder() / devicelock.lock_name("cpu"))]
    fcntl.flock(holder[0], fcntl.LOCK_EX)
    named = devicelock._named

    def letting_go(fd: int) -> tuple:
        if holder:
            os.close(holder.pop())  # and its lock with it, as the waiter reads who holds it
        return named(fd)

    monkeypatch.setattr(devicelock, "_named", letting_go)
    said: list[str] = []
    with devicelock.measuring_on(["cpu"], said.append) as waited:
        pass
    assert said == [] and waited < 0.1, (said, waited)


def test_a_configuration_asked_for_more_samples_than_it_was_measured_to_is_measured_again(tmp_path: Path) -> None:
    """``--min-samples 30`` reused a run measured to 10 without a word (until 0.9.6): it is a repeat
    now, measured to 30, and that repeat answers the same request, and a plain one, again."""
    import dataclasses

    logger = RunLogger(str(tmp_path / "s"), experiment="more")
    first = profile_network(logger, TINY, 1, FAST, input_size=64, timeout_s=300)
    assert not first.reused and first.network.params["min_samples"] in (10, "10")
    # the time cap ends sampling before min_samples (stats.stop_reason): FAST's 0.3 s ended this one at 11
    # samples on a loaded machine, so this rule gives 30 samples time (reuse reads min_samples alone)
    more = dataclasses.replace(FAST, min_samples=30, time_cap_s=5.0)
    second = profile_network(logger, TINY, 1, more, input_size=64, timeout_s=300)
    assert not second.reused and second.network.run_id != first.network.run_id
    assert second.network.metrics["samples_count"] >= 30 and "tracker.repeat_key" in second.network.tags
    for rule in (more, FAST):
        again = profile_network(logger, TINY, 1, rule, input_size=64, timeout_s=300)
        assert again.reused and again.network.run_id == second.network.run_id


def test_every_measurement_and_its_layers_carry_the_machines_speed_beside_them(tmp_path: Path) -> None:
    """The speed probe (tracker.profile.probe) is timed before and after the network's window and
    after its layers: the network run, each layer run and the samples artifact carry it, in the
    warehouse too; a probe slower than the machine's speed could make it is no probe of it."""
    from tracker.log.samples import SAMPLES_ARTIFACT
    from tracker.profile.probe import PROBE_RUNS, PROBE_TAG, PROBE_VERSION
    from tracker.warehouse.load import connect_loaded, load
    from tracker.settings import resolve_location
    from tracker.warehouse.source import open_source

    store = str(tmp_path / "s")
    logger = RunLogger(store)
    r = profile_network(logger, TINY, 1, FAST, layers=True, layer_rule=FAST.for_layers(), timeout_s=120,
                        input_size=64)
    client = MlflowClient(logger.location.uri)
    run = client.get_run(r.network.run_id)
    assert run.data.metrics["speed_probe_count"] == 2 * PROBE_RUNS and run.data.tags[PROBE_TAG] == str(PROBE_VERSION)
    assert 0.05 < run.data.metrics["speed_probe_ms"] < 100, run.data.metrics["speed_probe_ms"]
    samples = json.loads(Path(client.download_artifacts(r.network.run_id, SAMPLES_ARTIFACT, str(tmp_path))).read_text())
    assert len(samples["speed_probe_ms"]) == 2 * PROBE_RUNS and samples["speed_probe_version"] == PROBE_VERSION
    layers = client.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{r.network.run_id}'")
    assert layers and all(lr.data.metrics["speed_probe_count"] == 2 * PROBE_RUNS for lr in layers)
    assert len({lr.data.metrics["speed_probe_ms"] for lr in layers}) == 1  # one probe brackets the layers' window
    warehouse = tmp_path / "w.duckdb"
    load(warehouse, open_source(resolve_location(store)))
    con = connect_loaded(warehouse)
    try:
        network = con.sql("SELECT speed_probe_ms FROM measurements").fetchall()
        layer_probes = con.sql("SELECT DISTINCT speed_probe_ms FROM layer_runs").fetchall()
    finally:
        con.close()
    assert network == [(pytest.approx(run.data.metrics["speed_probe_ms"]),)]
    assert layer_probes == [(pytest.approx(layers[0].data.metrics["speed_probe_ms"]),)]


def test_a_campaign_name_is_bounded_by_mlflows_experiment_name() -> None:
    """load_campaign's bound on [campaign].name is MLflow's on an experiment's name (not imported, to keep
    mlflow out of a dry run): one that moves is caught here."""
    from mlflow.utils.validation import MAX_EXPERIMENT_NAME_LENGTH

    from tracker.profile.campaign import MAX_EXPERIMENT_NAME_LENGTH as ours

    assert ours == MAX_EXPERIMENT_NAME_LENGTH


def test_a_probe_that_fails_ends_the_probe_not_the_measurement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A speed probe's fault (out of device memory beside a network near its limit, here injected) leaves
    the measurement whole, without a probe, and says why on its run."""
    from tracker.profile.probe import PROBE_ERROR_TAG

    monkeypatch.setenv("TRACKER_FAULT", "noprobe")
    logger = RunLogger(str(tmp_path / "s"))
    r = profile_network(logger, TINY, 1, FAST, layers=True, layer_rule=FAST.for_layers(), timeout_s=120, input_size=64)
    assert r.network.status == "FINISHED" and r.network.metrics["latency_ms"] > 0
    assert "speed_probe_ms" not in r.network.metrics and r.layers
    assert all("speed_probe_ms" not in layer.metrics for layer in r.layers)
    assert r.network.tags[PROBE_ERROR_TAG] == "RuntimeError: injected: the probe failed (TRACKER_FAULT)"


def test_a_campaign_whose_every_measurement_failed_fails(tmp_path: Path) -> None:
    """A campaign every configuration of which it measured failed, none measured before, ends with status 1 and a
    line saying nothing was measured (0 until 0.9.12, as one that measured); one measured before counts as
    measured, and a campaign with nothing left to do (each failed before) is no failure."""
    path = campaign_file(tmp_path, "doomed", tff=False)
    text = path.read_text().replace('zoo = ["squeezenet1_1", "mobilenet_v3_small"]', 'zoo = ["squeezenet1_1"]')

    def run(batch_sizes: str, fault: str | None) -> subprocess.CompletedProcess:
        path.write_text(text.replace("batch_sizes = [1, 2, 4]", f"batch_sizes = {batch_sizes}"))
        return tracker("--tracking-uri", str(tmp_path / "s"), "campaign", "run", str(path), cwd=tmp_path,
                       env={"TRACKER_FAULT": fault} if fault else None)

    measured = run("[1]", None)
    assert measured.returncode == 0 and "doomed: 1 measured, 0 failed, 0 skipped of 1" in measured.stdout, measured
    reused = run("[1, 2]", "oom")  # batch 1 measured before, batch 2 fails (an injected out-of-memory)
    assert reused.returncode == 0 and "doomed: 0 measured, 1 failed, 1 skipped of 2" in reused.stdout, reused
    failed = run("[2, 4, 8]", "oom")  # batch 2 failed before, 4 and 8 fail now
    assert (failed.returncode, failed.stdout) == (1, "doomed: 0 measured, 2 failed, 1 skipped of 3\n"), failed
    assert failed.stderr.splitlines()[-1] == (
        "error: nothing measured: each of the 2 configurations measured failed, and 1 more was skipped, failed before "
        "or past a failure (their runs say why: tracker -e doomed runs list --status FAILED)"), failed.stderr
    assert len(network_runs(tmp_path / "s", "doomed")) == 4
    one = run("[16]", "oom")
    assert one.returncode == 1 and one.stderr.splitlines()[-1].startswith(
        "error: nothing measured: the one configuration measured failed (its run says why: "), one.stderr
    nothing_to_do = run("[2, 4, 8]", None)  # each failed before: skipped, nothing measured nor failed
    assert nothing_to_do.returncode == 0 and "doomed: 0 measured, 0 failed, 3 skipped of 3" in nothing_to_do.stdout, \
        nothing_to_do


#: A network of one's own whose first module writes, at every call, how many tensors of the speed probe's
#: (its CPU input, its first convolution's weight) the process holds: to a file beside it.
WATCHED_NET = '''import gc
from pathlib import Path

import torch
from torch import nn

INPUT_SIZE = 16
SHAPES = {(1, 32, 56, 56), (64, 32, 3, 3)}


class Watch(nn.Module):
    def forward(self, x):
        alive = sum(1 for o in gc.get_objects() if issubclass(type(o), torch.Tensor) and tuple(o.shape) in SHAPES)
        with open(Path(__file__).with_suffix(".seen"), "a") as fh:
            fh.write(f"{alive}\\n")
        return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.watch = Watch()
        self.conv = nn.Conv2d(3, 4, 3)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.conv(self.watch(x)), 1), 1))
'''


def test_a_networks_window_and_its_layers_hold_none_of_the_speed_probe(tmp_path: Path) -> None:
    """A network's measuring child held its speed probe's layers and input from its first bracket to its last,
    over the network's window and its layers' (inside its peak_rss_mb: about 0.5 MB on a CPU, 26 MB of host
    memory beside a GPU) until 0.9.12. It is released after each bracket and built again for the next: no call of
    the network or of its layers sees a tensor of it, and the run still has every bracket's samples."""
    from tracker.profile.api import job_for, plan
    from tracker.profile.measure import run_job
    from tracker.profile.probe import PROBE_RUNS, SpeedProbe

    import gc

    net = tmp_path / "watched.py"
    net.write_text(WATCHED_NET)
    seen = net.with_suffix(".seen")
    exec(compile(WATCHED_NET, str(net), "exec"), scope := {"__file__": str(net)})
    gc.collect()
    scope["Watch"]()(None)  # tensors of those shapes an earlier test of this worker left alive (one, on CI once)
    before = int(seen.read_text())
    seen.unlink()
    probe = SpeedProbe("cpu")  # the file's scan sees a probe's tensors where they are held
    scope["Watch"]()(None)
    assert int(seen.read_text()) == before + 2
    del probe, scope

    planned = plan(f"{net}:Net", 1)  # its description runs it once
    seen.unlink()
    payload = run_job(job_for(planned, FAST, True, FAST.for_layers()))  # what the child runs, here in-process
    calls = [int(line) for line in seen.read_text().split()]
    # the network's warm-up and samples, then its layers' (the watch among them): more than the samples alone
    assert len(calls) > len(payload["timing"]["samples_ms"]) + len(payload["timing"]["warmup_ms"])
    assert set(calls) == {before}
    assert len(payload["speed_probe"]["samples_ms"]) == 2 * PROBE_RUNS  # before and after the window, as before
    assert len(payload["layers_speed_probe"]["samples_ms"]) == 2 * PROBE_RUNS  # after it and after the layers
    assert payload["layers"] and payload["memory"]["network_mem_mb"] >= 0


def test_a_runs_numbers_in_another_scripts_digits_are_unreadable() -> None:
    """A run's tag or param edited to another script's digits (``٣``, in the MLflow UI) was read by float(),
    int() and isdigit as 3 until 0.9.14: a timeout of 3 s measured again under a larger limit, a run asked 3
    samples, a repeat's name ``repeat ٣``. Each is unreadable now, as any other unreadable text is."""
    from tracker.log.record import FAILURE_REASON_TAG, TIMEOUT_TAG, RunRecord
    from tracker.profile.api import asked_samples, repeat_label, timed_out_under

    def failed(limit: str) -> RunRecord:
        return RunRecord("network", "n", tags={FAILURE_REASON_TAG: "timeout", TIMEOUT_TAG: limit}, status="FAILED")

    assert timed_out_under(failed("3"), 60) and not timed_out_under(failed("\u0663"), 60)
    assert not timed_out_under(failed("x"), 60)
    assert asked_samples(RunRecord("network", "n", params={"min_samples": "200"})) == 200
    for text in ("\u0662\u0660\u0660", "inf", "x"):  # int() of inf: an OverflowError's traceback until 0.9.14
        assert asked_samples(RunRecord("network", "n", params={"min_samples": text})) == MIN_SAMPLES, text
    assert repeat_label("k#r2") == "repeat 2"
    assert repeat_label("k#r\u0663") == repeat_label("k#r\u00b2") == "again"
