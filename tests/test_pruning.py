"""Structured channel pruning (tracker.zoo.pruning): analysis, choice of filters, rebuilt networks."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest
import torch
from torch import nn

from tracker.errors import ConfigError
from tracker.zoo import build_model
from tracker.zoo.pruning import (
    apply_widths,
    build_pruned,
    channel_groups,
    prune,
    pruned_spec,
    pruning_plan,
    width_map,
)

SIZE = 64  # forward checks run on (2, 3, 64, 64)


@functools.cache
def _model(name: str) -> nn.Module:
    """One untrained torchvision model per name, shared by the tests (pruning copies it).

    Convs get He-normal weights: googlenet's default (``init_weights=False``) lets the activations
    vanish, which would make an output comparison meaningless."""
    torch.manual_seed(0)
    model = build_model(name)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
    return model


def _input() -> torch.Tensor:
    return torch.randn(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))


def _params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _masked_forward(model: nn.Module, plan: dict[str, list[int]], x: torch.Tensor) -> torch.Tensor:
    """The original model with every pruned channel zeroed where it is made: what the pruned
    network computes, if the channels and the layers reading them were cut consistently."""
    handles = []
    for name, keep in plan.items():
        module = model.get_submodule(name)
        channels = module.out_channels if isinstance(module, nn.Conv2d) else module.num_features
        drop = sorted(set(range(channels)) - set(keep))

        def zero(_m: nn.Module, _i: object, out: torch.Tensor, drop: list[int] = drop) -> torch.Tensor:
            out = out.clone()
            out[:, drop] = 0
            return out

        handles.append(module.register_forward_hook(zero))
    try:
        with torch.no_grad():
            return model(x)
    finally:
        for handle in handles:
            handle.remove()


# (model, method, band of pruned/original parameters at ratio 0.5 or None)
CASES = [
    ("resnet18", "l1", (0.15, 0.60)),
    ("mobilenet_v2", "random", (0.15, 0.60)),
    ("squeezenet1_1", "l1", None),
    ("googlenet", "random", None),
]


@pytest.mark.parametrize(("name", "method", "band"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_pruned_network_runs_is_smaller_and_computes_the_masked_original(
    name: str, method: str, band: tuple[float, float] | None
) -> None:
    model = _model(name)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    pruned = prune(model, 0.5, method=method, seed=3)
    x = _input()
    with torch.no_grad():
        out = pruned(x)
    assert out.shape == (2, 1000)
    assert type(pruned) is type(model)  # an ordinary module, not a GraphModule
    n0, n1 = _params(model), _params(pruned)
    print(f"{name} {method} r=0.5: {n0} -> {n1} parameters ({n1 / n0:.1%})")
    assert n1 < n0
    if band is not None:
        assert band[0] < n1 / n0 < band[1], f"{name}: {n1}/{n0} = {n1 / n0:.3f}"
    # the original is untouched
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # cut consistently: the pruned net computes what the original does with those channels zeroed
    plan = pruning_plan(model, 0.5, method=method, seed=3)
    assert plan
    expected = _masked_forward(model, plan, x)
    atol = 1e-4 * float(expected.abs().max())
    assert float((expected[0] - expected[1]).abs().max()) > 20 * atol  # the output depends on the input
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=atol)


def test_residual_adds_keep_one_width_and_the_same_channels() -> None:
    model = _model("resnet18")
    groups = {g.convs: g for g in channel_groups(model)}
    stem = next(g for convs, g in groups.items() if "conv1" in convs)
    assert {"conv1", "layer1.0.conv2", "layer1.1.conv2"} <= set(stem.convs) and stem.prunable
    assert any({"layer2.0.conv2", "layer2.0.downsample.0", "layer2.1.conv2"} <= set(c) for c in groups)
    pruned = prune(model, 0.5)
    widths = width_map(pruned)
    assert widths["layer2.0.conv2"] == widths["layer2.0.downsample.0"] == widths["layer2.1.conv2"] == 64
    assert widths["conv1"] == widths["layer1.0.conv2"] == widths["layer1.1.conv2"] == 32
    plan = pruning_plan(model, 0.5)
    assert plan["layer2.0.conv2"] == plan["layer2.0.downsample.0"] == plan["layer2.1.conv2"]
    assert plan["layer2.0.bn2"] == plan["layer2.0.conv2"]
    assert pruned.fc.in_features == 256
    with torch.no_grad():
        assert pruned(_input()).shape == (2, 1000)


def test_depthwise_convs_keep_groups_equal_to_channels() -> None:
    model = _model("mobilenet_v2")
    pruned = prune(model, 0.5, method="l1")
    depthwise = [(n, m) for n, m in pruned.named_modules() if isinstance(m, nn.Conv2d) and m.groups > 1]
    original = [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d) and m.groups > 1]
    assert [n for n, _ in depthwise] == original and len(original) == 17
    for name, conv in depthwise:
        orig = model.get_submodule(name)
        assert conv.groups == conv.in_channels == conv.out_channels == round(orig.out_channels / 2), name


def test_ratio_zero_is_an_equivalent_copy() -> None:
    model = _model("resnet18")
    copy = prune(model, 0.0)
    assert copy is not model and copy.conv1 is not model.conv1
    assert _params(copy) == _params(model) and width_map(copy) == width_map(model)
    x = _input()
    with torch.no_grad():
        assert torch.equal(copy(x), model(x))


def _tiny() -> nn.Sequential:
    """conv1 (3->4) whose filters have L1 norms 1, 5, 2, 4 (times 27), then BN, ReLU, conv2."""
    net = nn.Sequential(nn.Conv2d(3, 4, 3, bias=True), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 1)).eval()
    signs = torch.where(torch.rand(4, 3, 3, 3, generator=torch.Generator().manual_seed(0)) > 0.5, 1.0, -1.0)
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([1.0, 5.0, 2.0, 4.0]).view(4, 1, 1, 1) * signs)
        net[0].bias.copy_(torch.arange(4.0))
        net[1].running_mean.copy_(torch.arange(4.0))
        net[1].running_var.copy_(torch.arange(1.0, 5.0))
    return net


def test_l1_keeps_the_filters_with_the_largest_l1_norm() -> None:
    net = _tiny()
    pruned = prune(net, 0.5, method="l1", input_size=8)
    assert pruning_plan(net, 0.5, input_size=8) == {"0": [1, 3], "1": [1, 3]}
    assert torch.equal(pruned[0].weight, net[0].weight[[1, 3]])
    assert torch.equal(pruned[0].bias, net[0].bias[[1, 3]])
    assert torch.equal(pruned[1].running_mean, torch.tensor([1.0, 3.0]))
    assert torch.equal(pruned[1].running_var, torch.tensor([2.0, 4.0]))
    assert torch.equal(pruned[3].weight, net[3].weight[:, [1, 3]])
    assert pruned[3].out_channels == 2  # the output is never pruned
    # a ratio that keeps 3 of 4 drops the smallest only
    assert pruning_plan(net, 0.25, input_size=8)["0"] == [1, 2, 3]


class _TwoBranches(nn.Module):
    """Two convs whose outputs are added: their channels are ranked by the summed L1 norms."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1, bias=False)
        self.b = nn.Conv2d(3, 4, 1, bias=False)
        self.head = nn.Conv2d(4, 2, 1)
        with torch.no_grad():
            # |a| = 5 0 2 3 (top-2 alone: 0, 3); |b| = 0 1 3 0 (alone: 1, 2); sum 5 1 5 3 -> keep 0, 2
            self.a.weight.copy_(torch.tensor([5.0, 0.0, 2.0, 3.0]).view(4, 1, 1, 1) * torch.tensor([0.5, -0.25, 0.25]).view(1, 3, 1, 1))
            self.b.weight.copy_(torch.tensor([0.0, 1.0, 3.0, 0.0]).view(4, 1, 1, 1) * torch.tensor([-0.5, 0.25, 0.25]).view(1, 3, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.a(x) + self.b(x)))


