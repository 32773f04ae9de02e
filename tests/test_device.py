"""tracker device show's reasons and notes: why a reading is absent, what moves measurements."""

from pathlib import Path

from tracker.profile.inventory import notes, rapl_reason


def test_rapl_is_said_absent_for_what_stops_it(tmp_path: Path) -> None:
    """No powercap at all, no package domain, a package domain without a readable counter: each
    said as what it is; a readable package counter is no reason at all."""
    root = tmp_path / "powercap"
    assert "is absent" in rapl_reason(root)
    root.mkdir()
    (root / "intel-rapl:0:0").mkdir()  # a subdomain (core) alone is not a package
    assert rapl_reason(root) == f"no RAPL package domain under {root}"
    package = root / "intel-rapl:0"
    package.mkdir()
    (package / "name").write_text("package-0\n")
    assert "not readable by this user" in rapl_reason(root) and str(package / "energy_uj") in rapl_reason(root)
    (package / "energy_uj").write_text("123456\n")
    assert rapl_reason(root) is None


def test_notes_name_what_moves_measurements_and_only_that() -> None:
    quiet = {"device": "cpu", "governor": "performance", "cores": 8, "load_1min": 0.2, "hypervisor": False,
             "threads": 4, "allocator": "retain", "retain_available": True, "gpu_persistence": "enabled"}
    assert notes(quiet) == []
    noisy = notes({**quiet, "governor": "powersave", "cores": 2, "load_1min": 1.5, "hypervisor": True, "threads": 2,
                   "allocator": None, "gpu_persistence": "disabled"})
    assert len(noisy) == 6
    governor, load, vm, threads, allocator, persistence = noisy
    assert "'powersave'" in governor and "'performance' holds it" in governor
    assert load.startswith("load average 1.50 over the last minute on 2 cores")
    assert "virtual machine" in vm and "--threads 1" in threads
    assert "--allocator retain" in allocator and "nvidia-smi -pm 1" in persistence
    # no governor to read is said as such; a C library without mallopt gets no allocator advice
    assert notes({**quiet, "governor": None})[0].startswith("no CPU frequency governor to read")
    assert notes({**quiet, "allocator": "system", "retain_available": False}) == []
