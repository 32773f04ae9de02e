"""The description module: counts against torch's own, graph shape, features, fallbacks."""

import json
from pathlib import Path

import networkx as nx
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from tracker.describe import describe
from tracker.describe.features import CATEGORIES, aggregates, node_rows
from tracker.describe import graph
from tracker.describe.graph import Description, describe_module, trace_hooks
from tracker.zoo import build_model

#: Published counts (torchvision docs: GFLOPS there are GMACs at 224x224).
#: parameters and MACs torchvision documents (maxvit_t's since 0.8.4: its attention is two einsums)
KNOWN = {"resnet18": (11_689_512, 1.814e9), "mobilenet_v2": (3_504_872, 0.301e9), "maxvit_t": (30_919_624, 5.558e9)}


def torch_flops(model, x) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(x)
    return counter.get_total_flops()


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "maxvit_t"])
def test_counts_match_known_values_and_torch_flop_counter(name: str) -> None:
    model = build_model(name)
    desc = describe_module(model, name, 224)
    agg = aggregates(desc, batch_size=1)
    params, gmacs = KNOWN[name]
    assert agg["params"] == params == sum(p.numel() for p in model.parameters())
    assert abs(agg["macs"] - gmacs) / gmacs < 0.01
    assert agg["flops"] == torch_flops(model, torch.randn(1, 3, 224, 224))
    assert agg["flops"] == 2 * agg["macs"]


def test_features_scale_with_batch_and_are_sums_of_node_rows() -> None:
    desc = describe("resnet18")
    one, eight = aggregates(desc, 1), aggregates(desc, 8)
    assert eight["flops"] == 8 * one["flops"] and eight["activation_bytes"] == 8 * one["activation_bytes"]
    assert eight["params"] == one["params"] and eight["weight_bytes"] == 4 * one["params"]
    rows = node_rows(desc, 8)
    assert eight["flops"] == sum(r["flops"] for r in rows)
    assert eight["largest_activation_bytes"] == max(r["activation_out_bytes"] for r in rows)
    assert sum(eight[f"{c}_count"] for c in CATEGORIES if c != "io") + 2 == eight["nodes"]  # + input, output
    assert one["conv_count"] == 20 and one["linear_count"] == 1 and one["depth"] == 18
    assert one["saved_activation_bytes"] > 0 and one["largest_activation_bytes"] == 64 * 112 * 112 * 4


def _autograd_saved_bytes(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd saves in one training forward pass (weights and
    buffers apart): what PyTorch itself keeps for the backward pass."""
    weights = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(seen.values())


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "squeezenet1_1", "mobilenet_v3_small"])
def test_kept_activation_bytes_are_what_autograd_saves(name: str) -> None:
    model = build_model(name)
    desc = describe_module(model, name, 64)
    kept = aggregates(desc, batch_size=2)["kept_activation_bytes"]
    saved = _autograd_saved_bytes(model, torch.randn(2, 3, 64, 64))
    assert abs(kept / saved - 1) < 0.02
    assert kept == sum(r["kept_activation_bytes"] for r in node_rows(desc, 2))


def test_kept_bytes_count_a_shared_input_once_and_follow_in_place_semantics() -> None:
    from tracker.describe.features import kept_bytes
    from tracker.describe.graph import Node

    def conv(name: str, source: str) -> Node:
        return Node(name, "call_module", "Conv2d", [source], [1, 4, 8, 8],
                    {"in_channels": 4, "out_channels": 4, "kernel_size": [1, 1], "groups": 1})

    def graph(act: str, method: str) -> Description:
        nodes = [Node("x", "placeholder", "placeholder", [], [1, 4, 8, 8]),
                 conv("a", "x"), Node("r", "call_function", act, ["a"], [1, 4, 8, 8], {"inplace": True}),
                 conv("b1", "r"), conv("b2", "r"),
                 Node("p", "call_module", "MaxPool2d", ["r"], [1, 4, 4, 4], {"kernel_size": 2, "stride": 2}),
                 Node("f", "call_function", "flatten", ["p"], [1, 64]),
                 Node("out", "output", "output", ["b1", "b2", "f"], None)]
        return Description("g", [1, 4, 8, 8], nodes, method)

    plane = 4 * 8 * 8 * 4  # one 4x8x8 float tensor
    relu = kept_bytes(graph("relu", "fx"), batch_size=3)
    # x (read by a), a's output (read by two convolutions and the pool, kept once; relu is in place), the
    # pool's int64 indices; the flatten is a view, the convolutions' outputs are read by nothing.
    assert relu == {"x": 3 * plane, "a": 3 * plane, "r": 0, "b1": 0, "b2": 0, "p": 3 * 4 * 4 * 4 * 8, "f": 0, "out": 0}
    relu6 = kept_bytes(graph("relu6", "fx"), batch_size=3)
    assert relu6["r"] == 3 * plane and sum(relu6.values()) == sum(relu.values()) + 3 * plane  # a copy of its input
    assert kept_bytes(graph("relu6", "import:perf4sight"), batch_size=3) == relu  # PyTorch 1.6 kept the result


def _forward_allocated_bytes(model: torch.nn.Module, x: torch.Tensor) -> int:
    """The most bytes of tensors PyTorch's CPU allocator held at once in an inference forward pass
    over the network's input ``x`` (its caller's, held throughout), from every allocation and free
    the profiler recorded, in the order they happened: those inside an operator that frees them
    itself count (a fused attention's projections, which an operator's net memory would hide),
    but not a kernel's scratch (memory freed before the innermost operator that allocated it
    returns: oneDNN's copy of a convolution's weights in its own layout, a weight's size)."""
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model(x)  # lazily built state (oneDNN's) allocates once, outside the pass measured
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            model(x)
    with tempfile.TemporaryDirectory() as folder:
        prof.export_chrome_trace(f"{folder}/trace.json")
        trace = json.loads(Path(f"{folder}/trace.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    ops = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    freed = {}  # each allocation's free: the next free of its address
    for i, e in enumerate(memory):
        if e["args"]["Bytes"] < 0:
            opened = [j for j, a in freed.items() if a is None and memory[j]["args"]["Addr"] == e["args"]["Addr"]]
            if opened:
                freed[opened[-1]] = e["ts"]
        else:
            freed[i] = None

    def scratch(i: int) -> bool:
        ts, end = memory[i]["ts"], freed.get(i)
        around = [op for op in ops if op[0] <= ts <= op[1]]
        return end is not None and bool(around) and end <= min(around, key=lambda op: op[1] - op[0])[1]

    skipped = {i for i in freed if scratch(i)}
    skipped_frees = {freed[i] for i in skipped}
    held = peak = 0
    for i, e in enumerate(memory):
        if i in skipped or (e["args"]["Bytes"] < 0 and e["ts"] in skipped_frees):
            continue
        held += e["args"]["Bytes"]
        peak = max(peak, held)
    return peak + x.numel() * x.element_size()


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "densenet121", "shufflenet_v2_x0_5", "vit_b_16"])
def test_live_activation_bytes_are_a_floor_of_what_a_forward_pass_allocates(name: str) -> None:
    """Weights plus live_activation_bytes is the inference floor of a peak memory (runtime.
    MEMORY_FLOOR_COLUMNS): never more than the bytes PyTorch holds at once in a forward pass, and
    closer to them than the largest activation alone (in-place adds of residual blocks, in-place
    activations, concatenations, channel shuffles' views, attention)."""
    size = 224 if name == "vit_b_16" else 64  # a vision transformer takes only its own size
    model = build_model(name).eval()
    desc = describe_module(model, name, size)
    agg = aggregates(desc, batch_size=2)
    allocated = _forward_allocated_bytes(model, torch.randn(2, 3, size, size))
    assert agg["largest_activation_bytes"] < agg["live_activation_bytes"] <= allocated
    assert agg["live_activation_bytes"] >= 0.6 * allocated  # vit_b_16 0.71 (its attention's scores are not counted)
    assert agg["live_activation_bytes"] == max(r["live_activation_bytes"] for r in node_rows(desc, 2))
    assert aggregates(desc, batch_size=6)["live_activation_bytes"] == 3 * agg["live_activation_bytes"]


