"""Search spaces, after ssprofile: positions, the candidate primitives allowed at each, and the
candidate networks they make.

A search space is a TOML file (see ``experiments/searchspace-digits.toml``)::

    name = "digits-styles"          # slug: names the candidates and the runs
    input_size = 32
    num_classes = 10
    activation = "relu"             # relu, relu6, silu
    stem_channels = 16
    enumerate = "per-position"      # "all": every combination; "per-position": ssprofile's,
                                    # one position varied at a time, the others at their first candidate
    [[positions]]                   # a stage of PerfSeer's generator (tracker.zoo.generator)
    name = "stage1"
    width = 32
    depth = 1
    candidates = ["vgg", "mobilenet", {name = "mb6", style = "mobilenet", expansion = 6}]
    [accuracy]                      # dataset = "digits" (scikit-learn's bundled digits) or an image folder
    dataset = "digits"
    epochs = 3
    batch_size = 64
    learning_rate = 0.05
    seed = 0
    [latency]
    batch_size = 1
    device = "cpu"
    threads = 1                     # the device mode measured in (optional; allocator = "retain" too)

A primitive is a generator style (``vgg``, ``inception``, ``resnext``, ``densenet``,
``mobilenet``) with default knobs for the position's width, or a table naming the style and
overriding knobs. Each candidate is a generator network spec (``tracker.netspec/1``), so the
profilers, the describer and the fingerprints take it like any generated network.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection

from tracker.errors import ConfigError
from tracker.settings import MAX_BATCH, MAX_EPOCHS, MAX_SEED

TOP = {"name": str, "input_size": int, "num_classes": int, "activation": str, "stem_channels": int, "enumerate": str}
POSITION = {"name": str, "width": int, "depth": int, "candidates": list}
ACCURACY = {"dataset": str, "epochs": int, "batch_size": int, "learning_rate": float, "seed": int}
LATENCY = {"batch_size": int, "device": str, "threads": int, "allocator": str}
SLUG = re.compile(r"^[a-z0-9][a-z0-9_]*$")
#: candidates a space may make: each is trained and measured (about 40 s a candidate here at the digits
#: example's budget: 4,096 are two days); ``enumerate = "all"`` of 7 positions of 5 made 78,125 spec files
#: without a word until 0.9.7
MAX_CANDIDATES = 4096
#: a seed numpy's and torch's generators both take
SEED_BELOW = MAX_SEED + 1


@dataclass(frozen=True)
class Primitive:
    name: str
    style: str
    knobs: tuple[tuple[str, Any], ...] = ()


@dataclass
class Position:
    name: str
    width: int
    depth: int
    candidates: list[Primitive]


@dataclass
class AccuracyBudget:
    dataset: str = "digits"
    epochs: int = 3
    batch_size: int = 64
    learning_rate: float = 0.05
    seed: int = 0


@dataclass
class LatencySetting:
    batch_size: int = 1
    device: str = "cpu"
    #: the device mode candidates are measured in (as a campaign's ``threads`` and ``allocator``, since
    #: 0.9.0): a fingerprint that learnt one mode predicts that mode's latencies
    threads: int | None = None
    allocator: str | None = None


@dataclass
class Candidate:
    space: str
    choices: dict[str, str]  # position -> primitive name
    spec: dict[str, Any]

    @property
    def name(self) -> str:
        return self.spec["name"]


@dataclass
class SearchSpace:
    name: str
    path: Path
    positions: list[Position]
    input_size: int = 32
    num_classes: int = 10
    activation: str = "relu"
    stem_channels: int = 16
    enumerate: str = "per-position"
    accuracy: AccuracyBudget = field(default_factory=AccuracyBudget)
    latency: LatencySetting = field(default_factory=LatencySetting)

    def count(self) -> int:
        """How many candidates the space has (without making them)."""
        if self.enumerate == "all":
            return math.prod(len(p.candidates) for p in self.positions)
        return 1 + sum(len(p.candidates) - 1 for p in self.positions)

    def candidates(self) -> list[Candidate]:
        """Every candidate of the space, in a fixed order (the first is all first choices)."""
        if self.enumerate == "all":
            combos = list(itertools.product(*(p.candidates for p in self.positions)))
        else:
            base = [p.candidates[0] for p in self.positions]
            combos = [tuple(base)]
            for i, p in enumerate(self.positions):
                combos += [tuple(base[:i] + [c] + base[i + 1:]) for c in p.candidates[1:]]
        return [self._candidate(list(c)) for c in combos]

    def _candidate(self, prims: list[Primitive]) -> Candidate:
        from tracker.zoo.generator import FORMAT, KIND, validate_spec

        name = f"{self.name}-{'-'.join(p.name for p in prims)}"
        try:
            stages = []
            for pos, prim in zip(self.positions, prims):
                knobs = dict(prim.knobs)
                width = knobs.get("width", pos.width)  # the defaults of a table's own width (the position's until 0.9.7)
                stages.append({"style": prim.style, "depth": pos.depth, "width": width,
                               **_default_knobs(prim.style, width, given=set(knobs)), **knobs})
            spec = {"format": FORMAT, "kind": KIND, "name": name,
                    "search_space": self.name, "input_size": self.input_size, "num_classes": self.num_classes,
                    "stem": {"channels": self.stem_channels, "kernel": 3, "stride": 2, "activation": self.activation},
                    "stages": stages, "head": {"pool": "avg", "dropout": 0.0}}
            validate_spec(spec)
        except ConfigError as exc:
            raise ConfigError(f"{self.path}: candidate {name}: {exc}") from None
        return Candidate(self.name, {pos.name: prim.name for pos, prim in zip(self.positions, prims)}, spec)

    def digest(self) -> str:
        body = json.dumps([c.spec for c in self.candidates()], sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


#: inception's default branches: three of at least 8 channels, the 3x3 branch the rest
INCEPTION_LEAST_WIDTH = 32
INCEPTION_BRANCHES = ("branch_1x1", "branch_3x3", "branch_5x5", "branch_pool")


def _default_knobs(style: str, width: int, given: Collection[str] = ()) -> dict[str, Any]:
    """Fixed knobs of a style at a width (the generator draws them; a search space fixes them);
    ``given``: the knobs a candidate's table sets itself."""
    if style == "vgg":
        return {"kernel": 3}
    if style == "mobilenet":
        return {"expansion": 4, "kernel": 3}
    if style == "resnext":
        mid = max(8, 8 * (width // 16))
        return {"bottleneck_ratio": 2, "group_width": 8, "mid_channels": mid}
    if style == "densenet":
        return {"growth_rate": 12, "bn_size": 2}
    if style == "inception":
        if width < INCEPTION_LEAST_WIDTH and not set(INCEPTION_BRANCHES) <= set(given):  # said as stages[i].branch_3x3
            # "got -8", a knob never written, until 0.9.7
            raise ConfigError(f"inception at width {width}: its default branches need a width of at least "
                              f"{INCEPTION_LEAST_WIDTH}; give a table its {', '.join(INCEPTION_BRANCHES)} (summing to the "
                              "width), or a wider position")
        quarter = max(8, 8 * (width // 32))
        b3 = width - 3 * quarter
        return {"branch_1x1": quarter, "branch_3x3": b3, "branch_5x5": quarter, "branch_pool": quarter,
                "reduce_3x3": max(8, 8 * (b3 // 16)), "reduce_5x5": 8, "branch_5x5_kind": "double3x3"}
    from tracker.zoo.generator import STYLES

    raise ConfigError(f"unknown style {style!r} (expected one of {', '.join(STYLES)})")


def _primitive(item: Any, where: str) -> Primitive:
    from tracker.zoo.generator import STYLE_KEYS, STYLES

    if isinstance(item, str):
        if item not in STYLES:
            raise ConfigError(f"{where}: unknown primitive {item!r} (a style: {', '.join(STYLES)}, or a table with style)")
        return Primitive(item, item)
    if not isinstance(item, dict) or "style" not in item:
        raise ConfigError(f"{where}: a candidate is a style name or a table with at least style (and name)")
    knobs = {k: v for k, v in item.items() if k not in ("name", "style")}
    name = str(item.get("name", item["style"]))
    if item["style"] not in STYLES:
        raise ConfigError(f"{where}: unknown style {item['style']!r} (expected one of {', '.join(STYLES)})")
    # a misspelt knob was left unread, its default trained in its place, and a table's width and depth
    # passed the position's rules, until 0.9.7
    takes = ("width", "depth", *STYLE_KEYS[item["style"]])
    if unknown := sorted(set(knobs) - set(takes)):
        raise ConfigError(f"{where}: unknown knob(s) {', '.join(unknown)} for style {item['style']} (it takes "
                          f"{', '.join(takes)})")
    if "width" in knobs:
        _check_width(knobs["width"], f"{where}.width")
    if "depth" in knobs:
        _check_depth(knobs["depth"], f"{where}.depth")
    return Primitive(name, item["style"], tuple(sorted(knobs.items())))


def _check_width(width: Any, where: str) -> None:
    if isinstance(width, bool) or not isinstance(width, int) or width < 8 or width % 8:
        raise ConfigError(f"{where}: a multiple of 8, got {width!r}")


def _check_depth(depth: Any, where: str) -> None:
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:  # said of a candidate's spec
        # ("stages[0].depth") until 0.9.5
        raise ConfigError(f"{where}: at least 1, got {depth!r}")


def load_space(path: Path) -> SearchSpace:
    """Read and check a search space file; every problem is one ConfigError naming the key."""
    from tracker.profile.campaign import check_bound, read_toml, typed_table

    where = str(path)
    raw = read_toml(path, "search space")
    positions = raw.pop("positions", None)
    accuracy, latency = raw.pop("accuracy", {}), raw.pop("latency", {})
    # the tables named too (the keys alone until 0.9.4)
    typed_table("", raw, TOP, where, tables=("[[positions]]", "[accuracy]", "[latency]"))
    typed_table("accuracy", accuracy, ACCURACY, where)
    typed_table("latency", latency, LATENCY, where)
    if "name" not in raw or not SLUG.match(raw["name"]):
        raise ConfigError(f"{where}: name is required, lower-case letters, digits and _ (e.g. digits_styles)")
    if not isinstance(positions, list) or not positions:
        raise ConfigError(f"{where}: needs at least one [[positions]] table")
    out = []
    for i, pos in enumerate(positions):
        at = f"{where}: positions[{i}]"
        typed_table(f"positions[{i}]", pos, POSITION, where)
        for key in ("name", "width", "candidates"):
            if key not in pos:
                raise ConfigError(f"{at}: missing key {key}")
        if not SLUG.fullmatch(pos["name"]):  # as a candidate's (name = "" was "  : vgg on the frontier" until 0.9.8)
            raise ConfigError(f"{at}.name: lower-case letters, digits and _ (e.g. stage1), got {pos['name']!r}")
        prims = [_primitive(c, f"{at}.candidates[{j}]") for j, c in enumerate(pos["candidates"])]
        names = [p.name for p in prims]
        if not prims or len(set(names)) != len(names) or not all(SLUG.match(n) for n in names):
            raise ConfigError(f"{at}.candidates: need one or more, with distinct slug names, got {names}")
        _check_width(pos["width"], f"{at}.width")
        _check_depth(pos.get("depth", 1), f"{at}.depth")
        out.append(Position(pos["name"], pos["width"], pos.get("depth", 1), prims))
    if len({p.name for p in out}) != len(out):
        raise ConfigError(f"{where}: position names must be distinct")
    space = SearchSpace(raw["name"], path, out, accuracy=AccuracyBudget(**accuracy), latency=LatencySetting(**latency),
                        **{k: v for k, v in raw.items() if k != "name"})
    if space.enumerate not in ("all", "per-position"):
        raise ConfigError(f"{where}: enumerate must be all or per-position, got {space.enumerate!r}")
    from tracker.profile.device import canonical_device, is_device_name

    # as a campaign's devices (since 0.9.9: any name starting with cuda passed, cudaXYZ too, and cuda:0 was not
    # cuda, its candidates keyed and reported apart)
    if not is_device_name(space.latency.device):
        raise ConfigError(f"{where}: [latency].device: unknown device {space.latency.device!r} (cpu, cuda, cuda:N)")
    space.latency.device = canonical_device(space.latency.device)
    if space.latency.allocator is not None:
        from tracker.profile.modes import ALLOCATORS

        if space.latency.allocator not in ALLOCATORS:
            raise ConfigError(f"{where}: [latency].allocator must be one of {', '.join(ALLOCATORS)}, "
                              f"got {space.latency.allocator!r}")
    if space.latency.threads is not None:
        check_bound(where, "[latency].threads", space.latency.threads, least=1)
    for table, key in (("accuracy", "epochs"), ("accuracy", "batch_size"), ("latency", "batch_size")):
        # a batch as --batch-size (taken until 0.9.7); epochs as a training job's (any number until 0.9.14)
        check_bound(where, f"[{table}].{key}", getattr(getattr(space, table), key), least=1,
                    most=MAX_BATCH if key == "batch_size" else MAX_EPOCHS)
    check_bound(where, "[accuracy].learning_rate", space.accuracy.learning_rate, above=0)
    check_bound(where, "[accuracy].seed", space.accuracy.seed, least=0, below=SEED_BELOW)  # a traceback until 0.9.7
    if (count := space.count()) > MAX_CANDIDATES:
        raise ConfigError(f"{where}: the space makes {count:,} candidates (enumerate = {space.enumerate!r}), more than "
                          f"{MAX_CANDIDATES:,}, each trained and measured: fewer candidates, or enumerate = "
                          "\"per-position\"")
    space.candidates()  # every candidate builds into a valid spec
    return space
