"""`tracker import perf4sight` on the real TX2 files in ../shared."""

import csv
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from tracker.cli.app import app
from tracker.describe.features import node_rows
from tracker.describe.graph import Description
from tracker.imports.perf4sight import read_configs, read_descriptions, records
from tracker.settings import resolve_location

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "perf4sight-tx2"
#: The tests of the real files; the others write small perf4sight folders of their own, and run where the data is absent.
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/datasets/perf4sight-tx2 is not beside this checkout")


@needs_data
def test_reading_collapses_duplicates_and_keeps_failures() -> None:
    configs = read_configs(DATA)
    raw = {}
    for path in (DATA / "latency").glob("*-gt.csv"):
        with path.open() as fh:
            for row in csv.DictReader(fh, delimiter="|"):
                raw.setdefault((path.name.removesuffix("-gt.csv"), int(row["bs"])), []).append(row)
    assert set(configs) == set(raw) | {k for k in configs if k not in raw}
    dup = next(k for k, rows in raw.items() if sum(r["passed"] == "True" for r in rows) > 1)
    assert len(configs[dup].latency) > 1
    failed = next(k for k, rows in raw.items() if all(r["passed"] == "False" for r in rows))
    assert configs[failed].latency == [] and configs[failed].latency_failed >= 1


@needs_data
def test_duplicates_collapsed_counts_every_repeated_row() -> None:
    rows, configs = 0, set()
    for kind in ("latency", "memory"):
        for path in (DATA / kind).glob("*-gt.csv"):
            with path.open() as fh:
                for row in csv.DictReader(fh, delimiter="|"):
                    rows += 1
                    configs.add((kind, path.name, row["bs"]))
    _, stats = records(DATA)
    assert stats["duplicates_collapsed"] == rows - len(configs) > 200  # failed repeats too (99 until 0.9.6)


@needs_data
def test_imported_descriptions_have_the_same_rows_as_traced_ones() -> None:
    from tracker.describe import describe

    descs = read_descriptions(DATA)
    assert len(descs) == 84
    imported = descs["resnet18_0"]
    traced = describe("resnet18")
    a, b = node_rows(imported, 4), node_rows(traced, 4)
    assert list(a[0]) == list(b[0])  # the same columns
    assert sum(r["params"] for r in a) == 11_689_512 == sum(r["params"] for r in b)
    assert sum(r["flops"] for r in a) == sum(r["flops"] for r in b)


