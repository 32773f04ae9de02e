"""Networks and specs written by hand, as a newcomer writes them: what their code prints, the
keys their specs lack, what tracker cannot read of them, each said in one line, and what they
hold counted once and whole."""

import json
from pathlib import Path

from typer.testing import CliRunner

from tracker.cli.app import app

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
