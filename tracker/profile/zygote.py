"""A template for measuring children: torch and torchvision imported once, each child forked from it.

Every measurement runs in a child of its own (``child``): a fault ends that measurement only,
and its peak memory is its own. A child started as ``python -m tracker.profile.worker`` first
imports torch and torchvision, about 2.4 s here, more than a small network's whole measurement.
A campaign pays it at every configuration.

So the parent starts one zygote (``python -m tracker.profile.zygote FD``), which imports what
every child imports before it measures (``worker.preload``) and then waits. For each
measurement the parent sends it the child's three pipe ends (stdin, stdout, stderr), its
working folder and its environment over a Unix socket; the zygote forks, and the fork becomes
the measuring child: a process group of its own, those pipes as its standard streams, then
``worker.main``, as a started child would. The zygote reports the child's pid, then its exit
status, as ``waitpid`` gives it (a negative status for a signal, as ``subprocess`` says it).

A fork is still a new process per measurement: nothing of an earlier measurement is in it (the
zygote never runs one), it starts from the same interpreter, torch and torchvision as a started
child, and its peak memory counts from its own start. The zygote has run no torch operation,
so no OpenMP pool or CUDA context is copied into a fork. One zygote serves one environment:
what libraries read when they load (``OMP_NUM_THREADS``, ``CUDA_VISIBLE_DEVICES``) cannot
change after the import, so a different environment gets a zygote of its own (``zygote_client``).

Linux only (fork, file descriptors passed over ``AF_UNIX``); elsewhere, or with
``TRACKER_ZYGOTE=0``, or if a zygote cannot start, children are started as before.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: The largest message over the socket (a request carries the child's environment).
MAX_MESSAGE_BYTES = 1 << 20


def serve(sock: Any, resident: list[tuple[int, int]], own_code: bool = False) -> None:
    """The zygote's loop: fork a measuring child per request, report each child's pid and its
    exit status, until the parent closes the socket.

    A request for a child that imports torch's own code (``own_code``: a training one, whose
    optimizer imports torch._dynamo, about 1.4 s of CPU and 150 MB here) is passed to the zygote's
    *own-code fork*, forked on the first such request: it imports that code once, then serves those
    requests as the zygote does (``own_code`` true), its reports passed back. So each such child
    starts where a started one stands once it has imported the same, without importing it again;
    the other children are forked from the zygote, without it, as before. Its pages are the
    zygote's until written (a fork), and it ends with the zygote."""
    import json
    import select
    import signal
    import socket

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)  # a child's end wakes the select below: no polling while children measure
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock.send(json.dumps({"ready": os.getpid()}).encode())
    children: set[int] = set()
    fork: Any = None  # the own-code fork's socket, once there is one (the zygote's only)
    forked_there: set[int] = set()  # the children it reported and not their end yet
    while True:
        readable, _, _ = select.select([sock, wake_r, *([fork] if fork is not None else [])], [], [])
        if wake_r in readable:
            _drain(wake_r)
        children -= _reap(sock)
        if fork is not None and fork in readable:
            report = fork.recv(MAX_MESSAGE_BYTES)
            if report:
                told = json.loads(report)
                if "pid" in told:
                    forked_there.add(told["pid"])
                forked_there.discard(told.get("exit", 0))
                with _quiet():  # a child's pid or exit status, as the parent reads them from here
                    sock.send(report)
            else:  # it has ended (killed): a later request forks another. Its children's ends are
                fork.close()  # no longer reported: the parent waits for each as for a child whose
                fork = None  # zygote ended (its status unknown)
                for pid in forked_there:
                    with _quiet():
                        sock.send(json.dumps({"orphaned": pid}).encode())
                forked_there.clear()
        if sock in readable:
            message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 3)
            request = json.loads(message) if message else {}
            if not message or request.get("end"):
                # The parent has gone (a parent that ends well has no child measuring), or the zygote
                # that forked this one has seen it go: the children's results have nowhere to go, and
                # they would measure on beside whatever takes the device next. Where only the zygote
                # above has ended (killed), an own-code fork's children go on, as the zygote's do.
                if message or not own_code:
                    for pid in children:
                        with _quiet():
                            os.killpg(pid, signal.SIGKILL)
                    if fork is not None:
                        with _quiet():
                            fork.send(json.dumps({"end": True}).encode())
                return
            if request.get("own_code") and not own_code:
                if fork is None:
                    fork = _own_code_fork(sock, (wake_r, wake_w, *fds), resident)
                if fork is not None:
                    try:
                        socket.send_fds(fork, [message], fds)
                    except OSError:  # it has ended: this child is forked here (it imports that code itself)
                        fork.close()
                        fork = None
                    else:
                        for fd in fds:
                            os.close(fd)
                        continue
            pid = os.fork()
            if pid == 0:
                _become_child(request, fds, (sock.fileno(), wake_r, wake_w, *([fork.fileno()] if fork else [])),
                              resident)
            children.add(pid)
            try:  # a group of its own (killed whole with its loader workers), in the zygote's
                os.setpgid(pid, pid)  # session, which has no terminal: Ctrl-C reaches the parent only
            except OSError:  # it has done so itself, or has ended
                pass
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())


#: How long the own-code fork may take to import torch's own code before its children are
#: forked from the zygote instead (each importing that code itself, as before 0.9.18).
OWN_CODE_READY_S = 120.0


