"""The child process that makes one measurement: ``python -m tracker.profile.worker``.

It reads one job (JSON) on stdin, measures, and writes one result line on stdout:
``TRACKER-RESULT {...}``. Out-of-memory (CUDA, or the CPU allocator under the job's
address-space cap) exits with status 3 after a result line ``{"error": "oom", ...}``; under a
resident-memory cap (the memory cgroup ``memory_cgroup`` of the job, ``memcap``) the kernel's
out-of-memory killer ends the child instead, and the parent reads the cgroup's count; any other
exception exits 4 with ``{"error": "error", ...}``. A crash or a kill leaves no result
line; the parent classifies it by the exit status. Nothing here touches the store.
A training job (kind ``training``) also writes an event line per step as it goes
(``TRACKER-EVENT {...}``, read by ``child.stream_child``).

Fault injection for tests: ``TRACKER_FAULT`` = ``oom``, ``kill``, ``hang``, ``crash``,
``linger`` (the child writes its result, then does not end), ``layers:hang`` and ``layers:kill`` (a
network measured with its layers hangs, or is killed by SIGKILL, once its network is measured), ``notrace`` (torch.profiler fails
when a trace is asked for), ``noreset`` (its peak memory
cannot be started afresh, as on a kernel without ``/proc/self/clear_refs``) or ``oomkill`` (the child makes itself the kernel's first choice and takes memory until the
kernel's out-of-memory killer ends it; in a memory cgroup of ``FAULT_CGROUP_MB`` made under its
own where one can be made, else under the whole machine's memory pressure)
(optionally ``oom@8`` to fire only when the batch size is at least 8, ``kill#2`` to fire
in a training job once it has measured 2 steps, ``loader:oomkill`` to fire in each of a training
job's loader workers as it starts instead of in the measuring child).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from tracker.errors import is_oom

RESULT_PREFIX = "TRACKER-RESULT "
EVENT_PREFIX = "TRACKER-EVENT "  # a measurement's progress, as it goes (child.stream_child)
EXIT_OOM = 3
EXIT_ERROR = 4
FAULT_CGROUP_MB = 1536  # the memory the ``oomkill`` fault takes before it is killed, where a cgroup can hold it


#: Where the result and event lines go: the child's stdout as it started, set apart by
#: :func:`keep_protocol` (its stdout then goes to stderr); None until then (sys.stdout).
_PROTOCOL: Any = None


def keep_protocol() -> None:
    """Keep the child's stdout for its result and event lines alone, and send what anything else
    writes there (a network's ``print`` in its ``forward``, a library's C code) to stderr: a print
    without a newline ran into the result line, which was lost, and a line a network printed could
    pass for a result (until 0.9.8)."""
    global _PROTOCOL
    if _PROTOCOL is not None:
        return
    sys.stdout.flush()
    _PROTOCOL = os.fdopen(os.dup(1), "w", encoding="utf-8", closefd=True)
    os.dup2(2, 1)


def _write_line(prefix: str, payload: dict[str, Any]) -> None:
    stream = _PROTOCOL if _PROTOCOL is not None else sys.stdout
    stream.write(prefix + json.dumps(payload, default=str) + "\n")
    stream.flush()


def _emit(payload: dict[str, Any]) -> None:
    _write_line(RESULT_PREFIX, payload)


def emit_event(event: dict[str, Any]) -> None:
    """One event line for ``child.stream_child``'s caller, written at once."""
    _write_line(EVENT_PREFIX, event)


def injected_fault() -> str:
    """The fault a test asks for (``TRACKER_FAULT``; empty when none), read where it may fire."""
    return os.environ.get("TRACKER_FAULT", "")


