"""Record schemas: what each run kind must carry, read from ``schemas/<kind>.json``.

A schema names params, metrics and tags. Each field may be ``required``; params and tags
have a ``type`` (str, int, float, bool, json) and optional ``choices``; metrics have a
``unit``. ``patterns`` holds fnmatch-style names for families of fields (``net*.avg_inf_ms``).
Required metrics are only demanded of FINISHED runs: a failed measurement has none, and
carries ``tracker.failure_reason`` instead. Any field not declared is refused, so the
warehouse can type every column.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from tracker.errors import SchemaError
from tracker.settings import project_dir

KINDS: tuple[str, ...] = ("network", "layer", "training", "mapping", "mode", "accuracy", "candidate", "searchspace")
PARAM_TYPES = ("str", "int", "float", "bool", "json")
#: MLflow's own limits (mlflow.utils.validation), checked here so a bad record fails early.
MAX_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000


@dataclass(frozen=True)
class FieldSpec:
    name: str
    required: bool = False
    type: str = "str"
    unit: str | None = None
    choices: tuple[str, ...] | None = None
    description: str = ""


@dataclass(frozen=True)
class Schema:
    kind: str
    version: int
    description: str
    params: dict[str, FieldSpec]
    metrics: dict[str, FieldSpec]
    tags: dict[str, FieldSpec]
    patterns: dict[str, dict[str, FieldSpec]] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        """The value of the ``tracker.schema`` tag: kind/version."""
        return f"{self.kind}/{self.version}"

    def lookup(self, section: str, name: str) -> FieldSpec | None:
        spec = getattr(self, section).get(name)
        if spec is not None:
            return spec
        for pattern, pspec in self.patterns.get(section, {}).items():
            if fnmatch.fnmatchcase(name, pattern):
                return pspec
        return None

    def check_metric(self, name: str, value: Any) -> None:
        if self.lookup("metrics", name) is None:
            raise SchemaError(f"{self.kind} run: metric {name!r} is not in schemas/{self.kind}.json")
        _check_metric(f"{self.kind} run", name, value)

    def validate(
        self,
        params: dict[str, str],
        metrics: dict[str, float],
        tags: dict[str, str],
        status: str,
    ) -> None:
        """Raise SchemaError naming the first field that breaks the schema."""
        where = f"{self.kind} run"
        for section, values in (("params", params), ("metrics", metrics), ("tags", tags)):
            for name, value in values.items():
                if not name or len(name) > MAX_KEY_LENGTH:
                    raise SchemaError(f"{where}: {section[:-1]} name {name!r} is empty or too long")
                spec = self.lookup(section, name)
                if spec is None:
                    raise SchemaError(
                        f"{where}: {section[:-1]} {name!r} is not in schemas/{self.kind}.json"
                    )
                if section == "metrics":
                    _check_metric(where, name, value)
                else:
                    _check_value(where, section[:-1], spec, value)
            for name, spec in getattr(self, section).items():
                if not spec.required or name in values:
                    continue
                if section == "metrics" and status != "FINISHED":
                    continue
                raise SchemaError(f"{where}: required {section[:-1]} {name!r} is missing")
        if status == "FAILED" and "tracker.failure_reason" not in tags:
            raise SchemaError(f"{where}: a FAILED run needs the tag 'tracker.failure_reason'")


def _check_metric(where: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(f"{where}: metric {name!r} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise SchemaError(
            f"{where}: metric {name!r} is {value}; leave a metric out when it cannot be measured"
        )


def _check_value(where: str, section: str, spec: FieldSpec, value: str) -> None:
    limit = MAX_PARAM_VALUE_LENGTH if section == "param" else MAX_TAG_VALUE_LENGTH
    if not isinstance(value, str):
        raise SchemaError(f"{where}: {section} {spec.name!r} must be a string once rendered")
    if len(value) > limit:
        raise SchemaError(f"{where}: {section} {spec.name!r} is longer than {limit} characters")
    try:
        if spec.type == "int":
            int(value)
        elif spec.type == "float":
            if not math.isfinite(float(value)):
                raise ValueError(value)
        elif spec.type == "bool":
            if value not in ("true", "false"):
                raise ValueError(value)
        elif spec.type == "json":
            json.loads(value)
    except (ValueError, RecursionError):  # JSON nested past Python's recursion limit: a traceback until 0.9.17
        shown = value if len(value) <= 80 else value[:60] + f"... ({len(value)} characters)"  # one line to read
        raise SchemaError(
            f"{where}: {section} {spec.name!r} should be {spec.type}, got {shown!r}"
        ) from None
    if spec.choices and value not in spec.choices:
        raise SchemaError(
            f"{where}: {section} {spec.name!r} is {value!r}, expected one of {', '.join(spec.choices)}"
        )


def _fields(raw: dict[str, Any], section: str, source: str) -> dict[str, FieldSpec]:
    out: dict[str, FieldSpec] = {}
    for name, body in raw.items():
        if not isinstance(body, dict):
            raise SchemaError(f"{source}: {section}.{name} must be an object")
        ftype = body.get("type", "float" if section == "metrics" else "str")
        if section != "metrics" and ftype not in PARAM_TYPES:
            raise SchemaError(f"{source}: {section}.{name} has unknown type {ftype!r}")
        if section == "metrics" and not body.get("unit"):
            raise SchemaError(f"{source}: metric {name!r} declares no unit")
        choices = body.get("choices")
        out[name] = FieldSpec(
            name=name,
            required=bool(body.get("required", False)),
            type=ftype,
            unit=body.get("unit"),
            choices=tuple(choices) if choices else None,
            description=body.get("description", ""),
        )
    return out


@cache
def _read(kind: str) -> dict[str, Any]:
    path = project_dir("schemas") / f"{kind}.json"
    if not path.exists():
        raise SchemaError(f"unknown run kind {kind!r}: expected one of {', '.join(KINDS)}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path.name}: not valid JSON ({exc})") from None


@cache
def load_schema(kind: str) -> Schema:
    """The schema of one kind, with the common fields merged in."""
    if kind not in KINDS:
        raise SchemaError(f"unknown run kind {kind!r}: expected one of {', '.join(KINDS)}")
    common, raw = _read("_common"), _read(kind)
    source = f"schemas/{kind}.json"
    sections = {}
    for section in ("params", "metrics", "tags"):
        merged = {**common.get(section, {}), **raw.get(section, {})}
        sections[section] = _fields(merged, section, source)
    patterns = {
        section: _fields(body, section, source) for section, body in raw.get("patterns", {}).items()
    }
    return Schema(
        kind=kind,
        version=int(raw["version"]),
        description=raw.get("description", ""),
        patterns=patterns,
        **sections,
    )


def schema_tag_problem(value: str, kind: str | None = None) -> tuple[str, bool] | None:
    """What is wrong with a ``tracker.schema`` tag, of a run of ``kind`` (its ``tracker.kind``, where
    known), and whether a newer tracker could have written it; None where nothing is. Tracker writes
    ``KIND/VERSION``, the version in plain digits: another kind's schema (``layer/1`` on a network
    run) or a version written otherwise (``network/01``) passed until 0.9.7, taken for the format known."""
    tag_kind, _, version = value.partition("/")
    if tag_kind not in KINDS or not re.fullmatch(r"[0-9]+", version):
        return f"malformed tracker.schema tag {value!r}", False
    known = load_schema(tag_kind).version
    if version != str(int(version)):
        return f"malformed tracker.schema tag {value!r} (tracker writes {tag_kind}/{known})", False
    if int(version) != known:
        return f"run record format {value} is not known to this tracker (it reads {tag_kind}/{known})", True
    if kind is not None and kind != tag_kind:
        expected = f" (tracker writes {kind}/{load_schema(kind).version})" if kind in KINDS else ""
        return f"tracker.schema tag {value!r} is another kind's, on a {kind} run{expected}", False
    return None


def parse_schema_tag(value: str, kind: str | None = None) -> tuple[str, int]:
    """Split a ``tracker.schema`` tag (of a run of ``kind``, where known); loud on a version this
    tracker does not know, and on a tag it never writes (see :func:`schema_tag_problem`)."""
    if (problem := schema_tag_problem(value, kind)) is not None:
        raise SchemaError(problem[0])
    tag_kind, _, version = value.partition("/")
    return tag_kind, int(version)
