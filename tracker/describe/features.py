"""Per-node features and network aggregates, derived from description nodes alone.

This is the one place features are computed: descriptions traced here and descriptions
imported from elsewhere go through the same functions, so training and prediction see
the same numbers (no train/serve skew).

Conventions (those of ``torch.utils.flop_counter``): a multiply-accumulate is one MAC and
two FLOPs; ``flops`` counts convolutions, linear layers and matrix products; cheaper
element-wise work (normalisation, activation, pooling, adds) is counted apart in
``elementwise_ops``. Bytes assume the description's element size (4 for float32).
"""

from __future__ import annotations

import math
from typing import Any

from tracker.describe.graph import FUNCTIONAL_CONV_ARGS, WHOLE_MODULE_KINDS, Description, Node, sequence_like

#: The version of what ``node_rows`` computes: a warehouse whose node rows another version computed
#: describes every network again (a full load). 1: until 0.7.5; 2: kept activation bytes (0.7.6);
#: 3: live activation bytes (0.7.9); 4: attention's projections and outputs in them, and every position of
#: a sequence-first tensor (0.8.0); 5: a convolution called as a function counts its MACs, from its
#: weight's shape (0.8.3; 0 before); 6: transposed convolutions, attention and einsum called as
#: functions write tensors of their own and keep for backward what autograd keeps (0.8.4); 7:
#: ``addmm``/``baddbmm`` are matrix products, an einsum of three operands counts its products and
#: keeps what they make, and no parameter counts as a kept activation (0.8.5); 8: a pooling called as a
#: function with its kernel or output size by position (``F.adaptive_avg_pool2d(x, (1, 1))``: densenet's,
#: mobilenet_v2's; inception_v3's ``F.max_pool2d``) counts the elements its window reads, where it read a
#: window of one, and the pooling functions of no module kind above are pooling, not "other" (0.9.23); 9: a
#: mean (mnasnet's and shufflenet_v2's global pooling, ``x.mean([2, 3])``) is pooling that reads its whole
#: input and writes a tensor of its own, where it was a reshape: no work, no memory; and a resampling
#: (``F.interpolate``, ``nn.Upsample``: a segmentation network's logits brought to the image's size) is
#: element-wise work that reads its mode's taps for each element it writes, a tensor of its own, where it
#: was "other": no work, no memory (0.9.24).
NODE_ROWS_VERSION = 9
#: The first NODE_ROWS_VERSION whose tensors may have their batch in any dimension (``elements``).
BATCH_ANYWHERE_VERSION = 4
#: The tracker that first computed each node rows version: a fingerprint's tag node_rows_version says which
#: of them learnt its features (none before 0.8.0).
ROWS_VERSION_SINCE = {4: "0.8.0", 5: "0.8.3", 6: "0.8.4", 7: "0.8.5", 8: "0.9.23", 9: "0.9.24"}

#: The op categories features are summed over; every node kind maps to one.
CATEGORIES = ("conv", "dwconv", "gconv", "linear", "norm", "act", "pool", "elementwise", "concat", "reshape", "io", "other")

_ACT = {"relu", "relu6", "ReLU", "ReLU6", "SiLU", "silu", "Hardswish", "hardswish", "Sigmoid", "sigmoid",
        "Hardsigmoid", "hardsigmoid", "GELU", "gelu", "Tanh", "tanh", "LeakyReLU", "leaky_relu", "Softmax", "softmax"}
_NORM = {"BatchNorm2d", "BatchNorm1d", "LayerNorm", "GroupNorm", "LayerNorm2d", "batch_norm", "layer_norm", "FrozenBatchNorm2d"}
#: The functions of the pooling modules below that were "other" until NODE_ROWS_VERSION 8.
_POOL_SINCE_8 = {"adaptive_max_pool2d", "adaptive_max_pool1d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d",
                 "adaptive_max_pool3d"}
_POOL = {"MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
         "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "max_pool1d", "avg_pool1d",
         "adaptive_avg_pool1d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d",
         # a mean over dimensions: mnasnet's and shufflenet_v2's global average pooling (NODE_ROWS_VERSION 9)
         "mean"} | _POOL_SINCE_8