def inject_fault(job: dict[str, Any], steps: int | None = None) -> None:
    """Fire ``TRACKER_FAULT`` if it applies: before the measurement (``steps`` None), or in a
    training job once it has measured ``steps`` steps (``kill#2``)."""
    fault = injected_fault()
    if not fault:
        return
    if fault.startswith(LOADER_FAULT):  # for loader workers only (loader_fault)
        return
    fault, _, after = fault.partition("#")
    if (steps is None) != (not after) or (after and steps != int(after)):
        return
    what, _, at = fault.partition("@")
    if at and int(job.get("batch_size", 0)) < int(at):
        return
    _fire(what)


LOADER_FAULT = "loader:"


def loader_fault_wanted() -> bool:
    """Whether ``TRACKER_FAULT`` is meant for a training job's loader workers (``loader:WHAT``)."""
    return injected_fault().startswith(LOADER_FAULT)


def loader_fault(worker_id: int) -> None:
    """A DataLoader ``worker_init_fn``: fire ``TRACKER_FAULT``'s ``loader:WHAT`` in the worker."""
    _fire(injected_fault()[len(LOADER_FAULT):])


def loader_worker_killed(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's DataLoader telling that one of its workers died by a signal
    or without a word ("is killed by signal: Killed.", "exited unexpectedly")."""
    text = str(exc)
    return isinstance(exc, RuntimeError) and "DataLoader worker (pid" in text and (
        "killed by signal: Killed" in text or "exited unexpectedly" in text)


def _fire(what: str) -> None:
    if what == "oom":
        raise MemoryError("injected out of memory (TRACKER_FAULT)")
    if what == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if what == "crash":
        os.abort()
    if what == "hang":
        time.sleep(3600)
    if what == "oomkill":
        from tracker.profile import memcap

        # A memory cgroup limited to FAULT_CGROUP_MB, made under this process's own (the child's,
        # so the child's cgroup counts the kill), where one can be made: the machine is spared.
        if (group := memcap.MemoryCgroup.make(nested_only=True)) is not None:
            group.add(os.getpid())
            group.limit_growth(FAULT_CGROUP_MB)
        with open("/proc/self/oom_score_adj", "w") as f:  # raising it needs no privilege
            f.write("1000")
        import mmap

        held = []
        while True:  # 256 MB at a time, made resident as it is mapped (MAP_POPULATE)
            held.append(mmap.mmap(-1, 2**28, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE))


@dataclass
class Cap:
    """The memory cap a child set (``cap_memory``): ``kind`` (``memcap.RESIDENT``,
    ``memcap.ADDRESS_SPACE``, or None without a limit), ``lift`` to lift it again, ``used_mb`` how
    far its memory rose over what it held when the cap was set, at the highest (resident caps;
    None where not known)."""

    kind: str | None = None
    lift: Callable[[], None] = field(default=lambda: None)
    used_mb: Callable[[], float | None] = field(default=lambda: None)


def cap_memory(limit_mb: float | None, threads: int | None = None, cgroup: str | None = None,
               device: str = "cpu") -> Cap:
    """Cap this process's memory growth at ``limit_mb`` over what it holds now, as on a smaller
    device (see ``tracker.profile.memcap``). On a CUDA ``device``: the GPU memory torch's caching
    allocator may hold (``cap_device_memory``). Else by limiting its memory cgroup ``cgroup`` (the
    parent made it and moved this process into it) to what it holds plus ``limit_mb``, else by
    raising ``RLIMIT_AS`` that much over the address space it holds. Lifting the cap puts back the
    cgroup's limit, or the soft limit it had (never above the hard one).

    torch's intra-op threads (``threads`` of them, if given) are started first: their stacks are
    address space too, and a thread that cannot start under the cap aborts the process in libgomp
    ("Thread creation failed") instead of failing an allocation. Seen on a 16-core host, where the
    pool's stacks alone took most of a 200 MB cap."""
    if not limit_mb:
        return Cap()
    if device.startswith("cuda"):
        return cap_device_memory(limit_mb, device)
    import torch

    from tracker.profile import memcap

    if threads:
        from tracker.profile.modes import apply_threads

        apply_threads(int(threads))
    torch.nn.functional.conv2d(torch.ones(1, 8, 64, 64), torch.ones(8, 8, 3, 3)).sum().item()
    if cgroup:
        group = memcap.MemoryCgroup.at(cgroup)
        if (lift := group.limit_growth(limit_mb)) is not None:
            return Cap(memcap.RESIDENT, lift, group.growth_peak_mb)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as fh:
        current = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = current + int(limit_mb * 2**20)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return Cap(memcap.ADDRESS_SPACE, lambda: resource.setrlimit(resource.RLIMIT_AS, (soft, hard)))


def cap_device_memory(limit_mb: float, device: str) -> Cap:
    """Let torch's caching allocator hold at most what it holds now plus ``limit_mb`` on the CUDA
    ``device`` (``set_per_process_memory_fraction`` of the GPU's total memory; the whole GPU where
    that is more): past it an allocation raises torch's out-of-memory error, as on a GPU with that
    much less memory. ``used_mb``: how far the allocator's peak rose over what it held, at the
    highest since the last reset of its peak (the measurement resets it once its network is on the
    device)."""
    import torch

    from tracker.environment import cuda_index
    from tracker.profile import memcap

    index = cuda_index(device)
    held = torch.cuda.memory_reserved(index)
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, (held + limit_mb * 2**20) / total), index)
    return Cap(memcap.DEVICE, lambda: torch.cuda.set_per_process_memory_fraction(1.0, index),
               lambda: max(0.0, (torch.cuda.max_memory_reserved(index) - held) / 2**20))


