"""The `sreforge` entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sreforge.cli import main


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """`sreforge --help` prints usage and succeeds, so operators can discover the verbs."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "sreforge" in capsys.readouterr().out


def test_bus_config_prints_the_server_config_and_credential_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator configures an external nats-server (and the `nats` CLI) from these files."""
    monkeypatch.setenv("SREFORGE_HOME", str(tmp_path))
    assert main(["bus", "config"]) == 0
    config = Path(capsys.readouterr().out.strip())
    assert config == tmp_path / "nats" / "server.conf"
    assert '"user": "operator"' in config.read_text()
    assert main(["bus", "config", "--credential", "operator"]) == 0
    operator = Path(capsys.readouterr().out.strip())
    assert json.loads(operator.read_text())["user"] == "operator"
    assert main(["bus", "config", "--credential", "nobody"]) == 2
    assert "no bus credential for 'nobody'" in capsys.readouterr().err
