"""Device modes: read (never changed), threads applied explicitly, recorded as mode runs."""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path

import pytest
import torch

from tracker.errors import ConfigError
from tracker.profile import modes
from tracker.profile.modes import DeviceMode, apply_threads, mode_record, parse_nvpmodel, read_mode

ID = re.compile(r"^[a-z0-9.-]+$")
ALLOWED = {
    "cpu_threads", "cpu_governor", "cpu_freq_min_mhz", "cpu_freq_max_mhz", "gpu_name", "gpu_sm_clock_mhz",
    "gpu_mem_clock_mhz", "gpu_app_sm_clock_mhz", "gpu_app_mem_clock_mhz", "gpu_power_limit_w", "gpu_persistence",
    "nvpmodel", "nvpmodel_id", "cpu_allocator",
}
JETSON = "NVPM WARN: fan mode is not set!\nNV Power Mode: MAXN\n0\n"
JETSON_15W = "NV Power Mode: MODE_15W_2CORE\n3\n"


@pytest.fixture
def threads_kept():
    """Restore torch's thread count whatever a test does."""
    before, set_threads = torch.get_num_threads(), torch.set_num_threads
    yield before
    set_threads(before)


@pytest.fixture
def no_jetson(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """No nvpmodel here, whatever the machine: record the commands asked for."""
    calls: list[list[str]] = []

    def fake(args, timeout_s: float = 10.0):
        calls.append(list(args))
        return None

    monkeypatch.setattr(modes, "run_command", fake)
    return calls


def fake_sysfs(root: Path, cpus: dict[int, tuple[str, int, int]]) -> Path:
    """cpuN/cpufreq with scaling_governor and min/max/cur frequencies (kHz), as the kernel shows."""
    for n, (governor, lo, hi) in cpus.items():
        d = root / f"cpu{n}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(governor + "\n")
        (d / "scaling_min_freq").write_text(f"{lo}\n")
        (d / "scaling_max_freq").write_text(f"{hi}\n")
        (d / "scaling_cur_freq").write_text(f"{(lo + hi) // 2}\n")
    (root / "cpufreq").mkdir(exist_ok=True)  # the policy folder beside cpuN: not a CPU
    return root


def governor_readable_here() -> bool:
    for path in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"):
        try:
            if path.read_text().strip():
                return True
        except OSError:
            pass
    return False


def test_read_cpu_mode_on_this_machine(no_jetson, threads_kept):
    mode = read_mode("cpu")
    assert isinstance(mode, DeviceMode)
    assert mode.device == "cpu"
    assert mode.params["cpu_threads"] == torch.get_num_threads()
    assert ID.match(mode.mode_id), mode.mode_id
    assert mode.mode_id.startswith(f"cpu-t{torch.get_num_threads()}")
    assert set(mode.params) <= ALLOWED
    assert not any(k.startswith("gpu_") for k in mode.params), mode.params  # absent, not zero
    assert ("cpu_governor" in mode.params) == governor_readable_here()
    for value in mode.params.values():
        assert value not in (0, "", "unknown", None)
    assert no_jetson == [["nvpmodel", "-q"]]  # it only ever asks


def test_read_mode_changes_nothing(monkeypatch, no_jetson, threads_kept, tmp_path):
    sysfs = fake_sysfs(tmp_path / "cpu", {0: ("schedutil", 400000, 3600000)})
    monkeypatch.setattr(modes, "SYSFS_CPU", sysfs)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sysfs.rglob("*") if p.is_file()}
    intra, inter = torch.get_num_threads(), torch.get_num_interop_threads()

    def refuse(*_a, **_k):
        raise AssertionError("read_mode must not set anything")

    monkeypatch.setattr(torch, "set_num_threads", refuse)
    monkeypatch.setattr(torch, "set_num_interop_threads", refuse)
    read_mode("cpu")
    one = read_mode("cpu", threads=1)
    read_mode("cuda")  # no NVML here: reads nothing, still sets nothing
    assert one.params["cpu_threads"] == 1 and one.mode_id.startswith("cpu-t1-")
    assert (torch.get_num_threads(), torch.get_num_interop_threads()) == (intra, inter)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sysfs.rglob("*") if p.is_file()} == before
    assert all(call == ["nvpmodel", "-q"] for call in no_jetson)


