"""Describe stage: what a network is (its architecture), independent of how fast it runs."""

from __future__ import annotations

import hashlib
from typing import Any


def architecture_hash(model: Any) -> str:
    """A stable hash of a network's architecture: module tree, layer settings, tensor shapes.

    Two builds of the same architecture hash equal whatever their weights; any change of
    layer, width, kernel or stride changes it.
    """
    h = hashlib.sha256(repr(model).encode())
    for name, p in model.state_dict().items():
        h.update(f"{name}:{tuple(p.shape)}:{p.dtype};".encode())
    return h.hexdigest()[:16]
