"""Seeded random CNNs drawn from a small RegNet-style design space, after PerfSeer.

Every network has the same skeleton:

* **stem**: a 3x3 convolution with stride 2 and 32 channels, batch norm and an activation
  (``relu``, ``relu6`` or ``silu``, drawn once and used by the whole network);
* **body**: exactly four stages. Each stage halves the resolution (stride 2 in its first
  block, or the transition's average pool for DenseNet) and never narrows the network
  (each stage's ``width``, a multiple of 8, is at least the previous one's). Each stage draws
  its own ``style``, its own ``depth`` (1 to 4 blocks) and its own width from a range that
  grows with the stage index, plus knobs that depend on its style:

  - ``vgg``: serial ``kernel`` x ``kernel`` conv-BN-act layers;
  - ``inception``: GoogLeNet blocks of four parallel branches concatenated (1x1;
    1x1 -> 3x3; 1x1 -> 5x5 or two 3x3; 3x3 max pool -> 1x1), ``branch_*`` widths summing
    to the stage width, ``reduce_*`` widths of the 1x1 reductions;
  - ``resnext``: residual bottleneck blocks (1x1, grouped 3x3, 1x1) with ``mid_channels``
    and ``group_width`` (groups = mid_channels // group_width) and a projection shortcut
    where the shape changes;
  - ``densenet``: ``depth`` dense layers (BN-act-1x1 conv to ``bn_size * growth_rate``,
    BN-act-3x3 conv to ``growth_rate``, concatenated to their input), then a transition
    (1x1 conv to the stage width, BN, act, 2x2 average pool);
  - ``mobilenet``: inverted residual blocks (1x1 expansion by ``expansion``, ``kernel`` x
    ``kernel`` depth-wise, linear 1x1 projection; residual where stride is 1 and the width
    is unchanged);

* **head**: global average pooling, optional dropout, a fully connected layer.

A spec is plain JSON (``format`` ``tracker.netspec/1``) drawn by :func:`generate_spec` from
``random.Random(f"{seed}:{index}")``, so a seed and an index always give the same network;
:func:`build_generated` builds it from the spec alone. Networks are small: batch 2 at
64x64 runs forward and backward on a CPU in a fraction of a second.
"""

from __future__ import annotations

import random
from functools import cache
from typing import TYPE_CHECKING, Any

from tracker.errors import ConfigError
from tracker.settings import MAX_GENERATE_COUNT, MAX_SPEC_SIZE  # the largest size a spec file may give (--input-size's too)

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["ACTIVATIONS", "FORMAT", "STYLES", "build_generated", "generate", "generate_spec"]

FORMAT = "tracker.netspec/1"
KIND = "generated"
STYLES = ("vgg", "inception", "resnext", "densenet", "mobilenet")
ACTIVATIONS = ("relu", "relu6", "silu")
STEM_CHANNELS = 32
STEM_STRIDE = 2
#: Per stage, the range (inclusive, multiples of 8) a stage's width is drawn from.
WIDTH_RANGES = ((32, 64), (48, 128), (64, 192), (96, 320))
MAX_DEPTH = 4
DROPOUTS = (0.0, 0.1, 0.2, 0.3)

#: The knobs each style needs besides ``style``, ``depth`` and ``width``.
STYLE_KEYS: dict[str, tuple[str, ...]] = {
    "vgg": ("kernel",),
    "inception": (
        "branch_1x1", "branch_3x3", "branch_5x5", "branch_pool", "reduce_3x3", "reduce_5x5", "branch_5x5_kind",
    ),
    "resnext": ("bottleneck_ratio", "group_width", "mid_channels"),
    "densenet": ("growth_rate", "bn_size"),
    "mobilenet": ("expansion", "kernel"),
}
BRANCH_5X5_KINDS = ("5x5", "double3x3")

#: The torch module classes, defined on first use so that importing this module stays cheap.
_TORCH_CLASSES = ("ConvBNAct", "InceptionBlock", "ResNeXtBlock", "DenseLayer", "InvertedResidual", "GeneratedNet")


# --------------------------------------------------------------------------- drawing specs


def _round8(value: float) -> int:
    return max(8, 8 * int(value / 8 + 0.5))


