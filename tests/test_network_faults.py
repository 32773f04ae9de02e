"""Networks and specs written by hand, as a newcomer writes them: what their code prints, the
keys their specs lack, what tracker cannot read of them, each said in one line, and what they
hold counted once and whole."""

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from tracker.cli.app import app
from tracker.errors import ConfigError

runner = CliRunner()

#: a network whose forward prints, without ending its line
PRINTS = '''import torch.nn as nn
INPUT_SIZE = 32
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.d = nn.Conv2d(4, 4, 3, padding=1)
    def forward(self, x):
        print("shape", x.shape, end="")
        return self.d(self.c(x)).mean((2, 3))
'''


def _cli(store: Path, *args: str):  # noqa: ANN202
    return runner.invoke(app, ["--tracking-uri", str(store), *args])


def test_what_a_networks_forward_prints_keeps_out_of_the_json(tmp_path: Path) -> None:
    net = tmp_path / "prints.py"
    net.write_text(PRINTS)
    described = _cli(tmp_path / "s", "describe", f"{net}:Net", "--format", "json")
    assert described.exit_code == 0, described.output
    assert json.loads(described.stdout)["model"] == "prints.Net"  # "shape Proxy(getattr_1)" came before it
    assert "shape" in described.stderr
    pruned = _cli(tmp_path / "s", "zoo", "prune", f"{net}:Net", "--ratios", "50", "--out", str(tmp_path / "p"),
                  "--format", "json")
    assert pruned.exit_code == 0, pruned.output
    json.loads(pruned.stdout)
    measured = _cli(tmp_path / "s", "profile", "network", f"{net}:Net", "-b", "1", "--format", "json")
    assert measured.exit_code == 0, measured.output  # the print ran into the child's result line, which was lost
    assert json.loads(measured.stdout)["status"] == "FINISHED"


GOOD = "import torch.nn as nn\nINPUT_SIZE = 32\ndef Net():\n    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 4, 3))\n"


def _module_spec(folder: Path) -> dict:
    (folder / "good.py").write_text(GOOD)
    return {"format": "tracker.netspec/1", "kind": "module", "name": "good.Net", "callable": "Net",
            "file": str(folder / "good.py"), "source": GOOD, "input_size": 32}


def test_a_hand_edited_spec_of_a_network_of_ones_own_is_refused_in_one_line(tmp_path: Path) -> None:
    good = _module_spec(tmp_path)
    pruned = {"format": "tracker.netspec/1", "kind": "pruned", "name": "good.Net-p50-l1-s0", "base": "good.Net",
              "ratio": 0.5, "method": "l1", "seed": 0, "widths": {"0": 4, "1": 4}, "input_size": 32, "base_spec": good}
    without = lambda spec, key: {k: v for k, v in spec.items() if k != key}  # noqa: E731
    cases = {
        "nofile": (without(good, "file"), "network spec of kind 'module' has no 'file'"),
        "nocallable": (without(good, "callable"), "network spec of kind 'module' has no 'callable'"),
        "nosource": (without(good, "source"), "network spec of kind 'module' has no 'source'"),
        "argsonly": ({**good, "args": 5}, "spec key 'args' without 'kwargs'"),
        "argsint": ({**good, "args": 5, "kwargs": {}}, "spec key 'args' must be a list"),
        "bslist": ({**pruned, "base_spec": [1]}, "spec key 'base_spec' must be the spec of the network pruned"),
        "bsname": ({**pruned, "base_spec": "resnet18"}, "spec key 'base_spec' must be the spec of the network pruned"),
        "bsnocallable": ({**pruned, "base_spec": without(good, "callable")},
                         "base_spec: network spec of kind 'module' has no 'callable'"),
    }
    for name, (spec, said) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(spec))
        result = _cli(tmp_path / "s", "describe", str(path))  # the library's error, which the CLI's entry says in one line
        assert isinstance(result.exception, ConfigError), (name, result.exception)
        assert said in str(result.exception) and str(path) in str(result.exception), (name, result.exception)
        assert "\n" not in str(result.exception)
    path = tmp_path / "pruned.json"
    path.write_text(json.dumps(pruned))
    assert _cli(tmp_path / "s", "describe", str(path)).exit_code == 0  # as written, it is read


