"""Structured channel (filter) pruning, after perf4sight.

A network's convolution filters are pruned by a ratio (or to an explicit per-layer width map), and
the layers that read those channels are shrunk to match, so the pruned network still runs and is
smaller. The analysis traces the model with ``torch.fx`` and follows *channel spaces* through the
graph with a union-find:

* every ``Conv2d`` output opens a new space of ``out_channels`` channels;
* batch norm, activations, pooling, dropout, identity and flatten pass their input's space through;
* element-wise ``add``/``mul`` (residual connections, squeeze-excitation scaling) unite the spaces
  of their operands, which must keep the same channels;
* ``torch.cat`` along the channel dimension makes a composite space (its operands side by side);
* a depth-wise conv (``groups == in_channels == out_channels``) keeps its input's space;
* a ``Linear`` after a flatten reads the space (channel-major, expanded over the spatial size).

Anything else — grouped convs that are not depth-wise (ResNeXt), layers called more than once,
operations the analysis does not know — marks the spaces it touches as not prunable: they are kept
whole rather than guessed at. The network's input and output are never pruned.

``torch`` is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import copy
import math
import numbers
import operator
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracker.describe.graph import propagate_shapes, propagated_shape as _shape
from tracker.errors import ConfigError

if TYPE_CHECKING:
    from torch import nn

__all__ = [
    "FORMAT",
    "METHODS",
    "ChannelGroup",
    "apply_widths",
    "build_pruned",
    "channel_groups",
    "fractions_said",
    "prune",
    "pruned_spec",
    "pruning_plan",
    "ratio_widths",
    "ratios_from_percentages",
    "width_map",
]

#: The ``format`` of a pruned-network spec.
FORMAT = "tracker.netspec/1"
#: How the channels to keep are chosen.
METHODS = ("l1", "random")

#: Functions and tensor methods that keep the channel layout of their (first) tensor operand.
_PASS_NAMES = frozenset(
    {
        "relu", "relu_", "relu6", "silu", "silu_", "hardswish", "hardswish_", "hardsigmoid",
        "sigmoid", "sigmoid_", "tanh", "tanh_", "gelu", "elu", "elu_", "leaky_relu", "leaky_relu_",
        "mish", "hardtanh", "hardtanh_", "softplus", "selu", "celu",
        "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
        "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d",
        "contiguous", "clone", "detach", "stochastic_depth",
    }
)
#: Element-wise binary operations: tensor operands must keep the same channels.
_BINARY_NAMES = frozenset({"add", "add_", "iadd", "mul", "mul_", "imul", "sub", "sub_", "isub", "truediv", "div", "div_"})
#: Operations that reshape ``(N, C, H, W)`` to ``(N, C*H*W)`` when used that way.
_FLATTEN_NAMES = frozenset({"flatten", "view", "reshape"})
#: Reductions that, over the spatial dimensions only, keep the channels.
_REDUCE_NAMES = frozenset({"mean", "amax", "sum"})
#: Queries that read a tensor without using its values.
_QUERY_NAMES = frozenset({"size", "dim"})


@dataclass(frozen=True)
class ChannelGroup:
    """A set of channels that must be pruned together (one union-find group).

    ``convs`` are the qualified names of the convolutions whose outputs are these channels (a
    residual add or a depth-wise conv puts several in one group); ``prunable`` is False where the
    analysis keeps them whole, and ``reason`` then says why.
    """

    convs: tuple[str, ...]
    channels: int
    prunable: bool
    reason: str | None = None


# --------------------------------------------------------------------------------------------
# analysis


@dataclass(frozen=True)
class _Space:
    """The channel layout of a tensor: union-find atoms side by side (more than one after a
    ``cat``); ``spatial > 1`` for a flattened ``(N, C*spatial)`` tensor, channel-major."""

    atoms: tuple[int, ...]
    spatial: int = 1


class _UnionFind:
    def __init__(self) -> None:
        self.parent: list[int] = []
        self.size: list[int] = []
        self.reason: dict[int, str] = {}  # root -> why it is not prunable
        self.producers: dict[int, list[tuple[str, int]]] = {}  # root -> [(conv, offset in its output)]

    def new(self, size: int, reason: str | None = None) -> int:
        atom = len(self.parent)
        self.parent.append(atom)
        self.size.append(size)
        self.producers[atom] = []
        if reason:
            self.reason[atom] = reason
        return atom

    def find(self, atom: int) -> int:
        root = atom
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[atom] != root:
            self.parent[atom], atom = root, self.parent[atom]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] != self.size[rb]:  # cannot happen for shapes that broadcast; stay safe
            self.fix(ra, "operands of different widths meet")
            self.fix(rb, "operands of different widths meet")
            return
        if ra > rb:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.producers[ra].extend(self.producers.pop(rb))
        if rb in self.reason:
            self.reason.setdefault(ra, self.reason.pop(rb))

    def fix(self, atom: int, reason: str) -> None:
        """Mark an atom's group as not prunable (the first reason is kept)."""
        self.reason.setdefault(self.find(atom), reason)


