"""One faithful description of a network: its dataflow graph with per-node features.

A description is a list of nodes in execution order, in the node format of torch.fx
(``name``, ``op``, ``kind``, ``inputs``, ``out_shape`` at batch 1, ``attrs``, ``params``),
which is also the format of the perf4sight TX2 architectures, so networks traced here and
networks imported from elsewhere become the same rows. Per-node features (FLOPs, MACs,
bytes, activation memory kept for training) and network aggregates are derived from the
nodes by ``tracker.describe.features`` alone: the warehouse, the fingerprints and
``tracker describe`` all see the same numbers.

Tracing uses ``torch.fx.symbolic_trace`` with shape propagation; a network with
data-dependent control flow (detection models) falls back to forward hooks on its leaf
modules, and the description says so (``method = "hooks"``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any

FORMAT = "tracker.description/1"


@dataclass
class Node:
    name: str
    op: str  # placeholder, call_module, call_function, call_method, output
    kind: str  # Conv2d, BatchNorm2d, relu, add, cat, ...
    inputs: list[str] = field(default_factory=list)
    out_shape: list[int] | None = None  # at batch size 1
    attrs: dict[str, Any] = field(default_factory=dict)
    params: int = 0
    target: str | None = None


_NODE_FIELDS = tuple(f.name for f in fields(Node))


@dataclass
class Description:
    name: str
    input_shape: list[int]  # at batch size 1, e.g. [1, 3, 224, 224]
    nodes: list[Node]
    method: str  # fx, hooks, or import:<source>
    notes: list[str] = field(default_factory=list)

    @cached_property
    def description_hash(self) -> str:
        """Hash of the architecture as described (nodes, shapes, attributes), not of its weights.

        Computed once (under a ms for a few hundred nodes): a description is not modified once built.
        Each node is read field by field, not copied with ``asdict`` (a deep copy, 5 to 10 times
        slower, and the same JSON: the keys are sorted either way)."""
        body = json.dumps(
            {"input_shape": self.input_shape, "nodes": [{f: getattr(n, f) for f in _NODE_FIELDS} for n in self.nodes]},
            sort_keys=True,
            separators=(",", ":"),
            default=str,
        )
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    @property
    def image(self) -> tuple[int, int] | None:
        """``(input_size, in_channels)`` where its input is one square image ``(1, C, S, S)``; None
        where it is not images (a network of your own of another ``INPUT_SHAPE``)."""
        s = self.input_shape
        return (int(s[-1]), int(s[1])) if len(s) == 4 and s[2] == s[3] else None

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(src, n.name) for n in self.nodes for src in n.inputs]

    def to_json(self) -> dict[str, Any]:
        """The description as ``description/description.json`` holds it: a constant of a node that is no
        finite number (``clamp(max=float("inf"))``) is null, absent, as JSON has no Infinity or NaN
        (written as such until 0.9.12, which strict readers refuse); its hash is the one traced."""
        return {
            "format": FORMAT,
            "name": self.name,
            "input_shape": self.input_shape,
            "method": self.method,
            "notes": self.notes,
            "description_hash": self.description_hash,
            "nodes": [_nulled(asdict(n)) for n in self.nodes],
        }

    def to_json_text(self) -> str:
        """:meth:`to_json` as JSON text, strict: no Infinity or NaN."""
        return json.dumps(self.to_json(), allow_nan=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Description:
        """A description :meth:`to_json` wrote; its hash the one it says (of the nodes as traced: a
        constant written null, not finite, would hash otherwise)."""
        from tracker.errors import ConfigError

        if data.get("format") != FORMAT:
            raise ConfigError(f"not a network description (format {data.get('format')!r}, expected {FORMAT})")
        nodes = [Node(**n) for n in data["nodes"]]
        desc = cls(data["name"], list(data["input_shape"]), nodes, data["method"], list(data.get("notes", [])))
        if isinstance(data.get("description_hash"), str):
            desc.__dict__["description_hash"] = data["description_hash"]  # the cached_property's value
        return desc

    def to_networkx(self) -> Any:
        """A networkx DiGraph with the node fields as node attributes (PerfSeer's dataset form)."""
        import networkx as nx

        g = nx.DiGraph(name=self.name, input_shape=self.input_shape, method=self.method)
        for n in self.nodes:
            g.add_node(n.name, **{k: v for k, v in asdict(n).items() if k != "name"})
        g.add_edges_from(self.edges)
        return g

    def graph_artifact(self) -> str:
        """The graph as networkx node-link JSON, readable with ``networkx.node_link_graph``: a constant
        that is no finite number is null, as in :meth:`to_json` (through the same :func:`_nulled`), so
        that a description traced and one read back from a run's description.json give one graph (the
        first wrote ``"inf"``, a string, until 0.9.13); the hash is the one traced."""
        import networkx as nx

        data = nx.node_link_data(self.to_networkx(), edges="edges")
        data["graph"]["description_hash"] = self.description_hash
        return json.dumps(_nulled(data), default=str, allow_nan=False)


def _nulled(value: Any) -> Any:
    """``value`` with each float that is no finite number None (:meth:`Description.to_json` and
    :meth:`Description.graph_artifact`: JSON has no Infinity or NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nulled(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nulled(v) for v in value]
    return value


# -- tracing ------------------------------------------------------------------------------


def _attrs_of_module(module: Any, in_shapes: list[list[int] | None] | None = None) -> dict[str, Any]:
    """The attributes a node keeps of its module; for a module kept whole of
    :data:`WHOLE_MODULE_KINDS`, its MACs per sample too (``macs``, given its inputs' shapes)."""
    names = (
        "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
        "num_features", "eps", "in_features", "out_features", "output_size", "ceil_mode", "p",
        "inplace", "normalized_shape", "num_groups", "negative_slope",
    )
    attrs: dict[str, Any] = {}
    for a in names:
        if hasattr(module, a):
            v = getattr(module, a)
            attrs[a] = list(v) if isinstance(v, tuple) else v
    if hasattr(module, "bias") and ("in_channels" in attrs or "in_features" in attrs):
        attrs["bias"] = module.bias is not None
    if type(module).__name__ in WHOLE_MODULE_KINDS and in_shapes is not None:
        macs = whole_module_macs(module, in_shapes)
        if macs is not None:
            attrs["macs"] = macs
    return {k: v for k, v in attrs.items() if isinstance(v, (int, float, bool, str, list, type(None)))}


#: torch.nn modules whose work features counts though they are kept whole (torch.fx keeps every
#: torch.nn module whole; hooks see them whole too, below): attention, transformer layers and
#: recurrent layers, and (since 0.7.9) transposed convolutions and bilinear layers, each's
#: multiply-accumulates read from its configuration and its input's shape (``whole_module_macs``)
#: into the node's ``macs`` attribute.
WHOLE_MODULE_KINDS = ("MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
                      "TransformerDecoder", "Transformer", "LSTM", "GRU", "RNN", "ConvTranspose1d", "ConvTranspose2d",
                      "ConvTranspose3d", "Bilinear")
#: Gates of a recurrent layer, by its ``mode``: each one a matrix product of input and hidden state.
_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def sequence_like(shape: list[int] | None, query: list[int]) -> bool:
    """Whether a further input of an attention module can be a sequence beside ``query`` (keys and
    values, an encoder's output) rather than a mask torch.fx lists among its inputs too: of the
    query's rank, and of 1 wherever the query is (its batch, at batch 1). A 2-D mask, or a 3-D one
    of a batch times heads, is not."""
    return bool(shape) and len(shape) == len(query) and all(s == 1 for s, q in zip(shape[:-1], query[:-1]) if q == 1)


def _steps(shape: list[int] | None, batch_first: bool) -> int | None:
    """The sequence length of an input of a sequence module described at batch 1: ``(L, E)``
    unbatched, ``(1, L, E)`` batch first, else ``(L, 1, E)``."""
    if not shape or len(shape) not in (2, 3):
        return None
    return int(shape[1] if len(shape) == 3 and batch_first else shape[0])


def _attention_macs(attn: Any, steps: int, keys: int) -> int:
    """A MultiheadAttention's MACs for ``steps`` queries over ``keys`` keys: the input projections
    (query, key and value), the scores and the weighted sum of the values, the output projection."""
    e = int(attn.embed_dim)
    return steps * e * e + keys * int(attn.kdim) * e + keys * int(attn.vdim) * e + 2 * steps * keys * e + steps * e * e


def whole_module_macs(module: Any, in_shapes: list[list[int] | None]) -> int | None:
    """Multiply-accumulates of one sample through a module of :data:`WHOLE_MODULE_KINDS`, from its
    configuration and the shapes of its inputs (at batch 1); None for any other module, or inputs
    it cannot read. Norms, activations and dropout inside it are not counted (a few per cent)."""
    kind = type(module).__name__
    first = in_shapes[0] if in_shapes else None
    if kind == "MultiheadAttention":
        steps = _steps(first, bool(module.batch_first))
        # its keys: a second input, unless that may be a mask (torch.fx lists masks among the inputs,
        # and with a query that is also its keys, the mask comes second). Until 0.8.0 a padding
        # mask (1, S) counted one key.
        second = in_shapes[1] if len(in_shapes) > 1 else None
        keys = _steps(second if first and sequence_like(second, first) else first, bool(module.batch_first))
        return None if steps is None or keys is None else _attention_macs(module, steps, keys)
    if kind in ("TransformerEncoderLayer", "TransformerDecoderLayer"):
        attn = module.self_attn
        steps = _steps(first, bool(attn.batch_first))
        if steps is None:
            return None
        macs = _attention_macs(attn, steps, steps) + 2 * steps * attn.embed_dim * module.linear1.out_features
        if kind == "TransformerDecoderLayer":  # and attention over the encoder's output (the memory)
            keys = _steps(in_shapes[1] if len(in_shapes) > 1 else None, bool(attn.batch_first))
            if keys is None:
                return None
            macs += _attention_macs(module.multihead_attn, steps, keys)
        return int(macs)
    if kind in ("TransformerEncoder", "TransformerDecoder"):
        layers = [whole_module_macs(layer, in_shapes) for layer in module.layers]
        return None if any(m is None for m in layers) else int(sum(layers))  # type: ignore[arg-type]
    if kind == "Transformer":  # the encoder over the source, the decoder over the target and the encoded source
        if len(in_shapes) < 2:
            return None
        parts = [whole_module_macs(module.encoder, in_shapes[:1]),
                 whole_module_macs(module.decoder, [in_shapes[1], in_shapes[0]])]
        return None if any(m is None for m in parts) else int(sum(parts))  # type: ignore[arg-type]
    if kind.startswith("ConvTranspose") and first:  # each input position meets the whole kernel, as
        # torch's FLOP counter counts it: (N, C_in, *spatial) in, weight (C_in, C_out / groups, *kernel)
        return int(math.prod(first[1:]) * math.prod(module.weight.shape[1:]))
    if kind == "Bilinear" and first:  # x1ᵀ A_k x2 for each output k, at every position before the last dimension
        return int(math.prod(first[1:-1]) * module.out_features * module.in1_features * module.in2_features)
    if kind in ("LSTM", "GRU", "RNN") and module.mode in _GATES:
        steps = _steps(first, bool(module.batch_first))
        if steps is None:
            return None
        hidden, proj = int(module.hidden_size), int(getattr(module, "proj_size", 0) or 0)
        out, dirs = proj or hidden, 2 if module.bidirectional else 1
        per_step = sum(_GATES[module.mode] * hidden * ((int(module.input_size) if layer == 0 else out * dirs) + out)
                       + proj * hidden for layer in range(int(module.num_layers)))
        return int(steps * dirs * per_step)
    return None


#: torch.nn.functional's convolutions: their arguments after (input, weight, bias) in order, named
#: in a node's attributes as a Conv module's are (``F.conv2d(x, w, None, 2, 1)``: stride 2, padding 1).
FUNCTIONAL_CONV_ARGS = {
    **{f"conv{d}d": ("stride", "padding", "dilation", "groups") for d in (1, 2, 3)},
    **{f"conv_transpose{d}d": ("stride", "padding", "output_padding", "groups", "dilation") for d in (1, 2, 3)},
}


def _conv_operands(in_shapes: list[list[int] | None]) -> tuple[list[int], list[int]] | None:
    """A functional convolution's input and weight shapes, its first two tensors, where both are
    known and of one rank (``(N, C, *spatial)`` and ``(out, in, *kernel)``); None otherwise."""
    x, w = (in_shapes + [None, None])[:2]
    return (x, w) if x and w and len(x) == len(w) >= 3 else None


def functional_conv_attrs(kind: str, attrs: dict[str, Any], in_shapes: list[list[int] | None]) -> dict[str, Any]:
    """A functional convolution's attributes as a Conv module's: its positional arguments by name,
    and its channels from its input's and weight's shapes (a transposed one's weight is
    ``(in, out / groups, *kernel)``), so that it is told a depthwise or grouped convolution as a
    module is. Other nodes' attributes unchanged."""
    names = FUNCTIONAL_CONV_ARGS.get(kind)
    if names is None:
        return attrs
    out: dict[str, Any] = {}
    for key, v in attrs.items():
        i = int(key[3:]) if key.startswith("arg") and key[3:].isdigit() else -1
        out[names[i - 3] if 3 <= i < 3 + len(names) else key] = v
    if operands := _conv_operands(in_shapes):
        x, w = operands
        groups = int(out.get("groups", 1) or 1)
        out["in_channels"] = int(x[1])
        out["out_channels"] = int(w[1]) * groups if kind.startswith("conv_transpose") else int(w[0])
    return out


def einsum_steps(equation: Any, in_shapes: list[list[int] | None]) -> list[tuple[int, int]] | None:
    """The products ``torch.einsum`` computes, left to right as it does without opt_einsum: for each
    operand after the first, (its multiply-accumulates, the elements of the tensor it makes). A
    product that sums an index (``"bij,bjk"`` over ``j``: the batched matrix product it becomes)
    takes the product of every index's size in its two operands; one that sums none is an
    element-wise or outer product, no MACs (as torch's FLOP counter counts ``mul``). An index is
    summed once no later operand and not the output names it (the output: after ``->``, else the
    indices named once, in alphabetical order). None for one operand, an ellipsis, or shapes it
    cannot read."""
    if not isinstance(equation, str) or "." in equation or len(in_shapes) < 2 or not all(in_shapes):
        return None
    spec = equation.replace(" ", "")
    inputs, _, output = spec.partition("->")
    operands = inputs.split(",")
    if len(operands) != len(in_shapes) or any(len(o) != len(s) for o, s in zip(operands, in_shapes)):
        return None
    if "->" not in spec:
        output = "".join(sorted(c for c in set(inputs) if c.isalpha() and inputs.count(c) == 1))
    sizes: dict[str, int] = {}
    for letters, shape in zip(operands, in_shapes):
        for letter, size in zip(letters, shape):  # type: ignore[arg-type]
            sizes[letter] = max(sizes.get(letter, 1), int(size))  # a size of 1 broadcasts
    steps, current = [], set(operands[0])
    for i, letters in enumerate(operands[1:], start=1):
        both = current | set(letters)
        later = set(output).union(*operands[i + 1:])
        current = {c for c in both if c in later}
        summed = both - current
        steps.append((math.prod(sizes[c] for c in both) if summed else 0, math.prod(sizes[c] for c in current)))
    return steps


def einsum_attrs(equation: Any, in_shapes: list[list[int] | None]) -> dict[str, Any]:
    """An einsum node's attributes from its products (``einsum_steps``, computed once): its
    multiply-accumulates (``macs``; of two operands only before 0.8.5, and a product that sums no
    index counted too) and, where it computes more than one product, the elements of what those
    before the last make (``intermediate_elements``), which autograd keeps (0.8.5). None of them
    for what ``einsum_steps`` cannot read."""
    steps = einsum_steps(equation, in_shapes)
    if steps is None:
        return {}
    out: dict[str, Any] = {"macs": sum(macs for macs, _ in steps)}
    if len(steps) > 1:
        out["intermediate_elements"] = [elems for _, elems in steps[:-1]]
    return out


def _sdpa_macs(in_shapes: list[list[int] | None]) -> int | None:
    """Multiply-accumulates of ``F.scaled_dot_product_attention(q, k, v)``: the scores ``q kᵀ``
    (L x S x E for each of q's leading dimensions) and their weighted sum of ``v`` (L x S x Ev), as
    torch's FLOP counter counts its two matrix products; the softmax is not counted."""
    if len(in_shapes) < 3 or not all(in_shapes[:3]) or min(len(s) for s in in_shapes[:3]) < 2:
        return None
    q, k, v = in_shapes[:3]
    return math.prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])