#: Pooling whose backward needs its input's shape alone (a mean spreads its gradient evenly): it keeps no
#: tensor for backward, where the pooling modules keep their input.
_KEEPS_NO_INPUT = {"mean"}
#: Convolutions over one, two or three spatial dimensions (audio, images, video)
_CONV = {"Conv1d", "conv1d", "Conv2d", "conv2d", "Conv3d", "conv3d"}
_ELEMENTWISE = {"add", "iadd", "mul", "imul", "sub", "truediv", "div", "Add", "matmul_scalar"}
#: Resampling, element-wise since NODE_ROWS_VERSION 9: each element written reads its mode's taps of the input
#: (``_TAPS``), and backward needs the two shapes alone (it keeps nothing).
_RESAMPLE = {"interpolate", "upsample", "upsample_bilinear", "upsample_nearest", "Upsample", "UpsamplingBilinear2d",
             "UpsamplingNearest2d"}
#: Input elements each output element of a resampling reads, by its mode. A module's mode is not among the
#: attributes a description keeps (adding it would change descriptions' hashes): ``Upsample`` reads as its
#: default, nearest; ``UpsamplingBilinear2d`` says its own. "area" is an adaptive average pooling: it reads
#: every input element once.
_TAPS = {"nearest": 1, "nearest-exact": 1, "linear": 2, "bilinear": 4, "trilinear": 8, "bicubic": 16}
_RESHAPE = {"view", "reshape", "flatten", "Flatten", "size", "getitem", "squeeze", "unsqueeze", "permute", "transpose",
            "contiguous", "Dropout", "dropout", "Identity", "chunk", "split", "getattr", "get_attr", "expand"}
#: What DNN stats counts as a functional layer: nodes that compute something.
FUNCTIONAL = {"conv", "dwconv", "gconv", "linear", "norm", "act", "pool", "elementwise", "concat"}


def category(node: Node) -> str:
    k = node.kind
    if k in ("placeholder", "output"):
        return "io"
    if k in _CONV:
        g, cin, cout = node.attrs.get("groups", 1), node.attrs.get("in_channels"), node.attrs.get("out_channels")
        if g == 1:
            return "conv"
        return "dwconv" if g == cin == cout else "gconv"
    if k in ("Linear", "linear", "matmul", "mm", "bmm") or k in MATRIX_OPERANDS:
        return "linear"
    if k in _NORM:
        return "norm"
    if k in _ACT:
        return "act"
    if k in _POOL:
        return "pool"
    if k in _ELEMENTWISE or k in _RESAMPLE:
        return "elementwise"
    if k == "cat":
        return "concat"
    if k in _RESHAPE:
        return "reshape"
    return "other"


def _numel(shape: list[int] | None, batch: int) -> int:
    """Elements at ``batch`` of a tensor described at batch 1 whose first dimension is its batch."""
    if not shape:
        return 0
    return batch * math.prod(shape[1:]) if len(shape) > 0 else 0


def _from_input(desc: Description) -> set[str]:
    """The nodes computed from the network's input (not from parameters alone). Module hooks see
    only modules called on it, though not linked to it through functions: all of them."""
    if desc.method == "hooks":
        return {n.name for n in desc.nodes}
    found: set[str] = set()
    for n in desc.nodes:
        if n.op == "placeholder" or any(s in found for s in n.inputs):
            found.add(n.name)
    return found


def counted_anew(desc: Description) -> int:
    """How many of a network's tensors computed from its input have a batch dimension other than
    their first (``elements``): node rows versions before 4 (tracker 0.8.0) counted each of them
    as one position, or one proposal, of what it holds. 0 for most image networks."""
    batched = _from_input(desc)
    return sum(1 for n in desc.nodes if n.name in batched and n.out_shape and n.out_shape[0] != 1)


def elements(desc: Description, batch: int, batched: set[str] | None = None) -> dict[str, int]:
    """Each node's output elements at ``batch``. A tensor computed from the network's input has
    its batch dimension, whichever it is, of 1 at batch 1 (the first; the second of a
    sequence-first layer's ``(L, 1, E)``; or merged into another, ``(windows, ...)``), so every
    dimension counts, times the batch. Until 0.8.0 the first dimension was dropped whatever it
    was: a sequence-first layer counted one of its L positions. A tensor computed from parameters
    alone (a get_attr and what reads only such) keeps that count (see the notes). ``batched``:
    ``_from_input(desc)``, where the caller has it."""
    batched = _from_input(desc) if batched is None else batched
    return {n.name: (batch * math.prod(n.out_shape) if n.out_shape else 0) if n.name in batched
            else _numel(n.out_shape, batch) for n in desc.nodes}


def _shape_text(shape: list[int] | None, batch: int, batched: bool = False) -> str:
    """A shape at this batch size as text, e.g. 8x64x56x56. The batch is its first dimension, or
    for a tensor computed from the input (``batched``) its first of 1 at batch 1 (a sequence-first
    ``(L, 1, E)``'s second), else its first (batches merged into it)."""
    if not shape:
        return ""
    at = shape.index(1) if batched and 1 in shape else 0
    return "x".join(str(batch * d if i == at else d) for i, d in enumerate(shape))


