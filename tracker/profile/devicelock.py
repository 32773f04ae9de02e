"""One measurement at a time on a device, machine-wide.

Two tracker processes measuring on one device at once would each time the other's work too: two
campaign shards started on one machine, a ``tracker profile`` typed while a campaign runs. On this
2-core VM two children measuring on the CPU at once (torch's default, a thread a core) spun on
each other's OpenMP threads: mobilenet_v3_small at batch 1 took 1.2 s an iteration, not 11 ms.
So each measuring child runs while its parent holds an exclusive ``flock`` on a file named after
the device (``lock_name``) in a folder of the machine's temporary directory; another process that
wants that device waits for it, says so once, and measures after. A network's measurement holds it
until its run is logged, so one that waited finds the run there if it was of the same configuration,
and does not measure it again (since 0.8.9; a thread holding a lock may take it again inside, a
no-op). The lock goes with the process
that held it (a parent killed releases it), and the child, which never inherits the descriptor,
cannot keep it. Devices are locked one by one in name order (a mapping run of CPU and GPU stages
takes both), so two processes never wait on each other.

A GPU measurement also holds the CPU's lock, *shared* (since 0.9.21): its host thread launches
the device's work from a core of that CPU, and a CPU measurement's threads fill its cores. On an
H200's host of 16 cores a GPU measurement kept 1.2 to 1.3 cores busy, one core of other work made
squeezenet1_1 on 16 threads 2.9 times slower (14.0 against 4.89 ms, ±14 %), and a host-bound GPU
latency moves with the host's CPU. So a CPU measurement (the lock exclusive) and a GPU one take
turns, while GPU measurements on two GPUs, each a thread of the host, still run at once (both
shared). Until then the CPU and each GPU were two locks, the host unordered. A holder writes its
pid and the device it measures on into the file (a shared one where no other living holder is
named there), and clears them as it lets go: the waiting note names them. Where the GPU measurement
named there has let go while another still holds the lock shared, the note says a GPU's (0.9.22).

What it does not order: work that is not a tracker measurement (``records.beside_other_work``
says how much CPU other processes took). Where ``fcntl`` is missing (Windows) or the folder cannot
be written, nothing is locked, said once.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

#: The folder of the machine's temporary directory the locks are files of (``lock_folder``).
LOCK_FOLDER_NAME = "tracker-devices"
#: How often a process waiting for a device tries its lock again.
POLL_S = 0.1

_SAID: set[str] = set()  # what this process has said it cannot lock (once each)
#: The devices this thread holds (``_locked``): locking one again inside is a no-op, so a caller
#: may hold a device across a measurement and its logging, with the measurement's own lock inside.
_HELD = threading.local()


def lock_folder() -> Path:
    """The folder of the lock files: one per machine (and temporary directory), shared by its users."""
    return Path(tempfile.gettempdir()) / LOCK_FOLDER_NAME


def lock_name(device: str) -> str:
    """The file a device is locked by: ``cpu``, or ``cuda-N`` for the physical GPU that CUDA
    device N of this process is (its ``CUDA_VISIBLE_DEVICES`` entry, index or UUID, where set)."""
    from tracker.environment import cuda_index

    index = cuda_index(device)
    if index is None:
        name = device
    else:
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        name = f"cuda-{visible[index] if index < len(visible) else index}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".lock"


def job_devices(job: dict[str, Any]) -> list[str]:
    """The devices a measuring child's job runs on: a network job's ``device``, a training job's
    ``config.device``; the CPU for any other."""
    device = job.get("device") or (job.get("config") or {}).get("device")
    return [str(device)] if device else ["cpu"]


def _say_once(text: str) -> None:
    if text not in _SAID:
        _SAID.add(text)
        sys.stderr.write(f"note: {text}\n")


def _open(path: Path) -> int | None:
    """A descriptor of the lock file (made, open to every user of the machine, if it is not there);
    read-only where another user made it; None where it cannot be opened at all."""
    folder = path.parent
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o1777)  # as /tmp: every user makes their files, none removes another's
    except OSError:
        pass
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            os.fchmod(fd, 0o666)
        except OSError:
            pass  # another user's file, opened for writing all the same
        return fd
    except OSError:
        pass
    try:
        return os.open(path, os.O_RDONLY)
    except OSError as exc:
        _say_once(f"measuring without the lock that keeps two measurements off one device at once: {exc}")
        return None


def _named(fd: int) -> tuple[int | None, str | None]:
    """The pid a lock file names and the device that process measures on (a file of 0.9.20 or before
    names its pid alone), where that process is alive; (None, None) for anything else."""
    try:
        words = os.pread(fd, 64, 0).decode("ascii", "replace").split()
    except OSError:
        return None, None
    if not (words and words[0].isascii() and words[0].isdigit()):
        return None, None
    pid = int(words[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:  # a holder killed while it held (SIGKILL): its line is left, not its lock
        return None, None
    except OSError:
        pass  # another user's: alive
    return pid, words[1] if len(words) > 1 else None


#: What a waiting note says the holders measure on where the lock is held shared and names none (the
#: GPU measurement it named has let go while another still holds it): GPU measurements, on the host.
#: Its lock name (``a_GPU.lock``) is no device's, so ``_why`` gives the host's reason for it, as for a GPU's.
SHARED_HOLDERS = "a GPU"


def _held_shared(path: Path) -> bool:
    """Whether the lock a process waits for (exclusive) is held shared now: a shared lock of its own,
    taken and let go at once, is granted only beside shared holders, or where the holder let go just
    now, which the waiter's own try right after it tells apart (``_locked``)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # held exclusive (BlockingIOError), or not to be asked
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def _took(fd: int, flags: int) -> bool:
    """Whether ``fd``'s lock was granted at once (``flags``: with ``LOCK_NB``)."""
    import fcntl

    try:
        fcntl.flock(fd, flags)
    except BlockingIOError:
        return False
    return True


