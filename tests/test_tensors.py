"""tensor_peak_mb (tracker.profile.tensors, since 0.9.31): the most bytes of CPU tensors alive at once over one
step, counted at each operator's end, each storage once."""

from __future__ import annotations

import pytest


def test_each_storage_is_counted_once_from_its_first_sight_until_it_is_freed() -> None:
    import torch

    from tracker.profile.tensors import tensor_peak_mb

    x = torch.ones(256, 256)  # 0.25 MB
    mb = 256 * 256 * 4 / 2**20

    def chain() -> None:
        t = x
        for _ in range(6):  # each product frees the one before: two alive at once, beside x
            t = t * 2

    assert tensor_peak_mb(chain, [x]) == pytest.approx(3 * mb)

    def views() -> None:  # views and in-place results share their storage: no bytes of their own
        y = x.t().contiguous()
        y.view(-1).add_(1)
        y.relu_()

    assert tensor_peak_mb(views, [x]) == pytest.approx(2 * mb)

    def kept() -> None:  # what the step keeps adds up
        held = [x * k for k in range(4)]
        assert len(held) == 4

    assert tensor_peak_mb(kept, [x]) == pytest.approx(5 * mb)
    assert tensor_peak_mb(kept, []) == pytest.approx(5 * mb)  # x counted at its first operator, as held or not


def test_a_tensor_without_a_storage_makes_no_figure() -> None:
    """A figure that left a sparse or opaque tensor's bytes out would be too low: none, and why."""
    import torch

    from tracker.errors import MeasurementError
    from tracker.profile.tensors import tensor_peak_mb

    sparse = torch.ones(8, 8).to_sparse()
    with pytest.raises(MeasurementError, match="tensors of the step have no storage to count"):
        tensor_peak_mb(lambda: sparse * 2, [sparse])


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "squeezenet1_1"])
def test_a_networks_tensors_are_what_its_description_says_they_are(name: str) -> None:
    """The step a measurement times, counted: in inference the weights and the activations alive at once that
    the description computes (the inference memory floor of the fingerprints) to within 3 %, never under them;
    in training at least the weights three times (their gradients, SGD's momentum) and every activation autograd
    keeps (``kept_activation_bytes``). Two counts of one step agree to the byte."""
    import torch

    from tracker.describe import describe
    from tracker.describe.features import aggregates
    from tracker.profile.measure import _step
    from tracker.profile.network import NetworkSpec
    from tracker.profile.tensors import tensor_peak_mb
    from tracker.zoo import resolve

    size, batch = 64, 2
    figures = aggregates(describe(name, size), batch)
    weights, live, kept = (figures[k] / 2**20 for k in ("weight_bytes", "live_activation_bytes", "kept_activation_bytes"))
    for phase in ("inference", "training"):
        ref = resolve(name)
        torch.manual_seed(0)
        spec = NetworkSpec(model=ref.name, batch_size=batch, input_size=size, device="cpu", phase=phase)
        step = _step(ref.build(size), spec, phase)
        step()  # the measurement's warm-up: the optimizer's state made
        counted = tensor_peak_mb(step, step.held())
        assert tensor_peak_mb(step, step.held()) == counted
        if phase == "inference":
            assert weights + live <= counted < 1.03 * (weights + live), (phase, counted, weights, live)
        else:
            assert 3 * weights + kept <= counted, (phase, counted, weights, kept)


def test_a_step_that_would_not_fit_in_the_time_limit_is_not_counted() -> None:
    """The count runs after the measurement, in the child, under its time limit: a step that would take the
    child past it would lose the measurement, so it is left out, and the run says why."""
    from tracker.profile.tensors import COUNT_MARGIN_S, COUNT_STEPS, no_room_to_count

    assert no_room_to_count(10.0, 2_000.0, None) is None  # no limit given (run in-process)
    assert no_room_to_count(10.0, 2_000.0, 10.0 + COUNT_STEPS * 2.0 + COUNT_MARGIN_S) is None
    said = no_room_to_count(500.0, 60_000.0, 600.0)
    assert said == ("not counted: one more step (60 s, about 185 s with its bookkeeping and room to spare) would not "
                    "fit in the 600 s time limit, 500 s of it gone")
