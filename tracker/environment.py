"""The environment a measurement ran in, recorded as ``env.*`` tags on every run.

Host, CPU model and count, physical memory, threads, governor, the kernel's NUMA balancing and huge pages, torch and CUDA
versions, GPU name, driver and memory from NVML. What cannot be read on this machine is absent, never empty or zero.
"""

from __future__ import annotations

import os
import platform
import socket
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, Iterator


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def cpu_governor() -> str | None:
    try:
        return Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text().strip()
    except OSError:
        return None


@contextmanager
def nvml() -> Iterator[Any]:
    """``pynvml``, initialised for the block and shut down after; None where NVML cannot start."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no device: nothing to read
        yield None
        return
    try:
        yield pynvml
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def visible_cuda_entries() -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (NVML indices or UUIDs), entry k being CUDA device
    k of this process; None where it is not set (every GPU, numbered as NVML numbers them)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return None if visible is None else [e.strip() for e in visible.split(",") if e.strip()]


def nvml_handle(pynvml: Any, cuda_index: int) -> Any:
    """The NVML handle of this process's CUDA device ``cuda_index`` (torch's ``cuda:N``).

    NVML ignores CUDA_VISIBLE_DEVICES, which renumbers devices: its entry k (an NVML index or a
    UUID, maybe abbreviated) is CUDA device k. Without it, the CUDA index is taken as the NVML
    index. LookupError (or NVML's own error) where there is no such device."""
    entries = visible_cuda_entries()
    if entries is None:
        return pynvml.nvmlDeviceGetHandleByIndex(cuda_index)
    if cuda_index >= len(entries):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise LookupError(f"CUDA device {cuda_index} not visible (CUDA_VISIBLE_DEVICES={visible!r})")
    from tracker.console import whole_number

    entry = entries[cuda_index]
    # an index in ASCII digits, as CUDA reads it (isdigit took ٣ for NVML's device 3 until 0.9.14)
    if (index := whole_number(entry)) is not None:
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    for k in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(k)
        uuid = nvml_text(pynvml.nvmlDeviceGetUUID(handle))
        if uuid.startswith(entry) or uuid.startswith(f"GPU-{entry}"):
            return handle
    raise LookupError(f"no NVML device matches {entry!r}")


def cuda_index(device: str) -> int | None:
    """N of ``cuda:N`` (0 for ``cuda``); None for another device."""
    if device == "cuda":
        return 0
    from tracker.console import whole_number

    head, _, index = device.partition(":")
    return whole_number(index) if head == "cuda" else None


def threads_tags(threads: int | None) -> dict[str, str]:
    """``env.threads`` of a run measured with ``threads`` torch threads (a device mode's, set in its
    measuring child), where given: :func:`capture_environment` reads the tracker process's own count,
    which is the child's only where no count was asked for (until 0.8.9, ``--threads 1`` runs said 2)."""
    return {} if not threads else {"env.threads": str(int(threads))}


def gpu_tags(device: str) -> dict[str, str]:
    """``env.gpu_name`` and ``env.gpu_memory_total_mb`` of the GPU a run on ``device`` used
    (``cuda:N``, through CUDA_VISIBLE_DEVICES); empty for another device or where NVML cannot
    tell. A run on ``cuda:1`` of a machine whose GPUs differ is tagged with GPU 1's, not GPU 0's."""
    index = cuda_index(device)
    return {} if index is None else dict(_gpu_tags(index, os.environ.get("CUDA_VISIBLE_DEVICES")))


@cache
def _gpu_tags(index: int, visible: str | None) -> tuple[tuple[str, str], ...]:
    with nvml() as pynvml:
        if pynvml is None:
            return ()
        try:
            handle = nvml_handle(pynvml, index)
            tags = [("env.gpu_name", nvml_text(pynvml.nvmlDeviceGetName(handle)))]
        except Exception:  # no such GPU
            return ()
        try:  # a board whose memory NVML does not report still has its name
            tags.append(("env.gpu_memory_total_mb", str(int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) >> 20)))
        except Exception:
            pass
        return tuple(tags)


@cache
def nvml_info() -> dict[str, str]:
    """GPU count and driver from NVML, and the name and memory of this process's first CUDA
    device (``cuda``; a run on another tags its own, ``gpu_tags``); empty where there is no
    NVIDIA driver."""
    with nvml() as pynvml:
        if pynvml is None:
            return {}
        try:
            count = pynvml.nvmlDeviceGetCount()
            info = {"env.gpu_count": str(count), "env.gpu_driver": nvml_text(pynvml.nvmlSystemGetDriverVersion())}
        except Exception:
            return {}
    return {**info, **gpu_tags("cuda")} if count else info


