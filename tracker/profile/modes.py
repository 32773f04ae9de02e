"""Device modes: what a measurement ran under, read from the device and never changed.

A mode is the CPU part (torch intra-op threads, the cpufreq governor and its frequency
limits from sysfs), the NVIDIA GPU part (SM and memory clocks, current and application,
power limit, persistence mode and name, from NVML) and, on a Jetson, the ``nvpmodel -q``
power mode. What cannot be read is absent, never zero or "unknown".

What the tracker sets, explicitly and only when asked, is the torch thread count
(:func:`apply_threads`) and how the measuring process's C allocator keeps freed memory
(:func:`apply_allocator`); clocks, governors and power modes are only ever read.

The ``mode_id`` names a mode in short, stable text (``cpu-t2-schedutil``,
``cuda0-sm1980-mem2619-pl700w-t8-performance``, ``jetson-maxn-0-cpu-t4-schedutil``). It is
built only from settings (application clocks, not the current clocks, which follow the
load), so that two reads of the same mode give the same id.

Tests swap the sysfs root (:data:`SYSFS_CPU`) and the command runner (:func:`run_command`).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.console import counted
from tracker.environment import cuda_index, nvml, nvml_handle, nvml_text, read_small_file, torch_threads
from tracker.errors import ConfigError
from tracker.profile.device import is_device_name

if TYPE_CHECKING:
    from tracker.log.record import RunRecord

#: Where the kernel shows the CPUs and their cpufreq policies.
SYSFS_CPU = Path("/sys/devices/system/cpu")
#: The Jetson power-mode query; its absence means "not a Jetson".
NVPMODEL_QUERY = ("nvpmodel", "-q")

ParamValue = str | int | float
_NVP_NAME = re.compile(r"^\s*NV Power Mode\s*:\s*(\S.*?)\s*$", re.IGNORECASE)

#: DeviceMode params -> the mode schema's params (schemas/mode.json). The GPU clocks of the
#: record are the application clocks: the setting, stable from read to read.
_RECORD_PARAMS = {
    "cpu_threads": "cpu_threads",
    "cpu_allocator": "cpu_allocator",
    "cpu_governor": "cpu_governor",
    "gpu_app_sm_clock_mhz": "gpu_sm_clock_mhz",
    "gpu_app_mem_clock_mhz": "gpu_mem_clock_mhz",
    "gpu_power_limit_w": "gpu_power_limit_w",
    "nvpmodel": "nvpmodel",
}


@dataclass(frozen=True)
class DeviceMode:
    """The mode of one device: ``device`` (cpu, cuda, cuda:1), its id and what was read."""

    device: str
    mode_id: str
    params: dict[str, ParamValue] = field(default_factory=dict, hash=False)


def run_command(args: list[str] | tuple[str, ...], timeout_s: float = 10.0) -> str | None:
    """Stdout of a command, or None where it is missing, fails or hangs."""
    try:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_nvpmodel(text: str) -> dict[str, ParamValue]:
    """``{"nvpmodel": name, "nvpmodel_id": id}`` from ``nvpmodel -q`` output; {} if none.

    The output is a ``NV Power Mode: <name>`` line followed by a line holding the mode id,
    possibly after warnings (``NVPM WARN: fan mode is not set!``).
    """
    lines = text.splitlines() if isinstance(text, str) else []
    for i, line in enumerate(lines):
        match = _NVP_NAME.match(line)
        if not match:
            continue
        out: dict[str, ParamValue] = {"nvpmodel": match.group(1)}
        for rest in lines[i + 1 :]:
            if rest.strip():
                if rest.strip().isdigit():
                    out["nvpmodel_id"] = int(rest.strip())
                break
        return out
    return {}


def validate_threads(threads: Any, label: str = "--threads") -> int:
    """``threads`` if this machine has that many CPUs; ``label`` names it in the error (an
    option's name, or a campaign key's ``[measure].threads =``)."""
    limit = os.cpu_count() or 1
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= limit:
        raise ConfigError(f"{label} {threads!r}: expected a whole number from 1 to {limit} (the CPUs of this machine)")
    return threads


def apply_mode(allocator: str | None, threads: int | None) -> None:
    """In a measuring child: the mode's settings tracker makes, its C allocator first, before anything
    allocates, then its thread count (none: torch's own)."""
    apply_allocator(allocator)
    if threads:
        apply_threads(int(threads))


def enter_mode(job: dict[str, Any]) -> DeviceMode:
    """In a measuring child: the mode a job of a network or of the speed probe asks for set up
    (:func:`apply_mode`) and read back."""
    apply_mode(job.get("allocator"), job.get("threads"))
    return read_mode(job.get("device", "cpu"), allocator=job.get("allocator"))


def apply_threads(threads: int) -> None:
    """Set torch's intra-op thread count: the one mode setting the tracker makes, explicitly."""
    import torch

    torch.set_num_threads(validate_threads(threads))


#: How the measuring process's C allocator keeps freed memory. ``system``: as the C library does
#: by default (glibc maps large blocks afresh and gives freed memory back to the kernel, so a
#: network whose activations outgrow its thresholds takes page faults at every iteration: on this
#: project's VM up to 14,000 per iteration, a third to half of some networks' CPU latency).
#: ``retain``: glibc tuned as a deployment would (``mallopt``: no mmap, trim threshold 1 GiB), so
#: freed memory is kept and reused, as jemalloc or tcmalloc would; a mode of its own.
ALLOCATORS = ("system", "retain")
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)
_RETAIN_TRIM_BYTES = 2**30


