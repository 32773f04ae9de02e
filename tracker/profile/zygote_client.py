"""The parent's end of the zygotes (``tracker.profile.zygote``): started on first use, one per
environment, asked for each measuring child; ``child`` falls back to starting the child the
plain way where none can serve."""

from __future__ import annotations

import itertools
import json
import os
import queue
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Callable

from tracker.profile.zygote import MAX_MESSAGE_BYTES

#: How long a new zygote may take to import torch and torchvision before children are started
#: the plain way instead.
READY_TIMEOUT_S = 300.0
#: How long the zygote may take to answer a request with the child's pid.
START_TIMEOUT_S = 60.0
#: Variables no library reads while the zygote imports: tracker's own (read when a measurement
#: runs), MLflow's (never imported in a child; importing MLflow sets _MLFLOW_TELEMETRY_SESSION_ID,
#: after a zygote started early by ``prestart``), pytest's. A request that differs from the
#: zygote's environment in these alone is served by it (the child gets the request's values);
#: any other difference starts another zygote.
RUN_TIME_PREFIXES = ("TRACKER_", "MLFLOW_", "_MLFLOW_", "PYTEST_")
#: And these, whole: the terminal's size, read when something is printed (a measuring child prints
#: JSON lines), never as a library loads. A terminal resized, or a command run with ``COLUMNS=120``,
#: started another zygote (3 s) before 0.8.8.
RUN_TIME_NAMES = frozenset({"COLUMNS", "LINES"})
#: How long a zygote with no child running is kept for the next one. Between the configurations
#: of a campaign it is kept; once measuring is over (the fingerprint training of ``tracker demo``,
#: a notebook between campaigns) its ~540 MB are given back, which matters on a 4 GB Jetson.
#: ``TRACKER_ZYGOTE_IDLE_S`` sets it (``idle_close_s``).
IDLE_CLOSE_S = 30.0


def idle_close_s() -> float:
    """``TRACKER_ZYGOTE_IDLE_S`` (seconds, at least 0), else ``IDLE_CLOSE_S``; any other value
    is a ConfigError."""
    from tracker.console import decimal_number

    setting = os.environ.get("TRACKER_ZYGOTE_IDLE_S")
    if setting is None:
        return IDLE_CLOSE_S
    value = decimal_number(setting)  # ASCII digits alone (٣ was 3 s until 0.9.14)
    if value is None or not value >= 0 or value == float("inf"):
        from tracker.errors import ConfigError

        raise ConfigError(f"TRACKER_ZYGOTE_IDLE_S must be a number of seconds of at least 0 (how long an idle "
                          f"zygote is kept; default {IDLE_CLOSE_S:g}), got {setting!r}")
    return value


class ZygoteUnavailable(Exception):
    """No zygote can fork this child: start it the plain way."""


