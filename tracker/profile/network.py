"""What a measurement is (``NetworkSpec``), its example input, and layer-wise timing.

``profile_layers`` runs the network once with forward hooks on its leaf modules, keeps a
copy of each module's real input, then times each module alone on that input, after DNN
stats. The work a network does between its modules (a residual ``+``, ``torch.cat``, a
channel shuffle's ``contiguous``, ``F.linear`` on a module's weights) is seen through a torch
function mode and kept as *function* layers: each maximal run of such calls inside one module,
with no layer call between them, is one layer, replayed call by call on copies of the inputs
each call had. Whole-network timing lives in ``tracker.profile.measure`` (run in the child).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from tracker.profile.device import canonical_device
from tracker.profile.stats import Stopping
from tracker.profile.timing import Timing, device_sync, measure


@dataclass(frozen=True)
class NetworkSpec:
    """What is measured: frozen, hashable, separate from the samples."""

    model: str
    batch_size: int
    input_size: int = 224
    device: str = "cpu"
    precision: str = "float32"
    phase: str = "inference"
    in_channels: int = 3  # of the input images (a network of your own may take 1); in the key and the
    # params only where not 3 (records._configuration), so 3-channel configurations keep their keys
    #: a network of your own whose input is not images: one input's shape (input_size is then 0,
    #: and no param), and where its inputs are token ids, how many (zoo.spec.ModelRef)
    input_shape: tuple[int, ...] | None = None
    input_vocab: int | None = None

    def __post_init__(self) -> None:
        # one name per device, whoever builds the spec (a library caller too): its key follows it
        object.__setattr__(self, "device", canonical_device(self.device))


@dataclass
class FunctionCall:
    """One call of a torch function (or Tensor method) that did work, with copies of its arguments."""

    func: Any
    args: tuple
    kwargs: dict[str, Any]
    op: str  # its name: add, add_ (in place), cat, contiguous, linear...

    def run(self) -> Any:
        return self.func(*self.args, **self.kwargs)


@dataclass
class LayerCall:
    index: int
    name: str
    op_type: str
    module: Any
    inputs: tuple
    input_shape: str
    output_shape: str
    timing: Timing | None = field(default=None)
    kwargs: dict[str, Any] = field(default_factory=dict)  # as it was called: an attention's need_weights=False
    functions: list[FunctionCall] = field(default_factory=list)  # of a function layer, in the order called

    @property
    def kind(self) -> str:
        """Its run param ``layer_kind``: a module called, or the torch functions a module called
        between its layers (``functions``; ``module`` is then None)."""
        return "module" if self.module is not None else "function"

    def run(self) -> Any:
        """The module called alone, on the copy of its real input; a function layer's calls one
        after the other, each on the copies of its own arguments."""
        if self.module is not None:
            return self.module(*self.inputs, **self.kwargs)
        out = None
        for call in self.functions:
            out = call.run()
        return out


def _shape(x: Any) -> str:
    shape = getattr(x, "shape", None)
    return "x".join(str(d) for d in shape) if shape is not None else type(x).__name__


#: The number formats a network runs in (``--dtype``; a run's param ``precision``): its weights
#: and inputs cast to it, as ``model.half()`` or ``model.bfloat16()`` would (not autocast); int8
#: (since 0.8.6): the network quantized after training, statically, as torch.ao's FX graph mode
#: does with the x86 backend's default settings (``quantized_int8``), its inputs float32.
DTYPES = ("float32", "float16", "bfloat16", "int8")
#: The number formats that are a network quantized, not cast: on a CPU, in inference only.
QUANTIZED = ("int8",)


def imports_own_code(phase: str, precision: str) -> bool:
    """Whether a measurement imports code of torch's whatever its network: torch's optimizer
    imports torch._dynamo at a training step's first, and torch.ao's FX quantization at its tracing
    of an int8 network (about 150 MB of the process's code and objects)."""
    return phase != "inference" or precision in QUANTIZED


def preload_own_code(phase: str, precision: str) -> None:
    """Import that code now (:func:`imports_own_code`), before the process's memory is read as the
    network's baseline (``network_mem_mb`` counted it until 0.9.1: squeezenet1_1 at 64 px, batch 1,
    179 MB of training, 30 MB without; its peak is the same) and before a memory cap is set (a
    capped run's cap counted it until 0.9.6: squeezenet1_1's training at 64 px took 158 of a 300 MB
    cap for 27 MB of its own, and under 150 MB no batch fitted)."""
    if imports_own_code(phase, precision):
        import torch._dynamo  # noqa: F401


def format_runs(precision: str, phase: str, device: str) -> bool:
    """Whether a network in this number format runs this phase on this device: a quantized one
    (torch.ao's x86 backend) runs inference on a CPU only (``plan`` refuses the rest, a campaign
    leaves them out of its product)."""
    return precision not in QUANTIZED or (phase == "inference" and canonical_device(device) == "cpu")


def check_format(precision: str, phase: str, device: str) -> None:
    """A number format this tracker knows, and one that runs this phase on this device
    (``format_runs``), or a ConfigError saying which is not."""
    from tracker.errors import ConfigError

    if precision not in DTYPES:
        raise ConfigError(f"unknown dtype {precision!r}: expected one of {', '.join(DTYPES)}")
    if not format_runs(precision, phase, device):
        raise ConfigError(f"dtype {precision}: a network quantized to {precision} (torch.ao's x86 backend) runs "
                          f"inference on a CPU, not {'training' if phase != 'inference' else 'on ' + device}")


def input_dtype(precision: str) -> Any:
    """The dtype of a network's input in a number format (a quantized network takes float32 and
    quantizes it itself)."""
    import torch

    return torch.float32 if precision in QUANTIZED else getattr(torch, precision)


def example_input(spec: NetworkSpec) -> Any:
    from tracker.zoo.spec import input_batch

    x = input_batch(spec.batch_size, spec.in_channels, spec.input_size, spec.input_shape, spec.input_vocab,
                    dtype=input_dtype(spec.precision))
    return x.to(spec.device)


def quantized_int8(model: Any, example: Any, name: str) -> Any:
    """The network quantized to int8 after training, as an edge engineer would with torch.ao's FX
    graph mode: ``prepare_fx`` with the x86 backend's default qconfig mapping (per-channel int8
    weights, uint8 activations with observed ranges), one calibration pass on ``example`` (the
    measurement's own input: the ranges set the scales, not the work), then ``convert_fx``. A
    network torch.fx cannot trace (control flow on its values, a detector) cannot be quantized so:
    a MeasurementError saying so."""
    import warnings

    import torch

    from tracker.errors import MeasurementError

    try:
        with warnings.catch_warnings():  # torch.ao's quantization says it is deprecated in favour of torchao
            warnings.simplefilter("ignore")
            from torch.ao.quantization import get_default_qconfig_mapping
            from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

            prepared = prepare_fx(model.eval(), get_default_qconfig_mapping("x86"), (example,))
            with torch.no_grad():
                prepared(example)
            quantized = convert_fx(prepared).eval()
            for node in quantized.graph.nodes:
                # what prepare_fx planned with: observer constructors whose closures hold the float
                # modules, weights and all (resnet18: 45 MB beside 11 MB of int8), kept in each node's
                # meta for the network's life; the converted code never reads it (kept until 0.9.27)
                node.meta.pop("target_dtype_info", None)
            return quantized
    except Exception as exc:  # noqa: BLE001 - what torch.fx or torch.ao could not do, in a line
        first = (str(exc).splitlines() or [""])[0].strip()[:300]
        raise MeasurementError(f"{name} cannot be quantized to int8 by torch.ao's FX graph mode "
                               f"({type(exc).__name__}: {first})") from None
    finally:
        forget_quantized_modules()


def forget_quantized_modules() -> None:
    """Empty the cache torch.ao's FX quantization keeps of every module it was given
    (``assert_and_get_unique_device``, a ``functools.cache`` keyed by the module): it holds the
    network prepared for quantization, float weights, observers and all, for as long as the
    process lives. Counted as an int8 network's own memory until 0.9.27 (resnet18 at batch 1:
    118 MB for 11 MB of int8 weights). Quantizing never needs it again."""
    import sys

    utils = sys.modules.get("torch.ao.quantization.fx.utils")
    clear = getattr(getattr(utils, "assert_and_get_unique_device", None), "cache_clear", None)
    if clear is not None:  # a torch without the cache has nothing to forget
        clear()


def in_format(model: Any, spec: NetworkSpec) -> Any:
    """The network on its device in the run's number format: cast, or quantized (int8)."""
    import torch

    if spec.precision in QUANTIZED:
        if getattr(model, QUANTIZED_MARK, None) == spec.precision:  # quantized already (the child's, for its layers)
            return model
        quantized = quantized_int8(model.to(spec.device), example_input(spec), spec.model)
        setattr(quantized, QUANTIZED_MARK, spec.precision)
        return quantized
    return model.to(device=spec.device, dtype=getattr(torch, spec.precision))


#: The attribute a quantized network carries: its number format (quantizing twice is not idempotent).
QUANTIZED_MARK = "_tracker_quantized"


def output_tensors(output: Any) -> list[Any]:
    """The tensors in ``output``, in order: the output itself, or those in a tuple, list or named
    tuple (GoogLeNet's auxiliary outputs) and a dict's values (a segmentation network's ``out`` and
    ``aux``), at any depth: what a network returns (a training step's loss), or a call's arguments
    (a function layer's)."""
    import torch

    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        return [t for v in output.values() for t in output_tensors(v)]
    if isinstance(output, (list, tuple)):
        return [t for v in output for t in output_tensors(v)]
    return []


def _exact_copy(obj: Any) -> Any:
    """A copy of a call's argument, tensors with their own strides (a channel slice stays a
    strided view's layout, where ``clone`` would make it contiguous and another call's work)."""
    import torch

    if torch.is_tensor(obj):
        t = obj.detach()
        if not t.numel():
            return t.clone()
        # the span of storage it reads, copied, and the same view of the copy (an expanded
        # tensor's zero strides too)
        span = 1 + sum((n - 1) * abs(st) for n, st in zip(t.size(), t.stride()))
        flat = t.as_strided((span,), (1,), t.storage_offset()).clone()
        return flat.as_strided(t.size(), t.stride(), 0)
    if isinstance(obj, (list, tuple)):
        copied = [_exact_copy(o) for o in obj]
        return type(obj)(*copied) if hasattr(obj, "_fields") else type(obj)(copied)
    if isinstance(obj, dict):
        return {k: _exact_copy(v) for k, v in obj.items()}
    return obj


def _function_name(func: Any) -> str:
    """``__iadd__`` -> ``add_`` (in place), ``__add__`` -> ``add``, ``contiguous`` as it is."""
    name = getattr(func, "__name__", None) or type(func).__name__
    if name.startswith("__i") and name.endswith("__") and name[3:-2] in _IN_PLACE_DUNDERS:
        return name[3:-2] + "_"
    return name.strip("_") if name.startswith("__") else name


_IN_PLACE_DUNDERS = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift",
                     "rshift", "matmul"}


