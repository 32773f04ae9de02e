"""A network of your own, ``FILE.py:NAME``: described, measured, campaigned and refused as a zoo
name is, from the file as it was planned; and any network at an input size of your own."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tests.test_cli import in_process
from tracker.cli.app import app
from tracker.errors import ConfigError
from tracker.log.artifacts import downloaded
from tracker.settings import resolve_location

runner = CliRunner()

#: a network of one's own, using a block from a file beside it (its folder is on the import path)
NET = '''"""Two blocks and a head; its width in a dataclass, which looks its module up as it is made."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from blocks import Block

INPUT_SIZE = 32


@dataclass
class Widths:
    first: int = WIDTH


class Net(nn.Module):
    def __init__(self, width: int = Widths().first) -> None:
        super().__init__()
        self.body = nn.Sequential(Block(3, width), Block(width, 2 * width), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(2 * width, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.body(x), 1))


def narrow() -> nn.Module:
    return Net(width=4)


def broken() -> nn.Module:
    raise RuntimeError("no such layer")


def not_a_network() -> int:
    return 3


def two_lines() -> nn.Module:
    raise ValueError("the first line\\nand a second")


try:  # a name bound in a block of the top level is defined there too
    from blocks import Block as Guarded
except ImportError:
    Guarded = None


def fixed() -> nn.Module:  # its head takes INPUT_SIZE pixels square, and no other size
    return nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.Flatten(), nn.Linear(2 * INPUT_SIZE * INPUT_SIZE, 5))
'''
BLOCKS = '''from torch import nn


