"""`tracker zoo` and `tracker describe` through the CLI."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracker.cli.app import app

runner = CliRunner()


def test_zoo_list_has_classification_and_detection() -> None:
    names = json.loads(runner.invoke(app, ["zoo", "list", "--format", "json"]).stdout)
    assert {"resnet18", "mobilenet_v2", "vit_b_16", "fasterrcnn_resnet50_fpn"} <= set(names)
    det = json.loads(runner.invoke(app, ["zoo", "list", "--family", "detection", "--format", "json"]).stdout)
    assert "fasterrcnn_resnet50_fpn" in det and "resnet18" not in det


def test_generate_writes_specs_that_describe_and_rebuild(tmp_path: Path) -> None:
    out = tmp_path / "nets"
    result = runner.invoke(app, ["zoo", "generate", "--count", "3", "--seed", "11", "--input-size", "64", "--out", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    paths = json.loads(result.stdout)
    assert [Path(p).name for p in paths] == ["gen-s11-0000.json", "gen-s11-0001.json", "gen-s11-0002.json"]
    again = runner.invoke(app, ["zoo", "generate", "--count", "3", "--seed", "11", "--input-size", "64", "--out", str(tmp_path / "b")])
    assert again.exit_code == 0
    assert Path(paths[1]).read_text() == (tmp_path / "b" / "gen-s11-0001.json").read_text()
    desc = json.loads(runner.invoke(app, ["describe", paths[1], "--format", "json"]).stdout)
    assert {"params", "flops", "macs", "nodes", "activation_bytes"} <= set(desc)
    assert desc["model"] == "gen-s11-0001" and desc["input_size"] == 64 and desc["params"] > 0
    # the same names at another input size: refused, not written over (until 0.9.3)
    other = runner.invoke(app, ["zoo", "generate", "--count", "3", "--seed", "11", "--input-size", "96", "--out", str(out)])
    assert other.exit_code == 1 and str(other.exception) == (
        f"{paths[0]} holds another network of that name (and 2 more): give another --out, or remove it (it was "
        "replaced until 0.9.3)")
    assert json.loads(Path(paths[1]).read_text())["input_size"] == 64
    small = runner.invoke(app, ["zoo", "generate", "--count", "3", "--input-size", "31", "--out", str(tmp_path / "c")])
    assert small.exit_code != 0 and not (tmp_path / "c").exists()
    assert str(small.exception) == ("--input-size: input_size must be at least 32 (the stem's stride times 2 for each of "
                                    "4 stages), got 31")
    # written, then refused by every command that read it (input_size at most 8,192), until 0.9.7
    big = runner.invoke(app, ["zoo", "generate", "--count", "1", "--input-size", "99999", "--out", str(tmp_path / "c")])
    assert str(big.exception) == "--input-size: input_size must be at most 8,192, got 99999"
    assert not (tmp_path / "c").exists()


def test_a_spec_file_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """A write cut short (here a file size limit; a Ctrl-C alike) left a spec file empty or half
    written until 0.9.7, and the same command, run again, refused it as another network of that name."""
    import subprocess
    import sys

    cut = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
           "resource.setrlimit(resource.RLIMIT_FSIZE, (500, 500)); sys.argv[0] = 'tracker'; "
           "from tracker.cli import main; main()")
    out = tmp_path / "nets"
    args = ["zoo", "generate", "--count", "2", "--out", str(out)]
    done = subprocess.run([sys.executable, "-c", cut, *args], capture_output=True, text=True, timeout=120)
    # the file named (until 0.9.8 "error: File too large", of no file; a full disk said "No space left on device")
    assert done.returncode == 1 and done.stderr == f"error: cannot write network spec {out}/gen-s0-0000.json: File too " \
                                                   "large\n", done.stderr
    assert list(out.iterdir()) == []  # neither a part of it nor the temporary file
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert [json.loads(p.read_text())["name"] for p in sorted(out.iterdir())] == ["gen-s0-0000", "gen-s0-0001"]
    # a folder where the second spec goes: named, not the temporary file beside it ("Is a directory:
    # .../.gen-s0-0001.json.x8f3k.tmp" until 0.9.8), and how many were in place before it; of zoo prune too
    (tmp_path / "taken" / "gen-s0-0001.json").mkdir(parents=True)
    (tmp_path / "taken" / "gen-s0-0000-p50-l1-s0.json").mkdir()
    for command, file, before in ((["zoo", "generate", "--count", "2"], "gen-s0-0001.json", " (1 of 2 in place before it)"),
                                  (["zoo", "prune", str(out / "gen-s0-0000.json"), "--ratios", "50"],
                                   "gen-s0-0000-p50-l1-s0.json", "")):
        refused = runner.invoke(app, [*command, "--out", str(tmp_path / "taken")])
        assert refused.exit_code == 1 and str(refused.exception) == (
            f"cannot write network spec {tmp_path / 'taken' / file}: Is a directory{before}"), refused.exception


def test_an_experiment_named_with_a_folder_cannot_take_the_specs_outside_experiments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The specs' default folder is experiments/<experiment>/networks: -e ../../escape wrote two levels
    above experiments/, -e /abs/path there, until 0.9.7. Now one line, before anything is drawn or
    written; --out, or a plain name, still goes."""
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    for name in ("../../escape", str(tmp_path / "abs"), "..", "a\\b"):
        for args in (["zoo", "generate", "--count", "1"], ["zoo", "prune", "squeezenet1_1", "--ratios", "0"]):
            out = runner.invoke(app, ["-e", name, *args])
            assert out.exit_code == 1 and str(out.exception) == (
                f"-e {name!r} names a folder, and the specs' default folder, experiments/<experiment>/networks, is made "
                "of it: give --out, or an experiment of a plain name"), out.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b"]  # nothing written anywhere
    assert runner.invoke(app, ["-e", "../../escape", "zoo", "generate", "--count", "1", "--out", "nets"]).exit_code == 0
    assert runner.invoke(app, ["-e", "mine", "zoo", "generate", "--count", "1"]).exit_code == 0
    assert (work / "nets" / "gen-s0-0000.json").is_file() and (work / "experiments" / "mine" / "networks").is_dir()