def function_macs(kind: str, in_shapes: list[list[int] | None], attrs: dict[str, Any]) -> int | None:
    """Multiply-accumulates of one sample through a function whose work no module's attributes
    give: torchvision's Swin ``shifted_window_attention`` (a leaf torch.fx does not trace into),
    from its input ``(1, H, W, C)`` and window: the query-key-value projection and the output
    projection over the input padded to whole windows, and in each window of N positions the
    scores and the weighted sum (2·N·C per position); since 0.8.4 ``scaled_dot_product_attention`` (``_sdpa_macs``;
    an einsum's are ``einsum_attrs``')
    and a transposed convolution called as a function (input elements x out / groups x kernel,
    from its weight ``(in, out / groups, *kernel)``). None for any other function, or inputs it
    cannot read."""
    if kind == "scaled_dot_product_attention":
        return _sdpa_macs(in_shapes)
    if kind.startswith("conv_transpose"):
        operands = _conv_operands(in_shapes)
        return math.prod(operands[0][1:]) * math.prod(operands[1][1:]) if operands else None
    if kind != "shifted_window_attention":
        return None
    shape, window = (in_shapes[0] if in_shapes else None), attrs.get("arg4")
    if not shape or len(shape) != 4 or not isinstance(window, list) or len(window) != 2:
        return None
    (h, w, c), (wh, ww) = shape[1:], (int(window[0]), int(window[1]))
    padded = -(-h // wh) * wh * (-(-w // ww) * ww)  # positions, padded to whole windows
    return int(padded * c * (4 * c + 2 * wh * ww))


def _const(v: Any) -> Any:
    if isinstance(v, (int, float, bool, str, type(None))):
        return v
    if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, bool, str, type(None))) for x in v):
        return list(v)
    return repr(v)