@dataclass
class _Analysis:
    uf: _UnionFind
    #: module name -> (kind, input space, output space); kind is conv, dwconv, fixed, bn or linear
    modules: dict[str, tuple[str, _Space | None, _Space | None]] = field(default_factory=dict)
    #: conv name -> output space, in graph order
    conv_out: dict[str, _Space] = field(default_factory=dict)

    def roots(self) -> list[int]:
        """The groups that some conv produces, in graph order."""
        seen: dict[int, None] = {}
        for space in self.conv_out.values():
            for atom in space.atoms:
                seen.setdefault(self.uf.find(atom), None)
        return list(seen)

    def group(self, root: int) -> ChannelGroup:
        convs = tuple(dict.fromkeys(name for name, _ in self.uf.producers.get(root, [])))
        reason = self.uf.reason.get(root)
        return ChannelGroup(convs=convs, channels=self.uf.size[root], prunable=reason is None, reason=reason)


def _trace(model: nn.Module, input_size: int, in_channels: int = 3, name: str | None = None) -> Any:
    """The model traced by torch.fx, with shapes from one forward pass in eval mode. What its
    ``forward`` prints goes to stderr (before ``zoo prune --format json``'s JSON until 0.9.8).
    ``name``: the network's, as its reference says it, for the errors (else its class's)."""
    import contextlib
    import sys

    with contextlib.redirect_stdout(sys.stderr):
        return _traced(model, input_size, in_channels, name or f"model {type(model).__name__}")


def _first_line(exc: BaseException) -> str:
    """An exception in one line, as describe says it: its type and its message's first line (torch.fx
    adds lines of the graph's code and advice on tracing tools: six lines in ``zoo prune``'s error
    until 0.9.8)."""
    text = str(exc).strip()
    return type(exc).__name__ + (f": {text.splitlines()[0][:200]}" if text else "")


def _traced(model: nn.Module, input_size: int, in_channels: int, name: str) -> Any:
    import torch
    import torch.fx

    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as exc:  # noqa: BLE001 - torch.fx raises many kinds
        raise ConfigError(f"{name} cannot be traced by torch.fx, so it cannot be pruned: {_first_line(exc)}") from None
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
    modes = {m: m.training for m in model.modules()}
    x = torch.zeros(1, in_channels, input_size, input_size, device=device, dtype=dtype)
    try:
        model.eval()
        gm.eval()
        # One real forward pass at batch 1. Fake tensors would import torch._dynamo: 1.9 s and 200 MB
        # resident for the rest of a measuring child's life, counted in a pruned network's peak memory.
        with torch.no_grad():
            propagate_shapes(gm, x)
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"{name} does not run on a 1x{in_channels}x{input_size}x{input_size} input: "
                          f"{_first_line(exc)}") from None
    finally:
        for module, mode in modes.items():
            module.training = mode
    return gm


def _name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", "")


