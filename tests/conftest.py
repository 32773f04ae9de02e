from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
import requests

from tracker.log.record import RunRecord
from tracker.ui import stop_process_group, ui_environment

#: A fixed environment so store tests need not import torch.
ENV = {"env.host": "test-host", "env.cpu_count": "2", "env.threads": "2", "env.torch_version": "2.14.1"}

COMMON = dict(phase="inference", device="cpu", precision="float32", mode="cpu-t2")


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite's tracker cache (MLflow's empty schema, torchvision's names, descriptions) is its
    own, made anew each session and shared by its tests and the processes they start: what a test
    sees does not follow from what an earlier suite left in ``~/.cache/tracker``."""
    with pytest.MonkeyPatch.context() as session:
        session.setenv("TRACKER_CACHE_DIR", str(tmp_path_factory.mktemp("tracker-cache")))
        yield


@pytest.fixture(autouse=True, scope="session")
def _zygotes_kept() -> Iterator[None]:
    """The suite's zygote is kept across tests, as a campaign keeps it between configurations,
    where tests far apart (fingerprint training between) would each start one again; closing an
    idle zygote has a test of its own."""
    from tracker.profile import zygote_client

    before = zygote_client.IDLE_CLOSE_S
    zygote_client.IDLE_CLOSE_S = 3600.0
    yield
    zygote_client.IDLE_CLOSE_S = before


#: The environment variable naming the folder of the suite's lock files (``_turns``).
TURNS_DIR = "TRACKER_SUITE_TURNS"


def pytest_configure(config: pytest.Config) -> None:
    """The folder of the suite's lock files, made by the process that starts the workers (they
    inherit its environment) or by the one process that runs the suite; removed after.

    And one OpenMP thread a process (unless the environment says otherwise): with two workers on
    two cores, a measurement on torch's default two threads stalled whenever the other worker's
    test took a core (squeezenet1_1 at 64 px measured slower than at 224 px); LightGBM's training
    and torch's work in the tests' own processes keep to a core too. Tests that measure on more
    threads say so with ``--threads``."""
    if not hasattr(config, "workerinput"):
        os.environ[TURNS_DIR] = tempfile.mkdtemp(prefix="tracker-suite-")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    else:  # a worker of ``pytest -n``: its own device locks (``_own_device_locks``)
        _own_device_locks(Path(os.environ[TURNS_DIR]) / f"tmp-{config.workerinput['workerid']}")


def _own_device_locks(folder: Path) -> None:
    """A worker's own temporary directory, and with it its own device locks
    (``tracker.profile.devicelock``: a folder of the machine's temporary directory), which the tracker
    processes it starts inherit. Until 0.9.16 both workers' measurements took turns on the CPU's one
    lock, a measurement held until its run was logged: a worker waiting for it did nothing, and the
    suite used 1.3 of the two cores (`/usr/bin/time`), its measuring modules 1.0. Each worker's
    measuring child is on one OpenMP thread, on one core; the tests that compare measurements run
    alone as before, and so does the quick demo while it measures (``alone_now``)."""
    folder.mkdir(exist_ok=True)
    for made in (folder.parent, folder):  # passable by other users: PostgreSQL's server runs as postgres (postgres_uri)
        os.chmod(made, 0o711)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        shutil.rmtree(os.environ.pop(TURNS_DIR, ""), ignore_errors=True)


def _alone(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("alone") is not None


def _module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture made once per module (a demo's store, measured networks)."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs)


#: Session fixtures that start a server (a real MLflow server, about 10 s on two cores; PostgreSQL). Until
#: 0.9.15 their tests were spread over both workers, and each worker started the server.
SERVER_FIXTURES = ("mlflow_server", "postgres_uri")


def _server_fixture(item: pytest.Item) -> str | None:
    """The first of ``SERVER_FIXTURES`` that ``item`` uses, if any."""
    names = getattr(item, "fixturenames", ())
    return next((name for name in SERVER_FIXTURES if name in names), None)


def _in_group(item: pytest.Item, name: str) -> None:
    """Put ``item`` in xdist's group ``name`` (``--dist loadgroup``: a group's tests run in one
    worker). xdist 3.8 writes the group into ``item._nodeid``, which pytest 9.2 no longer reads (its
    ids are ``NodeId`` objects): there the id is given the group here, as xdist's scheduler reads it
    (``ID@GROUP``). Until 0.9.10 no group took: the ``alone`` tests ran in either worker."""
    item.add_marker(pytest.mark.xdist_group(name))
    if not getattr(item.config.option, "loadgroup", False) or item.nodeid.endswith(f"@{name}"):
        return  # not a worker of --dist loadgroup, or in the group already
    # (until 0.9.20 any "@" in the id was taken for a group: a parameter's, as telemetry's "x@12C", left its
    # alone test out of the alone tests' run; it ran mid-suite, waited for the other worker's test to end,
    # then held that worker off)
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # a pytest whose ids are strings, which xdist's own hook reaches
        return
    if isinstance(getattr(item, "_id", None), NodeId):
        item._id = NodeId.parse(f"{item.nodeid}@{name}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``alone`` tests go to one worker together (``--dist loadgroup``), one after another,
    so that the suite's lock is taken exclusively once for a run of them (``_Turns``). The tests
    of a module that share a fixture made once per module go to one worker together too: split
    over two, each worker made it (the quick demo's store twice, 35 s); and so do the tests, of any
    module, that use one of the session's servers (``SERVER_FIXTURES``), which each worker started."""
    for item in items:
        if _alone(item):
            _in_group(item, "alone")
        elif _module_fixture(item):
            _in_group(item, f"module-{item.module.__name__ if item.module else item.nodeid}")
        elif server := _server_fixture(item):
            _in_group(item, f"server-{server}")