def _shape(meta: Any) -> list[int] | None:
    shape = getattr(meta, "shape", None)
    return [int(d) for d in shape] if shape is not None else None


def propagate_shapes(gm: Any, *args: Any) -> None:
    """Run a ``torch.fx`` graph module on ``args`` and keep the shape of each node's output, where
    that output is one tensor, in ``node.meta["shape"]`` (a tuple of ints; other nodes get none).

    What torch.fx's ``ShapeProp`` gives as ``tensor_meta.shape``, without what it imports:
    ``torch.fx.experimental.symbolic_shapes`` and sympy, 0.7 s and about 50 MB for the rest of the
    process (``tracker predict`` describes its network; a measuring child prunes its network)."""
    import torch
    import torch.fx

    class Shapes(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            result = super().run_node(n)
            if isinstance(result, torch.Tensor):
                n.meta["shape"] = tuple(result.shape)
            return result

    Shapes(gm).run(*args)


def propagated_shape(node: Any) -> tuple[int, ...] | None:
    """The output shape ``propagate_shapes`` kept for ``node``: None where that output was not
    one tensor, or ``node`` is not a graph node (a constant argument)."""
    meta = getattr(node, "meta", None)
    return meta.get("shape") if meta is not None else None


def _new_params(tensors: Any, counted: set[int]) -> int:
    """The elements of those of ``tensors`` (parameters: a leaf call's, whole where torch.fx keeps a
    container whole, MultiheadAttention) not yet ``counted``, each then counted: a
    tensor is counted once by its identity, however many modules hold it or calls use it (a tied
    language model head, ``head.weight = emb.weight``, and a convolution's weight also given to
    ``F.conv2d`` were counted twice, in params and weight_bytes, until 0.9.8)."""
    total = 0
    for p in tensors:
        if id(p) not in counted:
            counted.add(id(p))
            total += int(p.numel())
    return total


def trace_fx(model: Any, name: str, input_shape: list[int], example: Any = None) -> Description:
    import torch
    import torch.fx

    gm = torch.fx.symbolic_trace(model)
    example = torch.randn(*input_shape) if example is None else example
    with torch.no_grad():
        propagate_shapes(gm, example)
    modules = dict(gm.named_modules())
    nodes: list[Node] = []
    shapes: dict[str, list[int] | None] = {}  # each node's output shape, by name, as the nodes are made
    counted: set[int] = set()  # each parameter once (a module called twice, weights tied): their ids
    for fx_node in gm.graph.nodes:
        inputs = [a.name for a in fx_node.all_input_nodes]
        shape = propagated_shape(fx_node)
        out_shape = list(shape) if shape is not None else None
        if fx_node.op == "call_module":
            mod = modules[fx_node.target]
            params = _new_params(mod.parameters(), counted)
            attrs = _attrs_of_module(mod, [shapes.get(i) for i in inputs])
            nodes.append(Node(fx_node.name, "call_module", type(mod).__name__, inputs, out_shape, attrs, params,
                              str(fx_node.target)))
        elif fx_node.op in ("call_function", "call_method"):
            kind = fx_node.target if isinstance(fx_node.target, str) else getattr(fx_node.target, "__name__", str(fx_node.target))
            attrs = {f"arg{i}": _const(a) for i, a in enumerate(fx_node.args) if not isinstance(a, torch.fx.Node) and i > 0}
            attrs.update({k: _const(v) for k, v in fx_node.kwargs.items() if not isinstance(v, torch.fx.Node)})
            if kind == "einsum" and fx_node.args and isinstance(fx_node.args[0], str):
                attrs["equation"] = fx_node.args[0]
            # the tensors in the order the call took them, by position then by keyword (inputs name
            # each once: einsum(eq, a, a); F.conv2d(x, weight=w) gives its weight by keyword)
            in_shapes = [shapes.get(a.name) for a in (*fx_node.args, *fx_node.kwargs.values()) if isinstance(a, torch.fx.Node)]
            attrs = functional_conv_attrs(kind, attrs, in_shapes)
            if kind == "einsum":  # its MACs and what its products make (maxvit's attention)
                attrs.update(einsum_attrs(attrs.get("equation"), in_shapes))
            elif (macs := function_macs(kind, in_shapes, attrs)) is not None:
                attrs["macs"] = macs
            nodes.append(Node(fx_node.name, fx_node.op, kind, inputs, out_shape, attrs))
        elif fx_node.op == "get_attr":
            value = gm
            for part in str(fx_node.target).split("."):
                value = getattr(value, part)
            count = _new_params([value], counted) if isinstance(value, torch.nn.Parameter) else 0
            nodes.append(Node(fx_node.name, "get_attr", "get_attr", inputs, _shape(value), params=count, target=str(fx_node.target)))
        else:  # placeholder, output
            if fx_node.op == "output" and out_shape is None and inputs:
                out_shape = shapes.get(inputs[0])
            nodes.append(Node(fx_node.name, fx_node.op, fx_node.op, inputs, out_shape))
        shapes[nodes[-1].name] = nodes[-1].out_shape
    return Description(name, input_shape, nodes, "fx")


def hooked_modules(model: Any) -> list[Any]:
    """The modules whose calls stand for a network's layers where hooks see it (``trace_hooks``;
    ``tracker profile layers`` times each alone): its leaf modules, and the outermost modules kept
    whole (:data:`WHOLE_MODULE_KINDS`) in place of what lies inside them. Their parts are not
    called as modules: an attention computes with its output projection's weights, and a
    transformer layer's fast path in inference calls none of its own."""
    def inside(q: str, modules: list[str]) -> bool:  # a module strictly inside one of ``modules`` ('' is the model)
        return any(q != w and (not w or q.startswith(w + ".")) for w in modules)

    whole = [q for q, m in model.named_modules() if type(m).__name__ in WHOLE_MODULE_KINDS]
    outer = [q for q in whole if not inside(q, whole)]
    return [m for q, m in model.named_modules() if (q in outer or not list(m.children())) and not inside(q, outer)]


def trace_hooks(model: Any, name: str, input_shape: list[int], example: Any = None) -> Description:
    """Leaf modules in call order, linked where one's output tensor is another's input.

    Tensors are matched by ``id``; every tensor registered is kept alive until the trace ends,
    so a freed output's id cannot be taken by a later, unrelated tensor (a false edge, and a
    description hash that changed from one process to the next)."""
    import torch

    produced: dict[int, str] = {}
    kept: list[Any] = []  # the registered tensors themselves, so that their ids stay theirs
    nodes: list[Node] = [Node("x", "placeholder", "placeholder", [], list(input_shape))]
    names = {m: n for n, m in model.named_modules()}
    counts: dict[str, int] = {}
    counted: set[int] = set()  # each parameter once (a module called twice, weights tied): their ids

    def hook(module: Any, args: tuple, output: Any) -> None:
        qual = names.get(module, type(module).__name__)
        counts[qual] = counts.get(qual, 0) + 1
        node_name = qual.replace(".", "_") + (f"_{counts[qual] - 1}" if counts[qual] > 1 else "")
        ins = [produced[id(a)] for a in args if torch.is_tensor(a) and id(a) in produced]
        out = output if torch.is_tensor(output) else None
        params = _new_params(module.parameters(), counted)  # shared weights count once
        nodes.append(Node(node_name, "call_module", type(module).__name__, ins or [], _shape(out),
                          _attrs_of_module(module, [_shape(a) for a in args if torch.is_tensor(a)]), params, qual))
        if out is not None:
            produced[id(out)] = node_name
            kept.append(out)

    inside = [0]  # hooked modules being called: what they call is theirs

    def enter(module: Any, args: tuple) -> None:
        inside[0] += 1

    def leave(module: Any, args: tuple, output: Any) -> None:
        inside[0] -= 1
        hook(module, args, output)

    between: dict[str, int] = {}  # the functions called outside every hooked module that do work, by kind

    class Between(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            if not inside[0] and (kind := _working_function(func)) is not None:
                between[kind] = between.get(kind, 0) + 1
            return func(*args, **(kwargs or {}))

    modules = hooked_modules(model)
    handles = [m.register_forward_pre_hook(enter) for m in modules] + [m.register_forward_hook(leave) for m in modules]
    try:
        x = torch.randn(*input_shape) if example is None else example
        if torch.is_tensor(x):
            produced[id(x)] = "x"
            kept.append(x)
        with torch.no_grad(), Between():
            model(x)
    finally:
        for h in handles:
            h.remove()
    desc = Description(name, input_shape, nodes, "hooks")
    if between:  # unsaid until 0.9.25 (an FPN's upsampling and adds, a detector's box coding)
        calls = sorted(between.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{kind} x{count}" for kind, count in calls[:UNSEEN_SHOWN])
        desc.notes.append(f"{sum(between.values()):,} calls of functions between its modules do work that is counted "
                          f"nowhere (hooks see modules alone): {shown}{', ...' if len(calls) > UNSEEN_SHOWN else ''}")
    return desc


#: The most kinds of function a hooks description's note names (``trace_hooks``).
UNSEEN_SHOWN = 6


def _working_function(func: Any) -> str | None:
    """The kind of a torch function called (``add`` of ``Tensor.__add__`` or ``torch.add``) where its node would
    do work that features count (a convolution, a product, a norm, an activation, a pooling, element-wise work,
    a concatenation), else None (a view, a size, an attribute read)."""
    from tracker.describe.features import FUNCTIONAL, category

    kind = getattr(func, "__name__", None)
    if not isinstance(kind, str):
        return None
    kind = kind.strip("_")
    if kind.startswith("r") and kind[1:] in ("add", "sub", "mul", "truediv", "matmul"):  # x.__radd__: an add
        kind = kind[1:]
    return kind if category(Node(kind, "call_function", kind)) in FUNCTIONAL else None


def describe_module(model: Any, name: str, input_size: int = 224, in_channels: int = 3, example: Any = None,
                    input_shape: tuple[int, ...] | None = None, input_vocab: int | None = None) -> Description:
    """Describe a module: torch.fx first, leaf-module hooks where tracing fails. Its input: one image
    ``(1, in_channels, input_size, input_size)``, or one input of ``input_shape`` (token ids where
    ``input_vocab`` says how many), or ``example`` (structured input: hooks only).

    What the network's ``forward`` prints goes to stderr, as what it prints as it is built does: on
    stdout it came before a command's JSON (``describe --format json``) until 0.9.8."""
    import contextlib
    import sys

    with contextlib.redirect_stdout(sys.stderr):
        return _describe_module(model, name, input_size, in_channels, example, input_shape, input_vocab)


def _describe_module(model: Any, name: str, input_size: int, in_channels: int, example: Any,
                     input_shape: tuple[int, ...] | None, input_vocab: int | None) -> Description:
    from tracker.zoo.spec import input_batch

    shape_of_one = [1, *(input_shape or (in_channels, input_size, input_size))]
    ids = input_batch(1, in_channels, input_size, input_shape, input_vocab) if input_vocab else None
    model = model.eval()
    if example is None:
        try:
            desc = trace_fx(model, name, shape_of_one, ids)
        except Exception as exc:  # data-dependent control flow, unsupported ops
            reason = f"torch.fx could not trace {name} ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); described with module hooks"
        else:
            unused = _held(model) - sum(n.params for n in desc.nodes)
            if unused > 0:  # left out without a word until 0.9.8 (an nn.Linear(1000, 1000) never called)
                desc.notes.append(f"{unused:,} parameters belong to modules the network never calls: params leaves "
                                  "them out")
            return _uncounted(desc)
    else:
        reason = f"{name} takes structured input; described with module hooks"
    try:
        desc = trace_hooks(model, name, shape_of_one, example if example is not None else ids)
    except Exception as exc:  # it does not run on this input at all: bad input, said in one line
        from tracker.errors import ConfigError, allocation_failed

        if isinstance(exc, (MemoryError, RuntimeError)) and allocation_failed(exc) is not None:  # memory not given:
            raise  # the caller says so (describe_ref); said as "cannot run on" the input, the allocator's words, until 0.9.8

        kind = " of token ids" if input_vocab else ""
        shape = "its example input" if example is not None else f"a {'x'.join(map(str, shape_of_one))} input{kind}"
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise ConfigError(f"{name} cannot run on {shape}: {type(exc).__name__}{': ' + first if first else ''}") from None
    desc.notes.insert(0, reason)  # before what the hooks said of it
    missing = _held(model) - sum(n.params for n in desc.nodes)
    if missing > 0:  # weights of modules that are not leaves (MultiheadAttention's projection), or not called
        desc.notes.append(f"{missing:,} parameters belong to no leaf module called: their work is not counted")
    return _uncounted(desc)


def _held(model: Any) -> int:
    """The parameters a network holds, each tensor once."""
    return int(sum(p.numel() for p in model.parameters()))


def _uncounted(desc: Description) -> Description:
    """Say, in a note, which modules with weights the FLOP count leaves out: those kept whole (torch.fx
    keeps torch.nn's modules whole, as hooks see leaves) that are no convolution, linear layer,
    norm or other kind whose work ``features`` counts (attention, transformer and recurrent layers
    are: :data:`WHOLE_MODULE_KINDS`), such as ``Bilinear`` (an embedding is a lookup: no arithmetic
    to leave out)."""
    from tracker.describe.features import category

    kinds: dict[str, int] = {}
    for n in desc.nodes:
        if (n.op == "call_module" and n.params and category(n) == "other" and "macs" not in n.attrs
                and n.kind not in ("Embedding", "EmbeddingBag")):
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
    if kinds:
        listed = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
        desc.notes.append(f"flops and macs leave out the work of {listed} (modules kept whole, of a kind not counted)")
    return desc
