"""Campaigns: the product of networks x devices x modes x phases x batch sizes, from a TOML file.

    [campaign]  name, description
    [networks]  zoo = [...], specs = [...], generate = {count, seed, input_size}, prune = {model, ratios, method, seed}
    [measure]   batch_sizes, phases, devices, threads (the CPU mode dimension), allocator ("retain":
                the C allocator keeps freed memory, part of the mode), precision, time_cap_s, layers,
                till_first_fail, timeout_s, memory_limit_mb, repeats, trace, min_samples, input_sizes
                (resolutions to measure each network at; without it, each network's own), dtypes
                (number formats: float32, the default, float16, bfloat16), again_imprecise

Every configuration runs in a child process; one that is already measured (its config key
is FINISHED, or FAILED, in the campaign's experiment) is skipped, so an interrupted
campaign resumes where it stopped. With ``till_first_fail`` the batch sizes of one
network/device/mode/phase stop at the first failure, after perf4sight. ``--shard I/N``
takes every N-th network, so several devices can share one campaign. With ``repeats = R`` every
configuration is measured R times, in rounds: round r starts when round r - 1 has been through
every configuration, so the repeats lie minutes apart and the ``measurement_repeats`` view shows
how far the machine drifts between them (each run's CI covers its own window only). Repeat r of
a configuration carries the repeat key ``CONFIG_KEY#rR``, so a re-run resumes every round.
With ``trace = true`` every configuration's first round is also traced with torch.profiler, as
``profile network --trace`` does (``tracker.profile.trace``); one measured before without its
trace (by a campaign without it, or ``profile network``) is measured again, as a repeat with the
key ``CONFIG_KEY#trace``, and one whose trace failed (the profiler's error is on its run) is not.
A measurement that comes out too imprecise to learn from (its latency's 95 % CI wider than
``stats.IMPRECISE_CI_REL`` of it, and than the campaign's ``precision``: the time cap came before the
precision, the machine disturbed) is measured once more straight away, at twice the time cap, as a repeat with the key
``CONFIG_KEY#again`` (since 0.9.19; ``again_imprecise = false`` says not to): the first stays in the
store, and the labels a fingerprint learns leave it out where the second is precise
(``sql/measurement_labels_of.sql``). A layer measurement's is measured again with its layers (the
newest run is the one a resumed campaign asks whether it has them). Not where twice the cap would not
fit the campaign's ``timeout_s``.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from tracker.decode import Undecodable, loads_toml
from tracker.errors import ConfigError, not_utf8
from tracker.profile.device import canonical_device, is_device_name
from tracker.profile.modes import validate_allocator, validate_threads
from tracker.profile.stats import (MAX_PRECISION, MAX_SAMPLES, MAX_TIME_CAP_S, MIN_PRECISION, MIN_SAMPLES,
                                   MIN_SAMPLES_FOR_CI, MIN_TIME_CAP_S)
from tracker.settings import (MAX_BATCH, MAX_GENERATE_COUNT, MAX_SEED, MAX_SPEC_SIZE, MAX_TIMEOUT_S, MIN_INPUT_SIZE,
                              MIN_MEMORY_LIMIT_MB, MIN_TIMEOUT_S, finite_number)

SECTIONS = {
    "campaign": {"name": str, "description": str},
    "networks": {"zoo": list, "specs": list, "generate": dict, "prune": dict},
    "measure": {
        "batch_sizes": list, "phases": list, "devices": list, "threads": list, "precision": float, "time_cap_s": float,
        "layers": bool, "till_first_fail": bool, "timeout_s": float, "memory_limit_mb": float, "repeats": int,
        "allocator": str, "trace": bool, "min_samples": int, "input_sizes": list, "dtypes": list,
        "again_imprecise": bool,
    },
}
GENERATE_KEYS = {"count": int, "seed": int, "input_size": int}
#: the longest experiment name MLflow takes (``mlflow.utils.validation.MAX_EXPERIMENT_NAME_LENGTH``), a campaign's name
MAX_EXPERIMENT_NAME_LENGTH = 500
PRUNE_KEYS = {"model": str, "ratios": list, "method": str, "seed": int}


@dataclass
class Campaign:
    name: str
    path: Path
    description: str = ""
    networks: list[str] = field(default_factory=list)  # zoo names or spec paths
    batch_sizes: list[int] = field(default_factory=lambda: [1])
    phases: list[str] = field(default_factory=lambda: ["inference"])
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    threads: list[int | None] = field(default_factory=lambda: [None])
    input_sizes: list[int | None] = field(default_factory=lambda: [None])  # None: each network's own
    dtypes: list[str] = field(default_factory=lambda: ["float32"])  # network.DTYPES: the number formats (0.8.5)
    allocator: str | None = None  # modes.ALLOCATORS; None: the C library's default, unchanged
    precision: float = 0.02
    time_cap_s: float = 10.0
    layers: bool = False
    till_first_fail: bool = False
    timeout_s: float = 600.0
    memory_limit_mb: float | None = None
    repeats: int = 1
    trace: bool = False
    min_samples: int = MIN_SAMPLES  # more for a tail latency (200: a p99)
    #: an imprecise measurement measured again at twice the time cap (see the module's doc; since 0.9.19)
    again_imprecise: bool = True
    #: A dry run's (``load_campaign(..., dry_run=True)``): the spec files of ``generate`` and ``prune``
    #: a run would write (missing, or saying otherwise), by path as ``networks`` names them, with their
    #: content; none written (see ``zoo.spec.planned_specs``)
    unwritten: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: what to say of the file before it is run, each a line (``campaign run`` says them on stderr; since 0.9.30)
    notes: list[str] = field(default_factory=list)


def typed_table(section: str, table: dict[str, Any], schema: dict[str, type], where: str,
                tables: tuple[str, ...] = ()) -> dict[str, Any]:
    """``table`` after checking its keys and value types (``section`` "" for a file's top level,
    where an unknown key is said with the file's ``tables`` too: a misspelt one lands there)."""
    prefix = f"[{section}]." if section else ""
    if not isinstance(table, dict):  # `training = 5`: a traceback until 0.9.3
        raise ConfigError(f"{where}: [{section}] should be a table of keys, got {section} = {table!r}")
    for key, value in table.items():
        if key not in schema:
            also = f"; tables: {', '.join(tables)}" if tables else ""
            raise ConfigError(f"{where}: unknown key {prefix}{key} (known: {', '.join(schema)}{also})")
        want = schema[key]
        ok = isinstance(value, want) and not (want in (int, float) and isinstance(value, bool))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            try:  # a whole number past a float's range (`learning_rate = 1` and 400 zeros) is no float:
                float(value)  # taken until 0.9.13, and a job trained at it lost its run when it was logged
            except OverflowError:
                raise ConfigError(f"{where}: {prefix}{key} must be a finite number, got {value!r}") from None
            ok = True
        if not ok:
            raise ConfigError(f"{where}: {prefix}{key} should be {want.__name__}, got {value!r}")
    return table


#: Most passes over a campaign ``[measure].repeats`` may ask for.
MAX_REPEATS = 1000


def check_bound(where: str, label: str, value: float, *, least: float | None = None, above: float | None = None,
                below: float | None = None, most: float | None = None, hint: str = "") -> None:
    """A ConfigError naming ``label`` (``[table].key``) and its rule unless ``value`` is finite, at
    least ``least``, greater than ``above``, less than ``below`` and at most ``most`` (each where given).
    ``where`` "" (``label`` says it all: ``--batch-size``, ``FILE: [sweep].batch_size``): no prefix."""
    finite = finite_number(value)  # a whole number of 400 digits too (a traceback until 0.9.13)
    if finite and ((least is None or value >= least) and (above is None or value > above)
                   and (below is None or value < below) and (most is None or value <= most)):
        return
    if not finite and math.isinf(value):
        rule = "a finite number"
    elif most is not None:
        rule = f"from {above if above is not None else least} to {most}"
    elif below is not None:
        rule = f"between {above if above is not None else least} and {below}"
    elif least is not None:
        rule = f"at least {least}"
    else:
        rule = f"greater than {above}"
    raise ConfigError(f"{f'{where}: ' if where else ''}{label} must be {rule}{hint}, got {value!r}")


def check_limit_mb(where: str, label: str, value: float) -> None:
    """A ConfigError where a memory cap is past the largest one a measurement takes."""
    from tracker.profile.memcap import over_limit

    if why := over_limit(value):
        raise ConfigError(f"{where}: {label} {why}")


def check_counts(where: str, label: str, values: list[Any]) -> list[int]:
    """``values`` (batch sizes, thread counts) unless it is empty or holds anything but whole
    numbers of at least 1: then a ConfigError naming ``label``."""
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ConfigError(f"{where}: {label} must be whole numbers of at least 1, got {values}")
    return list(values)


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file as a dict, or a ConfigError naming the file (``what``: campaign, job config). A
    byte-order mark that an editor put first is read past, as Python reads one."""
    try:
        return loads_toml(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {not_utf8(exc)}; a {what} is a TOML file") from None
    except Undecodable as exc:  # nested past Python's recursion limit: a traceback until 0.9.15
        raise ConfigError(f"{path}: {exc}") from None


def load_campaign(path: Path, dry_run: bool = False) -> Campaign:
    """A campaign file, checked; its generated and pruned networks' spec files written beside it, or,
    ``dry_run``, planned only (``Campaign.unwritten``: written by a dry run until 0.9.8)."""
    where = str(path)
    raw = read_toml(path, "campaign")
    other = ("; it looks like a training job file: tracker profile training FILE" if "model" in raw and "data" in raw
             else "; it looks like a search space: tracker searchspace run FILE" if "positions" in raw else "")
    for section, value in raw.items():
        if not isinstance(value, dict):  # a key outside any section (a job file's model = ...), not a section
            raise ConfigError(f"{where}: unknown key {section} outside a section (a campaign has the sections "
                              f"{', '.join(f'[{s}]' for s in SECTIONS)}){other}")
        if section not in SECTIONS:
            raise ConfigError(f"{where}: unknown section [{section}] (known: {', '.join(SECTIONS)}){other}")
    tables = {s: typed_table(s, raw.get(s, {}), SECTIONS[s], where) for s in SECTIONS}
    meta, nets, m = tables["campaign"], tables["networks"], tables["measure"]
    c = Campaign(name=meta.get("name", path.stem), path=path, description=meta.get("description", ""))
    # the experiment's name, and the folder its generated and pruned specs go to beside the file
    if (not c.name.strip() or any(ch in c.name for ch in "/\\") or c.name.strip() in (".", "..")
            or not c.name.isprintable()):  # a tab or a newline in an experiment's name taken until 0.9.3
        raise ConfigError(f"{where}: [campaign].name {c.name!r} should be a name, not empty nor a path (it names the "
                          "experiment, and the folder beside the file its generated networks' specs go to)")
    if len(c.name) > MAX_EXPERIMENT_NAME_LENGTH:  # passed a dry run, and the real one failed making the experiment
        # (until 0.9.8)
        raise ConfigError(f"{where}: [campaign].name is {len(c.name):,} characters long: it names the experiment, whose "
                          f"name MLflow takes up to {MAX_EXPERIMENT_NAME_LENGTH} characters")
    for key in ("batch_sizes", "phases", "devices"):
        if key in m:
            setattr(c, key, list(m[key]))
    for key, means in (("phases", "inference, training"), ("devices", "cpu, cuda, cuda:N")):
        if not getattr(c, key):  # an empty list would plan nothing, and say only that the campaign is empty
            raise ConfigError(f"{where}: [measure].{key} names no {key[:-1]} ({means}); leave it out for the default")
    c.batch_sizes = sorted(set(check_counts(where, "[measure].batch_sizes", c.batch_sizes)))
    # as every command's --batch-size (any size was planned until 0.9.7), in check_bound's words (0.9.8)
    check_bound(where, "[measure].batch_sizes", c.batch_sizes[-1], least=1, most=MAX_BATCH)
    if bad := [p for p in c.phases if p not in ("inference", "training")]:
        raise ConfigError(f"{where}: [measure].phases: unknown phase {bad[0]!r} (inference, training)")
    c.phases = list(dict.fromkeys(c.phases))  # each once: a phase twice was two configurations until 0.9.1
    if bad := [d for d in c.devices if not is_device_name(str(d))]:
        raise ConfigError(f"{where}: [measure].devices: unknown device {bad[0]!r} (cpu, cuda, cuda:N)")
    c.devices = list(dict.fromkeys(canonical_device(str(d)) for d in c.devices))  # cuda and cuda:0 once
    if "input_sizes" in m:
        sizes = check_counts(where, "[measure].input_sizes", m["input_sizes"])
        for size in sizes:  # --input-size's bounds (at least 8 alone until 0.9.13)
            check_bound(where, "[measure].input_sizes", size, least=MIN_INPUT_SIZE, most=MAX_SPEC_SIZE, hint=" pixels")
        c.input_sizes = list(dict.fromkeys(sizes))
    if "dtypes" in m:
        from tracker.profile.network import DTYPES

        if bad := [d for d in m["dtypes"] if d not in DTYPES]:
            raise ConfigError(f"{where}: [measure].dtypes: unknown dtype {bad[0]!r} ({', '.join(DTYPES)})")
        if not m["dtypes"]:
            raise ConfigError(f"{where}: [measure].dtypes names no dtype")
        c.dtypes = list(dict.fromkeys(m["dtypes"]))
    from tracker.profile.network import format_runs

    if not any(format_runs(dt, ph, d) for dt in c.dtypes for ph in c.phases for d in c.devices):
        # ran as a campaign of no configuration, said as "the shard has no network", until 0.9.3
        raise ConfigError(f"{where}: [measure] plans nothing: dtypes {', '.join(c.dtypes)} in phases "
                          f"{', '.join(c.phases)} on {', '.join(c.devices)} (int8 is measured in CPU inference only)")
    if "threads" in m:
        c.threads = list(dict.fromkeys(check_counts(where, "[measure].threads", m["threads"])))  # each once
        for t in c.threads:  # measured here: said before the store is opened, not after the first configuration
            validate_threads(t, f"{where}: [measure].threads =")
    if "allocator" in m:
        try:
            c.allocator = validate_allocator(m["allocator"])
        except ConfigError as e:
            raise ConfigError(f"{where}: [measure].{e}") from None
    least = {"time_cap_s": MIN_TIME_CAP_S, "timeout_s": MIN_TIMEOUT_S, "memory_limit_mb": MIN_MEMORY_LIMIT_MB}
    most = {"time_cap_s": MAX_TIME_CAP_S, "timeout_s": MAX_TIMEOUT_S}  # memory_limit_mb's: check_limit_mb's
    for key in ("precision", "time_cap_s", "timeout_s", "memory_limit_mb"):
        if key in m:
            # precision: --precision's bounds (between 0 and 1 until 0.9.8: 0.9 was taken); the others their
            # options' least (any above 0 until 0.9.13: a timeout_s of 0.001 failed each configuration) and most (any
            # finite number until 0.9.14: a typo's 1e308 let a hung child run until it was stopped)
            check_bound(where, f"[measure].{key}", m[key],
                        **({"least": MIN_PRECISION, "most": MAX_PRECISION, "hint": " (0.02 is 2 %)"}
                           if key == "precision" else {"least": least[key], "most": most.get(key)}))
            if key == "memory_limit_mb":
                check_limit_mb(where, f"[measure].{key}", m[key])
            setattr(c, key, float(m[key]))
    c.layers, c.till_first_fail = bool(m.get("layers", False)), bool(m.get("till_first_fail", False))
    c.trace = bool(m.get("trace", False))
    c.again_imprecise = bool(m.get("again_imprecise", True))
    if "min_samples" in m:
        c.min_samples = int(m["min_samples"])
        # --min-samples' bounds (1,000,000 was taken until 0.9.8)
        check_bound(where, "[measure].min_samples", c.min_samples, least=MIN_SAMPLES_FOR_CI, most=MAX_SAMPLES)
    c.repeats = int(m.get("repeats", 1))
    # at most MAX_REPEATS: a dry run of a million repeats listed them for minutes (until 0.9.2)
    check_bound(where, "[measure].repeats", c.repeats, least=1, most=MAX_REPEATS,
                hint=" (each repeat is a whole pass over the campaign)")
    c.networks = network_refs(nets, c.name, path, where, c.unwritten if dry_run else None, c.notes)
    if not c.networks:
        raise ConfigError(f"{where}: [networks] names no network")
    return c


def spec_files(entry: str, base: Path, where: str) -> list[Path]:
    """The spec files a campaign's ``specs`` entry names, relative to ``base`` (the campaign file's
    folder): a file; a folder, its ``*.json`` files (as ``zoo generate``/``prune --out`` write them);
    or a glob pattern (``specs/*-p*.json``), what it matches. Sorted by name; naming none is an
    error that says where the entry was looked for."""
    p = Path(entry) if Path(entry).is_absolute() else base / entry
    shown = entry if str(p) == entry else f"{entry} ({p})"
    if any(ch in entry for ch in "*?["):
        root = Path(p.anchor) if p.is_absolute() else base
        found = sorted(q for q in root.glob(str(p.relative_to(root))) if q.is_file())
        if not found:
            raise ConfigError(f"{where}: {shown} matches no file")
        return found
    if p.is_dir():
        found = sorted(p.glob("*.json"))
        if not found:
            raise ConfigError(f"{where}: {shown} is a folder without spec files (*.json)")
        return found
    if not p.is_file():
        raise ConfigError(f"{where}: {shown} does not exist")
    return [p]


def network_refs(nets: dict[str, Any], name: str, path: Path, where: str,
                 unwritten: dict[str, dict[str, Any]] | None = None, notes: list[str] | None = None) -> list[str]:
    """The networks of a campaign's ``[networks]``; the spec files of its ``generate`` and ``prune``
    written, or where ``unwritten`` is given (a dry run), those a run would write put there (path
    and content) and none written; what to say of them before they are measured appended to ``notes``."""
    from tracker.errors import UnknownModelError
    from tracker.zoo import check_model_name
    from tracker.zoo.spec import MODULE_REF, module_spec, planned_specs, unwritten_specs, write_specs

    def written(specs: list[dict[str, Any]], folder: Path) -> list[str]:
        if unwritten is None:
            return [str(p) for p in write_specs(specs, folder)]
        unwritten.update({str(p): spec for p, spec in unwritten_specs(specs, folder).items()})
        return [str(folder / f"{spec['name']}.json") for spec in specs]

    refs: list[str] = []
    for model in nets.get("zoo", []):
        if not isinstance(model, str):
            raise ConfigError(f"{where}: [networks].zoo: {model!r} is not a model name (a string)")
        try:
            check_model_name(model)
        except UnknownModelError as e:  # which file and key, as specs' entries say (since 0.9.1)
            raise UnknownModelError(f"{where}: [networks].zoo: {e}") from None
        refs.append(model)

    def own(entry: str, label: str) -> str | None:
        """FILE.py:NAME, a network of your own, with FILE relative to the campaign file and its NAME
        checked now, not at its first configuration; None for anything else."""
        match = MODULE_REF.match(entry)
        if match is not None:
            file = Path(match["file"])
            ref = f"{file if file.is_absolute() else path.parent / file}:{match['attr']}{match['args'] or ''}"
        elif ".py:" in entry:  # FILE.py: without a NAME (or not one): module_spec says so
            ref = entry
        else:
            return None
        try:
            module_spec(ref)
        except ConfigError as e:
            raise ConfigError(f"{where}: {label}: {e}") from None
        return ref

    for entry in nets.get("specs", []):  # spec files, or FILE.py:NAME (a network of your own)
        ref = own(str(entry), "[networks].specs")
        if ref is not None:
            refs.append(ref)
            continue
        refs += [str(p) for p in spec_files(str(entry), path.parent, f"{where}: [networks].specs")]
    folder = path.parent / name / "networks"
    if "generate" in nets:
        from tracker.zoo.generator import generate

        g = typed_table("networks.generate", nets["generate"], GENERATE_KEYS, where)
        count = int(g.get("count", 10))
        # as zoo generate --count (unbounded, a dry run of 100,000,000 hung drawing them, until 0.9.8)
        check_bound(where, "[networks.generate].count", count, least=1, most=MAX_GENERATE_COUNT)
        seed = int(g.get("seed", 0))  # as zoo generate --seed (a negative one, or one past 2**32, taken until 0.9.11)
        check_bound(where, "[networks.generate].seed", seed, least=0, most=MAX_SEED)
        try:
            specs = generate(count, seed, input_size=int(g.get("input_size", 224)))
        except ConfigError as e:
            raise ConfigError(f"{where}: [networks.generate]: {e}") from None
        refs += written(specs, folder)
    if "prune" in nets:
        from tracker.zoo.pruning import fractions_said, pruned_spec, ratios_from_percentages

        pr = typed_table("networks.prune", nets["prune"], PRUNE_KEYS, where)
        if "model" not in pr:
            raise ConfigError(f"{where}: [networks.prune] needs model")
        base = own(pr["model"], "[networks.prune].model")
        if base is None:  # a zoo name, or a spec file beside the campaign file (refused as a zoo name until 0.9.1)
            from tracker.zoo.spec import names_file_in

            if names_file_in(pr["model"], path.parent):  # a zoo name is the zoo's, a file of its name there or not
                spec_path = Path(pr["model"]) if Path(pr["model"]).is_absolute() else path.parent / pr["model"]
                if not spec_path.is_file() and str(spec_path) not in (unwritten or {}):  # or one generated, planned
                    raise ConfigError(f"{where}: [networks.prune].model: {spec_path} "
                                      f"{'is a folder, not a spec file' if spec_path.is_dir() else 'does not exist'}")
                base = str(spec_path)
            else:
                try:
                    check_model_name(pr["model"])
                except UnknownModelError as e:
                    raise UnknownModelError(f"{where}: [networks.prune].model: {e}") from None
                base = pr["model"]
        ratios = ratios_from_percentages(list(pr.get("ratios", [0])), f"{where}: [networks.prune].ratios")
        if notes is not None and (said := fractions_said(ratios, "[networks.prune].ratios", sep=", ", listed="= [{}]")):
            notes.append(f"{where}: {said}")  # ratios that look like fractions: planned as asked, said (0.9.30)
        seed = int(pr.get("seed", 0))  # as zoo prune --seed (taken, whatever its sign or size, until 0.9.11)
        check_bound(where, "[networks.prune].seed", seed, least=0, most=MAX_SEED)
        try:
            with planned_specs(unwritten or {}):  # its model may be a generated one a dry run planned
                specs = [pruned_spec(base, r, method=pr.get("method", "l1"), seed=seed) for r in ratios]
        except ConfigError as e:
            raise ConfigError(f"{where}: [networks.prune]: {e}") from None
        refs += written(specs, folder)
    # each network once (a name twice in zoo or specs counted as two configurations until 0.9.1)
    return list(dict.fromkeys(refs))


def parse_shard(text: str | None) -> tuple[int, int]:
    """``--shard I/N``; a bad one is a usage error (:class:`OptionError`, status 2; 1 until 0.9.8)."""
    from tracker.console import integer_number
    from tracker.errors import OptionError

    if text is None:
        return (1, 1)
    numbers = [integer_number(x) for x in text.split("/")]  # ASCII digits alone (٣/4 was 3/4 until 0.9.14)
    if len(numbers) != 2 or None in numbers:
        raise OptionError(f"--shard takes I/N, e.g. 2/4; got {text!r}")
    i, n = numbers
    if n < 1:  # "I must be between 1 and N" until 0.9.3
        raise OptionError(f"--shard {text}: N, the number of shards, must be at least 1")
    if not 1 <= i <= n:
        raise OptionError(f"--shard {text}: I must be between 1 and N")
    return (i, n)


#: The state of a configuration whose network_mem_mb an older tracker measured
#: (``measured_with_older_network_mem``; since 0.9.27)
OLDER_NETWORK_MEM_STATE = "to measure again: its network_mem_mb an older tracker's"
#: What a dry run (``campaign run --dry-run``) says of each configuration, as ``run_campaign``
#: would treat it: measured before (skipped), failed before (skipped: it would fail again), left
#: out after a failure in a till_first_fail chain, a repeat of one never measured (skipped), or to
#: be measured: for the first time, or again where the run measured before lacks its layers or its
#: trace, or its network_mem_mb counted more than this tracker's.
PLAN_STATES = ("measured", "failed", "after a failure", "repeat of one not measured", "to measure",
               "to measure again: without its layers", "to measure again: without its trace",
               OLDER_NETWORK_MEM_STATE)


@dataclass
class Tally:
    total: int = 0
    measured: int = 0
    failed: int = 0
    skipped: int = 0  # already measured, or past a failure in a till_first_fail chain
    #: of those skipped, how many were measured before (by an earlier run, or another process meanwhile): a
    #: campaign that measured nothing new but has them is not one that measured nothing (``nothing_measured``)
    reused: int = 0
    #: of those measured, how many while other processes took ``OTHERS_CPU_NOTE_PCT`` or more of the CPU
    beside_other_work: int = 0
    #: of the runs it logged (those measured or failed, and those measured again), how many wait in the outbox
    #: for ``tracker sync`` (a server down)
    in_outbox: int = 0
    #: of those measured, how many came out too imprecise and were measured again at twice the time cap, and
    #: of those how many came out precise the second time (``again_imprecise``; since 0.9.19)
    measured_again: int = 0
    precise_again: int = 0
    #: of those measured, how many had been measured before by a tracker whose network_mem_mb counted more than
    #: the network (``measured_with_older_network_mem``; since 0.9.27)
    older_network_mem: int = 0
    interrupted: bool = False
    #: a dry run's configurations in the order a run would take them, each with its PLAN_STATES state
    planned: list[dict[str, Any]] = field(default_factory=list)
    #: the network runs this run logged (measured or failed): network, batch size, repeat, status, run id
    runs: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, "measured": self.measured, "failed": self.failed, "skipped": self.skipped,
                "beside_other_work": self.beside_other_work, "in_outbox": self.in_outbox,
                "measured_again": self.measured_again, "precise_again": self.precise_again,
                "older_network_mem": self.older_network_mem, "interrupted": self.interrupted, "runs": self.runs}

    def again_said(self) -> str:
        """What a summary says of the measurements measured again (``measured_again``)."""
        from tracker.console import counted
        from tracker.profile.stats import IMPRECISE_CI_REL

        n = self.measured_again
        return (f"{counted(n, 'measurement')} came out too imprecise (95 % CI wider than {100 * IMPRECISE_CI_REL:g} % "
                f"of the latency) and {'was' if n == 1 else 'were'} measured again at twice the time cap: "
                f"{self.precise_again} of them precise the second time")

    def older_said(self, again: bool = False) -> str:
        """What a summary says of the configurations measured again for their older ``network_mem_mb``; said
        ``again`` (the demo's later campaigns), in short."""
        from tracker.console import counted
        from tracker.profile.records import network_mem_since_said

        n = self.older_network_mem
        if again:
            return f"{counted(n, 'configuration')} measured again for the same reason (an older tracker's network_mem_mb)"
        return (f"{counted(n, 'configuration')} that a tracker before {network_mem_since_said()} had measured "
                f"{'was' if n == 1 else 'were'} measured again: no fingerprint learns such a tracker's network_mem_mb, "
                "which also counted what the network's first build left behind in the process")

    def nothing_measured(self) -> bool:
        """Whether every configuration this run took on failed: none measured now or before, and one failed
        now (a campaign with nothing left to do, or interrupted, is not one)."""
        return bool(self.failed) and not self.measured and not self.reused and not self.interrupted

    def plan_counts(self) -> dict[str, int]:
        """How many configurations a dry run found in each state (those with none left out)."""
        return {state: n for state in PLAN_STATES if (n := sum(c["state"] == state for c in self.planned))}


@contextmanager
def campaign_progress(name: str, prefix: str = "", console: Any = None, transient: bool = False,
                      disable: bool = False) -> Iterator[Callable[[str, Tally], None]]:
    """A rich progress bar (done of total, failed, elapsed, ETA) fed by :func:`run_campaign`'s callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn(), TimeRemainingColumn())
    if console is None:  # on stderr, as a bar is: stdout keeps the command's lines alone
        from rich.console import Console

        console = Console(stderr=True)
    with Progress(*columns, console=console, transient=transient, disable=disable) as bar:
        task = bar.add_task(name, total=None, failed=0)

        def progress(label: str, tally: Tally) -> None:
            bar.update(task, total=tally.total, completed=tally.measured + tally.failed + tally.skipped,
                       failed=tally.failed, description=prefix + label)

        yield progress


def chains(c: Campaign, shard: tuple[int, int]) -> list[tuple[str, str, int | None, str, int | None, str]]:
    """(network, device, threads, phase, input size, dtype) chains of this shard; each runs its batch
    sizes in order. An input size None is the network's own. A quantized number format (int8) is
    measured in CPU inference only: its training and device chains are not in the product."""
    from tracker.profile.network import format_runs

    i, n = shard
    mine = [ref for k, ref in enumerate(c.networks) if k % n == i - 1]
    return [(ref, d, t, ph, size, dt) for ref in mine for size in c.input_sizes for d in c.devices for t in c.threads
            for ph in c.phases for dt in c.dtypes if format_runs(dt, ph, d)]


def measured_with_layers(logger: Any, config_key: str) -> bool:
    """Whether a FINISHED run of the configuration was measured with its layers, the newest or an
    older one (until 0.9.23 the newest alone: a whole-only repeat logged after it, another campaign's
    round, had its layers measured again); where the run cannot be read back (runs spooled while the
    server is unreachable), taken as measured."""
    from tracker.log.record import LAYERS_METRIC

    if logger.offline is not None:
        return True
    return (logger.find(config_key, "FINISHED", having_metric=LAYERS_METRIC) is not None
            or logger.find(config_key, "FINISHED") is None)


def measured_with_older_network_mem(logger: Any, config_key: str) -> bool:
    """Whether the newest FINISHED run of the configuration that has a ``network_mem_mb`` has one an older
    tracker measured, counting more than this tracker's (``records.counts_older_network_mem``); False where
    none has one (a GPU's) or no run can be read back (no store yet; runs spooled while the server is
    unreachable are read from the outbox)."""
    from tracker.profile.records import counts_older_network_mem

    if logger is None:
        return False
    found = logger.find(config_key, "FINISHED", having_metric="network_mem_mb")
    return found is not None and counts_older_network_mem(found)


def check_campaign(c: Campaign, shard: tuple[int, int] = (1, 1)) -> None:
    """What would fail every configuration, said in one line before a store is opened: a device
    this machine lacks, a network of the shard that cannot be built or run at its input size
    (described now, as its plans will take it), a bad TRACKER_MEMORY_CAP."""
    from tracker.profile.api import describe_early
    from tracker.profile.device import check_device
    from tracker.profile.memcap import planned_kind

    for d in c.devices:
        check_device(d)
    for ref, size in dict.fromkeys((ref, size) for ref, _, _, _, size, _ in chains(c, shard)):
        describe_early(ref, size)
    if c.memory_limit_mb:
        planned_kind()


def run_entry(network: str, batch_size: int, phase: str, device: str, repeat: int, result: Any, *,
              input_size: int | None = None, threads: int | None = None, dtype: str = "float32",
              **extra: Any) -> dict[str, Any]:
    """A run a campaign logged, as its JSON lists it (its input size, threads and dtype as a dry run's
    plan says them: two runs of two input sizes were alike but for their run ids until 0.9.8): where
    the run waits in the outbox, said so."""
    return {"network": network, "batch_size": batch_size, "phase": phase, "input_size": input_size, "device": device,
            "threads": threads, "dtype": dtype, "repeat": repeat,
            "status": result.network.status, "run_id": result.network.run_id, **extra,
            **({"in_outbox": True} if result.in_outbox else {})}


def again_stopping(rule: Any, timeout_s: float) -> Any:
    """The stopping rule an imprecise measurement is measured again under: twice ``rule``'s time cap (at
    most ``MAX_TIME_CAP_S``); None where that would not fit ``timeout_s`` with a child's start and the
    warm-up (a time-out would end it, the configuration measured already)."""
    from dataclasses import replace

    from tracker.profile.api import measurement_takes_s

    longer = replace(rule, time_cap_s=min(MAX_TIME_CAP_S, 2 * rule.time_cap_s))
    return longer if measurement_takes_s(longer) <= timeout_s else None


def run_campaign(logger: Any, c: Campaign, shard: tuple[int, int] = (1, 1),
                 progress: Callable[[str, Tally], None] | None = None, dry_run: bool = False) -> Tally:
    """Measure every configuration of shard ``shard`` not measured before, round after round;
    ``dry_run``: measure and log nothing (no mode run either), and list each configuration with
    what a run would do with it (``Tally.planned``), taking each one it would measure to succeed.
    A dry run's ``logger`` may be None: a store or experiment with nothing in it yet."""
    import itertools

    from tracker.log.record import REPEAT_KEY_TAG
    from tracker.profile.api import ensure_mode_logged, measure_planned, plan
    from tracker.profile.records import beside_other_work
    from tracker.profile.stats import Stopping, imprecise
    from tracker.profile.trace import TRACE_ERROR_TAG, TRACE_TAG

    check_campaign(c, shard)
    rule = Stopping(target_ci_rel=c.precision, time_cap_s=c.time_cap_s, min_samples=c.min_samples)
    layer_rule = rule.for_layers()
    again_rule = again_stopping(rule, c.timeout_s) if c.again_imprecise else None
    todo = chains(c, shard)
    tally = Tally(total=len(todo) * len(c.batch_sizes) * c.repeats)

    def measured(**kw: Any) -> set[str]:
        return set() if logger is None else logger.measured(**kw)

    done_keys = measured(statuses=("FINISHED",))
    failed_keys = measured(statuses=("FAILED",))
    if failed_keys and logger is not None:
        # a timeout under a smaller limit than this campaign's may finish under it: measured again (skipped
        # as failed until 0.9.8, its timeout_s raised or not)
        from tracker.log.record import TIMEOUT_TAG
        from tracker.profile.api import timed_out_under

        for key in measured(statuses=("FAILED",), having=TIMEOUT_TAG):
            if (record := logger.find(key, "FAILED")) is not None and timed_out_under(record, c.timeout_s):
                failed_keys.discard(key)
    done_repeats = measured(statuses=("FINISHED",), tag=REPEAT_KEY_TAG) if c.repeats > 1 else set()
    # Configurations whose trace was taken (or failed: asking again would fail again).
    traced_keys = (measured(statuses=("FINISHED",), having=TRACE_TAG)
                   | measured(statuses=("FINISHED",), having=TRACE_ERROR_TAG)) if c.trace else set()
    modes_logged: set[tuple[str, int | None]] = set()
    if logger is not None and c.description and not dry_run:  # the experiment's description in the MLflow UI
        logger.describe_experiment(c.description)
    try:
        # Round after round: round r goes through every chain before round r + 1 starts.
        for r, (ref, device, threads, phase, size, dtype) in itertools.product(range(1, c.repeats + 1), todo):
            if (device, threads) not in modes_logged and not dry_run:
                ensure_mode_logged(logger, device, threads, c.allocator)
                modes_logged.add((device, threads))

            def plan_at(bs: int) -> Any:
                return plan(ref, bs, phase=phase, device=device, threads=threads, allocator=c.allocator,
                            memory_limit_mb=c.memory_limit_mb, input_size=size, precision=dtype)

            def logged(q: Any, result: Any, **extra: Any) -> None:
                """The run ``result`` logged for plan ``q`` listed, as JSON lists it (``run_entry``)."""
                tally.runs.append(run_entry(q.spec.model, q.spec.batch_size, phase, device, r, result,
                                            input_size=q.spec.input_size, threads=threads, dtype=dtype, **extra))

            def measured(q: Any, again: bool = False, **kwargs: Any) -> Any:
                """``measure_planned`` of plan ``q``; a Ctrl-C that kept its network without its layers
                lists that run (counted measured, where it is not a measurement again) and goes on."""
                try:
                    return measure_planned(logger, q, layers=layers, layer_rule=layer_rule, timeout_s=c.timeout_s,
                                           reuse=False, campaign=c.name, **kwargs)
                except KeyboardInterrupt as exc:
                    if (kept := getattr(exc, "kept", None)) is not None:
                        logged(q, kept, **({"again": True} if again else {}), without_layers=True)
                        tally.measured += not again
                    raise

            def planned(state: str, q: Any) -> None:
                if dry_run:
                    tally.planned.append({"network": q.spec.model, "batch_size": q.spec.batch_size, "phase": phase,
                                          "input_size": q.spec.input_size, "device": device, "threads": threads,
                                          "dtype": dtype,
                                          "repeat": r, "state": state,
                                          "config_key": q.config_key})

            for k, bs in enumerate(c.batch_sizes):
                p = plan_at(bs)
                repeat_key = f"{p.config_key}#r{r}" if r > 1 else None
                tracing = c.trace and r == 1  # a trace is for reading: the first round's
                label = (f"{p.spec.model} bs{bs}{f' {size}px' if size else ''} {phase} {device}"
                         f"{f' t{threads}' if threads else ''}{f' {dtype}' if dtype != 'float32' else ''}"
                         f"{f' {c.allocator}' if c.allocator not in (None, 'system') else ''}"
                         f"{f' repeat {r}/{c.repeats}' if r > 1 else ''}{' traced' if tracing else ''}")
                layers = c.layers and phase == "inference"
                done = (repeat_key or p.config_key) in (done_repeats if repeat_key else done_keys)
                again = ""
                if done and layers and repeat_key is None and logger is not None:
                    # Measured whole only (by a campaign without layers, or `profile network`): it does
                    # not answer for its layers, as `profile layers` would not take it either.
                    done = measured_with_layers(logger, p.config_key)
                    again = "" if done else "to measure again: without its layers"
                if done and repeat_key is None and measured_with_older_network_mem(logger, p.config_key):
                    # its network's own memory counted more than this tracker's (records.NETWORK_MEM_SINCE): no
                    # fingerprint learns it, so it is measured again (skipped until 0.9.27)
                    done = False
                    again = OLDER_NETWORK_MEM_STATE
                if done and tracing and p.config_key not in traced_keys:
                    # Measured without its trace: a trace comes with a measurement, so measured
                    # again, as a repeat (as `profile network --trace` does).
                    done, repeat_key = False, f"{p.config_key}#trace"
                    again = "to measure again: without its trace"
                if done:
                    tally.skipped += 1
                    tally.reused += 1
                    planned("measured", p)
                elif p.config_key not in done_keys and (p.config_key in failed_keys or repeat_key):
                    tally.skipped += 1  # failed, or not measured once: nothing to repeat
                    planned("failed" if p.config_key in failed_keys else "repeat of one not measured", p)
                    if c.till_first_fail:
                        tally.skipped += len(c.batch_sizes) - k - 1
                        for later in c.batch_sizes[k + 1:] if dry_run else ():
                            planned("after a failure", plan_at(later))
                        if progress:  # the bar as the summary will say (it stopped before the chain's skips)
                            progress(label, tally)
                        break
                elif dry_run:  # what a run would measure, taken to succeed
                    planned(again or "to measure", p)
                    done_keys.add(p.config_key)
                    if tracing:
                        traced_keys.add(p.config_key)
                else:
                    if progress:
                        progress(f"measuring {label}", tally)
                    # Layers in every round: the layer-level fingerprint learns each layer's
                    # median over the rounds (layer_labels), keyed by the newest run's layers.
                    res = measured(p, rule=rule, repeat_key=repeat_key, trace=tracing)
                    if res.reused:  # measured by another process while this one waited for the device
                        tally.skipped += 1
                        tally.reused += 1
                        done_keys.add(p.config_key)
                        if progress:
                            progress(label, tally)
                        continue
                    logged(p, res)
                    if res.in_outbox:  # logged to the outbox (the server down), not yet in the store
                        tally.in_outbox += 1
                    if res.network.status == "FINISHED":
                        tally.measured += 1
                        tally.older_network_mem += again == OLDER_NETWORK_MEM_STATE
                        done_keys.add(p.config_key)
                        if beside_other_work(res.network.metrics):
                            tally.beside_other_work += 1
                        if tracing:
                            traced_keys.add(p.config_key)
                        if again_rule is not None and imprecise(res.network.metrics, c.precision):
                            if progress:
                                progress(f"measuring {label} again (imprecise)", tally)
                            # with its layers where the first had them: the newest run answers for them
                            second = measured(p, again=True, rule=again_rule,
                                              repeat_key=f"{repeat_key or p.config_key}#again")
                            logged(p, second, again=True)
                            tally.in_outbox += bool(second.in_outbox)
                            if second.network.status == "FINISHED":
                                tally.measured_again += 1
                                tally.precise_again += not imprecise(second.network.metrics, c.precision)
                    else:
                        tally.failed += 1
                        failed_keys.add(p.config_key)
                        if c.till_first_fail:
                            tally.skipped += len(c.batch_sizes) - k - 1
                            if progress:  # the bar as the summary will say (it stopped at the failure until 0.9.1)
                                progress(label, tally)
                            break
                if progress:
                    progress(label, tally)
    except KeyboardInterrupt:
        tally.interrupted = True
    return tally