def nvml_text(value: bytes | str) -> str:
    """NVML answers bytes in older bindings and str in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


def memory_total_mb() -> int | None:
    """The machine's physical memory (MB = 2^20 bytes), where the system says it."""
    try:
        return (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) >> 20
    except (ValueError, OSError, AttributeError):  # no such sysconf name here
        return None


def kernel_memory_settings() -> dict[str, str]:
    """The kernel's settings that change a process's page faults, where readable: automatic NUMA
    balancing (its hinting faults count as minor faults, at any allocator) and transparent huge
    pages (a fault maps 2 MB instead of 4 KB)."""
    env: dict[str, str] = {}
    try:
        if (numa := Path("/proc/sys/kernel/numa_balancing").read_text().strip()).isdigit():
            env["env.numa_balancing"] = numa
    except OSError:
        pass
    try:  # "always [madvise] never": the bracketed one is in force
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
        if "[" in thp and "]" in thp:
            env["env.transparent_hugepage"] = thp.split("[", 1)[1].split("]", 1)[0]
    except OSError:
        pass
    return env


def capture_environment(with_torch: bool = True) -> dict[str, str]:
    """The ``env.*`` tags of a run made on this machine, now."""
    env: dict[str, str] = {
        "env.host": socket.gethostname(),
        "env.platform": f"{platform.system()}-{platform.release()}-{platform.machine()}",
        "env.python_version": platform.python_version(),
        "env.cpu_count": str(os.cpu_count() or 0),
    }
    if model := cpu_model():
        env["env.cpu_model"] = model
    if governor := cpu_governor():
        env["env.cpu_governor"] = governor
    if total := memory_total_mb():
        env["env.memory_total_mb"] = str(total)
    env.update(kernel_memory_settings())
    if with_torch:
        version, cuda = torch_versions()
        env["env.torch_version"] = version
        env["env.threads"] = str(torch_threads())
        if cuda and gpu_device_nodes():  # a CUDA build where a GPU may be: torch says whether one is
            import torch

            if torch.cuda.is_available():
                env["env.cuda_version"] = cuda
    env.update(nvml_info())
    return env


#: What tracker's own measurements mean, in every configuration key: raised when a measured
#: quantity changes meaning, so that a run measured the old way is measured again rather than
#: reused as if measured the new way. 2 (tracker 0.3.0): a CPU run's peak memory counts from its
#: built network (``worker.reset_peak_rss``; 0.2.0 already did, with keys that lacked this field),
#: every measuring child imports torchvision, and a training job's peak counts from its loop's start.
MEASUREMENT_PROTOCOL = 2
#: The same for training jobs alone (``profile training``, ``campaign loader``), in their keys
#: besides the above. 2 (tracker 0.4.0): a job runs in a measuring child, so its CPU peak memory
#: is that child's, no longer that of the tracker process (MLflow, the store, the CLI). 3 (tracker
#: 0.7.4): a job's statistics (its latency, step parts, data wait share, throughput) leave its first
#: step out, the set-up, as its telemetry did (``job.WARMUP_STEPS``). 4 (tracker 0.9.11): every timed
#: step is a whole batch of the job's batch size (an epoch's last, partial batch dropped since 0.9.10,
#: a batch a bad file left short not timed, a dataset smaller than a batch refused): a step of fewer
#: images was timed and labelled with the job's batch size before.
JOB_MEASUREMENT_PROTOCOL = 4


def software_versions() -> dict[str, str]:
    """The software part of a configuration key: results from other versions (of torch, CUDA,
    Python, tracker's ``MEASUREMENT_PROTOCOL``) are not reused."""
    torch_version, cuda = torch_versions()
    # Keys made before tracker 0.3.0 lack this field: a key with it differs from them all.
    return {"torch": torch_version, "cuda": cuda or "none", "python": platform.python_version(),
            "measurement": str(MEASUREMENT_PROTOCOL)}


def gpu_device_nodes() -> bool:
    """Whether this machine has a device file through which CUDA reaches a GPU: NVIDIA's driver
    (``/dev/nvidia*``), a Jetson's (``/dev/nvhost-*``, ``/dev/nvgpu``) or WSL's (``/dev/dxg``).
    Without one torch finds no GPU, and is not imported (about 2 s here) to say so."""
    dev = Path("/dev")
    return any(any(dev.glob(pattern)) for pattern in ("nvidia*", "nvhost-*", "nvgpu*", "dxg"))


