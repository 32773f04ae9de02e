"""What a measurement is (``NetworkSpec``), its example input, and layer-wise timing.

``profile_layers`` runs the network once with forward hooks on its leaf modules, keeps a
copy of each module's real input, then times each module alone on that input, after DNN
stats. Whole-network timing lives in ``tracker.profile.measure`` (run in the child).
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

    def run(self) -> Any:
        """The module called alone, on the copy of its real input."""
        return self.module(*self.inputs, **self.kwargs)


def _shape(x: Any) -> str:
    shape = getattr(x, "shape", None)
    return "x".join(str(d) for d in shape) if shape is not None else type(x).__name__


#: The number formats a network runs in (``--dtype``; a run's param ``precision``): its weights
#: and inputs cast to it, as ``model.half()`` or ``model.bfloat16()`` would (not autocast).
DTYPES = ("float32", "float16", "bfloat16")


def example_input(spec: NetworkSpec) -> Any:
    import torch

    from tracker.zoo.spec import input_batch

    x = input_batch(spec.batch_size, spec.in_channels, spec.input_size, spec.input_shape, spec.input_vocab,
                    dtype=getattr(torch, spec.precision))
    return x.to(spec.device)


def capture_layers(model: Any, spec: NetworkSpec) -> list[LayerCall]:
    """Layer calls in execution order (leaf modules, and attention, transformer and recurrent
    layers whole: ``describe.graph.hooked_modules``), each with a detached copy of its real
    input and the keywords it was called with."""
    import torch

    from tracker.describe.graph import hooked_modules

    model = model.to(device=spec.device, dtype=getattr(torch, spec.precision)).eval()
    calls: list[LayerCall] = []
    names = {m: n for n, m in model.named_modules()}

    def copy(t: Any) -> Any:
        return t.detach().clone() if torch.is_tensor(t) else t

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

    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in hooked_modules(model)]
    try:
        with torch.inference_mode():
            model(example_input(spec))
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
