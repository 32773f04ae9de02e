"""Describe stage: what a network is (its architecture), independent of how fast it runs."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracker.describe.graph import Description
    from tracker.zoo.spec import ModelRef


def describe(ref: str, input_size: int | None = None) -> Any:
    """Describe a zoo name or spec file: its graph with per-node features (``Description``), read
    back where it was described before (:func:`described`: tracker's cache, since 0.9.10 for
    ``tracker describe`` too, which built and traced the network each time, about 2 s of torch)."""
    from tracker.zoo.spec import check_input_size, resolve

    model_ref = resolve(ref)
    check_input_size(model_ref, input_size)
    return described(model_ref, input_size or model_ref.input_size)


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
    from tracker.errors import ConfigError, allocation_failed

    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = model_ref.build(input_size)  # a detection network at that size (0.8.5; its own before)
            if model_ref.is_detection:
                return describe_module(model, model_ref.name, input_size, example=[torch.rand(3, input_size, input_size)])
            return describe_module(model, model_ref.name, input_size, in_channels=model_ref.in_channels,
                                   input_shape=model_ref.input_shape, input_vocab=model_ref.input_vocab)
    except (MemoryError, RuntimeError) as exc:  # its forward pass's: a traceback until 0.9.7 (building it: build's)
        if (asked := allocation_failed(exc)) is None:
            raise
        at = "" if model_ref.input_shape else f" at {input_size} px"
        raise ConfigError(f"network {model_ref.name} needs more memory than this machine gives to be described{at} "
                          f"({asked} failed)") from None


def spec_json(network_spec: dict[str, Any] | None) -> str | None:
    """A spec's content as :func:`described_json` keys it (None for a zoo name)."""
    return None if network_spec is None else json.dumps(network_spec, sort_keys=True)


def unplaced(network_spec: Any) -> Any:
    """A spec without where its files lay (a network of one's own's ``file``, at any depth: a pruned
    one's ``base_spec`` too): what was measured, whichever folder its code was in."""
    if isinstance(network_spec, dict):
        return {k: unplaced(v) for k, v in network_spec.items() if k != "file"}
    if isinstance(network_spec, list):
        return [unplaced(v) for v in network_spec]
    return network_spec


@lru_cache(maxsize=256)
def described_json(name: str, network_spec_json: str | None, input_size: int) -> tuple[str, str, str]:
    """(network name, description hash, description JSON) of a zoo network (``network_spec_json``
    None) or of a spec's content (:func:`spec_json`), described once per process: a campaign plans
    a network at each of its batch sizes and phases, and ``tracker predict`` (the demo's unseen
    networks, a search space) describes again what was measured in the same process. The JSON is
    the form a measured run logs; a spec file edited since is other content, described anew.
    Since 0.8.8 a later process reads it back from tracker's cache too (:func:`_cache_entry`)."""
    from tracker import cache
    from tracker.zoo import resolve
    from tracker.zoo.spec import spec_ref

    entry = _cache_entry(name, network_spec_json, input_size)
    if entry is not None:
        hit = cache.read_json(entry)
        if isinstance(hit, list) and len(hit) == 3 and all(isinstance(part, str) for part in hit):
            return hit[0], hit[1], hit[2]
    model_ref = resolve(name) if network_spec_json is None else spec_ref(json.loads(network_spec_json))
    desc = describe_ref(model_ref, input_size)  # as tracker predict describes it
    described = (model_ref.name, desc.description_hash, desc.to_json_text())
    if entry is not None:
        cache.write_json(entry, list(described), keep=DESCRIPTIONS_KEPT)
    return described


#: The most descriptions kept on disk, those used last (the demo's 25 networks take 1.2 MB).
DESCRIPTIONS_KEPT = 2000


def _cache_entry(name: str, network_spec_json: str | None, input_size: int) -> str | None:
    """The disk cache entry of a description (since 0.8.8): a new process (``tracker predict``, a
    campaign resumed) reads a network described before rather than importing torch, building and
    tracing it again (about 2 s of ``tracker predict``'s 5). Named after what the description
    follows from: the network (a zoo name or a spec's content), its input size, tracker's describe
    and zoo sources, and the installed torch and torchvision. A network of one's own (a ``module``
    spec, here or as a pruned spec's base) is never cached: its spec holds its file and the
    modules beside it, not the packages it imports from elsewhere nor the environment it reads."""
    import hashlib

    from tracker import cache
    from tracker.zoo.spec import own_code_spec

    if network_spec_json is not None and own_code_spec(json.loads(network_spec_json)) is not None:
        return None
    key = json.dumps([name, network_spec_json, int(input_size), cache.source_digest("describe", "zoo"),
                      cache.package_version("torch"), cache.package_version("torchvision")])
    return f"descriptions/{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def described(model_ref: ModelRef, input_size: int) -> Description:
    """:func:`describe_ref` of a resolved network, from this process's :func:`described_json`: a
    network described already (measured, or predicted before) is read back, not built and traced
    again. Each call returns a ``Description`` of its own, read from the logged JSON."""
    from tracker.describe.graph import Description

    return Description.from_json(json.loads(described_json(model_ref.name, spec_json(model_ref.spec), input_size)[2]))
