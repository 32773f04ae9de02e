"""Multi-DNN workloads, after DNN stats' mapping database generator.

A *mapping* assigns each of N networks a split index and the device of each stage: the
network's layers (the call nodes of its ``torch.fx`` graph, in execution order) ``[0, split)``
run on the first device and ``[split, layers)`` on the second. ``split = 0`` runs the whole
network on the second device and ``split = layers`` on the first. Compact form, one network
per comma: ``resnet18@30:cpu>cuda,mobilenet_v2@153:cpu>cpu``. A network is a zoo name, a spec
file or a network of your own (``models/mynet.py:TinyNet@3:cpu>cpu``), named in the mapping's
run as its own runs name it.

``generate`` draws mappings at random from a seed; ``run_workload`` (in the measuring child)
runs all networks of one mapping at once, one thread each, for a sampling window after a
warm-up, and returns per network and stage: inferences completed, mean inference time, mean
transfer time between the stages, throughput, and the telemetry over the window.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterator

from tracker.console import counted, decimal_number, integer_number
from tracker.errors import ConfigError, OptionError, UnknownModelError
from tracker.profile.device import canonical_device, is_device_name
from tracker.settings import MAX_NETS  # in settings, so the CLI reads it without this module

DEVICES = ("cpu", "cuda")
DEFAULT_NUM_NETS = (2, 6)
#: Why, as a refusal says it.
MAX_NETS_WHY = "all in one child, a thread each: more share the device too thinly to be measured"
#: the most mappings one draw may try, ``--sets`` x ``--samples``: each is a workload ``run`` measures for
#: its warm-up and window (12 s by default: 100,000 are some two weeks), and ``generate`` holds them all
#: to write them; any number was taken until 0.9.8 (100,000,000 x 1,000 grew to 1 GB in 8 s)
MAX_DRAWS = 100_000
#: a model "fits" when its float32 weights, times the most networks of a workload, take at
#: most this share of the device's memory (activations and the other stages need the rest)
FIT_SHARE = 0.25


@dataclass(frozen=True)
class NetMapping:
    model: str
    split: int
    devices: tuple[str, str]
    #: where the network was given, as its errors name it: what the user typed (``mapping entry
    #: 'resnet18:tpu'``) or its place in a file (``m.json[0]: network 1 (resnet18)``); "" for a
    #: drawn one (its compact form). Not part of its identity.
    given: str = field(default="", compare=False, repr=False)
    #: the layer count a file says the network had where it was written (``generate --out``), which its
    #: split counts in; None where none is said. Not part of its identity.
    layers: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:  # one name per device: cuda:0 is cuda, in its key as in its compact form
        object.__setattr__(self, "devices", tuple(canonical_device(d) for d in self.devices))

    def compact(self, model: str | None = None) -> str:
        """``model@split:first>second``; ``model``: another name for the network (a key's identity)."""
        return f"{model or self.model}@{self.split}:{self.devices[0]}>{self.devices[1]}"

    @property
    def label(self) -> str:
        """The network as an error names it: as given, else its compact form (always that until 0.9.6,
        ``mobilenet_v3_small@157:tpu>tpu`` for a typed ``mobilenet_v3_small:tpu``)."""
        return self.given or self.compact()


@dataclass(frozen=True)
class Mapping:
    networks: tuple[NetMapping, ...]
    #: where it was given, as an error names it (``m.json[0]``, ``mapping 'resnet18:cpu,...'``); not part of it
    given: str = field(default="", compare=False, repr=False)

    def compact(self) -> str:
        return ",".join(n.compact() for n in self.networks)

    def to_json(self, specs: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        return {"networks": [{"model": n.model, "split": n.split, "devices": list(n.devices),
                              "layers": layer_count(n.model, specs)} for n in self.networks]}

    @property
    def uses_cuda(self) -> bool:
        return any(d.startswith("cuda") for n in self.networks for d in n.devices)

    @property
    def gpus(self) -> tuple[str, ...]:
        """The CUDA devices its stages name, each once, in the order they are first named."""
        return tuple(dict.fromkeys(d for n in self.networks for d in n.devices if d.startswith("cuda")))

    @property
    def read_device(self) -> str:
        """The device whose mode, power, utilisation and memory a run of it reads: the first GPU its
        stages name (``cuda:1`` for ``resnet18@30:cpu>cuda:1``; until 0.9.8 GPU 0's were read for every
        mapping), else ``cpu``. One of two GPUs named is read alone (``unread_note``)."""
        return self.gpus[0] if self.gpus else "cpu"

    def unread_note(self) -> str | None:
        """Where its stages use more than one GPU, what a run of it says of those it does not read."""
        if len(self.gpus) < 2:
            return None
        others = ", ".join(self.gpus[1:])
        return (f"its stages use {len(self.gpus)} GPUs ({', '.join(self.gpus)}): the mode, GPU power, utilisation and "
                f"memory are {self.read_device}'s alone ({others} not read)")


def mapping_description(mapping: Mapping, duration_s: float, warmup_s: float,
                        specs: dict[str, dict[str, Any]] | None = None) -> str:
    """A mapping run's description: how many networks, and how many split (until 0.9.3 "N networks
    at once, each split between two stages", of one network, and of networks run whole)."""
    n = len(mapping.networks)
    split = sum(0 < net.split < layer_count(net.model, specs) for net in mapping.networks)
    parts = ("whole" if not split else "each split between two stages" if split == n
             else f"{split} of them split between two stages")
    return (f"{counted(n, 'network')}{' at once' if n > 1 else ''} for {duration_s:g} s after "
            f"{warmup_s:g} s of warm-up, {parts}: {mapping.compact()}.")


def parse_net(text: str) -> NetMapping:
    """``model@split:dev>dev`` (a whole network on one device: ``model:cpu``). Text not of that form is
    an :class:`OptionError` (typed on the command line, ``--mapping``, a usage error; a file's
    ``"mapping"`` is said as the file's, a ConfigError, by :func:`from_json`); a network that cannot be
    read (an unknown name, a spec file's contents) is the error its reading raises."""
    import re

    # the devices after the first colon that starts them all: `cuda:1` is one (until 0.9.3 the entry
    # was cut at its last colon, and a mapping naming cuda:N, as `mapping` params log it, was refused)
    found = re.search(r":(?P<devs>[A-Za-z][\w.-]*(?::\d+)?(?:>[A-Za-z][\w.-]*(?::\d+)?)*)$", text.strip())
    if found is None or found.start() == 0:
        raise OptionError(f"mapping entry {text!r}: expected model@split:device>device")
    head, devs = text.strip()[:found.start()], found.group("devs")
    model, at, split_text = head.partition("@")
    if devs.count(">") > 1:
        raise OptionError(f"mapping entry {text!r}: {devs.count('>') + 1} devices; a network is split between two "
                          "stages at most (device>device)")
    first, _, second = devs.partition(">")
    devices = (first, second or first)
    given = f"mapping entry {text.strip()!r}"
    if not at:  # the whole network on one device
        with _named(given):
            return NetMapping(model, layer_count(model), devices, given)
    split = integer_number(split_text)  # ASCII digits alone (@٣ was split 3 until 0.9.14)
    if split is None:
        raise OptionError(f"mapping entry {text!r}: split index {split_text!r} is not a whole number")
    return NetMapping(model, split, devices, given)


def parse_mapping(text: str) -> Mapping:
    """Networks apart by commas, but for those inside a network of your own's arguments
    (``mynet.py:Net(width=2, depth=3)@4:cpu>cuda``, since 0.9.1). Its form's errors are
    :class:`OptionError` (see :func:`parse_net`)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char in "([{") - (char in ")]}")
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    if len(parts) > 1 and any(not part.strip() for part in parts):  # dropped silently until 0.9.2
        k = next(i for i, part in enumerate(parts) if not part.strip())
        raise OptionError(f"mapping {text!r}: entry {k + 1} of {len(parts)} is empty (two commas together, or one "
                          "at an end)")
    shown = text if len(text) <= 60 else text[:57] + "..."
    return Mapping(tuple(parse_net(part) for part in parts if part.strip()), f"mapping {shown!r}")


def from_json(data: Any, where: str) -> Mapping:
    """A mapping as a file holds it, each value of its type (until 0.9.3 a split of 3.7 was cut to
    3, a third device dropped, ``"devices": "cp"`` read as c>p and a model null named 'None')."""
    shape = f"{where}: a mapping should be {{\"networks\": [{{\"model\", \"split\", \"devices\": [a, b]}}]}}"
    if not isinstance(data, dict) or not isinstance(data.get("networks"), list):
        raise ConfigError(shape)
    _known_keys(data, MAPPING_KEYS, where)  # passed over without a word until 0.9.6
    nets = []
    for k, n in enumerate(data["networks"], 1):
        if not isinstance(n, dict) or not {"model", "split", "devices"} <= set(n):
            raise ConfigError(shape)
        named = f" ({n['model']})" if isinstance(n["model"], str) and n["model"].strip() else ""
        _known_keys(n, NETWORK_KEYS, f"{where}: network {k}{named}")
        model, split, devices = n["model"], n["split"], n["devices"]
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"{where}: network {k}: model should name a network, got {model!r}")
        if isinstance(split, bool) or not isinstance(split, int):
            raise ConfigError(f"{where}: network {k} ({model}): split should be a whole number of layers, got {split!r}")
        if (not isinstance(devices, list) or len(devices) != 2
                or not all(isinstance(d, str) and d.strip() for d in devices)):
            raise ConfigError(f"{where}: network {k} ({model}): devices should be two device names [first, second], "
                              f"got {devices!r}")
        layers = n.get("layers")
        if layers is not None and (isinstance(layers, bool) or not isinstance(layers, int)):
            raise ConfigError(f"{where}: network {k} ({model}): layers should be its whole number of layers, got {layers!r}")
        nets.append(NetMapping(model, split, (devices[0], devices[1]), f"{where}: network {k} ({model})", layers))
    mapping = Mapping(tuple(nets), where)
    if "mapping" in data:  # what `generate --out` writes beside the networks: it must say the same (read by no one until 0.9.6)
        text = data["mapping"]
        if not isinstance(text, str):
            raise ConfigError(f"{where}: \"mapping\" should be the networks' compact form (as `tracker mapping generate "
                              f"--out` writes it), got {text!r}")
        try:
            said = parse_mapping(text)
        except ConfigError as exc:
            raise ConfigError(f"{where}: \"mapping\": {exc}") from None
        if said != mapping:
            raise ConfigError(f"{where}: \"mapping\" {text!r} disagrees with \"networks\" ({mapping.compact()}): the "
                              "networks are what runs; make the two agree, or leave \"mapping\" out")
    return mapping


#: the keys of a mapping in a file and of each of its networks (``layers``, ``mapping``: what
#: ``generate --out`` writes beside them, for a reader)
MAPPING_KEYS = ("networks", "mapping")
NETWORK_KEYS = ("model", "split", "devices", "layers")


def _known_keys(data: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    """One line naming the keys of ``data`` that are not ``known``, and the known ones."""
    unknown = [key for key in data if key not in known]
    if unknown:
        raise ConfigError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                          f"(known: {', '.join(known)})")


@contextlib.contextmanager
def _named(label: str) -> Iterator[None]:
    """A network's errors (an unknown model, a missing file, one that cannot be traced) prefixed with
    ``label``, where it was given (said without it until 0.9.8: ``unknown model 'x'`` of a file's network)."""
    try:
        yield
    except (ConfigError, UnknownModelError) as exc:
        raise type(exc)(f"{label}: {exc}") from None


def _check_model(model: str) -> bool:
    """A zoo name, a spec file or a network of your own (``FILE.py:NAME``), or one clear error."""
    _name(model)
    return True


#: In the measuring child, the spec each network that is not a zoo name had when its parent read
#: it (a spec file's content, a network of your own's file text): measured as planned, as a
#: network run's child builds its network from the spec its plan carries.
_CARRIED: dict[str, dict[str, Any]] = {}


def _ref(model: str, specs: dict[str, dict[str, Any]] | None = None) -> Any:
    """The network ``model`` names (a ``ModelRef``): from ``specs`` (a workload's, read when it was
    made) or the child's carried specs where they hold it, else the zoo name or the file as it is now."""
    from tracker.zoo import resolve
    from tracker.zoo.spec import spec_ref

    spec = (specs or {}).get(model) or _CARRIED.get(model)
    return spec_ref(spec) if spec is not None else resolve(model)


def _name(model: str, specs: dict[str, dict[str, Any]] | None = None) -> str:
    """The name a network's runs carry (``mynet.TinyNet`` for ``models/mynet.py:TinyNet``), so a
    mapping's networks join their own network runs by name."""
    return _ref(model, specs).name


def read_specs(mapping: Mapping) -> dict[str, dict[str, Any]]:
    """The spec of each network of ``mapping`` that is not a zoo name, read now (once)."""
    return {n.model: spec for n in mapping.networks if (spec := _ref(n.model).spec) is not None}


def _identity(model: str, specs: dict[str, dict[str, Any]]) -> str:
    """What a mapping's key says of a network: a zoo name as it is; a spec file or a network of
    your own by its name and description hash (``mynet.TinyNet#1f0c...``), as a network run's key
    holds its ``model_hash``: the same file named by a relative or an absolute path is one
    network, and an edited one is another."""
    from tracker.describe import described_json, spec_json

    ref = _ref(model, specs)
    if ref.spec is None:
        return model
    return f"{ref.name}#{described_json(ref.name, spec_json(ref.spec), ref.input_size)[1]}"


def _trace(model: str, ref: Any = None) -> tuple[Any, Any, list[Any]]:
    """A freshly built ``model`` (``ref``: the network it names, read already), its GraphModule and
    its layers: the split points are between the layers. Each call builds its own copy, so two
    networks of a workload never share parameters."""
    import torch
    from torch.fx import symbolic_trace

    ref = ref or _ref(model)
    if ref.name in _detection():
        raise ConfigError(f"model {model}: detection models cannot be split (their graph depends on the data)")
    torch.manual_seed(0)
    module = ref.build().eval()
    try:
        graph = symbolic_trace(module)
    except Exception as exc:  # noqa: BLE001 - any tracing failure means: cannot be split here
        raise ConfigError(f"model {model}: cannot be traced into layers ({type(exc).__name__})") from None
    layers = [n for n in graph.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    return module, graph, layers


def _detection() -> tuple[str, ...]:
    from tracker.zoo import detection_models

    return detection_models()


def layer_count(model: str, specs: dict[str, dict[str, Any]] | None = None) -> int:
    from tracker.describe import spec_json

    return _layer_count(model, spec_json(_ref(model, specs).spec))


@lru_cache(maxsize=None)
def _layer_count(model: str, spec_json: str | None) -> int:
    """Layers of ``model`` as ``spec_json`` says it is (None: a zoo name): an edited file is counted again."""
    from tracker.zoo.spec import spec_ref

    return len(_trace(model, None if spec_json is None else spec_ref(json.loads(spec_json)))[2])


def validate(mapping: Mapping, gpu: bool, typed: bool = False) -> None:
    """One clear error for an unknown model or device, a split out of range, or CUDA without a GPU.
    ``typed``: the mapping was given on the command line (``--mapping``): what is wrong with its own
    values (no network, too many, a device that is none, a split out of range) is a usage error,
    :class:`OptionError` (status 2; 1 until 0.9.10); a network that cannot be read, or a GPU this
    machine lacks, is not."""
    bad = OptionError if typed else ConfigError
    if not mapping.networks:  # unnamed until 0.9.8
        raise bad(f"{mapping.given}: a mapping needs at least one network" if mapping.given else
                  "a mapping needs at least one network")
    if len(mapping.networks) > MAX_NETS:  # taken, however many, until 0.9.6
        raise bad(f"{mapping.given or 'a mapping'}: {len(mapping.networks)} networks; a workload runs at most "
                  f"{MAX_NETS} at once ({MAX_NETS_WHY})")
    for net in mapping.networks:
        with _named(net.label):
            _check_model(net.model)
        for d in net.devices:
            # the device check of every other command (isdigit took cuda:٣, which torch refused in the child, a
            # FAILED run on a machine with a GPU, until 0.9.13)
            if not is_device_name(d):
                raise bad(f"{net.label}: unknown device {d!r} (known: cpu, cuda, cuda:N)")
            if d.startswith("cuda") and not gpu:
                raise ConfigError(f"{net.label}: device {d} is not available on this machine (no CUDA GPU)")
        with _named(net.label):
            n = layer_count(net.model)
        if net.layers is not None and net.layers != n:  # split elsewhere in it without a word until 0.9.6
            raise ConfigError(f"{net.label}: the file says {net.model} has {net.layers} layers, and it has {n} here "
                              "(another version of it, or of torchvision): its split would fall elsewhere; draw the "
                              "mapping again (tracker mapping generate --out)")
        if not 0 <= net.split <= n:
            raise bad(f"{net.label}: split index {net.split} is out of range for {net.model} (0..{n}, its {n} layers)")


# --------------------------------------------------------------------------- generation

@dataclass
class GenerateOptions:
    seed: int = 0
    num_nets: tuple[int, int] = DEFAULT_NUM_NETS
    models: list[str] | None = None  # None: the zoo's classification models that fit the device
    device_priorities: tuple[float, float] = (0.5, 0.5)  # weights of cpu and cuda for each stage
    sets: int = 1  # sets of networks drawn
    samples: int = 1  # mappings per set of networks
    single: bool = False  # one network per mapping (each alone)
    gpu_only: bool = False  # every stage on cuda
    max_split: int | None = None  # at most this many networks of a mapping cut in two
    notes: list[str] = field(default_factory=list)

    def check(self) -> None:
        lo, hi = self.num_nets
        if lo < 1 or hi < lo:
            raise ConfigError(f"--num-nets-range {lo} {hi}: need 1 <= A <= B")
        if hi > MAX_NETS:  # one workload of ~50,000 networks was drawn until 0.9.6
            raise ConfigError(f"--num-nets-range {lo} {hi}: a workload runs at most {MAX_NETS} networks at once "
                              f"({MAX_NETS_WHY})")
        if self.sets < 1 or self.samples < 1:
            raise ConfigError("--sets and --samples must be at least 1")
        if self.sets * self.samples > MAX_DRAWS:
            raise ConfigError(f"--sets {self.sets} x --samples {self.samples}: at most {MAX_DRAWS:,} mappings are drawn at "
                              "once (each a workload of its own): draw fewer")
        if self.max_split is not None:  # no more than a workload's networks (any number was taken until 0.9.14)
            from tracker.profile.campaign import check_bound

            check_bound("", "--max-split", self.max_split, least=0, most=MAX_NETS,
                        hint=f" (a workload runs at most {MAX_NETS} networks)")
        w = self.device_priorities
        # nan or inf taken until 0.9.8 (unused without a GPU; a traceback from random.choices on one)
        if len(w) != 2 or not all(math.isfinite(v) for v in w) or min(w) < 0 or sum(w) <= 0:
            raise ConfigError(f"--device-priorities {','.join(map(str, w))}: need two finite weights >= 0 (cpu, cuda), "
                              "not both 0")


def parse_priorities(text: str) -> tuple[float, float]:
    values = tuple(decimal_number(v) for v in text.split(","))  # ASCII digits alone (٣ was 3 until 0.9.14)
    if None in values:
        raise ConfigError(f"--device-priorities {text!r}: expected two numbers, e.g. 0.4,0.6")
    if len(values) != 2:
        raise ConfigError(f"--device-priorities {text!r}: expected two numbers (cpu, cuda), e.g. 0.4,0.6")
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"--device-priorities {text!r}: expected two finite numbers (cpu, cuda), e.g. 0.4,0.6")
    return values[0], values[1]


def device_memory_bytes(gpu: bool) -> int:
    if gpu:
        import torch

        return int(torch.cuda.get_device_properties(0).total_memory)
    import psutil

    return int(psutil.virtual_memory().total)


def fitting_models(memory_bytes: int, max_nets: int) -> list[str]:
    """The zoo's classification models whose weights fit ``max_nets`` times in ``FIT_SHARE`` of the memory
    (parameter counts from torchvision's model metadata: nothing is built or downloaded)."""
    from tracker.zoo import classification_models
    from tracker.zoo.torchvision_zoo import import_torchvision

    torchvision = import_torchvision()

    budget = FIT_SHARE * memory_bytes / max(1, max_nets)
    out = []
    for name in classification_models():
        weights = list(torchvision.models.get_model_weights(name))
        if weights and 4 * weights[0].meta["num_params"] <= budget:
            out.append(name)
    return out


def generate(opts: GenerateOptions, gpu: bool) -> list[Mapping]:
    """Mappings drawn from ``opts.seed``: the same options give the same mappings."""
    opts.check()
    if opts.gpu_only and not gpu:
        raise ConfigError("--gpu-only: this machine has no CUDA GPU")
    lo, hi = (1, 1) if opts.single else opts.num_nets
    pool = list(dict.fromkeys(opts.models)) if opts.models else fitting_models(device_memory_bytes(gpu), hi)
    for m in pool:
        _check_model(m)
    if not gpu:
        opts.notes.append("no CUDA GPU on this machine: every stage runs on cpu")
    rng = random.Random(opts.seed)
    out: list[Mapping] = []
    seen: set[str] = set()
    for _ in range(opts.sets):
        n = rng.randint(lo, hi)
        models = rng.sample(pool, n) if n <= len(pool) else [rng.choice(pool) for _ in range(n)]
        for _ in range(opts.samples):
            cut = set(rng.sample(range(n), min(n, n if opts.max_split is None else opts.max_split)))
            nets = []
            for i, model in enumerate(models):
                layers = layer_count(model)
                if opts.gpu_only:
                    devices = ("cuda", "cuda")
                elif gpu:
                    devices = tuple(rng.choices(DEVICES, weights=opts.device_priorities, k=2))  # type: ignore[assignment]
                else:
                    devices = ("cpu", "cpu")
                if i in cut and layers > 1:
                    nets.append(NetMapping(model, rng.randint(1, layers - 1), devices))  # type: ignore[arg-type]
                else:
                    nets.append(NetMapping(model, layers, (devices[0], devices[0])))
            mapping = Mapping(tuple(nets))
            if mapping.compact() not in seen:
                seen.add(mapping.compact())
                out.append(mapping)
    return out


# --------------------------------------------------------------------------- measurement (child side)

def _sync(device: str) -> Callable[[], None]:
    """Wait for this thread's stream only (``timing.device_sync`` waits for the whole device, which
    here would also wait for the other networks' work)."""
    if device.startswith("cuda"):
        import torch

        return lambda: torch.cuda.current_stream(device).synchronize()
    return lambda: None


class _Net:
    """One network of a workload, split into stages, with hooks that time each stage and the transfer."""

    def __init__(self, net: NetMapping, batch_size: int) -> None:
        from torch.fx.passes.split_module import split_module

        from tracker.describe.features import aggregates
        from tracker.describe.graph import describe_module
        from tracker.zoo.spec import input_batch

        ref = _ref(net.model)
        module, graph, layers = _trace(net.model, ref)
        size = ref.input_size
        agg = aggregates(describe_module(module, ref.name, size, in_channels=ref.in_channels, input_shape=ref.input_shape,
                                         input_vocab=ref.input_vocab), batch_size)  # on the CPU
        self.info = {"params": int(agg["params"]), "macs": int(agg["macs"]), "flops": int(agg["flops"]),
                     "functional_layers": int(agg["functional_layers"]), "layers": len(layers)}
        position = {node: i for i, node in enumerate(layers)}
        self.net = net
        split = split_module(graph, module, lambda node: 0 if position.get(node, 0) < net.split else 1)
        first = net.devices[0] if net.split > 0 else net.devices[1]
        self.module = split.to(first).eval()
        self.final = net.devices[1] if net.split < len(layers) else net.devices[0]
        self.x = input_batch(batch_size, ref.in_channels, size, ref.input_shape, ref.input_vocab).to(first)
        self.times: dict[str, float] = {}
        stages = dict(split.named_children())
        if "submod_1" in stages:
            stages["submod_1"].to(net.devices[1])
        self._hook(stages.get("submod_0"), net.devices[0], "0", transfer=False)
        self._hook(stages.get("submod_1"), net.devices[1], "1", transfer="submod_0" in stages)

    def _hook(self, stage: Any, device: str, tag: str, transfer: bool) -> None:
        if stage is None:
            return
        import torch

        sync = _sync(device)

        def move(a: Any) -> Any:
            return a.to(device) if isinstance(a, torch.Tensor) else a

        def pre(_: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
            t = time.perf_counter()
            if transfer:
                args = tuple(torch.utils._pytree.tree_map(move, list(args)))
                sync()
                self.times["transfer"] = time.perf_counter() - t
            self.times[f"start{tag}"] = time.perf_counter()
            return args

        def post(_: Any, __: Any, out: Any) -> Any:
            sync()
            self.times[f"stage{tag}"] = time.perf_counter() - self.times[f"start{tag}"]
            return out

        stage.register_forward_pre_hook(pre)
        stage.register_forward_hook(post)

    def infer(self) -> dict[str, float]:
        import torch

        self.times = {}
        t0 = time.perf_counter()
        with torch.inference_mode():
            self.module(self.x)
        _sync(self.final)()
        return {"t0": t0, "t1": time.perf_counter(), **{k: v for k, v in self.times.items() if not k.startswith("start")}}


def run_workload(job: dict[str, Any]) -> dict[str, Any]:
    """All networks of ``job["mapping"]`` at once, one thread each; the sampling window opens after the warm-up."""
    import torch

    from tracker.profile.modes import apply_mode, read_mode
    from tracker.profile.telemetry import TelemetrySampler
    from tracker.profile.worker import peak_rss_mb, reset_peak_rss

    apply_mode(job.get("allocator"), job.get("threads"))  # before the networks are built
    _CARRIED.clear()
    _CARRIED.update(job.get("specs") or {})
    mapping = parse_mapping(job["mapping"])
    batch_size = int(job.get("batch_size", 1))
    warmup_s, duration_s = float(job.get("warmup_s", 0.0)), float(job["duration_s"])
    from tracker.environment import cuda_index

    device = mapping.read_device  # the GPU its stages name, not GPU 0 whichever they name (until 0.9.8)
    mode = read_mode(device, threads=job.get("threads"), allocator=job.get("allocator"))
    nets = [_Net(n, batch_size) for n in mapping.networks]
    peak_reset = reset_peak_rss()  # the networks built: their own peak from here
    window = {"open": float("inf"), "close": float("inf")}
    stop = threading.Event()
    samples: list[list[dict[str, float]]] = [[] for _ in nets]
    errors: list[BaseException | None] = [None] * len(nets)

    def loop(i: int) -> None:
        cuda = next((d for d in nets[i].net.devices if d.startswith("cuda")), None)
        stream = torch.cuda.Stream(cuda) if cuda else None
        try:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                while not stop.is_set():
                    s = nets[i].infer()
                    if window["open"] <= s["t0"] < window["close"]:
                        samples[i].append(s)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors[i] = exc
            stop.set()

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(len(nets))]
    with TelemetrySampler(interval_s=float(job.get("telemetry_interval_s", 0.02)),
                          gpu_index=cuda_index(device)) as sampler:
        for t in threads:
            t.start()
        wait_or_stop(stop, warmup_s)
        window["open"] = time.perf_counter()
        start_ns = time.perf_counter_ns()
        wait_or_stop(stop, duration_s)
        window["close"] = time.perf_counter()
        end_ns = time.perf_counter_ns()
        stop.set()
        for t in threads:
            t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    networks = []
    for i, (net, got) in enumerate(zip(mapping.networks, samples)):
        row: dict[str, Any] = {"model": _name(net.model), "split": net.split, "devices": list(net.devices),
                               "inf_count": len(got), **nets[i].info}
        if got:
            span = max(s["t1"] for s in got) - window["open"]
            row["avg_inf_ms"] = 1e3 * sum(s["t1"] - s["t0"] for s in got) / len(got)
            row["throughput_per_s"] = batch_size * len(got) / span
            for key, name in (("stage0", "stage0_ms"), ("stage1", "stage1_ms"), ("transfer", "avg_transfer_ms")):
                values = [s[key] for s in got if key in s]
                if values:
                    row[name] = 1e3 * sum(values) / len(values)
        networks.append(row)
    memory = {}
    if peak_reset:  # absent where its peak could not be started afresh
        memory["peak_rss_mb"] = peak_rss_mb()
    if mapping.uses_cuda:
        memory["cuda_max_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return {"mapping": mapping.compact(), "networks": networks, "window_s": window["close"] - window["open"],
            "mode": {"device": mode.device, "mode_id": mode.mode_id}, "memory": memory,
            "telemetry": sampler.summary(start_ns, end_ns), "telemetry_series": sampler.series_json(start_ns, end_ns)}


# --------------------------------------------------------------------------- parent side: one run per workload

NET_FIGURES = ("inf_count", "avg_inf_ms", "avg_transfer_ms", "throughput_per_s", "stage0_ms", "stage1_ms")
NET_INFO = ("params", "macs", "flops", "functional_layers", "layers")
MAPPING_TELEMETRY = ("cpu_util_pct", "cpu_util_others_pct", "gpu_util_pct", "power_w", "cpu_power_w", "gpu_power_w", "board_power_w",
                     "proc_rss_peak_mb", "sys_mem_used_peak_mb", "gpu_mem_used_peak_mb", "telemetry_samples_count")


@dataclass
class Workload:
    """What one mapping run measures (its identity) apart from the figures."""

    mapping: Mapping
    batch_size: int = 1
    duration_s: float = 10.0
    warmup_s: float = 2.0
    threads: int | None = None
    allocator: str | None = None  # modes.ALLOCATORS; None: the C library's default (in the mode id)
    #: the spec of each network that is not a zoo name, read once when the workload is made: its
    #: key, its run and its child's networks all come from it
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.specs = self.specs or read_specs(self.mapping)

    def device(self) -> str:
        """The device whose mode the workload runs in and whose telemetry it reads (``Mapping.read_device``)."""
        return self.mapping.read_device

    def key_fields(self, mode_id: str) -> dict[str, Any]:
        from tracker.environment import software_versions

        mapping = ",".join(n.compact(_identity(n.model, self.specs)) for n in self.mapping.networks)
        return {"mapping": mapping, "batch_size": self.batch_size, "duration_s": self.duration_s,
                "warmup_s": self.warmup_s, "mode": mode_id, "software": software_versions()}

    def job(self) -> dict[str, Any]:
        return {"kind": "mapping", "mapping": self.mapping.compact(), "specs": self.specs, "batch_size": self.batch_size,
                "duration_s": self.duration_s, "warmup_s": self.warmup_s, "threads": self.threads,
                "allocator": self.allocator}

    def name(self) -> str:
        nets = " + ".join(f"{_name(n.model, self.specs)}@{n.split}" for n in self.mapping.networks)
        return f"workload · {nets} · bs{self.batch_size} · {self.device()}"


def _params(w: Workload, mode_id: str) -> dict[str, Any]:
    params: dict[str, Any] = {"mapping": w.mapping.compact(), "num_networks": len(w.mapping.networks),
                              "duration_s": w.duration_s, "warmup_s": w.warmup_s, "mode": mode_id,
                              "batch_size": w.batch_size, "device": w.device()}
    for i, n in enumerate(w.mapping.networks):
        ref = _ref(n.model, w.specs)
        params.update({f"net{i}.model": ref.name, f"net{i}.input_size": ref.input_size, f"net{i}.split": n.split,
                       f"net{i}.devices": ">".join(n.devices)})
    return params


def workload_record(w: Workload, mode_id: str, payload: dict[str, Any] | None, start_ms: int,
                    failure: tuple[str, str, str] | None = None) -> Any:
    """The ``mapping`` run of a workload: measured figures, or the failure (reason, message, stderr tail)."""
    from tracker.log.record import RunRecord, now_ms
    from tracker.profile.records import add_system_metrics, telemetry_metrics

    record = RunRecord(kind="mapping", name=w.name(), params=_params(w, mode_id), key_fields=w.key_fields(mode_id),
                       tags={"tracker.source": "measured"}, start_time_ms=start_ms, end_time_ms=now_ms(),
                       description=mapping_description(w.mapping, w.duration_s, w.warmup_s, w.specs))
    if (note := w.mapping.unread_note()) is not None:  # two GPUs, one read: said in the run
        record.tags["tracker.gpus_unread"] = ",".join(w.mapping.gpus[1:])
        record.description += f" Read: {w.mapping.read_device}; {note}."
    record.artifacts["mapping.json"] = json.dumps(w.mapping.to_json(w.specs), indent=2)
    if failure is not None:
        from tracker.log.record import FAILURE_MESSAGE_TAG

        reason, message, tail = failure
        record.name += f" · {reason}"
        if message:  # what ended it, in a line, as a network run's (its stderr's tail alone until 0.9.8)
            record.tags[FAILURE_MESSAGE_TAG] = message.strip().splitlines()[0][:500]
        return record.fail(reason, tail or message)
    assert payload is not None
    total = 0.0
    for i, net in enumerate(payload["networks"]):
        record.params.update({f"net{i}.{k}": net[k] for k in NET_INFO if k in net})
        record.metrics.update({f"net{i}.{k}": float(net[k]) for k in NET_FIGURES if k in net})
        total += net.get("throughput_per_s", 0.0)
    record.metrics["total_throughput_per_s"] = total
    record.metrics["window_s"] = float(payload["window_s"])
    memory = payload["memory"]
    if (peak := memory.get("cuda_max_allocated_mb", memory.get("peak_rss_mb"))) is not None:
        record.metrics["peak_mem_mb"] = float(peak)
    inferences = sum(int(n["inf_count"]) for n in payload["networks"])
    record.metrics.update(telemetry_metrics(payload["telemetry"], inferences, MAPPING_TELEMETRY))
    add_system_metrics(record, payload.get("telemetry_series"))
    return record


def result_of(record: Any, reused: bool) -> dict[str, Any]:
    """The JSON of one workload: run id, mapping, status and per network the figures."""
    n = int(record.params.get("num_networks", 0))
    nets = []
    for i in range(n):
        row: dict[str, Any] = {"model": record.params.get(f"net{i}.model"), "split": int(record.params.get(f"net{i}.split", 0)),
                               "devices": str(record.params.get(f"net{i}.devices", "")).split(">")}
        for k in NET_FIGURES:
            value = record.metrics.get(f"net{i}.{k}")
            row[k] = (int(value) if k == "inf_count" else value) if value is not None else None
        nets.append(row)
    from tracker.log.record import FAILURE_MESSAGE_TAG

    return {"run_id": record.run_id, "mapping": record.params.get("mapping"), "status": record.status,
            "reason": record.tags.get("tracker.failure_reason"), "message": record.tags.get(FAILURE_MESSAGE_TAG),
            "reused": reused, "total_throughput_per_s": record.metrics.get("total_throughput_per_s"),
            "cpu_util_others_pct": record.metrics.get("cpu_util_others_pct"),
            "cpu_util_pct": record.metrics.get("cpu_util_pct"), "networks": nets}


#: The longest one wait of a workload's child for its warm-up or window lasts: a longer one is waited in slices.
WAIT_SLICE_S = 3600.0


def wait_or_stop(stop: threading.Event, seconds: float) -> None:
    """Wait ``seconds`` (any finite number: a Workload's own, which ``--duration`` and ``--warmup`` hold to
    MAX_WINDOW_S since 0.9.14), or until ``stop`` is set (a network's error). An Event waits at most
    threading.TIMEOUT_MAX (some 292 years) at once, and less where the platform's time_t runs out first: until
    0.9.13 a warm-up or window past it (1e10 s) failed its workload with OverflowError ("timestamp out of range
    for platform time_t"), a FAILED run, where --duration took it."""
    end = time.perf_counter() + seconds
    while not stop.is_set() and (left := end - time.perf_counter()) > 0:
        stop.wait(min(left, WAIT_SLICE_S))


def default_timeout_s(duration_s: float, warmup_s: float) -> float:
    """A workload's child's time limit unless one is given: start-up, warm-up and window, with room."""
    return 120.0 + 3 * (duration_s + warmup_s)


def timeout_message(message: str, timeout_s: float, w: Workload) -> str:
    """A workload's timeout, said with what its child had to do within it and what to give it (until
    0.9.8 ``FAILED (timeout)`` alone)."""
    default = default_timeout_s(w.duration_s, w.warmup_s)
    more = default if timeout_s < default else 2 * timeout_s
    return (f"{message}: its child starts, builds and traces {counted(len(w.mapping.networks), 'network')}, then runs "
            f"{w.warmup_s:g} s of warm-up and {w.duration_s:g} s of window; give it at least {more:g} s (--timeout)")


def check_timeout(timeout_s: float | None, duration_s: float, warmup_s: float) -> None:
    """Refuse a time limit that cannot cover the warm-up and the window, before anything runs
    (until 0.9.6 each such workload ran, and was a FAILED run of reason ``timeout``)."""
    if timeout_s is not None and timeout_s <= warmup_s + duration_s:
        raise ConfigError(f"--timeout {timeout_s:g}: cannot cover --warmup {warmup_s:g} + --duration {duration_s:g} "
                          f"= {warmup_s + duration_s:g} s, let alone the child's start-up: give more, or leave it out "
                          f"(default: 120 + 3 x (warm-up + duration) = {default_timeout_s(duration_s, warmup_s):g} s)")


def run_workloads(logger: Any, workloads: list[Workload], timeout_s: float | None = None,
                  campaign: str | None = None, on_done: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Each workload in its own child, one ``mapping`` run each; those already measured are skipped."""
    from tracker.environment import threads_tags
    from tracker.log.record import config_key, now_ms
    from tracker.profile.api import ensure_mode_logged
    from tracker.profile.child import run_child
    from tracker.profile.modes import read_mode

    for w in workloads:  # every one before the first is measured
        check_timeout(timeout_s, w.duration_s, w.warmup_s)
    out = []
    for w in workloads:
        mode_id = read_mode(w.device(), threads=w.threads, allocator=w.allocator).mode_id
        existing = logger.find(config_key({"kind": "mapping", **w.key_fields(mode_id)}))
        if existing is not None:
            result = result_of(existing, reused=True)
        else:
            ensure_mode_logged(logger, w.device(), w.threads, w.allocator)
            start = now_ms()
            limit = timeout_s or default_timeout_s(w.duration_s, w.warmup_s)
            child = run_child(w.job(), timeout_s=limit, devices={d for n in w.mapping.networks for d in n.devices})
            start += round(1000 * child.device_wait_s)
            message = child.message
            if not child.ok and child.reason == "timeout":
                message = timeout_message(child.message or f"no result within {limit:g} s", limit, w)
            failure = None if child.ok else (child.reason or "crash", message, child.stderr_tail)
            record = workload_record(w, mode_id, child.payload if child.ok else None, start, failure)
            record.tags.update(threads_tags(w.threads))  # the measuring child's, not this process's
            if campaign:
                record.tags["tracker.campaign"] = campaign
            logger.log([record])
            result = result_of(record, reused=False)
        out.append(result)
        if on_done:
            on_done(result)
    return out