class Block(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))
'''


def _write(folder: Path, width: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "blocks.py").write_text(BLOCKS)
    path = folder / "mynet.py"
    path.write_text(NET.replace("WIDTH", str(width)))
    return path


def _cli(store: Path, *args: str):  # noqa: ANN202
    return runner.invoke(app, ["--tracking-uri", str(store), *args])


def test_a_network_of_ones_own_is_described_measured_and_kept_with_its_code(tmp_path: Path) -> None:
    net = _write(tmp_path / "models")
    described = json.loads(_cli(tmp_path / "s", "describe", f"{net}:Net", "--format", "json").stdout)
    assert described["model"] == "mynet.Net" and described["input_size"] == 32  # the file's INPUT_SIZE
    import importlib.util

    sys.path.insert(0, str(net.parent))
    try:
        spec = importlib.util.spec_from_file_location("mynet_here", net)
        module = importlib.util.module_from_spec(spec)
        sys.modules["mynet_here"] = module  # as an import does
        spec.loader.exec_module(module)
        params = sum(p.numel() for p in module.Net().parameters())
    finally:
        sys.path.remove(str(net.parent))
        sys.modules.pop("blocks", None)
        sys.modules.pop("mynet_here", None)
    assert described["params"] == params > 0
    narrow = json.loads(_cli(tmp_path / "s", "describe", f"{net}:narrow", "--format", "json").stdout)
    assert narrow["params"] < params and narrow["description_hash"] != described["description_hash"]

    store = tmp_path / "s"
    for phase in ("inference", "training"):  # training: its class scores feed the loss
        out = _cli(store, "profile", "network", f"{net}:Net", "-b", "2", "--phase", phase, "--time-cap", "0.5",
                   "--precision", "0.2", "--format", "json")
        assert out.exit_code == 0, out.output
        run = json.loads(out.stdout)
        assert run["status"] == "FINISHED" and run["model"] == "mynet.Net" and run["latency_ms"] > 0
    client = MlflowClient(resolve_location(str(store)).uri)
    logged = client.get_run(run["run_id"])
    assert logged.data.params["model_hash"] == described["description_hash"]
    assert logged.data.params["input_size"] == "32" and "in_channels" not in logged.data.params  # 3: as always
    with downloaded(client.tracking_uri, run["run_id"], "description/mynet.py") as path:
        assert path.read_text() == net.read_text()  # the code that was measured, with the run
    with downloaded(client.tracking_uri, run["run_id"], "description/blocks.py") as path:
        assert path.read_text() == BLOCKS  # and the module beside it that it imports
    assert logged.data.tags["mlflow.note.content"].endswith(  # the run's description, in the UI
        "A network of your own, mynet.py:Net: its code as measured is the artifact description/mynet.py "
        "(with blocks.py beside it, which it imports).")

    # measured as planned: the file edited since (another width) is another network, measured again
    again = _cli(store, "profile", "network", f"{net}:Net", "-b", "2", "--phase", "training", "--time-cap", "0.5",
                 "--precision", "0.2", "--format", "json")
    assert json.loads(again.stdout)["reused"] is True
    _write(tmp_path / "models", width=6)
    edited = json.loads(_cli(store, "profile", "network", f"{net}:Net", "-b", "2", "--phase", "training",
                             "--time-cap", "0.5", "--precision", "0.2", "--format", "json").stdout)
    assert edited["reused"] is False and edited["run_id"] != run["run_id"]
    assert client.get_run(edited["run_id"]).data.params["model_hash"] != described["description_hash"]


def test_a_campaign_measures_networks_of_ones_own_beside_the_zoos(tmp_path: Path) -> None:
    _write(tmp_path / "models")
    campaign = tmp_path / "own.toml"
    campaign.write_text('[campaign]\nname = "own"\n[networks]\nspecs = ["models/mynet.py:Net", "models/mynet.py:narrow"]\n'
                        "[measure]\nbatch_sizes = [1, 2]\nprecision = 0.2\ntime_cap_s = 0.3\nagain_imprecise = false\n")
    store = tmp_path / "s"
    first = _cli(store, "campaign", "run", str(campaign), "--format", "json")
    assert first.exit_code == 0, first.output
    assert (json.loads(first.stdout)["measured"], json.loads(first.stdout)["failed"]) == (4, 0)
    second = json.loads(_cli(store, "campaign", "run", str(campaign), "--format", "json").stdout)
    assert (second["measured"], second["skipped"]) == (0, 4)  # resumed: nothing measured twice
    runs = json.loads(_cli(store, "-e", "own", "runs", "list", "--kind", "network", "--format", "json").stdout)
    assert sorted({r["name"].split(" ")[0] for r in runs}) == ["mynet.Net", "mynet.narrow"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[networks]\nspecs = ["models/mynet.py:Wide"]\n')
    out = _cli(store, "campaign", "run", str(bad))
    assert isinstance(out.exception, ConfigError) and str(out.exception) == (
        f"{bad}: [networks].specs: network file {tmp_path / 'models' / 'mynet.py'} defines no 'Wide' at its top level")
    bad.write_text('[networks]\nspecs = ["models/mynet.py:"]\n')  # no NAME
    out = _cli(store, "campaign", "run", str(bad))
    assert str(out.exception) == (f"{bad}: [networks].specs: 'models/mynet.py:' is not FILE.py:NAME (a callable of the "
                                  "file that builds the network; FILE.py:NAME(ARGS) calls it with arguments)")
    # one that cannot be built is said before anything is measured, not after the networks before it
    broken = tmp_path / "broken.toml"
    broken.write_text('[campaign]\nname = "broken"\n[networks]\nzoo = ["squeezenet1_1"]\n'
                      'specs = ["models/mynet.py:broken"]\n[measure]\nbatch_sizes = [1]\ntime_cap_s = 0.3\nagain_imprecise = false\n')
    out = _cli(store, "campaign", "run", str(broken))
    assert isinstance(out.exception, ConfigError) and str(out.exception) == (
        "mynet.py:broken could not build the network: RuntimeError: no such layer")
    assert MlflowClient(resolve_location(str(store)).uri).get_experiment_by_name("broken") is None  # not even made


def test_a_network_of_ones_own_is_called_with_the_arguments_given(tmp_path: Path) -> None:
    """FILE.py:NAME(ARGS) (since 0.9.1): a search space's widths without a function per width. The
    arguments are literals, read without running the file, and say the network's name in one
    order whatever the spelling; Net(width=4) is the very network narrow() builds."""
    net = _write(tmp_path / "models")
    store = tmp_path / "s"
    narrow = json.loads(_cli(store, "describe", f"{net}:narrow", "--format", "json").stdout)
    called = json.loads(_cli(store, "describe", f"{net}:Net(width = 4)", "--format", "json").stdout)
    by_position = json.loads(_cli(store, "describe", f"{net}:Net(4)", "--format", "json").stdout)
    assert called["model"] == "mynet.Net(width=4)" and by_position["model"] == "mynet.Net(4)"
    assert called["description_hash"] == by_position["description_hash"] == narrow["description_hash"]
    campaign = tmp_path / "widths.toml"
    campaign.write_text('[campaign]\nname = "widths"\n[networks]\nspecs = ["models/mynet.py:Net(width=2)", '
                        '"models/mynet.py:Net(width=6)"]\n[measure]\nbatch_sizes = [1]\nprecision = 0.2\ntime_cap_s = 0.3\nagain_imprecise = false\n')
    out = _cli(store, "campaign", "run", str(campaign), "--format", "json")
    assert out.exit_code == 0, out.output
    runs = json.loads(_cli(store, "-e", "widths", "runs", "list", "--kind", "network", "--format", "json").stdout)
    assert sorted(r["name"].split(" ")[0] for r in runs) == ["mynet.Net(width=2)", "mynet.Net(width=6)"]
    run = MlflowClient(resolve_location(str(store)).uri).get_run(runs[0]["run_id"])
    assert run.data.tags["mlflow.note.content"].endswith(  # how it was called, in the UI
        f"A network of your own, mynet.py:{runs[0]['name'].split(' ')[0].split('.', 1)[1]}: its code as measured is the "
        "artifact description/mynet.py (with blocks.py beside it, which it imports).")
    from tracker.profile.mapping import parse_mapping  # a mapping's commas inside the arguments are theirs

    mapping = parse_mapping(f"{net}:Net(width=2, depth=3)@2:cpu>cpu,squeezenet1_1:cpu")
    assert [n.model for n in mapping.networks] == [f"{net}:Net(width=2, depth=3)", "squeezenet1_1"]
    for args, says in (("(width=WIDTH)", "should be Python literals"), ("(**widths)", "is not a call's arguments"),
                       ("(height=3)", "could not build the network: TypeError"),
                       # Python refuses a keyword given twice; the last one was taken until 0.9.7
                       ("(width=1, width=2)", "keyword argument 'width' repeated in (width=1, width=2): give it once")):
        out = _cli(store, "describe", f"{net}:Net{args}")
        assert out.exit_code == 1 and isinstance(out.exception, ConfigError) and says in str(out.exception)


def test_a_network_of_ones_own_that_cannot_be_built_is_one_line(tmp_path: Path) -> None:
    net = _write(tmp_path)
    (tmp_path / "syntax.py").write_text("def f(:\n")
    (tmp_path / "size.py").write_text("INPUT_SIZE = 'large'\ndef f():\n    pass\n")
    (tmp_path / "channels.py").write_text("INPUT_CHANNELS = 0\ndef f():\n    pass\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\ndef f():\n    pass\n")
    (tmp_path / "sum.py").write_text("INPUT_SIZE = 2 * 16\ndef f():\n    pass\n")  # "at least 8" until 0.9.5
    (tmp_path / "minus.py").write_text("INPUT_SIZE = -3\ndef f():\n    pass\n")  # "an expression" until 0.9.6
    (tmp_path / "pair.py").write_text("INPUT_SIZE, INPUT_CHANNELS = 28, 1\ndef f():\n    pass\n")  # passed over
    # a parser at its top level reads no argument of tracker's (it read them, and ended tracker: usage, exit 2)
    (tmp_path / "script.py").write_text("import argparse\nfrom torch import nn\nparser = argparse.ArgumentParser()\n"
                                        "parser.add_argument('--width', type=int, default=4)\nWIDTH = parser.parse_args().width\n"
                                        "def f():\n    return nn.Conv2d(3, WIDTH, 3)\n"
                                        "def g():\n    parser.add_argument('name')\n    parser.parse_args()\n")
    store = tmp_path / "s"
    cases = {
        f"{tmp_path}/none.py:Net": f"network file {tmp_path}/none.py does not exist",
        f"{net}:Wide": f"network file {net} defines no 'Wide' at its top level",
        f"{net}:broken": "mynet.py:broken could not build the network: RuntimeError: no such layer",
        f"{net}:not_a_network": "mynet.py:not_a_network returned int, not a torch.nn.Module",
        f"{net}:two_lines": "mynet.py:two_lines could not build the network: ValueError: the first line",
        f"{net}:Guarded": "mynet.py:Guarded could not build the network: TypeError: Block.__init__() missing 2 required "
                          "positional arguments: 'cin' and 'cout'",
        f"{tmp_path}/syntax.py:f": f"network file {tmp_path}/syntax.py: line 1: invalid syntax",
        f"{tmp_path}/size.py:f": f"network file {tmp_path}/size.py: INPUT_SIZE should be a whole number of pixels, at least 8, "
                                 "got 'large'",
        f"{tmp_path}/channels.py:f": f"network file {tmp_path}/channels.py: INPUT_CHANNELS should be a whole number of "
                                     "channels, at least 1, got 0",
        f"{tmp_path}/minus.py:f": f"network file {tmp_path}/minus.py: INPUT_SIZE should be a whole number of pixels, at least "
                                  "8, got -3",
        f"{tmp_path}/sum.py:f": f"network file {tmp_path}/sum.py: INPUT_SIZE should be a number written out (INPUT_SIZE = 32), "
                                "not an expression: tracker reads the file, it does not run it, to plan a measurement",
        f"{tmp_path}/pair.py:f": f"network file {tmp_path}/pair.py: INPUT_CHANNELS is set in a way tracker does not read "
                                 "(line 1): give it on a line of its own, INPUT_CHANNELS = value",
        f"{net}:1x": f"'{net}:1x' is not FILE.py:NAME (a callable of the file that builds the network; "
                     "FILE.py:NAME(ARGS) calls it with arguments)",
        str(net): f"{net} is a Python file: name the callable of it that builds the network, {net}:NAME",  # "not JSON"
        f"{tmp_path}/exits.py:f": "exits.py:f exited (sys.exit(0)) instead of building the network: a network file runs as "
                                  'it is imported, so what should run only as a script belongs under `if __name__ == "__main__":`',
        f"{tmp_path}/script.py:g": "script.py:g exited (sys.exit(2)) instead of building the network: a network file runs "
                                   "as it is imported, so what should run only as a script belongs under "
                                   '`if __name__ == "__main__":`',
    }
    for ref, message in cases.items():  # the library's error, which the CLI's entry prints as one line
        out = _cli(store, "profile", "network", ref, "-b", "1")
        assert isinstance(out.exception, ConfigError) and str(out.exception) == message, (ref, out.exception)
    # an annotated constant is read as a plain one (passed over until 0.9.5: described at 224)
    (tmp_path / "ann.py").write_text("import torch\nINPUT_SIZE: int = 48\n\n\ndef net():\n    return torch.nn.Conv2d(3, 4, 3)\n")
    annotated = _cli(store, "describe", f"{tmp_path}/ann.py:net", "--format", "json")
    assert annotated.exit_code == 0 and json.loads(annotated.stdout)["input_size"] == 48, annotated.output
    # what a network's file prints goes to stderr: it came before the JSON on stdout until 0.9.3
    (tmp_path / "noisy.py").write_text("import torch\nprint('hello from module')\n\n\ndef net():\n"
                                       "    print('building')\n    return torch.nn.Conv2d(3, 4, 3)\n")
    noisy = subprocess.run([sys.executable, "-m", "tracker", "describe", f"{tmp_path}/noisy.py:net", "--input-size", "32",
                            "--format", "json"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert noisy.returncode == 0 and json.loads(noisy.stdout)["params"] == 3 * 4 * 9 + 4, noisy.stderr
    assert "hello from module\nbuilding\n" in noisy.stderr
    # a network that does not run at the input size asked for is bad input too, said as such
    described = _cli(store, "describe", f"{tmp_path}/script.py:f", "--format", "json", "--input-size", "40")
    assert described.exit_code == 0 and json.loads(described.stdout)["params"] == 3 * 4 * 9 + 4, described.output
    out = _cli(store, "profile", "network", f"{net}:fixed", "--input-size", "40")
    assert str(out.exception) == ("mynet.fixed cannot run on a 1x3x40x40 input: RuntimeError: mat1 and mat2 shapes "
                                  "cannot be multiplied (1x3200 and 2048x5)")
    proc = in_process(["--tracking-uri", str(store), "profile", "network", f"{net}:broken"], tmp_path)
    assert (proc.returncode, proc.stderr) == (1, f"error: {cases[f'{net}:broken']}\n")
    assert not store.exists()  # nothing made for a network that is not one


def test_a_network_file_is_read_as_python_reads_it(tmp_path: Path) -> None:
    """A UTF-8 file that begins with a byte-order mark, and one whose coding line says latin-1, are
    read as Python runs them (until 0.9.7: "invalid non-printable character U+FEFF", "not text"), the
    same network as the plain file, and the modules beside them too; a byte its encoding lacks is one line."""
    body = "from torch import nn\nINPUT_SIZE = 16\ndef n():\n    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten())\n"
    (tmp_path / "plain.py").write_text(body)
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + body.encode())
    (tmp_path / "side.py").write_bytes(b"\xef\xbb\xbfWIDTH = 4\n")
    (tmp_path / "beside.py").write_text(body.replace("4, 3)", "WIDTH, 3)") + "from side import WIDTH\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nNOTE = 'caf\xe9'\n" + body.encode())
    (tmp_path / "bad.py").write_bytes(body.encode() + b"NOTE = 'caf\xe9'\n")
    store = tmp_path / "s"
    hashes = set()
    for name in ("plain", "bom", "beside", "latin"):
        out = _cli(store, "describe", f"{tmp_path}/{name}.py:n", "--format", "json")
        assert out.exit_code == 0, out.output
        hashes.add(json.loads(out.stdout)["description_hash"])
    assert len(hashes) == 1
    out = _cli(store, "describe", f"{tmp_path}/bad.py:n")
    assert isinstance(out.exception, ConfigError) and str(out.exception) == (
        f"network file {tmp_path}/bad.py is not text (UTF-8): byte {len(body) + 11}: b'\\xe9'")


def test_a_network_file_whose_name_is_not_utf8_is_refused_before_anything(tmp_path: Path) -> None:
    """Its name goes into the run's params, all UTF-8: it was measured, then logging it was a traceback
    and the measurement lost (until 0.9.7); now one line when the reference is read, naming it."""
    import os

    net = tmp_path / os.fsdecode(b"\xffnet.py")
    net.write_text("from torch import nn\nINPUT_SIZE = 16\ndef n():\n    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten())\n")
    store = tmp_path / "s"
    for command in (["profile", "network", f"{net}:n", "--time-cap", "0.2", "--threads", "1"], ["describe", f"{net}:n"]):
        out = _cli(store, *command)
        assert out.exit_code == 1 and isinstance(out.exception, ConfigError), out.output
        assert str(out.exception) == (f"network file '{tmp_path}/\\udcffnet.py': its name, or its folder's, is not "
                                      "UTF-8 (as Python prints it here): rename it")
    assert not store.exists()  # refused before a store was made


def test_networks_of_two_folders_each_import_the_files_beside_them(tmp_path: Path) -> None:
    """Two folders each with a blocks.py of their own: each network is built with its own, though
    both are built in one process (a campaign plans every network in its own)."""
    from tracker.profile.api import describe_early
    from tracker.zoo import resolve

    first, second = _write(tmp_path / "a"), _write(tmp_path / "b")
    (tmp_path / "b" / "blocks.py").write_text(BLOCKS.replace("nn.MaxPool2d(2)", "nn.MaxPool2d(2), nn.Dropout()"))
    describe_early(f"{first}:Net")
    a, b = resolve(f"{first}:Net").build(), resolve(f"{second}:Net").build()
    assert not any(type(m).__name__ == "Dropout" for m in a.modules())
    assert any(type(m).__name__ == "Dropout" for m in b.modules())
    assert not [name for name in sys.modules if name == "blocks" or name.startswith("tracker_network_")]


def test_the_modules_a_network_of_ones_own_imports_are_read_with_it(tmp_path: Path) -> None:
    """The modules beside the file that it imports, and those they import, are carried in its spec
    (not torch, not a file it does not import): it builds from them with every file gone. A module
    beside it that cannot be parsed is one line naming it."""
    from tracker.zoo import resolve

    folder = tmp_path / "m"
    net = _write(folder)
    (folder / "blocks.py").write_text("from layers import conv\n" + BLOCKS.replace("nn.Conv2d(cin, cout, 3, padding=1)",
                                                                                   "conv(cin, cout)"))
    (folder / "layers.py").write_text("from torch import nn\n\n\ndef conv(cin, cout):\n"
                                      "    return nn.Conv2d(cin, cout, 3, padding=1, bias=False)\n")
    (folder / "unused.py").write_text("raise RuntimeError('never imported')\n")
    ref = resolve(f"{net}:Net")
    assert sorted(ref.spec["modules"]) == ["blocks", "layers"]
    params = sum(p.numel() for p in ref.build().parameters())
    for file in folder.iterdir():
        file.unlink()
    rebuilt = ref.build()  # from the carried text alone
    assert sum(p.numel() for p in rebuilt.parameters()) == params
    assert not any(m.bias is not None for m in rebuilt.modules() if type(m).__name__ == "Conv2d")  # layers.py's conv
    assert not [name for name in sys.modules if name in ("blocks", "layers")]
    (tmp_path / "lenet.py").write_text(LENET)
    assert "modules" not in resolve(f"{tmp_path}/lenet.py:lenet").spec  # one file: nothing beside it

    net = _write(tmp_path / "bad")
    (tmp_path / "bad" / "blocks.py").write_text("def broken(:\n")
    out = _cli(tmp_path / "s", "describe", f"{net}:Net")
    assert out.exit_code == 1 and str(out.exception) == f"network file {tmp_path}/bad/blocks.py: line 1: invalid syntax"


def test_a_package_beside_a_network_of_ones_own_is_carried_whole(tmp_path: Path) -> None:
    """A package beside the file (a folder with an __init__.py) that it imports is carried with it:
    every module in it and its subpackages, relative imports and all, so the network builds as
    planned with the folder edited or gone, and its run keeps the files as they lay. A folder
    inside it that is no package is not, and a package larger than CARRIED_PACKAGE_BYTES is
    imported from its folder as before."""
    from tracker.zoo import resolve
    from tracker.zoo import spec as spec_module

    folder = tmp_path / "p"
    net = _write(folder)
    (folder / "blocks.py").unlink()
    package = folder / "blocks"
    (package / "layers").mkdir(parents=True)
    (package / "__init__.py").write_text("from .block import Block\n")
    (package / "block.py").write_text("from torch import nn\n\nfrom .layers.conv import conv\n\n\n"
                                      "class Block(nn.Sequential):\n    def __init__(self, cin, cout):\n"
                                      "        super().__init__(conv(cin, cout), nn.ReLU(), nn.MaxPool2d(2))\n")
    (package / "layers" / "__init__.py").write_text("")
    (package / "layers" / "conv.py").write_text("from torch import nn\n\n\ndef conv(cin, cout):\n"
                                                "    return nn.Conv2d(cin, cout, 3, padding=1, bias=False)\n")
    (package / "notes").mkdir()
    (package / "notes" / "scratch.py").write_text("raise RuntimeError('never imported')\n")
    ref = resolve(f"{net}:Net")
    assert sorted(ref.spec["modules"]) == ["blocks.__init__", "blocks.block", "blocks.layers.__init__",
                                           "blocks.layers.conv"]
    store = tmp_path / "s"
    out = _cli(store, "profile", "network", f"{net}:Net", "-b", "2", "--time-cap", "0.3", "--precision", "0.2",
               "--format", "json")
    assert out.exit_code == 0, out.output
    client = MlflowClient(resolve_location(str(store)).uri)
    with downloaded(client.tracking_uri, json.loads(out.stdout)["run_id"], "description/blocks/layers/conv.py") as path:
        assert "bias=False" in path.read_text()  # the package's files, as they lay beside the network's

    params = sum(p.numel() for p in ref.build().parameters())
    (package / "layers" / "conv.py").write_text("raise RuntimeError('edited after planning')\n")
    assert sum(p.numel() for p in ref.build().parameters()) == params  # as planned
    shutil.rmtree(package)
    rebuilt = ref.build()  # from the carried text alone
    assert sum(p.numel() for p in rebuilt.parameters()) == params
    assert not any(m.bias is not None for m in rebuilt.modules() if type(m).__name__ == "Conv2d")
    assert not [name for name in sys.modules if name.split(".")[0] == "blocks"]

    second = tmp_path / "q"
    net = _write(second)
    (second / "blocks.py").unlink()
    (second / "blocks").mkdir()
    (second / "blocks" / "__init__.py").write_text(BLOCKS + "#" * 100 + "\n")
    spec_module.CARRIED_PACKAGE_BYTES, saved = 100, spec_module.CARRIED_PACKAGE_BYTES
    try:
        assert "modules" not in resolve(f"{net}:Net").spec  # too large: imported from its folder
    finally:
        spec_module.CARRIED_PACKAGE_BYTES = saved
    assert sorted(resolve(f"{net}:Net").spec["modules"]) == ["blocks.__init__"]


@pytest.mark.alone  # it compares two measurements' latencies
def test_profile_takes_an_input_size_other_than_the_networks_own(tmp_path: Path) -> None:
    """--input-size: another configuration (its own key and run), named with its size in lists."""
    store = tmp_path / "s"
    out = _cli(store, "profile", "network", "squeezenet1_1", "--input-size", "64", "-b", "2", "--time-cap", "0.5",
               "--precision", "0.2", "--format", "json")
    assert out.exit_code == 0, out.output
    small = json.loads(out.stdout)
    assert small["input_size"] == 64 and small["status"] == "FINISHED"
    usual = json.loads(_cli(store, "profile", "network", "squeezenet1_1", "-b", "2", "--time-cap", "0.5",
                            "--precision", "0.2", "--format", "json").stdout)
    assert usual["input_size"] == 224 and usual["reused"] is False and usual["run_id"] != small["run_id"]
    assert usual["latency_ms"] > small["latency_ms"]  # 12 times the pixels
    runs = {r["run_id"]: r["name"] for r in json.loads(_cli(store, "runs", "list", "--format", "json").stdout)}
    assert runs[small["run_id"]] == "squeezenet1_1 · bs2 · 64px · inference · cpu"
    assert runs[usual["run_id"]] == "squeezenet1_1 · bs2 · inference · cpu"
    line = _cli(store, "profile", "network", "squeezenet1_1", "--input-size", "64", "-b", "2").stdout
    assert line.startswith("squeezenet1_1 bs2 at 64 px inference in mode ") and "(already measured: reused)" in line


def test_a_campaign_measures_each_network_at_each_input_size(tmp_path: Path) -> None:
    campaign = tmp_path / "sizes.toml"
    campaign.write_text('[campaign]\nname = "sizes"\n[networks]\nzoo = ["squeezenet1_1"]\n'
                        '[measure]\nbatch_sizes = [1]\ninput_sizes = [64, 80, 64]\nprecision = 0.2\ntime_cap_s = 0.3\nagain_imprecise = false\n')
    store = tmp_path / "s"
    planned = json.loads(_cli(store, "campaign", "run", str(campaign), "--dry-run", "--format", "json").stdout)
    assert [(c["network"], c["input_size"]) for c in planned["configurations"]] == [("squeezenet1_1", 64),
                                                                                   ("squeezenet1_1", 80)]
    first = json.loads(_cli(store, "campaign", "run", str(campaign), "--format", "json").stdout)
    assert (first["measured"], first["failed"]) == (2, 0)
    again = json.loads(_cli(store, "campaign", "run", str(campaign), "--format", "json").stdout)
    assert (again["measured"], again["skipped"]) == (0, 2)
    client = MlflowClient(resolve_location(str(store)).uri)
    runs = client.search_runs([client.get_experiment_by_name("sizes").experiment_id], "tags.`tracker.kind` = 'network'")
    assert sorted(r.data.params["input_size"] for r in runs) == ["64", "80"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\ninput_sizes = [4]\n')
    assert str(_cli(store, "campaign", "run", str(bad)).exception) == (
        f"{bad}: [measure].input_sizes must be from 8 to 8192 pixels, got 4")
    # --input-size's largest too: 100,000 px was said as memory not given, and a whole number past a float's range
    # as a network that cannot run on it, neither naming the file and key, until 0.9.13
    for size in ("100000", "1" + "0" * 400):
        bad.write_text(f'[networks]\nzoo = ["squeezenet1_1"]\n[measure]\ninput_sizes = [64, {size}]\n')
        assert str(_cli(store, "campaign", "run", str(bad), "--dry-run").exception) == (
            f"{bad}: [measure].input_sizes must be from 8 to 8192 pixels, got {size}")
    # a size the network cannot run at: one line, before a store is made
    bad.write_text('[networks]\nzoo = ["squeezenet1_1"]\n[measure]\ninput_sizes = [64, 8]\n')
    out = _cli(tmp_path / "none", "campaign", "run", str(bad))
    assert str(out.exception).startswith("squeezenet1_1 cannot run on a 1x3x8x8 input: RuntimeError: ")
    assert not (tmp_path / "none").exists()


#: MNIST's LeNet on grey images, the example network of one's own the project ships
LENET = (Path(__file__).resolve().parent.parent / "experiments" / "models" / "lenet.py").read_text()


def test_a_network_of_ones_own_may_take_grey_images(tmp_path: Path) -> None:
    """INPUT_CHANNELS = 1 (MNIST's LeNet): described, measured whole, in training and layer by layer
    on (N, 1, 28, 28) images."""
    net = tmp_path / "lenet.py"
    net.write_text(LENET)
    store = tmp_path / "s"
    described = json.loads(_cli(store, "describe", f"{net}:lenet", "--format", "json").stdout)
    params = (1 * 6 * 25 + 6) + (6 * 16 * 25 + 16) + (400 * 120 + 120) + (120 * 10 + 10)  # convs 5x5, then the head
    assert (described["in_channels"], described["input_size"], described["params"]) == (1, 28, params)
    trained = _cli(store, "profile", "network", f"{net}:lenet", "-b", "8", "--phase", "training", "--time-cap", "0.5",
                   "--precision", "0.2", "--format", "json")
    assert trained.exit_code == 0 and json.loads(trained.stdout)["status"] == "FINISHED", trained.output
    client = MlflowClient(resolve_location(str(store)).uri)
    assert client.get_run(json.loads(trained.stdout)["run_id"]).data.params["in_channels"] == "1"  # a param where not 3
    layers = _cli(store, "profile", "layers", f"{net}:lenet", "-b", "2", "--time-cap", "0.5", "--precision", "0.2",
                  "--format", "json")
    assert layers.exit_code == 0, layers.output
    assert [layer["op_type"] for layer in json.loads(layers.stdout)["layers"]][:3] == ["Conv2d", "ReLU", "MaxPool2d"]


def test_a_mapping_runs_networks_of_ones_own_at_once(tmp_path: Path) -> None:
    """A multi-DNN mapping of a network of one's own split in two stages beside LeNet on grey images:
    both run, and the mapping run names them as their own runs do."""
    net = _write(tmp_path / "models")
    lenet = tmp_path / "models" / "lenet.py"
    lenet.write_text(LENET)
    store = tmp_path / "s"
    mapping = f"{net}:Net@3:cpu>cpu,{lenet}:lenet:cpu"
    out = _cli(store, "mapping", "run", "--mapping", mapping, "--duration", "1", "--warmup", "0.3", "--format", "json")
    assert out.exit_code == 0, out.output
    [w] = json.loads(out.stdout)
    assert w["status"] == "FINISHED" and [n["model"] for n in w["networks"]] == ["mynet.Net", "lenet.lenet"]
    assert all(n["inf_count"] > 0 for n in w["networks"]) and w["networks"][0]["split"] == 3
    params = MlflowClient(resolve_location(str(store)).uri).get_run(w["run_id"]).data.params
    assert (params["net0.model"], params["net1.model"]) == ("mynet.Net", "lenet.lenet")
    missing = _cli(store, "mapping", "run", "--mapping", f"{tmp_path}/none.py:Net:cpu")
    # the entry it was given in said first (since 0.9.8)
    assert str(missing.exception) == f"mapping entry '{tmp_path}/none.py:Net:cpu': network file {tmp_path}/none.py does not exist"


def test_a_mapping_knows_a_network_of_ones_own_by_its_content_not_its_path(tmp_path: Path, monkeypatch) -> None:
    """A mapping's key names a network of one's own by its description, as a network run's does: the
    file by a relative path is the workload measured by its absolute path (reused), an edited file is
    another workload; and its child builds the network the workload read, the file gone since."""
    from tracker.log.logger import RunLogger
    from tracker.profile.mapping import Workload, parse_mapping, run_workloads

    net = _write(tmp_path / "models")
    store = tmp_path / "s"
    args = ("--duration", "0.5", "--warmup", "0.1", "--format", "json")
    first = _cli(store, "mapping", "run", "--mapping", f"{net}:Net@3:cpu>cpu", *args)
    assert first.exit_code == 0, first.output
    monkeypatch.chdir(tmp_path)
    again = _cli(store, "mapping", "run", "--mapping", "models/mynet.py:Net@3:cpu>cpu", *args)
    assert again.exit_code == 0, again.output
    [w1], [w2] = json.loads(first.stdout), json.loads(again.stdout)
    assert w2["reused"] and w2["run_id"] == w1["run_id"]
    _write(tmp_path / "models", width=6)  # another network under the same path
    edited = _cli(store, "mapping", "run", "--mapping", "models/mynet.py:Net@3:cpu>cpu", *args)
    assert edited.exit_code == 0, edited.output
    [w3] = json.loads(edited.stdout)
    assert not w3["reused"] and w3["status"] == "FINISHED" and w3["run_id"] != w1["run_id"]

    workload = Workload(parse_mapping("models/mynet.py:Net@2:cpu>cpu"), 1, 0.5, 0.1)  # read now
    net.unlink()
    [w4] = run_workloads(RunLogger(str(store), experiment="multi-dnn"), [workload])
    assert w4["status"] == "FINISHED" and w4["networks"][0]["model"] == "mynet.Net", w4
    assert w4["networks"][0]["inf_count"] > 0


def test_a_network_of_ones_own_is_pruned_into_specs_that_carry_it(tmp_path: Path) -> None:
    """zoo prune FILE.py:NAME: specs that carry the file's network (its text), its size and channels,
    so they are built and measured wherever they are, the file gone; a campaign prunes one too."""
    lenet = tmp_path / "models" / "lenet.py"
    lenet.parent.mkdir()
    lenet.write_text(LENET)
    store = tmp_path / "s"
    out = _cli(store, "zoo", "prune", f"{lenet}:lenet", "--ratios", "0,50", "--out", str(tmp_path / "pruned"),
               "--format", "json")
    assert out.exit_code == 0, out.output
    whole, half = (Path(p) for p in json.loads(out.stdout))
    spec = json.loads(half.read_text())
    assert (spec["name"], spec["base"], spec["input_size"], spec["in_channels"]) == ("lenet.lenet-p50-l1-s0", "lenet.lenet",
                                                                                     28, 1)
    assert spec["widths"] == {"0": 3, "3": 8} and spec["base_spec"]["source"] == LENET
    lenet.unlink()  # the specs carry the network: the file is no longer needed
    described = {p: json.loads(_cli(store, "describe", str(p), "--format", "json").stdout) for p in (whole, half)}
    assert described[whole]["params"] > described[half]["params"] and described[half]["in_channels"] == 1
    trained = json.loads(_cli(store, "profile", "network", str(half), "-b", "4", "--phase", "training", "--time-cap",
                              "0.5", "--precision", "0.2", "--format", "json").stdout)
    assert trained["status"] == "FINISHED" and trained["model"] == "lenet.lenet-p50-l1-s0"
    client = MlflowClient(resolve_location(str(store)).uri)
    with downloaded(client.tracking_uri, trained["run_id"], "description/lenet.py") as path:
        assert path.read_text() == LENET  # the code it runs, its base's, with the run as a network of one's own's
    assert client.get_run(trained["run_id"]).data.tags["mlflow.note.content"].endswith(
        "lenet.lenet-p50-l1-s0, pruned from a network of your own, lenet.py:lenet: its code as measured is the "
        "artifact description/lenet.py.")
    again = json.loads(_cli(store, "zoo", "prune", str(half), "--ratios", "50", "--out", str(tmp_path / "again"),
                            "--format", "json").stdout)  # pruned again: its base's base is the file's network
    quarter = json.loads(_cli(store, "profile", "network", again[0], "-b", "4", "--time-cap", "0.5", "--precision",
                              "0.2", "--format", "json").stdout)
    assert quarter["status"] == "FINISHED" and quarter["model"] == "lenet.lenet-p50-l1-s0-p50-l1-s0"
    with downloaded(client.tracking_uri, quarter["run_id"], "description/lenet.py") as path:
        assert path.read_text() == LENET

    net = _write(tmp_path / "models")
    campaign = tmp_path / "pruned.toml"
    campaign.write_text('[campaign]\nname = "pruned"\n[networks.prune]\nmodel = "models/mynet.py:Net"\nratios = [25, 75]\n'
                        "[measure]\nprecision = 0.2\ntime_cap_s = 0.3\nagain_imprecise = false\n")
    tally = json.loads(_cli(store, "campaign", "run", str(campaign), "--format", "json").stdout)
    assert (tally["measured"], tally["failed"]) == (2, 0)
    assert sorted(p.name for p in (tmp_path / "pruned" / "networks").glob("*.json")) == [
        "mynet.Net-p25-l1-s0.json", "mynet.Net-p75-l1-s0.json"]
    campaign.write_text(campaign.read_text().replace("mynet.py:Net", "mynet.py:Wide"))
    assert str(_cli(store, "campaign", "run", str(campaign)).exception) == (
        f"{campaign}: [networks.prune].model: network file {net} defines no 'Wide' at its top level")


#: networks of one's own whose input is not images: token ids, and one channel of audio samples
SEQUENCE = '''import torch
from torch import nn