def _window(v: Any, dims: int) -> int:
    """Elements of a kernel over ``dims`` spatial dimensions: ``(3, 3)`` is 9, ``3`` over two is 9, ``(9,)`` is 9."""
    if isinstance(v, (list, tuple)):
        return int(math.prod(int(d) for d in v))
    return int(v) ** dims if v is not None else 1


def _resampled_reads(n: Node, in_elems: int, out_elems: int) -> int:
    """The input elements a resampling reads (``_TAPS``)."""
    mode = n.attrs.get("mode") or n.attrs.get("arg3") or ("bilinear" if n.kind in ("UpsamplingBilinear2d", "upsample_bilinear")
                                                          else "nearest")
    if mode == "area":
        return in_elems
    return out_elems * _TAPS.get(str(mode), 1)


def _pool_attrs(n: Node) -> dict[str, Any]:
    """A pooling node's attributes with its ``kernel_size`` (``output_size``, adaptive) by name, where a
    function was given it by position, the argument after the input (``F.max_pool2d(x, 3)``: the
    description keeps it as ``arg1``, read as no window until ``NODE_ROWS_VERSION`` 8)."""
    name = "output_size" if n.kind.startswith("adaptive") else "kernel_size"
    if n.op != "call_function" or "arg1" not in n.attrs or name in n.attrs:
        return n.attrs
    return {**n.attrs, name: n.attrs["arg1"]}


def _spatial_dims(n: Node) -> int:
    """Spatial dimensions of a convolution's or pooling's output ``(N, C, *spatial)``: 2 where unknown."""
    return max(len(n.out_shape) - 2, 1) if n.out_shape else 2


def _functional_weight(n: Node, in_shapes: list[Any]) -> list[int] | None:
    """The weight's shape of a convolution called as a function (no module attributes): its second
    input, of the input's rank (out channels, in channels / groups, *kernel); None where not so."""
    if n.op != "call_function" or len(in_shapes) < 2 or not in_shapes[0] or not in_shapes[1]:
        return None
    weight = list(in_shapes[1])
    return weight if len(weight) == len(in_shapes[0]) >= 3 else None


def _pair(v: Any) -> tuple[int, int]:
    """(height, width) of a kernel, stride or padding: a 1-D one's ``(9,)`` is 9 by 1."""
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[-1]) if len(v) > 1 else 1)
    return (int(v), int(v)) if v is not None else (1, 1)


def _padding(n: Node, kernel_h: int) -> int:
    """A convolution's padding along its first spatial dimension: given in pixels, or as torch's
    ``"valid"`` (none) or ``"same"`` (the output keeps the input's size at stride 1: dilation x
    (kernel - 1) // 2 before the input; an odd pad's extra pixel goes after it)."""
    v = n.attrs.get("padding", 0)
    if isinstance(v, str):
        return _pair(n.attrs.get("dilation", 1))[0] * (kernel_h - 1) // 2 if v == "same" else 0
    return _pair(v)[0]


#: Activations whose backward reads their output (autograd saves the result, not the input).
_SAVES_RESULT = {"relu", "ReLU", "sigmoid", "Sigmoid", "tanh", "Tanh", "Softmax", "softmax"}
#: Activations whose in-place form saves its result (the out-of-place form saves its input).
_INPLACE_SAVES_RESULT = {"LeakyReLU", "leaky_relu", "ELU", "elu"}
#: Description methods of networks measured under PyTorch 1.6 (perf4sight's TX2 data), whose
#: in-place activations (ReLU6's hardtanh_) saved their result. PyTorch 2 saves a copy of the
#: input of an in-place activation whose backward reads its input (ReLU6, Hardswish, SiLU).
_NO_INPLACE_COPIES = {"import:perf4sight"}
#: Transposed convolutions: kept whole (category ``other``), counted by ``describe.graph.whole_module_macs``;
#: like a convolution, each keeps its input for backward.
_TRANSPOSED_FUNCTIONS = {k for k in FUNCTIONAL_CONV_ARGS if k.startswith("conv_transpose")}
_TRANSPOSED = {k for k in WHOLE_MODULE_KINDS if k.startswith("ConvTranspose")} | _TRANSPOSED_FUNCTIONS  # functions: 0.8.4
#: Functions whose output is a tensor of their own, kept by the describe as ``other`` (their work
#: in their ``macs``, ``graph.function_macs`` and ``graph.einsum_attrs``): transposed convolutions, attention, einsum.
_NEW_FUNCTIONS = _TRANSPOSED_FUNCTIONS | {"scaled_dot_product_attention", "einsum"}
#: Matrix products whose two matrices are not their first two tensors: ``torch.addmm(bias, x, w)``
#: and ``baddbmm`` add a tensor to the product (GPT-2's ``Conv1D`` is an ``addmm``): where their
#: matrices start among their tensors (0.8.5; no MACs and nothing kept before).
MATRIX_OPERANDS = {"addmm": 1, "baddbmm": 1}
#: Pooling that also keeps the argmax of each output element (int64) for backward.
_MAX_POOL = {"MaxPool2d", "max_pool2d", "AdaptiveMaxPool2d", "adaptive_max_pool2d"}
#: Element-wise products: with two tensor inputs, backward reads both.
_PRODUCTS = {"mul", "imul", "truediv", "div"}
#: Bytes of an int64 index and of a dropout mask element.
INDEX_BYTES, MASK_BYTES = 8, 1


