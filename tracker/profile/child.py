"""Run one measurement in a child process, so a fault ends that measurement only.

The parent sends the job as JSON on the child's stdin and reads one result line back.
Out of memory, an exception, a crash, a kill or a hang past the time limit each come
back as a ``ChildResult`` with ``ok=False``, a reason (``oom``, ``error``, ``crash``,
``killed``, ``timeout``) and the tail of the child's stderr; the campaign goes on. A child
that the kernel's out-of-memory killer ended (SIGKILL while the kernel's count of such kills
rose) is ``oom`` too: on a machine without a memory cap that is how running out of memory ends.
Where a memory cgroup can be made, each child runs in one of its own (``memcap``): whether the
out-of-memory killer ended it is then told by that cgroup's count, not the machine's, which
would also take another process's kill in the same moment for the child's.

``stream_child`` is for long measurements (training jobs): the child writes event lines
(``TRACKER-EVENT {...}``) as it goes, handed to the caller one by one, so what was measured
before a crash or a kill is the caller's already; Ctrl-C is passed on to the child, which
ends its measurement and reports, instead of killing it. Its time limit is on the wait for
each event, not on the whole measurement: a long job goes on while it makes progress, a hung
one is killed (reason ``timeout``).

A child that wrote its result line and then does not end within ``EXIT_GRACE_S`` (a thread or
a loader worker that never joins, a device teardown that hangs) is killed with its group, and
its result stands: the measurement was made. ``ChildResult.message`` says it was killed.

Each child runs while its parent holds the device's lock (``devicelock``): two tracker processes
never measure on one device at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

from tracker.profile import devicelock, memcap
from tracker.profile.worker import EVENT_PREFIX, EXIT_ERROR, EXIT_OOM, RESULT_PREFIX

STDERR_TAIL_LINES = 30
DEFAULT_TIMEOUT_S = 600.0
INTERRUPT_GRACE_S = 30.0  # how long a streamed child has, after Ctrl-C, to end its measurement and report
EXIT_GRACE_S = 30.0  # how long a child has to end once its result line is written


@dataclass
class ChildResult:
    ok: bool
    payload: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    message: str = ""
    stderr_tail: str = ""
    returncode: int | None = None
    interrupted: bool = False  # stream_child: Ctrl-C was passed on to the child
    lingered: bool = False  # it wrote its result but did not end within EXIT_GRACE_S: killed
    device_wait_s: float = 0.0  # how long its parent waited for its devices (devicelock) before starting it
    partial: dict[str, Any] | None = None  # a child that ended without a result: the network it had measured, if any


def _lingered(code: int | None, payload: dict[str, Any], err: str) -> ChildResult:
    """A child killed after its result line: the result stands, as if it had ended by itself."""
    result = _result(0, payload, err, None)
    result.returncode, result.lingered = code, True
    note = f"the child wrote its result but did not end within {EXIT_GRACE_S:g} s: killed"
    result.message = f"{result.message}; {note}" if result.message else note
    return result


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot, machine-wide
    (``oom_kill`` in /proc/vmstat, Linux 4.13 and later; cgroup limits included); None where
    it cannot be read."""
    try:
        with open("/proc/vmstat", encoding="ascii") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def oom_killed_since(kills_before: int | None) -> bool:
    """Whether the kernel's out-of-memory killer has killed anything since ``oom_kills()`` gave
    ``kills_before`` (False where the count could not be read)."""
    return kills_before is not None and (oom_kills() or 0) > kills_before


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _start_worker(env: dict[str, str] | None, job: dict[str, Any]) -> Any:
    """A measuring child waiting for ``job`` on stdin: forked from a zygote that has imported
    torch and torchvision already (``zygote``; and torch._dynamo, for a job that imports it:
    ``forked_with_own_code``), or else started as ``python -m tracker.profile.worker``. Either
    way a process of its own, in a process group of its own and out of the terminal's session
    (Ctrl-C in the terminal reaches the parent, which ends the child), with the same three pipes."""
    from tracker.profile import zygote_client
    from tracker.profile.worker import forked_with_own_code

    full_env = {**os.environ, **(env or {})}
    try:
        return zygote_client.spawn(full_env, own_code=forked_with_own_code(job))
    except zygote_client.ZygoteUnavailable:
        pass
    return subprocess.Popen(
        [sys.executable, "-m", "tracker.profile.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        start_new_session=True,
    )


def _send_job(proc: Any, job: dict[str, Any]) -> None:
    """Write the job and close the child's stdin; a child that has died already is told by its status."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
    except BrokenPipeError:
        pass


def _read_to_end(stream: Any) -> tuple[threading.Thread, list[str]]:
    """Read ``stream`` to its end in a thread (as ``communicate`` does), into the list returned."""
    into: list[str] = []
    thread = threading.Thread(target=lambda: into.append(stream.read()), daemon=True)
    thread.start()
    return thread, into


def last_event(lines: list[str], key: str) -> dict[str, Any] | None:
    """The ``key`` of the last event line among ``lines`` that has one, or None."""
    for line in reversed(lines):
        if line.startswith(EVENT_PREFIX):
            with contextlib.suppress(json.JSONDecodeError):  # a line cut short by the kill
                event = json.loads(line[len(EVENT_PREFIX):])
                if key in event:
                    return event[key]
    return None


def _read_lines(stream: Any, result_seen: threading.Event) -> tuple[threading.Thread, list[str]]:
    """``_read_to_end`` line by line, setting ``result_seen`` once the result line is in."""
    into: list[str] = []

    def pump() -> None:
        for line in stream:
            into.append(line)
            if line.startswith(RESULT_PREFIX):
                result_seen.set()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread, into


@contextmanager
def _prepared(job: dict[str, Any], devices: Iterable[str] | None
              ) -> Iterator[tuple[dict[str, Any], memcap.MemoryCgroup | None, float]]:
    """While a child's job runs: the lock of each device it measures on (``devices``, else
    ``devicelock.job_devices``) held by this process, and its memory cgroup made (``memcap``),
    removed after. Yields the job as the cgroup has it, the cgroup (or None) and how long the
    devices were waited for (seconds)."""
    with devicelock.measuring_on(devicelock.job_devices(job) if devices is None else devices) as waited_s:
        job, group = memcap.for_job(job)
        try:
            yield job, group, waited_s
        finally:
            if group is not None:
                group.remove()


def run_child(job: dict[str, Any], timeout_s: float = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None,
              devices: Iterable[str] | None = None) -> ChildResult:
    """Run ``job`` in a measuring child once this process holds its devices (``_prepared``; a
    caller may hold them already, across the logging of the result too): its time limit starts then."""
    with _prepared(job, devices) as (job, group, waited_s):
        result = _run_child(job, timeout_s, env, group)
    result.device_wait_s = waited_s
    return result


def _run_child(job: dict[str, Any], timeout_s: float, env: dict[str, str] | None,
               group: memcap.MemoryCgroup | None) -> ChildResult:
    kills_before = oom_kills()
    proc = _start_worker(env, job)
    job, group = memcap.admit(job, group, proc.pid)
    result_seen = threading.Event()
    (out_reader, out), (err_reader, err) = _read_lines(proc.stdout, result_seen), _read_to_end(proc.stderr)
    killed = False
    try:
        _send_job(proc, {**job, "time_limit_s": timeout_s})  # what the child may add after measuring weighs it
        end_by = time.monotonic() + timeout_s  # then, once its result is in, EXIT_GRACE_S from there
        graced = False
        while True:
            try:
                proc.wait(timeout=max(0.0, min(0.25, end_by - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                pass
            if result_seen.is_set() and not graced:
                graced, end_by = True, min(end_by, time.monotonic() + EXIT_GRACE_S)
            if time.monotonic() >= end_by:
                killed = True
                _kill_group(proc.pid)
                proc.wait()
                break
        for t in (out_reader, err_reader):  # to the end of the streams: the result line is written before the child ends
            t.join()
    except BaseException as exc:  # interrupted: take the child down with us
        _kill_group(proc.pid)
        proc.wait()
        out_reader.join(timeout=5)
        partial = last_event(out, "network")
        if partial is not None:  # what it had measured (a network measured with its layers: the network)
            exc.partial_payload = partial  # type: ignore[attr-defined]
        raise
    payload: dict[str, Any] = {}
    for line in out:
        if line.startswith(RESULT_PREFIX):
            payload = json.loads(line[len(RESULT_PREFIX):])
    if killed and payload:
        return _lingered(proc.returncode, payload, "".join(err))
    if killed:
        result = ChildResult(False, reason="timeout", message=f"no result within {timeout_s:g} s",
                             stderr_tail=_tail("".join(err)), returncode=proc.returncode)
    else:
        result = _result(proc.returncode, payload, "".join(err), kills_before, group)
    if not result.ok:  # the network measured before its layers: its parent decides whether it is kept
        result.partial = last_event(out, "network")
    return result


def _result(code: int | None, payload: dict[str, Any], err: str, kills_before: int | None,
            group: memcap.MemoryCgroup | None = None) -> ChildResult:
    """What a child's exit status and result line (if any) say; ``kills_before``: ``oom_kills()``
    before the child started; ``group``: the child's memory cgroup, if it had one."""
    if code == 0 and payload and "error" not in payload:
        return ChildResult(True, payload, returncode=code, stderr_tail=_tail(err))
    if code is None and payload and "error" not in payload:  # its result line is its last word
        return ChildResult(True, payload, message="its zygote ended before it told the child's exit status; the "
                           "child's result stands", returncode=code, stderr_tail=_tail(err))
    kills = None if group is None else group.oom_kills()  # None: the machine-wide count tells
    if code == -signal.SIGKILL and kills:
        if group is not None and group.capped:
            return ChildResult(False, payload, "oom",
                               "killed by the kernel's out-of-memory killer at the memory cap (signal 9; the child's "
                               "memory cgroup counted the kill)", _tail(err), code)
        return ChildResult(False, payload, "oom", "killed by the kernel's out-of-memory killer (signal 9; the child's "
                           "memory cgroup counted the kill)", _tail(err), code)
    if code == -signal.SIGKILL and kills is None and oom_killed_since(kills_before):
        return ChildResult(False, payload, "oom", "killed by the kernel's out-of-memory killer (signal 9 while the "
                           "kernel's oom_kill count rose)", _tail(err), code)
    if code == EXIT_OOM or payload.get("error") == "oom":
        reason = "oom"
    elif code == EXIT_ERROR or payload.get("error") == "error":
        reason = "error"
    elif code is not None and code < 0:
        reason = "killed" if -code in (signal.SIGKILL, signal.SIGTERM) else "crash"
    else:
        reason = "crash"
    if code is None:  # its zygote ended before it told the child's status
        message = payload.get("message") or "the child's exit status is not known: its zygote ended"
    else:
        message = payload.get("message") or (f"child ended by signal {-code}" if code < 0 else f"child exited with status {code}")
    return ChildResult(False, payload, reason, message, _tail(err), code)


