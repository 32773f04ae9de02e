"""The most bytes of tensors alive at once over one step on a CPU (``tensor_peak_mb``, since 0.9.31).

A CPU run's ``peak_mem_mb`` is the measuring process's resident peak and its ``network_mem_mb`` that peak
less what the process held before: both include where the C allocator placed the tensors among what the
process allocated before, which moves from process to process (a generated network's ``network_mem_mb`` read
28.9 to 48.1 MB in four runs of one configuration: docs/profiling.md, *Memory*). This counts the tensors
themselves, as ``torch.cuda.max_memory_allocated`` does on a GPU: one more step, after the measurement and
its peaks are read, under a ``TorchDispatchMode`` that sees every operator the step runs (autograd's
backward ones too) and keeps the storages its arguments and results hold, each counted once (views share
one) from its first sight until it is freed. Before the step it is given what the step holds throughout (the
weights and buffers, the input, the optimizer's state, last step's gradients), so the figure is those plus the
activations and gradients alive at the busiest operator boundary. It is the same in every process, to the
byte: nothing of the allocator or of Python's heap is in it. It does not see what a kernel allocates inside
one operator and frees before returning (oneDNN's scratch, an im2col buffer), nor tensors on another device.
It costs one step more and its bookkeeping: here, at batch 4 on one thread, squeezenet1_1, resnet18 and
mobilenet_v2 took 11 to 19 % longer than a step in inference, 27 to 53 % in training (about 0.2 ms an
operator). Left out where one more step would not fit in the child's time limit (``no_room_to_count``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tracker.errors import MeasurementError

#: The version of what ``tensor_peak_mb`` counts (tag ``tracker.tensor_peak``): another counts otherwise.
TENSOR_PEAK_VERSION = 1
#: A counted step is left out where this many steps (the step, its bookkeeping, room to spare) and
#: ``COUNT_MARGIN_S`` more would not fit in the child's time limit: a measurement made is never lost to it.
COUNT_STEPS = 3.0
COUNT_MARGIN_S = 5.0


def no_room_to_count(elapsed_s: float, step_ms: float, limit_s: float | None) -> str | None:
    """Why a step should not be counted (the child ``elapsed_s`` into its ``limit_s`` with a step of
    ``step_ms``: the time limit would end the child and the measurement with it), or None."""
    needs_s = COUNT_STEPS * step_ms / 1000.0 + COUNT_MARGIN_S
    if limit_s is None or elapsed_s + needs_s <= limit_s:
        return None
    return (f"not counted: one more step ({step_ms / 1000.0:.3g} s, about {needs_s:.3g} s with its bookkeeping and room "
            f"to spare) would not fit in the {limit_s:g} s time limit, {elapsed_s:.3g} s of it gone")


class _Storages:
    """Storages seen and not yet found freed, by their C++ object (``StorageWeakRef.cdata``), with their
    bytes and a weak reference each; their sum now (at least what is alive) and the highest alive."""

    def __init__(self) -> None:
        import torch
        from torch.multiprocessing.reductions import StorageWeakRef

        self.alive: dict[int, tuple[Any, int]] = {}
        self.now = 0
        self.peak = 0
        self.unseen = 0  # tensors with no storage to read (sparse, opaque): a count that would miss them
        self._tensor, self._weak, self._expired = torch.Tensor, StorageWeakRef, torch.UntypedStorage._expired

    def add(self, value: Any) -> None:
        if not isinstance(value, self._tensor) or value.device.type != "cpu":
            return
        try:
            storage = value.untyped_storage()
        except (RuntimeError, NotImplementedError):  # a tensor without a storage (sparse, opaque): not countable
            self.unseen += 1
            return
        ref = self._weak(storage)
        if ref.cdata not in self.alive:
            size = storage.nbytes()
            self.alive[ref.cdata] = (ref, size)
            self.now += size

    def mark(self) -> None:
        """The highest sum so far, exact: storages freed since the last sweep only lower ``now``, so it is
        swept (each weak reference asked) only where it would pass the highest; a sweep at every operator
        was most of the cost (mobilenet_v2's training step at batch 4: 1.7 s of 2)."""
        if self.now <= self.peak:
            return
        for key in [k for k in self.alive if self._expired(k)]:
            self.now -= self.alive.pop(key)[1]
        self.peak = max(self.peak, self.now)


def tensor_peak_mb(step: Callable[[], None], held: Iterable[Any]) -> float:
    """The most MB of CPU tensors alive at once over one call of ``step`` (counted at each operator's end,
    its arguments and results included), ``held`` (tensors the step holds throughout) counted from its
    start. Raises what the step raises, and a MeasurementError where a tensor has no storage to count."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    storages = _Storages()

    class Counting(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # nothing is compiled under it: torch would otherwise import torch._dynamo to wrap the method
            # below (about 1.4 s and 150 MB in an inference child, which has no other use for it)
            return False

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                               kwargs: dict[str, Any] | None = None) -> Any:
            for value in tree_flatten((args, kwargs or {}))[0]:
                storages.add(value)
            out = func(*args, **(kwargs or {}))
            for value in tree_flatten(out)[0]:
                storages.add(value)
            storages.mark()
            return out

    for tensor in held:
        storages.add(tensor)
    storages.mark()
    with Counting():
        step()
    if storages.unseen:  # a figure that leaves tensors out is no figure: absent, and why
        raise MeasurementError(f"{storages.unseen} tensors of the step have no storage to count (sparse or opaque "
                               "tensors): their bytes would be missing")
    return storages.peak / 2**20


def count_step(step: Any, slowest_ms: float, limit_s: float | None, elapsed_s: float = 0.0) -> dict[str, Any]:
    """A run's ``{"tensor_peak_mb": MB}`` over one more call of ``step`` (which knows what it holds,
    ``step.held()``), or ``{"tensor_peak_error": why}``: no room left in the child's time limit
    (:func:`no_room_to_count`), or the count failed. What cannot be counted is absent; the measurement stands."""
    why = no_room_to_count(elapsed_s, slowest_ms, limit_s)
    if why is None:
        try:
            return {"tensor_peak_mb": tensor_peak_mb(step, step.held())}
        except Exception as exc:  # noqa: BLE001  a count that fails loses the count, not the measurement
            why = f"{type(exc).__name__}: {str(exc)[:300]}"
    return {"tensor_peak_error": why}


def holding(step: Callable[[], None], model: Any, inputs: Any, optimizer: Any = None) -> Callable[[], None]:
    """``step``, which now knows (``step.held()``) what it holds throughout (:func:`held_by`), as
    :func:`count_step` asks: a measurement's step and a training job's alike."""
    step.held = lambda: held_by(model, inputs, optimizer)  # type: ignore[attr-defined]
    return step


def held_by(model: Any, inputs: Any = None, optimizer: Any = None) -> list[Any]:
    """What a step of ``model`` holds throughout: its parameters (and their gradients from the last step),
    its buffers, ``inputs`` (a tensor or a structure of them) and ``optimizer``'s state."""
    from torch.utils._pytree import tree_flatten

    out: list[Any] = []
    for p in model.parameters():
        out.append(p)
        if p.grad is not None:
            out.append(p.grad)
    out.extend(model.buffers())
    out.extend(tree_flatten(inputs)[0])
    if optimizer is not None:
        for state in optimizer.state.values():
            out.extend(tree_flatten(state)[0])
    return out