def _own_code_fork(sock: Any, inherited: tuple[int, ...], resident: list[tuple[int, int]]) -> Any:
    """Fork the zygote's own-code fork (``serve``): it imports torch._dynamo, then serves the
    requests passed to it on the socket returned. ``inherited``: the zygote's descriptors it closes
    (its wakeup pipe; the pipes of the child asked for, which it is passed over the socket: a copy
    kept here would hold that child's output open after it ends). None where it cannot (its
    requests are then served by the zygote, as any other)."""
    import json
    import select
    import signal
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        return None
    if pid == 0:
        code = 1
        try:
            ours.close()
            sock.close()  # the parent's socket is the zygote's to read: reports go through it
            signal.set_wakeup_fd(-1)  # not into the zygote's pipe, whose number an import may take next
            for fd in inherited:
                os.close(fd)
            from tracker.profile.network import preload_own_code

            populate(resident)  # the zygote's pages, so that those the import adds are read beside them
            preload_own_code("training", "float32")
            serve(theirs, resident_file_pages(), own_code=True)
            code = 0
        except BaseException:  # noqa: BLE001  the zygote serves its requests instead
            pass
        finally:
            os._exit(code)
    theirs.close()
    ready = b""
    with _quiet():
        if select.select([ours], [], [], OWN_CODE_READY_S)[0]:
            ready = ours.recv(MAX_MESSAGE_BYTES)
    if not ready or "ready" not in json.loads(ready):
        ours.close()  # it ends at its next read, or has ended
        with _quiet():
            os.kill(pid, signal.SIGKILL)
        return None
    return ours


def _quiet() -> Any:
    """Suppress an OSError: a process at the other end that has ended."""
    import contextlib

    return contextlib.suppress(OSError)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _reap(sock: Any) -> set[int]:
    """Report every child that has ended; their pids."""
    import json

    ended: set[int] = set()
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child at all
            return ended
        if pid == 0:
            return ended
        ended.add(pid)
        try:
            sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:  # the parent has gone: nobody to tell
            pass


def resident_file_pages() -> list[tuple[int, int]]:
    """The runs of pages (address, bytes) of this process's readable file mappings (torch's
    libraries, mostly) that are resident in its page table: what importing touched.

    A fork's page table leaves those out (the kernel maps them again at the first touch), so
    a forked child would start about 230 MB lower than a started one that has imported the same
    (538 against 306 MB here) and its peak memory would not be comparable. ``populate`` maps
    them in the fork again. Present bits are read from ``/proc/self/pagemap``; empty where it
    cannot be read."""
    import struct

    page = os.sysconf("SC_PAGE_SIZE")
    runs: list[tuple[int, int]] = []
    try:
        with open("/proc/self/maps") as maps, open("/proc/self/pagemap", "rb") as pagemap:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) < 6 or not fields[5].startswith("/") or not fields[1].startswith("r"):
                    continue
                low, high = (int(x, 16) for x in fields[0].split("-"))
                pagemap.seek(low // page * 8)
                start = None
                for i, (entry,) in enumerate(struct.iter_unpack("<Q", pagemap.read((high - low) // page * 8))):
                    if entry >> 63:  # present
                        start = i if start is None else start
                    elif start is not None:
                        runs.append((low + start * page, (i - start) * page))
                        start = None
                if start is not None:
                    runs.append((low + start * page, high - low - start * page))
    except (OSError, ValueError, struct.error):
        return []
    return runs


def populate(runs: list[tuple[int, int]]) -> None:
    """Map ``runs`` (from ``resident_file_pages``) into this process's page table: with
    ``madvise(MADV_POPULATE_READ)`` (Linux 5.14), else by reading a byte of each page."""
    import ctypes

    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = os.sysconf("SC_PAGE_SIZE")
    for address, size in runs:
        if madvise(address, size, MADV_POPULATE_READ) != 0:
            for at in range(address, address + size, page):
                ctypes.c_char.from_address(at).value  # noqa: B018  the read is the point


#: madvise advice: fault in the pages of a range for reading (Linux 5.14).
MADV_POPULATE_READ = 22


def _become_child(request: dict[str, Any], fds: list[int], zygote_fds: tuple[int, ...],
                  resident: list[tuple[int, int]]) -> None:
    """In the fork: become the measuring child the request asks for; never returns."""
    import signal

    code = 1
    try:
        os.setpgid(0, 0)  # the zygote does it too: the group is the child's before its pid is told
        populate(resident)  # the memory a started child has after the same imports
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in zygote_fds:
            os.close(fd)
        for target, fd in enumerate(fds):  # stdin, stdout, stderr
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _reseed()
        from tracker.profile.worker import main

        code = main(forked=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:  # ended as a started child would be: by SIGINT, after its traceback
        import traceback

        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001  a started child prints it and exits 1
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()  # what an interpreter's exit runs: loader workers are ended, say
        finally:
            _flush()
            os._exit(code)


def _reseed() -> None:
    """A fresh seed where a started child would draw one (the zygote's were copied into every fork)."""
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def main() -> int:
    from tracker.profile.worker import preload

    preload()
    # Read before the socket's modules load: a child has no use for their pages.
    resident = resident_file_pages()
    import socket

    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(sock, resident)
    except (BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        pass  # the parent has gone
    return 0


if __name__ == "__main__":
    sys.exit(main())