class _Turns:
    """The suite's lock, held by this process exclusively or shared. A turnstile taken first keeps
    a waiting exclusive holder from being passed by the other worker's next tests."""

    def __init__(self) -> None:
        self.fds: tuple[int, int] | None = None
        self.exclusive = False

    def take(self, exclusive: bool) -> None:
        import fcntl

        if self.fds is not None and self.exclusive == exclusive:
            return  # the run of alone tests goes on
        self.let_go()
        folder = Path(os.environ[TURNS_DIR])
        turnstile = os.open(folder / "turnstile.lock", os.O_RDWR | os.O_CREAT, 0o600)
        tests = os.open(folder / "tests.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(tests, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        self.fds, self.exclusive = (turnstile, tests), exclusive

    def let_go(self) -> None:
        if self.fds is not None:
            for fd in self.fds:
                os.close(fd)  # and its lock with it
            self.fds = None


_TURNS = _Turns()


class _Alone:
    """What ``alone_now`` yields: ``end()`` shares the suite's lock again before its block ends."""

    def __init__(self, before: bool) -> None:
        self.before, self.ended = before, False

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            _TURNS.take(self.before)


@contextmanager
def alone_now() -> Iterator[_Alone]:
    """The suite's lock held exclusively inside (or until ``end()``), as by a test marked ``alone``, then
    as before: for a fixture made once per module whose measurements must be precise (the quick demo
    learns only from measurements whose 95 % CI is within 25 %; beside two other workers' tests, on CI's
    machine in 0.9.14, 4 of its 7 were not)."""
    alone = _Alone(_TURNS.exclusive and _TURNS.fds is not None)
    _TURNS.take(True)
    try:
        yield alone
    finally:
        alone.end()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The suite runs in two workers (``make test``: ``pytest -n 2``; three in 0.9.14, which left the quick
    demo's measurements too imprecise on CI's machine). A test marked ``alone`` reads how much of the
    machine's CPU other processes take, times its own threads, or compares two measurements' figures,
    which the other worker's tests would disturb: it runs holding the
    suite's lock exclusively, and every other test holding it shared, its fixtures' set-up and
    tear-down (a module's demo store, a session's server) included. An exclusive hold lasts while
    the next test is alone too."""
    _TURNS.take(_alone(item))
    try:
        return (yield)
    finally:
        if not (_alone(item) and _alone(nextitem)):
            _TURNS.let_go()


@pytest.fixture
def child_cgroups() -> None:
    """Skips where a measuring child cannot get a memory cgroup of its own (``memcap``: not root,
    or cgroup v2 without a delegated subtree) or the kernel's count of out-of-memory kills cannot
    be read: there a child running out of memory (the ``oomkill`` fault) would press on the whole
    machine."""
    from tracker.profile import memcap

    group = memcap.MemoryCgroup.make(nested_only=True)
    if group is None:
        pytest.skip("no memory cgroup can be made here")
    try:
        if group.oom_kills() is None:
            pytest.skip("the cgroup's oom_kill count is not readable here")
    finally:
        group.remove()


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


def timed_probe(record: RunRecord, probe_ms: float, version: int | None = None) -> RunRecord:
    """``record`` as tracker writes a run that timed the speed probe: ``speed_probe_ms`` and its count,
    and the tag naming the probe's version (``version``; this tracker's, PROBE_VERSION, by default)."""
    from tracker.profile.probe import PROBE_TAG, PROBE_VERSION

    record.metrics.update(speed_probe_ms=probe_ms, speed_probe_count=30.0)
    record.tags[PROBE_TAG] = str(PROBE_VERSION if version is None else version)
    return record


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


@contextmanager
def running_mlflow_server(root: Path, backend: str, port: int | None = None, extra: tuple[str, ...] = (),
                          env: dict[str, str] | None = None) -> Iterator[str]:
    """``mlflow server`` on loopback over ``backend``, serving artifacts from ``root``; stopped after."""
    root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    cmd = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", backend,
        "--artifacts-destination", str(root / "artifacts"),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "2", *extra,
    ]
    log = open(root / "server.log", "w")
    # Without MLflow's job runner, as `tracker ui` starts it: tracker submits no jobs, and its seven
    # consumer processes would cost every server start about 15 CPU-seconds on two cores.
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root,
                            env={**ui_environment(), "PYTHONUNBUFFERED": "1", **(env or {})}, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{uri}/health", proc)
        yield uri
    finally:
        stop_process_group(proc)
        log.close()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real MLflow tracking server on loopback, serving artifacts, on a SQLite backend."""
    root = tmp_path_factory.mktemp("server")
    with running_mlflow_server(root, f"sqlite:///{root / 'server.db'}") as uri:
        yield uri