def _in_place(n: Node) -> bool:
    """Whether a node says it writes into its first input: ``inplace=True``, or an augmented
    assignment's ``iadd``/``imul`` (``torch.fx`` records ``out += x`` as ``add``: see ``live_bytes``)."""
    return bool(n.attrs.get("inplace")) or n.kind in ("iadd", "imul")


def kept_bytes(desc: Description, batch_size: int = 1, dtype_bytes: int = 4,
               counts: dict[str, int] | None = None) -> dict[str, int]:
    """Bytes autograd keeps alive from the forward pass to the backward pass, by the node whose
    output owns the memory (a training step's activation memory).

    Unlike a per-layer sum of saved inputs, a tensor is counted once however many layers save it
    (a block input read by three branch convolutions), and nothing is counted for views and
    in-place operations (``ReLU(inplace=True)`` after a norm keeps the norm's output, which the
    next convolution also reads). Max pooling adds its int64 indices, dropout its mask. Follows
    PyTorch's derivative formulas: convolutions, linear layers, norms and pooling keep their
    input; ReLU, sigmoid, tanh and softmax their output; other activations their input (in
    place: a copy of it); adds and concatenations nothing; a product of two tensors both inputs.
    Within 1.1 % of the tensors PyTorch 2 saves in a training forward pass of torchvision's
    resnet18, googlenet, squeezenet1_1, mnasnet0_5, densenet121, mobilenet_v2, mobilenet_v3_small
    and efficientnet_b0 (tests/test_describe.py checks four). ``counts``: ``elements(desc,
    batch_size)``, where the caller has them."""
    inplace_copies = desc.method not in _NO_INPLACE_COPIES
    shapes = {n.name: n.out_shape for n in desc.nodes}
    owner: dict[str, str] = {}
    kept: set[str] = set()
    extra: dict[str, int] = {}
    out_elems = elements(desc, batch_size) if counts is None else counts
    for n in desc.nodes:
        cat, k = category(n), n.kind
        ins = [owner.get(i, i) for i in n.inputs if shapes.get(i)]
        inplace = _in_place(n)
        dropout = k in ("Dropout", "dropout")
        view = cat == "reshape" and not dropout
        owner[n.name] = ins[0] if ins and (view or inplace) else n.name
        if (cat in ("conv", "dwconv", "gconv", "norm", "pool") and k not in _KEEPS_NO_INPUT) or k in ("Linear", "linear") \
                or k in _TRANSPOSED:
            kept.update(ins[:1])
        elif k == "Bilinear":  # its weight's gradient reads both inputs
            kept.update(ins[:2])
        elif k == "einsum" and "macs" in n.attrs:  # its products read their operands (0.8.4)
            kept.update(ins)
            if (made := n.attrs.get("intermediate_elements")) and n.out_shape:  # and what they made (0.8.5)
                per = out_elems[n.name] // max(math.prod(n.out_shape), 1)  # the batch's multiple of one sample's
                extra[n.name] = sum(int(e) for e in made) * per * dtype_bytes
        elif k == "scaled_dot_product_attention":  # query, key, value, its output and each query's logsumexp
            kept.update(ins[:3])
            kept.add(n.name)
            if n.out_shape:
                extra[n.name] = out_elems[n.name] // max(int(n.out_shape[-1]), 1) * 4  # float32
        elif cat == "linear":  # matrix products read both operands
            first = MATRIX_OPERANDS.get(k, 0)
            kept.update(owner.get(i, i) for i in n.inputs[first:first + 2] if shapes.get(i))
        elif cat == "act":
            if k in _SAVES_RESULT or (inplace and (k in _INPLACE_SAVES_RESULT or not inplace_copies)):
                kept.add(owner[n.name])
            elif inplace:  # the input is overwritten: autograd keeps a copy of it
                extra[n.name] = out_elems[n.name] * dtype_bytes
            else:
                kept.add(ins[0] if ins else n.name)
        elif k in _PRODUCTS and len(ins) >= 2:
            kept.update(ins[:2])
        if k in _MAX_POOL:
            extra[n.name] = out_elems[n.name] * INDEX_BYTES
        elif dropout and float(n.attrs.get("p", 0.5) or 0) > 0:
            extra[n.name] = out_elems[n.name] * MASK_BYTES
    # a parameter or buffer (get_attr, and its views) is a weight, not an activation, however many
    # products read it (before 0.8.5 a matrix product or a mul of one counted it)
    kept -= {n.name for n in desc.nodes if n.op == "get_attr"}
    return {name: (elems * dtype_bytes if name in kept and owner[name] == name else 0) + extra.get(name, 0)
            for name, elems in out_elems.items()}


