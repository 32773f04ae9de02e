"""Describe stage: what a network is (its architecture), independent of how fast it runs."""

from __future__ import annotations

from typing import Any


def describe(ref: str, input_size: int | None = None) -> Any:
    """Describe a zoo name or spec file: its graph with per-node features (``Description``)."""
    from tracker.zoo.spec import check_input_size, resolve

    model_ref = resolve(ref)
    check_input_size(model_ref, input_size)
    return describe_ref(model_ref, input_size or model_ref.input_size)


def describe_ref(model_ref: Any, input_size: int) -> Any:
    """Describe a resolved network (a ``ModelRef``) at ``input_size``: what ``describe`` and a
    measured run's description (``profile.api``) both are, so that a network predicted is
    described as the networks learnt from were.

    Built and run under seed 0, as a measuring child builds it, whatever the caller's random state:
    a detection network's heads run on as many proposals as its random weights let through on its
    random image, which its description's shapes (and hash) record. Unseeded, they changed with
    what the process had drawn before (a campaign describes many networks in one process)."""
    import torch

    from tracker.describe.graph import describe_module

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_ref.build()
        if model_ref.is_detection:
            return describe_module(model, model_ref.name, input_size, example=[torch.rand(3, input_size, input_size)])
        return describe_module(model, model_ref.name, input_size, in_channels=model_ref.in_channels,
                               input_shape=model_ref.input_shape, input_vocab=model_ref.input_vocab)
