"""`sreforge agents list|show|check`: the catalog at a glance, probes stored under the home."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from sreforge._agents_cli import add_agents_commands
from sreforge._errors import SreforgeError

REPO_AGENTS = Path(__file__).resolve().parents[3] / "agents"


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="sreforge")
    add_agents_commands(parser.add_subparsers())
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private engine home, so probes never land in the real one."""
    monkeypatch.setenv("SREFORGE_HOME", str(tmp_path))
    monkeypatch.delenv("SREFORGE_AGENTS", raising=False)
    return tmp_path


def test_list_shows_every_profile_with_its_readiness(capsys: pytest.CaptureFixture[str]) -> None:
    """One line per profile: built-ins ready, presets unverified."""
    assert _run(["agents", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert rows["noop"][3] == "ready"
    assert rows["codex"][1:4] == ["command", "host-sandboxed", "unverified"]


def test_show_prints_the_command_line_and_route_names_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resolved headless command is visible; a credential value never is."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-print")
    assert _run(["agents", "show", "codex"]) == 0
    out = capsys.readouterr().out
    assert "codex exec --json" in out
    assert "OPENAI_API_KEY" in out
    assert "sk-must-not-print" not in out
    assert _run(["agents", "show", "codex", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["profile"]["name"] == "codex"


def test_show_names_the_model_proxy_flavor_and_upstream(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a preset's model calls go: the proxy flavor and its upstream, repointed by
    `[metadata] upstream`; a profile with the proxy off shows none."""
    assert _run(["agents", "show", "claude-code"]) == 0
    assert "proxy     anthropic -> https://api.anthropic.com" in capsys.readouterr().out
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for name, metadata in (
        ("aider", 'upstream = "http://127.0.0.1:9/v1"'),
        ("codex", 'proxy = "off"'),
    ):
        (catalog / f"{name}.toml").write_text(
            f'name = "{name}"\nrein = "command"\nsandbox = "host-sandboxed"\n'
            f'credential_routes = ["OPENAI_API_KEY"]\n[command]\npreset = "{name}"\n'
            f"[metadata]\n{metadata}\n"
        )
    monkeypatch.setenv("SREFORGE_AGENTS", str(catalog))
    assert _run(["agents", "show", "aider"]) == 0
    shown = "proxy     openai -> http://127.0.0.1:9/v1 (the agent gets OPENAI_API_BASE, "
    assert shown in capsys.readouterr().out
    assert _run(["agents", "show", "codex"]) == 0
    assert "proxy " not in capsys.readouterr().out


def test_check_stores_blocked_evidence_for_a_missing_binary(
    capsys: pytest.CaptureFixture[str], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI that is not installed: exit 1, BLOCKED with owner and evidence, stored."""
    catalog = home / "catalog"
    shutil.copytree(REPO_AGENTS, catalog)
    ghost = (
        (catalog / "gemini-cli.toml")
        .read_text()
        .replace('executable = "gemini"', 'executable = "gemini-not-installed-here"')
    )
    (catalog / "gemini-cli.toml").write_text(ghost)
    monkeypatch.setenv("SREFORGE_AGENTS", str(catalog))
    assert _run(["agents", "check", "gemini-cli"]) == 1
    out = capsys.readouterr().out
    assert "readiness BLOCKED" in out
    assert "owner     operator" in out
    assert "gemini-not-installed-here" in out
    stored = json.loads((home / "agents" / "gemini-cli.json").read_text())
    assert stored["readiness"]["state"] == "blocked"
    assert _run(["agents", "check", "noop"]) == 0


def test_an_unknown_profile_is_an_operator_error() -> None:
    """The CLI's error names the catalog and what it holds."""
    with pytest.raises(SreforgeError, match="unknown profile"):
        _run(["agents", "show", "nope"])
