"""Import of perf4sight's Jetson TX2 training profiles (``tracker import perf4sight PATH``).

The folder holds ``latency/<net>_<pct>-gt.csv`` and ``memory/<net>_<pct>-gt.csv``
(pipe-delimited, one row per batch size) and ``architectures.json.gz`` (each pruned
network's dataflow graph in torch.fx node form). Each (network, batch size) becomes one
``training`` run on device ``jetson-tx2``:

- a latency or a memory row passed: FINISHED, with ``latency_ms`` where the latency row passed
  (perf4sight: mean of 3 steps after 1 warm-up, CUDA events) and, where the memory row passed,
  ``peak_mem_mb`` (``mem_used``: peak used minus idle, whole board, from /proc/meminfo),
  ``cuda_max_allocated_mb`` and ``cuda_max_reserved_mb``. Since 0.9.0 a configuration whose
  memory row passed and which has no latency row (22 of them, near the largest batches) is a
  finished run of its memory, no latency in it; it was FAILED before, its memory lost to the
  fingerprints and ``oom_boundary`` calling a batch that ran out of memory below one that fit;
- no row passed (``passed=False``): FAILED with reason ``perf4sight_failed`` (mostly out of
  memory; the placeholder values are not kept);
- duplicate rows for one batch size collapse to their median.

The network's description is built from its graph through ``tracker.describe`` (the same
node rows as networks traced here) and attached as ``description/graph.json`` to the run of
its smallest batch size; every run carries the description hash as ``model_hash``. Importing
twice adds nothing (the configuration keys already present, finished or failed, are skipped).
"""

from __future__ import annotations

import csv
import gzip
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from tracker.console import decimal_number, whole_number
from tracker.decode import Undecodable, loads_json
from tracker.describe.graph import Description, Node
from tracker.errors import ConfigError, not_utf8
from tracker.log.logger import RunLogger
from tracker.log.record import DESCRIPTION_ARTIFACT, RunRecord
from tracker.profile.memcap import MAX_LIMIT_MB
from tracker.settings import MAX_BATCH

DEVICE = "jetson-tx2"
SOURCE = "import:perf4sight"
ENVIRONMENT = {
    "env.host": "jetson-tx2 (perf4sight)",
    "env.device_model": DEVICE,
    "env.torch_version": "1.6",
    "env.platform": "Linux-aarch64 (L4T)",
}
FAILURE_REASON = "perf4sight_failed"


@dataclass
class Config:
    network: str  # <net>_<pct>
    batch_size: int
    latency: list[float] = field(default_factory=list)
    latency_failed: int = 0
    memory: list[tuple[float, float, float]] = field(default_factory=list)
    memory_failed: int = 0

    @property
    def family(self) -> str:
        return self.network.rsplit("_", 1)[0]

    @property
    def prune_pct(self) -> int:
        return int(self.network.rsplit("_", 1)[1])  # digits 0-9 (read_configs)


def check_folder(folder: Path) -> None:
    """A ConfigError in one line unless ``folder`` is a folder."""
    if not folder.exists():
        raise ConfigError(f"{folder} does not exist")
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder")


def read_descriptions(folder: Path) -> dict[str, Description]:
    check_folder(folder)
    path = folder / "architectures.json.gz"
    if not path.exists():
        raise ConfigError(f"{folder} has no architectures.json.gz: not a perf4sight TX2 folder")
    try:
        entries = loads_json(gzip.decompress(path.read_bytes()))
    except OSError as exc:  # gzip's BadGzipFile is one
        raise ConfigError(f"{path}: not gzip-compressed JSON ({exc.strerror or exc})") from None
    except EOFError:
        raise ConfigError(f"{path}: cut short (its gzip stream ends early)") from None
    except Undecodable as exc:  # not JSON, not UTF-8, nested too deeply (a traceback until 0.9.15), too many digits
        raise ConfigError(f"{path}: {exc}") from None
    out: dict[str, Description] = {}
    expected = "expected a list of objects with net, prune_pct, input_shape and nodes"
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: holds a {type(entries).__name__}; {expected}")
    i = 0
    try:
        for i, entry in enumerate(entries):
            name = f"{entry['net']}_{entry['prune_pct']}"
            nodes = [
                Node(
                    name=n["name"],
                    op=n["op"],
                    kind=n["kind"],
                    inputs=list(n.get("inputs", [])),
                    out_shape=n.get("out_shape"),
                    attrs=n.get("attrs", {}) or {},
                    params=int(n.get("params", 0) or 0),
                    target=n.get("target"),
                )
                for n in entry["nodes"]
            ]
            out[name] = Description(name, list(entry["input_shape"]), nodes, SOURCE)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"lacks {exc}" if isinstance(exc, KeyError) else f"is not as perf4sight writes it ({exc})"
        raise ConfigError(f"{path}: architecture {i} {what}; {expected}") from None
    return out


