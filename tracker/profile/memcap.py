"""Each measuring child's memory cgroup: whose out-of-memory kill it was, and the memory cap.

Where this process may make a memory cgroup under its own (root, or a delegated cgroup v2
subtree), every measuring child runs in one of its own, made for it and removed once it has
ended (``for_job``, ``admit``). The cgroup's count of out-of-memory kills (``oom_kill`` in
``memory.events``, or in ``memory.oom_control`` for cgroup v1, its descendants included) then
says whether the kernel's out-of-memory killer ended *this* child, where the machine-wide count
(``/proc/vmstat``, the fallback) would also take another process's kill in the same moment for
the child's.

The memory cap of ``--memory-limit-mb`` (a smaller device on a bigger machine), tagged on the
run as ``tracker.memory_cap``, is one of three kinds. On a CUDA device:

- ``device``: the GPU's memory. torch's caching allocator may hold at most what it held when the
  cap was set plus the cap on the child's GPU (``torch.cuda.set_per_process_memory_fraction``);
  an allocation past it raises torch's out-of-memory error, as on a GPU that much smaller. The
  CUDA context and the libraries' own memory (outside the allocator) are not counted. The host
  memory of a CUDA measurement is not capped.

On the CPU:

- ``resident``: the child's cgroup is limited, when the child sets its cap, to what the cgroup
  holds then plus the cap, with no swap. What counts is memory the child makes resident from then
  on (its loader workers' too), as on a device whose memory is full; past it the kernel's
  out-of-memory killer ends the child. A capped child's cgroup may be made under the
  hierarchy's root where none can be made under this process's own.
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

import itertools
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
#: The largest cap a measurement takes, in MB (1 PiB, past any machine's memory): a cgroup's limit
#: is a count of bytes the kernel reads as a 64-bit number, and 1e30 MB read as a tiny one (every
#: run an instant false out-of-memory until 0.9.5).
MAX_LIMIT_MB = float(2**30)


def over_limit(limit_mb: float) -> str | None:
    """What is wrong with a cap past :data:`MAX_LIMIT_MB` (the option's and the files' words), None
    for one within it."""
    return f"must be at most {MAX_LIMIT_MB:,.0f} MB (1 PiB), got {limit_mb:g}" if limit_mb > MAX_LIMIT_MB else None
RESIDENT = "resident"
ADDRESS_SPACE = "address-space"
DEVICE = "device"
_MOUNT = Path("/sys/fs/cgroup")
#: The files (and the word for "no limit") a memory cgroup has, by version: v2 (True), v1 (False).
_FILES = {True: {"limit": "memory.max", "usage": "memory.current", "peak": "memory.peak", "unlimited": "max"},
          False: {"limit": "memory.limit_in_bytes", "usage": "memory.usage_in_bytes",
                  "peak": "memory.max_usage_in_bytes", "unlimited": "-1"}}
_SERIAL = itertools.count(1)  # next() of a count is atomic: threads measuring at once get their own names


def cap_choice() -> str:
    """``TRACKER_MEMORY_CAP`` (``auto`` when unset); another value is a ConfigError."""
    setting = os.environ.get(CAP_ENV, "auto")
    if setting not in CAP_CHOICES:
        from tracker.errors import ConfigError

        raise ConfigError(f"{CAP_ENV} must be auto (a resident-memory cgroup where one can be made, else an "
                          f"address-space limit) or address-space, got {setting!r}")
    return setting


#: A capped configuration's key field (``cap_counts``) where the cap counts less than it did: since
#: 0.9.6 a training or int8 child imports what its path needs (torch._dynamo, torch.ao) before its
#: cap is set, as it does torch, and capped measurements of those before then are not reused. An
#: inference run's cap counted nothing of that, and keeps its key.
CAP_COUNTS = {"cap_counts": "own-imports-before-cap"}


def cap_counts(own_code: bool) -> dict[str, str]:
    """The key field a capped measurement adds where it imports torch's own code (``network.imports_own_code``:
    a training step, an int8 network; see CAP_COUNTS)."""
    return dict(CAP_COUNTS) if own_code else {}


def planned_kind(device: str = "cpu") -> str:
    """The kind of cap a measurement on ``device`` capped now gets: ``device`` on a CUDA device (its
    GPU memory), else ``address-space`` where ``TRACKER_MEMORY_CAP`` asks for it or no memory
    cgroup can be made here, else ``resident``. Part of a capped configuration's identity (the
    same limit means another thing in each)."""
    choice = cap_choice()  # refused if unknown, whatever the device
    if device.startswith("cuda"):
        return DEVICE
    if choice == ADDRESS_SPACE:
        return ADDRESS_SPACE
    return RESIDENT if _cgroups_here() else ADDRESS_SPACE


@lru_cache(maxsize=1)
def _cgroups_here() -> bool:
    """Whether a memory cgroup can be made here (one is made and removed, once per process)."""
    group = MemoryCgroup.make()
    if group is None:
        return False
    group.remove()
    return True


def for_job(job: dict[str, Any]) -> tuple[dict[str, Any], MemoryCgroup | None]:
    """The cgroup for the child that will run ``job`` (None where none can be made), and ``job``
    as the child is to be sent it: a job capped (``memory_limit_mb``, or a training job's
    ``config.memory_limit_mb``) with a ``resident`` cap names the cgroup (``memory_cgroup``), for
    the child to limit when it sets its cap. Where no cgroup can be made under this process's
    own, a capped child's is made under the root (its limit bounds it), an uncapped child gets none."""
    config = job.get("config") or {}
    limit = job.get("memory_limit_mb") or config.get("memory_limit_mb")
    resident = bool(limit) and planned_kind(job.get("device") or config.get("device") or "cpu") == RESIDENT
    group = MemoryCgroup.make(nested_only=not resident)
    if group is None:
        return job, None
    group.capped = resident
    return ({**job, "memory_cgroup": str(group.path)} if resident else job), group