@lru_cache(maxsize=None)
def _positional(func: Any) -> tuple[str, ...]:
    """A function's parameter names (read once: F.relu is called at every layer of some networks)."""
    import inspect

    try:
        return tuple(inspect.signature(func).parameters)
    except (TypeError, ValueError):  # a builtin without a signature
        return ()


def _in_place(func: Any, name: str, args: tuple, kwargs: dict[str, Any]) -> bool:
    """A call that writes into its input: ``add_``, ``x += y``, ``x[i] = y``, ``F.relu(x, inplace=True)``."""
    if (name.endswith("_") and not name.startswith("_")) or name == "setitem" or "out" in kwargs:
        return True
    if "inplace" in kwargs:
        return bool(kwargs["inplace"])
    names = _positional(func) if name in _INPLACE_FLAGGED else ()
    at = names.index("inplace") if "inplace" in names else len(args)
    return len(args) > at and bool(args[at])


#: torch.nn.functional's functions that take ``inplace`` (read positionally too)
_INPLACE_FLAGGED = {"relu", "relu6", "elu", "selu", "celu", "leaky_relu", "hardtanh", "silu", "mish", "hardswish",
                    "hardsigmoid", "rrelu", "threshold", "dropout", "dropout1d", "dropout2d", "dropout3d",
                    "alpha_dropout", "feature_alpha_dropout"}


