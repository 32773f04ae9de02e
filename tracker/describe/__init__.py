"""Describe stage: what a network is (its architecture), independent of how fast it runs."""

from __future__ import annotations

from typing import Any


def describe(ref: str, input_size: int | None = None) -> Any:
    """Describe a zoo name or spec file: its graph with per-node features (``Description``)."""
    from tracker.describe.graph import describe_module
    from tracker.zoo.spec import check_input_size, resolve

    model_ref = resolve(ref)
    check_input_size(model_ref, input_size)
    size = input_size or model_ref.input_size
    model = model_ref.build()
    if model_ref.is_detection:
        import torch

        return describe_module(model, model_ref.name, size, example=[torch.rand(3, size, size)])
    return describe_module(model, model_ref.name, size, in_channels=model_ref.in_channels,
                           input_shape=model_ref.input_shape, input_vocab=model_ref.input_vocab)
