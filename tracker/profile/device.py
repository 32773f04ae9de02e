"""Which devices this machine can measure on."""

from __future__ import annotations

from tracker.errors import TrackerError


def check_device(device: str) -> None:
    """Refuse a device this machine does not have, in one line."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise TrackerError(f"device {device!r} is not available on this machine (no CUDA GPU); use --device cpu")