def torch_threads() -> int:
    """torch's intra-op thread count in this process (``torch.get_num_threads()``). Where torch is
    not imported yet (a measurement's parent process, ``tracker profile network``, needs no more
    of it; importing it takes about 2 s here), read from the environment where ``OMP_NUM_THREADS``
    names a whole number from 1 to the CPUs this process may run on and ``MKL_NUM_THREADS`` is
    unset or the same: torch starts with that many. Anything else (unset, or more than the CPUs,
    which torch lowers) is asked of torch once and kept in tracker's cache (since 0.9.33), under
    everything torch's starting count follows from (:func:`_threads_entry`): a later process
    reads it back rather than importing torch (a ``profile network`` that reuses a measurement took
    3.4 s with ``OMP_NUM_THREADS`` unset, 1.0 s with it set)."""
    import re
    import sys

    entry = None
    if "torch" not in sys.modules:
        omp, mkl = os.environ.get("OMP_NUM_THREADS", ""), os.environ.get("MKL_NUM_THREADS", "")
        usable = min(os.cpu_count() or 1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
        if re.fullmatch(r"[1-9][0-9]{0,3}", omp) and int(omp) <= usable and mkl in ("", omp):
            return int(omp)
        from tracker import cache as disk

        entry = _threads_entry()
        hit = disk.read_json(entry) if entry is not None else None
        if type(hit) is int and 1 <= hit <= max(usable, 1):
            return hit
    import torch

    threads = int(torch.get_num_threads())
    if entry is not None:
        disk.write_json(entry, threads, keep=THREADS_KEPT)
    return threads


#: The most thread counts kept in tracker's cache (one a machine, CPU set and environment).
THREADS_KEPT = 64


def _threads_entry() -> str | None:
    """The cache entry of torch's starting thread count (:func:`torch_threads`), named after what
    it follows from: the installed torch (version and folder), the OpenMP and MKL environment
    (every ``OMP_*``, ``MKL_*``, ``KMP_*`` and ``GOMP_*`` variable), the CPUs this process may run
    on and their cores (torch's MKL counts physical cores; ``taskset -c 0`` gives 1 here where 2
    is the default), the machine's CPU count, its cgroup CPU limit and its name (a cache folder a
    home directory shares between machines). None where torch's place cannot be read."""
    import hashlib
    import importlib.util
    import json

    try:
        spec = importlib.util.find_spec("torch")
        folder = str(list(spec.submodule_search_locations or [])[0])  # type: ignore[union-attr]
        version = _torch_version_file()
    except Exception:  # noqa: BLE001 - torch not found where it is looked for: asked, not cached
        return None
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    topology = []
    for cpu in cpus:
        folder_cpu = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        topology.append([read_small_file(folder_cpu / "physical_package_id"),
                         read_small_file(folder_cpu / "core_cpus_list")
                         or read_small_file(folder_cpu / "thread_siblings_list")])
    said = sorted((k, v) for k, v in os.environ.items() if k.startswith(("OMP_", "MKL_", "KMP_", "GOMP_")))
    key = json.dumps([folder, list(version), said, cpus, topology, os.cpu_count(),
                      read_small_file(Path("/sys/fs/cgroup/cpu.max")), socket.gethostname()])
    return f"threads/{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def read_small_file(path: Path) -> str | None:
    """A small system file's text, stripped; None where it cannot be read or is empty."""
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def torch_versions() -> tuple[str, str | None]:
    """torch's version and the CUDA it was built with (``torch.__version__``, ``torch.version.cuda``).
    Where torch is not imported yet, read from its ``version.py`` alone, which sets plain values
    and imports nothing of torch: importing torch takes about 2 s here, and a measurement's
    parent process (``tracker profile network``) needs no more of it. Asked of torch itself where
    that file cannot be read."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        try:
            return _torch_version_file()
        except Exception:  # noqa: BLE001 - any other layout: torch answers itself
            import torch
    return str(torch.__version__), torch.version.cuda


@cache
def _torch_version_file() -> tuple[str, str | None]:
    """``__version__`` and ``cuda`` of the installed torch's ``version.py``, read once a process (a
    measurement's key, its mode run's and its run's tags each ask)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    folder = Path(list(spec.submodule_search_locations or [])[0])  # type: ignore[union-attr]
    values: dict[str, Any] = {}
    exec(compile((folder / "version.py").read_text(), str(folder / "version.py"), "exec"), values)
    return str(values["__version__"]), values.get("cuda")
