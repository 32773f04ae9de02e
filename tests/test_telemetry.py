"""Telemetry: the tegrastats parser on real lines, the sampler on this (CPU-only) machine."""
from __future__ import annotations

import os
import stat
import statistics
import time
from pathlib import Path

import pytest

from tracker.profile import telemetry
from tracker.profile.telemetry import (
    SYSTEM,
    TEGRASTATS,
    Sample,
    TelemetrySampler,
    parse_tegrastats,
    rail_for_board,
    summarize,
    trapezoid_energy_j,
    unwrap_delta,
)

#: The sampler's tests read this machine's CPU use and time its thread: none runs beside another
#: test of the suite (conftest: ``alone``). The parser's take milliseconds.
pytestmark = pytest.mark.alone

DATASET = Path("/work/shared/datasets/tegrastats")

# First recorded line of each board in the dataset, copied literally.
TX2_IDLE = (
    "RAM 1404/7860MB (lfb 236x4MB) SWAP 0/3930MB (cached 0MB) CPU [0%@345,0%@960,0%@960,0%@345,0%@345,0%@345] "
    "EMC_FREQ 0% GR3D_FREQ 0% PLL@35.5C MCPU@35.5C PMIC@100C Tboard@30C GPU@32C BCPU@35.5C thermal@34.1C "
    "Tdiode@31.5C VDD_SYS_GPU 153/153 VDD_SYS_SOC 306/306 VDD_4V0_WIFI 0/0 VDD_IN 1649/1649 VDD_SYS_CPU 306/306 "
    "VDD_SYS_DDR 173/173"
)
TX2_LOAD = (
    "RAM 3276/7859MB (lfb 5x4MB) SWAP 1626/12122MB (cached 181MB) CPU [44%@1421,49%@2031,67%@2034,17%@1420,"
    "25%@1419,8%@1420] EMC_FREQ 1%@1866 GR3D_FREQ 0%@114 APE 150 MTS fg 1% bg 1% PLL@42.5C MCPU@42.5C PMIC@50C "
    "Tboard@38C GPU@39.5C BCPU@42.5C thermal@41.3C Tdiode@39.25C VDD_SYS_GPU 182/182 VDD_SYS_SOC 730/730 "
    "VDD_4V0_WIFI 0/0 VDD_IN 5297/5297 VDD_SYS_CPU 1917/1917 VDD_SYS_DDR 1241/1241"
)
ORIN = (
    "11-15-2024 08:38:09 RAM 6185/7620MB (lfb 8x2MB) SWAP 851/3810MB (cached 1MB) CPU [15%@729,11%@729,14%@729,"
    "13%@729,11%@729,8%@729] EMC_FREQ 43%@2133 GR3D_FREQ 63%@[621] NVDEC off NVJPG off NVJPG1 off VIC off OFA off "
    "APE 200 cpu@53.968C soc2@52.437C soc0@50.75C gpu@53.343C tj@53.968C soc1@51.656C VDD_IN 12479mW/12479mW "
    "VDD_CPU_GPU_CV 4667mW/4667mW VDD_SOC 2817mW/2817mW"
)
ORIN_NANO = (
    "06-18-2025 11:25:24 RAM 3452/7620MB (lfb 25x4MB) SWAP 1518/16384MB (cached 174MB) CPU [1%@1420,2%@1420,"
    "0%@1420,2%@1420,2%@729,1%@729] GR3D_FREQ 0% cpu@50.031C soc2@49.031C soc0@50C gpu@49.031C tj@50.25C "
    "soc1@50.25C VDD_IN 4824mW/4824mW VDD_CPU_GPU_CV 518mW/518mW VDD_SOC 1475mW/1475mW"
)
AGX_ORIN = "11-14-2024 22:54:33 RAM 4300/30698MB GR3D_FREQ 45% tj@52.468C VDD_GPU_SOC 2171mW"
# Not recorded: written for this test in the Nano/TX1 format (POM_ rails without unit, cores off,
# IRAM, an absent sensor reading -256C).
NANO_STYLE = (
    "RAM 1836/3956MB (lfb 53x4MB) SWAP 0/1978MB (cached 0MB) IRAM 0/252kB(lfb 252kB) CPU [10%@1428,2%@1428,off,off] "
    "EMC_FREQ 3%@1600 GR3D_FREQ 7%@76 APE 25 PLL@33C CPU@35C PMIC@100C GPU@34C AO@41C iwlwifi@-256C "
    "thermal@34.5C POM_5V_IN 2014/2000 POM_5V_GPU 0/0 POM_5V_CPU 411/411"
)


def recorded_lines() -> list[tuple[str, str]]:
    """(device comment, line) for every line of every recorded file."""
    out = []
    for path in sorted(DATASET.iterdir()):
        if path.name.lower().startswith("readme"):
            continue
        device = ""
        for raw in path.read_text().splitlines():
            if raw.startswith("#"):
                device = raw
            elif raw.strip():
                out.append((f"{path.name}: {device}", raw))
    return out


