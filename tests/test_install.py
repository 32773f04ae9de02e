"""tools/install.py hands pip's own settings to uv, so that uv installs from where pip would."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _install_module():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("tracker_install", REPO / "tools" / "install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pip_settings_reach_uv_with_pips_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's [install] section overrides its [global] one, PIP_* variables override both, and
    every list entry becomes one flag; pip's certificate bundle is uv's."""
    install = _install_module()
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = /wheels/a\nextra-index-url = file:///idx/one file:///idx/two\n"
                    "cert = /certs/bundle.pem\nconstraint = /pins/global.txt\n"
                    "[install]\nconstraint = /pins/install.txt\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels/env1 /wheels/env2")
    monkeypatch.delenv("PIP_CERT", raising=False)
    settings = install.pip_settings(sys.executable)
    assert settings["find-links"] == "/wheels/env1 /wheels/env2"
    assert settings["constraint"] == "/pins/install.txt"
    args, env = install.uv_arguments(settings)
    pairs = list(zip(args[::2], args[1::2]))
    assert ("--index-strategy", "unsafe-best-match") in pairs
    assert [v for f, v in pairs if f == "--find-links"] == ["/wheels/env1", "/wheels/env2"]
    assert [v for f, v in pairs if f == "--extra-index-url"] == ["file:///idx/one", "file:///idx/two"]
    assert [v for f, v in pairs if f == "--constraint"] == ["/pins/install.txt"]
    assert env == {"SSL_CERT_FILE": "/certs/bundle.pem"}
    assert install.uv_arguments({"no-index": "true", "index-url": "file:///only"})[0][2:] == [
        "--index-url", "file:///only", "--no-index"]