def test_live_bytes_free_a_tensor_at_its_last_reader_and_own_nothing_for_views_and_in_place_writes() -> None:
    from tracker.describe.features import live_bytes
    from tracker.describe.graph import Node

    def node(name: str, kind: str, inputs: list[str], shape: list[int] | None = None, **attrs: object) -> Node:
        return Node(name, "call_module", kind, inputs, shape or [1, 4, 8, 8], dict(attrs))

    plane = 4 * 8 * 8 * 4  # one 4x8x8 float tensor
    nodes = [Node("x", "placeholder", "placeholder", [], [1, 4, 8, 8]),
             node("a", "Conv2d", ["x"], in_channels=4, out_channels=4, kernel_size=1, groups=1),
             node("r", "ReLU", ["a"], inplace=True),  # written into a's memory
             node("b", "BatchNorm2d", ["r"]),
             node("s", "add", ["b", "r"]),  # out += identity: traced as add, b read for the last time
             node("v", "view", ["s"], [1, 256]),  # a view keeps s's memory (b's) alive
             node("t", "add", ["x", "x"]),  # x is read again: a tensor of its own
             node("w", "view", ["t"], [1, 256]),
             node("y", "flatten", ["x"], [1, 256]),
             node("c", "cat", ["v", "w", "y"], [1, 768]),
             Node("out", "output", "output", ["c"], None)]
    live = live_bytes(Description("g", [1, 4, 8, 8], nodes, "fx"), batch_size=2)
    # x throughout (its caller holds it); a (r in place) until s; b, written into by s, until c
    # reads its view v; t until c reads its view w; c until the output
    assert live == {"x": 2 * plane, "a": 4 * plane, "r": 4 * plane, "b": 6 * plane, "s": 6 * plane,
                    "v": 4 * plane, "t": 6 * plane, "w": 6 * plane, "y": 6 * plane, "c": 12 * plane,
                    "out": 8 * plane}


