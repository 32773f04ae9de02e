"""The memory cap of a measuring child (``--memory-limit-mb``): a smaller device on a bigger machine.

Two kinds, tagged on the run as ``tracker.memory_cap``:

- ``resident``: the child joins a memory cgroup of its own whose limit is the cap, with no swap.
  What counts is memory the child makes resident from then on (its loader workers' too), as on
  a device whose memory is full; past it the kernel's out-of-memory killer ends the child, and
  the cgroup's own count of such kills (``oom_kill`` in ``memory.events``, or in
  ``memory.oom_control`` for cgroup v1) says the kill was the cap's, not another process's
  elsewhere on the machine. Made where this process may create a cgroup (root, or a delegated
  cgroup v2 subtree): under its own cgroup where it can, else under the hierarchy's root.
- ``address-space``: ``RLIMIT_AS`` raised by the cap over what the child holds: an allocation
  past it fails at once (torch raises). Address space is not memory: the pages a library maps and
  never touches, a thread's stack, an allocator's reserved arenas all count, so a configuration
  fails under this cap well before its resident memory reaches it. Used where no cgroup can be
  made, or when ``TRACKER_MEMORY_CAP=address-space`` asks for it.

Either way the cap is on growth from the moment it is set: the interpreter, torch and the
libraries the child holds by then are not counted (so it was with the address-space cap, the
only kind before tracker 0.7.0).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

CAP_ENV = "TRACKER_MEMORY_CAP"
#: ``auto``: resident where a cgroup can be made, else address space.
CAP_CHOICES = ("auto", "address-space")
CAP_TAG = "tracker.memory_cap"
RESIDENT = "resident"
ADDRESS_SPACE = "address-space"
_MOUNT = Path("/sys/fs/cgroup")
_SERIAL = [0]


def cap_choice() -> str:
    """``TRACKER_MEMORY_CAP`` (``auto`` when unset); another value is a ConfigError."""
    setting = os.environ.get(CAP_ENV, "auto")
    if setting not in CAP_CHOICES:
        from tracker.errors import ConfigError

        raise ConfigError(f"{CAP_ENV} must be auto (a resident-memory cgroup where one can be made, else an "
                          f"address-space limit) or address-space, got {setting!r}")
    return setting


def planned_kind() -> str:
    """The kind of cap a measurement capped now gets: ``address-space`` where
    ``TRACKER_MEMORY_CAP`` asks for it or no memory cgroup can be made here, else ``resident``.
    Part of a capped configuration's identity (the same limit means another thing in each)."""
    if cap_choice() == ADDRESS_SPACE:
        return ADDRESS_SPACE
    return RESIDENT if _cgroups_here() else ADDRESS_SPACE


@lru_cache(maxsize=1)
def _cgroups_here() -> bool:
    """Whether a memory cgroup can be made here (one is made and removed, once per process)."""
    group = MemoryCgroup.make(64.0)
    if group is None:
        return False
    group.remove()
    return True


def for_job(job: dict[str, Any]) -> tuple[dict[str, Any], MemoryCgroup | None]:
    """``job`` as a child is sent it, and the cgroup made for it: a capped job (``memory_limit_mb``,
    or a training job's ``config.memory_limit_mb``) whose cap is ``resident`` gets a cgroup with
    that limit, named in the job as ``memory_cgroup`` for the child to join."""
    limit = job.get("memory_limit_mb") or (job.get("config") or {}).get("memory_limit_mb")
    if not limit or planned_kind() != RESIDENT:
        return job, None
    group = MemoryCgroup.make(float(limit))
    return ({**job, "memory_cgroup": str(group.path)} if group else job), group


@dataclass
class MemoryCgroup:
    """A memory cgroup made for one measuring child; ``remove`` it once the child has ended."""

    path: Path
    v2: bool

    @classmethod
    def make(cls, limit_mb: float) -> MemoryCgroup | None:
        """A new cgroup limited to ``limit_mb`` of memory and no swap; None where none can be made."""
        limit = str(int(limit_mb * 2**20))
        for parent, v2 in _parents():
            _remove_stale(parent)
            _SERIAL[0] += 1
            group = parent / f"tracker-{os.getpid()}-{_SERIAL[0]}"
            try:
                group.mkdir()
            except OSError:
                continue
            made = cls(group, v2)
            try:
                (group / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(limit)
            except OSError:  # no memory controller here (cgroup v2: not enabled for this subtree)
                made.remove(wait_s=0)
                continue
            # No swap either, where the kernel lets it be said: swapped out is not resident, so
            # the cap would hold all the same, only slower to reach.
            for name, value in ((("memory.swap.max", "0"),) if v2 else
                                (("memory.memsw.limit_in_bytes", limit), ("memory.swappiness", "0"))):
                try:
                    (group / name).write_text(value)
                except OSError:
                    pass
            return made
        return None

    def oom_kills(self) -> int | None:
        """How many processes the kernel's out-of-memory killer ended in this cgroup (None: unreadable)."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return None

    def remove(self, wait_s: float = 10.0) -> None:
        """Remove the cgroup; it can be removed only once its processes have been reaped, so try
        for up to ``wait_s``. One that cannot be removed is left (empty, it holds nothing)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.05)


def _remove_stale(parent: Path) -> None:
    """Remove the cgroups a tracker process that has ended left under ``parent`` (killed before
    it could): empty ones only, the kernel refuses the others."""
    for group in parent.glob("tracker-*-*"):
        pid = group.name.split("-")[1]
        if pid.isdigit() and not Path("/proc", pid).exists():
            try:
                group.rmdir()
            except OSError:
                pass


def _own() -> tuple[Path | None, bool]:
    """This process's memory cgroup folder (None where it cannot be told) and whether it is cgroup v2."""
    own_v1 = own_v2 = None
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            if number == "0" and controllers == "":
                own_v2 = path
            elif "memory" in controllers.split(","):
                own_v1 = path
    except (OSError, ValueError):
        return None, False
    if own_v1 is not None and (_MOUNT / "memory").is_dir():
        return _MOUNT / "memory" / own_v1.lstrip("/"), False
    if own_v2 is not None and (_MOUNT / "cgroup.controllers").exists():
        return _MOUNT / own_v2.lstrip("/"), True
    return None, False


def _parents() -> list[tuple[Path, bool]]:
    """Where a memory cgroup may be made, best first: under this process's own cgroup (its
    limits then bound the child's too), then under the hierarchy's root."""
    own, v2 = _own()
    if own is None:
        return []
    root = _MOUNT if v2 else _MOUNT / "memory"
    return [(p, v2) for p in dict.fromkeys((own, root)) if p.is_dir()]


def join(path: str) -> Callable[[], None] | None:
    """Move this process (all its threads) into the cgroup at ``path``; a function that moves it
    back to the cgroup it was in (what it made resident stays charged to ``path``), or None where
    it cannot join."""
    own, _ = _own()
    if not _move(Path(path)):
        return None

    def back() -> None:
        if own is not None:
            _move(own)

    return back


def _move(group: Path) -> bool:
    try:
        with open(group / "cgroup.procs", "w") as fh:
            fh.write(str(os.getpid()))
    except OSError:
        return False
    return True