def test_describe_json_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = json.loads(runner.invoke(app, ["describe", "resnet18", "--batch-size", "4", "--format", "json"]).stdout)
    assert data["params"] == 11_689_512 and data["batch_size"] == 4 and data["nodes"] == 71
    # resnet18's block inputs are read by two layers and its ReLUs work in place: kept once, below the per-layer sum
    assert 0 < data["kept_activation_bytes"] < data["saved_activation_bytes"]
    table = runner.invoke(app, ["describe", "resnet18", "--batch-size", "4"]).stdout
    assert f"kept_activation_bytes: {data['kept_activation_bytes']:,}" in table
    # --nodes: a row per node in the table too (only the JSON had them until 0.9.1)
    nodes = runner.invoke(app, ["describe", "resnet18", "--batch-size", "4", "--nodes"]).stdout
    assert "│ 1  │ conv1 " in nodes and "│ Conv2d " in nodes and len([x for x in nodes.splitlines() if x.startswith("│")]) == 71
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    result = runner.invoke(app, ["describe", str(bad)])
    assert result.exit_code != 0 and "is not a network spec" in str(result.exception)
    # A reference with a folder or a suffix is a file, never a zoo name: said as one.
    (tmp_path / "campaign.toml").write_text("[measure]\nbatch_sizes = [1]\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nets").mkdir()
    for ref, message in [(str(tmp_path / "campaign.toml"), f"{tmp_path / 'campaign.toml'} is not a network spec: not JSON"),
                         ("nothere.toml", "network spec nothere.toml does not exist"),
                         ("./resnet18", "network spec ./resnet18 does not exist"),  # the zoo's until 0.9.4
                         (str(tmp_path), f"network spec {tmp_path} is a folder, not a file"),
                         ("nets", "network spec nets is a folder, not a file"),
                         ("/dev/null", "network spec /dev/null is not a regular file")]:  # "does not exist" until 0.9.6
        result = runner.invoke(app, ["describe", ref])
        assert result.exit_code != 0 and str(result.exception).startswith(message), result.exception
    empty = runner.invoke(app, ["describe", ""])  # a usage error naming the argument, status 2 (1 until 0.9.10)
    assert empty.exit_code == 2 and "Invalid value for 'model': '' names no network" in empty.output, empty.output
    # A spec's keys of the wrong type are one line (a traceback from int() until 0.9.3), and a name
    # with a folder in it is refused: `zoo prune` wrote its spec outside --out
    good = json.loads(runner.invoke(app, ["zoo", "generate", "-n", "1", "--input-size", "64", "--out", "g",
                                          "--format", "json"]).stdout)[0]
    for key, value, message in [("input_size", "abc", "spec key 'input_size' must be an integer >= 1, got 'abc'"),
                                ("in_channels", [3], "spec key 'in_channels' must be an integer >= 1, got [3]"),
                                ("input_shape", "abc", "spec key 'input_shape' must be a list of integers >= 1, got 'abc'"),
                                ("name", "../escaped", "spec key 'name' must be a plain name, without a folder, got '../escaped'"),
                                ("name", None, "spec key 'name' must be a plain name, without a folder, got None"),
                                ("base", None, "spec key 'base' must name the network pruned, got None"),
                                # a generated network's own keys, its file named too (unnamed until 0.9.5)
                                ("stages", [{"style": "vgg", "depth": 1, "width": 0}],
                                 "spec key 'stages[0].width' must be an integer from 1 to 8,192, got 0"),
                                # any size was read, and 10**12 asked for 512 TB: a traceback (until 0.9.7)
                                ("stages", [{"style": "vgg", "depth": 1, "width": 10**12, "kernel": 3}],
                                 "spec key 'stages[0].width' must be an integer from 1 to 8,192, got 1000000000000"),
                                ("input_size", 10**6, "spec key 'input_size' must be at most 8,192, got 1000000"),
                                ("kind", "bogus", "unknown kind 'bogus' (expected generated, pruned or module)")]:
        spec = {**json.loads(Path(good).read_text()), key: value}
        bad.write_text(json.dumps(spec))
        for args in (["describe", str(bad)], ["zoo", "prune", str(bad), "--ratios", "50", "--out", "pruned"]):
            result = runner.invoke(app, args)
            assert result.exit_code == 1 and str(result.exception) == f"{bad}: {message}", (args, result.exception)
    assert not (tmp_path / "pruned").exists() and not list(tmp_path.glob("escaped*"))