def _does_work(in_place: bool, args: tuple, kwargs: dict[str, Any], output: Any) -> bool:
    """A call that wrote a tensor: in place, or into memory of its own (not a view of an input,
    not the input itself, not a shape or a number)."""
    if in_place:
        return bool(output_tensors(args[:1]))
    outputs = [t for t in output_tensors(output) if t.numel()]
    if not outputs:
        return False
    inputs = {t.untyped_storage().data_ptr() for t in output_tensors((args, kwargs)) if t.numel()}
    return any(t.untyped_storage().data_ptr() not in inputs for t in outputs)


def capture_layers(model: Any, spec: NetworkSpec) -> list[LayerCall]:
    """Layer calls in execution order (leaf modules, and attention, transformer and recurrent
    layers whole: ``describe.graph.hooked_modules``), each with a detached copy of its real
    input and the keywords it was called with; between them, the function layers: the torch
    functions called outside those modules that wrote a tensor, a layer for each run of them
    inside one module (named after it; ``''``, the network itself, is its class's name)."""
    import torch
    from torch.overrides import TorchFunctionMode

    from tracker.describe.graph import hooked_modules

    model = in_format(model, spec).eval()
    calls: list[LayerCall] = []
    names = {m: n for n, m in model.named_modules()}
    hooked = hooked_modules(model)
    hooked_ids = {id(m) for m in hooked}
    within: list[str] = []  # the modules (not layers) being called, outermost first
    depth = [0]  # inside a layer: its own calls are its work, not the network's between layers

    def copy(t: Any) -> Any:
        return t.detach().clone() if torch.is_tensor(t) else t

    def enter(module: Any, inputs: tuple) -> None:
        if id(module) in hooked_ids:
            depth[0] += 1
        else:
            within.append(names.get(module, "?"))

    def leave(module: Any, inputs: tuple, output: Any) -> None:
        if id(module) not in hooked_ids and within:
            within.pop()

    def hook(module: Any, inputs: tuple, kwargs: dict[str, Any], output: Any) -> None:
        calls.append(
            LayerCall(
                index=len(calls),
                name=names.get(module, "?"),
                op_type=type(module).__name__,
                module=module,
                inputs=tuple(copy(t) for t in inputs),
                input_shape=_shape(inputs[0]) if inputs else "",
                output_shape=_shape(output[0] if isinstance(output, tuple) and output else output),
                kwargs={k: copy(v) for k, v in kwargs.items()},
            )
        )
        depth[0] -= 1

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            if depth[0]:
                return func(*args, **kwargs)
            name = _function_name(func)
            in_place = _in_place(func, name, args, kwargs)
            before = (_exact_copy(args), _exact_copy(kwargs)) if in_place else None
            output = func(*args, **kwargs)
            if _does_work(in_place, args, kwargs, output):
                copied_args, copied_kwargs = before or (_exact_copy(args), _exact_copy(kwargs))
                record(FunctionCall(func, copied_args, copied_kwargs, name), output)
            return output

    def record(call: FunctionCall, output: Any) -> None:
        name = within[-1] if within and within[-1] else type(model).__name__  # '' is the network itself
        last = calls[-1] if calls else None
        produced = output_tensors(output) or output_tensors(call.args[:1])  # x[i] = y returns nothing: x is what it wrote
        out_shape = _shape(produced[0]) if produced else ""
        if last is not None and last.module is None and last.name == name:
            last.functions.append(call)
            if call.op not in last.op_type.split("+"):
                last.op_type = f"{last.op_type}+{call.op}"
            last.output_shape = out_shape
            return
        first = output_tensors((call.args, call.kwargs))
        calls.append(LayerCall(index=len(calls), name=name, op_type=call.op, module=None,
                               inputs=(), input_shape=_shape(first[0]) if first else "", output_shape=out_shape,
                               functions=[call]))

    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in hooked]
    for m in model.modules():
        handles.append(m.register_forward_pre_hook(enter))
        if id(m) not in hooked_ids:
            handles.append(m.register_forward_hook(leave))
    try:
        with torch.inference_mode():
            x = example_input(spec)
            with Functions():
                model(x)
    finally:
        for h in handles:
            h.remove()
    return calls


def profile_layers(model: Any, spec: NetworkSpec, rule: Stopping) -> list[LayerCall]:
    import torch

    calls = capture_layers(model, spec)
    sync = device_sync(spec.device)
    with torch.inference_mode():
        for call in calls:
            call.timing = measure(call.run, rule, sync, split_host=spec.device.startswith("cuda"))
    return calls
