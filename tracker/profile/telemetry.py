"""Telemetry during a measurement window: utilisation, memory, power and energy.

A :class:`TelemetrySampler` is a context manager whose background thread samples, every
``interval_s``, whatever this machine can measure:

- psutil (always): system CPU utilisation, system used memory, this process's RSS
  (with its child processes);
- NVML (NVIDIA GPUs): utilisation, memory used, power and the total-energy counter;
- RAPL (``/sys/class/powercap/intel-rapl:*``, where readable): CPU package energy;
- tegrastats (Jetson): every line it prints, parsed, with the board's input power.

What a machine cannot measure is absent from the samples and from :meth:`summary`,
never zero and never guessed (DESIGN.md, "Measurement rules"). Import is cheap: psutil
and pynvml are imported only when a sampler starts; torch is never imported here.
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from tracker.environment import nvml_handle

#: Where the Linux powercap (RAPL) counters live; a module constant so tests can point it elsewhere.
POWERCAP_ROOT = Path("/sys/class/powercap")

#: How often the list of child processes (for RSS) is refreshed: listing them scans /proc.
CHILDREN_REFRESH_S = 1.0
#: Changes an energy counter must show within a window before its rate is used (two tick
#: intervals); with fewer, energy is integrated from power readings, or is absent.
MIN_COUNTER_TICKS = 3

#: Sample sources.
SYSTEM = "system"
TEGRASTATS = "tegrastats"

#: The longest tegrastats line read, in characters (a real one is under 1,000): a longer one is passed
#: over, read in pieces of this size, so that output without a newline is not held without limit
#: (it was, until 0.9.8).
MAX_TEGRA_LINE_CHARS = 64 * 1024

#: tegrastats' reading for a sensor that is not there.
_TEGRA_ABSENT_TEMP = -256.0

_MB = 1024 * 1024


@dataclass
class Sample:
    """One reading time: ``t_ns`` from ``time.perf_counter_ns()``, readings keyed with units.

    ``source`` is ``"system"`` for the sampler's periodic samples (psutil, NVML, RAPL) and
    ``"tegrastats"`` for one parsed tegrastats line.
    """

    t_ns: int
    readings: dict[str, float]
    source: str = SYSTEM


# --------------------------------------------------------------------------------------------
# tegrastats
# --------------------------------------------------------------------------------------------

_MEM_RE = re.compile(r"^(\d+)/(\d+)([kKMG])B$")
_CPU_CORE_RE = re.compile(r"^(\d+(?:\.\d+)?)%(?:@(\d+(?:\.\d+)?))?$")
_LOAD_RE = re.compile(r"^(\d+(?:\.\d+)?)%(?:@\[?([\d.,]+)\]?)?$")
_TEMP_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_\-]*)@(-?\d+(?:\.\d+)?)C$")
_RAIL_RE = re.compile(r"^(\d+(?:\.\d+)?)(mW)?(?:/(\d+(?:\.\d+)?)(mW)?)?$")
_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_INT_RE = re.compile(r"^\d+$")
_MEM_SCALE = {"k": 1 / 1024, "K": 1 / 1024, "M": 1.0, "G": 1024.0}
#: Load fields named ``<X>_FREQ`` and the key prefix they get.
_LOAD_PREFIX = {"GR3D": "gpu", "EMC": "emc"}
#: Board input rails, best first: VDD_IN (TX2, Orin, Orin Nano), POM_5V_IN (TX1, Nano). AGX Orin and
#: AGX Xavier print no input rail (their rails are the GPU's, CPU's, SoC's, ...): no board power there,
#: not a sum of rails that may miss part of the board.
BOARD_RAILS = ("VDD_IN", "POM_5V_IN")
#: Rail names (``VDD_IN``, ``POM_5V_GPU``, ``VIN_SYS_5V0``): never an engine clock, whatever follows them.
_RAIL_NAME_RE = re.compile(r"^(VDD|POM|VIN)_")
#: The most a rail may read, in mW (1 kW: a Jetson draws tens of W); past it the reading is no reading.
MAX_RAIL_MW = 1_000_000.0
#: Tokens a parenthesised group (``(lfb 236x4MB)``, ``(cached 0MB)``) may span: an unclosed ``(`` skips
#: itself alone, not the rest of the line (its GPU load and rails were lost until 0.9.8).
_GROUP_MAX_TOKENS = 4


def _mem_mb(text: str) -> tuple[float, float] | None:
    m = _MEM_RE.match(text)
    if not m:
        return None
    scale = _MEM_SCALE[m.group(3)]
    return float(m.group(1)) * scale, float(m.group(2)) * scale


def parse_tegrastats(line: str) -> dict[str, float]:
    """Flat readings from one tegrastats line (TX1/TX2/Nano, Xavier and Orin formats).

    Keys: ``ram_used_mb``, ``ram_total_mb``, ``swap_used_mb``, ``swap_total_mb``,
    ``cpu{i}_util_pct`` / ``cpu{i}_freq_mhz`` per online core (``off`` cores omitted, the
    others keep their position as index), ``cpu_util_pct`` (mean of online cores),
    ``gpu_util_pct`` / ``gpu_freq_mhz`` (``GR3D_FREQ``), ``emc_util_pct`` / ``emc_freq_mhz``,
    other ``<X>_FREQ`` loads as ``<x>_util_pct``, engine clocks such as ``APE 150`` as
    ``ape_freq_mhz``, ``temp_<name>_c`` (sensors reading -256C, i.e. absent, omitted),
    and power rails ``power_<rail>_mw`` (instant) and ``power_<rail>_avg_mw`` (average) from
    ``VDD_IN 3456mW/3456mW``, ``POM_5V_IN 1234/1234`` or ``VDD_GPU_SOC 2171mW``.
    Unknown tokens are ignored; a line that is not tegrastats output gives ``{}``.
    """
    out: dict[str, float] = {}
    try:
        _parse_tokens(line.split(), out)
    except Exception:  # never crash on a line; keep what was read before the odd token
        pass
    if not ({"ram_used_mb", "gpu_util_pct", "cpu_util_pct"} & out.keys()):
        return {}
    return out


def _parse_tokens(tokens: list[str], out: dict[str, float]) -> None:
    # A field named twice in a line (RAM, CPU, GR3D_FREQ, a rail, a sensor) keeps its first reading: the
    # second is passed over, not taken in its place (the last won, without a word, until 0.9.8). A reading
    # out of its range (a load over 100 %, a rail over MAX_RAIL_MW) is dropped: absent, not stored.
    seen: set[str] = set()

    def first(name: str) -> bool:
        if name in seen:
            return False
        seen.add(name)
        return True

    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < n else ""
        if tok.startswith("("):  # "(lfb 236x4MB)", "(cached 0MB)": skip the group, if it closes soon
            end = next((k for k in range(i, min(n, i + _GROUP_MAX_TOKENS)) if tokens[k].endswith(")")), None)
            i = i + 1 if end is None else end + 1
            continue
        if tok in ("RAM", "SWAP") and (mem := _mem_mb(nxt)):
            key = tok.lower()
            if first(tok):
                out[f"{key}_used_mb"], out[f"{key}_total_mb"] = mem
            i += 2
            continue
        if tok == "CPU" and nxt.startswith("[") and nxt.endswith("]"):
            if first(tok):
                _parse_cores(nxt[1:-1], out)
            i += 2
            continue
        if tok.endswith("_FREQ") and (m := _LOAD_RE.match(nxt)):
            name = tok[: -len("_FREQ")]
            prefix = _LOAD_PREFIX.get(name, name.lower())
            if first(tok) and float(m.group(1)) <= 100:
                out[f"{prefix}_util_pct"] = float(m.group(1))
                if m.group(2):
                    freqs = [float(f) for f in m.group(2).split(",") if f]
                    if freqs:
                        out[f"{prefix}_freq_mhz"] = sum(freqs) / len(freqs)
            i += 2
            continue
        if m := _TEMP_RE.match(tok):
            value = float(m.group(2))
            if first(f"temp_{m.group(1).lower()}") and value > _TEGRA_ABSENT_TEMP:
                out[f"temp_{m.group(1).lower()}_c"] = value
            i += 1
            continue
        if _NAME_RE.match(tok):
            if (m := _RAIL_RE.match(nxt)) and (m.group(2) or m.group(3) is not None):
                rail = tok.lower()
                now, avg = float(m.group(1)), None if m.group(3) is None else float(m.group(3))
                if first(tok) and now <= MAX_RAIL_MW and (avg is None or avg <= MAX_RAIL_MW):
                    out[f"power_{rail}_mw"] = now
                    if avg is not None:
                        out[f"power_{rail}_avg_mw"] = avg
                i += 2
                continue
            if _RAIL_NAME_RE.match(tok):  # "VDD_IN 5297": a rail without its unit or average, no clock
                i += 2 if _INT_RE.match(nxt) else 1
                continue
            if _INT_RE.match(nxt):  # an engine clock: "APE 150", "NVDEC 1203", "VIC_FREQ 729"
                name = tok[: -len("_FREQ")] if tok.endswith("_FREQ") else tok
                if first(tok):
                    out[f"{name.lower()}_freq_mhz"] = float(nxt)
                i += 2
                continue
        i += 1


def _parse_cores(text: str, out: dict[str, float]) -> None:
    loads: list[float] = []
    for index, item in enumerate(text.split(",")):
        m = _CPU_CORE_RE.match(item.strip())
        if not m:  # "off" or unknown: the core is not reported
            continue
        load = float(m.group(1))
        if load > 100:  # no core is busier than busy: the reading is dropped, the core not reported
            continue
        loads.append(load)
        out[f"cpu{index}_util_pct"] = load
        if m.group(2):
            out[f"cpu{index}_freq_mhz"] = float(m.group(2))
    if loads:
        out["cpu_util_pct"] = sum(loads) / len(loads)


def rail_for_board(parsed: dict[str, float]) -> float | None:
    """The board's total input power in W from a parsed tegrastats line, or None.

    ``VDD_IN`` (Xavier, Orin, TX2) or ``POM_5V_IN`` (TX1, Nano), instantaneous reading.
    """
    for rail in BOARD_RAILS:
        value = parsed.get(f"power_{rail.lower()}_mw")
        if value is not None:
            return value / 1000.0
    return None


def board_rail_reason(samples: Sequence[Sample]) -> str | None:
    """Why tegrastats' samples give no board power: its lines name no input rail (``BOARD_RAILS``),
    and the rails they name; None where one gave board power, or there is no tegrastats sample."""
    tegra = [s for s in samples if s.source == TEGRASTATS]
    if not tegra or any("board_power_w" in s.readings for s in tegra):
        return None
    rails = sorted({k[len("power_"):-len("_mw")].upper() for s in tegra for k in s.readings
                    if k.startswith("power_") and k.endswith("_mw") and not k.endswith("_avg_mw")})
    return (f"no {'/'.join(BOARD_RAILS)} rail in tegrastats' lines ("
            + (f"it gave: {', '.join(rails)}" if rails else "it gave no power rail")
            + "): this board's input power is not printed (AGX Orin, AGX Xavier)")


# --------------------------------------------------------------------------------------------
# Aggregation (pure, so it can be fed synthetic samples)
# --------------------------------------------------------------------------------------------


def trapezoid_energy_j(t_ns: Sequence[int], power_w: Sequence[float], lo_ns: int | None = None,
                       hi_ns: int | None = None) -> float:
    """Energy in J of a power series (W at times in ns), by the trapezoidal rule; over the window
    [lo_ns, hi_ns] where given, the first and last readings held out to its ends."""
    if len(t_ns) != len(power_w):
        raise ValueError("times and powers differ in length")
    energy = 0.0
    if t_ns and lo_ns is not None and hi_ns is not None:
        energy = (power_w[0] * max(t_ns[0] - lo_ns, 0) + power_w[-1] * max(hi_ns - t_ns[-1], 0)) / 1e9
    for k in range(1, len(t_ns)):
        energy += (power_w[k] + power_w[k - 1]) / 2.0 * (t_ns[k] - t_ns[k - 1]) / 1e9
    return energy


def unwrap_delta(previous: int, current: int, max_range: int | None) -> int:
    """Increase of a counter that wraps to zero after ``max_range`` (RAPL ``energy_uj``)."""
    delta = current - previous
    if delta < 0 and max_range:
        delta += max_range
    return max(delta, 0)


def _series(samples: Sequence[Sample], key: str) -> tuple[list[int], list[float]]:
    ts, vs = [], []
    for s in samples:
        v = s.readings.get(key)
        if v is not None:
            ts.append(s.t_ns)
            vs.append(v)
    return ts, vs


def _counter(samples: Sequence[Sample], key: str, span_s: float) -> tuple[float, float] | None:
    """(energy over ``span_s`` seconds in J, mean power in W) from a cumulative energy counter, or
    None where the counter cannot tell.

    A counter is read at each sample but ticks on its own clock: NVML's total-energy counter on an
    H100 ticks more slowly than every 60 ms (three samples at 20 ms saw no change), and a difference
    of two readings is then off by up to a tick at each end (0 J over a busy 60 ms window; 28 J
    "per step" in another). So the rate is taken between the first and the last change the samples
    saw, both seen within one sample interval of the tick, and it needs ``MIN_COUNTER_TICKS``
    changes; with fewer, the caller integrates power instead.
    """
    ts, vs = _series(samples, key)
    changes = [k for k in range(1, len(vs)) if vs[k] != vs[k - 1]]
    if len(changes) < MIN_COUNTER_TICKS:
        return None
    first, last = changes[0], changes[-1]
    if ts[last] <= ts[first]:
        return None
    rate_w = (vs[last] - vs[first]) / ((ts[last] - ts[first]) / 1e9)
    return rate_w * span_s, rate_w


def _in_window(samples: Sequence[Sample], start_ns: int | None, end_ns: int | None,
               settle_s: float) -> tuple[int, int, list[Sample]]:
    """The window [start_ns + settle_s, end_ns] (its ends default to the first and last sample's
    times) and its samples in time order."""
    lo = (start_ns if start_ns is not None else min((s.t_ns for s in samples), default=0)) + int(settle_s * 1e9)
    hi = end_ns if end_ns is not None else max((s.t_ns for s in samples), default=0)
    return lo, hi, sorted((s for s in samples if lo <= s.t_ns <= hi), key=lambda s: s.t_ns)


def summarize(
    samples: Sequence[Sample],
    start_ns: int | None = None,
    end_ns: int | None = None,
    settle_s: float = 0.0,
    gpu: bool = True,
) -> dict[str, float]:
    """Aggregate samples in [start_ns + settle_s, end_ns]; see :meth:`TelemetrySampler.summary`.
    ``gpu`` False (a measurement on the CPU alone): no GPU reading, not tegrastats' GR3D load either."""
    lo, hi, window = _in_window(samples, start_ns, end_ns, settle_s)
    span_s = max(hi - lo, 0) / 1e9  # energies cover the whole window, not only from its first sample to its last
    system = [s for s in window if s.source == SYSTEM]
    tegra = [s for s in window if s.source == TEGRASTATS]
    out: dict[str, float] = {}

    def mean(source: list[Sample], key: str, name: str) -> None:
        _, vs = _series(source, key)
        if vs:
            out[name] = statistics.fmean(vs)

    def peak(source: list[Sample], key: str, name: str) -> None:
        _, vs = _series(source, key)
        if vs:
            out[name] = max(vs)

    mean(system, "cpu_util_pct", "cpu_util_pct")
    # the CPU other processes took over the window: the machine's use less the measuring process's,
    # where every sample read both (a process with children does not say its own)
    both = [s.readings for s in system if "cpu_util_pct" in s.readings]
    if both and all("proc_cpu_util_pct" in r for r in both):
        own = statistics.fmean(r["proc_cpu_util_pct"] for r in both)
        out["cpu_util_others_pct"] = max(0.0, statistics.fmean(r["cpu_util_pct"] for r in both) - own)
    peak(system, "sys_mem_used_mb", "sys_mem_used_peak_mb")
    peak(system, "proc_rss_mb", "proc_rss_peak_mb")
    peak(system, "children_uss_mb", "children_mem_peak_mb")  # a job's loader workers' own memory

    # GPU (NVML); on Jetson the GPU load comes from tegrastats' GR3D_FREQ instead.
    mean(system, "gpu_util_pct", "gpu_util_pct")
    if "gpu_util_pct" not in out and gpu:  # a CPU measurement's is the idle GPU's: absent (0 until 0.9.8)
        mean(tegra, "gpu_util_pct", "gpu_util_pct")
    peak(system, "gpu_mem_used_mb", "gpu_mem_used_peak_mb")
    mean(system, "gpu_sm_clock_mhz", "gpu_sm_clock_mhz")
    _, clocks = _series(system, "gpu_sm_clock_mhz")
    if clocks:
        out["gpu_sm_clock_min_mhz"] = min(clocks)
    mean(system, "gpu_power_w", "gpu_power_w")
    if (counted := _counter(system, "gpu_energy_counter_j", span_s)) is not None:
        out["gpu_energy_j"] = counted[0]
        if "gpu_power_w" not in out:
            out["gpu_power_w"] = counted[1]
    else:
        ts, vs = _series(system, "gpu_power_w")
        if len(ts) >= 2:
            out["gpu_energy_j"] = trapezoid_energy_j(ts, vs, lo, hi)

    # CPU packages (RAPL counters, unwrapped).
    if (counted := _counter(system, "cpu_energy_counter_j", span_s)) is not None:
        out["cpu_energy_j"], out["cpu_power_w"] = counted

    # Jetson board input rail (tegrastats).
    ts, vs = _series(tegra, "board_power_w")
    if vs:
        out["board_power_w"] = statistics.fmean(vs)
        if len(ts) >= 2:
            out["board_energy_j"] = trapezoid_energy_j(ts, vs, lo, hi)

    # The best total: the board, else GPU + CPU, else whichever there is.
    if "board_power_w" in out:
        parts = ["board"]
    elif "gpu_power_w" in out and "cpu_power_w" in out:
        parts = ["gpu", "cpu"]
    else:
        parts = [p for p in ("gpu", "cpu") if f"{p}_power_w" in out]
    if parts:
        out["power_w"] = sum(out[f"{p}_power_w"] for p in parts)
        if all(f"{p}_energy_j" in out for p in parts):
            out["energy_j"] = sum(out[f"{p}_energy_j"] for p in parts)

    out["telemetry_samples_count"] = float(len(system))
    if len(system) >= 2:
        gaps = [(b.t_ns - a.t_ns) / 1e6 for a, b in zip(system, system[1:])]
        out["telemetry_interval_ms"] = statistics.median(gaps)
    return out