@pytest.mark.skipif(not DATASET.is_dir(), reason="recorded tegrastats lines not on this machine")
def test_parser_reads_every_recorded_line() -> None:
    lines = recorded_lines()
    assert len(lines) >= 5
    for where, line in lines:
        parsed = parse_tegrastats(line)
        assert parsed, where
        assert 0 < parsed["ram_used_mb"] <= parsed["ram_total_mb"], where
        assert 0 <= parsed["gpu_util_pct"] <= 100, where
        rails = [k for k in parsed if k.startswith("power_") and k.endswith("_mw") and not k.endswith("_avg_mw")]
        assert rails, where
        assert all(parsed[k] >= 0 for k in rails), where
        if "cpu_util_pct" in parsed:
            cores = [v for k, v in parsed.items() if k.startswith("cpu") and k[3:4].isdigit() and k.endswith("_util_pct")]
            assert parsed["cpu_util_pct"] == pytest.approx(sum(cores) / len(cores)), where
    # The hard-coded lines below are the recorded ones, character for character.
    texts = {line for _, line in lines}
    for line in (TX2_IDLE, TX2_LOAD, ORIN, ORIN_NANO, AGX_ORIN):
        assert line in texts


def test_parser_tx2_exact_values() -> None:
    p = parse_tegrastats(TX2_LOAD)
    assert (p["ram_used_mb"], p["ram_total_mb"]) == (3276, 7859)
    assert (p["swap_used_mb"], p["swap_total_mb"]) == (1626, 12122)
    assert (p["cpu0_util_pct"], p["cpu0_freq_mhz"]) == (44, 1421)
    assert (p["cpu5_util_pct"], p["cpu5_freq_mhz"]) == (8, 1420)
    assert p["cpu_util_pct"] == pytest.approx((44 + 49 + 67 + 17 + 25 + 8) / 6)
    assert (p["emc_util_pct"], p["emc_freq_mhz"]) == (1, 1866)
    assert (p["gpu_util_pct"], p["gpu_freq_mhz"]) == (0, 114)
    assert p["temp_gpu_c"] == 39.5 and p["temp_tdiode_c"] == 39.25 and p["temp_bcpu_c"] == 42.5
    assert (p["power_vdd_in_mw"], p["power_vdd_in_avg_mw"]) == (5297, 5297)
    assert (p["power_vdd_sys_cpu_mw"], p["power_vdd_sys_gpu_mw"]) == (1917, 182)
    assert p["power_vdd_4v0_wifi_mw"] == 0
    assert rail_for_board(p) == pytest.approx(5.297)
    # "MTS fg 1% bg 1%" and the "(lfb ...)" groups are no readings.
    assert not any(k.startswith(("mts", "fg", "bg", "lfb", "cached")) for k in p)

    idle = parse_tegrastats(TX2_IDLE)
    assert idle["gpu_util_pct"] == 0 and "gpu_freq_mhz" not in idle
    assert idle["emc_util_pct"] == 0 and "emc_freq_mhz" not in idle
    assert idle["cpu1_freq_mhz"] == 960 and idle["cpu_util_pct"] == 0
    assert rail_for_board(idle) == pytest.approx(1.649)


def test_parser_orin_exact_values() -> None:
    p = parse_tegrastats(ORIN)
    assert (p["ram_used_mb"], p["ram_total_mb"]) == (6185, 7620)
    assert (p["gpu_util_pct"], p["gpu_freq_mhz"]) == (63, 621)
    assert (p["emc_util_pct"], p["emc_freq_mhz"]) == (43, 2133)
    assert p["cpu_util_pct"] == pytest.approx((15 + 11 + 14 + 13 + 11 + 8) / 6)
    assert p["temp_gpu_c"] == 53.343 and p["temp_tj_c"] == 53.968 and p["temp_soc0_c"] == 50.75
    assert (p["power_vdd_in_mw"], p["power_vdd_in_avg_mw"]) == (12479, 12479)
    assert p["power_vdd_cpu_gpu_cv_mw"] == 4667 and p["power_vdd_soc_avg_mw"] == 2817
    assert rail_for_board(p) == pytest.approx(12.479)
    assert not any(k.startswith(("nvdec", "nvjpg", "vic", "ofa")) for k in p)  # engines "off"

    nano = parse_tegrastats(ORIN_NANO)
    assert nano["gpu_util_pct"] == 0 and "gpu_freq_mhz" not in nano
    assert (nano["cpu4_util_pct"], nano["cpu4_freq_mhz"]) == (2, 729)
    assert rail_for_board(nano) == pytest.approx(4.824)

    agx = parse_tegrastats(AGX_ORIN)
    assert agx == {
        "ram_used_mb": 4300, "ram_total_mb": 30698, "gpu_util_pct": 45,
        "temp_tj_c": 52.468, "power_vdd_gpu_soc_mw": 2171,
    }
    assert rail_for_board(agx) is None  # no input rail on that line: unknown, not guessed


def test_parser_pom_rails_and_offline_cores() -> None:
    p = parse_tegrastats(NANO_STYLE)
    assert (p["cpu0_util_pct"], p["cpu1_util_pct"]) == (10, 2)
    assert "cpu2_util_pct" not in p and "cpu3_freq_mhz" not in p
    assert p["cpu_util_pct"] == pytest.approx(6.0)  # mean of the two online cores
    assert (p["power_pom_5v_in_mw"], p["power_pom_5v_in_avg_mw"]) == (2014, 2000)
    assert rail_for_board(p) == pytest.approx(2.014)
    assert (p["gpu_util_pct"], p["gpu_freq_mhz"]) == (7, 76)
    assert "temp_iwlwifi_c" not in p  # -256C means no sensor
    assert p["temp_cpu_c"] == 35 and p["ape_freq_mhz"] == 25
    assert not any(k.startswith("iram") for k in p)


@pytest.mark.parametrize(
    "line",
    ["", "   \n", "hello world", "GPU 12/34 CPU 5/6", "RAM is full", "12/34", "x@12C", "CPU [", "CPU [abc,off]", "RAM 12 GB free"],
)
def test_parser_garbage_gives_nothing(line: str) -> None:
    assert parse_tegrastats(line) == {}
    assert rail_for_board(parse_tegrastats(line)) is None


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------