#: The columns each CSV must have, by folder.
COLUMNS = {"latency": ("bs", "passed", "latency"), "memory": ("bs", "passed", "mem_used", "mem_alloc", "mem_reserved")}


def _rows(path: Path) -> list[dict[str, str]]:
    """A CSV's rows, or a ConfigError naming the file: not text, or without a column its folder's
    CSVs have (a file with another header was skipped without a word until 0.8.9)."""
    try:
        # a byte-order mark before the header (a file saved by a spreadsheet) is not part of its first
        # column (until 0.9.8: "no column passed (its header: \ufeffpassed|...)")
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh, delimiter="|")
            # read while open (an empty file: a traceback until 0.9.3), each row with the line it ends on
            numbered = [(reader.line_num, row) for row in reader]
            header = reader.fieldnames or []
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {not_utf8(exc)}") from None
    except (OSError, csv.Error) as exc:
        raise ConfigError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if missing := [c for c in COLUMNS[path.parent.name] if c not in header]:
        raise ConfigError(f"{path}: no column {', '.join(missing)} (its header: {'|'.join(header) or 'none'}; "
                          "perf4sight's CSVs are '|'-delimited)")
    for line, row in numbered:  # a row short of cells (None in them): a traceback until 0.9.3
        if short := [c for c in COLUMNS[path.parent.name] if row.get(c) is None]:
            raise ConfigError(f"{path}: line {line} has no {', '.join(short)} (fewer cells than its header)")
        if None in row:  # two lines run together (a newline lost): one measurement dropped without a word until 0.9.8
            raise ConfigError(f"{path}: line {line} has more cells than its header ({len(header) + len(row[None])} "
                              f"for {len(header)}; two lines run together?)")
        if row["passed"] not in ("True", "False"):  # anything else was a failure, its value lost, until 0.9.3
            raise ConfigError(f"{path}: line {line}: passed {row['passed']!r} is neither True nor False")
    return [row for _, row in numbered]


def _number(path: Path, row: dict[str, str], column: str, least: float = 0.0) -> float:
    """A measured value of a passed row: a finite number above ``least`` (0 by default; since 0.9.2 a
    latency of 0 was a ZeroDivisionError's traceback, a negative one a negative throughput)."""
    value = decimal_number(row[column])  # ASCII digits alone (٣.5 was 3.5 until 0.9.14)
    if value is None:
        raise ConfigError(f"{path}: batch size {row.get('bs')}: {column} {row[column]!r} is not a number")
    if not math.isfinite(value) or value <= least:
        raise ConfigError(f"{path}: batch size {row.get('bs')}: {column} {row[column]!r} is not a measurement (a finite "
                          f"number above {least:g})")
    return value


def unpaired(lat_dir: Path, mem_dir: Path) -> None:
    """A ConfigError in one line where a network has a latency CSV and no memory CSV, or the reverse:
    its runs would be imported without the half that is missing, for good, since importing again skips
    every configuration present (they were, without a word, until 0.9.8). Refused rather than warned
    of: the folder is incomplete (perf4sight writes both for each network), and completing it after
    an import could not add what was missing."""
    lat = {p.name for p in lat_dir.glob("*-gt.csv")}
    mem = {p.name for p in mem_dir.glob("*-gt.csv")}
    if lat == mem:
        return
    def said(names: set[str], folder: str) -> str:
        listed = sorted(names)
        return ", ".join(listed[:3]) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "") + f" in {folder}/"
    missing = [f"{said(lat - mem, 'latency')} without its memory/ file" if lat - mem else "",
               f"{said(mem - lat, 'memory')} without its latency/ file" if mem - lat else ""]
    raise ConfigError(f"{lat_dir.parent}: {'; '.join(m for m in missing if m)} (perf4sight writes both for each network; "
                      "a network imported with one alone could not be completed by importing again)")