INPUT_SHAPE = (16,)
INPUT_VOCAB = 50


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(INPUT_VOCAB, 32)
        self.encoder = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # an embedding takes int64 ids below its size only
        return self.head(self.encoder(self.embed(ids)).mean(dim=1))
'''
AUDIO = '''from torch import nn

INPUT_SHAPE = (1, 1000)


def kws() -> nn.Module:
    return nn.Sequential(nn.Conv1d(1, 8, 9, stride=4), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2),
                         nn.Conv1d(8, 16, 5), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 4))
'''


def test_a_network_of_ones_own_may_take_inputs_that_are_not_images(tmp_path: Path) -> None:
    """INPUT_SHAPE (and INPUT_VOCAB for token ids): described with its 1-D convolutions counted and
    what it cannot count said, measured for inference, training and layer by layer, in a mapping
    and the warehouse, named by its input's shape; no input size is invented for it, and asking
    it for one, or pruning it, is one line."""
    (tmp_path / "seq.py").write_text(SEQUENCE)
    (tmp_path / "audio.py").write_text(AUDIO)
    seq, audio = f"{tmp_path}/seq.py:Tagger", f"{tmp_path}/audio.py:kws"
    store = tmp_path / "s"
    kws = json.loads(_cli(store, "describe", audio, "--format", "json").stdout)
    assert (kws["input_shape"], kws["input_size"], kws["in_channels"], kws["input_vocab"]) == ([1, 1000], None, None, None)
    conv1, conv2 = 8 * ((1000 - 9) // 4 + 1), 16 * (((1000 - 9) // 4 + 1) // 2 - 4)  # output elements
    assert kws["macs"] == conv1 * 1 * 9 + conv2 * 8 * 5 + 16 * 4  # each 1-D kernel counted once
    rows = json.loads(_cli(store, "describe", audio, "--nodes", "--format", "json").stdout)["node_rows"]
    first = next(r for r in rows if r["kind"] == "Conv1d")
    assert (first["category"], first["kernel_h"], first["kernel_w"], first["stride_h"]) == ("conv", 9, 1, 4)
    tagger = _cli(store, "describe", seq)
    assert tagger.exit_code == 0 and "input_shape: 16\n" in tagger.stdout and "input_size" not in tagger.stdout
    assert "input_vocab: 50\n" in tagger.stdout  # its token ids' range, said (since 0.9.3)
    assert "note:" not in tagger.stdout  # the transformer layer kept whole is counted, not left out
    # 16 tokens of 32: its attention's four projections and the scores and weighted sum over 16
    # keys, its feed-forward 32 -> 64 -> 32, then the head (the embedding is a lookup)
    attention, feed_forward = 4 * 16 * 32 * 32 + 2 * 16 * 16 * 32, 2 * 16 * 32 * 64
    assert json.loads(_cli(store, "describe", seq, "--format", "json").stdout)["macs"] == (
        attention + feed_forward + 32 * 5)

    for ref, phase in ((seq, "inference"), (seq, "training"), (audio, "training")):
        out = _cli(store, "profile", "network", ref, "-b", "3", "--phase", phase, "--time-cap", "0.5",
                   "--precision", "0.2", "--format", "json")
        assert out.exit_code == 0, out.output
        # made once tracker made the store: MLflow's client making it would give its Default
        # experiment MLflow's own artifact root, ./mlruns of the suite's folder
        client = MlflowClient(resolve_location(str(store)).uri)
        run = json.loads(out.stdout)
        assert run["status"] == "FINISHED" and run["latency_ms"] > 0 and run["input_size"] is None
        params = client.get_run(run["run_id"]).data.params
        assert "input_size" not in params and "in_channels" not in params
    assert (params["input_shape"], "input_vocab" in params) == ("1x1000", False)
    [tagged] = client.search_runs([client.get_experiment_by_name("Default").experiment_id],
                                  "params.model = 'seq.Tagger' and params.phase = 'training'")
    assert (tagged.data.params["input_shape"], tagged.data.params["input_vocab"]) == ("16", "50")
    assert tagged.data.tags["mlflow.runName"] == "seq.Tagger · bs3 · 16 ids<50 · training · cpu"
    layers = _cli(store, "profile", "layers", audio, "-b", "2", "--time-cap", "0.3", "--precision", "0.2",
                  "--format", "json")
    assert [layer["op_type"] for layer in json.loads(layers.stdout)["layers"]][:2] == ["Conv1d", "BatchNorm1d"]
    # its transformer layer, whose fast path calls none of its parts, is timed whole
    layers = _cli(store, "profile", "layers", seq, "-b", "2", "--time-cap", "0.3", "--precision", "0.2",
                  "--format", "json")
    timed = json.loads(layers.stdout)["layers"]
    # and the mean it pools with before its head, a torch function (a function layer, 0.8.6)
    assert [layer["op_type"] for layer in timed] == ["Embedding", "TransformerEncoderLayer", "mean", "Linear"]
    assert all(layer["latency_ms"] > 0 for layer in timed)
    mapped = _cli(store, "mapping", "run", "--mapping", f"{audio}@2:cpu>cpu,{seq}:cpu", "--duration", "0.5",
                  "--warmup", "0.1", "--format", "json")
    assert mapped.exit_code == 0, mapped.output
    assert all(n["inf_count"] > 0 for n in json.loads(mapped.stdout)[0]["networks"])

    assert _cli(store, "warehouse", "load").exit_code == 0
    rows = json.loads(_cli(store, "sql", "SELECT model, input_size, in_channels FROM network_descriptions "
                                         "ORDER BY model", "--format", "json").stdout)
    assert rows == [{"model": "audio.kws", "input_size": None, "in_channels": None},
                    {"model": "seq.Tagger", "input_size": None, "in_channels": None}]

    refused = _cli(store, "profile", "network", audio, "--input-size", "64")
    assert str(refused.exception) == ("audio.kws takes inputs of shape 1x1000, not images: an input size "
                                      "(--input-size, a campaign's input_sizes) is for networks of images")
    # predict says so before it looks for a fingerprint (this store has none)
    for extra in ((), ("--largest-batch",)):
        assert str(_cli(store, "predict", audio, "--input-size", "64", *extra).exception) == str(refused.exception)
    campaign = tmp_path / "c.toml"
    campaign.write_text('[campaign]\nname = "c"\n[networks]\nspecs = ["seq.py:Tagger"]\n'
                        '[measure]\nbatch_sizes = [1]\ninput_sizes = [64]\nagain_imprecise = false\n')
    out = _cli(store, "campaign", "run", str(campaign))
    assert out.exit_code == 1 and "seq.Tagger takes inputs of shape 16 ids<50, not images" in str(out.exception)
    pruned = _cli(store, "zoo", "prune", audio, "--ratios", "50", "--out", str(tmp_path / "p"))
    assert str(pruned.exception) == ("audio.kws takes inputs of shape 1x1000, not images: pruning follows the "
                                     "channels of networks of images")

    bad = {"INPUT_SHAPE = (0,)": "INPUT_SHAPE should be the shape of one input, without the batch: 1 to 4 whole "
                                "numbers of at least 1, such as (128,) or (1, 16000)",
           "INPUT_SHAPE = 'long'": "INPUT_SHAPE should be the shape of one input",
           "INPUT_SHAPE = (1, 2, 3, 4, 5)": "INPUT_SHAPE should be the shape of one input",
           "INPUT_SHAPE = (3, 32, 32)": "INPUT_SHAPE (3, 32, 32) is an image: say INPUT_CHANNELS = 3 and INPUT_SIZE = 32",
           "INPUT_VOCAB = 10": "INPUT_VOCAB needs INPUT_SHAPE, the shape of one input of token ids",
           "INPUT_SHAPE = (8,)\nINPUT_VOCAB = 1": "INPUT_VOCAB should be a whole number of token ids, at least 2",
           "INPUT_SHAPE = (8,)\nINPUT_SIZE = 32": "give INPUT_SHAPE (one input's shape) or INPUT_SIZE and INPUT_CHANNELS"}
    for i, (header, message) in enumerate(bad.items()):
        (tmp_path / f"bad{i}.py").write_text(f"{header}\n" + AUDIO.split("\n\n\n")[1])
        out = _cli(store, "describe", f"{tmp_path}/bad{i}.py:kws")
        assert out.exit_code == 1 and str(out.exception).startswith(f"network file {tmp_path}/bad{i}.py: {message}"), \
            (header, out.exception)


#: networks of one's own that return more than one (N, classes) tensor, and one that returns nothing to train on
OUTPUTS = '''import torch
from torch import nn