#: Kinds whose output is a view of their first input (or, for Dropout and Identity in inference,
#: that input itself): its memory stays alive while any of them is. The reshapes but what reads a
#: size or an attribute (no tensor).
_VIEWS = _RESHAPE - {"size", "getattr", "get_attr"}
#: Categories whose output is a tensor of its own (unless written in place), besides the modules
#: kept whole (``WHOLE_MODULE_KINDS``; one returning a tuple, such as attention's output and
#: weights, owns what each ``getitem`` of it takes out). Anything else (a function of unknown
#: kind) is counted as holding nothing of its own.
_NEW_TENSORS = {"conv", "dwconv", "gconv", "linear", "norm", "act", "pool", "elementwise", "concat"}


def _positions(shape: list[int] | None) -> int:
    """Positions of a sequence at batch 1 (every dimension but the last, which is the features)."""
    return math.prod(shape[:-1]) if shape else 0


#: Attention modules kept whole, and stacks of them (``_attention_elems``).
_ATTENTION = {"MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
              "TransformerDecoder", "Transformer"}


def _attention_elems(n: Node, shapes: dict[str, list[int] | None], out: list[int] | None) -> int:
    """Elements (at batch 1) an attention module kept whole holds at once besides its inputs, at the
    fullest point of its work: the queries', keys' and values' projections and the attention's
    output, all written before the first of them is freed, whatever the implementation (PyTorch's
    fused inference path also writes them). The softmax's scores, a packed projection beside its
    rearranged copy and a feed-forward layer's hidden activations are not counted, nor the keys
    and values of an input that may be a mask (``graph.sequence_like``), nor an encoder stack's where
    an input may be a padding mask (PyTorch may then drop the padding): a lower bound. ``out``
    is the module's output shape (attention's first output; where it is not known, through
    module hooks, its query's, which it has). 0 for any other node."""
    out = out or (shapes.get(n.inputs[0]) if n.inputs and n.kind in _ATTENTION else None)
    if n.kind not in _ATTENTION or not out:
        return 0
    queries, features = _positions(out), out[-1]
    ins = [shapes.get(s) for s in n.inputs]
    others = [_positions(s) for s in ins[1:] if sequence_like(s, out)]  # keys and values, or a memory
    if n.kind == "MultiheadAttention":  # (query, key, value): without a second sequence, its query is its keys
        keys = others[0] if others else queries
        values = others[1] if len(others) > 1 else keys
        return (2 * queries + keys + values) * features
    # a (batch, positions) input may be a padding mask, which lets an encoder stack drop the padding
    padding = any(s is None or (len(s) == 2 and s[0] == 1) for s in ins[1 if n.kind != "Transformer" else 2:])
    if n.kind in ("TransformerEncoderLayer", "TransformerEncoder"):
        return 4 * queries * features if n.kind == "TransformerEncoderLayer" or not padding else 0
    if n.kind == "Transformer":  # (source, target): its encoder over the source (unless a mask may let it
        # drop padding), its decoder over the target and the encoded source
        source = _positions(ins[0]) if sequence_like(ins[0], out) else 0
        return max(4 * queries, 2 * (queries + source), 0 if padding else 4 * source) * features
    memory = others[0] if others else 0  # a decoder's (target, memory)
    return max(4 * queries, 2 * (queries + memory)) * features