def _status_mb(field: str) -> float | None:
    """A memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in MB; None without ``/proc``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def current_rss_mb() -> float | None:
    """This process's resident memory now (``VmRSS``, MB); None without ``/proc``."""
    return _status_mb("VmRSS")


def give_back_freed() -> None:
    """Collect garbage and hand glibc's free memory back to the system: what was freed is then no
    longer resident, so ``VmRSS`` read next holds none of it (``reset_peak_rss`` starts its peak so;
    a network's run reads what it holds before its network is built so, since 0.9.12)."""
    import ctypes
    import gc

    gc.collect()
    # The symbols this program already has, the C library's among them: ctypes.util.find_library
    # would start ``ldconfig -p`` at every measurement for the same answer.
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:  # glibc's; other C libraries give memory back on their own terms
        trim(0)


def reset_peak_rss() -> bool:
    """Start this process's peak resident memory afresh from what it holds now (Linux 4.0 and
    later: 5 written to ``/proc/self/clear_refs``), so that what building a network took and gave
    back (a pruned network is traced and copied from its unpruned base) is not counted as the
    network's. Garbage is collected and glibc's allocator hands its free memory back to the system
    first: freed, it would still be resident. False where the reset cannot be made: ``peak_rss_mb``
    is then the peak since the program started, which would count what building the network took
    and gave back (a forked child: the zygote's pages it mapped too), another quantity; callers
    then report no CPU peak."""
    give_back_freed()
    try:
        if injected_fault() == "noreset":  # for tests: a kernel without the reset
            raise OSError("injected: no /proc/self/clear_refs (TRACKER_FAULT)")
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def peak_rss_mb() -> float:
    """Peak resident memory of this process since it started its program, or since
    ``reset_peak_rss`` (MB).

    ``VmHWM`` of ``/proc/self/status``: the high-water mark of this program's own address space.
    ``getrusage``'s ``ru_maxrss`` is not used where ``/proc`` exists because Linux carries it
    across ``fork`` and ``execve``: a child started by a parent holding 1.3 GB reported 1.3 GB
    whatever it ran.
    """
    if (peak := _status_mb("VmHWM")) is not None:
        return peak
    # kilobytes on Linux, bytes on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**20 if sys.platform == "darwin" else 1024.0)