BAD_LINEAR = '''import torch.nn as nn
INPUT_SIZE = 32
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(100, 10)
    def forward(self, x):
        return self.fc(self.c(x).flatten(1))
class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
    def forward(self, x):
        if x.sum() > 0:
            return self.c(x)
        return x
'''


def test_a_network_prune_cannot_run_or_trace_is_one_line_naming_it(tmp_path: Path) -> None:
    net = tmp_path / "badlin.py"
    net.write_text(BAD_LINEAR)
    cases = {"Net": "badlin.Net does not run on a 1x3x32x32 input: RuntimeError: mat1 and mat2 shapes cannot be "
                    "multiplied (1x8192 and 100x10)",  # six lines of torch.fx's, naming the class Net, until 0.9.8
             "Branchy": "badlin.Branchy cannot be traced by torch.fx, so it cannot be pruned: TraceError: "}
    for name, said in cases.items():
        result = _cli(tmp_path / "s", "zoo", "prune", f"{net}:{name}", "--ratios", "50", "--out", str(tmp_path / "p"))
        assert isinstance(result.exception, ConfigError), result.exception
        assert str(result.exception).startswith(said) and "\n" not in str(result.exception), str(result.exception)


def _tied_networks() -> dict:
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Tied(nn.Module):  # a language model's head tied to its embedding
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(1000, 64)
            self.head = nn.Linear(64, 1000, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.emb(x))

    class Branchy(Tied):  # the same, that torch.fx cannot trace: hooks describe it
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.emb(x)
            return self.head(y) if y.sum() != 0 else y

    class Again(nn.Module):  # a convolution's weight given to F.conv2d too
        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Conv2d(3, 3, 3, padding=1, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.conv2d(self.c(x), self.c.weight, padding=1)

    class Twice(nn.Module):  # a module called twice: its work twice, its weights once
        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Conv2d(3, 3, 3, padding=1, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c(self.c(x))

    return {"tied": Tied(), "branchy": Branchy(), "again": Again(), "twice": Twice()}


def test_weights_tied_or_used_twice_are_counted_once() -> None:
    from tracker.describe.features import aggregates
    from tracker.describe.graph import describe_module

    nets = _tied_networks()
    for name in ("tied", "branchy"):
        desc = describe_module(nets[name], name, input_shape=(16,), input_vocab=1000)
        assert desc.method == ("hooks" if name == "branchy" else "fx")
        feats = aggregates(desc)
        assert feats["params"] == 64_000 and feats["weight_bytes"] == 4 * 64_000, (name, feats)  # 128,000 until 0.9.8
    for name in ("again", "twice"):
        desc = describe_module(nets[name], name, input_size=8)
        feats = aggregates(desc)
        assert feats["params"] == 81, (name, feats)
        assert feats["macs"] == 2 * 81 * 64, (name, feats)  # each call's work counted


def test_parameters_of_modules_never_called_are_said_to_be_left_out() -> None:
    from torch import nn

    from tracker.describe.graph import describe_module

    class Spare(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Conv2d(3, 8, 3, padding=1)
            self.spare = nn.Linear(1000, 1000)  # never called

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.c(x)

    desc = describe_module(Spare(), "spare", input_size=8)
    assert desc.method == "fx" and sum(n.params for n in desc.nodes) == 224
    assert "1,001,000 parameters belong to modules the network never calls: params leaves them out" in desc.notes
    assert describe_module(nn.Conv2d(3, 8, 3), "conv", input_size=8).notes == []  # every one called: no note


def test_input_constants_tracker_cannot_read_or_spec_would_refuse_are_refused_up_front(tmp_path: Path) -> None:
    from tracker.zoo.spec import module_spec

    net = "\ndef Net():\n    return nn.Conv2d(3, 4, 3)\n"
    (tmp_path / "cfg.py").write_text("INPUT_SIZE = 40\n")
    files = {  # each described at 224 without a word until 0.9.8
        "ifsize": ("import torch.nn as nn\nif True:\n    INPUT_SIZE = 40\n", "INPUT_SIZE is set in a way tracker does "
                   "not read (line 3, inside a block): assign it at the top level of the file, INPUT_SIZE = value"),
        "forsize": ("import torch.nn as nn\nfor INPUT_CHANNELS in (1,):\n    pass\n", "INPUT_CHANNELS is set in a way "
                    "tracker does not read (line 2, by a for or with)"),
        "impsize": ("import torch.nn as nn\nfrom cfg import INPUT_SIZE\n", "INPUT_SIZE is set in a way tracker does not "
                    "read (line 2, imported)"),
        # a spec written, then refused by every command ("must be at most 8,192"), until 0.9.8
        "big": ("import torch.nn as nn\nINPUT_SIZE = 8200\n", "INPUT_SIZE should be a whole number of pixels, at most "
                "8,192, got 8200"),
    }
    for name, (head, said) in files.items():
        (tmp_path / f"{name}.py").write_text(head + net)
        try:
            module_spec(f"{tmp_path}/{name}.py:Net")
        except ConfigError as exc:
            assert str(exc).startswith(f"network file {tmp_path}/{name}.py: {said}"), str(exc)
        else:
            raise AssertionError(f"{name}.py was read")
    # under the script's guard, or inside a function, it is not the file's: read as it is
    (tmp_path / "guarded.py").write_text("import torch.nn as nn\nINPUT_SIZE = 40\nif __name__ == '__main__':\n"
                                         "    INPUT_SIZE = 64\ndef f():\n    INPUT_SIZE = 8\n" + net)
    assert module_spec(f"{tmp_path}/guarded.py:Net")["input_size"] == 40


def test_a_network_that_ends_the_process_or_raises_a_base_exception_as_it_is_built_is_one_line(tmp_path: Path) -> None:
    import os

    real = os._exit
    (tmp_path / "ends.py").write_text("import os\nimport torch.nn as nn\nINPUT_SIZE = 32\ndef Net():\n    os._exit(0)\n")
    (tmp_path / "base.py").write_text("INPUT_SIZE = 32\nclass Stop(BaseException):\n    pass\n"
                                      "def Net():\n    raise Stop('custom base')\n")
    # in a process of its own: it ended tracker, saying nothing, with status 0
    ends = subprocess.run([sys.executable, "-m", "tracker", "--tracking-uri", str(tmp_path / "s"), "describe",
                           f"{tmp_path}/ends.py:Net"], capture_output=True, text=True, timeout=300)
    assert ends.returncode == 1 and ends.stderr.startswith("error: ends.py:Net exited (os._exit(0)) instead of building "
                                                           "the network") and ends.stderr.count("\n") == 1, ends.stderr
    result = _cli(tmp_path / "s", "describe", f"{tmp_path}/base.py:Net")  # a traceback until 0.9.8
    assert isinstance(result.exception, ConfigError), result.exception
    assert str(result.exception) == "base.py:Net could not build the network: Stop: custom base"
    ended = _cli(tmp_path / "s", "describe", f"{tmp_path}/ends.py:Net")
    assert isinstance(ended.exception, ConfigError) and os._exit is real  # given back once the network is built
    # a child it forks as it is built (a multiprocessing worker) still ends with os._exit, as it must: refused
    # there too, it ran on into tracker's own code (its thread id is the caller's)
    (tmp_path / "forks.py").write_text(
        "import multiprocessing as mp\nimport torch.nn as nn\nINPUT_SIZE = 32\n"
        "def _width(q):\n    q.put(4)\n"
        "def Net():\n    ctx = mp.get_context('fork')\n    q = ctx.Queue()\n"
        "    p = ctx.Process(target=_width, args=(q,))\n    p.start()\n    width = q.get(timeout=60)\n    p.join(60)\n"
        "    assert p.exitcode == 0, p.exitcode\n    return nn.Conv2d(3, width, 3)\n")
    forks = subprocess.run([sys.executable, "-m", "tracker", "--tracking-uri", str(tmp_path / "s"), "describe",
                            f"{tmp_path}/forks.py:Net", "--format", "json"], capture_output=True, text=True, timeout=300)
    assert forks.returncode == 0 and "exited" not in forks.stderr, forks.stderr
    assert json.loads(forks.stdout)["params"] == 3 * 4 * 9 + 4


def test_a_generated_spec_with_keys_it_does_not_build_is_refused_and_its_in_channels_built(tmp_path: Path) -> None:
    from tracker.describe import describe_ref
    from tracker.zoo.generator import generate_spec
    from tracker.zoo.spec import resolve

    spec = generate_spec(1, 0, input_size=32)
    cases = {  # each passed over without a word until 0.9.8
        "top": ({**spec, "num_classs": 10}, "unknown spec key(s) num_classs (a generated network's spec takes "),
        "stem": ({**spec, "stem": {**spec["stem"], "groups": 2}}, "spec key 'stem': unknown key(s) groups"),
        "head": ({**spec, "head": {**spec["head"], "activation": "relu"}}, "spec key 'head': unknown key(s) activation"),
    }
    for name, (bad, said) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        result = _cli(tmp_path / "s", "describe", str(path))
        assert isinstance(result.exception, ConfigError), (name, result.exception)
        assert str(result.exception).startswith(f"{path}: {said}"), str(result.exception)
    grey = tmp_path / "grey.json"  # its stem was built for 3 channels: "expected input to have 3 channels"
    grey.write_text(json.dumps({**spec, "in_channels": 1}))
    desc = describe_ref(resolve(str(grey)), 32)
    assert desc.input_shape == [1, 1, 32, 32] and desc.nodes[1].attrs["in_channels"] == 1


def test_a_spec_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    result = _cli(tmp_path / "s", "describe", str(deep))  # a RecursionError's traceback until 0.9.8
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == f"{deep} is not a network spec: JSON nested too deeply to read"
    latin = tmp_path / "latin.json"  # said in Python's codec's words until 0.9.15
    latin.write_bytes(b'{"format": "caf\xe9"}')
    result = _cli(tmp_path / "s", "describe", str(latin))
    assert str(result.exception) == (f"{latin} is not a network spec: not UTF-8 text (byte 15: b'\\xe9'); a spec is "
                                     "JSON, UTF-8 text")
    long = tmp_path / "long.json"  # a number json will not convert: a ValueError's traceback until 0.9.14
    long.write_text('{"format": "tracker.netspec/1", "index": 1' + "0" * 5000 + "}")
    result = _cli(tmp_path / "s", "describe", str(long))
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == (f"{long} is not a network spec: a whole number of more than 4,300 digits "
                                     "(more than Python reads)")


def test_a_network_given_too_little_memory_to_be_described_says_so(tmp_path: Path) -> None:
    net = tmp_path / "greedy.py"
    net.write_text("import torch\nimport torch.nn as nn\nINPUT_SIZE = 32\nclass Net(nn.Module):\n"
                   "    def __init__(self):\n        super().__init__()\n        self.c = nn.Conv2d(3, 4, 3)\n"
                   "    def forward(self, x):\n        return self.c(x) + torch.ones(2 ** 60, dtype=torch.uint8).sum()\n")
    result = _cli(tmp_path / "s", "describe", f"{net}:Net")  # "cannot run on a 1x3x32x32 input: RuntimeError: ..."
    assert isinstance(result.exception, ConfigError), result.exception
    assert str(result.exception) == ("network greedy.Net needs more memory than this machine gives to be described at "
                                     f"32 px (an allocation of {2 ** 60:,} bytes failed)"), str(result.exception)


def test_pruning_percentages_that_would_be_named_alike_are_refused() -> None:
    from tracker.zoo.pruning import ratios_from_percentages

    assert ratios_from_percentages([0, 12.5, 0.5], "--ratios") == [0.0, 0.125, 0.005]
    for values, said in (([1e-9], "--ratios: 1e-09 would be named p0, as the unpruned network"),  # p0's file written over
                         ([0, 1e-9], "--ratios: 1e-09 and 0 would both be named p0"),
                         ([12.5, 12.5000000001], "would both be named p12.5"),
                         # a percentage whose ratio is 0.0 (5e-324 / 100): named and written as p0 until 0.9.13
                         ([5e-324], "--ratios: 4.94066e-324 would be named p0, as the unpruned network"),
                         ([0, 5e-324], "--ratios: 4.94066e-324 would be named p0, as the unpruned network")):
        try:
            ratios_from_percentages(values, "--ratios")
        except ConfigError as exc:
            assert said in str(exc), str(exc)
        else:
            raise AssertionError(values)


def test_the_graph_artifact_is_strict_json_where_a_network_has_infinite_constants() -> None:
    """A constant that is no finite number is null in the graph artifact (Infinity and NaN, not JSON, until
    0.9.8; then "inf", a string, until 0.9.13), as in description.json: a description traced and one read back
    from a measured run's description.json give one graph, the hash the one traced."""
    import torch
    from torch import nn

    from tracker.describe.graph import Description, describe_module

    class Clamped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Conv2d(3, 4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c(x).clamp(min=float("-inf"), max=float("inf")) * float("nan")

    desc = describe_module(Clamped(), "clamped", input_size=8)

    def strict(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    graph = json.loads(desc.graph_artifact(), parse_constant=strict)  # Infinity and NaN until 0.9.8
    clamp = next(n for n in graph["nodes"] if n["kind"] == "clamp")
    assert clamp["attrs"] == {"min": None, "max": None} and graph["graph"]["description_hash"] == desc.description_hash
    assert next(n for n in graph["nodes"] if n["kind"] == "mul")["attrs"] == {"arg1": None}, graph["nodes"]
    logged = Description.from_json(json.loads(desc.to_json_text()))  # as a measured run makes its graph.json
    assert json.loads(logged.graph_artifact()) == graph


CLAMPED = '''import torch
from torch import nn


class Clamped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(x).clamp(min=float("-inf"), max=float("inf")) * torch.nan_to_num(x.mean(), nan=float("nan"))
'''


def test_a_description_of_a_network_with_infinite_constants_is_strict_json_of_the_same_hash(tmp_path: Path) -> None:
    """A network of one's own that clamps with float("inf"): its description, as a measured run logs it
    (description/description.json), wrote the constants as Infinity and NaN until 0.9.12, which strict
    JSON readers refuse; they are null, absent, and the description read back has the hash traced."""
    from tracker.describe import described, described_json, describe_ref, spec_json
    from tracker.zoo import resolve

    (tmp_path / "clamped.py").write_text(CLAMPED)
    ref = resolve(f"{tmp_path}/clamped.py:Clamped")
    traced = describe_ref(ref, 8)
    assert {"min": float("-inf"), "max": float("inf")} in [n.attrs for n in traced.nodes]  # what the trace holds

    def strict(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    name, model_hash, text = described_json(ref.name, spec_json(ref.spec), 8)  # the artifact's text
    logged = json.loads(text, parse_constant=strict)
    assert [n["attrs"] for n in logged["nodes"] if n["kind"] == "clamp"] == [{"min": None, "max": None}]
    assert [n["attrs"] for n in logged["nodes"] if n["kind"] == "nan_to_num"] == [{"nan": None}]
    assert model_hash == logged["description_hash"] == traced.description_hash == described(ref, 8).description_hash