def live_bytes(desc: Description, batch_size: int = 1, dtype_bytes: int = 4,
               counts: dict[str, int] | None = None) -> dict[str, int]:
    """Bytes of activations alive at once while each node runs in inference (no autograd): the
    network's input (its caller holds it throughout), the node's inputs and output, and every
    earlier output some later node still reads; inside an attention module kept whole, its
    projections and output (``_attention_elems``). The largest is what a forward pass's
    activations must hold at its fullest point.

    A lower bound by construction, so that weights plus it is a floor no measured peak can be
    under: a tensor is freed at its last reader (eager PyTorch frees it there or later); views,
    in-place activations and in-place adds (``out += identity``, which ``torch.fx`` records as
    ``add``: an element-wise result of its first input's shape where that input is read for the
    last time counts as written into it) own nothing; functions of unknown kind count nothing of
    their own, nor does the scratch memory of any kernel but attention's. Against the tensors
    PyTorch's CPU allocator holds at once in a forward pass (every allocation and free its profiler
    records, less each kernel's own scratch; batch 2 at 224 px), 0.71 (vit_b_16, whose attention
    scores are not counted) to 1.00 (resnet18, googlenet, shufflenet_v2_x1_0) of them over 20
    torchvision networks, where the largest activation alone is 0.28 to 0.56 (tests/test_describe.py
    checks five, and four attention networks of their own). ``counts``: ``elements(desc,
    batch_size)``, where the caller has them."""
    shapes = {n.name: n.out_shape for n in desc.nodes}
    counts = elements(desc, batch_size) if counts is None else counts
    kinds = {n.name: n.kind for n in desc.nodes}
    last_read: dict[str, int] = {}
    first_out: dict[str, list[int] | None] = {}  # a module's first output, where it returns a tuple
    for i, n in enumerate(desc.nodes):
        for s in n.inputs:
            last_read[s] = i
        if n.kind == "getitem" and n.inputs and n.attrs.get("arg1") == 0:
            first_out.setdefault(n.inputs[0], n.out_shape)
    owner: dict[str, str] = {}
    size: dict[str, int] = {}
    for i, n in enumerate(desc.nodes):
        cat, first = category(n), n.inputs[0] if n.inputs and n.inputs[0] in owner else None
        in_place = _in_place(n) or (
            cat == "elementwise" and n.kind not in _RESAMPLE and first is not None and last_read.get(first) == i
            and shapes.get(first) == n.out_shape)
        of_tuple = first is not None and kinds[first] in WHOLE_MODULE_KINDS and not shapes[first]
        if first is not None and n.out_shape and (in_place or n.kind in _VIEWS) and not of_tuple:
            owner[n.name] = owner[first]
        else:
            owner[n.name] = n.name
            new = (cat in _NEW_TENSORS or n.op == "placeholder" or n.kind in WHOLE_MODULE_KINDS or of_tuple
                   or n.kind in _NEW_FUNCTIONS)
            size[n.name] = counts[n.name] * dtype_bytes if new else 0
    end = len(desc.nodes)
    freed_at: dict[str, int] = {n.name: end if n.op == "placeholder" else i for i, n in enumerate(desc.nodes)}
    for name, i in last_read.items():  # a memory lives until the last reader of any view of it
        if name in owner:
            freed_at[owner[name]] = max(freed_at[owner[name]], i)
    frees: dict[int, int] = {}
    for name, i in freed_at.items():
        frees[i] = frees.get(i, 0) + size.get(name, 0)
    alive, out = 0, {}
    for i, n in enumerate(desc.nodes):
        inner = _attention_elems(n, shapes, n.out_shape or first_out.get(n.name)) * batch_size * dtype_bytes
        out[n.name] = alive + max(size.get(n.name, 0), inner)
        alive += size.get(n.name, 0)
        alive -= frees.get(i, 0)
    return out