INPUT_SIZE = 16


class Segmenter(nn.Module):
    """A segmentation network's output: per-pixel classes, and an auxiliary classifier, in a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Conv2d(3, 8, 3, padding=1)
        self.out = nn.Conv2d(8, 4, 1)
        self.aux = nn.Linear(8, 3)

    def forward(self, x):
        f = torch.relu(self.body(x))
        return {"out": self.out(f), "aux": self.aux(f.mean((2, 3)))}


class Pair(nn.Module):
    """Logits and a score of one dimension, in a tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Conv2d(3, 8, 3)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        f = self.body(x).mean((2, 3))
        return self.head(f), f.sum(1)


class Labels(nn.Module):
    """Class indices: nothing that carries gradients."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.body(x).argmax(1)
'''


def test_a_training_step_trains_whatever_tensors_the_network_returns() -> None:
    """Since 0.8.5 the training loss is taken of every floating-point tensor a network returns
    (a tuple, a dict, at any depth): cross-entropy with classes along the second dimension, one a
    sample for ``(N, C)`` (the same classes as before) and one a pixel for ``(N, C, H, W)``, the mean
    square of a tensor of one dimension; backward reaches every head. Before, the output had to be
    one ``(N, C)`` tensor."""
    import torch

    from tracker.errors import MeasurementError
    from tracker.profile.measure import training_loss

    namespace: dict = {}
    exec(OUTPUTS, namespace)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, 16)
    for model in (namespace["Segmenter"](), namespace["Pair"]()):
        out = model(x)
        loss = training_loss(out, "cpu")
        loss(out).backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters()), type(model).__name__
    seg = namespace["Segmenter"]()
    out = seg(x)
    got = training_loss(out, "cpu")(out)
    # the classes drawn in the order of the outputs, from one generator of seed 0
    generator = torch.Generator().manual_seed(0)
    pixels, classes = torch.randint(0, 4, (2, 16, 16), generator=generator), torch.randint(0, 3, (2,), generator=generator)
    assert torch.allclose(got, torch.nn.functional.cross_entropy(out["out"], pixels)
                          + torch.nn.functional.cross_entropy(out["aux"], classes))
    # an image classifier's loss is as before: cross-entropy against randint(0, C, (N,)) of seed 0
    logits = torch.randn(3, 10, requires_grad=True)
    assert torch.equal(training_loss(logits, "cpu")(logits), torch.nn.functional.cross_entropy(
        logits, torch.randint(0, 10, (3,), generator=torch.Generator().manual_seed(0))))
    with pytest.raises(MeasurementError, match="no floating-point tensor that carries gradients"):
        training_loss(namespace["Labels"]()(x), "cpu")  # class indices: nothing to train on


def test_a_network_returning_a_dict_is_measured_in_training_and_one_that_cannot_be_says_why(tmp_path: Path) -> None:
    net = tmp_path / "outputs.py"
    net.write_text(OUTPUTS)
    store = tmp_path / "s"
    for name in ("Segmenter", "Pair"):
        out = _cli(store, "profile", "network", f"{net}:{name}", "-b", "2", "--phase", "training", "--time-cap", "0.5",
                   "--precision", "0.2", "--format", "json")
        assert out.exit_code == 0 and json.loads(out.stdout)["status"] == "FINISHED", out.output
    failed = json.loads(_cli(store, "profile", "network", f"{net}:Labels", "-b", "2", "--phase", "training",
                             "--time-cap", "0.5", "--format", "json").stdout)
    assert failed["status"] == "FAILED" and failed["failure_reason"] == "error"
    assert failed["failure_message"] == ("MeasurementError: the network returns no floating-point tensor that "
                                         "carries gradients: nothing to train it on")
    line = _cli(store, "profile", "network", f"{net}:Labels", "-b", "2", "--phase", "training", "--time-cap", "0.5").stdout
    assert line.startswith(f"outputs.Labels bs2 at 16 px training in mode {failed['mode']}: FAILED (error: MeasurementError: "
                           "the network returns no ")  # its size and mode, as a measured run's line says them
    assert line.rstrip().endswith(": its stderr)")
    shown = _cli(store, "runs", "show", failed["run_id"][:12]).stdout
    assert "FAILED (error)" in shown and "MeasurementError" in shown


#: a network that does some of its work with torch functions between its modules: an in-place
#: ReLU, a Linear's weights through F.linear, a cat of two channel slices, a channel shuffle's
#: copy and a residual add inside a block, a mean before its head
BETWEEN = '''import torch
from torch import nn
from torch.nn import functional as F

INPUT_SIZE = 12


class Shuffle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        x = x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)
        return x + self.conv(x)


class Mixed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.proj = nn.Linear(8, 8)  # its weights used through F.linear: never called as a module
        self.block = Shuffle()
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv(x), inplace=True)
        z = F.linear(y.permute(0, 2, 3, 1), self.proj.weight, self.proj.bias).permute(0, 3, 1, 2)
        y = self.block(torch.cat([y[:, :4], z[:, 4:]], 1))
        return self.head(y.mean((2, 3)))
'''


def test_the_work_a_network_does_between_its_modules_is_timed_as_function_layers(tmp_path: Path) -> None:
    """`profile layers` timed modules only: a residual add, a cat, a channel shuffle's copy or a
    Linear's weights used through F.linear had no layer (swin_t's layers summed to 0.36 of the
    network at batch 2; 0.91 with them). Since 0.8.6 the torch functions a module calls between its
    layers that write a tensor (not views, not shapes) are layers of kind function: each run of them
    inside one module, replayed call by call on exact copies of each call's inputs (an in-place
    call's from before it, a strided view's with its strides). The layer-level fingerprint still
    learns modules only (layer_features); layer_latency has both."""
    import torch

    from tracker.profile.network import NetworkSpec, capture_layers

    namespace: dict = {}
    exec(BETWEEN, namespace)
    torch.manual_seed(0)
    calls = capture_layers(namespace["Mixed"](), NetworkSpec("between.Mixed", batch_size=2, input_size=12))
    assert [(c.name, c.kind, c.op_type) for c in calls] == [
        ("conv", "module", "Conv2d"), ("Mixed", "function", "relu+linear+cat"), ("block", "function", "contiguous"),
        ("block.conv", "module", "Conv2d"), ("block", "function", "add"), ("Mixed", "function", "mean"),
        ("head", "module", "Linear")]
    relu, linear, cat = calls[1].functions
    assert relu.kwargs == {"inplace": True} and (relu.args[0] < 0).any()  # copied before it wrote its input
    [shuffle] = calls[2].functions
    assert not shuffle.args[0].is_contiguous() and shuffle.args[0].stride() == (1152, 144, 576, 12, 1)
    with torch.inference_mode():
        assert torch.equal(relu.run(), linear.args[0].permute(0, 3, 1, 2))
        mixed = calls[1].run()  # the calls one after the other: the cat's output
        assert torch.equal(mixed.view(2, 2, 4, 12, 12).transpose(1, 2), shuffle.args[0])
        assert torch.equal(calls[2].run().view(2, 8, 12, 12), calls[3].inputs[0])  # what block.conv read
    assert calls[1].input_shape == "2x8x12x12" and calls[1].output_shape == "2x8x12x12"

    net = tmp_path / "between.py"
    net.write_text(BETWEEN)
    store = tmp_path / "s"
    args = ("profile", "layers", f"{net}:Mixed", "-b", "2", "--time-cap", "0.3", "--precision", "0.2")
    data = json.loads(_cli(store, *args, "--format", "json").stdout)
    assert [(layer["name"], layer["kind"]) for layer in data["layers"]] == [(c.name, c.kind) for c in calls]
    assert all(layer["latency_ms"] > 0 for layer in data["layers"])
    text = _cli(store, *args).stdout  # measured before: read back with its layers, the slowest in a table
    [line] = [x for x in text.splitlines() if x.startswith("7 layer runs; sum of layers / network = ")]
    assert "; 4 of them the torch functions modules called between their layers (" in line
    assert "the 7 slowest of 7 layers, each alone (all of them: --format json, or the SQL view layer_latency):" in text
    rows = [x for x in text.splitlines() if x.startswith("│")]
    assert len(rows) == 7 and any("relu+linear+cat" in x and "function" in x for x in rows)
    again = json.loads(_cli(store, *args, "--format", "json").stdout)
    assert again["reused"] and again["layers"] == data["layers"]

    assert _cli(store, "warehouse", "load").exit_code == 0
    latency = json.loads(_cli(store, "sql", "SELECT layer_name, layer_kind, op_type FROM layer_latency "
                                            "ORDER BY layer_index", "--format", "json").stdout)
    assert [(r["layer_name"], r["layer_kind"]) for r in latency] == [(c.name, c.kind) for c in calls]
    learnt = json.loads(_cli(store, "sql", "SELECT layer_index, kind FROM layer_features ORDER BY layer_index",
                             "--format", "json").stdout)
    assert [(r["layer_index"], r["kind"]) for r in learnt] == [(0, "Conv2d"), (3, "Conv2d"), (6, "Linear")]


THREADED_NET = '''\
import threading
import time

from torch import nn

threading.Thread(target=time.sleep, args=(3600,), name="imported").start()
threading.Thread(target=time.sleep, args=(3600,), name="a-daemon", daemon=True).start()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        threading.Thread(target=threading.Event().wait, name="built").start()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x)


def broken():
    threading.Thread(target=threading.Event().wait, name="broken").start()
    raise RuntimeError("no such layer")
'''


def test_a_network_file_that_leaves_a_thread_running_does_not_hold_the_command(tmp_path: Path) -> None:
    """A network file that starts a thread, no daemon, that never ends (at its import, in its
    network's ``__init__``): the command's work done, tracker waited for it at its exit, forever,
    until 0.9.8. It ends, with its status, and says which threads it left running."""
    (tmp_path / "threaded.py").write_text(THREADED_NET)
    proc = subprocess.run([sys.executable, "-m", "tracker", "describe", "./threaded.py:Net", "--input-size", "32",
                           "--format", "json"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["params"] == 3 * 4 * 9 + 4, proc.stderr
    assert proc.stderr == ("note: a network file left threads running, imported (started by threaded.py), built (started "
                           "by threaded.py): tracker ends without waiting for them\n")
    # a network that fails to be built once its threads started: its line and status, as without them
    proc = subprocess.run([sys.executable, "-m", "tracker", "describe", "./threaded.py:broken"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (1, "error: threaded.py:broken could not build the network: RuntimeError: no "
                                                 "such layer\nnote: a network file left threads running, imported (started "
                                                 "by threaded.py), broken (started by threaded.py): tracker ends without "
                                                 "waiting for them\n")