def test_l1_sums_the_norms_of_a_groups_filters() -> None:
    net = _TwoBranches().eval()
    (group, head) = channel_groups(net, input_size=8)
    assert set(group.convs) == {"a", "b"} and group.channels == 4 and group.prunable
    assert head.convs == ("head",) and not head.prunable and head.reason == "network output"
    assert pruning_plan(net, 0.5, input_size=8) == {"a": [0, 2], "b": [0, 2]}
    pruned = prune(net, 0.5, input_size=8)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(pruned(x), _masked_forward(net, {"a": [0, 2], "b": [0, 2]}, x))


def test_random_selection_is_deterministic_per_seed() -> None:
    net = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.Conv2d(64, 8, 1)).eval()
    first = pruning_plan(net, 0.5, method="random", seed=7, input_size=16)
    assert first == pruning_plan(net, 0.5, method="random", seed=7, input_size=16)
    assert first != pruning_plan(net, 0.5, method="random", seed=8, input_size=16)
    assert first["0"] != list(range(32)) and len(first["0"]) == 32 and first["0"] == sorted(first["0"])
    a, b = (prune(net, 0.5, method="random", seed=7, input_size=16) for _ in range(2))
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())
    assert torch.equal(a[0].weight, net[0].weight[first["0"]])


def test_flatten_over_a_spatial_map_expands_the_linear_inputs() -> None:
    net = nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(24, 5)
    ).eval()
    pruned = prune(net, 0.5, input_size=8)
    keep = pruning_plan(net, 0.5, input_size=8)["0"]
    assert pruned[4].in_features == 12
    assert torch.equal(pruned[4].weight, net[4].weight[:, [c * 4 + j for c in keep for j in range(4)]])
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(pruned(x), _masked_forward(net, {"0": keep}, x))