def test_fake_sysfs_governor_and_frequencies(monkeypatch, no_jetson, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(modes, "SYSFS_CPU", empty)
    plain = read_mode("cpu", threads=2)
    assert plain.mode_id == "cpu-t2"
    assert "cpu_governor" not in plain.params and "cpu_freq_max_mhz" not in plain.params

    monkeypatch.setattr(modes, "SYSFS_CPU", fake_sysfs(tmp_path / "perf", {0: ("performance", 800000, 3600000),
                                                                       1: ("performance", 1200000, 3000000)}))
    perf = read_mode("cpu", threads=2)
    assert perf.params["cpu_governor"] == "performance"
    assert perf.params["cpu_freq_min_mhz"] == 800 and perf.params["cpu_freq_max_mhz"] == 3600
    assert perf.mode_id == "cpu-t2-performance-800-3600mhz"
    assert modes.read_cpu_cur_freq_mhz() == 2150  # mean of 2200 and 2100 MHz: a reading, kept out of the id

    monkeypatch.setattr(modes, "SYSFS_CPU", fake_sysfs(tmp_path / "capped", {0: ("performance", 800000, 2000000)}))
    capped = read_mode("cpu", threads=2)
    assert capped.mode_id != perf.mode_id and capped.params["cpu_freq_max_mhz"] == 2000

    monkeypatch.setattr(modes, "SYSFS_CPU", fake_sysfs(tmp_path / "mixed", {0: ("schedutil", 500000, 1800000),
                                                                        4: ("performance", 700000, 2400000)}))
    mixed = read_mode("cpu", threads=2)
    assert mixed.params["cpu_governor"] == "performance+schedutil"
    assert ID.match(mixed.mode_id), mixed.mode_id


def test_unreadable_sysfs_values_are_absent(monkeypatch, no_jetson, tmp_path):
    d = tmp_path / "cpu" / "cpu0" / "cpufreq"
    d.mkdir(parents=True)
    (d / "scaling_governor").write_text("\n")
    (d / "scaling_min_freq").write_text("0\n")
    (d / "scaling_max_freq").write_text("<unsupported>\n")
    monkeypatch.setattr(modes, "SYSFS_CPU", tmp_path / "cpu")
    mode = read_mode("cpu", threads=1)
    assert mode.params == {"cpu_threads": 1} and mode.mode_id == "cpu-t1"


def test_parse_nvpmodel():
    assert parse_nvpmodel(JETSON) == {"nvpmodel": "MAXN", "nvpmodel_id": 0}
    assert parse_nvpmodel(JETSON_15W) == {"nvpmodel": "MODE_15W_2CORE", "nvpmodel_id": 3}
    assert parse_nvpmodel("") == {}
    assert parse_nvpmodel("bash: nvpmodel: command not found\n\x00garbage 12\n") == {}
    assert parse_nvpmodel("NV Power Mode: MAXN\n") == {"nvpmodel": "MAXN"}  # id missing: absent


def test_jetson_mode_from_nvpmodel(monkeypatch, tmp_path):
    calls: list[list[str]] = []
    monkeypatch.setattr(modes, "run_command", lambda args, timeout_s=10.0: calls.append(list(args)) or JETSON_15W)
    monkeypatch.setattr(modes, "SYSFS_CPU", fake_sysfs(tmp_path / "cpu", {0: ("schedutil", 345600, 1420800)}))
    mode = read_mode("cpu", threads=2)
    assert mode.params["nvpmodel"] == "MODE_15W_2CORE" and mode.params["nvpmodel_id"] == 3
    assert mode.mode_id == "jetson-mode-15w-2core-3-cpu-t2-schedutil-346-1421mhz"
    assert ID.match(mode.mode_id)
    assert calls == [["nvpmodel", "-q"]]
    record = mode_record(mode).finalize({"env.host": "h"})
    assert record.params["nvpmodel"] == "MODE_15W_2CORE"


def test_run_command_missing_tool_is_none():
    assert modes.run_command(["tracker-no-such-command-xyz", "-q"]) is None
    assert modes.run_command([sys.executable, "-c", "print('NV Power Mode: MAXN'); print(0)"]) == "NV Power Mode: MAXN\n0\n"
    assert modes.run_command([sys.executable, "-c", "raise SystemExit(3)"]) is None


def test_apply_threads_validates(threads_kept):
    for bad in (0, -1, 10_000, (os.cpu_count() or 1) + 1, 1.5, True):
        with pytest.raises(ConfigError) as err:
            apply_threads(bad)
        message = str(err.value)
        assert repr(bad) in message and "\n" not in message
    assert torch.get_num_threads() == threads_kept  # nothing set on a refusal
    with pytest.raises(ConfigError, match="10000"):
        read_mode("cpu", threads=10_000)


def test_apply_threads_then_read(no_jetson, threads_kept):
    apply_threads(1)
    assert torch.get_num_threads() == 1
    mode = read_mode("cpu")
    assert mode.params["cpu_threads"] == 1 and mode.mode_id.startswith("cpu-t1")


def test_the_allocator_is_named_in_the_mode_only_where_it_retains(no_jetson, threads_kept):
    system, retain = read_mode("cpu", threads=1, allocator="system"), read_mode("cpu", threads=1, allocator="retain")
    assert "cpu_allocator" not in system.params and retain.params["cpu_allocator"] == "retain"
    assert retain.mode_id == system.mode_id + "-retain" and ID.match(retain.mode_id)
    assert read_mode("cpu", threads=1).mode_id == system.mode_id  # none named: the system's
    record = mode_record(retain)
    final = record.finalize({"env.host": "h"})  # against schemas/mode.json
    assert final.params["cpu_allocator"] == "retain" and "(threads and allocator excepted)" in record.description
    assert "allocator" not in mode_record(system).description
    with pytest.raises(ConfigError, match="allocator = 'jemalloc': expected one of system, retain"):
        read_mode("cpu", threads=1, allocator="jemalloc")


def test_unknown_device_is_refused(no_jetson):
    for bad in ("tpu", "cuda:x", "cpu:1", "", "cuda:²"):  # a digit that is not a decimal one
        with pytest.raises(ConfigError):
            read_mode(bad, threads=1)


def test_mode_record_against_schema(no_jetson, threads_kept):
    first = mode_record(read_mode())
    final = first.finalize({"env.host": "h"})
    assert first.kind == "mode" and final.params["mode"] == first.params["mode"]
    assert first.name == f"mode {first.params['mode']}"
    assert final.params["device"] == "cpu" and final.params["cpu_threads"] == str(torch.get_num_threads())
    assert first.description and first.params["mode"] in first.description
    second = mode_record(read_mode())
    assert second.config_key == first.config_key
    other_threads = 1 if torch.get_num_threads() != 1 else 2
    other = mode_record(read_mode(threads=min(other_threads, os.cpu_count() or 1)))
    if (os.cpu_count() or 1) > 1 or torch.get_num_threads() != 1:
        assert other.config_key != first.config_key
        assert other.params["mode"] != first.params["mode"]


def fake_nvml(calls: list[str], *, app_clocks: bool = True) -> types.ModuleType:
    """An NVML with one A100-like GPU idling at 210 MHz, application clocks 1410/1215, 400 W."""
    fake = types.ModuleType("pynvml")
    fake.NVML_CLOCK_SM, fake.NVML_CLOCK_MEM = 1, 2

    class NVMLError(Exception):
        pass

    def log(name, result):
        def f(*args):
            calls.append(name)
            return result(*args) if callable(result) else result
        return f

    def app_clock(handle, kind):
        if not app_clocks:
            raise NVMLError("Not Supported")
        return {1: 1410, 2: 1215}[kind]

    def handle(index):
        if index != 0:
            raise NVMLError("Invalid Argument")
        return "gpu0"

    fake.nvmlInit = log("init", None)
    fake.nvmlShutdown = log("shutdown", None)
    fake.nvmlDeviceGetHandleByIndex = log("handle", handle)
    fake.nvmlDeviceGetName = log("name", b"NVIDIA A100-SXM4-40GB")
    fake.nvmlDeviceGetClockInfo = log("clock", lambda h, kind: {1: 210, 2: 1215}[kind])
    fake.nvmlDeviceGetApplicationsClock = log("app_clock", app_clock)
    fake.nvmlDeviceGetPowerManagementLimit = log("power_limit", 400000)  # mW
    fake.nvmlDeviceGetPersistenceMode = log("persistence", 1)
    for setter in ("nvmlDeviceSetApplicationsClocks", "nvmlDeviceSetPowerManagementLimit",
                   "nvmlDeviceSetPersistenceMode", "nvmlDeviceSetGpuLockedClocks"):
        setattr(fake, setter, lambda *a, _n=setter: (_ for _ in ()).throw(AssertionError(f"{_n} called")))
    return fake


def test_gpu_mode_from_fake_nvml(monkeypatch, no_jetson, tmp_path):
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(calls))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(modes, "SYSFS_CPU", fake_sysfs(tmp_path / "cpu", {0: ("performance", 800000, 3600000)}))
    mode = read_mode("cuda", threads=2)
    p = mode.params
    assert mode.device == "cuda"
    assert p["gpu_name"] == "NVIDIA A100-SXM4-40GB"
    assert (p["gpu_sm_clock_mhz"], p["gpu_mem_clock_mhz"]) == (210, 1215)
    assert (p["gpu_app_sm_clock_mhz"], p["gpu_app_mem_clock_mhz"]) == (1410, 1215)
    assert p["gpu_power_limit_w"] == 400.0 and p["gpu_persistence"] == "enabled"
    assert p["cpu_threads"] == 2 and p["cpu_governor"] == "performance"  # the host part too
    assert set(p) <= ALLOWED
    # the id names settings (application clocks), not the idle clock of the moment
    assert mode.mode_id.startswith("cuda0-sm1410-mem1215-pl400w-"), mode.mode_id
    assert mode.mode_id == "cuda0-sm1410-mem1215-pl400w-t2-performance-800-3600mhz"
    assert calls[0] == "init" and calls[-1] == "shutdown"

    final = mode_record(mode).finalize({"env.host": "h"})
    assert final.params["gpu_sm_clock_mhz"] == "1410" and final.params["gpu_mem_clock_mhz"] == "1215"
    assert final.params["gpu_power_limit_w"] == "400.0"
    assert "210 MHz" in final.tags["mlflow.note.content"]  # the live clock goes to the description

    # cuda:1 through CUDA_VISIBLE_DEVICES=0 is NVML's GPU 0; an unknown GPU reads nothing
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,0")
    assert read_mode("cuda:1", threads=2).params["gpu_app_sm_clock_mhz"] == 1410
    assert not any(k.startswith("gpu_") for k in read_mode("cuda:0", threads=2).params)


