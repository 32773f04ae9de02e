"""Run one measurement in a child process, so a fault ends that measurement only.

The parent sends the job as JSON on the child's stdin and reads one result line back.
Out of memory, an exception, a crash, a kill or a hang past the time limit each come
back as a ``ChildResult`` with ``ok=False``, a reason (``oom``, ``error``, ``crash``,
``killed``, ``timeout``) and the tail of the child's stderr; the campaign goes on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from tracker.profile.worker import EXIT_ERROR, EXIT_OOM, RESULT_PREFIX

STDERR_TAIL_LINES = 30
DEFAULT_TIMEOUT_S = 600.0


@dataclass
class ChildResult:
    ok: bool
    payload: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    message: str = ""
    stderr_tail: str = ""
    returncode: int | None = None


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_child(job: dict[str, Any], timeout_s: float = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None) -> ChildResult:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker.profile.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,  # Ctrl-C in the terminal reaches the parent, which ends the child
    )
    try:
        out, err = proc.communicate(json.dumps(job), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return ChildResult(False, reason="timeout", message=f"no result within {timeout_s:g} s", stderr_tail=_tail(err), returncode=proc.returncode)
    except BaseException:  # interrupted: take the child down with us
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    payload: dict[str, Any] = {}
    for line in out.splitlines():
        if line.startswith(RESULT_PREFIX):
            payload = json.loads(line[len(RESULT_PREFIX):])
    code = proc.returncode
    if code == 0 and payload and "error" not in payload:
        return ChildResult(True, payload, returncode=code, stderr_tail=_tail(err))
    if code == EXIT_OOM or payload.get("error") == "oom":
        reason = "oom"
    elif code == EXIT_ERROR or payload.get("error") == "error":
        reason = "error"
    elif code is not None and code < 0:
        reason = "killed" if -code in (signal.SIGKILL, signal.SIGTERM) else "crash"
    else:
        reason = "crash"
    message = payload.get("message") or (f"child ended by signal {-code}" if code and code < 0 else f"child exited with status {code}")
    return ChildResult(False, payload, reason, message, _tail(err), code)