def test_grouped_convs_and_untraceable_models_are_not_guessed_at() -> None:
    class ResNeXtish(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3)
            self.grouped = nn.Conv2d(8, 8, 3, groups=2)
            self.head = nn.Conv2d(8, 4, 1)
            self.other = nn.Conv2d(4, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.other(self.head(self.grouped(self.stem(x))))

    net = ResNeXtish().eval()
    flags = {g.convs: g.prunable for g in channel_groups(net, input_size=16)}
    assert flags == {("stem",): False, ("grouped",): False, ("head",): True, ("other",): False}
    assert width_map(prune(net, 0.5, input_size=16)) == {"stem": 8, "grouped": 8, "head": 2, "other": 4}

    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3)
            self.twice = nn.Conv2d(8, 8, 3, padding=1)
            self.head = nn.Conv2d(8, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.twice(self.twice(self.stem(x))))

    net = Shared().eval()
    assert not any(g.prunable for g in channel_groups(net, input_size=16) if {"stem", "twice"} & set(g.convs))
    assert width_map(prune(net, 0.5, input_size=16)) == {"stem": 8, "twice": 8, "head": 4}

    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x) if x.sum() > 0 else x

    with pytest.raises(ConfigError, match="cannot be traced"):
        prune(Branchy(), 0.5)


def test_pruned_spec_round_trips_through_json() -> None:
    spec = json.loads(json.dumps(pruned_spec("resnet18", 0.5, method="random", seed=2)))
    assert spec["format"] == "tracker.netspec/1" and spec["kind"] == "pruned"
    assert spec["name"] == "resnet18-p50-random-s2" and spec["base"] == "resnet18"
    assert (spec["ratio"], spec["method"], spec["seed"]) == (0.5, "random", 2)
    rebuilt = build_pruned(spec)
    direct = prune(_model("resnet18"), 0.5, method="random", seed=2)
    assert width_map(rebuilt) == width_map(direct) == spec["widths"]
    assert _params(rebuilt) == _params(direct) < _params(_model("resnet18"))
    with torch.no_grad():
        assert rebuilt(_input()).shape == (2, 1000)
    with pytest.raises(ConfigError, match="format"):
        build_pruned({**spec, "format": "tracker.netspec/0"})
    with pytest.raises(ConfigError, match="kind"):
        build_pruned({**spec, "kind": "generated"})