def test_gpu_without_app_clocks_keeps_a_stable_id(monkeypatch, no_jetson, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], app_clocks=False))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(modes, "SYSFS_CPU", tmp_path)
    mode = read_mode("cuda:0", threads=1)
    assert "gpu_app_sm_clock_mhz" not in mode.params and mode.params["gpu_sm_clock_mhz"] == 210
    assert mode.mode_id == "cuda0-pl400w-t1"
    assert "gpu_sm_clock_mhz" not in mode_record(mode).params


def test_module_import_is_cheap():
    import subprocess

    code = "import sys, tracker.profile.modes; print('torch' in sys.modules, 'pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).parents[1])
    assert out.stdout.split() == ["False", "False"]


def test_the_cli_offers_every_allocator_mode_and_no_other() -> None:
    """The CLI's --allocator choices repeat modes.ALLOCATORS (so that --help imports nothing of
    the profiler): an allocator added to one and not the other fails here."""
    from tracker.cli.options import Allocator
    from tracker.profile.modes import ALLOCATORS

    assert [a.value for a in Allocator] == list(ALLOCATORS)


@pytest.mark.parametrize("omp, mkl", [("1", None), (str((os.cpu_count() or 1) + 1), None), ("1", "2")])  # unset: below
def test_a_new_process_reads_torchs_threads_and_versions_as_torch_says_them(omp: str | None, mkl: str | None,
                                                                            tmp_path: Path) -> None:
    """A measurement's parent reads torch's thread count and versions (its mode id and its
    configuration keys) without importing torch where the environment says them (since 0.9.10):
    the same figures torch gives, whatever OMP_NUM_THREADS and MKL_NUM_THREADS say. With an empty
    cache, a count the environment does not say is asked of torch."""
    ours, torchs, imported = _threads_in_new_process(omp, mkl, tmp_path / "cache")
    assert ours == torchs
    said = omp is not None and omp.isdigit() and int(omp) <= len(os.sched_getaffinity(0)) and mkl is None
    assert imported is not said  # torch asked only where the environment does not say