def _draw_knobs(rng: random.Random, style: str, width: int) -> dict[str, Any]:
    """The style-specific knobs of one stage of the given width."""
    if style == "vgg":
        return {"kernel": 3}
    if style == "inception":
        units = [1, 1, 1, 1]  # 8-channel units of the 1x1, 3x3, 5x5 and pool branches
        for _ in range(width // 8 - 4):
            units[rng.choices(range(4), weights=(2, 4, 1, 1))[0]] += 1
        b1, b3, b5, bp = (8 * u for u in units)
        return {
            "branch_1x1": b1,
            "branch_3x3": b3,
            "branch_5x5": b5,
            "branch_pool": bp,
            "reduce_3x3": _round8(b3 * rng.choice((0.5, 0.75, 1.0))),
            "reduce_5x5": _round8(b5 * rng.choice((0.5, 1.0))),
            "branch_5x5_kind": rng.choice(BRANCH_5X5_KINDS),
        }
    if style == "resnext":
        ratio = rng.choice((1, 2, 4))
        group_width = rng.choice((8, 16, 32))
        mid = group_width * max(1, int(width / ratio / group_width + 0.5))
        return {"bottleneck_ratio": ratio, "group_width": group_width, "mid_channels": mid}
    if style == "densenet":
        return {"growth_rate": rng.choice((8, 12, 16, 24, 32)), "bn_size": rng.choice((2, 4))}
    if style == "mobilenet":
        return {"expansion": rng.choice((2, 3, 4, 6)), "kernel": 3}
    raise ConfigError(f"unknown style {style!r} (expected one of {', '.join(STYLES)})")


def least_input_size(stem_stride: int, stages: int) -> int:
    """The smallest input side a spec takes: the stem divides it by its stride and each stage halves
    it; none may take it below one pixel."""
    return stem_stride * 2**stages


def check_least_input_size(input_size: int, stem_stride: int, stages: int, label: str = "input_size") -> None:
    """A ConfigError naming ``label`` where ``input_size`` is under :func:`least_input_size`: the one
    check of ``zoo generate --input-size``, a spec file's ``input_size`` and, since 0.9.8, another input
    size asked of a generated network (``describe``/``profile``/``predict --input-size``, a campaign's
    ``input_sizes``), which until then described and measured it at 8 px without a word."""
    least = least_input_size(stem_stride, stages)
    if input_size < least:
        raise ConfigError(f"{label} must be at least {least} (the stem's stride times 2 for each of {stages} "
                          f"stages), got {input_size}")


def generate_spec(
    seed: int, index: int = 0, input_size: int = 224, num_classes: int = 1000, *, style: str | None = None
) -> dict[str, Any]:
    """The spec of network ``index`` of ``seed``; ``style`` forces all four stages to one style.

    Without ``style``, style ``STYLES[index % 5]`` is placed on a drawn stage and the other
    stages draw theirs freely, so any five consecutive indices show every style.
    """
    if style is not None and style not in STYLES:
        raise ConfigError(f"unknown style {style!r} (expected one of {', '.join(STYLES)})")
    if not 0 <= index < MAX_GENERATE_COUNT:  # as a spec file's index is read (validate_spec)
        raise ConfigError(f"index must be from 0 to {MAX_GENERATE_COUNT - 1:,}, got {index}")
    check_least_input_size(input_size, STEM_STRIDE, len(WIDTH_RANGES))
    if input_size > MAX_SPEC_SIZE:  # written, then refused by every command that read the spec, until 0.9.7
        raise ConfigError(f"input_size must be at most {MAX_SPEC_SIZE:,}, got {input_size}")
    if num_classes < 1:
        raise ConfigError(f"num_classes must be at least 1, got {num_classes}")
    rng = random.Random(f"{seed}:{index}")
    activation = rng.choice(ACTIVATIONS)
    if style is None:
        featured_stage = rng.randrange(len(WIDTH_RANGES))
        styles = [
            STYLES[index % len(STYLES)] if i == featured_stage else rng.choice(STYLES) for i in range(len(WIDTH_RANGES))
        ]
    else:
        styles = [style] * len(WIDTH_RANGES)
    stages: list[dict[str, Any]] = []
    previous = STEM_CHANNELS
    for (low, high), stage_style in zip(WIDTH_RANGES, styles):
        depth = rng.randint(1, MAX_DEPTH)
        width = max(previous, 8 * rng.randint(low // 8, high // 8))
        stages.append({"style": stage_style, "depth": depth, "width": width, **_draw_knobs(rng, stage_style, width)})
        previous = width
    return {
        "format": FORMAT,
        "kind": KIND,
        "name": f"gen-s{seed}-{index:04d}",
        "seed": seed,
        "index": index,
        "input_size": input_size,
        "num_classes": num_classes,
        "stem": {"channels": STEM_CHANNELS, "kernel": 3, "stride": STEM_STRIDE, "activation": activation},
        "stages": stages,
        "head": {"pool": "avg", "dropout": rng.choice(DROPOUTS)},
    }


def generate(count: int, seed: int, input_size: int = 224, num_classes: int = 1000) -> list[dict[str, Any]]:
    """``count`` specs of ``seed``, indices 0..count-1."""
    return [generate_spec(seed, i, input_size, num_classes) for i in range(count)]


# --------------------------------------------------------------------------- validating specs


def _get(mapping: dict[str, Any], key: str, path: str) -> Any:
    if key not in mapping:
        raise ConfigError(f"spec key {path!r} is missing")
    return mapping[key]


#: The most classes its head may score: ImageNet-21k's 21,841 and more.
MAX_CLASSES = 100_000


def _int(mapping: dict[str, Any], key: str, path: str, minimum: int = 1, maximum: int = MAX_SPEC_SIZE) -> int:
    value = _get(mapping, key, path)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ConfigError(f"spec key {path!r} must be an integer from {minimum} to {maximum:,}, got {value!r}")
    return value


def _dict(mapping: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = _get(mapping, key, path)
    if not isinstance(value, dict):
        raise ConfigError(f"spec key {path!r} must be an object, got {type(value).__name__}")
    return value


def _odd_kernel(mapping: dict[str, Any], key: str, path: str) -> int:
    value = _int(mapping, key, path)
    if value % 2 == 0:
        raise ConfigError(f"spec key {path!r} must be an odd kernel size, got {value}")
    return value


#: The keys a generated network's spec may have, at its top level, in its stem and in its head:
#: another (a misspelt one, one of another kind's) was passed over without a word until 0.9.8, as a
#: stage's were until 0.9.7. ``search_space``: the search space a candidate is of.
TOP_KEYS = ("format", "kind", "name", "seed", "index", "search_space", "input_size", "in_channels", "num_classes",
            "stem", "stages", "head")
STEM_KEYS = ("channels", "kernel", "stride", "activation")
HEAD_KEYS = ("pool", "dropout")


def _known_keys(mapping: dict[str, Any], known: tuple[str, ...], path: str) -> None:
    if unknown := sorted(set(mapping) - set(known), key=str):
        where = f"spec key {path!r}: unknown" if path else "unknown spec"
        raise ConfigError(f"{where} key(s) {', '.join(map(str, unknown))} (a generated network's {path or 'spec'} "
                          f"takes {', '.join(known)})")


def _validate_stage(stage: Any, path: str) -> None:
    if not isinstance(stage, dict):
        raise ConfigError(f"spec key {path!r} must be an object, got {type(stage).__name__}")
    style = _get(stage, "style", f"{path}.style")
    if style not in STYLES:
        raise ConfigError(f"spec key '{path}.style': unknown style {style!r} (expected one of {', '.join(STYLES)})")
    _int(stage, "depth", f"{path}.depth")
    width = _int(stage, "width", f"{path}.width")
    if unknown := sorted(set(stage) - {"style", "depth", "width", *STYLE_KEYS[style]}):  # a misspelt knob was not
        # read, its default built in its place, until 0.9.7
        raise ConfigError(f"spec key {path!r}: unknown key(s) {', '.join(unknown)} for style {style} (it takes depth, "
                          f"width, {', '.join(STYLE_KEYS[style])})")
    for key in STYLE_KEYS[style]:
        _get(stage, key, f"{path}.{key}")
    if style in ("vgg", "mobilenet"):
        _odd_kernel(stage, "kernel", f"{path}.kernel")
    if style == "mobilenet":
        _int(stage, "expansion", f"{path}.expansion")
    if style == "inception":
        branches = [_int(stage, k, f"{path}.{k}") for k in ("branch_1x1", "branch_3x3", "branch_5x5", "branch_pool")]
        if sum(branches) != width:
            raise ConfigError(f"spec key '{path}.width': branch widths sum to {sum(branches)}, not {width}")
        _int(stage, "reduce_3x3", f"{path}.reduce_3x3")
        _int(stage, "reduce_5x5", f"{path}.reduce_5x5")
        if stage["branch_5x5_kind"] not in BRANCH_5X5_KINDS:
            raise ConfigError(
                f"spec key '{path}.branch_5x5_kind' must be one of {', '.join(BRANCH_5X5_KINDS)}, "
                f"got {stage['branch_5x5_kind']!r}"
            )
    if style == "resnext":
        # the draw's width over mid_channels (1, 2 or 4), which mid_channels builds: read as any other size since
        # 0.9.14 (-5, 0, nan, "x" or 1 and 400 zeros were taken and kept in the spec, unread, until then)
        _int(stage, "bottleneck_ratio", f"{path}.bottleneck_ratio")
        group_width = _int(stage, "group_width", f"{path}.group_width")
        mid = _int(stage, "mid_channels", f"{path}.mid_channels")
        if mid % group_width:
            raise ConfigError(
                f"spec key '{path}.mid_channels' ({mid}) is not a multiple of group_width ({group_width})"
            )
    if style == "densenet":
        _int(stage, "growth_rate", f"{path}.growth_rate")
        _int(stage, "bn_size", f"{path}.bn_size")


def validate_spec(spec: Any) -> None:
    """Raise ConfigError, naming the key, for a spec that :func:`build_generated` cannot build."""
    if not isinstance(spec, dict):
        raise ConfigError(f"a network spec must be an object, got {type(spec).__name__}")
    if _get(spec, "format", "format") != FORMAT:
        raise ConfigError(f"spec key 'format' must be {FORMAT!r}, got {spec['format']!r}")
    if _get(spec, "kind", "kind") != KIND:
        raise ConfigError(f"spec key 'kind' must be {KIND!r}, got {spec['kind']!r}")
    _known_keys(spec, TOP_KEYS, "")
    _int(spec, "num_classes", "num_classes", maximum=MAX_CLASSES)
    if "index" in spec:  # its number in its draw (a search space's candidate has none): any value was taken until 0.9.14
        _int(spec, "index", "index", minimum=0, maximum=MAX_GENERATE_COUNT - 1)
    if "in_channels" in spec:  # its stem's input (3 where not said)
        _int(spec, "in_channels", "in_channels")
    stem = _dict(spec, "stem", "stem")
    _known_keys(stem, STEM_KEYS, "stem")
    _int(stem, "channels", "stem.channels")
    _odd_kernel(stem, "kernel", "stem.kernel")
    _int(stem, "stride", "stem.stride")
    activation = _get(stem, "activation", "stem.activation")
    if activation not in ACTIVATIONS:
        raise ConfigError(
            f"spec key 'stem.activation': unknown activation {activation!r} (expected one of {', '.join(ACTIVATIONS)})"
        )
    stages = _get(spec, "stages", "stages")
    if not isinstance(stages, list) or not stages:
        raise ConfigError("spec key 'stages' must be a non-empty list")
    for i, stage in enumerate(stages):
        _validate_stage(stage, f"stages[{i}]")
    if "input_size" in spec:
        check_least_input_size(_int(spec, "input_size", "input_size"), stem["stride"], len(stages), "spec key 'input_size'")
    head = _dict(spec, "head", "head")
    _known_keys(head, HEAD_KEYS, "head")
    if _get(head, "pool", "head.pool") != "avg":
        raise ConfigError(f"spec key 'head.pool' must be 'avg', got {head['pool']!r}")
    dropout = _get(head, "dropout", "head.dropout")
    if isinstance(dropout, bool) or not isinstance(dropout, int | float) or not 0.0 <= dropout < 1.0:
        raise ConfigError(f"spec key 'head.dropout' must be a number in [0, 1), got {dropout!r}")


# --------------------------------------------------------------------------- building networks


def _activation(name: str) -> nn.Module:
    from torch import nn

    return {"relu": nn.ReLU, "relu6": nn.ReLU6, "silu": nn.SiLU}[name]()


@cache
def _torch_modules() -> dict[str, type]:
    """Define the module classes (once, on first use) and publish them as module attributes."""
    import torch
    from torch import nn

    activation = _activation

    class ConvBNAct(nn.Module):
        """Conv, batch norm and (unless ``act`` is None) an activation."""

        def __init__(
            self, cin: int, cout: int, kernel: int, stride: int = 1, act: str | None = "relu", groups: int = 1
        ) -> None:
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)
            self.bn = nn.BatchNorm2d(cout)
            self.act = activation(act) if act else nn.Identity()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.bn(self.conv(x)))

    class InceptionBlock(nn.Module):
        """Four parallel branches, concatenated along the channels."""

        def __init__(self, cin: int, stage: dict[str, Any], stride: int, act: str) -> None:
            super().__init__()
            r3, r5, b5 = stage["reduce_3x3"], stage["reduce_5x5"], stage["branch_5x5"]
            self.branch1 = ConvBNAct(cin, stage["branch_1x1"], 1, stride, act)
            self.branch3 = nn.Sequential(
                ConvBNAct(cin, r3, 1, 1, act), ConvBNAct(r3, stage["branch_3x3"], 3, stride, act)
            )
            if stage["branch_5x5_kind"] == "5x5":
                self.branch5 = nn.Sequential(ConvBNAct(cin, r5, 1, 1, act), ConvBNAct(r5, b5, 5, stride, act))
            else:
                self.branch5 = nn.Sequential(
                    ConvBNAct(cin, r5, 1, 1, act), ConvBNAct(r5, b5, 3, 1, act), ConvBNAct(b5, b5, 3, stride, act)
                )
            self.branch_pool = nn.Sequential(
                nn.MaxPool2d(3, stride, 1), ConvBNAct(cin, stage["branch_pool"], 1, 1, act)
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.branch1(x), self.branch3(x), self.branch5(x), self.branch_pool(x)], 1)

    class ResNeXtBlock(nn.Module):
        """Residual bottleneck with a grouped 3x3 convolution."""

        def __init__(self, cin: int, cout: int, mid: int, group_width: int, stride: int, act: str) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(mid)
            self.act1 = activation(act)
            self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, groups=mid // group_width, bias=False)
            self.bn2 = nn.BatchNorm2d(mid)
            self.act2 = activation(act)
            self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            if stride != 1 or cin != cout:
                self.shortcut: nn.Module = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                )
            else:
                self.shortcut = nn.Identity()
            self.act3 = activation(act)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.act1(self.bn1(self.conv1(x)))
            out = self.act2(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.act3(out + self.shortcut(x))

    class DenseLayer(nn.Module):
        """Pre-activation 1x1 then 3x3 convolution whose ``growth_rate`` outputs join the input."""

        def __init__(self, cin: int, growth_rate: int, bn_size: int, act: str) -> None:
            super().__init__()
            mid = bn_size * growth_rate
            self.bn1 = nn.BatchNorm2d(cin)
            self.act1 = activation(act)
            self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(mid)
            self.act2 = activation(act)
            self.conv2 = nn.Conv2d(mid, growth_rate, 3, 1, 1, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.conv1(self.act1(self.bn1(x)))
            out = self.conv2(self.act2(self.bn2(out)))
            return torch.cat([x, out], 1)

    class InvertedResidual(nn.Module):
        """MobileNetV2 block: 1x1 expansion, depth-wise conv, linear 1x1 projection."""

        def __init__(self, cin: int, cout: int, expansion: int, kernel: int, stride: int, act: str) -> None:
            super().__init__()
            hidden = cin * expansion
            self.conv1 = nn.Conv2d(cin, hidden, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(hidden)
            self.act1 = activation(act)
            self.conv2 = nn.Conv2d(hidden, hidden, kernel, stride, kernel // 2, groups=hidden, bias=False)
            self.bn2 = nn.BatchNorm2d(hidden)
            self.act2 = activation(act)
            self.conv3 = nn.Conv2d(hidden, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.use_residual = stride == 1 and cin == cout  # fixed at build time: fx-traceable

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.act1(self.bn1(self.conv1(x)))
            out = self.act2(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            if self.use_residual:
                out = out + x
            return out

    class GeneratedNet(nn.Module):
        """A generated network: ``stem``, ``stages`` (each with ``blocks``) and ``head``."""

        def __init__(self, name: str, stem: nn.Module, stages: nn.Sequential, head: nn.Sequential) -> None:
            super().__init__()
            self.name = name
            self.stem = stem
            self.stages = stages
            self.head = head

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.stages(self.stem(x)))

    classes: dict[str, type] = {
        "ConvBNAct": ConvBNAct,
        "InceptionBlock": InceptionBlock,
        "ResNeXtBlock": ResNeXtBlock,
        "DenseLayer": DenseLayer,
        "InvertedResidual": InvertedResidual,
        "GeneratedNet": GeneratedNet,
    }
    for name, cls in classes.items():  # importable by name, so that pickling works
        cls.__module__ = __name__
        cls.__qualname__ = name
    globals().update(classes)
    return classes


def __getattr__(name: str) -> Any:
    if name in _TORCH_CLASSES:
        return _torch_modules()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _build_stage(stage: dict[str, Any], cin: int, act: str) -> nn.Sequential:
    """One stage: ``blocks`` (the first with stride 2) and, for DenseNet, a ``transition``."""
    from collections import OrderedDict

    from torch import nn

    m = _torch_modules()
    style, depth, width = stage["style"], stage["depth"], stage["width"]
    blocks: list[nn.Module] = []
    for i in range(depth):
        stride, c = (2, cin) if i == 0 else (1, width)
        if style == "vgg":
            blocks.append(m["ConvBNAct"](c, width, stage["kernel"], stride, act))
        elif style == "inception":
            blocks.append(m["InceptionBlock"](c, stage, stride, act))
        elif style == "resnext":
            blocks.append(m["ResNeXtBlock"](c, width, stage["mid_channels"], stage["group_width"], stride, act))
        elif style == "mobilenet":
            blocks.append(m["InvertedResidual"](c, width, stage["expansion"], stage["kernel"], stride, act))
        elif style == "densenet":
            c = cin + i * stage["growth_rate"]
            blocks.append(m["DenseLayer"](c, stage["growth_rate"], stage["bn_size"], act))
    parts: list[tuple[str, nn.Module]] = [("blocks", nn.Sequential(*blocks))]
    if style == "densenet":
        cat = cin + depth * stage["growth_rate"]
        transition = nn.Sequential(
            OrderedDict(
                conv=nn.Conv2d(cat, width, 1, bias=False),
                bn=nn.BatchNorm2d(width),
                act=_activation(act),
                pool=nn.AvgPool2d(2, 2, ceil_mode=True),  # ceil(H / 2), like the stride-2 convs
            )
        )
        parts.append(("transition", transition))
    return nn.Sequential(OrderedDict(parts))


def build_generated(spec: dict[str, Any]) -> nn.Module:
    """The network of a spec (validated first; raises ConfigError naming a bad key), in eval mode."""
    from collections import OrderedDict

    from torch import nn

    validate_spec(spec)
    m = _torch_modules()
    stem_spec = spec["stem"]
    act = stem_spec["activation"]
    # its input's channels (since 0.9.9: a spec's in_channels was read as the input's, and a stem of 3 built)
    stem = m["ConvBNAct"](spec.get("in_channels", 3), stem_spec["channels"], stem_spec["kernel"], stem_spec["stride"], act)
    stages = []
    cin = stem_spec["channels"]
    for stage in spec["stages"]:
        stages.append(_build_stage(stage, cin, act))
        cin = stage["width"]
    dropout = float(spec["head"]["dropout"])
    head = nn.Sequential(
        OrderedDict(
            pool=nn.AdaptiveAvgPool2d(1),
            flatten=nn.Flatten(1),
            dropout=nn.Dropout(dropout) if dropout > 0 else nn.Identity(),
            fc=nn.Linear(cin, spec["num_classes"]),
        )
    )
    name = spec.get("name", "generated")
    return m["GeneratedNet"](str(name), stem, nn.Sequential(*stages), head).eval()