def _holder(fd: int, path: Path, exclusive: bool) -> tuple[str, str | None]:
    """The holder the lock file names (:func:`_named`), as words for the note, and its device; where
    it names none and the lock an ``exclusive`` waiter waits for is held shared, ``SHARED_HOLDERS``
    (until 0.9.22 such a note named the CPU, and a CPU's reason)."""
    pid, device = _named(fd)
    if pid is None and exclusive and _held_shared(path):
        device = SHARED_HOLDERS
    return (f"another tracker process (pid {pid})" if pid else "another tracker process"), device


def _why(device: str, theirs: str | None, shared: bool) -> str:
    """Why a measurement on ``device`` waits for the one on ``theirs``: one device, or the CPU that a GPU
    measurement launches from (``shared``: this one is the GPU's, waiting for the host)."""
    if not shared and (theirs is None or lock_name(theirs) == lock_name(device)):  # cuda and cuda:0 are one
        return "two measurements at once on one device would each time the other's work too"
    return ("a GPU measurement launches its work from a core of the CPU, which a CPU measurement's threads fill: "
            "each would time the other's work too")


@contextmanager
def _locked(device: str, say: Callable[[str], None], measuring: str | None = None) -> Iterator[float]:
    """Hold ``device``'s lock: exclusive, or shared where ``measuring`` names the GPU whose measurement
    holds the CPU's lock (the host it launches from) beside it."""
    import fcntl

    held: set[str] = _HELD.__dict__.setdefault("devices", set())
    if lock_name(device) in held:  # this thread holds it already (re-entrant; shared or not, as first taken)
        yield 0.0
        return
    path = lock_folder() / lock_name(device)
    fd = _open(path)
    if fd is None:
        yield 0.0
        return
    waited_from = None
    said = False
    flags = (fcntl.LOCK_SH if measuring else fcntl.LOCK_EX) | fcntl.LOCK_NB
    try:
        try:
            while not _took(fd, flags):
                if waited_from is None:
                    waited_from = time.monotonic()
                if not said:
                    who, theirs = _holder(fd, path, measuring is None)
                    if theirs == SHARED_HOLDERS and _took(fd, flags):  # granted as no one held it: its holder
                        break  # let go just then (until 0.9.23 the note said a GPU held it)
                    say(f"{who} is measuring on {theirs or device}: waiting for it "
                        f"({_why(measuring or device, theirs, measuring is not None)})")
                    said = True
                time.sleep(POLL_S)
        except KeyboardInterrupt as exc:  # a Ctrl-C (a SIGTERM) before the device was this process's: nothing of
            # its measurement has begun, which the command may say (``waiting_for_device``)
            if waited_from is not None:
                exc.waiting_for_device = device  # type: ignore[attr-defined]
            raise
        try:  # the holder a waiter names: a shared holder names itself where no other living holder is named
            if measuring is None or _named(fd)[0] in (None, os.getpid()):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {measuring or device}\n".encode("ascii", "replace"), 0)
        except OSError:
            pass  # opened read-only: the lock holds all the same, its note names no pid
        held.add(lock_name(device))
        try:
            yield 0.0 if waited_from is None else time.monotonic() - waited_from
        finally:
            held.discard(lock_name(device))
            try:
                if _named(fd)[0] == os.getpid():  # letting go: named no more (a shared lock may stay held)
                    os.ftruncate(fd, 0)
            except OSError:
                pass
    finally:
        os.close(fd)  # and the lock with it


@contextmanager
def measuring_on(devices: Iterable[str], say: Callable[[str], None] | None = None) -> Iterator[float]:
    """Hold each of ``devices``' locks (in name order) for the block, and for a GPU the CPU's, shared
    (the host it launches from; exclusive where ``devices`` names the CPU too, a mapping's); yields how
    long this process waited for them (seconds). ``say`` (default: a note on stderr) is told once per
    device it waits for, naming the process it waits for and what that one measures on. A Ctrl-C
    (KeyboardInterrupt, or the command's Terminated) while it waits for one goes on with
    ``waiting_for_device``, that device, set on it (:func:`waiting_for`)."""
    import importlib.util

    if importlib.util.find_spec("fcntl") is None:
        _say_once("this system has no fcntl: two tracker processes may measure on one device at once")
        yield 0.0
        return
    from tracker.environment import cuda_index

    devices = list(devices)
    locks: dict[str, tuple[str, str | None]] = {lock_name(d): (d, None) for d in devices}
    gpus = [d for d in devices if cuda_index(d) is not None]
    if gpus:  # the host a GPU's measurement launches from: the CPU's lock, shared (since 0.9.21)
        locks.setdefault(lock_name("cpu"), ("cpu", gpus[0]))
    waited = 0.0
    with ExitStack() as stack:
        for _, (device, gpu) in sorted(locks.items()):
            waited += stack.enter_context(_locked(device, say or _say_once, gpu))
        yield waited


def waiting_for(exc: BaseException) -> str | None:
    """The device a Ctrl-C (``exc``) stopped this process waiting for, its measurement not begun
    (see :func:`measuring_on`); None for one that landed anywhere else."""
    return getattr(exc, "waiting_for_device", None)