def _threads_in_new_process(omp: str | None, mkl: str | None, cache: Path, cpus: set[int] | None = None,
                            ask_torch: bool = True) -> list:
    """[tracker's [threads, torch version, cuda], torch's own, whether tracker imported torch] in a
    new process with these OMP_NUM_THREADS, MKL_NUM_THREADS (None: unset), tracker cache and CPUs;
    torch's own None where ``ask_torch`` is false (then the process need not import it at all)."""
    import json
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update({k: v for k, v in (("OMP_NUM_THREADS", omp), ("MKL_NUM_THREADS", mkl)) if v is not None})
    env["TRACKER_CACHE_DIR"] = str(cache)
    code = ("import json, os, sys; from tracker.environment import torch_threads, torch_versions; "
            + (f"os.sched_setaffinity(0, {sorted(cpus)!r}); " if cpus else "")
            + "ours = [torch_threads(), *torch_versions()]; imported = 'torch' in sys.modules; "
            + ("import torch; torchs = [torch.get_num_threads(), torch.__version__, torch.version.cuda]; "
               if ask_torch else "torchs = None; ")
            + "print(json.dumps([ours, torchs, imported]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_torchs_own_thread_count_is_asked_once_and_read_back_where_nothing_it_follows_from_changed(
        tmp_path: Path) -> None:
    """With OMP_NUM_THREADS unset, torch's starting count is asked of torch once and kept in
    tracker's cache (since 0.9.33): a later process reads it back without importing torch (about 2 s
    of every ``profile network``). Fewer CPUs is another entry (as another OpenMP or MKL setting is):
    what torch says there, not what the first process was told. A cache entry that is not a count is
    asked again."""
    cache = tmp_path / "cache"
    first = _threads_in_new_process(None, None, cache)
    assert first[2] and first[0] == first[1]  # asked of torch
    again = _threads_in_new_process(None, None, cache, ask_torch=False)
    assert again == [first[1], None, False]  # read back: torch not imported, torch's figures
    entries = list((cache / "threads").glob("*.json"))
    assert len(entries) == 1 and entries[0].read_text() == str(first[1][0])
    if len(os.sched_getaffinity(0)) > 1:
        one = _threads_in_new_process(None, None, cache, cpus={min(os.sched_getaffinity(0))})
        assert one[0] == one[1] and one[1][0] == 1 and one[2]  # fewer CPUs: not the first entry's count
        assert len(list((cache / "threads").glob("*.json"))) == 2
    entries[0].write_text('"two"')
    spoilt = _threads_in_new_process(None, None, cache)
    assert spoilt == [first[0], first[1], True] and entries[0].read_text() == str(first[1][0])  # asked, written again