def validate_allocator(name: Any) -> str:
    if name not in ALLOCATORS:
        raise ConfigError(f"allocator = {name!r}: expected one of {', '.join(ALLOCATORS)}")
    return str(name)


def allocator_available(name: str) -> bool:
    """Whether this C library can run the allocator mode ``name`` (``retain`` needs glibc's
    ``mallopt``); asked without changing anything."""
    if validate_allocator(name) == "system":
        return True
    import ctypes

    return getattr(ctypes.CDLL(None), "mallopt", None) is not None


def apply_allocator(name: str | None) -> None:
    """Set how this process's C allocator keeps freed memory (see :data:`ALLOCATORS`): the measuring
    child does, before it builds the network, when its job asks for ``retain``. ``system`` (or
    None) changes nothing. Where the C library has no ``mallopt`` (not glibc), ``retain`` fails."""
    if name is None or validate_allocator(name) == "system":
        return
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None or not (mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, _RETAIN_TRIM_BYTES)):
        raise ConfigError("allocator = 'retain' needs glibc's mallopt, which this C library does not have")


def _read_khz(path: Path) -> int | None:
    text = read_small_file(path)
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def _cpu_policies() -> list[Path]:
    """The cpufreq folders of the CPUs, in CPU order."""
    try:
        dirs = [p for p in SYSFS_CPU.glob("cpu[0-9]*/cpufreq") if p.name == "cpufreq" and p.parent.name[3:].isdigit()]
    except OSError:
        return []
    return sorted(dirs, key=lambda p: int(p.parent.name[3:]))


def read_cpu_freq() -> dict[str, ParamValue]:
    """Governor and frequency limits (MHz) over all CPUs, where sysfs shows them.

    Several governors (one per cluster) are joined with ``+``; the limits are the lowest
    minimum and the highest maximum of the policies (``scaling_min_freq``/``scaling_max_freq``).
    """
    governors: list[str] = []
    mins: list[int] = []
    maxs: list[int] = []
    for policy in _cpu_policies():
        if (gov := read_small_file(policy / "scaling_governor")) and gov not in governors:
            governors.append(gov)
        if (lo := _read_khz(policy / "scaling_min_freq")) is not None:
            mins.append(lo)
        if (hi := _read_khz(policy / "scaling_max_freq")) is not None:
            maxs.append(hi)
    out: dict[str, ParamValue] = {}
    if governors:
        out["cpu_governor"] = "+".join(sorted(governors))
    if mins:
        out["cpu_freq_min_mhz"] = round(min(mins) / 1000)
    if maxs:
        out["cpu_freq_max_mhz"] = round(max(maxs) / 1000)
    return out