def admit(job: dict[str, Any], group: MemoryCgroup | None, pid: int) -> tuple[dict[str, Any], MemoryCgroup | None]:
    """Move the child ``pid`` (started, its job not yet sent) into ``group``. Where it cannot be
    moved, the group is removed and the job no longer names it: the child then caps its address
    space, and its out-of-memory kill is told by the machine-wide count."""
    if group is None or group.add(pid):
        return job, group
    group.remove(wait_s=0)
    return {k: v for k, v in job.items() if k != "memory_cgroup"}, None


def oom_kill_watch() -> Callable[[], bool]:
    """A function telling whether the kernel's out-of-memory killer has ended a process since this
    was called: in this process's own cgroup (and those under it) where tracker made it one (a
    measuring child's), else anywhere on the machine."""
    own, v2 = _own()
    group = MemoryCgroup(own, v2) if own is not None and own.name.startswith("tracker-") else None
    before = group.oom_kills() if group is not None else None
    if group is None or before is None:
        from tracker.profile.child import oom_killed_since, oom_kills

        machine_before = oom_kills()
        return lambda: oom_killed_since(machine_before)
    return lambda: (group.oom_kills() or 0) > before


@dataclass
class MemoryCgroup:
    """A memory cgroup made for one measuring child; ``remove`` it once the child has ended."""

    path: Path
    v2: bool
    capped: bool = False  # made for a resident memory cap (the child limits it)
    base_bytes: int | None = None  # what it held when ``limit_growth`` set the cap

    @classmethod
    def at(cls, path: str | Path) -> MemoryCgroup:
        """The cgroup at ``path`` (a child is told its cgroup's path)."""
        path = Path(path)
        return cls(path, (path / _FILES[True]["limit"]).exists())

    @classmethod
    def make(cls, nested_only: bool = False) -> MemoryCgroup | None:
        """A new memory cgroup without a limit, under this process's own cgroup, else (unless
        ``nested_only``) under the hierarchy's root; None where none can be made."""
        for parent, v2, nested in _parents():
            if nested_only and not nested:
                continue
            _remove_stale(parent)
            group = parent / f"tracker-{os.getpid()}-{next(_SERIAL)}"
            try:
                group.mkdir()
            except OSError:
                continue
            made = cls(group, v2)
            if not made._file("limit").exists():
                made.remove(wait_s=0)  # no memory controller here (cgroup v2: not enabled for this subtree)
                continue
            return made
        return None

    def add(self, pid: int) -> bool:
        """Move the process ``pid`` (all its threads) into this cgroup; False where it cannot."""
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
        except OSError:
            return False
        return True

    def limit_growth(self, limit_mb: float) -> Callable[[], None] | None:
        """Limit this cgroup to what it holds now plus ``limit_mb``, with no swap where the kernel
        lets it be said (swapped out is not resident: the cap would hold all the same, only
        slower to reach). A function that lifts the limit again, or None where it cannot be set."""
        try:
            usage = int(self._file("usage").read_text())
            limit = str(usage + int(limit_mb * 2**20))
            self._file("limit").write_text(limit)
        except (OSError, ValueError):
            return None
        self.base_bytes = usage
        if not self.v2:  # the peak counts from here (v1 resets it to the current usage; v2's counts from the start)
            self._write(_FILES[False]["peak"], "0")
        # v1: the memory+swap limit is never below the memory limit, so it is set after and lifted first
        swap = (("memory.swap.max", "0", "max"),) if self.v2 else (("memory.memsw.limit_in_bytes", limit, "-1"),
                                                                     ("memory.swappiness", "0", None))
        for name, value, _ in swap:
            self._write(name, value)

        def lift() -> None:
            for name, _, back in swap:
                if back is not None:
                    self._write(name, back)
            self._write(_FILES[self.v2]["limit"], _FILES[self.v2]["unlimited"])

        return lift

    def growth_peak_mb(self) -> float | None:
        """How far the cgroup's memory rose over what it held when the cap was set, at its highest
        (MB): the quantity the cap bounds. None before a cap, or where the kernel keeps no peak
        (cgroup v2 before Linux 5.19)."""
        if self.base_bytes is None:
            return None
        try:
            peak = int(self._file("peak").read_text())
        except (OSError, ValueError):
            return None
        return max(0, peak - self.base_bytes) / 2**20

    def _file(self, what: str) -> Path:
        """This cgroup's file for ``what`` (a key of :data:`_FILES`) in its version."""
        return self.path / _FILES[self.v2][what]

    def _write(self, name: str, value: str) -> None:
        try:
            (self.path / name).write_text(value)
        except OSError:
            pass

    def oom_kills(self) -> int | None:
        """How many processes the kernel's out-of-memory killer ended in this cgroup and the
        cgroups under it (None: unreadable). cgroup v1 counts each cgroup's own kills only, so
        they are added up; v2's ``memory.events`` counts those under it too (unless the hierarchy
        was mounted with ``memory_localevents``: its ``memory.events.local`` are added up)."""
        if self.v2 and not (self.path / "memory.events.local").exists():
            return _oom_kill_count(self.path / "memory.events")
        name = "memory.events.local" if self.v2 else "memory.oom_control"
        counts = [_oom_kill_count(group / name) for group in (self.path, *_under(self.path))]
        return None if counts[0] is None else sum(c for c in counts if c is not None)

    def remove(self, wait_s: float = 10.0) -> None:
        """Remove the cgroup, and any made under it (by a test's fault); a cgroup can be removed only
        once its processes have been reaped, so try for up to ``wait_s``. One that cannot be
        removed is left (empty, it holds nothing; a later ``make`` removes it)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                for inner in _under(self.path):
                    inner.rmdir()
                self.path.rmdir()
                return
            except FileNotFoundError:
                if not self.path.exists():
                    return
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.05)


def _oom_kill_count(path: Path) -> int | None:
    """``oom_kill`` of a cgroup's ``memory.events`` or ``memory.oom_control``; None: unreadable."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def _under(path: Path) -> list[Path]:
    """The cgroups under the one at ``path``, deepest first."""
    return sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))


def _remove_stale(parent: Path) -> None:
    """Remove the cgroups a tracker process that has ended left under ``parent`` (killed before
    it could): empty ones only, the kernel refuses the others."""
    for group in parent.glob("tracker-*-*"):
        pid = group.name.split("-")[1]
        if pid.isdigit() and not Path("/proc", pid).exists():
            MemoryCgroup(group, False).remove(wait_s=0)


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


def _parents() -> list[tuple[Path, bool, bool]]:
    """Where a memory cgroup may be made, best first, each with whether it is cgroup v2 and whether
    it is this process's own cgroup (its limits then bound the child's too), then the hierarchy's root."""
    own, v2 = _own()
    if own is None:
        return []
    root = _MOUNT if v2 else _MOUNT / "memory"
    return [(p, v2, p == own) for p in dict.fromkeys((own, root)) if p.is_dir()]