#: Points at most of each series a run keeps as its system metrics (MLflow's System metrics tab):
#: a window's samples are averaged in as many consecutive stretches of time.
SERIES_POINTS = 200
#: The readings of the sampler's periodic samples kept as series, by their names as series.
SERIES_READINGS = ("cpu_util_pct", "sys_mem_used_mb", "proc_rss_mb", "gpu_util_pct", "gpu_mem_used_mb", "gpu_power_w",
                   "gpu_sm_clock_mhz")


def series(
    samples: Sequence[Sample],
    start_ns: int | None = None,
    end_ns: int | None = None,
    settle_s: float = 0.0,
    points: int = SERIES_POINTS,
    gpu: bool = True,
) -> dict[str, list[tuple[int, float]]]:
    """The readings over the window as time series, ``{name: [(ms since the window's start,
    value), ...]}``, each at most ``points`` long (consecutive samples averaged over equal
    stretches of the window): the machine's and the process's CPU and memory, the CPU others took
    (where the process read its own), CPU package power between RAPL readings, the GPU's (NVML)
    and the board's (tegrastats; its GPU load only where ``gpu``, as :func:`summarize`'s). A series
    only of what was read; none for a window without samples."""
    lo, hi, window = _in_window(samples, start_ns, end_ns, settle_s)
    raw: dict[str, list[tuple[int, float]]] = {}

    def add(name: str, t_ns: int, value: float) -> None:
        raw.setdefault(name, []).append((t_ns, value))

    previous: Sample | None = None
    for s in window:
        r = s.readings
        if s.source == TEGRASTATS:
            for name in ("board_power_w", "gpu_util_pct"):
                if name in r:
                    add(f"board_{name}" if name == "gpu_util_pct" else name, s.t_ns, r[name])
            continue
        for name in SERIES_READINGS:
            if name in r:
                add(name, s.t_ns, r[name])
        if "cpu_util_pct" in r and "proc_cpu_util_pct" in r:
            add("cpu_util_others_pct", s.t_ns, r["cpu_util_pct"] - r["proc_cpu_util_pct"])  # clamped as a mean, below
        if previous is not None and "cpu_energy_counter_j" in r and "cpu_energy_counter_j" in previous.readings:
            span_s = (s.t_ns - previous.t_ns) / 1e9
            if span_s > 0:
                add("cpu_power_w", s.t_ns, (r["cpu_energy_counter_j"] - previous.readings["cpu_energy_counter_j"]) / span_s)
        previous = s
    if "gpu_util_pct" not in raw and "board_gpu_util_pct" in raw and gpu:  # a Jetson's GPU load, as summarize takes it
        raw["gpu_util_pct"] = raw["board_gpu_util_pct"]
    raw.pop("board_gpu_util_pct", None)
    width_ns = max(hi - lo, 1) / max(points, 1)
    out: dict[str, list[tuple[int, float]]] = {}
    for name, values in raw.items():
        bins: dict[int, list[tuple[int, float]]] = {}
        for t_ns, value in values:
            bins.setdefault(min(int((t_ns - lo) / width_ns), points - 1), []).append((t_ns, value))
        out[name] = [(round((statistics.fmean(t for t, _ in b) - lo) / 1e6), statistics.fmean(v for _, v in b))
                     for _, b in sorted(bins.items())]
    if "cpu_util_others_pct" in out:  # a stretch's mean difference, clamped at 0 as the run's figure is
        out["cpu_util_others_pct"] = [(t, max(0.0, v)) for t, v in out["cpu_util_others_pct"]]
    return out