@dataclass
class _Exit:
    ended: threading.Event = field(default_factory=threading.Event)
    code: int | None = None
    pidfd: int | None = None  # the child's, while it runs (``_pidfd``): its end is seen if its zygote ends first

    def release(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def orphaned(self) -> None:
        """Its zygote ended first, with it its exit status: the child ends when its pidfd says so
        (its status stays unknown), or at once where there is no pidfd."""
        if self.pidfd is None:
            self.ended.set()
            return

        def watch() -> None:
            poller = select.poll()
            poller.register(self.pidfd, select.POLLIN)
            poller.poll()  # readable once the process has ended
            self.release()
            self.ended.set()

        threading.Thread(target=watch, name="tracker-orphan", daemon=True).start()


def _pidfd(pid: int) -> int | None:
    """A file descriptor that becomes readable when process ``pid`` ends, for a process that is
    not our child (Linux 5.3 and later); None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class ZygoteChild:
    """A forked measuring child, seen from the parent as ``subprocess.Popen`` shows a started
    one: ``pid``, the three text streams, ``poll``, ``wait`` and ``returncode`` (negative for a
    signal; None if the zygote ended before it could say)."""

    def __init__(self, pid: int, stdin: IO[str], stdout: IO[str], stderr: IO[str], end: _Exit) -> None:
        self.pid, self.stdin, self.stdout, self.stderr, self._end = pid, stdin, stdout, stderr, end

    @property
    def returncode(self) -> int | None:
        return self._end.code

    def poll(self) -> int | None:
        return self._end.code if self._end.ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._end.ended.wait(timeout):
            raise subprocess.TimeoutExpired("measuring child", timeout or 0.0)
        return self._end.code


class ZygoteClient:
    """The parent's end of one zygote: started, then asked for children until closed."""

    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "tracker.profile.zygote", str(theirs.fileno())],
                                         pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        except OSError as exc:
            ours.close()
            raise ZygoteUnavailable(str(exc)) from exc
        finally:
            theirs.close()
        self.sock = ours
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._starts: dict[int, queue.Queue[tuple[int, _Exit] | None]] = {}
        self._exits: dict[int, _Exit] = {}
        self.dead = False
        self.idle_since = time.monotonic()  # when its last child ended (or it started, or was last asked)
        try:
            self.sock.settimeout(READY_TIMEOUT_S)
            ready = self.sock.recv(MAX_MESSAGE_BYTES)
            self.sock.settimeout(None)
            if not ready:
                raise ZygoteUnavailable("the zygote ended before it was ready")
        except BaseException as exc:  # not ready in time, broken, or Ctrl-C: it must not outlive us
            self.close(kill=True)
            if isinstance(exc, (OSError, ZygoteUnavailable)):
                raise ZygoteUnavailable(str(exc)) from exc
            raise
        threading.Thread(target=self._dispatch, name="tracker-zygote", daemon=True).start()

    def busy(self) -> bool:
        """Whether any of its children has not ended yet."""
        with self._lock:
            return bool(self._exits or self._starts)

    def spawn(self, env: dict[str, str], own_code: bool = False) -> ZygoteChild:
        """A measuring child forked with ``env`` in this process's working folder; ``own_code``:
        from the zygote's fork that has imported torch._dynamo too (``zygote``)."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ours = [in_w, out_r, err_r]
        started: queue.Queue[tuple[int, _Exit] | None] = queue.Queue(1)
        request_id = next(self._ids)
        try:
            with self._lock:
                if self.dead:
                    raise ZygoteUnavailable("the zygote has ended")
                self._starts[request_id] = started
            message = json.dumps({"id": request_id, "cwd": os.getcwd(), "env": env,
                                  **({"own_code": True} if own_code else {})}).encode()
            try:
                socket.send_fds(self.sock, [message], [in_r, out_w, err_w])
            except OSError as exc:
                raise ZygoteUnavailable(str(exc)) from exc
            finally:
                for fd in (in_r, out_w, err_w):
                    os.close(fd)
            try:
                got = started.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                got = None
            if got is None:
                raise ZygoteUnavailable("the zygote did not start the child")
        except BaseException:
            with self._lock:
                self._starts.pop(request_id, None)
            for fd in ours:
                os.close(fd)
            raise
        pid, end = got
        return ZygoteChild(pid, open(in_w, "w", encoding="utf-8"), open(out_r, encoding="utf-8", errors="replace"),
                           open(err_r, encoding="utf-8", errors="replace"), end)

    def _dispatch(self) -> None:
        """Hand each pid to its request, and each exit status to its child, in the zygote's order."""
        try:
            while message := self.sock.recv(MAX_MESSAGE_BYTES):
                data = json.loads(message)
                with self._lock:
                    if "orphaned" in data:  # its zygote's own-code fork ended first (``zygote.serve``)
                        end = self._exits.pop(data["orphaned"], None)
                        if end is not None:
                            end.orphaned()
                    elif "exit" in data:
                        end = self._exits.pop(data["exit"], None)
                        if end is not None:
                            end.code = data["code"]
                            end.release()
                            end.ended.set()
                        self.idle_since = time.monotonic()
                    else:
                        end = self._exits[data["pid"]] = _Exit(pidfd=_pidfd(data["pid"]))
                        waiting = self._starts.pop(data["id"], None)
                        if waiting is not None:
                            waiting.put((data["pid"], end))
        except (OSError, ValueError):
            pass
        with self._lock:  # the zygote has ended: what it did not report is not known
            self.dead = True
            for end in self._exits.values():
                end.orphaned()
            self._exits.clear()
            for waiting in self._starts.values():
                waiting.put(None)
            self._starts.clear()

    def close(self, kill: bool = False, wait: bool = True) -> None:
        """Close the socket: the zygote ends (at once with ``kill``); children it forked go on.
        With ``wait`` false its exit (torch's teardown, about 0.8 s here) is awaited by a thread
        of its own, so a caller holding ``_ZYGOTES_LOCK`` does not hold it that long."""
        self.dead = True
        try:  # shut down, not only closed: the dispatch thread's recv holds the socket open, and
            self.sock.shutdown(socket.SHUT_RDWR)  # the zygote would not see its end (it was killed 10 s later)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        if kill:
            try:
                self.proc.kill()
            except OSError:
                pass
        if wait:
            self._await_exit(kill)
        else:
            threading.Thread(target=self._await_exit, args=(kill,), name="tracker-zygote-exit",
                             daemon=True).start()

    def _await_exit(self, killed: bool) -> None:
        """Wait for the zygote to end (it was told to); kill it if it has not within 10 s."""
        try:
            self.proc.wait(timeout=10 if not killed else None)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def environment_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """What of ``env`` a zygote's imports may have read: a zygote serves only requests that agree on it."""
    return tuple(sorted((k, v) for k, v in env.items() if not k.startswith(RUN_TIME_PREFIXES) and k not in RUN_TIME_NAMES))