def test_a_generated_network_is_refused_below_the_input_size_zoo_generate_takes(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``describe``, ``profile network`` and ``predict`` with ``--input-size 8`` of a generated spec (or one
    pruned from it) described and measured it at 8 px, under the 32 ``zoo generate`` refuses to go below
    (until 0.9.8): one line now, the same check's, before a store is made."""
    monkeypatch.chdir(tmp_path)
    made = runner.invoke(app, ["zoo", "generate", "-n", "1", "--input-size", "64", "--out", "g", "--format", "json"])
    spec = json.loads(made.stdout)[0]
    pruned = json.loads(runner.invoke(app, ["zoo", "prune", spec, "--ratios", "50", "--out", "p", "--format", "json"]).stdout)[0]
    rule = "input_size must be at least 32 (the stem's stride times 2 for each of 4 stages), got"
    for ref, name in ((spec, "gen-s0-0000"), (pruned, "gen-s0-0000-p50-l1-s0")):
        for args in (["describe", ref, "--input-size", "8"],
                     ["--tracking-uri", "s", "profile", "network", ref, "--input-size", "16", "--time-cap", "0.2"],
                     ["--tracking-uri", "s", "predict", ref, "--input-size", "31"]):
            out = runner.invoke(app, args)
            assert out.exit_code == 1 and str(out.exception) == f"{name}: {rule} {args[args.index('--input-size') + 1]}", \
                (args, out.output, out.exception)
    assert not Path("s").exists()
    small = runner.invoke(app, ["zoo", "generate", "-n", "1", "--input-size", "16", "--out", "h"])
    assert small.exit_code == 1 and str(small.exception) == f"--input-size: {rule} 16"
    described = json.loads(runner.invoke(app, ["describe", spec, "--input-size", "32", "--format", "json"]).stdout)
    assert described["input_size"] == 32  # the least is taken


def test_a_zoo_name_is_the_zoos_network_whatever_file_of_that_name_is_here(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec file named as a zoo network in the current folder (``squeezenet1_1``) was described and
    profiled in the zoo network's place, without a word (until 0.9.8). A zoo name is the zoo's network,
    as a campaign's ``zoo`` entries and the name a measuring child rebuilds always were, and says on
    stderr that the file is ``./NAME``; a bare name the zoo lacks is still the file of that name."""
    from tracker.profile.job import job_network
    from tracker.zoo.generator import generate_spec

    monkeypatch.chdir(tmp_path)
    spec = json.dumps(generate_spec(0, 0, input_size=64))
    Path("squeezenet1_1").write_text(spec)
    Path("mynet").write_text(spec)
    note = "note: squeezenet1_1 is the zoo's network, not the file squeezenet1_1 in this folder: for the file, give " \
           "./squeezenet1_1\n"
    for ref, name, said in (("squeezenet1_1", "squeezenet1_1", note), ("./squeezenet1_1", "gen-s0-0000", ""),
                            ("mynet", "gen-s0-0000", "")):
        out = runner.invoke(app, ["describe", ref, "--format", "json"])
        assert out.exit_code == 0 and json.loads(out.stdout)["model"] == name and out.stderr == said, (ref, out.output)
    predicted = runner.invoke(app, ["--tracking-uri", "s", "predict", "squeezenet1_1"])  # said before the store's error
    assert predicted.exit_code == 1 and predicted.stderr.startswith(note), predicted.stderr
    # a job file's model, relative to its folder: the zoo's too; ./NAME the file
    assert job_network("squeezenet1_1", tmp_path, "job.toml") is None
    assert job_network("./squeezenet1_1", tmp_path, "job.toml")["name"] == "gen-s0-0000"


def test_a_spec_too_large_to_build_is_one_line_before_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A width of 10**12 asked the allocator for 512 TB: a traceback from describe, predict and zoo
    prune, and from profile after it made a store (until 0.9.7). Sizes are bounded (MAX_SPEC_SIZE), and
    a spec within them that still needs more memory than the machine gives (a 8191-wide kernel) is one
    line too."""
    monkeypatch.chdir(tmp_path)
    good = json.loads(Path(json.loads(runner.invoke(app, ["zoo", "generate", "-n", "1", "--input-size", "64", "--out",
                                                          "g", "--format", "json"]).stdout)[0]).read_text())
    cases = {"wide.json": ({"style": "vgg", "depth": 1, "width": 10**12, "kernel": 3},
                           "wide.json: spec key 'stages[0].width' must be an integer from 1 to 8,192, got 1000000000000")}
    for name, (stage, message) in cases.items():
        Path(name).write_text(json.dumps({**good, "stages": [stage, *good["stages"][1:]]}))
        for args in (["describe", name], ["--tracking-uri", "s", "profile", "network", name, "--time-cap", "0.2"],
                     ["--tracking-uri", "s", "predict", name], ["zoo", "prune", name, "--ratios", "50", "--out", "p"]):
            out = runner.invoke(app, args)
            if "predict" in args and name == "huge.json":  # it is described after the champions are found
                assert "no fingerprint" in str(out.exception)
                continue
            assert out.exit_code == 1 and str(out.exception).startswith(message.split("(an allocation")[0]), (args, out.exception)
        if name == "wide.json":  # refused as the file is read: before a store is made
            assert not Path("s").exists()
    assert not Path("p").exists()
    # within the bounds, yet more than the process may have (its address space capped at 8 GB, so that the
    # 68.7 GB the network's weights ask for are refused on any machine)
    Path("huge.json").write_text(json.dumps({**good, "stages": [{"style": "vgg", "depth": 1, "width": 8192, "kernel": 8191},
                                                                *good["stages"][1:]]}))
    import resource
    import subprocess
    import sys

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, 8 * 2**30))

    proc = subprocess.run([sys.executable, "-m", "tracker", "describe", "huge.json"], capture_output=True, text=True,
                          timeout=300, preexec_fn=capped)
    assert proc.returncode == 1 and proc.stderr.startswith(
        "error: network gen-s0-0000 needs more memory than this machine gives to be built (an allocation of "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_prune_offers_the_methods_pruning_knows_and_names_them_in_its_help() -> None:
    """--method is a choice (since 0.9.32; ``<str>`` in its help before), and so is ``data synth --kind``:
    each choice is the library's own list, so one added there and not here, or the reverse, fails this test."""
    from tracker.cli.data import DatasetKind
    from tracker.cli.zoo import PruneMethod
    from tracker.data.synth import KINDS
    from tracker.zoo.pruning import METHODS

    assert tuple(m.value for m in PruneMethod) == METHODS and tuple(k.value for k in DatasetKind) == KINDS
    helped = runner.invoke(app, ["zoo", "prune", "--help"], terminal_width=200)
    assert helped.exit_code == 0 and "<l1|random>" in helped.output, helped.output


def test_prune_writes_specs_that_shrink(tmp_path: Path) -> None:
    result = runner.invoke(app, ["-e", "prn", "zoo", "prune", "resnet18", "--ratios", "0,50,0.5,50", "--out", str(tmp_path),
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    p0, p50, half_pct = json.loads(result.stdout)  # 50 named twice is one network; 0.5 % is not the unpruned one
    assert [Path(p).name for p in (p0, p50, half_pct)] == [
        "resnet18-p0-l1-s0.json", "resnet18-p50-l1-s0.json", "resnet18-p0.5-l1-s0.json"]
    assert json.loads(Path(p0).read_text())["ratio"] == 0.0 and json.loads(Path(half_pct).read_text())["ratio"] == 0.005
    d0 = json.loads(runner.invoke(app, ["describe", p0, "--format", "json"]).stdout)
    d50 = json.loads(runner.invoke(app, ["describe", p50, "--format", "json"]).stdout)
    assert d0["params"] == 11_689_512 and 0.15 * d0["params"] < d50["params"] < 0.6 * d0["params"]
    assert d50["flops"] < d0["flops"]
    bad = runner.invoke(app, ["zoo", "prune", "resnet18", "--ratios", "0,120", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and not (tmp_path / "x").exists()
    assert str(bad.exception) == "--ratios are percentages from 0 to under 100, got 120"
    # a seed with l1 named a second spec of the same network (-s5 beside -s0) until 0.9.4
    seeded = runner.invoke(app, ["zoo", "prune", "resnet18", "--ratios", "50", "--seed", "5", "--out", str(tmp_path / "x")])
    assert seeded.exit_code == 1 and not (tmp_path / "x").exists()
    assert str(seeded.exception).startswith("a seed is for method random, got seed 5 with l1")
    # a pruned spec whose widths name no layer of its base: which network said (the layer alone until 0.9.5)
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({**json.loads(Path(p50).read_text()), "widths": {"nope": 3}}))
    built = runner.invoke(app, ["describe", str(odd)])
    assert str(built.exception) == "pruned network resnet18-p50-l1-s0: unknown layer 'nope': not a Conv2d of ResNet"
    # widths of none, or lacking a layer, measured the unpruned layers under the pruned name, and any ratio was
    # read (until 0.9.6)
    whole = json.loads(Path(p50).read_text())
    lacking = {k: v for k, v in whole["widths"].items() if k != "layer1.0.conv1"}
    for change, message in (({"widths": {}}, f"{odd}: spec key 'widths' must map each convolution of the base to its "
                                              "channels (whole numbers from 1 to 8,192), got {}"),
                            ({"ratio": 150}, f"{odd}: spec key 'ratio' must be a number in [0, 1), got 150"),
                            ({"widths": lacking}, "pruned network resnet18-p50-l1-s0: widths lack 1 of the base's 20 "
                                                  "convolutions (layer1.0.conv1 first): a pruned spec gives each its channels")):
        odd.write_text(json.dumps({**whole, **change}))
        refused = runner.invoke(app, ["describe", str(odd)])
        assert refused.exit_code == 1 and str(refused.exception) == message, refused.exception
    # a network with no convolution, an empty --ratios entry, a file as --out: one line, nothing written (until
    # 0.9.6: a spec written, the entry passed over, "Not a directory: afile.txt")
    (tmp_path / "flat.py").write_text("import torch\n\n\ndef net():\n    return torch.nn.Sequential(torch.nn.Flatten())\n")
    (tmp_path / "afile.txt").write_text("")
    for args, message in (([f"{tmp_path}/flat.py:net", "--ratios", "50", "--out", str(tmp_path / "y")],
                           "flat.net has no convolution (Conv2d) to prune: pruning removes convolutions' filters"),
                          (["resnet18", "--ratios", "0,,50", "--out", str(tmp_path / "y")],
                           "--ratios '0,,50': an empty entry (two commas together, or one at an end)"),
                          (["resnet18", "--ratios", "50", "--out", str(tmp_path / "afile.txt")],
                           f"--out {tmp_path / 'afile.txt'}: {tmp_path / 'afile.txt'} is a file, not a folder"),
                          # convolutions none of which pruning can follow: the network itself, "pruned", until 0.9.7
                          (["swin_t", "--ratios", "0,50", "--out", str(tmp_path / "y")],
                           "swin_t: none of its convolutions can be pruned (permute (permute) is not understood by the "
                           "analysis): a pruned spec of it would be the network itself")):
        refused = runner.invoke(app, ["zoo", "prune", *args])
        assert refused.exit_code == 1 and str(refused.exception) == message, refused.exception
    assert not (tmp_path / "y").exists()


def test_a_bad_width_of_a_pruned_spec_is_named_by_its_layer(tmp_path: Path) -> None:
    """A pruned spec with one bad width among many: the line said the start of the whole ``widths`` map
    (cut at 80 characters, the bad value past the cut unseen) until 0.9.8; it names the layer and its value."""
    widths = {f"layer{i}.conv{j}": 64 for i in range(1, 5) for j in (1, 2)}
    spec = {"format": "tracker.netspec/1", "kind": "pruned", "name": "resnet18-p50-l1-s0", "base": "resnet18",
            "ratio": 0.5, "method": "l1", "seed": 0}
    odd = tmp_path / "odd.json"
    for layer, value, said in (("layer4.conv2", 0, "0"), ("layer3.conv1", 10**12, "1000000000000"),
                               ("layer2.conv2", "64", "'64'"), ("layer1.conv1", True, "True")):
        odd.write_text(json.dumps({**spec, "widths": {**widths, layer: value}}))
        for args in (["describe", str(odd)], ["zoo", "prune", str(odd), "--out", str(tmp_path / "p")]):
            out = runner.invoke(app, args)
            assert out.exit_code == 1 and str(out.exception) == (
                f"{odd}: spec key 'widths': layer '{layer}' has {said} channels; each must be a whole number from 1 "
                "to 8,192"), out.exception
    odd.write_text(json.dumps({**spec, "widths": {**widths, "x" * 100: -1}}))  # a long name cut, on one line
    said = str(runner.invoke(app, ["describe", str(odd)]).exception)
    assert said == f"{odd}: spec key 'widths': layer '{'x' * 58}… has -1 channels; each must be a whole number from 1 to 8,192"


def test_a_spec_seed_outside_what_zoo_takes_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """A pruned spec's seed (the draw of its filters) and a generated one's are whole numbers from 0 to
    2**32-1, as ``--seed`` and a campaign file's seeds: until 0.9.12 a pruned spec's -1 was built as
    seed 1's network, one past 2**32 taken, and one not a whole number said only as its network was
    built, the file unnamed ("pruned network ...: pruning seed must be an integer"); status 1, a bad file."""
    pruned = runner.invoke(app, ["zoo", "prune", "squeezenet1_1", "--ratios", "50", "--method", "random", "--seed", "3",
                                 "--out", str(tmp_path / "p"), "--format", "json"])
    generated = runner.invoke(app, ["zoo", "generate", "--count", "1", "--seed", "7", "--input-size", "64",
                                    "--out", str(tmp_path / "g"), "--format", "json"])
    assert pruned.exit_code == 0 and generated.exit_code == 0, pruned.output + generated.output
    odd = tmp_path / "odd.json"
    for made in (pruned, generated):
        spec = json.loads(Path(json.loads(made.stdout)[0]).read_text())
        for seed, rule in ((-1, "must be from 0 to 4294967295, got -1"),
                           (2**32, "must be from 0 to 4294967295, got 4294967296"),
                           (1.5, "must be a whole number from 0 to 4294967295, got 1.5"),
                           ("3", "must be a whole number from 0 to 4294967295, got '3'"),
                           (True, "must be a whole number from 0 to 4294967295, got True")):
            odd.write_text(json.dumps({**spec, "seed": seed}))
            for args in (["describe", str(odd)], ["--tracking-uri", str(tmp_path / "runs"), "profile", "network", str(odd)]):
                refused = runner.invoke(app, args)
                assert refused.exit_code == 1 and str(refused.exception) == f"{odd}: spec key 'seed' {rule}", (
                    args, seed, refused.exception)
        odd.write_text(json.dumps({**spec, "seed": 2**32 - 1}))  # the largest is taken
        assert runner.invoke(app, ["describe", str(odd)]).exit_code == 0
    # a pruned spec's base_spec is checked as a spec of its own: its seed too
    base = json.loads(Path(json.loads(generated.stdout)[0]).read_text())
    spec = json.loads(Path(json.loads(pruned.stdout)[0]).read_text())
    odd.write_text(json.dumps({**spec, "base_spec": {**base, "seed": -5}}))
    refused = runner.invoke(app, ["describe", str(odd)])
    assert refused.exit_code == 1 and str(refused.exception) == (
        f"{odd}: base_spec: spec key 'seed' must be from 0 to 4294967295, got -5"), refused.exception
    assert not (tmp_path / "runs").exists()  # nothing measured, no store made


def test_a_pruned_spec_of_l1_with_a_seed_is_refused_as_zoo_prune_refuses_it(tmp_path: Path) -> None:
    """l1 keeps the filters of largest L1 norm, whatever the seed: ``zoo prune --seed 5`` refuses it, and
    a spec file saying it was taken, its network built as seed 0's, until 0.9.12; it is refused in the
    same words, naming the file, status 1 (a bad file), before anything is measured; so is a method that
    is none, said until then only once the network was built, the file unnamed."""
    made = runner.invoke(app, ["zoo", "prune", "squeezenet1_1", "--ratios", "50", "--out", str(tmp_path / "p"),
                               "--format", "json"])
    assert made.exit_code == 0, made.output
    spec = json.loads(Path(json.loads(made.stdout)[0]).read_text())
    assert (spec["method"], spec["seed"]) == ("l1", 0)
    odd = tmp_path / "odd.json"
    for changed, said in (({"seed": 5}, "a seed is for method random, got seed 5 with l1: l1 keeps the filters of "
                                        "largest L1 norm, the same whatever the seed"),
                          ({"method": "l2"}, "unknown pruning method 'l2'; use one of l1, random")):
        odd.write_text(json.dumps({**spec, **changed}))
        for args in (["describe", str(odd)], ["zoo", "prune", str(odd), "--ratios", "25", "--out", str(tmp_path / "q")],
                     ["--tracking-uri", str(tmp_path / "runs"), "profile", "network", str(odd)]):
            refused = runner.invoke(app, args)
            assert refused.exit_code == 1 and str(refused.exception) == f"{odd}: {said}", (args, refused.exception)
    odd.write_text(json.dumps({**spec, "method": "random", "seed": 5}))  # a seed is random's draw
    assert runner.invoke(app, ["describe", str(odd)]).exit_code == 0
    assert not (tmp_path / "runs").exists() and not (tmp_path / "q").exists()  # nothing measured or written


def test_segmentation_networks_are_in_the_zoo_described_and_trained_on_per_pixel_classes(tmp_path: Path) -> None:
    """Since 0.8.5 the zoo has torchvision's segmentation networks (a tensor in, a dict out), built
    without weights for them or their backbone: described (FLOPs as torch's FLOP counter counts
    them), and measured in training on random classes per pixel (their dict's ``out``); at batch 1
    DeepLabV3's pooled branch cannot train (BatchNorm of one value a channel): a FAILED run that
    says so. A training job, which trains on classification folders or detection boxes, refuses them."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tracker.zoo import build_model

    seg = json.loads(runner.invoke(app, ["zoo", "list", "--family", "segmentation", "--format", "json"]).stdout)
    assert seg == ["deeplabv3_mobilenet_v3_large", "deeplabv3_resnet101", "deeplabv3_resnet50", "fcn_resnet101",
                   "fcn_resnet50", "lraspp_mobilenet_v3_large"]
    assert set(seg) <= set(json.loads(runner.invoke(app, ["zoo", "list", "--format", "json"]).stdout))
    assert not set(seg) & set(json.loads(runner.invoke(app, ["zoo", "list", "--family", "classification",
                                                             "--format", "json"]).stdout))
    described = json.loads(runner.invoke(app, ["describe", "lraspp_mobilenet_v3_large", "--input-size", "96",
                                               "--format", "json"]).stdout)
    model = build_model("lraspp_mobilenet_v3_large")
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        assert set(model(torch.randn(1, 3, 96, 96))) == {"out"}
    assert described["params"] == 3_221_538 and described["flops"] == counter.get_total_flops()
    store = tmp_path / "s"
    trained = runner.invoke(app, ["--tracking-uri", str(store), "profile", "network", "lraspp_mobilenet_v3_large",
                                  "-b", "2", "--input-size", "64", "--phase", "training", "--time-cap", "0.5",
                                  "--precision", "0.2", "--format", "json"])
    assert trained.exit_code == 0 and json.loads(trained.stdout)["status"] == "FINISHED", trained.output
    one = json.loads(runner.invoke(app, ["--tracking-uri", str(store), "profile", "network",
                                         "deeplabv3_mobilenet_v3_large", "-b", "1", "--input-size", "64", "--phase",
                                         "training", "--time-cap", "0.5", "--format", "json"]).stdout)
    assert one["status"] == "FAILED" and one["failure_message"].startswith(
        "ValueError: Expected more than 1 value per channel when training")
    job = tmp_path / "job.toml"
    (tmp_path / "data").mkdir()
    job.write_text('model = "fcn_resnet50"\n[data]\npath = "data"\n')
    refused = runner.invoke(app, ["--tracking-uri", str(store), "profile", "training", str(job)])
    assert refused.exit_code == 1 and str(refused.exception).startswith(
        f"{job}: model 'fcn_resnet50' is a segmentation network, and a training job trains on classification "
        "folders or detection boxes, not masks")


def test_prune_ratios_under_one_percent_are_written_and_said(tmp_path: Path) -> None:
    """--ratios are percentages: ``--ratios 0.25,0.5`` (fractions, as torch's pruning takes them) wrote networks
    pruned 0.25 % and 0.5 %, all but the unpruned one, without a word until 0.9.30. Written as asked, and where
    none is above 1 and one is not whole a note on stderr gives the percentages meant; others say nothing."""
    said = runner.invoke(app, ["zoo", "prune", "squeezenet1_1", "--ratios", "0,0.25,0.5", "--out", str(tmp_path / "a")])
    assert said.exit_code == 0, said.output
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "squeezenet1_1-p0-l1-s0.json", "squeezenet1_1-p0.25-l1-s0.json", "squeezenet1_1-p0.5-l1-s0.json"]
    assert said.stderr == ("note: --ratios are percentages, none above 1 here (0, 0.25, 0.5 % of the channels "
                           "pruned); for those fractions of the channels give --ratios 0,25,50\n")
    ends = runner.invoke(app, ["zoo", "prune", "squeezenet1_1", "--ratios", "0.5,1", "--out", str(tmp_path / "b")])
    assert ends.exit_code == 0 and ends.stderr.startswith("note: --ratios are percentages, none above 1 here (0.5, 1 %")
    # 1 as a fraction is every channel, which --ratios refuses: not suggested as 100
    assert ends.stderr.endswith("give --ratios 50 (1 as a fraction would prune every channel: left out)\n")
    for ratios in ("0,25,50", "0.5,1.5", "0", "1"):
        quiet = runner.invoke(app, ["zoo", "prune", "squeezenet1_1", "--ratios", ratios, "--out", str(tmp_path / ratios)])
        assert quiet.exit_code == 0 and quiet.stderr == "", (ratios, quiet.stderr)