def node_rows(desc: Description, batch_size: int = 1, dtype_bytes: int = 4) -> list[dict[str, Any]]:
    """One row per node with its features at this batch size (what the warehouse stores)."""
    shapes = {n.name: n.out_shape for n in desc.nodes}
    batched = _from_input(desc)
    counts = elements(desc, batch_size, batched)  # once, for the rows and for kept_bytes and live_bytes
    kept = kept_bytes(desc, batch_size, dtype_bytes, counts)
    live = live_bytes(desc, batch_size, dtype_bytes, counts)
    rows = []
    for i, n in enumerate(desc.nodes):
        cat = category(n)
        in_shapes = [shapes.get(s) for s in n.inputs]
        in_elems = sum(counts.get(s, 0) for s in n.inputs)
        out_elems = counts[n.name] if cat not in ("io", "reshape") else 0
        macs = 0
        kh = kw = sh = sw = 0
        if cat in ("conv", "dwconv", "gconv") and (weight := _functional_weight(n, in_shapes)):
            # a functional convolution (F.conv2d(x, weight, ...)): its weight, the second input, is
            # (out, in / groups, *kernel), so each output element takes in / groups x kernel MACs; its
            # stride, padding, dilation and groups named by describe.graph.functional_conv_attrs (0.8.4;
            # given by position, a description before it reads 1)
            kh, kw = _pair(weight[2:])
            sh, sw = _pair(n.attrs.get("stride"))
            macs = counts[n.name] * math.prod(weight[1:])
        elif cat in ("conv", "dwconv", "gconv"):
            kh, kw = _pair(n.attrs.get("kernel_size"))
            sh, sw = _pair(n.attrs.get("stride"))
            cin, groups = int(n.attrs.get("in_channels", 0)), int(n.attrs.get("groups", 1))
            window = _window(n.attrs.get("kernel_size"), _spatial_dims(n))
            macs = counts[n.name] * (cin // max(groups, 1)) * window
        elif cat == "linear":
            first = in_shapes[MATRIX_OPERANDS.get(n.kind, 0):][:1]
            in_f = int(n.attrs.get("in_features", 0) or (first[0][-1] if first and first[0] else 0))
            macs = counts[n.name] * in_f
        elif "macs" in n.attrs:  # a module kept whole whose work the tracer counted (graph.whole_module_macs)
            macs = int(n.attrs["macs"]) * batch_size
        elementwise = 0
        if n.kind in _RESAMPLE:
            elementwise = _resampled_reads(n, in_elems, out_elems)
        elif cat in ("norm", "act", "elementwise", "concat"):
            elementwise = out_elems
        elif cat == "pool":
            pool = _pool_attrs(n)
            if n.kind == "mean" or ("output_size" in pool and in_shapes and in_shapes[0]):
                elementwise = in_elems  # a mean and adaptive pooling read every input once
            else:
                elementwise = out_elems * _window(pool.get("kernel_size", 1), _spatial_dims(n))
        weight_bytes = n.params * dtype_bytes
        act_in = in_elems * dtype_bytes if cat not in ("io", "reshape") else 0
        act_out = out_elems * dtype_bytes
        # Activations autograd keeps for backward: inputs of layers with weights and of
        # pooling, outputs of activations; adds and concats keep nothing.
        saved = act_in if cat in ("conv", "dwconv", "gconv", "linear", "norm", "pool") and n.kind not in _KEEPS_NO_INPUT \
            else act_out if cat == "act" else 0
        rows.append(
            {
                "node_index": i,
                "name": n.name,
                "op": n.op,
                "kind": n.kind,
                "category": cat,
                "inputs": len(n.inputs),
                "in_shape": _shape_text(in_shapes[0] if in_shapes else None, batch_size, bool(n.inputs) and n.inputs[0] in batched),
                "out_shape": _shape_text(n.out_shape, batch_size, n.name in batched),
                "out_channels": int(n.out_shape[1]) if n.out_shape and len(n.out_shape) > 1 else 0,
                "out_h": int(n.out_shape[2]) if n.out_shape and len(n.out_shape) > 2 else 0,
                "out_w": int(n.out_shape[3]) if n.out_shape and len(n.out_shape) > 3 else 0,
                "kernel_h": kh,
                "kernel_w": kw,
                "stride_h": sh,
                "stride_w": sw,
                "padding": _padding(n, kh) if cat in ("conv", "dwconv", "gconv") else 0,
                "dilation": _pair(n.attrs.get("dilation", 1))[0] if cat in ("conv", "dwconv", "gconv") else 0,
                "groups": int(n.attrs.get("groups", 1)) if cat in ("conv", "dwconv", "gconv") else 0,
                "params": int(n.params),
                "macs": int(macs),
                "flops": int(2 * macs),
                "elementwise_ops": int(elementwise),
                "weight_bytes": int(weight_bytes),
                "activation_in_bytes": int(act_in),
                "activation_out_bytes": int(act_out),
                "bytes_read": int(weight_bytes + act_in),
                "bytes_written": int(act_out),
                "saved_activation_bytes": int(saved),
                "target": n.target if n.op == "call_module" else None,  # the module's qualified name
                "kept_activation_bytes": int(kept[n.name]),
                "live_activation_bytes": int(live[n.name]),
            }
        )
    return rows


def _depth(desc: Description) -> int:
    """Longest path counted in weighted layers (conv, linear) from input to output."""
    depth: dict[str, int] = {}
    for n in desc.nodes:
        here = 1 if category(n) in ("conv", "dwconv", "gconv", "linear") else 0
        depth[n.name] = here + max((depth.get(s, 0) for s in n.inputs), default=0)
    return max(depth.values(), default=0)


def aggregates(desc: Description, batch_size: int = 1, rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Network totals and per-category sums, derived from the node rows."""
    rows = rows if rows is not None else node_rows(desc, batch_size)
    total = lambda key: int(sum(r[key] for r in rows))  # noqa: E731
    out: dict[str, Any] = {
        "batch_size": batch_size,
        "input_size": desc.image[0] if desc.image else None,  # None: not images (input_shape)
        "params": total("params"),
        "flops": total("flops"),
        "macs": total("macs"),
        "elementwise_ops": total("elementwise_ops"),
        "weight_bytes": total("weight_bytes"),
        "activation_bytes": total("activation_out_bytes"),
        "saved_activation_bytes": total("saved_activation_bytes"),
        "kept_activation_bytes": total("kept_activation_bytes"),
        "bytes_read": total("bytes_read"),
        "bytes_written": total("bytes_written"),
        "largest_activation_bytes": max((r["activation_out_bytes"] for r in rows), default=0),
        "live_activation_bytes": max((r["live_activation_bytes"] for r in rows), default=0),
        "nodes": len(rows),
        "edges": len(desc.edges),
        "functional_layers": sum(1 for r in rows if r["category"] in FUNCTIONAL),
        "weighted_layers": sum(1 for r in rows if r["category"] in ("conv", "dwconv", "gconv", "linear")),
        "depth": _depth(desc),
    }
    for cat in CATEGORIES:
        if cat == "io":
            continue
        sel = [r for r in rows if r["category"] == cat]
        out[f"{cat}_count"] = len(sel)
        out[f"{cat}_flops"] = int(sum(r["flops"] for r in sel))
        out[f"{cat}_bytes"] = int(sum(r["bytes_read"] + r["bytes_written"] for r in sel))
    return out


def _weights_read(desc: Description) -> set[str]:
    """The nodes a product or a matrix product reads a parameter or buffer through (a ``get_attr``, or a view
    of one): until node rows version 7 such a parameter counted as a kept activation."""
    params = {n.name for n in desc.nodes if n.op == "get_attr"}
    for n in desc.nodes:
        if category(n) == "reshape" and n.inputs and n.inputs[0] in params:
            params.add(n.name)
    return {n.name for n in desc.nodes
            if (n.kind in _PRODUCTS or category(n) == "linear") and any(i in params for i in n.inputs)}


def _counted_otherwise_in(version: int, n: Node, weights_read: set[str]) -> bool:
    """Whether node rows ``version`` counts ``n`` otherwise than the version before it did."""
    k = n.kind
    if version == 4:  # attention's projections and outputs alive at once
        return k in _ATTENTION
    if version == 5:  # a convolution called as a function counts its MACs
        return n.op == "call_function" and category(n) in ("conv", "dwconv", "gconv")
    if version == 6:  # transposed convolutions, attention and einsum called as functions write and keep tensors
        return k in _NEW_FUNCTIONS
    if version == 7:  # addmm and baddbmm are matrix products, an einsum of three operands keeps what its products
        # make, and no parameter counts as a kept activation
        return k in MATRIX_OPERANDS or (k == "einsum" and bool(n.attrs.get("intermediate_elements"))) \
            or n.name in weights_read
    if version == 8:  # a pooling function's window given by position; pooling functions that were "other"
        return category(n) == "pool" and (k in _POOL_SINCE_8 or _pool_attrs(n) is not n.attrs)
    if version == 9:  # a mean is a global pooling, a resampling element-wise work
        return k == "mean" or k in _RESAMPLE
    return False


def counted_otherwise(desc: Description, since: int | None) -> dict[str, int]:
    """The kinds of ``desc``'s nodes whose rows this tracker counts otherwise than node rows version ``since``
    did (None: a fingerprint of a tracker before 0.8.0, which recorded none; a product that reads a parameter is
    "<kind> reading a parameter"), each with the last version that changed how (``ROWS_VERSION_SINCE``): a
    fingerprint learnt from that version's rows saw such a network's features otherwise. A tensor batched in
    another dimension than its first, counted otherwise before version 4, is ``counted_anew``'s. {} for most
    networks: what changed was what few of them call."""
    weights_read = _weights_read(desc)
    found: dict[str, int] = {}
    for version in range(max(since or 3, 3) + 1, NODE_ROWS_VERSION + 1):
        for n in desc.nodes:
            if _counted_otherwise_in(version, n, weights_read):
                found[f"{n.kind} reading a parameter" if version == 7 and n.name in weights_read else n.kind] = version
    return found
