"""Torchvision models by name, always built with ``weights=None`` (nothing is downloaded)."""

from __future__ import annotations

import difflib
from functools import cache
from typing import Any

from tracker.errors import UnknownModelError

#: Models whose stem needs a larger input than 224 px.
INPUT_SIZE = {"inception_v3": 299}


@cache
def classification_models() -> tuple[str, ...]:
    import torchvision

    return tuple(sorted(torchvision.models.list_models(module=torchvision.models)))


@cache
def detection_models() -> tuple[str, ...]:
    import torchvision

    return tuple(sorted(torchvision.models.list_models(module=torchvision.models.detection)))


def all_models() -> tuple[str, ...]:
    return tuple(sorted(classification_models() + detection_models()))


def default_input_size(name: str) -> int:
    return INPUT_SIZE.get(name, 224)


def check_model_name(name: str) -> None:
    """Raise UnknownModelError, with the closest names, for a name the zoo does not know."""
    names = all_models()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `tracker zoo list` shows them all"
        raise UnknownModelError(f"unknown model {name!r}{hint}")


def build_model(name: str, **kwargs: Any) -> Any:
    """An untrained torchvision model (classification or detection), in eval mode."""
    import torchvision

    check_model_name(name)
    if name in detection_models():
        kwargs.setdefault("weights_backbone", None)
        return torchvision.models.get_model(name, weights=None, **kwargs).eval()
    if name in ("googlenet", "inception_v3"):
        kwargs.setdefault("aux_logits", False)
        kwargs.setdefault("init_weights", False)
    model = torchvision.models.get_model(name, weights=None, **kwargs)
    return model.eval()