def preload() -> None:
    """What every child imports before it measures, whatever builds its network: the peak resident
    memory of a generated network and of a torchvision one then start from the same interpreter,
    torch and torchvision. torch is imported before the memory cap: its libraries are mapped.
    A zygote (``tracker.profile.zygote``) imports the same before it forks children."""
    import tracker.profile.measure  # noqa: F401
    from tracker.zoo.torchvision_zoo import import_torchvision

    import_torchvision()  # imports torch first


def own_code_of(job: dict[str, Any]) -> tuple[str, str]:
    """The phase and number format whose code of torch's ``job`` imports before it measures
    (``network.imports_own_code``): a training job's is the training phase's."""
    return ("training" if job.get("kind") == "training" else job.get("phase", "inference"),
            job.get("precision", "float32"))


def forked_with_own_code(job: dict[str, Any]) -> bool:
    """Whether ``job``'s child is forked from the zygote's own-code fork, which has imported
    torch._dynamo (``zygote``; about 1.4 s of CPU saved a child here): a child that imports it
    whatever its network (``network.imports_own_code``), with no memory cap. A capped one imports it
    itself, once in its memory cgroup and before its cap is set: forked with it, the pages of it its
    run writes would be copied then, charged to its cgroup as growth under the cap (squeezenet1_1's
    training at 64 px: 135 MB of its cap against 59 MB)."""
    from tracker.profile.network import imports_own_code

    return imports_own_code(*own_code_of(job)) and not job.get("memory_limit_mb")


#: prctl(2): the signal a process gets when the thread that made it ends.
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Be killed (SIGKILL) when the process that made this one ends, however it ends: a measuring
    child whose campaign was killed would otherwise measure on, orphaned, beside whatever takes the
    device after it (the device lock died with the campaign). Linux only; elsewhere nothing. A fork
    of the zygote does not: the zygote kills its forks when the parent goes."""
    import ctypes
    import signal

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent or parent == 1:  # it ended before the signal was asked for
        os._exit(EXIT_ERROR)


def main(forked: bool = False) -> int:
    """A measuring child: its job from stdin, its result line on stdout. ``forked``: a fork of the
    zygote, which ends it if the parent goes (``zygote.serve``) and whose own end it outlives (the
    parent waits for it still); a started one dies with its parent."""
    if not forked:
        die_with_parent()
    job = json.loads(sys.stdin.read())
    keep_protocol()
    cap = Cap()  # the memory cap set, if any (a training job sets its own)
    try:
        from tracker.profile.measure import run_job

        from tracker.profile.network import preload_own_code

        preload()
        # before the cap, as torch is: a training job's, or a network's in training or int8 (a fork
        # of the zygote's own-code fork has imported it already: ``zygote``)
        preload_own_code(*own_code_of(job))
        cap = cap_memory(job.get("memory_limit_mb"), job.get("threads"), job.get("memory_cgroup"),
                         job.get("device") or "cpu")
        inject_fault(job)
        if job.get("kind") == "mapping":
            from tracker.profile.mapping import run_workload

            result = run_workload(job)
        elif job.get("kind") == "training":
            from tracker.profile.job import train

            result = train(job)
        elif job.get("kind") == "probe":  # tracker device speed: the speed probe alone
            from tracker.profile.probe import time_now

            result = time_now(job)
        else:
            result = run_job(job)
    except BaseException as exc:  # noqa: BLE001  every failure becomes a result line
        if isinstance(exc, KeyboardInterrupt):
            raise
        oom = is_oom(exc, capped=bool(job.get("memory_limit_mb")))
        _emit({"error": "oom" if oom else "error", "message": f"{type(exc).__name__}: {str(exc)[:500]}",
               **({"memory_cap": cap.kind} if cap.kind else {})})
        if not oom:
            traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        os._exit(EXIT_OOM if oom else EXIT_ERROR)
    if cap.kind:
        result["memory_cap"] = cap.kind
        if (used := cap.used_mb()) is not None:
            result.setdefault("memory", {})["memory_cap_used_mb"] = used
    _emit(result)
    if injected_fault() == "linger":  # for tests: the result written, the child does not end
        time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
