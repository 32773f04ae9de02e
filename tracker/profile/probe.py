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
median of those samples.
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
    so the network's peak and a device cap never count them. A bracket that fails (out of device
    memory beside a network near its limit, say) ends the probe, not the measurement: ``error`` says
    why and the run has no probe."""

    def __init__(self, device: str = "cpu") -> None:
        import torch

        from tracker.profile.timing import device_sync

        generator = torch.Generator().manual_seed(PROBE_VERSION)
        layers = [torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
                  torch.nn.Conv2d(64, 64, 3, padding=1, groups=64), torch.nn.ReLU(),
                  torch.nn.Conv2d(64, 32, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                  torch.nn.Linear(32, 10)]
        module = torch.nn.Sequential(*layers)
        with torch.no_grad():  # fixed weights, drawn from the probe's own generator: the run's seed is left alone
            for p in module.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
        self.device = device
        self.module = module.eval()
        self.x = torch.randn(PROBE_SHAPE_CUDA if device.startswith("cuda") else PROBE_SHAPE_CPU, generator=generator)
        self.sync = device_sync(device)
        self.samples_ms: list[float] = []
        self.error: str | None = None

    def sample(self, runs: int = PROBE_RUNS) -> list[float]:
        """Time ``runs`` runs (after one untimed); each is also kept in ``samples_ms``. None once a
        bracket has failed (``error``; the samples before it dropped too: a probe is whole or absent)."""
        if self.error is not None:
            return []
        try:
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
