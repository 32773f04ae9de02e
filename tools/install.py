"""Install tracker and its test extras into the virtual environment that runs this script.

`make` calls it once per change of pyproject.toml. pip takes about 100 s here to lay out
torch's wheels; uv installs the same packages from the same places in about 25 s. uv reads none
of pip's configuration, so pip's own settings (`pip config list`: find-links, indexes,
constraints, certificate bundle) are handed to it, with pip's choice among indexes (the best
version on any of them). Where uv cannot be had or fails, pip does the install as before: the
result is the same packages either way.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

#: pip's sections, lowest precedence first: a command's own section overrides ``global``, and
#: PIP_* environment variables (section ``:env:``) override both.
SECTIONS = ("global", "install", ":env:")

#: pip settings that take a list (whitespace-separated in a file or a variable) and uv's flag.
LIST_FLAGS = {"find-links": "--find-links", "extra-index-url": "--extra-index-url", "constraint": "--constraint"}


def pip_settings(python: str = sys.executable) -> dict[str, str]:
    """pip's effective settings for ``pip install``: key -> value, as pip would use them."""
    out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True).stdout
    found: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        name, sep, raw = line.partition("=")
        section, dot, key = name.rpartition(".")
        if not sep or not dot or section not in SECTIONS:
            continue
        try:
            value = ast.literal_eval(raw)  # pip prints each value as its repr
        except (ValueError, SyntaxError):
            value = raw
        found.setdefault(key, {})[section] = str(value)
    return {key: next(by[s] for s in reversed(SECTIONS) if s in by) for key, by in found.items()}


def uv_arguments(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's flags and environment for pip's ``settings``."""
    args = ["--index-strategy", "unsafe-best-match"]  # pip's rule: the best version on any index
    env: dict[str, str] = {}
    for key, flag in LIST_FLAGS.items():
        for value in settings.get(key, "").split():
            args += [flag, value]
    if settings.get("index-url"):
        args += ["--index-url", settings["index-url"]]
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        args.append("--no-index")
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"]
    return args, env


def _run(cmd: list[str], env: dict[str, str] | None = None) -> bool:
    return subprocess.run(cmd, env={**os.environ, **(env or {})}).returncode == 0


def main() -> int:
    python, project = sys.executable, str(Path(__file__).resolve().parents[1])
    target = [f"{project}[test]"]
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    start = time.monotonic()
    uv = Path(python).parent / "uv"
    try:
        settings = pip_settings(python)
    except (OSError, subprocess.CalledProcessError) as exc:
        settings, uv_ok = {}, False
        print(f"install: cannot read pip's settings ({exc}); pip installs", file=sys.stderr)
    else:
        uv_ok = uv.exists() or _run([*pip, "uv"])
    if uv_ok:
        args, env = uv_arguments(settings)
        uv_ok = _run([str(uv), "pip", "install", "--quiet", "--python", python, *args, "-e", *target], env)
        if not uv_ok:
            print("install: uv could not install; pip installs instead", file=sys.stderr)
    if not uv_ok and not _run([*pip, "--no-compile", "-e", *target]):
        return 1
    print(f"install: {'uv' if uv_ok else 'pip'} installed tracker and its test extras in "
          f"{time.monotonic() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
