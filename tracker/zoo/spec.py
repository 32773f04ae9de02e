"""Network references: a zoo name, or a spec file of a generated or pruned network.

Everything that takes a MODEL argument resolves it here, so a spec written by
``tracker zoo generate`` or ``tracker zoo prune`` works wherever a zoo name does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.errors import ConfigError

SPEC_FORMAT = "tracker.netspec/1"


@dataclass(frozen=True)
class ModelRef:
    name: str
    input_size: int
    spec: dict[str, Any] | None = None  # None for zoo names

    @property
    def is_detection(self) -> bool:
        from tracker.zoo.torchvision_zoo import detection_models

        return self.spec is None and self.name in detection_models()

    def build(self) -> Any:
        from tracker.zoo.torchvision_zoo import build_model

        if self.spec is None:
            return build_model(self.name)
        kind = self.spec.get("kind")
        if kind == "generated":
            from tracker.zoo.generator import build_generated

            return build_generated(self.spec).eval()
        if kind == "pruned":
            from tracker.zoo.pruning import build_pruned

            return build_pruned(self.spec).eval()
        raise ConfigError(f"spec {self.name!r}: unknown kind {kind!r} (expected generated or pruned)")


def read_spec(path: Path) -> dict[str, Any]:
    try:
        spec = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read network spec {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not a network spec: not JSON ({exc})") from None
    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        raise ConfigError(f"{path} is not a network spec (format should be {SPEC_FORMAT!r})")
    for key in ("kind", "name"):
        if key not in spec:
            raise ConfigError(f"{path}: network spec has no {key!r}")
    return spec


def resolve(ref: str) -> ModelRef:
    """A zoo name or the path of a spec file (``.json``). Zoo names have no folder and no suffix."""
    from tracker.zoo.torchvision_zoo import all_models, check_model_name, default_input_size

    path = Path(ref)
    file_like = ref.endswith(".json") or path.suffix or len(path.parts) > 1
    if file_like or path.is_file() or (path.is_dir() and ref not in all_models()):
        if not path.is_file():
            raise ConfigError(f"network spec {ref} {'is a folder, not a file' if path.is_dir() else 'does not exist'}")
        return spec_ref(read_spec(path))
    check_model_name(ref)
    return ModelRef(ref, default_input_size(ref))


def spec_ref(spec: dict[str, Any]) -> ModelRef:
    """The network of a spec already read (a file's content, or the copy a plan carries)."""
    from tracker.zoo.torchvision_zoo import default_input_size

    base = spec.get("base")
    size = int(spec.get("input_size") or (default_input_size(base) if base else 224))
    return ModelRef(spec["name"], size, spec)


def write_specs(specs: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Each spec's file in ``folder`` (``NAME.json``); a file that already says the same is left
    as it is (a campaign loaded again rewrites nothing)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in specs:
        path = folder / f"{spec['name']}.json"
        text = json.dumps(spec, indent=2, sort_keys=True) + "\n"
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths
