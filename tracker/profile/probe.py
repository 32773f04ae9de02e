"""The machine's speed when it measured: a speed probe, timed beside every measurement.

A shared machine's speed moves: this VM measured one network 17.0 ms and 22.8 ms an hour
apart, and at 53 % variation (the coefficient across two-second rounds) while other work ran
beside it, from what the other processes, the host's neighbours and its clocks did. A
measurement's own CI cannot see that (it is the spread within its window), and a fingerprint
learns it as if it were the network's. So the measuring child also times a fixed workload,
the *probe*, the same on every run of a device (a convolution, a depthwise one, a pointwise
one and a linear layer, fixed weights, float32, on the measurement's own threads), just
before the network is built (before what the process holds is read, so that nothing of the
probe counts as the network's memory) and just after its window: ``speed_probe_ms`` is the
median of those samples. It is released after each bracket (since 0.9.12: until then the network's
window and its layers' held it, inside the run's ``peak_rss_mb``). A training job's child (since
0.9.11) times it just before its first step (before its peak memory starts afresh, its telemetry
and its loop's clock) and just after its last
(once its peaks are read), holding none of it over its steps (since 0.9.12: its peak memory counted the
probe's tensors until then): a job that measured no step, or was interrupted, has none.
On that VM, two seconds apart, log latency and log probe correlated 0.9, and a network's
latency divided by the probe varied a third less than its latency did.

The probe is not the network and is not subtracted from anything: it is a second, small
measurement of the machine's state, recorded beside the first (as pyperf records the
machine's settings), so that runs measured at different speeds can be told apart
(``measurement_repeats``) and a fingerprint can learn a network's latency in the machine's
units. Its version is part of the metric's meaning: another probe is another unit.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

#: The probe's workload version: a different workload is a different unit (tag ``tracker.speed_probe``).
PROBE_VERSION = 1
#: The tag naming the probe's version on a run that has one.
PROBE_TAG = "tracker.speed_probe"
#: The tag of a run whose probe failed (its measurement stands, without a probe): why.
PROBE_ERROR_TAG = "tracker.speed_probe_error"
#: Timed runs per bracket (before and after a window), after one untimed run.
PROBE_RUNS = 15
#: The probe's input: one image of 32 channels at 56 x 56 on a CPU (about 1.7 ms on this VM's
#: core), a batch of 64 on a GPU (a single image there is a launch, not work).
PROBE_SHAPE_CPU = (1, 32, 56, 56)
PROBE_SHAPE_CUDA = (64, 32, 56, 56)


class SpeedProbe:
    """The fixed workload for ``device``; build it before the network and ``sample()`` it before the
    network is built and after its window. Its weights and input stay on the CPU between brackets:
    on a GPU they are moved there for a bracket and let go after it (the allocator's cache emptied),
    so the network's peak and a device cap never count them; ``release()`` lets go of them between
    brackets (a network's and a training job's, whose windows then hold none of it). A bracket that
    fails (out of device memory beside a network near its limit, say) ends the probe, not the
    measurement: ``error`` says why and the run has no probe."""

    def __init__(self, device: str = "cpu") -> None:
        from tracker.profile.timing import device_sync

        self.device = device
        self.sync = device_sync(device)
        self.samples_ms: list[float] = []
        self.error: str | None = None
        self.module, self.x = self._build()

    def _build(self) -> tuple[Any, Any]:
        """The workload: its layers and input, on the CPU, the same at every build (drawn from a generator
        seeded with PROBE_VERSION)."""
        import torch

        generator = torch.Generator().manual_seed(PROBE_VERSION)
        # the layers' own initialisation draws from torch's global generator, whose state is put back: a training
        # job builds its probe after its network, and its steps' dropout draws from it next (since 0.9.11)
        with torch.random.fork_rng(devices=[]):
            layers = [torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
                      torch.nn.Conv2d(64, 64, 3, padding=1, groups=64), torch.nn.ReLU(),
                      torch.nn.Conv2d(64, 32, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                      torch.nn.Linear(32, 10)]
        module = torch.nn.Sequential(*layers)
        with torch.no_grad():  # fixed weights, drawn from the probe's own generator: the run's seed is left alone
            for p in module.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
        x = torch.randn(PROBE_SHAPE_CUDA if self.device.startswith("cuda") else PROBE_SHAPE_CPU, generator=generator)
        return module.eval(), x

    def release(self) -> None:
        """Let go of the workload's layers and input (its samples and error kept): the next ``sample()``
        builds them again, the same. A network's run and a training job release their probe after each
        bracket, so that none of it is held over their windows: their peak memory and their memory cap
        never count it (since 0.9.12; until then they held it, about 0.5 MB on a CPU and 26 MB of host
        memory beside a GPU)."""
        self.module = self.x = None

    def sample(self, runs: int = PROBE_RUNS) -> list[float]:
        """Time ``runs`` runs (after one untimed); each is also kept in ``samples_ms``. None once a
        bracket has failed (``error``; the samples before it dropped too: a probe is whole or absent)."""
        if self.error is not None:
            return []
        try:
            if self.module is None:  # released after its last bracket: built again, the same workload
                self.module, self.x = self._build()
            out = self._timed(runs)
        except Exception as exc:  # noqa: BLE001  the probe's fault is the probe's, never the measurement's
            text = str(exc).strip().splitlines()
            self.error = f"{type(exc).__name__}: {text[0][:200] if text else ''}".rstrip(": ")
            self.samples_ms.clear()
            return []
        self.samples_ms.extend(out)
        return out

    def _timed(self, runs: int) -> list[float]:
        import torch

        from tracker.profile.worker import injected_fault

        if injected_fault() == "noprobe":  # for tests: a probe that fails
            raise RuntimeError("injected: the probe failed (TRACKER_FAULT)")
        cuda = self.device.startswith("cuda")
        clock = time.perf_counter_ns
        out: list[float] = []
        module = self.module.to(self.device) if cuda else self.module  # nn.Module.to moves it in place
        x = self.x.to(self.device) if cuda else self.x
        try:
            with torch.inference_mode():
                module(x)
                for _ in range(runs):
                    self.sync()
                    t0 = clock()
                    module(x)
                    self.sync()
                    out.append((clock() - t0) / 1e6)
        finally:
            if cuda:
                self.module.to("cpu")
                del x
                torch.cuda.empty_cache()
        return out


def probe_metrics(samples_ms: list[float] | None) -> dict[str, float]:
    """A run's probe metrics from its probe samples; none where it has none (runs before 0.9.9,
    imports, a child that measured without one)."""
    if not samples_ms:
        return {}
    return {"speed_probe_ms": float(statistics.median(samples_ms)), "speed_probe_count": float(len(samples_ms))}


def probe_json(samples_ms: list[float]) -> dict[str, Any]:
    return {"version": PROBE_VERSION, "samples_ms": [round(float(v), 6) for v in samples_ms]}


def probe_payload(probe: SpeedProbe) -> dict[str, Any]:
    """What a measuring child sends of its probe: ``speed_probe`` (its samples, :func:`probe_json`), or
    ``speed_probe_error`` where it failed (the measurement stands without it); nothing where it took no
    sample. A network's, a training job's and ``device speed``'s child each send it so."""
    if probe.samples_ms:
        return {"speed_probe": probe_json(probe.samples_ms)}
    return {"speed_probe_error": probe.error} if probe.error else {}