# --------------------------------------------------------------------------------------------
# Sources: each is opened once and read with a cheap callable per sample
# --------------------------------------------------------------------------------------------

Reader = Callable[[], dict[str, float]]


@dataclass
class _RaplDomain:
    energy_file: Path
    max_range_uj: int | None
    last_uj: int
    total_uj: int = 0


def rapl_packages(root: Path | None = None) -> list[Path]:
    """The RAPL package domains under ``root``, readable or not (maybe none)."""
    root = POWERCAP_ROOT if root is None else root
    found = []
    for domain in sorted(root.glob("intel-rapl:*")):
        if domain.name.count(":") != 1:  # "intel-rapl:0:1" is a subdomain (core, uncore, dram)
            continue
        try:
            name = (domain / "name").read_text().strip()
        except OSError:
            name = ""
        if name and not name.startswith("package"):  # "psys" would count the package twice
            continue
        found.append(domain)
    return found


def rapl_package_domains(root: Path | None = None) -> list[Path]:
    """The RAPL package domains whose ``energy_uj`` this process can read (maybe none)."""
    found = []
    for domain in rapl_packages(root):
        try:
            int((domain / "energy_uj").read_text())
        except (OSError, ValueError):
            continue
        found.append(domain)
    return found


def _open_rapl() -> Reader | None:
    domains: list[_RaplDomain] = []
    for path in rapl_package_domains():
        try:
            last = int((path / "energy_uj").read_text())
        except (OSError, ValueError):
            continue
        try:
            max_range: int | None = int((path / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            max_range = None
        domains.append(_RaplDomain(path / "energy_uj", max_range, last))
    if not domains:
        return None

    def read() -> dict[str, float]:
        for d in domains:
            with open(d.energy_file, "rb") as f:
                current = int(f.read())
            d.total_uj += unwrap_delta(d.last_uj, current, d.max_range_uj)
            d.last_uj = current
        return {"cpu_energy_counter_j": sum(d.total_uj for d in domains) / 1e6}

    return read


class _Nvml:
    """One GPU through NVML: the readings it supports, probed once at open."""

    def __init__(self, gpu_index: int) -> None:
        import pynvml  # noqa: PLC0415 (lazy: no NVML cost unless sampling)

        pynvml.nvmlInit()
        self._pynvml = pynvml
        try:
            h = nvml_handle(pynvml, gpu_index)
            probes: dict[str, Callable[[], float]] = {
                "gpu_util_pct": lambda: float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
                "gpu_mem_used_mb": lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used / _MB,
                "gpu_power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "gpu_energy_counter_j": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0,
                # the clock the SMs ran at (a lightly loaded GPU may not hold the clock its mode names)
                "gpu_sm_clock_mhz": lambda: float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            }
            self.readers: dict[str, Callable[[], float]] = {}
            for key, fn in probes.items():
                try:
                    fn()
                except Exception:  # not supported on this GPU (MIG, old GPU, no sensor)
                    continue
                self.readers[key] = fn
        except Exception:
            self.close()
            raise

    def read(self) -> dict[str, float]:
        out = {}
        for key, fn in self.readers.items():
            try:
                out[key] = fn()
            except Exception:  # a transient failure: this reading is absent in this sample
                pass
        return out

    def close(self) -> None:
        try:
            self._pynvml.nvmlShutdown()
        except Exception:
            pass


class _ProcessMemory:
    """RSS of this process plus its children's private memory (USS: the child list and their USS
    refreshed each ``CHILDREN_REFRESH_S``, reading it costs a few ms a child; our own instruments,
    tegrastats, left out), and this process's share of the machine's CPU where it has no such
    children (whose CPU it would miss). A forked child (a training job's loader worker) shares the
    pages of this process it has not written: counted by its RSS, they were counted twice (until
    0.9.2: a job of two workers read 1,064-1,112 MB against its main process's peak of 712). That
    share includes our instruments' own CPU: measuring costs it, and ``cpu_util_others_pct`` is
    the CPU of work beside the measurement."""

    def __init__(self, exclude: Callable[[], set[int]]) -> None:
        import psutil  # noqa: PLC0415

        self._psutil = psutil
        self._proc = psutil.Process()
        self._proc.cpu_percent(interval=None)  # prime: the next call measures from here
        self._cores = psutil.cpu_count() or 1
        self._exclude = exclude
        self._children: list[Any] = []
        self._children_uss = 0  # bytes, read at the last refresh
        self._instruments: dict[int, Any] = {}  # pid -> psutil.Process, kept so cpu_percent has its last call
        self._children_at = -float("inf")

    def read(self) -> dict[str, float]:
        psutil = self._psutil
        now = time.perf_counter()
        if now - self._children_at >= CHILDREN_REFRESH_S:
            self._children_at = now
            try:
                children = self._proc.children(recursive=True)
                skip = self._exclude()  # our own instruments (tegrastats) and what they started
                for child in children:
                    if child.pid in skip:
                        skip |= {c.pid for c in child.children(recursive=True)}
                self._children = [c for c in children if c.pid not in skip]
                instruments = {c.pid: self._instruments.get(c.pid, c) for c in children if c.pid in skip}
                for pid, inst in instruments.items():
                    if pid not in self._instruments:
                        inst.cpu_percent(interval=None)  # prime: its share counts from here
                self._instruments = instruments
            except psutil.Error:
                self._children = []
            self._children_uss = 0
            for child in self._children:
                try:
                    self._children_uss += child.memory_full_info().uss
                except psutil.Error:  # it ended since the list was made, or its smaps cannot be read
                    pass
        out = {"proc_rss_mb": (self._proc.memory_info().rss + self._children_uss) / _MB}
        if self._children:
            out["children_uss_mb"] = self._children_uss / _MB
        share = self._proc.cpu_percent(interval=None) / self._cores  # % of one CPU, as a share of all
        for inst in self._instruments.values():
            try:
                share += inst.cpu_percent(interval=None) / self._cores
            except psutil.Error:  # it ended since the list was made
                pass
        if not self._children:  # a loader worker's CPU is the measurement's, and not counted here
            out["proc_cpu_util_pct"] = share
        return out


# --------------------------------------------------------------------------------------------
# The sampler
# --------------------------------------------------------------------------------------------


@dataclass
class _Running:
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    tegra: subprocess.Popen[str] | None = None
    tegra_stderr: Any = None  # a temporary file: a pipe left unread could fill and stall tegrastats
    nvml: _Nvml | None = None


class TelemetrySampler:
    """Samples telemetry in a background thread while the ``with`` block runs.

    >>> with TelemetrySampler(interval_s=0.02, settle_s=0.1) as tel:  # doctest: +SKIP
    ...     run_the_workload()
    >>> tel.summary()  # doctest: +SKIP
    {'cpu_util_pct': 63.1, 'proc_rss_peak_mb': 412.0, ..., 'telemetry_samples_count': 48.0}

    ``gpu_index`` is the CUDA device index of this process that the measured work runs on,
    sampled through NVML where there is an NVIDIA driver (on a Jetson, tegrastats' GR3D load).
    None (work on the CPU alone) reads no GPU, so that an idle GPU's power or load never counts
    in a CPU measurement (a Jetson's board power stays: it is the board's). ``samples`` holds every raw :class:`Sample` for logging histories.
    """

    def __init__(self, interval_s: float = 0.02, gpu_index: int | None = None, settle_s: float = 0.0) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        if settle_s < 0:
            raise ValueError("settle_s must not be negative")
        self.interval_s = interval_s
        self.gpu_index = gpu_index
        self.settle_s = settle_s
        self.samples: list[Sample] = []
        self.start_ns: int | None = None
        self.end_ns: int | None = None
        self.sources: list[str] = []  #: names of the sources that could be opened
        #: why a source found here gave nothing (``{"tegrastats": "tegrastats exited with status 1: ..."}``)
        self.source_errors: dict[str, str] = {}
        self._lock = threading.Lock()
        self._running: _Running | None = None
        self._readers: list[Reader] = []

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> TelemetrySampler:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self._running is not None:
            raise RuntimeError("telemetry sampler already running")
        import psutil  # noqa: PLC0415

        running = _Running()
        self.samples = []
        self.sources = []
        self.source_errors = {}
        self.end_ns = None
        readers: list[Reader] = []

        def cpu_and_memory() -> dict[str, float]:
            return {
                "cpu_util_pct": psutil.cpu_percent(interval=None),
                "sys_mem_used_mb": psutil.virtual_memory().used / _MB,
            }

        psutil.cpu_percent(interval=None)  # prime: the next call measures from here
        readers.append(cpu_and_memory)

        def instruments() -> set[int]:
            return {running.tegra.pid} if running.tegra is not None else set()

        readers.append(_ProcessMemory(instruments).read)
        self.sources.append("psutil")
        try:
            running.nvml = _Nvml(self.gpu_index) if self.gpu_index is not None else None
        except Exception:  # no library, no driver, no such device
            running.nvml = None
        if running.nvml is not None and running.nvml.readers:
            readers.append(running.nvml.read)
            self.sources.append("nvml")
        if (rapl := _open_rapl()) is not None:
            readers.append(rapl)
            self.sources.append("rapl")
        self._readers = readers

        if exe := shutil.which("tegrastats"):
            import tempfile  # noqa: PLC0415

            interval_ms = max(1, round(self.interval_s * 1000))
            running.tegra_stderr = tempfile.TemporaryFile()
            try:
                running.tegra = subprocess.Popen(
                    [exe, "--interval", str(interval_ms)],
                    stdout=subprocess.PIPE,
                    stderr=running.tegra_stderr,
                    stdin=subprocess.DEVNULL,
                    text=True,
                    errors="replace",  # a byte that is not UTF-8 costs its line, not the reader (until 0.9.4)
                    bufsize=1,
                )
            except OSError as exc:  # found, and could not be started: said, not "no tegrastats" (until 0.9.8)
                running.tegra = None
                running.tegra_stderr.close()
                running.tegra_stderr = None
                self.source_errors["tegrastats"] = f"{exe} could not be started ({exc.strerror or exc})"
            if running.tegra is not None:
                self.sources.append("tegrastats")
                reader = threading.Thread(
                    target=self._read_tegrastats, args=(running.tegra,), name="telemetry-tegrastats", daemon=True
                )
                running.threads.append(reader)

        self.start_ns = time.perf_counter_ns()
        running.threads.append(threading.Thread(target=self._loop, args=(running.stop,), name="telemetry", daemon=True))
        self._running = running
        for thread in running.threads:
            thread.start()

    def stop(self) -> None:
        running, self._running = self._running, None
        if running is None:
            return
        self.end_ns = time.perf_counter_ns()
        running.stop.set()
        ended = running.tegra.poll() if running.tegra is not None else None  # on its own, before it was stopped
        if running.tegra is not None and ended is None:
            running.tegra.terminate()
            try:
                running.tegra.wait(timeout=2)
            except subprocess.TimeoutExpired:
                running.tegra.kill()
                running.tegra.wait()
        for thread in running.threads:
            thread.join(timeout=5)
        with self._lock:  # a sample taken while stopping lies past the window: drop it
            self.samples[:] = [x for x in self.samples if x.t_ns <= self.end_ns]
        if running.tegra is not None and running.tegra.stdout is not None:
            running.tegra.stdout.close()
        if running.tegra_stderr is not None:
            if ended is not None and not any(x.source == TEGRASTATS for x in self.samples):
                # it gave nothing and ended: no source, and why (a source that "gave no board_power_w"
                # until 0.9.8, "Permission denied" unsaid)
                self.sources = [x for x in self.sources if x != TEGRASTATS]
                running.tegra_stderr.seek(0, 2)
                running.tegra_stderr.seek(max(0, running.tegra_stderr.tell() - 4096))
                last = next((line.strip() for line in reversed(
                    running.tegra_stderr.read().decode("utf-8", "replace").splitlines()) if line.strip()), "")
                self.source_errors[TEGRASTATS] = (f"tegrastats exited with status {ended}"
                                                  + (f": {last[:200]}" if last else " (nothing on its stderr)"))
            running.tegra_stderr.close()
        if running.nvml is not None:
            running.nvml.close()

    # -- threads ---------------------------------------------------------------------------

    def _loop(self, stop: threading.Event) -> None:
        interval_ns = int(self.interval_s * 1e9)
        next_ns = time.perf_counter_ns() + interval_ns
        while not stop.wait(max(0, next_ns - time.perf_counter_ns()) / 1e9):
            self._sample()
            next_ns += interval_ns
            now = time.perf_counter_ns()
            if next_ns < now:  # fell behind (a long GIL hold): resume the grid from now
                next_ns = now + interval_ns

    def _sample(self) -> None:
        readings: dict[str, float] = {}
        for read in self._readers:
            try:
                readings.update(read())
            except Exception:  # a source that fails now is absent from this sample
                pass
        t_ns = time.perf_counter_ns()
        with self._lock:
            self.samples.append(Sample(t_ns, readings, SYSTEM))

    def _read_tegrastats(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        overlong = False  # in the middle of a line longer than MAX_TEGRA_LINE_CHARS
        try:
            while line := proc.stdout.readline(MAX_TEGRA_LINE_CHARS):
                t_ns = time.perf_counter_ns()
                if not line.endswith("\n") and len(line) >= MAX_TEGRA_LINE_CHARS:
                    overlong = True  # this piece, and those after it up to its newline, are passed over
                    continue
                if overlong:  # the last piece of an overlong line
                    overlong = False
                    continue
                parsed = parse_tegrastats(line)
                if not parsed:
                    continue
                board = rail_for_board(parsed)
                if board is not None:
                    parsed["board_power_w"] = board
                with self._lock:
                    self.samples.append(Sample(t_ns, parsed, TEGRASTATS))
        except (OSError, ValueError):  # the pipe closed under us at stop
            pass

    # -- results ---------------------------------------------------------------------------

    def series(self, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, list[tuple[int, float]]]:
        """The readings over [start_ns, end_ns], less the first ``settle_s`` seconds, as time
        series (see :func:`series`); the window defaults as :meth:`summary`'s."""
        return series(*self._window(start_ns, end_ns), self.settle_s, gpu=self.gpu_index is not None)

    def series_json(self, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, Any]:
        """:meth:`series` with the wall-clock time its milliseconds count from (``start_ms``, ms
        since the epoch: the window's start, less its settling), for a run's system metrics."""
        if start_ns is None:
            start_ns = self.start_ns if self.start_ns is not None else time.perf_counter_ns()
        lo_ns = start_ns + int(self.settle_s * 1e9)
        start_ms = (time.time_ns() - (time.perf_counter_ns() - lo_ns)) // 1_000_000
        return {"start_ms": start_ms, "series": self.series(start_ns, end_ns)}

    def summary(self, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, float]:
        """Aggregates over samples in [start_ns, end_ns], less the first ``settle_s`` seconds.

        Defaults: the sampler's own start and stop (or now while running). Keys appear only
        where their source produced samples: ``cpu_util_pct`` (mean), ``cpu_util_others_pct`` (the
        machine's CPU less the measuring process's share, means over the window; not where it has
        children), ``sys_mem_used_peak_mb``,
        ``proc_rss_peak_mb`` (children's private memory included), ``children_mem_peak_mb`` (the
        children's private memory, where there were children), ``gpu_util_pct`` (mean), ``gpu_mem_used_peak_mb``,
        ``gpu_power_w`` (mean), ``gpu_energy_j`` (energy counter, else trapezoid of power),
        ``cpu_power_w`` / ``cpu_energy_j`` (RAPL), ``board_power_w`` / ``board_energy_j``
        (tegrastats input rail), ``power_w`` / ``energy_j`` (board, else GPU + CPU, else
        either), ``telemetry_samples_count`` and ``telemetry_interval_ms`` (median gap).
        Energies cover the window, the readings at its edges held out to its ends; an energy
        counter is used only where it ticked ``MIN_COUNTER_TICKS`` times in the window.
        """
        return summarize(*self._window(start_ns, end_ns), self.settle_s, gpu=self.gpu_index is not None)

    def _window(self, start_ns: int | None, end_ns: int | None) -> tuple[list[Sample], int | None, int]:
        """The samples so far, and the window: the sampler's own start and stop (or now while it
        runs) where not given."""
        with self._lock:
            samples = list(self.samples)
        if start_ns is None:
            start_ns = self.start_ns
        if end_ns is None:
            end_ns = self.end_ns if self.end_ns is not None else time.perf_counter_ns()
        return samples, start_ns, end_ns