_ZYGOTES: dict[tuple[tuple[str, str], ...], ZygoteClient] = {}
_ZYGOTES_LOCK = threading.Lock()
_UNAVAILABLE: list[str] = []  # why zygotes are not used in this process, once one failed
_REAPER: list[threading.Thread] = []  # the thread closing idle zygotes, while there are any
_IDLE_S = [IDLE_CLOSE_S]  # the idle limit, as the latest request read it (idle_close_s)


def _close_idle(closable: Callable[[tuple[tuple[str, str], ...], ZygoteClient], bool]) -> None:
    """Close the zygotes that have ended, and those with no child running that ``closable`` names
    (its key and client). The caller holds ``_ZYGOTES_LOCK``."""
    for key in [k for k, z in _ZYGOTES.items() if z.dead or (not z.busy() and closable(k, z))]:
        _ZYGOTES.pop(key).close(wait=False)


def _reap() -> None:
    """Close each zygote that has had no child running for the idle limit the latest request
    read (``_IDLE_S``); end with the last one."""
    while True:
        time.sleep(min(5.0, max(0.05, _IDLE_S[0] / 4)))
        with _ZYGOTES_LOCK:
            now, idle_s = time.monotonic(), _IDLE_S[0]
            _close_idle(lambda _, z: now - z.idle_since >= idle_s)
            if not _ZYGOTES:
                _REAPER.clear()
                return


def enabled() -> bool:
    """Whether children are forked from zygotes here; ``TRACKER_ZYGOTE`` other than 0 or 1 is a ConfigError."""
    setting = os.environ.get("TRACKER_ZYGOTE", "1")
    if setting not in ("0", "1"):
        from tracker.errors import ConfigError

        raise ConfigError(f"TRACKER_ZYGOTE must be 0 (start each measuring child anew) or 1 (fork them "
                          f"from a zygote, the default), got {setting!r}")
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds") and not _UNAVAILABLE and setting == "1"


def spawn(env: dict[str, str], own_code: bool = False) -> ZygoteChild:
    """A measuring child with environment ``env``, forked from this process's zygote for it
    (started on first use); ``own_code``: a child that imports torch._dynamo (a training one),
    forked from the zygote's own fork that has imported it. Zygotes for other environments with
    no child running are closed, and any with no child running for ``idle_close_s()``.
    Raises ``ZygoteUnavailable`` where the child must be started the plain way."""
    if not enabled():
        raise ZygoteUnavailable(_UNAVAILABLE[0] if _UNAVAILABLE else "zygotes are off")
    idle_s = idle_close_s()
    with _ZYGOTES_LOCK:
        client = _client(env, idle_s)
    return client.spawn(env, own_code)


def _client(env: dict[str, str], idle_s: float) -> ZygoteClient:
    """The zygote for ``env``, started (and waited for) if there is none; the caller holds
    ``_ZYGOTES_LOCK``. Raises ``ZygoteUnavailable``, and children are then started the plain way."""
    key = environment_key(env)
    _close_idle(lambda k, _: k != key)
    client = _ZYGOTES.get(key)
    if client is None:
        try:
            client = _ZYGOTES[key] = ZygoteClient(env)
        except ZygoteUnavailable as exc:
            _UNAVAILABLE.append(str(exc))
            raise
    client.idle_since = time.monotonic()  # not closed for idleness while this request is on its way
    _IDLE_S[0] = idle_s
    if not _REAPER:
        _REAPER.append(threading.Thread(target=_reap, name="tracker-zygote-reaper", daemon=True))
        _REAPER[0].start()
    return client


def prestart() -> None:
    """Start the zygote for this process's environment now, in the background, where none runs.
    A command that will measure calls it once its input is checked: the zygote's imports (torch
    and torchvision, about 3 s here) then overlap the command's own work before its first child
    (opening the store, describing networks), and that child is forked at once instead of waiting
    for them. Does nothing where zygotes are off or their settings are wrong (the first request
    says so); a zygote that cannot start is the first request's to report, as without this."""
    from tracker.errors import ConfigError

    try:
        if not enabled():
            return
        idle_s = idle_close_s()
    except ConfigError:
        return
    env = dict(os.environ)

    def start() -> None:
        try:
            with _ZYGOTES_LOCK:  # a request meanwhile waits for this zygote rather than starting another
                _client(env, idle_s)
        except ZygoteUnavailable:
            pass

    threading.Thread(target=start, name="tracker-zygote-prestart", daemon=True).start()