@needs_data
def test_import_twice_adds_nothing(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["--tracking-uri", str(tmp_path / "store"), "import", "perf4sight", str(DATA), "--format", "json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    stats = json.loads(first.stdout)
    assert stats["imported"] == stats["configurations"] > 2000 and stats["failed"] > 0
    assert stats["experiment"] == "perf4sight-tx2"  # said, in the table's line too (unsaid until 0.9.5)
    second = json.loads(runner.invoke(app, args).stdout)
    assert second["imported"] == 0 and second["already_present"] == stats["configurations"]

    client = MlflowClient(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("perf4sight-tx2")
    runs = client.search_runs([exp.experiment_id], max_results=50000)
    assert len(runs) == stats["configurations"]
    failed = [r for r in runs if r.info.status == "FAILED"]
    assert len(failed) == stats["failed"] and all(r.data.tags["tracker.failure_reason"] == "perf4sight_failed" for r in failed)
    assert all("latency_ms" not in r.data.metrics for r in failed)
    ok = [r for r in runs if r.info.status == "FINISHED"]
    assert all(r.data.params["device"] == "jetson-tx2" and r.data.tags["env.device_model"] == "jetson-tx2" for r in ok)
    assert {r.data.tags["env.memory_total_mb"] for r in runs} == {"7859"}  # the CSVs' capacity: the board's memory
    r18 = [r for r in ok if r.data.params["model"] == "resnet18_0"]
    smallest = min(r18, key=lambda r: int(r.data.params["batch_size"]))
    desc = Description.from_json(json.loads(Path(client.download_artifacts(smallest.info.run_id, "description/description.json", str(tmp_path))).read_text()))
    assert desc.description_hash == smallest.data.params["model_hash"]

    # its failures (mostly out of memory, not said which) are not oom runs, but show where they lie
    wh = tmp_path / "w.duckdb"
    assert runner.invoke(app, ["--tracking-uri", str(tmp_path / "store"), "warehouse", "load", "-w", str(wh)]).exit_code == 0
    rows = json.loads(runner.invoke(app, ["sql", "SELECT largest_fitting_batch, smallest_oom_batch, smallest_failed_batch, "
                                          "smallest_failed_reason FROM oom_boundary WHERE model = 'squeezenet_60'", "-w",
                                          str(wh), "--format", "json"]).stdout)
    fits = max(int(r.data.params["batch_size"]) for r in ok if r.data.params["model"] == "squeezenet_60")
    failed_at = min(int(r.data.params["batch_size"]) for r in failed if r.data.params["model"] == "squeezenet_60")
    assert rows == [{"largest_fitting_batch": fits, "smallest_oom_batch": None, "smallest_failed_batch": failed_at,
                     "smallest_failed_reason": "perf4sight_failed"}]
    # where a target was measured names the board once ("jetson-tx2/jetson-tx2 (training)" until 0.9.5)
    elsewhere = runner.invoke(app, ["--tracking-uri", str(tmp_path / "store"), "fingerprint", "train", "--target",
                                    "latency_ms", "-w", str(wh), "--device", "cpu"])
    assert elsewhere.exit_code == 1 and str(elsewhere.exception).endswith("latency_ms was measured on: jetson-tx2 (training)")
    # its pictures leave the mode it lacks unsaid ("resnet18: training on jetson-tx2, mode None" until 0.9.5)
    drawn = runner.invoke(app, ["--tracking-uri", str(tmp_path / "store"), "-e", "perf4sight-tx2", "report",
                                str(tmp_path / "rep"), "-w", str(wh), "--no-load", "--no-log"])
    page = (tmp_path / "rep" / "index.html").read_text()
    assert drawn.exit_code == 0 and "resnet18: training on jetson-tx2, 224 px: latency" in page and "None" not in page
    # A configuration with a passed memory row and no latency row is its memory, finished (until 0.9.0
    # FAILED: its memory lost, and resnet18_50 "failed" at batch 210 below a batch 220 that fit).
    memory_only = next(r for r in runs if r.data.params["model"] == "resnet18_50" and r.data.params["batch_size"] == "210")
    assert memory_only.info.status == "FINISHED" and "latency_ms" not in memory_only.data.metrics
    assert memory_only.data.metrics["peak_mem_mb"] > 6000
    [r18] = json.loads(runner.invoke(app, ["sql", "SELECT largest_fitting_batch, smallest_failed_batch FROM oom_boundary "
                                           "WHERE model = 'resnet18_50'", "-w", str(wh), "--format", "json"]).stdout)
    assert r18["smallest_failed_batch"] > r18["largest_fitting_batch"] >= 220, r18


@needs_data
def test_a_wrong_folder_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--tracking-uri", str(tmp_path / "s"), "import", "perf4sight", str(tmp_path)])
    assert result.exit_code != 0 and "not a perf4sight TX2 folder" in str(result.exception)
    assert not (tmp_path / "s").exists()  # nothing was created


def _spoilt(tmp_path: Path, name: str, spoil) -> str:  # noqa: ANN001
    import shutil

    folder = tmp_path / name
    shutil.copytree(DATA, folder)
    spoil(folder)
    return str(folder)


@needs_data
def test_a_folder_it_cannot_read_is_one_line_naming_the_file_before_the_store_is_touched(tmp_path: Path) -> None:
    import gzip

    first = sorted((DATA / "latency").glob("*-gt.csv"))[0].name

    def cell(column: str, value: str):  # noqa: ANN202
        def spoil(folder: Path) -> None:
            path = folder / "latency" / first
            head, row, *rest = path.read_text().splitlines(keepends=True)
            cells = row.split("|")
            cells[head.split("|").index(column)] = value
            cells[head.split("|").index("passed")] = "True"
            path.write_text(head + "|".join(cells) + "".join(rest))
        return spoil

    number = cell("latency", "abc")

    def maybe(folder: Path) -> None:  # a passed that is neither True nor False
        path = folder / "latency" / first
        head, row, *rest = path.read_text().splitlines(keepends=True)
        cells = row.split("|")
        cells[head.split("|").index("passed")] = "Maybe"
        path.write_text(head + "|".join(cells) + "".join(rest))

    cases = [
        (lambda f: (f / "architectures.json.gz").write_bytes(gzip.compress(b"[1, 2]")),
         "architectures.json.gz: architecture 0 is not as perf4sight writes it"),
        (lambda f: (f / "architectures.json.gz").write_bytes(gzip.compress(b'{"net": 1}')),
         "architectures.json.gz: holds a dict; expected a list of objects"),
        (lambda f: (f / "architectures.json.gz").write_text("garbage"), "architectures.json.gz: not gzip-compressed JSON"),
        # a RecursionError's traceback until 0.9.15
        (lambda f: (f / "architectures.json.gz").write_bytes(gzip.compress(b"[" * 100_000)),
         "architectures.json.gz: JSON nested too deeply to read"),
        (number, f"latency/{first}: batch size "),
        # a latency of 0 was a ZeroDivisionError's traceback, one below 0 or a batch of 0 imported, until 0.9.2
        (cell("latency", "0"), "latency '0' is not a measurement (a finite number above 0)"),
        (cell("latency", "-5"), "latency '-5' is not a measurement (a finite number above 0)"),
        (cell("latency", "inf"), "latency 'inf' is not a measurement (a finite number above 0)"),
        (cell("bs", "0"), "batch size 0: not a batch size (from 1 to 1,048,576)"),
        # every command's largest batch (2,000,000 imported, 1 and 400 zeros OverflowError's traceback, until 0.9.13)
        (cell("bs", "2000000"), "batch size 2000000: not a batch size (from 1 to 1,048,576)"),
        (cell("bs", "1" + "0" * 400), f"batch size 1{'0' * 79}: not a batch size (from 1 to 1,048,576)"),
        # digits 0-9 alone: int read ٣ as 3 until 0.9.13
        (cell("bs", "\u0663"), f"latency/{first}: batch size '\u0663' is not a whole number"),
        # float read \u0663 as 3 until 0.9.14
        (cell("latency", "\u0663"), "latency '\u0663' is not a number"),
        # a throughput past a float's range: refused by the store, after it was made, until 0.9.13
        (cell("latency", "5e-324"), "latency '5e-324' is not a measurement (its throughput is past a float's range)"),
        # an empty file, a short row, a passed neither True nor False: tracebacks, or a measurement lost, until 0.9.3
        (lambda f: (f / "latency" / first).write_text(""), f"latency/{first}: no column bs, passed, latency (its header: none;"),
        (lambda f: (f / "latency" / first).write_text((f / "latency" / first).read_text() + "True|1\n"),
         "has no bs (fewer cells than its header)"),
        (maybe, f"latency/{first}: line 2: passed 'Maybe' is neither True nor False"),
        (cell("bs", "x"), f"latency/{first}: batch size 'x' is not a whole number"),
        (lambda f: [(f / kind / first).rename(f / kind / "foo-gt.csv") for kind in ("latency", "memory")],
         "latency/foo-gt.csv: not a perf4sight file name, NETWORK_PCT-gt.csv (resnet50_30-gt.csv)"),
        # isdigit took ² (int did not: a ValueError's traceback) and ٣ until 0.9.13
        *[(lambda f, pct=pct: [(f / kind / first).rename(f / kind / f"resnet18_{pct}-gt.csv") for kind in ("latency", "memory")],
           f"latency/resnet18_{pct}-gt.csv: not a perf4sight file name") for pct in ("\u00b2", "\u0663")],
        (lambda f: (f / "memory" / first).write_bytes((f / "memory" / first).read_bytes() + b"\xff\xfe"),
         f"memory/{first}: not UTF-8 text"),
        (lambda f: (f / "latency" / first).write_text("a,b,c\n1,2,3\n"),
         f"latency/{first}: no column bs, passed, latency (its header: a,b,c;"),
    ]
    for i, (spoil, message) in enumerate(cases):
        folder = _spoilt(tmp_path, f"p{i}", spoil)
        result = CliRunner().invoke(app, ["--tracking-uri", str(tmp_path / "s"), "import", "perf4sight", folder])
        assert result.exit_code == 1 and message in str(result.exception), (message, result.exception)
        assert str(result.exception).startswith(folder)  # the file named
    assert not (tmp_path / "s").exists()  # checked before the store was made
    missing = CliRunner().invoke(app, ["import", "perf4sight", str(tmp_path / "nowhere")])
    assert str(missing.exception) == f"{tmp_path / 'nowhere'} does not exist"


LATENCY = "passed|latency|test_var|bs|dataset|net_name|model\n"
MEMORY = "passed|mem_alloc|mem_reserved|mem_used|mem_avail|free|capacity|test_var|bs|dataset|net_name|model\n"


def small_folder(folder: Path, networks: tuple[str, ...] = ("squeezenet_50", "resnet18_0")) -> Path:
    """A perf4sight folder as perf4sight writes one, small: each network measured at batch 2 and 4, in
    latency/ and memory/, and no architecture."""
    import gzip

    for kind in ("latency", "memory"):
        (folder / kind).mkdir(parents=True)
    for net in networks:
        family = net.rsplit("_", 1)[0]
        (folder / "latency" / f"{net}-gt.csv").write_text(LATENCY + "".join(
            f"True|{30.5 * bs}|latency|{bs}|imagenet|{family}|/m/{net}.py\n" for bs in (2, 4)))
        (folder / "memory" / f"{net}-gt.csv").write_text(MEMORY + "".join(
            f"True|{41.0 * bs}|{51.2 * bs}|{1400.0 + bs}|7171.5|4757.0|7859.0|memory|{bs}|imagenet|{family}|/m/{net}.py\n"
            for bs in (2, 4)))
    (folder / "architectures.json.gz").write_bytes(gzip.compress(b"[]"))
    return folder


def _import(tmp_path: Path, folder: Path):  # noqa: ANN202
    return CliRunner().invoke(app, ["--tracking-uri", str(tmp_path / "s"), "import", "perf4sight", str(folder),
                                    "--format", "json"])


def test_a_small_folder_imports_each_network_and_batch_size(tmp_path: Path) -> None:
    result = _import(tmp_path, small_folder(tmp_path / "p"))
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["imported"] == stats["configurations"] == 4 and stats["without_architecture"] == 4


def test_a_capacity_no_board_has_is_passed_over(tmp_path: Path) -> None:
    """The memory rows' capacity (the board's memory, MB) is the runs' env.memory_total_mb where every row
    gives one; one no board has (1e400, read as infinity) is passed over as one that is no number is: until
    0.9.13 OverflowError's traceback where its tag was written, after the store was made; one in digits of another
    script, which float() reads, was taken until 0.9.14."""
    for name, capacity, tagged in (("inf", "1e400", None), ("big", "1" + "0" * 400, None), ("tx2", "7859.0", "7859")):
        folder = small_folder(tmp_path / name)
        for path in (folder / "memory").glob("*-gt.csv"):
            path.write_text(path.read_text().replace("|7859.0|", f"|{capacity}|"))
        result = _import(tmp_path / name, folder)
        assert result.exit_code == 0, result.output
        client = MlflowClient(resolve_location(str(tmp_path / name / "s")).uri)
        [experiment] = [e for e in client.search_experiments() if e.name == "perf4sight-tx2"]
        assert {r.data.tags.get("env.memory_total_mb") for r in client.search_runs([experiment.experiment_id])} == {tagged}
    folder = small_folder(tmp_path / "arabic")  # read as the import reads it, without a store
    for path in (folder / "memory").glob("*-gt.csv"):
        path.write_text(path.read_text().replace("|7859.0|", "|\u0667\u0668\u0665\u0669|"))
    capacities: set[float] = set()
    read_configs(folder, capacities)
    assert capacities == set()


def test_runs_show_says_an_imported_run_was_imported_not_how_long_the_import_took(tmp_path: Path) -> None:
    """Its start and end are when it was imported (MLflow's), not when the TX2 measured it: `runs show` said
    `started 2026-11-29 07:01:42, 15.9 s`, the seconds the import itself took, until 0.9.10."""
    assert _import(tmp_path, small_folder(tmp_path / "p")).exit_code == 0
    cli = ["--tracking-uri", str(tmp_path / "s"), "-e", "perf4sight-tx2", "runs"]
    listed = CliRunner().invoke(app, [*cli, "list", "--format", "json"])
    run_id = json.loads(listed.stdout)[0]["run_id"]
    shown = CliRunner().invoke(app, [*cli, "show", run_id[:8]])
    assert shown.exit_code == 0, shown.output
    said = shown.stdout.splitlines()[1]
    assert said.endswith(")") and "(experiment 'perf4sight-tx2', imported from perf4sight 20" in said, said
    assert "started" not in said and not said.endswith(" s)"), said


def test_a_folder_without_memory_or_with_a_network_half_measured_is_refused_before_the_store_is_made(
        tmp_path: Path) -> None:
    """Its runs were imported without memory, which a later import of the whole folder could not add
    (importing twice adds nothing), until 0.9.8."""
    import shutil

    no_memory = small_folder(tmp_path / "a")
    shutil.rmtree(no_memory / "memory")
    result = _import(tmp_path, no_memory)
    assert result.exit_code == 1 and str(result.exception) == f"{no_memory} has no memory/ folder: not a perf4sight TX2 folder"

    half = small_folder(tmp_path / "b", ("squeezenet_50", "resnet18_0", "googlenet_10"))
    (half / "memory" / "resnet18_0-gt.csv").unlink()
    (half / "latency" / "googlenet_10-gt.csv").unlink()
    result = _import(tmp_path, half)
    assert result.exit_code == 1 and str(result.exception).startswith(
        f"{half}: resnet18_0-gt.csv in latency/ without its memory/ file; googlenet_10-gt.csv in memory/ without its "
        "latency/ file"), result.exception
    assert not (tmp_path / "s").exists()  # refused before the store was made


def test_two_lines_run_together_are_refused_naming_the_line(tmp_path: Path) -> None:
    """A newline lost between two rows (``sed -i '3{N;s/\\n//}'``) put the second row's cells under no
    column, and its measurement was dropped without a word, until 0.9.8."""
    folder = small_folder(tmp_path / "p")
    path = folder / "latency" / "squeezenet_50-gt.csv"
    head, first, second = path.read_text().splitlines(keepends=True)
    path.write_text(head + first.rstrip("\n") + second)
    result = _import(tmp_path, folder)
    assert result.exit_code == 1 and str(result.exception) == (
        f"{path}: line 2 has more cells than its header (13 for 7; two lines run together?)"), result.exception
    assert not (tmp_path / "s").exists()


def test_a_folder_with_nothing_to_import_is_refused_before_the_store_is_made(tmp_path: Path) -> None:
    """It imported nothing, status 0, and made an empty experiment, until 0.9.8."""
    empty = small_folder(tmp_path / "a", ())
    result = _import(tmp_path, empty)
    assert result.exit_code == 1 and str(result.exception) == (
        f"{empty}: latency/ and memory/ hold no *-gt.csv file: nothing to import"), result.exception
    headers = small_folder(tmp_path / "b", ("squeezenet_50",))
    (headers / "latency" / "squeezenet_50-gt.csv").write_text(LATENCY)
    (headers / "memory" / "squeezenet_50-gt.csv").write_text(MEMORY)
    result = _import(tmp_path, headers)
    assert result.exit_code == 1 and str(result.exception) == f"{headers}: its CSVs hold no rows: nothing to import"
    assert not (tmp_path / "s").exists()


def test_a_byte_order_mark_before_a_header_is_read_past(tmp_path: Path) -> None:
    """It was read as part of the first column's name: "no column passed", until 0.9.8."""
    folder = small_folder(tmp_path / "p")
    for kind in ("latency", "memory"):
        path = folder / kind / "squeezenet_50-gt.csv"
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    result = _import(tmp_path, folder)
    assert result.exit_code == 0, result.exception
    assert json.loads(result.stdout)["imported"] == 4


def test_an_import_interrupted_says_how_many_runs_it_imported_and_the_same_command_imports_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It said main's "interrupted: what was logged before is kept", not how much, until 0.9.8."""
    from tracker.imports import perf4sight
    from tracker.log.logger import RunLogger

    folder = small_folder(tmp_path / "p")
    log = RunLogger.log

    def second_batch_interrupted(self: RunLogger, records, environment=None):  # noqa: ANN001, ANN202
        if self.measured(kind="training", statuses=("FINISHED", "FAILED")):
            raise KeyboardInterrupt
        return log(self, records, environment)

    monkeypatch.setattr(perf4sight, "RUNS_PER_BATCH", 3)
    monkeypatch.setattr(RunLogger, "log", second_batch_interrupted)
    result = _import(tmp_path, folder)
    assert (result.exit_code, result.stderr) == (130, "interrupted: 3 of 4 runs imported into experiment perf4sight-tx2; "
                                                      "run the same command again to import the rest\n"), result.output
    monkeypatch.setattr(RunLogger, "log", log)
    again = json.loads(_import(tmp_path, folder).stdout)
    assert (again["imported"], again["already_present"]) == (1, 3)


def test_an_import_to_a_server_that_cannot_take_it_says_its_runs_wait_in_the_outbox(tmp_path: Path) -> None:
    """A server down (or one refusing the writes): the runs go to the outbox, and the summary says
    how many of the folder's runs wait there, in its table and its JSON; until 0.9.8 it said
    "imported: 4, already present: 0" as if the server had them."""
    from tests.conftest import free_port
    from tracker.log.outbox import pending

    folder = small_folder(tmp_path / "p")
    server = f"http://127.0.0.1:{free_port()}"
    args = ["--tracking-uri", server, "import", "perf4sight", str(folder)]
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "runs go to the outbox" in table.stderr
    assert table.stdout.strip().endswith("imported: 4, already present: 0, in outbox: 4"), table.stdout
    assert sum(len(item.records) for item in pending()) == 4
    # imported again while the server is still down: found in the outbox, not written twice, and said to wait there
    again = CliRunner().invoke(app, [*args, "--format", "json"])
    assert again.exit_code == 0, again.output
    stats = json.loads(again.stdout)
    assert (stats["imported"], stats["already_present"], stats["in_outbox"]) == (0, 4, 4)
    assert sum(len(item.records) for item in pending()) == 4
    # a store that takes them: none waits
    stored = json.loads(_import(tmp_path, folder).stdout)
    assert (stored["imported"], stored["in_outbox"]) == (4, 0)