def _analyse(model: nn.Module, input_size: int = 224, in_channels: int = 3, name: str | None = None) -> _Analysis:
    import torch
    from torch import nn
    from torch.fx.node import Node, map_aggregate

    gm = _trace(model, input_size, in_channels, name)
    uf = _UnionFind()
    res = _Analysis(uf)
    spaces: dict[Any, _Space | None] = {}

    names_of: dict[int, list[str]] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        names_of.setdefault(id(module), []).append(name)
    calls: dict[int, int] = {}

    def width(space: _Space) -> int:
        return sum(uf.size[a] for a in space.atoms)

    def fix(space: _Space | None, reason: str) -> None:
        if space is not None:
            for atom in space.atoms:
                uf.fix(atom, reason)

    def tensor_inputs(node: Any) -> list[Any]:
        found: list[Any] = []
        map_aggregate((node.args, node.kwargs), lambda a: found.append(a) if isinstance(a, Node) else None)
        return found

    def opaque(node: Any, why: str) -> _Space | None:
        """An operation the analysis does not follow: keep its inputs whole, its output fixed."""
        for arg in tensor_inputs(node):
            fix(spaces.get(arg), why)
        shape = _shape(node)
        if shape is not None and len(shape) in (2, 4):
            return _Space((uf.new(shape[1], why),))
        return None

    def passes(node: Any, src: Any) -> _Space | None:
        """``node`` keeps the channels of ``src`` (checked against the shapes)."""
        space = spaces.get(src) if isinstance(src, Node) else None
        s_in, s_out = _shape(src) if isinstance(src, Node) else None, _shape(node)
        if space is None or s_in is None or s_out is None:
            return opaque(node, f"unknown layout at {node.name}")
        if len(s_in) != len(s_out) or s_in[1] != s_out[1]:
            return opaque(node, f"{node.name} changes the channel layout")
        return space

    def flatten(node: Any, src: Any) -> _Space | None:
        space = spaces.get(src) if isinstance(src, Node) else None
        s_in, s_out = _shape(src) if isinstance(src, Node) else None, _shape(node)
        if space is None or s_in is None or s_out is None:
            return opaque(node, f"unknown layout at {node.name}")
        if s_in == s_out:
            return space
        if len(s_in) == 4 and len(s_out) == 2 and s_out[0] == s_in[0] and s_out[1] == math.prod(s_in[1:]):
            return _Space(space.atoms, space.spatial * s_in[2] * s_in[3])
        return opaque(node, f"{node.name} reshapes the channels")

    def binary(node: Any) -> _Space | None:
        operands = [a for a in node.args if isinstance(a, Node)]
        others = [a for a in node.args if not isinstance(a, Node)]
        if not operands or node.kwargs or not all(isinstance(a, numbers.Number) for a in others):
            return opaque(node, f"unsupported operands at {node.name}")
        if len(operands) == 1:
            return passes(node, operands[0])
        a, b = operands[:2]
        sa, sb, so = _shape(a), _shape(b), _shape(node)
        pa, pb = spaces.get(a), spaces.get(b)
        if None in (sa, sb, so, pa, pb) or len(sa) != len(sb) or len(sa) < 2:
            return opaque(node, f"unsupported operands at {node.name}")
        if sa[1] == sb[1]:
            if pa.spatial != pb.spatial or [uf.size[x] for x in pa.atoms] != [uf.size[x] for x in pb.atoms]:
                return opaque(node, f"operands of {node.name} are laid out differently")
            for x, y in zip(pa.atoms, pb.atoms):
                uf.union(x, y)
            return pa
        if sb[1] == 1:  # broadcast over channels: the wider operand sets them
            fix(pb, f"broadcast at {node.name}")
            return passes(node, a)
        if sa[1] == 1:
            fix(pa, f"broadcast at {node.name}")
            return passes(node, b)
        return opaque(node, f"operands of {node.name} differ in width")

    def cat(node: Any) -> _Space | None:
        tensors = node.args[0] if node.args else node.kwargs.get("tensors")
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        out = _shape(node)
        if not isinstance(tensors, (list, tuple)) or out is None or len(out) != 4 or dim not in (1, -3):
            return opaque(node, f"{node.name} concatenates along a dimension other than channels")
        parts = [spaces.get(t) if isinstance(t, Node) else None for t in tensors]
        if any(p is None or p.spatial != 1 for p in parts):
            return opaque(node, f"unknown operand of {node.name}")
        return _Space(tuple(a for p in parts for a in p.atoms))

    def reduce(node: Any) -> _Space | None:
        src = node.args[0] if node.args else None
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        s_in, s_out = (_shape(src) if isinstance(src, Node) else None), _shape(node)
        dims = (dims,) if isinstance(dims, int) else dims
        if (
            s_in is None or s_out is None or len(s_in) != 4 or not isinstance(dims, (list, tuple))
            or not dims or {d % 4 for d in dims} - {2, 3} or s_out[:2] != s_in[:2]
        ):
            return opaque(node, f"{node.name} reduces over channels")
        return spaces.get(src) if spaces.get(src) is not None else opaque(node, f"unknown layout at {node.name}")

    def call_module(node: Any) -> _Space | None:
        module = gm.get_submodule(node.target)
        name = node.target
        src = node.args[0] if node.args and isinstance(node.args[0], Node) else None
        space = spaces.get(src) if src is not None else None
        parametric = isinstance(module, (nn.Conv2d, nn.BatchNorm2d, nn.Linear))
        if parametric:
            key = id(module)
            calls[key] = calls.get(key, 0) + 1
            shared = calls[key] > 1 or len(names_of.get(key, [])) > 1
            if shared or len(node.args) != 1 or node.kwargs or type(module) not in (nn.Conv2d, nn.BatchNorm2d, nn.Linear):
                out = opaque(node, f"{name} is called more than once, shared or subclassed")
                if shared and name in res.modules:  # fix what the first call saw as well
                    _, first_in, first_out = res.modules[name]
                    fix(first_in, f"{name} is called more than once")
                    fix(first_out, f"{name} is called more than once")
                res.modules[name] = ("fixed", None, None)
                if isinstance(module, nn.Conv2d) and out is not None:
                    res.conv_out[name] = out
                    uf.producers[uf.find(out.atoms[0])].append((name, 0))
                return out
        if isinstance(module, nn.Conv2d):
            ok = space is not None and space.spatial == 1 and width(space) == module.in_channels
            if module.groups == 1:
                if not ok:
                    fix(space, f"{name} reads channels the analysis does not follow")
                out_atom = uf.new(module.out_channels)
                uf.producers[out_atom].append((name, 0))
                out = _Space((out_atom,))
                res.modules[name] = ("conv", space if ok else None, out)
            elif ok and module.groups == module.in_channels == module.out_channels:
                out = space
                offset = 0
                for atom in space.atoms:
                    uf.producers[uf.find(atom)].append((name, offset))
                    offset += uf.size[atom]
                res.modules[name] = ("dwconv", space, out)
            else:
                why = f"{name} is a grouped conv (groups={module.groups}) that is not depth-wise"
                fix(space, why)
                out_atom = uf.new(module.out_channels, why)
                uf.producers[out_atom].append((name, 0))
                out = _Space((out_atom,))
                res.modules[name] = ("fixed", None, out)
            res.conv_out[name] = out
            return out
        if isinstance(module, nn.BatchNorm2d):
            out = passes(node, src) if src is not None else opaque(node, f"unknown input of {name}")
            if out is None or width(out) != module.num_features or out.spatial != 1:
                fix(out, f"{name} does not match its input")
                res.modules[name] = ("fixed", None, None)
            else:
                res.modules[name] = ("bn", out, out)
            return out
        if isinstance(module, nn.Linear):
            s_in = _shape(src) if src is not None else None
            ok = space is not None and s_in is not None and len(s_in) == 2
            ok = ok and width(space) * space.spatial == module.in_features
            if not ok:
                fix(space, f"{name} reads features the analysis does not follow")
            res.modules[name] = ("linear", space if ok else None, None)
            return _Space((uf.new(module.out_features, "output of a Linear layer"),))
        if isinstance(module, nn.Flatten):
            return flatten(node, src)
        if isinstance(
            module,
            (
                nn.ReLU, nn.ReLU6, nn.SiLU, nn.Hardswish, nn.Hardsigmoid, nn.Sigmoid, nn.Tanh, nn.GELU,
                nn.LeakyReLU, nn.ELU, nn.Mish, nn.Hardtanh, nn.SELU, nn.CELU, nn.Softplus,
                nn.Dropout, nn.Dropout2d, nn.AlphaDropout, nn.FeatureAlphaDropout, nn.Identity,
                nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d,
            ),
        ) and src is not None and len(node.args) == 1:
            return passes(node, src)
        return opaque(node, f"{name} ({type(module).__name__}) is not understood by the analysis")

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            shape = _shape(node)
            spaces[node] = _Space((uf.new(shape[1], "network input"),)) if shape and len(shape) >= 2 else None
        elif node.op == "get_attr":
            spaces[node] = None
        elif node.op == "output":
            for arg in tensor_inputs(node):
                fix(spaces.get(arg), "network output")
        elif node.op == "call_module":
            spaces[node] = call_module(node)
        else:  # call_function, call_method
            fname = _name(node.target)
            src = node.args[0] if node.args else None
            if fname in _QUERY_NAMES or (node.target is getattr and len(node.args) > 1 and node.args[1] in ("shape", "dtype", "device")):
                spaces[node] = None
            elif node.target is operator.getitem and isinstance(src, Node) and spaces.get(src) is None and _shape(src) is None:
                spaces[node] = None  # indexing a size or another non-tensor
            elif fname in _BINARY_NAMES:
                spaces[node] = binary(node)
            elif fname == "cat" and node.target in (torch.cat, torch.concat, torch.concatenate):
                spaces[node] = cat(node)
            elif fname in _FLATTEN_NAMES and isinstance(src, Node):
                spaces[node] = flatten(node, src)
            elif fname in _REDUCE_NAMES and isinstance(src, Node):
                spaces[node] = reduce(node)
            elif fname in _PASS_NAMES and isinstance(src, Node):
                spaces[node] = passes(node, src)
            else:
                spaces[node] = opaque(node, f"{node.name} ({fname or node.target}) is not understood by the analysis")
    return res


