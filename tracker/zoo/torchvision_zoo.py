"""Torchvision models by name, always built with ``weights=None`` (nothing is downloaded)."""

from __future__ import annotations

import difflib
import sys
import types
from functools import cache
from typing import Any

from tracker.errors import UnknownModelError

#: Models whose stem needs a larger input than 224 px.
INPUT_SIZE = {"inception_v3": 299}

#: ``torchvision/ops/roi_align.py`` imports ``torch._dynamo.utils.is_compile_supported`` at
#: module level and calls it only inside ``roi_align`` itself. Importing ``torch._dynamo`` for it
#: costs 1.6 s of the 2.2 s that ``import torchvision`` takes after torch on this machine, in
#: every measuring child. Checked for these torchvision releases (pyproject pins 0.29.1).
DYNAMO_FREE_TORCHVISION = ("0.29.",)


def _deferred(module: str, name: str) -> Any:
    """A function that imports ``module`` for real on its first call and calls its ``name``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        import importlib

        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def import_torchvision() -> types.ModuleType:
    """``import torchvision`` without importing ``torch._dynamo`` on the way (2.2 s → 0.3 s).

    While torchvision imports, ``torch._dynamo`` and ``torch._dynamo.utils`` are stand-in
    modules; the one name torchvision takes from them is a function that imports the real
    module when called. They are taken out again before this returns, so a later
    ``import torch._dynamo`` (a ``roi_align`` call, ``torch.compile``) gets the real one. A plain
    import where torchvision or torch._dynamo is imported already, or for a torchvision release
    not in ``DYNAMO_FREE_TORCHVISION``."""
    import importlib.metadata

    import torch

    if "torchvision" in sys.modules or "torch._dynamo" in sys.modules or not importlib.metadata.version(
            "torchvision").startswith(DYNAMO_FREE_TORCHVISION):
        import torchvision

        return torchvision
    package = types.ModuleType("torch._dynamo", "stand-in while torchvision imports (tracker.zoo.torchvision_zoo)")
    package.__path__ = []  # a package: its submodule resolves from sys.modules
    utils = types.ModuleType("torch._dynamo.utils", package.__doc__)
    utils.is_compile_supported = _deferred("torch._dynamo.utils", "is_compile_supported")  # type: ignore[attr-defined]
    stand_ins = {"torch._dynamo": package, "torch._dynamo.utils": utils}
    sys.modules.update(stand_ins)
    try:
        import torchvision
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
        if torch.__dict__.get("_dynamo") is package:  # not getattr: torch would import the real one
            del torch._dynamo
    return torchvision


#: torchvision's modules whose networks the zoo lists, by the zoo's name for them.
LISTED = {"classification": "models", "detection": "models.detection", "segmentation": "models.segmentation"}


@cache
def _listed() -> dict[str, tuple[str, ...]]:
    """torchvision's network names, module by module. Read from tracker's cache where this
    torchvision listed them before (since 0.8.8: checking a name, as ``tracker predict`` does,
    then needs neither torch nor torchvision, 1.5 s of a new process); else listed and kept."""
    from tracker import cache as disk

    entry = f"zoo-names-torchvision-{disk.package_version('torchvision')}-torch-{disk.package_version('torch')}.json"
    hit = disk.read_json(entry)
    if isinstance(hit, dict) and set(hit) == set(LISTED) and all(
            isinstance(names, list) and all(isinstance(n, str) for n in names) for names in hit.values()):
        return {kind: tuple(names) for kind, names in hit.items()}
    from operator import attrgetter

    torchvision = import_torchvision()
    listed = {kind: tuple(sorted(torchvision.models.list_models(module=attrgetter(module)(torchvision))))
              for kind, module in LISTED.items()}
    disk.write_json(entry, {kind: list(names) for kind, names in listed.items()})
    return listed


def classification_models() -> tuple[str, ...]:
    return _listed()["classification"]


def detection_models() -> tuple[str, ...]:
    return _listed()["detection"]


def segmentation_models() -> tuple[str, ...]:
    """torchvision's semantic segmentation networks (FCN, DeepLabV3, LR-ASPP; since 0.8.5): a
    tensor in, a dict out (``out``: ``(N, classes, H, W)``, 21 classes by default)."""
    return _listed()["segmentation"]


def all_models() -> tuple[str, ...]:
    return tuple(sorted(classification_models() + detection_models() + segmentation_models()))


def detection_input_size(name: str) -> int:
    """The size a detection network resizes its images to by default (its transform's ``min_size``,
    in inference): 300 for SSD300, 320 for the networks named so, 800 for the others."""
    return 300 if name.startswith("ssd300") else 320 if "320" in name else 800


def default_input_size(name: str) -> int:
    """224 px, 299 for inception_v3, and since 0.8.5 a detection network's own (``detection_input_size``)."""
    if name in INPUT_SIZE:
        return INPUT_SIZE[name]
    return detection_input_size(name) if name in detection_models() else 224


def sized_detector(model: Any, size: int) -> Any:
    """A torchvision detection network that resizes its images to ``size`` pixels square (its
    transform's ``min_size``, ``max_size`` and, for SSD, ``fixed_size``), so that it computes at
    the input size a run records. Before 0.8.5 it resized any input to its own size (800 for
    Faster R-CNN), whatever ``--input-size`` said."""
    transform = model.transform
    transform.min_size, transform.max_size = (int(size),), int(size)
    if getattr(transform, "fixed_size", None) is not None:
        transform.fixed_size = (int(size), int(size))
    return model


def check_model_name(name: str) -> None:
    """Raise UnknownModelError, with the closest names, for a name the zoo does not know."""
    names = all_models()
    if name not in names:
        # matched in lower case, and closer (RESNET18 had no hint, nosuchnet "mnasnet1_3" until 0.9.4)
        lower = {n.lower(): n for n in names}
        close = [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=3, cutoff=0.6)]
        hint = f"; did you mean {', '.join(close)}?" if close else "; `tracker zoo list` shows them all"
        raise UnknownModelError(f"unknown model {name!r}{hint}")


def build_model(name: str, input_size: int | None = None, **kwargs: Any) -> Any:
    """An untrained torchvision model (classification, detection or segmentation), in eval mode;
    a detection or segmentation network's backbone untrained too (nothing is downloaded). A
    detection network given ``input_size`` computes at it (``sized_detector``)."""
    torchvision = import_torchvision()

    check_model_name(name)
    if name in detection_models() or name in segmentation_models():
        kwargs.setdefault("weights_backbone", None)
        model = torchvision.models.get_model(name, weights=None, **kwargs).eval()
        return sized_detector(model, input_size) if input_size and name in detection_models() else model
    if name in ("googlenet", "inception_v3"):
        kwargs.setdefault("aux_logits", False)
        kwargs.setdefault("init_weights", False)
    model = torchvision.models.get_model(name, weights=None, **kwargs)
    return model.eval()
