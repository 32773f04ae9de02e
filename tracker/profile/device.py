"""Which devices this machine can measure on."""

from __future__ import annotations

from tracker.environment import cuda_index
from tracker.errors import TrackerError


def is_device_name(device: str) -> bool:
    """Whether ``device`` names a device as tracker takes it: the CPU, or CUDA device N (``cuda``,
    ``cuda:N``, as ``environment.cuda_index`` reads them). ``cuda1`` or ``cuda:x`` do not, and would
    otherwise be refused by torch only in the measuring child."""
    return device == "cpu" or cuda_index(device) is not None


def canonical_device(device: str) -> str:
    """One name per device, so that one configuration has one key: ``cuda:0`` (or ``cuda:00``) is
    ``cuda``, torch's current device in a fresh measuring child, and ``cuda:07`` is ``cuda:7``.
    A name that is no device (``is_device_name``) comes back as given, for its check to refuse."""
    index = cuda_index(device)
    if index is None:
        return device
    return "cuda" if index == 0 else f"cuda:{index}"


def check_device(device: str) -> None:
    """Refuse a device this machine does not have, in one line: no CUDA at all, or no CUDA
    device of that number (which the measuring child would fail on, a run per configuration)."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():  # cuda:0 comes here as cuda (canonical_device): both named
            named = f"{device!r} (cuda:0)" if device == "cuda" else repr(device)
            raise TrackerError(f"device {named} is not available on this machine (no CUDA GPU): measure on cpu")
        index = cuda_index(device)
        if index is not None and index >= (count := torch.cuda.device_count()):
            raise TrackerError(f"device {device!r} is not available on this machine: it has {count} CUDA "
                               f"device{'' if count == 1 else 's'} (cuda:0 to cuda:{count - 1})")