def stream_child(job: dict[str, Any], on_event: Callable[[dict[str, Any]], None],
                 env: dict[str, str] | None = None, grace_s: float = INTERRUPT_GRACE_S,
                 event_timeout_s: float | None = None) -> ChildResult:
    """Run ``job`` in a child, handing each event line it writes to ``on_event`` as it comes. A
    child that writes no event for ``event_timeout_s`` (from the job's start, then from each
    event; None: no limit) is killed with its group and comes back with reason ``timeout``.
    Ctrl-C (KeyboardInterrupt here) is passed on to the child as SIGINT: it has ``grace_s`` to
    report before it is killed (a second Ctrl-C kills it at once). The result has
    ``interrupted`` set; the caller decides what an interrupted measurement is."""
    with _prepared(job, None) as (job, group, waited_s):  # as run_child
        result = _stream_child(job, on_event, env, grace_s, event_timeout_s, group)
    result.device_wait_s = waited_s
    return result


def _stream_child(job: dict[str, Any], on_event: Callable[[dict[str, Any]], None], env: dict[str, str] | None,
                  grace_s: float, event_timeout_s: float | None, group: memcap.MemoryCgroup | None) -> ChildResult:
    kills_before = oom_kills()
    proc = _start_worker(env, job)
    job, group = memcap.admit(job, group, proc.pid)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump_stdout() -> None:  # threads own the pipes: a Ctrl-C here never cuts a line in half
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    out_reader = threading.Thread(target=pump_stdout, daemon=True)
    out_reader.start()
    err_reader, err_parts = _read_to_end(proc.stderr)
    payload: dict[str, Any] = {}
    interrupted = timed_out = lingered = False
    deadline = float("inf")  # the end of the grace after Ctrl-C

    def event_deadline() -> float:
        return time.monotonic() + event_timeout_s if event_timeout_s else float("inf")

    silent_until = event_deadline()
    try:
        _send_job(proc, job)
        while True:
            try:
                try:
                    line = lines.get(timeout=min(0.5, max(0.0, min(deadline, silent_until) - time.monotonic())))
                except queue.Empty:
                    now = time.monotonic()
                    if now >= deadline:  # the child did not end within its grace
                        _kill_group(proc.pid)
                        deadline = float("inf")
                    elif now >= silent_until:  # no event for event_timeout_s (hung), or no end after the result
                        if payload:
                            lingered = True
                        else:
                            timed_out = True
                        _kill_group(proc.pid)
                        silent_until = float("inf")
                    continue
                if line is None:
                    break
                if line.startswith(EVENT_PREFIX):
                    if not (timed_out or interrupted):
                        silent_until = event_deadline()
                    on_event(json.loads(line[len(EVENT_PREFIX):]))
                elif line.startswith(RESULT_PREFIX):
                    payload = json.loads(line[len(RESULT_PREFIX):])
                    if not interrupted:
                        silent_until = time.monotonic() + EXIT_GRACE_S  # it has that long to end
            except KeyboardInterrupt:
                if interrupted:  # a second Ctrl-C: no more waiting
                    _kill_group(proc.pid)
                    continue
                interrupted = True
                silent_until = float("inf")  # from here the grace is the limit
                try:
                    os.kill(proc.pid, signal.SIGINT)  # the child alone, not its loader workers
                except ProcessLookupError:
                    pass
                deadline = time.monotonic() + grace_s
    except BaseException:  # anything else: the child must not outlive us
        _kill_group(proc.pid)
        proc.wait()
        raise
    code = proc.wait()
    for t in (out_reader, err_reader):
        t.join()
    if timed_out and not interrupted:
        return ChildResult(False, reason="timeout", message=f"no event within {event_timeout_s:g} s",
                           stderr_tail=_tail("".join(err_parts)), returncode=code)
    if lingered and not interrupted:
        return _lingered(code, payload, "".join(err_parts))
    result = _result(code, payload, "".join(err_parts), kills_before, group)
    result.interrupted = interrupted
    return result


def _kill_group(pid: int) -> None:
    """Kill a child and its own children (loader workers); it may have ended already."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