#: Longest wait for the Debian packages .ci/run installs beside the suite.
CI_PACKAGES_WAIT_S = 900.0


def wait_ci_packages() -> None:
    """Where .ci/run installs Debian's packages beside the suite (``TRACKER_CI_PACKAGES``: the
    file apt's exit status is written to), wait until apt is done; fail with the end of its log
    if it failed. Elsewhere, nothing to wait for."""
    status_file = os.environ.get("TRACKER_CI_PACKAGES")
    if not status_file:
        return
    path = Path(status_file)
    deadline = time.monotonic() + CI_PACKAGES_WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"apt-get did not end within {CI_PACKAGES_WAIT_S:.0f} s (.ci/run; its log: {path.parent / 'apt.log'})")
        time.sleep(1.0)
    code = path.read_text().strip()
    if code != "0":
        log = (path.parent / "apt.log").read_text(errors="replace")[-2000:]
        pytest.fail(f"apt-get failed (exit {code}) installing the packages .ci/run installs:\n{log}")


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return candidates[-1].parent if candidates else None


@pytest.fixture(scope="session")
def postgres_uri() -> Iterator[str]:
    """A real PostgreSQL server on loopback in a temporary folder, with an empty ``mlflow`` database.

    Installed from Debian's packages by .ci/run when missing. PostgreSQL refuses to run as
    root, so under root it runs as the ``postgres`` user the package creates.
    """
    wait_ci_packages()
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed: .ci/run installs it from Debian's packages")
        pytest.skip("PostgreSQL is not installed here (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="tracker-pg-"))
    os.chmod(root, 0o755)
    as_user: list[str] = []
    if os.geteuid() == 0:
        import pwd

        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    password, port = "tracker-test-pw", free_port()
    (root / "pw").write_text(password)
    if as_user:
        os.chown(root / "pw", pwd.getpwnam("postgres").pw_uid, -1)
    data = root / "data"
    run = lambda *cmd: subprocess.run([*as_user, *map(str, cmd)], check=True, capture_output=True)  # noqa: E731
    run(bindir / "initdb", "-D", data, "-U", "tracker", "--auth=md5", f"--pwfile={root / 'pw'}", "-E", "UTF8")
    run(bindir / "pg_ctl", "-D", data, "-l", root / "log", "-w", "-o",
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    try:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=port, user="tracker", password=password, dbname="postgres",
                             autocommit=True) as con:
            con.execute("CREATE DATABASE mlflow")
        yield f"postgresql://tracker:{password}@127.0.0.1:{port}/mlflow"
    finally:
        run(bindir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def count_runs(store: Path, kind: str) -> int:
    """Runs of ``kind`` in the embedded store at ``store``, polled read-only with sqlite3 while a
    child writes it: an MLflow client here would race the store's creation. 0 until it exists."""
    import sqlite3

    try:
        with closing(sqlite3.connect(f"file:{store / 'mlflow.db'}?mode=ro", uri=True)) as conn:
            return conn.execute("SELECT count(*) FROM tags WHERE key = 'tracker.kind' AND value = ?", (kind,)).fetchone()[0]
    except sqlite3.Error:  # not there yet, or still being created
        return 0


def sigint_default() -> None:
    """For ``Popen(preexec_fn=...)`` of a child a test sends Ctrl-C to: a process started in the
    background (``cmd &`` in a script, as a CI runner may start the suite) inherits SIGINT ignored,
    and Python keeps it ignored. The child takes Ctrl-C as it would from a terminal."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def busy_elsewhere(seconds: float = 60.0) -> Iterator[int]:
    """A process burning one core that is no descendant of this one (its parent shell exits, so it
    is another process's, as a neighbour's work would be); its pid. Ended on leaving the block."""
    shell = subprocess.run(["sh", "-c", f"timeout {seconds:g} sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!"],
                           capture_output=True, text=True, check=True)
    pid = int(shell.stdout.strip())
    time.sleep(0.3)  # running, and counted in the machine's CPU from here
    try:
        yield pid
    finally:
        try:
            os.kill(pid, 15)  # timeout passes the signal on to the loop
        except ProcessLookupError:
            pass