def test_apply_widths_gives_exactly_those_widths() -> None:
    model = _model("resnet18")
    asked = {"conv1": 40, "layer1.0.conv1": 10, "layer3.1.conv1": 100, "layer4.0.conv2": 300}
    net = apply_widths(model, asked, method="random", seed=1)
    got, orig = width_map(net), width_map(model)
    assert {k: got[k] for k in asked} == asked
    # convs sharing channels with a named one follow it; the others keep their width
    assert got["layer1.0.conv2"] == got["layer1.1.conv2"] == 40
    assert got["layer4.0.downsample.0"] == got["layer4.1.conv2"] == 300
    followers = {"layer1.0.conv2", "layer1.1.conv2", "layer4.0.downsample.0", "layer4.1.conv2"}
    assert {k: v for k, v in got.items() if k not in asked and k not in followers} == {
        k: v for k, v in orig.items() if k not in asked and k not in followers
    }
    assert net.fc.in_features == 300
    with torch.no_grad():
        assert net(_input()).shape == (2, 1000)


def test_invalid_requests_raise_config_errors_naming_the_value() -> None:
    model = _model("resnet18")
    with pytest.raises(ConfigError, match="layer9.conv"):
        apply_widths(model, {"layer9.conv": 3})
    with pytest.raises(ConfigError, match="'conv1'"):
        apply_widths(model, {"conv1": 65})
    with pytest.raises(ConfigError, match="'layer1.0.conv1'"):
        apply_widths(model, {"layer1.0.conv1": 0})
    with pytest.raises(ConfigError, match="layer1.0.conv2"):  # conv1 and layer1.0.conv2 are added together
        apply_widths(model, {"conv1": 32, "layer1.0.conv2": 16})
    with pytest.raises(ConfigError, match="1.5"):
        prune(model, 1.5)
    with pytest.raises(ConfigError, match="-0.1"):
        prune(model, -0.1)
    with pytest.raises(ConfigError, match="magic"):
        prune(model, 0.5, method="magic")
    with pytest.raises(ConfigError, match="magic"):
        pruned_spec("resnet18", 0.5, method="magic")
    with pytest.raises(ConfigError, match="1.5"):
        pruned_spec("resnet18", 1.5)
    with pytest.raises(ConfigError, match="classifier.1"):  # squeezenet's classifier conv is the output
        apply_widths(_model("squeezenet1_1"), {"classifier.1": 500})


def test_importing_the_module_does_not_import_torch() -> None:
    code = "import sys, tracker.zoo.pruning; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_pruned_network_measures_less_memory_than_its_base() -> None:
    """A measuring child counts peak memory from the built network on: building a pruned network
    traces and copies its unpruned base, which is not the pruned network's memory. Before, a
    resnet18 pruned by half peaked at about 790 MB here against 600 MB for resnet18 itself."""
    from tracker.profile.child import run_child

    spec = pruned_spec("resnet18", 0.5)
    rule = {"time_cap_s": 1.0, "warmup_cap_s": 0.5}
    common = {"batch_size": 1, "input_size": SIZE, "threads": 1, "rule": rule}
    base = run_child({"model": "resnet18", **common})
    pruned = run_child({"model": spec["name"], "network_spec": spec, **common})
    assert base.ok and pruned.ok, (base.message, pruned.message, pruned.stderr_tail)
    base_mb, pruned_mb = base.payload["memory"]["peak_rss_mb"], pruned.payload["memory"]["peak_rss_mb"]
    # resnet18's weights are 45 MB, the pruned network's about 12 MB
    assert pruned_mb < base_mb - 15, (pruned_mb, base_mb)