def read_configs(folder: Path, capacities_mb: set[float] | None = None) -> dict[tuple[str, int], Config]:
    """Every (network, batch size) of the CSVs; ``capacities_mb`` collects the memory rows' ``capacity``
    column (the board's physical memory, MB)."""
    configs: dict[tuple[str, int], Config] = {}
    lat_dir, mem_dir = folder / "latency", folder / "memory"
    if not lat_dir.is_dir():
        raise ConfigError(f"{folder} has no latency/ folder: not a perf4sight TX2 folder")
    # memory/ was optional until 0.9.8: its runs were imported without memory, and as importing twice
    # adds nothing (each configuration present is skipped), the memory could never be added after
    if not mem_dir.is_dir():
        raise ConfigError(f"{folder} has no memory/ folder: not a perf4sight TX2 folder")
    unpaired(lat_dir, mem_dir)

    def config(path: Path, row: dict[str, str]) -> Config:
        network = path.name.removesuffix("-gt.csv")
        family, _, pct = network.rpartition("_")
        # digits 0-9 alone (isdigit took resnet18_², a ValueError's traceback, and resnet18_٣, until 0.9.13)
        if not family or (percent := whole_number(pct)) is None or not percent < 100:
            raise ConfigError(f"{path}: not a perf4sight file name, NETWORK_PCT-gt.csv (resnet50_30-gt.csv)")
        # KeyError: the file's name and the whole row until 0.9.3
        if (bs := whole_number(row.get("bs") or "")) is None:
            raise ConfigError(f"{path}: batch size {row.get('bs')!r:.80} is not a whole number")
        # every command's bound (a batch of 0 imported until 0.9.2; past MAX_BATCH until 0.9.13: 2,000,000 taken,
        # and 1 and 400 zeros OverflowError's traceback)
        if not 1 <= bs <= MAX_BATCH:
            raise ConfigError(f"{path}: batch size {str(bs)[:80]}: not a batch size (from 1 to {MAX_BATCH:,})")
        return configs.setdefault((network, bs), Config(network, bs))

    for path in sorted(lat_dir.glob("*-gt.csv")):
        for row in _rows(path):
            c = config(path, row)
            if row["passed"] == "True":
                latency = _number(path, row, "latency")
                if not math.isfinite(c.batch_size * 1000.0 / latency):  # 5e-324 ms: refused by the store, the
                    # import cut short after its store was made, until 0.9.13
                    raise ConfigError(f"{path}: batch size {c.batch_size}: latency {row['latency']!r} is not a "
                                      "measurement (its throughput is past a float's range)")
                c.latency.append(latency)
            else:
                c.latency_failed += 1
    for path in sorted(mem_dir.glob("*-gt.csv")):
        for row in _rows(path):
            c = config(path, row)
            if capacities_mb is not None:
                found = decimal_number(row.get("capacity") or "")  # ASCII digits alone (٣٠٠٠ was 3000 MB until 0.9.14)
                capacity = math.nan if found is None else found
                # one no board has is passed over, as one that is no number (1e400, inf: OverflowError's traceback
                # where its tag was written, after the store was made, until 0.9.13)
                if 1 <= capacity <= MAX_LIMIT_MB:
                    capacities_mb.add(capacity)
            if row["passed"] == "True":
                used, alloc, reserved = (_number(path, row, k) for k in ("mem_used", "mem_alloc", "mem_reserved"))
                c.memory.append((used, alloc, reserved))
            else:
                c.memory_failed += 1
    if not configs:  # imported nothing with status 0, an empty experiment made, until 0.9.8
        found = any(lat_dir.glob("*-gt.csv"))
        raise ConfigError(f"{folder}: " + ("its CSVs hold no rows" if found else "latency/ and memory/ hold no *-gt.csv "
                                           "file") + ": nothing to import")
    return configs


def environment(capacities_mb: set[float]) -> dict[str, str]:
    """The board's ``env.*`` tags: :data:`ENVIRONMENT`, and its physical memory where every memory
    row gave the same ``capacity`` (7,859 MB on the TX2, shared by its CPU and GPU)."""
    if len(capacities_mb) == 1 and (total := next(iter(capacities_mb))) > 0:
        return {**ENVIRONMENT, "env.memory_total_mb": str(int(total))}
    return dict(ENVIRONMENT)