class _SelfAttention(torch.nn.Module):
    """Attention over a sequence of its own, with a residual add, then a transformer encoder layer."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(16, 64)
        self.attention = torch.nn.MultiheadAttention(64, 4, batch_first=True)
        self.encoder = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        self.head = torch.nn.Linear(64, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        a, _ = self.attention(h, h, h, need_weights=False)
        return self.head(self.encoder(h + a))


class _CrossAttention(torch.nn.Module):
    """Ten queries over fifty keys and values of another width (kdim, vdim)."""

    def __init__(self) -> None:
        super().__init__()
        self.queries, self.keys = torch.nn.Linear(16, 64), torch.nn.Linear(16, 32)
        self.attention = torch.nn.MultiheadAttention(64, 4, kdim=32, vdim=32, batch_first=True)
        self.head = torch.nn.Linear(64, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kv = self.keys(x)
        return self.head(self.attention(self.queries(x[:, :10]), kv, kv, need_weights=False)[0])


class _Decoder(torch.nn.Module):
    """A transformer decoder layer: twenty positions over the fifty of their memory."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(16, 64)
        self.decoder = torch.nn.TransformerDecoderLayer(64, 4, 128, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return self.decoder(h[:, :20], h)


class _Stacks(torch.nn.Module):
    """An encoder stack with a causal mask (which torch.fx lists among the inputs), then a whole
    transformer over fifty source and twenty target positions."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(16, 64)
        self.encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2,
                                                   enable_nested_tensor=False)
        self.transformer = torch.nn.Transformer(64, 4, 1, 1, 128, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        h = self.encoder(h, mask=torch.ones(50, 50).triu(1) * -1e9)
        return self.transformer(h, h[:, :20])


class _Masked(torch.nn.Module):
    """Self-attention with a padding mask, which torch.fx lists as its second input."""

    def __init__(self, masked: bool) -> None:
        super().__init__()
        self.masked, self.attention = masked, torch.nn.MultiheadAttention(64, 4, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = x[:, :, 0] > 1e9 if self.masked else None  # (N, S): no key is padding
        return self.attention(x, x, x, key_padding_mask=mask, need_weights=False)[0]


def test_an_attention_mask_is_not_taken_for_its_keys() -> None:
    """A padding mask (1, S) came second among attention's inputs, and its scores were counted over
    one key; a mask does not change the work."""
    descs = [describe_module(_Masked(m), "m", input_shape=(50, 64)) for m in (False, True)]
    assert [d.method for d in descs] == ["fx", "fx"]
    plain, masked = (aggregates(d) for d in descs)
    assert masked["macs"] == plain["macs"] == 4 * 50 * 64 * 64 + 2 * 50 * 50 * 64
    # x, and the attention's q, k, v and output; beside the mask, which is no keys
    assert plain["live_activation_bytes"] == 4 * 50 * 64 * (1 + 4) <= masked["live_activation_bytes"]
    hooked = aggregates(trace_hooks(_Masked(True), "m", [1, 50, 64]))  # attention's output unseen: its input's shape
    assert hooked["macs"] == plain["macs"] and hooked["live_activation_bytes"] == plain["live_activation_bytes"]


@pytest.mark.parametrize("network", [_SelfAttention, _CrossAttention, _Decoder, _Stacks])
def test_attention_holds_its_projections_and_owns_its_output(network: type[torch.nn.Module]) -> None:
    """Attention kept whole: inside it, its query, key and value projections and its output at
    once (until 0.7.9 nothing), and the output it returns in a tuple is a tensor of its own (it was
    counted as nothing, and so was the residual add written into it). Still never above what
    PyTorch's allocator holds, its fused inference path included."""
    model, x = network().eval(), torch.randn(4, 50, 16)
    desc = describe_module(model, network.__name__, input_shape=(50, 16))
    live = aggregates(desc, batch_size=4)["live_activation_bytes"]
    allocated = _forward_allocated_bytes(model, x)
    assert 0.4 * allocated <= live <= allocated, (live, allocated)
    sequence = 4 * 50 * 64 * 4  # bytes of 50 positions of 64 features at batch 4
    if network in (_SelfAttention, _Stacks):  # at the attention (or the stack: a causal mask is no padding
        # mask): x, h, and q, k, v and the output
        assert live == 4 * 50 * 16 * 4 + sequence + 4 * sequence
    elif network is _CrossAttention:  # x, kv, the queries, and their projections (10, 50, 50 positions) and output
        assert live == 4 * 4 * (50 * 16 + 50 * 32 + 10 * 64) + 4 * 4 * (10 + 50 + 50 + 10) * 64


class _SequenceFirst(torch.nn.Module):
    """Batch first at its input and output, sequence first between, as torch.nn's transformer
    layers are by default: its inner tensors are described as (50, 1, 64)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.mix, self.head = torch.nn.Linear(16, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.mix(self.embed(x).transpose(0, 1))
        return self.head(torch.relu(h).transpose(0, 1))


def test_a_sequence_first_tensor_counts_every_position() -> None:
    """Until 0.8.0 a tensor's first dimension was taken for its batch: a sequence-first layer
    counted one of its 50 positions (mix's MACs, relu's work and bytes 50 times too few)."""
    model = _SequenceFirst().eval()
    hooked = {r["name"]: r for r in node_rows(trace_hooks(model, "seq", [1, 50, 16]), batch_size=3)}
    desc = describe_module(model, "seq", input_shape=(50, 16))
    rows = {r["name"]: r for r in node_rows(desc, batch_size=3)}
    assert rows["mix"]["out_shape"] == hooked["mix"]["out_shape"] == "50x3x64"
    assert sum(r["macs"] for r in rows.values()) == torch_flops(model, torch.randn(3, 50, 16)) // 2
    assert sum(r["macs"] for r in hooked.values()) == sum(r["macs"] for r in rows.values())  # through hooks too
    assert rows["relu"]["elementwise_ops"] == 3 * 50 * 64 and rows["mix"]["activation_out_bytes"] == 3 * 50 * 64 * 4
    assert aggregates(desc, batch_size=3)["live_activation_bytes"] == 4 * 3 * 50 * (16 + 64 + 64)  # x, mix, relu


def test_graph_matches_the_traced_model_and_round_trips() -> None:
    model = build_model("mobilenet_v2")
    gm = torch.fx.symbolic_trace(model)
    desc = describe_module(model, "mobilenet_v2", 224)
    fx_edges = sum(len(n.all_input_nodes) for n in gm.graph.nodes)
    assert len(desc.nodes) == len(list(gm.graph.nodes)) and len(desc.edges) == fx_edges
    dw = [r for r in node_rows(desc) if r["category"] == "dwconv"]
    assert len(dw) == 17 and all(r["groups"] == r["out_channels"] for r in dw)

    g = nx.node_link_graph(json.loads(desc.graph_artifact()), edges="edges")
    assert g.number_of_nodes() == len(desc.nodes) and g.number_of_edges() == len(desc.edges)
    assert g.graph["description_hash"] == desc.description_hash
    again = Description.from_json(json.loads(json.dumps(desc.to_json())))
    assert again.description_hash == desc.description_hash
    assert describe_module(build_model("mobilenet_v2"), "mobilenet_v2", 224).description_hash == desc.description_hash
    assert describe_module(model, "mobilenet_v2", 160).description_hash != desc.description_hash


def test_a_network_that_cannot_be_traced_falls_back_to_hooks_and_says_so() -> None:
    class Branchy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(3, 8, 5)

        def forward(self, x):
            return self.a(x) if x.sum() > 0 else self.b(x)  # data-dependent: torch.fx cannot trace

    desc = describe_module(Branchy(), "branchy", 32)
    assert desc.method == "hooks" and "torch.fx could not trace branchy" in desc.notes[0]
    assert [n.kind for n in desc.nodes] == ["placeholder", "Conv2d"] and desc.edges == [("x", desc.nodes[1].name)]
    assert not any("between its modules" in note for note in desc.notes)  # its sum and comparison do no work counted


def test_hooks_name_the_work_of_functions_called_between_modules() -> None:
    """Hooks see modules alone: an activation, an add or a product called between them is counted nowhere
    (a detector's FPN upsampling and box coding). Until 0.9.25 nothing said so; the note names them, and the
    description itself is as before."""

    class Between(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(3, 8, 3)

        def forward(self, x):
            y = self.a(x) if x.sum() > 0 else self.b(x)  # data-dependent: torch.fx cannot trace
            return torch.relu(y) + y * 2 + 2 * y  # 2 * y: Tensor.__rmul__, a product all the same

    desc = describe_module(Between(), "between", 16)
    assert desc.method == "hooks" and "torch.fx could not trace between" in desc.notes[0]
    assert desc.notes[1] == ("5 calls of functions between its modules do work that is counted nowhere (hooks see "
                             "modules alone): add x2, mul x2, relu x1")
    assert [n.kind for n in desc.nodes] == ["placeholder", "Conv2d"]  # what the hooks saw, as before


def test_detection_models_are_described_with_hooks() -> None:
    desc = describe("fasterrcnn_mobilenet_v3_large_320_fpn", 320)
    model = build_model("fasterrcnn_mobilenet_v3_large_320_fpn")
    assert desc.method == "hooks" and desc.notes[0].endswith("takes structured input; described with module hooks")
    # its normalisation, FPN and box coding between the modules hooks see: counted nowhere, and said so
    between = next(note for note in desc.notes if "calls of functions between its modules" in note)
    assert " add x" in between and " mul x" in between, between
    assert aggregates(desc)["params"] == sum(p.numel() for p in model.parameters())
    assert len(desc.edges) > len(desc.nodes) // 2
    # each of an image's 150 proposals (rpn_post_nms_top_n_test) goes through the box head: until
    # 0.8.0 its first dimension was taken for the batch, and the heads counted one proposal
    rows = {r["name"]: r for r in node_rows(desc, batch_size=2)}
    assert rows["roi_heads_box_head_fc6"]["macs"] == 2 * 150 * (256 * 7 * 7) * 1024
    # torchvision's published 134.38 GFLOPS (multiply-accumulates) count 1000 proposals an image; as
    # many as its random weights let through on its random image come through here (seed 0, as a
    # measuring child builds it), whatever the process drew before
    # (at its own 800 px, the size a zoo detection network is described and measured at by default
    # since 0.8.5; it resized any input to it before, whatever the input size said)
    from tracker.zoo import resolve

    assert [resolve(n).input_size for n in ("fasterrcnn_resnet50_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn",
                                            "ssd300_vgg16", "ssdlite320_mobilenet_v3_large")] == [800, 320, 300, 320]
    detector = describe("fasterrcnn_resnet50_fpn", 800)
    proposals = next(n.out_shape[0] for n in detector.nodes if n.name == "roi_heads_box_head_fc6")
    per_proposal = 256 * 7 * 7 * 1024 + 1024 * 1024 + 1024 * 91 + 1024 * 91 * 4  # fc6, fc7, classes, boxes
    assert round((aggregates(detector)["macs"] + (1000 - proposals) * per_proposal) / 1e9, 2) == 134.38
    torch.rand(proposals)
    # at 320 px it computes at 320 px: its first convolution sees 320 x 320 (800 x 800 before 0.8.5)
    small = describe("fasterrcnn_resnet50_fpn", 320)
    assert next(n for n in small.nodes if n.kind == "Conv2d").out_shape == [1, 64, 160, 160]
    assert next(n for n in detector.nodes if n.kind == "Conv2d").out_shape == [1, 64, 400, 400]
    # and a measured run's description is tracker predict's (it was another: a batch of random
    # normal values, unseeded, where describe gave one image of uniform ones)
    from tracker.profile.api import plan

    assert plan("fasterrcnn_resnet50_fpn", 2, input_size=320).model_hash == small.description_hash


def test_hooks_link_only_real_inputs_when_a_freed_output_id_is_reused() -> None:
    """Hooks match tensors by id: an output dropped at once frees its id, and CPython hands it to the
    next tensor made. That tensor must not be linked to the dropped output's module (it was, and
    a detection model's description hash changed from one process to the next)."""
    from tracker.describe.graph import trace_hooks

    class Dropping(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.ReLU(), torch.nn.ReLU()

        def forward(self, x):
            for _ in range(3):
                self.a(x)  # the output is dropped here
                fresh = torch.zeros(2)  # made after it: before the fix, often at its address
            return self.b(fresh)

    desc = trace_hooks(Dropping(), "dropping", [1, 3, 4, 4])
    assert {n.name: n.inputs for n in desc.nodes} == {"x": [], "a": ["x"], "a_1": ["x"], "a_2": ["x"], "b": []}


def test_generated_network_counts_match_torch() -> None:
    from tracker.zoo.generator import build_generated, generate

    for spec in generate(5, seed=3, input_size=64):
        model = build_generated(spec)
        desc = describe_module(model, spec["name"], 64)
        agg = aggregates(desc, 2)
        assert desc.method == "fx"
        assert agg["params"] == sum(p.numel() for p in model.parameters())
        assert agg["flops"] == torch_flops(model, torch.randn(2, 3, 64, 64))


def test_node_rows_carry_input_and_output_shapes_at_the_batch_size() -> None:
    rows = {r["name"]: r for r in node_rows(describe("resnet18"), 8)}
    assert rows["conv1"]["in_shape"] == "8x3x224x224" and rows["conv1"]["out_shape"] == "8x64x112x112"
    assert rows["conv1"]["kernel_h"] == 7 and rows["conv1"]["stride_h"] == 2 and rows["conv1"]["padding"] == 3
    assert rows["fc"]["in_shape"] == "8x512" and rows["fc"]["macs"] == 8 * 512 * 1000


# Fresh interpreter: this test process may have imported sympy already.
SHAPES_PROBE = """
import sys
import torch
from tracker.describe.graph import describe_module
from tracker.zoo import build_model

model = build_model("{name}").eval()
desc = describe_module(model, "{name}", 64)
print(json.dumps({{"method": desc.method, "sympy": "sympy" in sys.modules}}))
from torch.fx.passes.shape_prop import ShapeProp  # torch.fx's own, for comparison

gm = torch.fx.symbolic_trace(model)
with torch.no_grad():
    ShapeProp(gm).propagate(torch.randn(1, 3, 64, 64))
theirs = {{n.name: list(getattr(n.meta.get("tensor_meta"), "shape", None) or []) or None for n in gm.graph.nodes}}
print(json.dumps({{n.name: [n.out_shape, theirs.get(n.name, "absent")] for n in desc.nodes}}))
"""


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "googlenet"])
def test_shapes_are_torch_fx_shape_props_without_importing_sympy(name: str) -> None:
    """Describing a network (``tracker predict`` does) runs its graph once for shapes: the same
    shapes as torch.fx's ShapeProp, whose imports (sympy, 0.7 s) it does without."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import json\n" + SHAPES_PROBE.format(name=name)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    head, shapes = (json.loads(line) for line in out.stdout.splitlines())
    assert head == {"method": "fx", "sympy": False}
    mismatched = {k: v for k, v in shapes.items() if v[0] != v[1] and not (k == "output" and v[1] is None)}
    assert not mismatched and sum(v[0] is not None for v in shapes.values()) > 50, mismatched


class _Sequences(torch.nn.Module):
    """Attention, a transformer layer and recurrent layers, each kept whole by torch.fx and
    by hooks; ``branchy``: a data-dependent branch, so that only hooks describe it."""

    def __init__(self, branchy: bool = False) -> None:
        super().__init__()
        self.branchy = branchy
        self.attn = torch.nn.MultiheadAttention(64, 4, batch_first=True)
        self.layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        self.gru = torch.nn.GRU(64, 48, batch_first=True)
        self.lstm = torch.nn.LSTM(48, 32, num_layers=2, batch_first=True, proj_size=16)
        self.rnn = torch.nn.RNN(16, 24, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attn(x, x, x, need_weights=False)[0]
        x = self.layer(x)
        if self.branchy and x.sum() > 0:
            x = x * 1.0
        return self.rnn(self.lstm(self.gru(x)[0])[0])[0]


def test_attention_transformer_and_recurrent_layers_kept_whole_are_counted() -> None:
    """torch.fx keeps torch.nn's modules whole, and the FLOP count left their work out (a note said
    so). Now each is counted from its configuration and its input's shape, through fx and through
    hooks alike: the recurrent layers as torch's FLOP counter counts them, attention's projections
    as it counts them plus the scores and the weighted sum (which it does not count on this CPU);
    torchvision's vit_b_16 comes to its published 17.56 GMACs, and swin_t, whose attention is a
    function torch.fx keeps whole, to its 4.49."""
    steps, e = 20, 64
    attention = 4 * steps * e * e + 2 * steps * steps * e  # projections, then scores and weighted sum
    layer = attention + 2 * steps * e * 128  # and the feed-forward 64 -> 128 -> 64
    recurrent = {"gru": steps * 3 * 48 * (64 + 48),
                 "lstm": steps * (4 * 32 * (48 + 16) + 16 * 32 + 4 * 32 * (16 + 16) + 16 * 32),  # projected to 16
                 "rnn": steps * 2 * 24 * (16 + 24)}  # both directions
    for name in ("gru", "lstm", "rnn"):  # what torch counts, module by module
        module, x = getattr(_Sequences(), name), torch.randn(1, steps, getattr(_Sequences(), name).input_size)
        with FlopCounterMode(display=False) as counter:  # with grad: LSTM's fused kernel is not counted
            module(x)
        assert counter.get_total_flops() == 2 * recurrent[name], name
    for branchy, method in ((False, "fx"), (True, "hooks")):
        desc = describe_module(_Sequences(branchy), "seq", input_shape=(steps, e))
        assert desc.method == method and not [n for n in desc.notes if "leave out" in n or "no leaf" in n], desc.notes
        rows = {r["kind"]: r["macs"] for r in node_rows(desc, batch_size=3) if r["macs"]}
        assert rows == {"MultiheadAttention": 3 * attention, "TransformerEncoderLayer": 3 * layer,
                        **{name.upper(): 3 * macs for name, macs in recurrent.items()}}, method
    vit = aggregates(describe("vit_b_16"))
    assert abs(vit["macs"] - 17.564e9) / 17.564e9 < 0.001 and not describe("vit_b_16").notes
    # Swin's attention is a function torch.fx does not trace into: counted from its window (4.49 published)
    assert abs(aggregates(describe("swin_t"))["macs"] - 4.49e9) / 4.49e9 < 0.002


class _Functional(torch.nn.Module):
    """Convolutions called as functions on parameters of its own (no Conv module): 2-D with a
    stride given by position, grouped with groups by keyword, 1-D, and a linear layer likewise."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(16, 3, 3, 3))
        self.w2 = torch.nn.Parameter(torch.randn(32, 4, 3, 3))  # 16 -> 32 channels in 4 groups
        self.w3 = torch.nn.Parameter(torch.randn(8, 32, 5))
        self.fc = torch.nn.Parameter(torch.randn(10, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.relu(torch.nn.functional.conv2d(x, self.w1, None, 2, 1))
        x = torch.nn.functional.conv2d(x, self.w2, groups=4)
        x = torch.nn.functional.conv1d(x.flatten(2), self.w3)
        return torch.nn.functional.linear(x.mean(dim=2), self.fc)


def test_a_convolution_called_as_a_function_counts_its_work() -> None:
    """A network of one's own may call F.conv2d on a parameter rather than hold a Conv2d: its MACs
    come from its weight's shape (0 before 0.8.3, so such a network had no FLOPs to learn from),
    exactly torch's FLOP counter's, with its kernel in the node row."""
    model, x = _Functional(), torch.randn(1, 3, 32, 32)
    desc = describe_module(model, "functional", 32)
    rows = [r for r in node_rows(desc, batch_size=2) if r["category"] in ("conv", "gconv", "linear")]
    assert [r["kernel_h"] for r in rows] == [3, 3, 5, 0] and all(r["macs"] > 0 for r in rows)
    assert 2 * sum(r["macs"] for r in node_rows(desc, batch_size=2)) == torch_flops(model, torch.randn(2, 3, 32, 32))
    assert aggregates(desc, 1)["flops"] == torch_flops(model, x)


class _Pools(torch.nn.Module):
    """Pooling as modules (``functions=False``) or as functions given their sizes by position, as
    densenet's and mobilenet_v2's ``F.adaptive_avg_pool2d(x, (1, 1))`` is."""

    def __init__(self, functions: bool) -> None:
        super().__init__()
        self.functions = functions
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pools = torch.nn.ModuleList([torch.nn.MaxPool2d(3, 2), torch.nn.AvgPool2d(2),
                                          torch.nn.AdaptiveMaxPool2d(2), torch.nn.AdaptiveAvgPool2d((1, 1))])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional
        x = self.conv(x)
        if not self.functions:
            for pool in self.pools:
                x = pool(x)
            return x
        return f.adaptive_avg_pool2d(f.adaptive_max_pool2d(f.avg_pool2d(f.max_pool2d(x, 3, 2), 2), 2), (1, 1))


def test_a_pooling_called_as_a_function_with_its_sizes_by_position_counts_what_its_window_reads() -> None:
    """Until NODE_ROWS_VERSION 8 a pooling function given its kernel or output size by position read a
    window of one: ``F.max_pool2d(x, 3, 2)`` counted a ninth of its reads, a global average pooling as
    densenet's and mobilenet_v2's one read per channel, and ``F.adaptive_max_pool2d`` was no pooling at all.
    Each counts as its module does now, at any batch size."""
    for batch in (1, 3):
        rows = {functions: [(r["category"], r["elementwise_ops"]) for r in
                            node_rows(describe_module(_Pools(functions), "pools", 32), batch_size=batch)
                            if r["category"] == "pool" or "pool" in r["kind"]]
                for functions in (False, True)}
        assert rows[True] == rows[False] and len(rows[True]) == 4, rows
        # the max pooling reads its 3 x 3 window for each of its 15 x 15 outputs, the global one all 4 inputs
        assert rows[True][0] == ("pool", batch * 8 * 15 * 15 * 9) and rows[True][3] == ("pool", batch * 8 * 2 * 2)


class _GlobalPool(torch.nn.Module):
    """A global average pooling as a module, or as mnasnet's and shufflenet_v2's ``x.mean([2, 3])``."""

    def __init__(self, mean: bool) -> None:
        super().__init__()
        self.mean = mean
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(x))
        return self.fc(x.mean([2, 3]) if self.mean else torch.flatten(self.pool(x), 1))


def test_a_mean_over_the_spatial_dimensions_is_a_global_pooling_that_reads_its_whole_input() -> None:
    """Until NODE_ROWS_VERSION 9 mnasnet's and shufflenet_v2's ``x.mean([2, 3])`` was a reshape: no work,
    no output of its own. It reads every input element, as ``AdaptiveAvgPool2d(1)`` does, writes a tensor
    and keeps nothing for backward, which needs the input's shape alone."""
    from tracker.describe.features import kept_bytes, live_bytes
    for batch in (1, 3):
        descs = {mean: describe_module(_GlobalPool(mean), "pool", 16) for mean in (False, True)}
        rows = {mean: [(r["category"], r["elementwise_ops"], r["activation_out_bytes"])
                       for r in node_rows(d, batch_size=batch) if r["category"] == "pool"] for mean, d in descs.items()}
        assert rows[True] == rows[False] == [("pool", batch * 8 * 16 * 16, batch * 8 * 4)], rows
        aggs = {mean: aggregates(d, batch) for mean, d in descs.items()}
        for key in ("functional_layers", "elementwise_ops", "flops"):
            assert aggs[True][key] == aggs[False][key], key
        # the relu's output, kept by the relu and read by the pooling, is kept once either way
        assert sum(kept_bytes(descs[True], batch).values()) == sum(kept_bytes(descs[False], batch).values())
        # the mean's output is memory of its own, as the pooling module's is (a reshape's was none)
        at = {mean: live_bytes(d, batch)[next(n.name for n in d.nodes if n.kind in ("mean", "AdaptiveAvgPool2d"))]
              for mean, d in descs.items()}
        assert at[True] == at[False], at
    mnas = [r for r in node_rows(describe("mnasnet0_5", 224), batch_size=2) if r["kind"] == "mean"]
    assert [(r["category"], r["elementwise_ops"]) for r in mnas] == [("pool", 2 * 1280 * 7 * 7)]


class _Resample(torch.nn.Module):
    """A convolution's output resampled three ways: bilinear up, area down (an adaptive average pooling)
    and ``nn.Upsample``'s nearest up, as segmentation networks bring their logits to the image's size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.up = torch.nn.Upsample(scale_factor=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional
        x = f.interpolate(self.conv(x), scale_factor=2, mode="bilinear")  # (N, 4, 16, 16) from (N, 4, 8, 8)
        return self.up(f.interpolate(x, size=(8, 8), mode="area"))  # (N, 4, 8, 8), then (N, 4, 16, 16)


def test_a_resampling_is_element_wise_work_that_reads_its_modes_taps_and_writes_a_tensor() -> None:
    """Until NODE_ROWS_VERSION 9 ``F.interpolate`` and ``nn.Upsample`` (a segmentation network's logits
    brought to the image's size, its largest tensor) were "other": no work, and no memory of their own in
    the live bytes. Each is element-wise work now: bilinear reads 4 input elements per element it writes,
    nearest 1, area every input once; its output is a tensor of its own, and backward keeps nothing of it."""
    from tracker.describe.features import kept_bytes, live_bytes

    desc = describe_module(_Resample(), "resample", 16)
    for batch in (1, 3):
        rows = [r for r in node_rows(desc, batch_size=batch) if r["kind"] in ("interpolate", "Upsample")]
        out = batch * 4 * 16 * 16
        assert [(r["category"], r["elementwise_ops"]) for r in rows] == [
            ("elementwise", out * 4), ("elementwise", out), ("elementwise", out)], rows
        live, kept = live_bytes(desc, batch), kept_bytes(desc, batch)
        names = [n.name for n in desc.nodes if n.kind in ("Conv2d", "interpolate", "Upsample")]
        conv, up, area, nearest = (live[name] for name in names)
        # each writes its own tensor beside the one it reads: the bilinear one's 16 x 16 beside the conv's 8 x 8
        assert up >= 4 * (out + out // 4) and nearest >= 4 * (out + out // 4), (conv, up, area, nearest)
        assert all(kept[name] == 0 for name in names[1:])
    seg = [r for r in node_rows(describe("lraspp_mobilenet_v3_large", 64), batch_size=2) if r["kind"] == "interpolate"]
    assert seg[-1]["out_shape"] == "2x21x64x64" and seg[-1]["elementwise_ops"] == 2 * 21 * 64 * 64 * 4, seg[-1]


class _FunctionalParts(torch.nn.Module):
    """What a network of one's own writes as functions: a convolution with its stride, padding,
    dilation and groups all by position (depthwise), a transposed convolution in groups, scaled
    dot-product attention, and an einsum of a tensor with itself."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(16, 3, 3, 3))
        self.wd = torch.nn.Parameter(torch.randn(16, 1, 3, 3))
        self.wt = torch.nn.Parameter(torch.randn(16, 4, 4, 4))  # 16 -> 8 channels in 2 groups
        self.qkv = torch.nn.Linear(64, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional
        x = f.conv2d(f.conv2d(x, self.w1, None, 2, 1), self.wd, None, 1, 1, 1, 16)
        x = f.avg_pool2d(f.conv_transpose2d(x, self.wt, None, 2, 1, 0, 2), 4)  # (N, 8, 8, 8)
        q, k, v = self.qkv(x.flatten(2)).unsqueeze(1).chunk(3, dim=-1)  # (N, 1, 8, 16) each
        a = f.scaled_dot_product_attention(q, k, v)
        return torch.einsum("b h l d, b h s d -> b h l s", a, a)


def test_functions_count_their_work_and_name_their_arguments() -> None:
    """Since 0.8.4: a functional convolution's arguments given by position are named as a Conv
    module's (a depthwise one is told depthwise, its stride read), and a transposed convolution,
    scaled dot-product attention and a two-operand einsum called as functions count their MACs
    (0 before): the whole network's FLOPs are torch's FLOP counter's, its attention on the math
    path (the counter counts no CPU flash kernel). Each writes a tensor of its own and keeps for
    backward what autograd keeps (attention: query, key, value, output and logsumexp)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model = _FunctionalParts()
    desc = describe_module(model, "parts", 32)
    for batch in (1, 3):
        rows = {r["kind"]: r for r in node_rows(desc, batch_size=batch) if r["macs"]}
        assert set(rows) == {"conv2d", "conv_transpose2d", "Linear", "scaled_dot_product_attention", "einsum"}
        with sdpa_kernel(SDPBackend.MATH):
            assert 2 * sum(r["macs"] for r in node_rows(desc, batch_size=batch)) == torch_flops(
                model, torch.randn(batch, 3, 32, 32))
        assert rows["scaled_dot_product_attention"]["macs"] == batch * 8 * 8 * (16 + 16)
        assert rows["einsum"]["macs"] == batch * 8 * 8 * 16
    convs = [(r["category"], r["stride_h"], r["padding"], r["dilation"], r["groups"]) for r in node_rows(desc)
             if r["kind"] == "conv2d"]
    assert convs == [("conv", 2, 1, 1, 1), ("dwconv", 1, 1, 1, 16)]
    x = torch.randn(2, 3, 32, 32)
    agg = aggregates(desc, batch_size=2)
    assert agg["kept_activation_bytes"] == _autograd_saved_bytes(model, x)
    # at the transposed convolution: the network's input, its own input (the first convolution's
    # output freed once the depthwise one read it) and its output
    assert agg["live_activation_bytes"] == 4 * (2 * 3 * 32 * 32 + 2 * 16 * 16 * 16 + 2 * 8 * 32 * 32)
    assert agg["live_activation_bytes"] <= _forward_allocated_bytes(model.eval(), x)
    maxvit = build_model("maxvit_t")  # its attention's two einsums keep their operands (7.1 % under before)
    kept = aggregates(describe_module(maxvit, "maxvit_t", 224), 1)["kept_activation_bytes"]
    assert abs(kept / _autograd_saved_bytes(maxvit, torch.randn(1, 3, 224, 224)) - 1) < 0.01


class _MatrixProducts(torch.nn.Module):
    """Matrix products as other people's code writes them: GPT-2's ``Conv1D`` (``torch.addmm`` of
    its bias and the product), a ``baddbmm`` as BLOOM's attention scores, and an einsum of three
    operands (two products, left to right)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(48, 96))
        self.b = torch.nn.Parameter(torch.randn(96))
        self.proj = torch.nn.Parameter(torch.randn(32, 12))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (N, 3, 16, 16)
        h = x.flatten(2).transpose(1, 2).reshape(-1, 16, 48)  # (N, 16, 48)
        y = torch.addmm(self.b, h.reshape(-1, 48), self.w).view(-1, 16, 96)
        q, k = y[..., :32], y[..., 32:64]
        scores = torch.baddbmm(torch.zeros(1, 1, 16), q, k.transpose(1, 2), beta=0.0, alpha=0.125)  # (N, 16, 16)
        return torch.einsum("nij,njc,cd->nid", scores.softmax(-1), q, self.proj)


def test_matrix_products_of_other_forms_count_their_work() -> None:
    """Since 0.8.5: ``addmm`` and ``baddbmm`` count as matrix products of their second and third
    tensors (their first is added), and an einsum of three operands as its two products; they
    were uncounted (0 MACs, nothing kept) before. FLOPs equal torch's FLOP counter's, kept bytes
    what autograd saves, to the byte: the matrices, and what the einsum's first product made."""
    model = _MatrixProducts()
    desc = describe_module(model, "products", 16)
    for batch in (1, 3):
        rows = {r["kind"]: r for r in node_rows(desc, batch_size=batch) if r["macs"]}
        assert set(rows) == {"addmm", "baddbmm", "einsum"}
        assert rows["addmm"]["category"] == rows["baddbmm"]["category"] == "linear"
        assert rows["addmm"]["macs"] == batch * 16 * 48 * 96
        assert rows["baddbmm"]["macs"] == batch * 16 * 16 * 32
        assert rows["einsum"]["macs"] == batch * (16 * 16 * 32 + 16 * 32 * 12)
        assert 2 * sum(r["macs"] for r in node_rows(desc, batch_size=batch)) == torch_flops(
            model, torch.randn(batch, 3, 16, 16))
    x = torch.randn(2, 3, 16, 16)
    assert aggregates(desc, batch_size=2)["kept_activation_bytes"] == _autograd_saved_bytes(model, x)
    # a product that sums no index is element-wise or outer: no MACs, as the counter counts a mul
    assert graph.einsum_steps("bn,bn->bn", [[2, 5], [2, 5]]) == [(0, 10)]
    assert graph.einsum_steps("ij,jk", [[2, 3], [3, 4]]) == [(24, 8)]  # implicit output "ik"
    assert graph.einsum_steps("...ij,jk", [[2, 3], [3, 4]]) is None


def test_a_padding_given_as_same_or_valid_is_read() -> None:
    """torch's padding="same" and "valid" (a Conv module's, or a function's by position) made the
    node rows raise (int("same")) before 0.8.4: a network of one's own with them could not be described."""

    class Same(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Conv2d(3, 8, 5, padding="same")
            self.b = torch.nn.Conv2d(8, 8, 3, padding="valid", dilation=2)
            self.w = torch.nn.Parameter(torch.randn(4, 8, 3, 3))
            self.wd = torch.nn.Parameter(torch.randn(8, 1, 3, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.b(torch.relu(self.a(x)))
            x = torch.nn.functional.conv2d(x, weight=self.wd, padding="same", groups=8)  # depthwise, its weight by keyword
            return torch.nn.functional.conv2d(x, self.w, None, 1, "same", 3)

    model = Same()
    desc = describe_module(model, "same", 16)
    rows = [r for r in node_rows(desc, batch_size=2) if r["category"] in ("conv", "dwconv")]
    assert [(r["category"], r["padding"], r["dilation"], r["out_shape"]) for r in rows] == [
        ("conv", 2, 1, "2x8x16x16"), ("conv", 0, 2, "2x8x12x12"), ("dwconv", 1, 1, "2x8x12x12"), ("conv", 3, 3, "2x4x12x12")]
    assert aggregates(desc, 2)["flops"] == torch_flops(model, torch.randn(2, 3, 16, 16))


class _Upsampling(torch.nn.Module):
    """A decoder's parts: transposed convolutions (2-D, and 1-D in groups) and a bilinear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.up = torch.nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1)
        self.up1 = torch.nn.ConvTranspose1d(8, 4, 3, groups=2)
        self.bilinear = torch.nn.Bilinear(4, 4, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.up1(self.up(torch.relu(self.conv(x))).flatten(2)[:, :, :100])  # (N, 4, 102)
        return self.bilinear(y.transpose(1, 2), y.transpose(1, 2))


def test_transposed_convolutions_and_bilinear_layers_are_counted() -> None:
    """Kept whole and left out before (a note said so): transposed convolutions now count as torch's
    FLOP counter counts them, a bilinear layer out x in1 x in2 at each position (torch counts none)."""
    model, x = _Upsampling(), torch.randn(1, 3, 32, 32)
    for branchy in (False, True):  # through fx, and through hooks
        desc = describe_module(model, "up", 32) if not branchy else trace_hooks(model, "up", [1, 3, 32, 32])
        rows = {r["kind"]: r["macs"] for r in node_rows(desc, batch_size=2)}
        assert rows["Conv2d"] + rows["ConvTranspose2d"] + rows["ConvTranspose1d"] == torch_flops(model, x.repeat(2, 1, 1, 1)) // 2
        assert rows["Bilinear"] == 2 * 102 * 6 * 4 * 4 and not [n for n in desc.notes if "leave out" in n], desc.notes
    # each writes a tensor of its own, and keeps its input (a bilinear layer both) for backward
    agg = aggregates(describe_module(model, "up", 32), batch_size=2)
    assert abs(agg["kept_activation_bytes"] / _autograd_saved_bytes(model, x.repeat(2, 1, 1, 1)) - 1) < 0.02
    assert agg["live_activation_bytes"] <= _forward_allocated_bytes(model.eval(), x.repeat(2, 1, 1, 1))
    # at the transposed convolution: the network's input, its own input and its output
    assert agg["live_activation_bytes"] == 2 * 4 * (3 * 32 * 32 + 16 * 32 * 32 + 8 * 64 * 64)
    prelu = describe_module(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.PReLU()), "p", 16)
    assert prelu.notes == ["flops and macs leave out the work of 1 PReLU (modules kept whole, of a kind not counted)"]


def test_layers_are_timed_whole_where_describe_keeps_them_whole_with_the_keywords_they_were_called_with() -> None:
    """`tracker profile layers` hooked leaf modules only: attention computes with its output
    projection's weights without calling it, and a transformer layer's fast path in inference
    calls none of its parts, so their work had no layer at all. Now the layers are describe's
    (``hooked_modules``): each kept whole, called alone as the network called it (attention's
    need_weights=False too), matching the fx description's modules by name."""
    from tracker.profile.network import NetworkSpec, capture_layers

    model = _Sequences()
    spec = NetworkSpec("seq", batch_size=2, input_size=0, input_shape=(20, 64))
    calls = capture_layers(model, spec)
    assert [(c.name, c.op_type) for c in calls] == [
        ("attn", "MultiheadAttention"), ("layer", "TransformerEncoderLayer"), ("gru", "GRU"), ("lstm", "LSTM"),
        ("rnn", "RNN")]
    assert calls[0].kwargs == {"need_weights": False} and calls[0].output_shape == "2x20x64"
    with torch.inference_mode():
        attention, weights = calls[0].run()
        assert weights is None and torch.allclose(attention, calls[1].inputs[0], atol=1e-6)  # as the network called it
        assert torch.allclose(calls[1].run(), calls[2].inputs[0], atol=1e-6)
    described = {r["target"] for r in node_rows(describe_module(_Sequences(), "seq", input_shape=(20, 64)))}
    assert {c.name for c in calls} <= described


def test_a_network_described_in_this_process_is_read_back_not_described_again(monkeypatch: pytest.MonkeyPatch,
                                                                                 tmp_path: Path) -> None:
    """``described`` (what planning a measurement and ``tracker predict`` use) describes a network
    once a process: again, it reads back the description's logged JSON, a Description of its own
    whose rows are a fresh description's; another input size is another description."""
    import tracker.describe as describing
    from tracker.zoo import resolve

    monkeypatch.setenv("TRACKER_CACHE_DIR", str(tmp_path))  # nothing described on disk before
    ref = resolve("mobilenet_v3_small")
    first = describing.described(ref, 72)
    built, original = [], describing.describe_ref
    monkeypatch.setattr(describing, "describe_ref", lambda *args: built.append(args) or original(*args))
    again = describing.described(ref, 72)
    assert built == [] and again is not first and again.nodes is not first.nodes
    fresh = original(ref, 72)
    assert again.description_hash == fresh.description_hash and node_rows(again, 3) == node_rows(fresh, 3)
    assert aggregates(again, 3) == aggregates(fresh, 3) and again.notes == fresh.notes
    describing.described(ref, 80)  # another size: described, not read back
    assert [args[1] for args in built] == [80]


#: Run in a new process: what ``tracker predict`` does before it predicts, and which of torch and
#: torchvision that imported.
DESCRIBE_IN_A_NEW_PROCESS = """
import json, sys
from tracker.describe import described
from tracker.errors import UnknownModelError
from tracker.zoo import resolve
out = {}
for ref, size in json.loads(sys.argv[1]):
    d = described(resolve(ref), size)
    out[ref + "@" + str(size)] = [d.description_hash, len(d.nodes)]
try:
    resolve("mobilenet_v3_smal")
except UnknownModelError as exc:
    out["unknown"] = str(exc)
out["imported"] = sorted(m for m in ("torch", "torchvision") if m in sys.modules)
print(json.dumps(out))
"""


def test_a_new_process_reads_a_network_described_before_from_disk_without_torch(tmp_path: Path) -> None:
    """tracker's cache keeps torchvision's names and each description (a zoo name, a spec's
    content, at an input size): a second process checks the names and describes the same networks
    without importing torch, to the same hashes; a description cached wrong is described anew; a
    network of one's own runs its code each time, never cached."""
    import os
    import subprocess
    import sys

    from tracker.zoo.generator import generate

    spec = tmp_path / "gen.json"
    spec.write_text(json.dumps(generate(1, seed=3, input_size=64)[0]))
    own = tmp_path / "tiny.py"
    own.write_text("import torch\nINPUT_SIZE = 32\n\ndef net():\n    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())\n")
    env = {**os.environ, "TRACKER_CACHE_DIR": str(tmp_path / "cache")}

    def describe(*refs: tuple[str, int]) -> dict:
        out = subprocess.run([sys.executable, "-c", DESCRIBE_IN_A_NEW_PROCESS, json.dumps(refs)], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout)

    refs = [("mobilenet_v3_small", 64), (str(spec), 64)]
    first = describe(*refs)
    assert first["imported"] == ["torch", "torchvision"] and "did you mean mobilenet_v3_small" in first["unknown"]
    entries = sorted((tmp_path / "cache" / "descriptions").iterdir())
    assert len(entries) == 2
    again = describe(*refs)
    assert again == {**first, "imported": []}  # the same hashes and rows, and neither torch nor torchvision
    # a size not described before is described (and kept); an entry that is not a description is described anew
    entries[0].write_text('{"not": "a description"}')
    mended = describe(*refs, ("mobilenet_v3_small", 72))
    assert {k: v for k, v in mended.items() if "@72" not in k} == first and mended["mobilenet_v3_small@72"][1] > 10
    assert len(list((tmp_path / "cache" / "descriptions").iterdir())) == 3
    # a network of one's own: described each time, never kept
    assert "torch" in describe((f"{own}:net", 32))["imported"]
    assert len(list((tmp_path / "cache" / "descriptions").iterdir())) == 3


def test_the_cache_keeps_its_newest_entries_and_a_cache_that_cannot_be_written_is_only_slower(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from tracker import cache

    monkeypatch.setenv("TRACKER_CACHE_DIR", str(tmp_path / "cache"))
    for i in range(8):
        cache.write_json(f"d/{i}.json", {"i": i}, keep=8)
        os.utime(tmp_path / "cache" / "d" / f"{i}.json", (1_000_000 + i, 1_000_000 + i))  # written in turn
    assert len(list((tmp_path / "cache" / "d").iterdir())) == 8
    assert cache.read_json("d/1.json") == {"i": 1}  # read: used lately, whenever it was written
    cache.write_json("d/8.json", {"i": 8}, keep=8)  # nine past eight: down to six, the three used least lately go
    assert sorted(int(p.stem) for p in (tmp_path / "cache" / "d").iterdir()) == [1, 4, 5, 6, 7, 8]
    assert cache.read_json("d/8.json") == {"i": 8} and cache.read_json("d/0.json") is None
    folder = tmp_path / "cache" / "d"
    left, writing = folder / ".3.json.4242.new", folder / ".9.json.4343.new"  # a killed writer's, a live one's
    left.write_text('{"i"'), writing.write_text('{"i": 9')
    os.utime(left, (1_000_000, 1_000_000))
    cache.write_json("d/9.json", {"i": 9}, keep=8)  # under its limit: a partial file a killed writer left goes
    assert not left.exists() and writing.exists() and len(list(folder.glob("*.json"))) == 7
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("TRACKER_CACHE_DIR", str(tmp_path / "file"))
    cache.write_json("d/1.json", {"i": 1}, keep=8)  # says nothing, raises nothing
    assert cache.read_json("d/1.json") is None


def test_tracker_describe_reads_a_network_described_before_without_torch(tmp_path: Path) -> None:
    """`tracker describe` goes through tracker's cache as predict does (since 0.9.10: it built and
    traced the network each time, about 2 s of torch's import): a second process says the same
    without importing torch."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRACKER_CACHE_DIR": str(tmp_path / "cache")}
    code = ("import json, runpy, sys\nsys.argv = ['tracker', 'describe', 'squeezenet1_1', '--input-size', '64', "
            "'--format', 'json']\ntry:\n    runpy.run_module('tracker', run_name='__main__')\n"
            "except SystemExit:\n    pass\nprint(json.dumps('torch' in sys.modules), file=sys.stderr)")

    def describe_once() -> tuple[dict, bool]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout), json.loads(out.stderr.strip().splitlines()[-1])

    (first, imported), (again, imported_again) = describe_once(), describe_once()
    assert imported and not imported_again
    assert again == first and first["model"] == "squeezenet1_1" and first["input_size"] == 64 and first["flops"] > 0


class _CountedOtherwise(torch.nn.Module):
    """What node rows versions 5 to 9 each began to count otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3, 3, 3))
        self.scale = torch.nn.Parameter(torch.ones(4, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional
        x = f.conv2d(x, self.weight, padding=1) * self.scale  # a function's MACs (5), a parameter read by a product (7)
        x = f.max_pool2d(x, 2)  # its window given by position, read as one until 8
        return f.interpolate(x, scale_factor=2).mean([2, 3])  # element-wise and pooling since 9


def test_what_each_node_rows_version_counts_otherwise_is_named_by_kind() -> None:
    """A fingerprint learnt from an earlier node rows version saw the features of networks with these kinds
    otherwise (tracker predict says so, and to retrain): each kind with the version that counts it as now."""
    from tracker.describe.features import NODE_ROWS_VERSION, ROWS_VERSION_SINCE, counted_otherwise

    desc = describe_module(_CountedOtherwise(), "otherwise", 16)
    assert counted_otherwise(desc, 4) == {"conv2d": 5, "mul reading a parameter": 7, "max_pool2d": 8,
                                          "interpolate": 9, "mean": 9}
    assert counted_otherwise(desc, None) == counted_otherwise(desc, 4)  # no attention of its own (4)
    assert counted_otherwise(desc, 7) == {"max_pool2d": 8, "interpolate": 9, "mean": 9}
    assert counted_otherwise(desc, 8) == {"interpolate": 9, "mean": 9}
    assert counted_otherwise(desc, NODE_ROWS_VERSION) == {} and max(ROWS_VERSION_SINCE) == NODE_ROWS_VERSION
    # torchvision's: mnasnet's mean, densenet's F.adaptive_avg_pool2d(x, (1, 1)), convnext's layer scale
    assert counted_otherwise(describe("mnasnet0_5", 224), 8) == {"mean": 9}
    assert counted_otherwise(describe("densenet121", 224), 7) == {"adaptive_avg_pool2d": 8}
    assert counted_otherwise(describe("densenet121", 224), 8) == {}
    assert counted_otherwise(describe("convnext_tiny", 224), 6) == {"mul reading a parameter": 7}
    assert counted_otherwise(describe("resnet18", 224), None) == {}