def probe_record(payload: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """A run's probe metrics and tags from its child's payload (:func:`probe_payload`): ``speed_probe_ms``
    and its count with the probe's version (``PROBE_TAG``), or why it failed (``PROBE_ERROR_TAG``);
    neither where there is none. A network's run and a training job's run are given them so."""
    probe = payload.get("speed_probe")
    metrics = probe_metrics(probe["samples_ms"] if probe else None)
    if metrics:
        return metrics, {PROBE_TAG: str(probe["version"])}
    if payload.get("speed_probe_error"):
        return metrics, {PROBE_ERROR_TAG: str(payload["speed_probe_error"])[:500]}
    return metrics, {}


#: Brackets of PROBE_RUNS that ``tracker device speed`` times: as many as a measurement with its layers.
SPEED_NOW_BRACKETS = 3


def time_now(job: dict[str, Any]) -> dict[str, Any]:
    """In a measuring child (job kind ``probe``): the speed probe alone, in the mode a measurement of
    ``job`` would run in (its allocator, threads and device), ``SPEED_NOW_BRACKETS`` brackets of
    ``PROBE_RUNS``: the machine's speed now, in the unit every run's ``speed_probe_ms`` is."""
    from tracker.profile.modes import enter_mode

    mode = enter_mode(job)
    probe = SpeedProbe(job.get("device", "cpu"))
    for _ in range(SPEED_NOW_BRACKETS):
        probe.sample()
    return {"mode": mode.mode_id, **probe_payload(probe)}


def speed_now(device: str = "cpu", threads: int | None = None, allocator: str | None = None,
              timeout_s: float = 120.0) -> dict[str, Any]:
    """The machine's speed now (``tracker device speed``): the speed probe timed in a measuring child
    in the mode a measurement with these settings would run in, holding the device as a measurement
    does (so it never runs beside one of this machine's). Its median, in the unit of every run's
    ``speed_probe_ms``: what ``tracker predict --speed-probe-ms`` takes. A probe that fails is a
    MeasurementError."""
    from tracker.errors import MeasurementError
    from tracker.profile.child import run_child

    job = {"kind": "probe", "device": device, "threads": threads, "allocator": allocator}
    result = run_child(job, timeout_s=timeout_s)
    payload = result.payload or {}
    if not result.ok or "speed_probe" not in payload:
        why = payload.get("speed_probe_error") or result.message or result.reason or "no result"
        raise MeasurementError(f"the speed probe failed on {device}: {why}")
    from tracker.profile.stats import median_ci

    samples = [float(v) for v in payload["speed_probe"]["samples_ms"]]
    quartiles = statistics.quantiles(samples, n=4)
    return {"device": device, "mode": payload["mode"], "speed_probe_ms": float(statistics.median(samples)),
            "speed_probe_count": len(samples), "quartiles_ms": [quartiles[0], quartiles[2]],
            # the 95 % CI of that median (order statistics, as a measurement's): a usual speed inside it is one
            # this probe cannot tell from the speed now (since 0.9.12)
            "median_ci_ms": list(median_ci(sorted(samples))),
            "speed_probe_version": int(payload["speed_probe"]["version"]), "device_wait_s": result.device_wait_s}


def measured_speed(warehouse: Any, mode: str, version: int = PROBE_VERSION) -> dict[str, Any] | None:
    """The speed probe's median over the warehouse's finished whole measurements in ``mode`` that timed
    the probe of ``version`` (another version's is another unit: left out since 0.9.11, counted in
    ``other_versions``) and how many there are (the machine's usual speed there, which a latency
    fingerprint's labels are put near); None where it holds none of either (or there is no warehouse).
    A warehouse whose views an older tracker made (no ``speed_probe_version``) is a StoreError saying
    to load it."""
    import duckdb

    from tracker.errors import StoreError
    from tracker.warehouse.load import connect_loaded, older_probe_views

    if not warehouse.exists():
        return None
    con = connect_loaded(warehouse)
    try:
        ((median, count, others),) = con.execute(
            "SELECT median(speed_probe_ms) FILTER (WHERE speed_probe_version = $version), "
            "count(*) FILTER (WHERE speed_probe_version = $version), "
            "count(*) FILTER (WHERE speed_probe_version IS DISTINCT FROM $version) FROM whole_network_runs "
            "WHERE mode = $mode AND status = 'FINISHED' AND speed_probe_ms > 0",
            {"mode": mode, "version": int(version)}).fetchall()
    except duckdb.BinderException as exc:
        if "speed_probe_version" not in str(exc):
            raise
        raise StoreError(older_probe_views(warehouse)) from None
    finally:
        con.close()
    if not count and not others:
        return None
    return {"speed_probe_ms": float(median) if count else None, "measurements": int(count),
            "speed_probe_version": int(version), "other_versions": int(others)}