def records(folder: Path, capacities_mb: set[float] | None = None) -> tuple[list[RunRecord], dict[str, int]]:
    descriptions = read_descriptions(folder)
    configs = read_configs(folder, capacities_mb)
    out: list[RunRecord] = []
    described: set[str] = set()
    stats = {"configurations": len(configs), "failed": 0, "duplicates_collapsed": 0, "without_architecture": 0}
    for (network, bs), c in sorted(configs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        desc = descriptions.get(network)
        model_hash = desc.description_hash if desc else f"unknown:{network}"
        # every repeated row of a file, passed or failed (until 0.9.6 only repeated passed rows counted)
        stats["duplicates_collapsed"] += (max(0, len(c.latency) + c.latency_failed - 1)
                                          + max(0, len(c.memory) + c.memory_failed - 1))
        metrics: dict[str, float] = {}
        if c.latency:
            metrics["latency_ms"] = statistics.median(c.latency)
            metrics["samples_count"] = 3.0 * len(c.latency)  # perf4sight times 3 steps per row
            metrics["throughput_per_s"] = bs * 1000.0 / metrics["latency_ms"]
        if c.memory:
            metrics["peak_mem_mb"] = statistics.median(m[0] for m in c.memory)
            metrics["cuda_max_allocated_mb"] = statistics.median(m[1] for m in c.memory)
            metrics["cuda_max_reserved_mb"] = statistics.median(m[2] for m in c.memory)
        record = RunRecord(
            kind="training",
            name=f"{network} · bs{bs} · training · {DEVICE}",
            params={
                "model": network,
                "model_hash": model_hash,
                "batch_size": bs,
                "input_size": 224,
                "phase": "training",
                "device": DEVICE,
                "precision": "float32",
                "optimizer": "sgd(lr=0.1,momentum=0.9,wd=5e-4)",
                "dataset": "imagenet-shaped dummy input",
            },
            metrics=metrics,
            tags={"tracker.source": SOURCE, "tracker.campaign": "perf4sight-tx2"},
            key_fields={"source": SOURCE, "model": network, "batch_size": bs, "device": DEVICE, "phase": "training"},
            description=f"perf4sight TX2 training step of {c.family} pruned {c.prune_pct}% at batch {bs}"
                        + ("." if c.latency or not c.memory else ": its memory alone (perf4sight has no latency row)."),
        )
        if not c.latency and not c.memory:
            record.fail(FAILURE_REASON)
            stats["failed"] += 1
        if desc is None:
            stats["without_architecture"] += 1
        elif network not in described:
            described.add(network)
            record.artifacts["description/graph.json"] = desc.graph_artifact()
            record.artifacts[DESCRIPTION_ARTIFACT] = desc.to_json_text()
        out.append(record)
    return out, stats


@dataclass(frozen=True)
class Prepared:
    """A folder read and made into records, before any store is touched."""

    records: list[RunRecord]
    stats: dict[str, int]
    capacities_mb: set[float]


def prepare(folder: Path) -> Prepared:
    """Read the folder (a wrong one, or a file it cannot read, is a ConfigError naming it) into records."""
    folder = Path(folder)
    check_folder(folder)
    capacities_mb: set[float] = set()
    recs, stats = records(folder, capacities_mb)
    return Prepared(recs, stats, capacities_mb)


#: Runs logged in one batch (one transaction of an embedded store): an import stopped by Ctrl-C keeps
#: the batches written whole, and says how many runs they hold.
RUNS_PER_BATCH = 500


def import_perf4sight(logger: RunLogger, folder: Path, prepared: Prepared | None = None) -> dict[str, int]:
    """Import the folder (or what :func:`prepare` read of it) into the logger's experiment; returns
    counts of what was done (``in_outbox``: the folder's runs waiting in the outbox, not yet in the
    store). A Ctrl-C (KeyboardInterrupt) goes on up carrying ``imported``, the runs
    written before it, and ``to_import``, the runs this import had to write: the same import again
    writes the rest (the configurations present are skipped)."""
    prepared = prepared or prepare(folder)
    recs, stats, capacities_mb = prepared.records, dict(prepared.stats), prepared.capacities_mb
    present = logger.measured(kind="training", statuses=("FINISHED", "FAILED"))
    new = [r for r in recs if r.config_key not in present]
    done, env = 0, environment(capacities_mb)
    try:
        for start in range(0, len(new), RUNS_PER_BATCH):
            batch = new[start:start + RUNS_PER_BATCH]
            logger.log(batch, environment=env)
            done += len(batch)
    except KeyboardInterrupt as exc:
        exc.imported = done + len(getattr(exc, "logged", ()))  # type: ignore[attr-defined]  # a batch written whole
        exc.to_import = len(new)  # type: ignore[attr-defined]
        raise
    stats["imported"] = len(new)
    stats["already_present"] = len(recs) - len(new)
    # where the store could not take them (a server down or refusing the writes): how many of the folder's
    # runs, imported now or before, wait in the outbox for `tracker sync` (said only in a warning until 0.9.8)
    stats["in_outbox"] = len(_waiting(logger) & {r.config_key for r in recs})
    return stats


def _waiting(logger: RunLogger) -> set[str]:
    """The config keys of the training runs waiting in the outbox for the logger's store and experiment."""
    from tracker.log.outbox import spooled_keys

    return spooled_keys(logger.location.uri, logger.experiment_name, "training", ("FINISHED", "FAILED"))