def read_cpu_cur_freq_mhz() -> int | None:
    """The mean current frequency (MHz) of the CPUs, where readable: a reading, not a mode."""
    values = [v for p in _cpu_policies() if (v := _read_khz(p / "scaling_cur_freq")) is not None]
    return round(sum(values) / len(values) / 1000) if values else None


def read_gpu(index: int = 0) -> dict[str, ParamValue]:
    """Clocks, power limit, persistence and name of one NVIDIA GPU from NVML; {} without it."""
    with nvml() as pynvml:
        if pynvml is None:
            return {}
        try:
            handle = nvml_handle(pynvml, index)
        except Exception:  # no such GPU
            return {}
        readings: list[tuple[str, Any]] = [
            ("gpu_name", lambda: nvml_text(pynvml.nvmlDeviceGetName(handle))),
            ("gpu_sm_clock_mhz", lambda: int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))),
            ("gpu_mem_clock_mhz", lambda: int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM))),
            ("gpu_app_sm_clock_mhz", lambda: int(pynvml.nvmlDeviceGetApplicationsClock(handle, pynvml.NVML_CLOCK_SM))),
            ("gpu_app_mem_clock_mhz", lambda: int(pynvml.nvmlDeviceGetApplicationsClock(handle, pynvml.NVML_CLOCK_MEM))),
            ("gpu_power_limit_w", lambda: round(pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000.0, 3)),
            ("gpu_persistence", lambda: "enabled" if pynvml.nvmlDeviceGetPersistenceMode(handle) else "disabled"),
        ]
        out: dict[str, ParamValue] = {}
        for name, read in readings:
            try:
                value = read()
            except Exception:  # not supported on this GPU (or a fake without it): absent
                continue
            if isinstance(value, str) and value:
                out[name] = value
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                out[name] = value
        return out


def read_nvpmodel() -> dict[str, ParamValue]:
    """The Jetson power mode from ``nvpmodel -q``; {} where there is no nvpmodel."""
    text = run_command(list(NVPMODEL_QUERY))
    return parse_nvpmodel(text) if text else {}


def _slug(value: Any) -> str:
    """A piece of a mode id: lower case, only [a-z0-9.], other runs become '-'."""
    return re.sub(r"[^a-z0-9.]+", "-", str(value).lower()).strip("-.") or "x"


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def make_mode_id(device: str, params: dict[str, ParamValue]) -> str:
    """The short, stable id of a mode: built from settings only, never from live readings."""
    parts: list[str] = []
    if "nvpmodel" in params:
        parts += ["jetson", _slug(params["nvpmodel"])]
        if "nvpmodel_id" in params:
            parts.append(str(params["nvpmodel_id"]))
    if (index := cuda_index(device)) is not None:
        parts.append(f"cuda{index}")
        if "gpu_app_sm_clock_mhz" in params:
            parts.append(f"sm{params['gpu_app_sm_clock_mhz']}")
        if "gpu_app_mem_clock_mhz" in params:
            parts.append(f"mem{params['gpu_app_mem_clock_mhz']}")
        if "gpu_power_limit_w" in params:
            parts.append(f"pl{_number(params['gpu_power_limit_w'])}w")
    else:
        parts.append("cpu")
    if "cpu_threads" in params:
        parts.append(f"t{params['cpu_threads']}")
    if "cpu_governor" in params:
        parts.append(_slug(params["cpu_governor"]))
    if "cpu_freq_min_mhz" in params or "cpu_freq_max_mhz" in params:
        low = params.get("cpu_freq_min_mhz", "")
        high = params.get("cpu_freq_max_mhz", "")
        parts.append(f"{low}-{high}mhz".strip("-"))
    if "cpu_allocator" in params:  # absent for the system allocator: ids of earlier stores stay
        parts.append(_slug(params["cpu_allocator"]))
    return "-".join(parts)