def test_trapezoid_energy() -> None:
    ts = [int(k * 0.1e9) for k in range(21)]  # 0..2 s
    assert trapezoid_energy_j(ts, [10.0] * 21) == pytest.approx(20.0)
    assert trapezoid_energy_j(ts, [k * 0.5 for k in range(21)]) == pytest.approx(10.0)  # 0 -> 10 W ramp
    assert trapezoid_energy_j([0], [5.0]) == 0.0


def test_summary_energy_and_best_total() -> None:
    ts = [int(k * 0.1e9) for k in range(21)]
    gpu = [Sample(t, {"gpu_power_w": 10.0}) for t in ts]
    s = summarize(gpu)
    assert s["gpu_power_w"] == pytest.approx(10) and s["gpu_energy_j"] == pytest.approx(20)
    assert s["power_w"] == pytest.approx(10) and s["energy_j"] == pytest.approx(20)
    assert not any(k.startswith(("cpu_", "board_")) for k in s)

    # The NVML energy counter wins over integrating power; RAPL adds the CPU.
    both = [Sample(t, {"gpu_power_w": 10.0, "gpu_energy_counter_j": 1000 + 15 * t / 2e9,
                       "cpu_energy_counter_j": 5 + 4 * t / 1e9}) for t in ts]
    s = summarize(both)
    assert s["gpu_energy_j"] == pytest.approx(15)
    assert (s["cpu_energy_j"], s["cpu_power_w"]) == (pytest.approx(8), pytest.approx(4))
    assert s["power_w"] == pytest.approx(14) and s["energy_j"] == pytest.approx(23)

    # A counter that ticks every 0.5 s, sampled every 0.1 s off its ticks, at 10 W: the rate is taken
    # between the changes seen (not first and last reading: 15 J over 1.9 s would say 7.9 W).
    coarse = [Sample(int(t), {"gpu_power_w": 10.0, "gpu_energy_counter_j": 5.0 * ((t / 1e9) // 0.5)})
              for t in (0.05e9 + k * 0.1e9 for k in range(20))]
    s = summarize(coarse)
    assert (s["gpu_power_w"], s["gpu_energy_j"]) == (pytest.approx(10), pytest.approx(19))
    # Too short a window to see the counter tick: power is integrated instead of reporting 0 J,
    # over the whole window asked for (0.45 s), not only the 0.3 s between its first and last sample.
    s = summarize(coarse[:4])
    assert s["gpu_energy_j"] == pytest.approx(3.0) and s["energy_j"] == pytest.approx(3.0)
    s = summarize(coarse[:4], start_ns=0, end_ns=int(0.45e9))
    assert s["gpu_energy_j"] == pytest.approx(4.5) and s["gpu_power_w"] == pytest.approx(10)

    # A board input rail is the best total there is.
    board = [Sample(t, {"board_power_w": 6.0, "gpu_util_pct": 50.0}, TEGRASTATS) for t in ts]
    s = summarize(both + board)
    assert (s["board_power_w"], s["board_energy_j"]) == (pytest.approx(6), pytest.approx(12))
    assert (s["power_w"], s["energy_j"]) == (pytest.approx(6), pytest.approx(12))
    assert s["telemetry_samples_count"] == 21  # periodic samples only
    assert "gpu_sm_clock_mhz" not in s  # no clock read: none said

    # The SMs' clock over the window (NVML): its mean, and its lowest reading, which the mode's
    # clock (read once, before) cannot show
    clocked = [Sample(t, {"gpu_sm_clock_mhz": 1980.0 if k % 4 else 345.0}) for k, t in enumerate(ts)]
    s = summarize(clocked, start_ns=ts[1], end_ns=ts[8])  # readings 1..8: 1980 six times, 345 at 4 and 8
    assert s["gpu_sm_clock_mhz"] == pytest.approx((6 * 1980 + 2 * 345) / 8) and s["gpu_sm_clock_min_mhz"] == 345
    assert s["telemetry_interval_ms"] == pytest.approx(100)


def test_rapl_wraparound() -> None:
    assert unwrap_delta(100, 250, 1000) == 150
    assert unwrap_delta(900, 50, 1000) == 150  # wrapped past 1000
    assert unwrap_delta(900, 50, None) == 0  # no range known: never a negative energy


def test_sampler_reads_fake_rapl_with_wraparound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "intel-rapl:0"
    sub = tmp_path / "intel-rapl:0:0"
    for d, name in ((pkg, "package-0"), (sub, "core")):
        d.mkdir()
        (d / "name").write_text(name + "\n")
        (d / "max_energy_range_uj").write_text("1000000\n")
    (pkg / "energy_uj").write_text("900000\n")
    (sub / "energy_uj").write_text("0\n")
    monkeypatch.setattr(telemetry, "POWERCAP_ROOT", tmp_path)
    with TelemetrySampler(interval_s=0.01) as tel:
        for uj in (950000, 50000, 150000, 250000):  # +0.1 J every 0.1 s (1 W), wrapping past 1 J once
            time.sleep(0.1)
            (pkg / "energy_uj").write_text(f"{uj}\n")
        time.sleep(0.1)
    s = tel.summary()
    assert "rapl" in tel.sources
    assert 0.5 < s["cpu_power_w"] < 2.0, s  # 0.3 J between the first and last tick seen; a lost wrap would be < 0
    assert s["cpu_energy_j"] == pytest.approx(s["cpu_power_w"] * (tel.end_ns - tel.start_ns) / 1e9)
    assert s["power_w"] == s["cpu_power_w"] and s["energy_j"] == s["cpu_energy_j"]


# --------------------------------------------------------------------------------------------
# The sampler on this machine
# --------------------------------------------------------------------------------------------


def rapl_readable() -> bool:
    for f in Path("/sys/class/powercap").glob("intel-rapl:*/energy_uj"):
        try:
            f.read_text()
            return True
        except OSError:
            pass
    return False


def system_samples(tel: TelemetrySampler, since_ns: int = 0) -> int:
    return sum(1 for x in tel.samples if x.source == SYSTEM and x.t_ns >= since_ns)


def wait_samples(tel: TelemetrySampler, samples: int, cap_s: float = 3.0) -> None:
    """Sleep until the sampler has ``samples`` samples (at most ``cap_s``): a loaded machine may
    run its thread late, and 0.1 s once held none."""
    deadline = time.monotonic() + cap_s
    while system_samples(tel) < samples and time.monotonic() < deadline:
        time.sleep(0.01)


def busy(tel: TelemetrySampler, seconds: float, samples: int = 0, cap_s: float = 3.0) -> None:
    """Burn CPU in this thread for ``seconds`` (longer, up to ``cap_s``, until the sampler has
    ``samples`` samples since the start: this machine is shared and may be loaded).

    The loop yields the GIL every millisecond or so, as a workload in C (torch) would, so that a
    loaded machine delays the sampler only by scheduling, not by the GIL convoy of a pure-Python loop.
    """
    t0 = time.perf_counter_ns()
    end, cap = t0 + seconds * 1e9, t0 + cap_s * 1e9
    while True:
        now = time.perf_counter_ns()
        if now >= cap or (now >= end and system_samples(tel, t0) >= samples):
            return
        stop = now + 1_000_000
        while time.perf_counter_ns() < stop:
            pass
        time.sleep(0)


def test_sampler_cpu_only_machine() -> None:
    with TelemetrySampler(interval_s=0.02) as tel:
        busy(tel, 0.5, samples=12)
    s = tel.summary()
    system = [x for x in tel.samples if x.source == SYSTEM]
    assert len(system) >= 10
    assert s["telemetry_samples_count"] == len(system)
    gaps = [(b.t_ns - a.t_ns) / 1e6 for a, b in zip(system, system[1:])]
    assert s["telemetry_interval_ms"] == pytest.approx(statistics.median(gaps))
    assert 10 <= s["telemetry_interval_ms"] <= 100
    assert s["cpu_util_pct"] > 50 / (os.cpu_count() or 1)  # one busy thread: about 100 / cores % system-wide
    assert s["proc_rss_peak_mb"] > 10
    assert s["sys_mem_used_peak_mb"] > s["proc_rss_peak_mb"] * 0.5
    assert all(isinstance(x.t_ns, int) for x in tel.samples)
    assert [x.t_ns for x in system] == sorted(x.t_ns for x in system)
    assert all(tel.start_ns <= x.t_ns <= tel.end_ns for x in tel.samples)
    # What this machine cannot measure is absent, not zero.
    if "nvml" not in tel.sources:
        assert not any(k.startswith("gpu_") for k in s)
    assert not any(k.startswith("board_") for k in s)
    assert ("cpu_energy_j" in s) == rapl_readable() == ("cpu_power_w" in s)
    if not rapl_readable():
        assert "power_w" not in s and "energy_j" not in s


def test_summary_says_the_cpu_other_processes_took() -> None:
    """The machine's CPU less the measuring process's, over the window; clamped at zero (the two
    are read a moment apart); absent where a sample lacks the process's own (it had children)."""
    samples = [Sample(i * 10**7, {"cpu_util_pct": total, "proc_cpu_util_pct": own})
               for i, (total, own) in enumerate([(80, 45), (100, 50), (60, 55)])]
    assert summarize(samples)["cpu_util_others_pct"] == pytest.approx(80 - 50)
    assert summarize([Sample(0, {"cpu_util_pct": 40, "proc_cpu_util_pct": 50})])["cpu_util_others_pct"] == 0
    with_children = [*samples, Sample(4 * 10**7, {"cpu_util_pct": 90})]
    assert "cpu_util_others_pct" not in summarize(with_children) and "cpu_util_pct" in summarize(with_children)


def test_series_are_the_window_in_stretches_of_time() -> None:
    """Each reading over the window as (ms since its start, value), consecutive samples averaged
    into at most ``points`` equal stretches; RAPL's counter as power between readings; the board's
    power and a Jetson's GPU load from tegrastats; the CPU others took; nothing not read."""
    ms = 10**6
    system = [Sample(t * 10 * ms, {"cpu_util_pct": 50.0 + t, "proc_cpu_util_pct": 40.0, "proc_rss_mb": 100.0,
                                   "cpu_energy_counter_j": 0.5 * t}) for t in range(10)]  # 0.5 J every 10 ms: 50 W
    board = [Sample(t * 10 * ms + 5 * ms, {"board_power_w": 7.0, "gpu_util_pct": 30.0}, TEGRASTATS) for t in range(10)]
    out = telemetry.series(system + board, start_ns=0, end_ns=100 * ms, points=5)
    assert set(out) == {"cpu_util_pct", "cpu_util_others_pct", "proc_rss_mb", "cpu_power_w", "board_power_w",
                        "gpu_util_pct"}
    assert out["cpu_util_pct"] == [(5, 50.5), (25, 52.5), (45, 54.5), (65, 56.5), (85, 58.5)]  # 2 samples a stretch
    assert out["cpu_util_others_pct"][0] == (5, 10.5) and out["proc_rss_mb"][-1] == (85, 100.0)
    assert [v for _, v in out["cpu_power_w"]] == pytest.approx([50.0] * 5)
    assert out["board_power_w"][0] == (10, 7.0) and out["gpu_util_pct"][0] == (10, 30.0)
    # others' CPU is the stretch's mean difference, clamped as the run's figure is, not a mean of clamped samples
    jitter = [Sample(t * 10 * ms, {"cpu_util_pct": 50.0, "proc_cpu_util_pct": 60.0 if t % 2 else 30.0})
              for t in range(10)]  # -10 and +20 in turn: 5 on average
    assert [v for _, v in telemetry.series(jitter, start_ns=0, end_ns=100 * ms, points=5)["cpu_util_others_pct"]] \
        == pytest.approx([5.0] * 5) == [telemetry.summarize(jitter)["cpu_util_others_pct"]] * 5
    assert telemetry.series(system, start_ns=200 * ms, end_ns=300 * ms) == {}  # no sample in the window
    assert len(telemetry.series(system, start_ns=0, end_ns=100 * ms)["cpu_util_pct"]) == 10  # fewer than points


#: A measuring child's sampler, in a process of its own (this one may have children: zygotes kept
#: between tests, whose CPU it could not tell apart): idle or burning, it prints its summary.
_SAMPLED = """
import json, sys, time
from tracker.profile.telemetry import TelemetrySampler
with TelemetrySampler(interval_s=0.02) as tel:
    end = time.perf_counter() + 0.6
    while time.perf_counter() < end:  # idle, or burning with the GIL let go every ms, as torch's C code would
        if sys.argv[1] == "idle":
            time.sleep(0.01)
        else:
            ms = time.perf_counter() + 0.001
            while time.perf_counter() < ms:
                pass
            time.sleep(0)
print(json.dumps(tel.summary()))
"""


def _sampled(how: str) -> dict:
    import json
    import subprocess
    import sys

    return json.loads(subprocess.run([sys.executable, "-c", _SAMPLED, how], capture_output=True, text=True,
                                     check=True).stdout)


def test_sampler_counts_another_process_busy_as_others() -> None:
    """A process that is no child of the sampling one burns a core: the others' share is about a
    core's worth of the machine while the sampling one idles, and less where it burns alone."""
    from tests.conftest import busy_elsewhere

    core = 100 / (os.cpu_count() or 1)
    alone = _sampled("busy")
    with busy_elsewhere():
        shared = _sampled("idle")
    assert shared["cpu_util_others_pct"] > 0.6 * core
    assert alone["cpu_util_others_pct"] < shared["cpu_util_others_pct"]
    assert alone["cpu_util_pct"] > 0.6 * core  # its own burning is its own, not others'


#: The process reader of a sampler whose process started an instrument (as tegrastats is started),
#: here a child burning a core: its CPU is the measurement's, not others'.
_INSTRUMENTED = """
import json, subprocess, sys, time
from tracker.profile.telemetry import _ProcessMemory
burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
try:
    reader = _ProcessMemory(lambda: {burner.pid})
    reader.read()
    time.sleep(0.8)
    print(json.dumps(reader.read()))
finally:
    burner.kill()
"""


def test_an_instruments_cpu_is_the_measurements_own() -> None:
    """tegrastats, started by the sampler, was counted among the other processes, so a Jetson's runs
    all read as measured beside other work. An instrument's CPU is now the measuring process's share."""
    import json
    import subprocess
    import sys

    read = json.loads(subprocess.run([sys.executable, "-c", _INSTRUMENTED], capture_output=True, text=True,
                                     check=True).stdout)
    core = 100 / (os.cpu_count() or 1)
    assert read["proc_cpu_util_pct"] > 0.6 * core, read  # said (an instrument is no loader worker), and counted


#: A process holding 200 MB forks a child (as a DataLoader forks a worker) that writes 50 MB of its
#: own: the child's RSS counts the parent's pages it shares; the reader counts what is its own.
_FORKED = """
import json, os, time
from tracker.profile.telemetry import _ProcessMemory
held = b"\\x01" * (200 << 20)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    own = b"\\x02" * (50 << 20)
    os.write(w, b"x")
    time.sleep(60)
    os._exit(0)
try:
    os.read(r, 1)
    import psutil
    child = psutil.Process(pid)
    read = _ProcessMemory(lambda: set()).read()
    print(json.dumps({**read, "own_rss_mb": psutil.Process().memory_info().rss / 2**20,
                      "child_rss_mb": child.memory_info().rss / 2**20}))
finally:
    os.kill(pid, 9)
"""


def test_a_forked_childs_memory_is_its_own_not_what_it_shares() -> None:
    """A training job's loader workers were counted by their RSS in its proc_rss_mb series, the pages
    they share with the job counted twice (1,064-1,112 MB against the job's 712). Since 0.9.2 their
    private memory (USS) is counted, and kept as children_uss_mb (a job's workers_mem_peak_mb)."""
    import json
    import subprocess
    import sys

    read = json.loads(subprocess.run([sys.executable, "-c", _FORKED], capture_output=True, text=True,
                                     check=True).stdout)
    assert read["child_rss_mb"] > 240, read  # its 50 MB and the 200 it shares
    assert 45 < read["children_uss_mb"] < 120, read  # its own 50 MB (and a little of the interpreter's)
    assert read["proc_rss_mb"] == pytest.approx(read["own_rss_mb"] + read["children_uss_mb"], abs=5), read


def test_sampler_nvml_absent_without_driver() -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present here")
    except pynvml.NVMLError:
        pass
    with TelemetrySampler(interval_s=0.02, gpu_index=0) as tel:
        time.sleep(0.1)
    assert "nvml" not in tel.sources
    assert not any(k.startswith("gpu_") for x in tel.samples for k in x.readings)


def test_settle_drops_early_samples() -> None:
    with TelemetrySampler(interval_s=0.02) as tel:
        time.sleep(0.5)
    everything = tel.summary()["telemetry_samples_count"]
    tel.settle_s = 0.2
    settled = tel.summary()["telemetry_samples_count"]
    expected = sum(1 for x in tel.samples if x.t_ns >= tel.start_ns + 0.2e9)
    assert settled == expected
    assert 0 < settled < everything  # about 10 samples in the first 0.2 s at 20 ms

    with TelemetrySampler(interval_s=0.02, settle_s=0.2) as tel2:
        time.sleep(0.4)
    assert all(x.t_ns >= tel2.start_ns for x in tel2.samples)
    assert tel2.summary()["telemetry_samples_count"] == sum(1 for x in tel2.samples if x.t_ns >= tel2.start_ns + 0.2e9)


def test_window_selection() -> None:
    with TelemetrySampler(interval_s=0.02) as tel:
        time.sleep(0.2)
        a = time.perf_counter_ns()
        busy(tel, 0.3, samples=10)
        b = time.perf_counter_ns()
        time.sleep(0.2)
    inside = [x for x in tel.samples if a <= x.t_ns <= b]
    s = tel.summary(a, b)
    assert s["telemetry_samples_count"] == len(inside) >= 5
    assert s["telemetry_samples_count"] < tel.summary()["telemetry_samples_count"]
    assert s["cpu_util_pct"] == pytest.approx(sum(x.readings["cpu_util_pct"] for x in inside) / len(inside))
    # settle_s counts from the given start.
    tel.settle_s = 0.1
    assert tel.summary(a, b)["telemetry_samples_count"] == sum(1 for x in inside if x.t_ns >= a + 0.1e9)
    # An empty window measured nothing: only the count, zero.
    assert tel.summary(b + 10**10, b + 2 * 10**10) == {"telemetry_samples_count": 0}


def test_rss_peak_follows_allocation() -> None:
    with TelemetrySampler(interval_s=0.02) as base:
        time.sleep(0.15)
    size = 200 * 1024 * 1024
    with TelemetrySampler(interval_s=0.02) as tel:
        buf = bytearray(size)
        buf[::4096] = b"\x01" * len(range(0, size, 4096))  # touch every page
        time.sleep(0.15)
    rise = tel.summary()["proc_rss_peak_mb"] - base.summary()["proc_rss_peak_mb"]
    del buf
    assert 170 <= rise <= 260, rise


def test_fake_tegrastats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in tegrastats on PATH: its lines become board samples, and it is stopped at exit. A
    line with bytes that are not UTF-8 is passed over (it ended the reader until 0.9.4)."""
    script = tmp_path / "tegrastats"
    script.write_text(f"#!/bin/sh\nprintf '\\377\\376 noise\\n'\n"
                      f"while true; do echo '{ORIN}'; echo 'a warning'; sleep 0.02; done\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    tel = TelemetrySampler(interval_s=0.02)
    with tel:
        proc = tel._running.tegra
        deadline = time.perf_counter() + 3
        while time.perf_counter() < deadline and sum(x.source == TEGRASTATS for x in tel.samples) < 6:
            time.sleep(0.05)
    assert proc is not None and proc.poll() is not None  # stopped
    board = [x for x in tel.samples if x.source == TEGRASTATS]
    assert len(board) >= 5
    s = tel.summary()
    assert s["board_power_w"] == pytest.approx(12.479)
    assert s["board_energy_j"] == pytest.approx(12.479 * (tel.end_ns - tel.start_ns) / 1e9)  # the whole window
    assert s["power_w"] == pytest.approx(12.479)
    assert s["telemetry_samples_count"] == sum(1 for x in tel.samples if x.source == SYSTEM)


class FakeNvml:
    """A stand-in pynvml: two different GPUs (16 and 80 GB), no energy counter on this model."""

    GPUS = (("Small GPU 16GB", 16384), ("Large GPU 80GB", 81920))

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.inits = 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i not in (0, 1):
            raise self.NVMLError("invalid argument")
        return i

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-abc{h}-0000"

    def nvmlDeviceGetUtilizationRates(self, h: int):
        return type("U", (), {"gpu": 30 + 40 * h, "memory": 5})()

    def nvmlDeviceGetMemoryInfo(self, h: int):
        return type("M", (), {"used": (1000 + h) * 1024 * 1024, "total": self.GPUS[h][1] * 2**20})()

    def nvmlDeviceGetName(self, h: int) -> str:
        return self.GPUS[h][0]

    def nvmlSystemGetDriverVersion(self) -> str:
        return "999.1"

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 50_000 + 100_000 * h  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        raise self.NVMLError("not supported")


@pytest.mark.parametrize(("visible", "gpu_index", "device"), [(None, 0, 0), (None, 1, 1), ("1,0", 0, 1), ("GPU-abc1", 0, 1)])
def test_sampler_nvml_readings(monkeypatch: pytest.MonkeyPatch, visible: str | None, gpu_index: int, device: int) -> None:
    import sys

    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with TelemetrySampler(interval_s=0.02, gpu_index=gpu_index) as tel:
        deadline = time.monotonic() + 30  # samples enough for an energy (0.2 s gave too few beside other work)
        while sum("gpu_power_w" in x.readings for x in list(tel.samples)) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert fake.inits == 0  # shut down again
    s = tel.summary()
    assert "nvml" in tel.sources
    assert s["gpu_util_pct"] == 30 + 40 * device
    assert s["gpu_mem_used_peak_mb"] == 1000 + device
    power = 50 + 100 * device
    assert s["gpu_power_w"] == pytest.approx(power)
    gpu = [x for x in tel.samples if "gpu_power_w" in x.readings]
    assert not any("gpu_energy_counter_j" in x.readings for x in gpu)  # unsupported: absent
    assert s["gpu_energy_j"] == pytest.approx(power * (tel.end_ns - tel.start_ns) / 1e9)
    if not rapl_readable():
        assert (s["power_w"], s["energy_j"]) == (s["gpu_power_w"], s["gpu_energy_j"])


@pytest.mark.parametrize(("visible", "handle"), [("1", 1), ("\u0661", None), ("\u00b9", None)])
def test_a_visible_device_in_digits_of_another_script_is_no_nvml_index(monkeypatch: pytest.MonkeyPatch, visible: str,
                                                                       handle: int | None) -> None:
    """A CUDA_VISIBLE_DEVICES entry in digits of another script (\u0661, 1), which CUDA does not read as an index,
    was NVML's device of that index until 0.9.14 (isdigit and int): it matches no device, as any other name does."""
    from tracker.environment import nvml_handle

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    if handle is not None:
        assert nvml_handle(FakeNvml(), 0) == handle
    else:
        with pytest.raises(LookupError, match=f"no NVML device matches '{visible}'"):
            nvml_handle(FakeNvml(), 0)


def test_sampler_nvml_device_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with TelemetrySampler(interval_s=0.02, gpu_index=0) as tel:
        time.sleep(0.05)
    assert "nvml" not in tel.sources and not any(k.startswith("gpu_") for k in tel.summary())


def test_cpu_work_reads_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work on the CPU alone (no gpu_index): a GPU beside it is not read, and its idle power is
    not in power_w (on an H100 host that was 72 W added to every CPU network)."""
    import sys

    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with TelemetrySampler(interval_s=0.02) as tel:
        time.sleep(0.1)
    s = tel.summary()
    assert "nvml" not in tel.sources and not any(k.startswith("gpu_") for k in s)
    assert s.get("power_w") == s.get("cpu_power_w")  # RAPL's, or absent where RAPL is not readable
    with TelemetrySampler(interval_s=0.02, gpu_index=0) as gpu:  # the same fake, read when asked
        wait_samples(gpu, 3)
    assert "nvml" in gpu.sources and gpu.summary()["gpu_power_w"] > 0


def _fake_tegrastats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """A stand-in ``tegrastats`` on PATH running the shell ``body``."""
    script = tmp_path / "tegrastats"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def _sample_until_board(tel: TelemetrySampler, lines: int = 4) -> None:
    with tel:
        deadline = time.perf_counter() + 3
        while time.perf_counter() < deadline and sum(x.source == TEGRASTATS for x in tel.samples) < lines:
            time.sleep(0.05)


def test_a_cpu_measurement_on_a_jetson_reads_no_gpu_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tegrastats' GR3D load is the GPU's: a measurement on the CPU alone (no gpu_index) records none
    (it recorded the idle GPU's, 63 % here, until 0.9.8), in its summary and its series; its board power stays."""
    _fake_tegrastats(tmp_path, monkeypatch, f"while true; do echo '{ORIN}'; sleep 0.02; done")
    cpu = TelemetrySampler(interval_s=0.02)
    _sample_until_board(cpu)
    s, series = cpu.summary(), cpu.series()
    assert "gpu_util_pct" not in s and "gpu_util_pct" not in series
    assert s["board_power_w"] == pytest.approx(12.479) and "board_power_w" in series
    gpu = TelemetrySampler(interval_s=0.02, gpu_index=0)  # no NVML here: the Jetson's load is tegrastats'
    _sample_until_board(gpu)
    assert gpu.summary()["gpu_util_pct"] == pytest.approx(63) and gpu.series()["gpu_util_pct"][0][1] == pytest.approx(63)

    from tracker.profile.inventory import device_report

    report = device_report("cpu", threads=1, window_s=0.3)
    assert "gpu_util_pct" not in report["measured"]
    assert report["absent"]["gpu_util_pct"].startswith("read for a measurement on a CUDA device only")
    assert report["measured"]["board_power_w"]["source"] == "tegrastats"


def test_a_tegrastats_that_fails_is_no_source_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tegrastats that exits at once with an error was a source that "gave no board_power_w" until
    0.9.8, and one that could not be started was "no tegrastats on the PATH": each now says what failed."""
    from tracker.profile.inventory import device_report

    _fake_tegrastats(tmp_path, monkeypatch, "echo 'starting' >&2\necho 'tegrastats: Permission denied' >&2\nexit 1")
    with TelemetrySampler(interval_s=0.02) as tel:
        time.sleep(0.3)
    assert "tegrastats" not in tel.sources
    assert tel.source_errors == {"tegrastats": "tegrastats exited with status 1: tegrastats: Permission denied"}
    report = device_report("cpu", threads=1, window_s=0.3)
    assert "tegrastats" not in report["telemetry_sources"]
    assert report["absent"]["board_power_w"] == "tegrastats exited with status 1: tegrastats: Permission denied"

    (tmp_path / "tegrastats").write_text("#!/no/such/shell\n")  # found on the PATH, and cannot be started
    with TelemetrySampler(interval_s=0.02) as tel:
        time.sleep(0.05)
    assert "tegrastats" not in tel.sources
    assert tel.source_errors["tegrastats"] == f"{tmp_path / 'tegrastats'} could not be started (No such file or directory)"

    _fake_tegrastats(tmp_path, monkeypatch, f"while true; do echo '{ORIN}'; sleep 0.02; done")  # a working one
    tel = TelemetrySampler(interval_s=0.02)
    _sample_until_board(tel)
    assert "tegrastats" in tel.sources and tel.source_errors == {}


def test_a_board_without_an_input_rail_says_which_rails_it_gave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AGX Orin's line names no VDD_IN/POM_5V_IN: its board power is absent, and device show says why
    with the rails it gave (tegrastats "gave no board_power_w (not supported by the device)" until 0.9.8)."""
    from tracker.profile.inventory import device_report

    agx = Sample(0, {**parse_tegrastats(AGX_ORIN)}, TEGRASTATS)
    reason = telemetry.board_rail_reason([agx])
    assert reason is not None and reason.startswith("no VDD_IN/POM_5V_IN rail in tegrastats' lines (it gave: VDD_GPU_SOC)")
    assert telemetry.board_rail_reason([Sample(0, {"board_power_w": 5.0}, TEGRASTATS)]) is None
    assert telemetry.board_rail_reason([Sample(0, {"cpu_util_pct": 5.0})]) is None  # no tegrastats at all

    line = AGX_ORIN + " VDD_CPU_CV 400mW/400mW"
    _fake_tegrastats(tmp_path, monkeypatch, f"while true; do echo '{line}'; sleep 0.02; done")
    report = device_report("cpu", threads=1, window_s=0.3)
    assert "tegrastats" in report["telemetry_sources"]
    assert report["absent"]["board_power_w"].startswith(
        "no VDD_IN/POM_5V_IN rail in tegrastats' lines (it gave: VDD_CPU_CV, VDD_GPU_SOC)")


def test_parser_drops_what_is_out_of_range_or_unclear() -> None:
    """Until 0.9.8: ``VDD_IN 5297`` was an engine clock (``vdd_in_freq_mhz``), an unclosed ``(`` swallowed
    the rest of the line, loads over 100 % and rails of 10**23 mW were taken, and a field named twice kept
    its last reading. Now: no clock of a rail, a group skipped only where it closes soon, out-of-range
    readings dropped, and the first of a field named twice kept."""
    bare = parse_tegrastats("RAM 1404/7860MB GR3D_FREQ 5% VDD_IN 5297 APE 150")
    assert not any(k.startswith("vdd_in") or k.startswith("power_vdd_in") for k in bare)
    assert bare["ape_freq_mhz"] == 150 and bare["gpu_util_pct"] == 5

    unclosed = parse_tegrastats("RAM 1404/7860MB (lfb 236x4MB SWAP 0/3930MB CPU [10%@1000,20%@1000] GR3D_FREQ 40% "
                                "VDD_IN 5000/5000")
    assert unclosed["gpu_util_pct"] == 40 and unclosed["power_vdd_in_mw"] == 5000
    assert unclosed["cpu_util_pct"] == pytest.approx(15)
    assert rail_for_board(parse_tegrastats(TX2_LOAD)) == pytest.approx(5.297)  # closed groups still skipped

    over = parse_tegrastats("RAM 1404/7860MB GR3D_FREQ 250% CPU [150%@1,20%@1000] EMC_FREQ 101%@1600 "
                            "VDD_IN 99999999999999999999999/1 VDD_SOC 700/99999999999999999999")
    assert "gpu_util_pct" not in over and "emc_util_pct" not in over and "emc_freq_mhz" not in over
    assert "cpu0_util_pct" not in over and over["cpu1_util_pct"] == 20 and over["cpu_util_pct"] == 20
    assert not any(k.startswith("power_") for k in over) and rail_for_board(over) is None

    twice = parse_tegrastats("RAM 1000/7860MB RAM 2000/7860MB GR3D_FREQ 10% GR3D_FREQ 90% VDD_IN 4000/4100 "
                             "VDD_IN 9000mW CPU [10%@1000] CPU [90%@2000] GPU@30C GPU@60C")
    assert twice["ram_used_mb"] == 1000 and twice["gpu_util_pct"] == 10 and twice["cpu_util_pct"] == 10
    assert (twice["power_vdd_in_mw"], twice["power_vdd_in_avg_mw"]) == (4000, 4100) and twice["temp_gpu_c"] == 30


def test_an_overlong_tegrastats_line_is_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Output without a newline was held whole, without limit, until 0.9.8: a line longer than
    MAX_TEGRA_LINE_CHARS is passed over, in pieces, and the lines after it are read."""
    import psutil

    pad = telemetry.MAX_TEGRA_LINE_CHARS + 10
    _fake_tegrastats(tmp_path, monkeypatch, f"printf '%s%{pad}s\\n' '{ORIN}' ''\n"
                                            f"while true; do echo '{TX2_LOAD}'; sleep 0.02; done")
    tel = TelemetrySampler(interval_s=0.02)
    _sample_until_board(tel, lines=3)
    board = [x.readings for x in tel.samples if x.source == TEGRASTATS]
    assert board and all(r["board_power_w"] == pytest.approx(5.297) for r in board)  # the ORIN line, overlong, passed over

    _fake_tegrastats(tmp_path, monkeypatch, "yes x | tr -d '\\n'")  # no newline, ever
    before = psutil.Process().memory_info().rss
    with TelemetrySampler(interval_s=0.02):
        time.sleep(1.0)
    assert psutil.Process().memory_info().rss - before < 50 * 2**20