# --------------------------------------------------------------------------------------------
# choosing and rebuilding


def _check_method(method: str, seed: int) -> None:
    if method not in METHODS:
        raise ConfigError(f"unknown pruning method {method!r}; use one of {', '.join(METHODS)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"pruning seed must be an integer, got {seed!r}")


def check_method(method: str, seed: int) -> None:
    """A ConfigError unless ``method`` is a pruning method and ``seed`` one it takes: l1's filters are
    the same whatever the seed, so a seed other than 0 with it is refused (named -s5, the same network
    as -s0, until 0.9.4)."""
    _check_method(method, seed)
    if method == "l1" and seed != 0:
        raise ConfigError(f"a seed is for method random, got seed {seed} with l1: l1 keeps the filters of "
                          "largest L1 norm, the same whatever the seed")


def ratios_from_percentages(values: list[Any], label: str) -> list[float]:
    """Pruning percentages (0 to under 100: a campaign's list, ``zoo prune --ratios``) as ratios, each
    once (a percentage named twice is one network)."""
    if not values:
        raise ConfigError(f"{label} needs at least one percentage, e.g. 0, 10, 50")
    for v in values:
        number = isinstance(v, numbers.Real) and not isinstance(v, bool)
        if not number or not 0 <= v < 100:  # a whole number as written, in 80 characters: format g of one past a
            # float's range (a campaign's `ratios = [1e400]` written out) was OverflowError's traceback until 0.9.13
            raise ConfigError(f"{label} are percentages from 0 to under 100, got "
                              f"{f'{v:g}' if isinstance(v, float) else f'{v!r:.80}'}")
    if tiny := next((v for v in values if v > 0 and float(v) / 100 == 0), None):  # 5e-324 % is a ratio of 0.0,
        # the unpruned network, named and written as p0 without a word until 0.9.13
        raise ConfigError(f"{label}: {tiny:g} would be named p0, as the unpruned network: percentages are named to 6 "
                          "decimals")
    ratios = list(dict.fromkeys(float(v) / 100 for v in values))
    named: dict[str, float] = {}
    for ratio in ratios:  # 1e-9 was named p0, as the unpruned network, and its spec written over that one's (0.9.8)
        if (other := named.setdefault(percent_label(ratio), ratio)) != ratio:
            raise ConfigError(f"{label}: {ratio * 100:g} and {other * 100:g} would both be named "
                              f"p{percent_label(ratio)}: percentages are named to 6 decimals")
        if ratio > 0 and percent_label(ratio) == "0":
            raise ConfigError(f"{label}: {ratio * 100:g} would be named p0, as the unpruned network: percentages "
                              "are named to 6 decimals")
    return ratios


def fractions_said(ratios: list[float], label: str, sep: str = ",", listed: str = "{}") -> str | None:
    """What to say of pruning ``ratios`` (as ``ratios_from_percentages`` gives them) that look like fractions
    where percentages are asked for: none above 1 % and one not whole (``0.25, 0.5``: torch's pruning takes
    fractions); None otherwise. Written as asked, they prune almost nothing, without a word until 0.9.30.
    ``sep`` and ``listed``: how ``label`` takes a list (``--ratios 0,25``; a campaign's ``= [0, 25]``)."""
    if not (ratios and 0 < max(ratios) <= 0.01 and any(round(r * 100) != r * 100 for r in ratios)):
        return None
    percent = ", ".join(f"{r * 100:g}" for r in ratios)
    whole = [r for r in ratios if r * 10_000 >= 100]  # a fraction of 1: every channel, no pruning ratio
    meant = listed.format(sep.join(f"{r * 10_000:g}" for r in ratios if r * 10_000 < 100))
    left = f" ({', '.join(f'{r * 100:g}' for r in whole)} as a fraction would prune every channel: left out)" if whole else ""
    return (f"{label} are percentages, none above 1 here ({percent} % of the channels pruned); for those "
            f"fractions of the channels give {label} {meant}{left}")


def percent_label(ratio: float) -> str:
    """A pruning ratio as its spec's name says it: whole percentages as they always were (``50``),
    others to the digit given (``0.5``, ``99.9``; until 0.8.9 rounded, so 0.5 % was named as the
    unpruned ``p0`` and its file written over that one's)."""
    percent = round(ratio * 100, 6)
    return str(int(percent)) if percent == int(percent) else f"{percent:g}"


def check_ratio(ratio: float, label: str = "pruning ratio") -> None:
    """A ConfigError naming ``label`` (a spec file's ``ratio`` key too) unless ``ratio`` is in [0, 1)."""
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not 0 <= ratio < 1:
        raise ConfigError(f"{label} must be a number in [0, 1), got {ratio!r}")


def _conv_modules(model: nn.Module) -> dict[str, Any]:
    from torch import nn

    return {name: m for name, m in model.named_modules() if isinstance(m, nn.Conv2d)}


def _group_widths(model: nn.Module, res: _Analysis, widths: dict[str, int]) -> dict[int, int]:
    """The kept width of each group, from a per-conv width map (checked)."""
    if not isinstance(widths, dict):
        raise ConfigError(f"widths must be a mapping of conv name to channel count, got {type(widths).__name__}")
    convs = _conv_modules(model)
    target: dict[int, tuple[int, str]] = {}
    for name, w in widths.items():
        if name not in convs:
            raise ConfigError(f"unknown layer {name!r}: not a Conv2d of {type(model).__name__}")
        orig = convs[name].out_channels
        if isinstance(w, bool) or not isinstance(w, numbers.Integral) or not 1 <= w <= orig:
            raise ConfigError(f"width {w!r} for layer {name!r} must be an integer in [1, {orig}]")
        w = int(w)
        space = res.conv_out.get(name)
        if space is None:
            if w != orig:
                raise ConfigError(f"layer {name!r} is not used in the forward pass and cannot be pruned")
            continue
        if len(space.atoms) != 1:
            if w != orig:
                raise ConfigError(f"layer {name!r} outputs concatenated channels and cannot be pruned on its own")
            continue
        root = res.uf.find(space.atoms[0])
        if w != orig and root in res.uf.reason:
            raise ConfigError(f"layer {name!r} cannot be pruned: {res.uf.reason[root]}")
        if root in target and target[root][0] != w:
            other, ow = target[root][1], target[root][0]
            raise ConfigError(
                f"inconsistent widths for layers {other!r} ({ow}) and {name!r} ({w}): they share channels "
                "(residual add or depth-wise conv) and must be given the same width"
            )
        target[root] = (w, name)
    return {root: w for root, (w, _) in target.items()}


def _choose(model: nn.Module, res: _Analysis, widths: dict[int, int], method: str, seed: int) -> dict[int, list[int]]:
    """The kept channel indices of each group that is pruned."""
    import torch

    modules = dict(model.named_modules())
    rng = random.Random(seed)
    kept: dict[int, list[int]] = {}
    for root in res.roots():
        size = res.uf.size[root]
        k = widths.get(root, size)
        if k >= size:
            continue
        if method == "random":
            kept[root] = sorted(rng.sample(range(size), k))
            continue
        score = torch.zeros(size, dtype=torch.float64)
        for conv, offset in res.uf.producers[root]:
            w = modules[conv].weight.detach()
            score += w[offset : offset + size].abs().flatten(1).sum(1).double().cpu()
        # the k largest; ties go to the lower index, so the choice is deterministic
        order = sorted(range(size), key=lambda i: (-score[i].item(), i))
        kept[root] = sorted(order[:k])
    return kept


def _indices(res: _Analysis, kept: dict[int, list[int]], space: _Space | None) -> list[int] | None:
    """The kept indices of a space, or None where it keeps everything."""
    if space is None:
        return None
    uf = res.uf
    out: list[int] = []
    offset, changed = 0, False
    for atom in space.atoms:
        size = uf.size[atom]
        idx = kept.get(uf.find(atom))
        changed |= idx is not None
        out.extend(offset + i for i in (idx if idx is not None else range(size)))
        offset += size
    if not changed:
        return None
    s = space.spatial
    return [c * s + j for c in out for j in range(s)] if s > 1 else out


def _rebuild(model: nn.Module, res: _Analysis, kept: dict[int, list[int]]) -> nn.Module:
    import torch
    from torch import nn

    def indices(space: _Space | None) -> list[int] | None:
        return _indices(res, kept, space)

    new = copy.deepcopy(model)
    for name, (kind, space_in, space_out) in res.modules.items():
        old = new.get_submodule(name)
        if kind == "conv":
            idx_in, idx_out = indices(space_in), indices(space_out)
            if idx_in is None and idx_out is None:
                continue
            weight = old.weight.detach()
            if idx_out is not None:
                weight = weight[idx_out]
            if idx_in is not None:
                weight = weight[:, idx_in]
            bias = old.bias.detach()[idx_out] if old.bias is not None and idx_out is not None else old.bias
            repl = _conv_like(old, weight.shape[1], weight.shape[0], 1, weight, bias)
        elif kind == "dwconv":
            idx = indices(space_in)
            if idx is None:
                continue
            weight = old.weight.detach()[idx]
            bias = old.bias.detach()[idx] if old.bias is not None else None
            repl = _conv_like(old, len(idx), len(idx), len(idx), weight, bias)
        elif kind == "bn":
            idx = indices(space_in)
            if idx is None:
                continue
            repl = nn.BatchNorm2d(
                len(idx), eps=old.eps, momentum=old.momentum, affine=old.affine,
                track_running_stats=old.track_running_stats,
                device=_device_of(old), dtype=_dtype_of(old),
            )
            with torch.no_grad():
                if old.affine:
                    repl.weight.copy_(old.weight[idx])
                    repl.bias.copy_(old.bias[idx])
                if old.track_running_stats and old.running_mean is not None:
                    repl.running_mean.copy_(old.running_mean[idx])
                    repl.running_var.copy_(old.running_var[idx])
                    repl.num_batches_tracked.copy_(old.num_batches_tracked)
        elif kind == "linear":
            idx = indices(space_in)
            if idx is None:
                continue
            repl = nn.Linear(len(idx), old.out_features, bias=old.bias is not None, device=old.weight.device, dtype=old.weight.dtype)
            with torch.no_grad():
                repl.weight.copy_(old.weight[:, idx])
                if old.bias is not None:
                    repl.bias.copy_(old.bias)
        else:
            continue
        repl.train(old.training)
        for p_new, p_old in zip(repl.parameters(), old.parameters()):
            p_new.requires_grad_(p_old.requires_grad)
        parent, _, leaf = name.rpartition(".")
        setattr(new.get_submodule(parent) if parent else new, leaf, repl)
    return new


def _device_of(module: Any) -> Any:
    t = next(iter(list(module.parameters()) + list(module.buffers())), None)
    return t.device if t is not None else None


def _dtype_of(module: Any) -> Any:
    t = next((p for p in module.parameters() if p.is_floating_point()), None)
    return t.dtype if t is not None else None


def _conv_like(old: Any, in_channels: int, out_channels: int, groups: int, weight: Any, bias: Any) -> Any:
    import torch
    from torch import nn

    repl = nn.Conv2d(
        in_channels,
        out_channels,
        kernel_size=old.kernel_size,
        stride=old.stride,
        padding=old.padding,
        dilation=old.dilation,
        groups=groups,
        bias=bias is not None,
        padding_mode=old.padding_mode,
        device=weight.device,
        dtype=weight.dtype,
    )
    with torch.no_grad():
        repl.weight.copy_(weight)
        if bias is not None:
            repl.bias.copy_(bias)
    return repl


# --------------------------------------------------------------------------------------------
# public API


def channel_groups(model: nn.Module, input_size: int = 224) -> list[ChannelGroup]:
    """The channel groups of a network's convolutions, in graph order (see ChannelGroup)."""
    res = _analyse(model, input_size)
    return [res.group(root) for root in res.roots()]


def width_map(model: nn.Module) -> dict[str, int]:
    """Each Conv2d's qualified name and its number of output channels."""
    return {name: m.out_channels for name, m in _conv_modules(model).items()}


def apply_widths(
    model: nn.Module, widths: dict[str, int], method: str = "l1", seed: int = 0, *, input_size: int = 224,
    in_channels: int = 3, name: str | None = None,
) -> nn.Module:
    """A pruned copy of ``model`` whose convs have the given output widths.

    ``widths`` maps conv names to out_channels; layers not named keep their width unless they share
    channels with a named one (a residual add, a depth-wise conv), in which case they follow it.
    Convs of one group given different widths, an unknown layer, a width outside [1, original] or
    a width for a layer that is not prunable raise ConfigError naming the layer. The channels kept
    are chosen as in ``prune``.
    """
    res, kept = _plan_widths(model, widths, method, seed, input_size, in_channels, name)
    return _rebuild(model, res, kept)


def prune(model: nn.Module, ratio: float, method: str = "l1", seed: int = 0, *, input_size: int = 224,
          in_channels: int = 3) -> nn.Module:
    """A copy of ``model`` with ``ratio`` of each prunable channel group's filters removed.

    Each group of C channels keeps ``max(1, round(C * (1 - ratio)))``, chosen by the summed L1
    norm of the group's filters (``method="l1"``, the largest kept) or at random from ``seed``
    (``method="random"``); the result is ``apply_widths`` with those widths. ``input_size`` is the
    side of the square input the analysis takes shapes from (one forward pass at batch 1), and
    ``in_channels`` its channels.
    """
    res, kept = _plan_ratio(model, ratio, method, seed, input_size, in_channels)
    return _rebuild(model, res, kept)


def ratio_widths(model: nn.Module, ratio: float, *, input_size: int = 224) -> dict[str, int]:
    """The width map ``prune(model, ratio)`` applies: every conv of a prunable group at
    ``max(1, round(C * (1 - ratio)))``, the others at their own width."""
    check_ratio(ratio)
    return _ratio_widths(model, _analyse(model, input_size), ratio)


def pruning_plan(
    model: nn.Module, ratio: float, method: str = "l1", seed: int = 0, *, input_size: int = 224
) -> dict[str, list[int]]:
    """What ``prune`` would keep: each Conv2d and BatchNorm2d whose output channels are pruned,
    with the (sorted) indices of the output channels it keeps."""
    res, kept = _plan_ratio(model, ratio, method, seed, input_size)
    plan: dict[str, list[int]] = {}
    for name, (kind, space_in, space_out) in res.modules.items():
        space = space_out if kind == "conv" else space_in if kind in ("dwconv", "bn") else None
        idx = _indices(res, kept, space)
        if idx is not None:
            plan[name] = idx
    return plan


def _ratio_widths(model: nn.Module, res: _Analysis, ratio: float) -> dict[str, int]:
    widths = width_map(model)
    for root in res.roots():
        group = res.group(root)
        if group.prunable:
            k = max(1, round(group.channels * (1 - ratio)))
            for name in group.convs:
                if len(res.conv_out[name].atoms) == 1:  # not a depth-wise conv over a concatenation
                    widths[name] = k
    return widths


def _plan_ratio(
    model: nn.Module, ratio: float, method: str, seed: int, input_size: int, in_channels: int = 3,
    name: str | None = None,
) -> tuple[_Analysis, dict[int, list[int]]]:
    check_ratio(ratio)
    _check_method(method, seed)
    res = _analyse(model, input_size, in_channels, name)
    widths = _ratio_widths(model, res, ratio)
    return res, _choose(model, res, _group_widths(model, res, widths), method, seed)


def _plan_widths(
    model: nn.Module, widths: dict[str, int], method: str, seed: int, input_size: int, in_channels: int = 3,
    name: str | None = None,
) -> tuple[_Analysis, dict[int, list[int]]]:
    _check_method(method, seed)
    res = _analyse(model, input_size, in_channels, name)
    return res, _choose(model, res, _group_widths(model, res, widths), method, seed)


def pruned_spec(base: str, ratio: float, method: str = "l1", seed: int = 0) -> dict[str, Any]:
    """A JSON-able spec of ``base`` pruned by ``ratio``: a torchvision model name, or a spec file or
    a network of your own (``FILE.py:NAME``), whose spec the pruned one carries as ``base_spec``
    (a network of your own, with its file's text), with its input size and channels."""
    from tracker.zoo.spec import resolve

    check_ratio(ratio)
    check_method(method, seed)
    ref = resolve(base)
    if ref.input_shape is not None:
        from tracker.zoo.spec import not_images

        raise not_images(ref, "pruning follows the channels of networks of images")
    size = 224 if ref.spec is None else ref.input_size  # a zoo name: as its specs always were
    base = ref.build()
    if not width_map(base):  # "wrote 1 pruned spec" of a network with nothing to prune until 0.9.6
        raise ConfigError(f"{ref.name} has no convolution (Conv2d) to prune: pruning removes convolutions' filters")
    res, kept = _plan_ratio(base, ratio, method, seed, size, ref.in_channels, ref.name)
    if ratio > 0 and not any(res.group(root).prunable for root in res.roots()):
        # "wrote 1 pruned spec" of convnext_tiny, vit_b_16 and swin_t, each the unpruned network under a
        # pruned name and ratio, until 0.9.7
        why = next((res.uf.reason[root] for root in res.roots() if root in res.uf.reason), "")
        raise ConfigError(f"{ref.name}: none of its convolutions can be pruned{f' ({why})' if why else ''}: "
                          "a pruned spec of it would be the network itself")
    pruned = _rebuild(base, res, kept)
    spec: dict[str, Any] = {
        "format": FORMAT,
        "kind": "pruned",
        "name": f"{ref.name}-p{percent_label(ratio)}-{method}-s{seed}",
        "base": ref.name,
        "ratio": float(ratio),
        "method": method,
        "seed": seed,
        "widths": width_map(pruned),
    }
    if ref.spec is not None:
        spec.update({"base_spec": ref.spec, "input_size": ref.input_size})
        if ref.in_channels != 3:
            spec["in_channels"] = ref.in_channels
    return spec


def build_pruned(spec: dict[str, Any]) -> nn.Module:
    """The network a ``pruned_spec`` describes: ``base`` rebuilt with the spec's widths."""
    from tracker.zoo import build_model

    if not isinstance(spec, dict):
        raise ConfigError(f"a pruned-network spec must be a mapping, got {type(spec).__name__}")
    if spec.get("format") != FORMAT:
        raise ConfigError(f"spec format {spec.get('format')!r} is not {FORMAT!r}")
    if spec.get("kind") != "pruned":
        raise ConfigError(f"spec kind {spec.get('kind')!r} is not 'pruned'")
    for key in ("base", "widths"):
        if key not in spec:
            raise ConfigError(f"pruned-network spec lacks {key!r}")
    if "base_spec" in spec:  # a spec file's network or one of your own, as the spec carries it
        from tracker.zoo.spec import spec_ref

        ref = spec_ref(spec["base_spec"])
        base = ref.build()
        _check_covered(base, spec["widths"])
        return apply_widths(base, spec["widths"], spec.get("method", "l1"), spec.get("seed", 0),
                            input_size=ref.input_size, in_channels=ref.in_channels, name=ref.name)
    model = build_model(spec["base"])
    _check_covered(model, spec["widths"])
    return apply_widths(model, spec["widths"], spec.get("method", "l1"), spec.get("seed", 0), name=str(spec["base"]))


def _check_covered(model: nn.Module, widths: Any) -> None:
    """A pruned spec names every convolution of its base, as ``pruned_spec`` writes it: one it
    lacks was left unpruned without a word until 0.9.6 (a spec's ``widths`` of none measured the
    whole network under the pruned one's name)."""
    convs = width_map(model)
    if not isinstance(widths, dict) or any(name not in convs for name in widths):
        return  # a layer it does not have is said by apply_widths
    if missing := [name for name in convs if name not in widths]:
        raise ConfigError(f"widths lack {len(missing)} of the base's {len(convs)} convolutions "
                          f"({missing[0]} first): a pruned spec gives each its channels")