def read_mode(device: str = "cpu", threads: int | None = None, allocator: str | None = None) -> DeviceMode:
    """The current mode of ``device`` (cpu, cuda, cuda:N), read without changing anything.

    ``threads`` names the thread count a measurement will run with (it is validated, not
    applied); without it the thread count is torch's current one. ``allocator`` likewise
    names the C allocator setting the measurement runs with (None: ``system``, which is not
    written in the id). A GPU mode carries the CPU part too, since the host's threads feed the
    GPU.
    """
    spec = device.strip().lower() if isinstance(device, str) else ""
    if not is_device_name(spec):
        raise ConfigError(f"device = {device!r}: expected cpu, cuda or cuda:N")
    params: dict[str, ParamValue] = {}
    if (index := cuda_index(spec)) is not None:
        params.update(read_gpu(index))
    if threads is None:
        params["cpu_threads"] = torch_threads()
    else:
        params["cpu_threads"] = validate_threads(threads)
    params.update(read_cpu_freq())
    params.update(read_nvpmodel())
    if validate_allocator(allocator or "system") != "system":
        params["cpu_allocator"] = allocator
    return DeviceMode(device=spec, mode_id=make_mode_id(spec, params), params=params)


def describe_mode(mode: DeviceMode) -> str:
    """One paragraph saying what the mode is, for the mode run's description."""
    p = mode.params
    bits = [f"device {mode.device}"]
    if "nvpmodel" in p:
        bits.append(f"nvpmodel {p['nvpmodel']}" + (f" (id {p['nvpmodel_id']})" if "nvpmodel_id" in p else ""))
    if "gpu_name" in p:
        bits.append(f"GPU {p['gpu_name']}")
    for label, app, cur in (("SM clock", "gpu_app_sm_clock_mhz", "gpu_sm_clock_mhz"),
                            ("memory clock", "gpu_app_mem_clock_mhz", "gpu_mem_clock_mhz")):
        if app in p:
            bits.append(f"{label} {p[app]} MHz (application)" + (f", {p[cur]} MHz when read" if cur in p else ""))
        elif cur in p:
            bits.append(f"{label} {p[cur]} MHz when read")
    if "gpu_power_limit_w" in p:
        bits.append(f"power limit {_number(p['gpu_power_limit_w'])} W")
    if "gpu_persistence" in p:
        bits.append(f"persistence mode {p['gpu_persistence']}")
    if "cpu_threads" in p:
        bits.append(counted(p["cpu_threads"], "torch thread"))
    if "cpu_governor" in p:
        bits.append(f"cpufreq governor {p['cpu_governor']}")
    if "cpu_freq_min_mhz" in p or "cpu_freq_max_mhz" in p:
        bits.append(f"CPU frequency {p.get('cpu_freq_min_mhz', '?')}-{p.get('cpu_freq_max_mhz', '?')} MHz")
    if "cpu_allocator" in p:
        bits.append(f"C allocator {p['cpu_allocator']} (freed memory kept for reuse: glibc mallopt, no mmap, "
                    "trim threshold 1 GiB)")
    set_here = "threads and allocator" if "cpu_allocator" in p else "threads"
    return f"Device mode {mode.mode_id}: " + "; ".join(bits) + f". Read, not set, by the tracker ({set_here} excepted)."


def mode_record(mode: DeviceMode) -> RunRecord:
    """The ``mode`` run that records once what a mode id stands for."""
    from tracker.log.record import RunRecord

    params: dict[str, Any] = {"mode": mode.mode_id, "device": mode.device}
    for ours, theirs in _RECORD_PARAMS.items():
        if ours in mode.params:
            params[theirs] = mode.params[ours]
    return RunRecord(
        kind="mode",
        name=f"mode {mode.mode_id}",
        params=params,
        key_fields={"mode": mode.mode_id, "device": mode.device, "params": params},
        description=describe_mode(mode),
    )
