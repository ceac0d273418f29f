"""`sreforge agents install`: the plan, the bookkeeping and the profile, the install step faked.

The fake installer writes a small executable where the real package would put its
CLI; the `agents check` that follows runs it for real, inside bubblewrap, at the
neutral place the agent sees. The real installs are in `test_agents_install_real.py`.
"""

from __future__ import annotations

import argparse
import shutil
import tomllib
from pathlib import Path

import pytest
from sreforge_contracts import ExecutionRequest
from sreforge_runner import RunnerSettings, find_profile, resolve

from sreforge._agents_cli import add_agents_commands, handle_agents_install
from sreforge._errors import SreforgeError
from sreforge._installer import JailedInstaller, install_tool, write_profile
from sreforge._installs import RELEASES, InstallPlan, install_commands, plan_install, profile_text

REPO = Path(__file__).resolve().parents[1]
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


class FakeInstaller:
    """Writes an executable that prints its own path and version, counting installs."""

    def __init__(self) -> None:
        self.installed: list[str] = []

    def install(self, plan: InstallPlan) -> None:
        """Put `<exe> --version` where the package's executable goes."""
        relative = plan.executable.relative_to(plan.folder)
        script = plan.staging / relative
        script.parent.mkdir(parents=True)
        script.write_text(f'#!/bin/sh\necho "$0 {plan.release.version}"\n')
        script.chmod(0o755)
        self.installed.append(plan.release.version)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private engine home whose path names the harness (as the default one does)."""
    home = tmp_path / "sreforge-home"
    monkeypatch.setenv("SREFORGE_HOME", str(home))
    monkeypatch.setenv("SREFORGE_TOOLS", str(tmp_path / "agent-tools"))
    monkeypatch.delenv("SREFORGE_AGENTS", raising=False)
    return home


def _install(argv: list[str], installer: FakeInstaller) -> int:
    parser = argparse.ArgumentParser(prog="sreforge")
    add_agents_commands(parser.add_subparsers())
    args = parser.parse_args(["agents", "install", *argv])
    assert args.handler is handle_agents_install
    return handle_agents_install(args, installer)


def test_npm_presets_install_the_pinned_package_into_a_prefix_at_the_inside_place(
    home: Path,
) -> None:
    """npm installs `<package>@<version>` into the prefix the agent will see."""
    plan = plan_install("codex", home.parent / "agent-tools", home / "agents")
    assert plan.folder == home.parent / "agent-tools" / "codex" / "0.171.0"
    assert plan.executable == plan.folder / "node_modules" / ".bin" / "codex"
    assert install_commands(plan, "uv", "python3") == [
        [
            "npm", "install", "--prefix", "/opt/agent/codex",
            "--no-audit", "--no-fund", "--no-update-notifier", "@openai/codex@0.171.0",
        ]
    ]  # fmt: skip


def test_pypi_presets_install_into_a_relocatable_venv_on_a_base_under_usr(home: Path) -> None:
    """A relocatable venv with bytecode compiled where the agent sees it; `--version`
    overrides the pinned release."""
    plan = plan_install("aider", home.parent / "agent-tools", home / "agents", version="0.86.1")
    assert plan.folder == home.parent / "agent-tools" / "aider" / "0.86.1"
    assert plan.executable == plan.folder / "bin" / "aider"
    venv, pip = install_commands(plan, "/run/uv", "/usr/bin/python3.11")
    assert venv == ["/run/uv", "venv", "--quiet", "--relocatable", "--python",
                    "/usr/bin/python3.11", "/opt/agent/aider"]  # fmt: skip
    assert pip[1:] == ["pip", "install", "--python", "/opt/agent/aider/bin/python",
                       "--compile-bytecode", "aider-chat==0.86.1"]  # fmt: skip


def test_the_release_table_covers_every_cli_preset_of_the_catalog() -> None:
    """Each shipped CLI preset is installable, its profile's preset named the same."""
    presets = {"claude-code", "codex", "gemini-cli", "aider", "mini-swe-agent"}
    assert set(RELEASES) == presets
    for preset in presets:
        profile = tomllib.loads((REPO / "agents" / f"{preset}.toml").read_text())
        assert profile["command"]["preset"] == preset


@pytest.mark.parametrize(
    ("preset", "version", "message"),
    [("vim", None, "no installable preset 'vim'"), ("codex", "1.0; rm", "not a version")],
)
def test_an_unknown_preset_or_a_bad_version_is_an_operator_error(
    home: Path, preset: str, version: str | None, message: str
) -> None:
    """Nothing is installed for a preset without a release or a version that is no name."""
    with pytest.raises(SreforgeError, match=message):
        plan_install(preset, home.parent / "agent-tools", home / "agents", version)


@needs_bwrap
def test_install_writes_a_ready_profile_and_a_second_run_installs_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The profile names the absolute executable, its install path and the neutral place;
    the check runs it there (the engine home's path never shows); run again, nothing."""
    installer = FakeInstaller()
    assert _install(["codex"], installer) == 0
    out = capsys.readouterr().out
    assert "installed in" in out
    assert "/opt/agent/codex/node_modules/.bin/codex 0.171.0" in out  # $0 as the agent sees it
    assert "readiness READY" in out
    folder = home.parent / "agent-tools" / "codex" / "0.171.0"
    profile = find_profile(REPO / "agents", "codex", home / "agents")
    assert profile.command is not None
    assert profile.command.executable == str(folder / "node_modules" / ".bin" / "codex")
    assert profile.command.install_paths == (str(folder),)
    assert profile.command.mount_at == {str(folder): "/opt/agent/codex"}
    assert profile.command.args[:2] == ("exec", "--json")  # the preset's own defaults kept
    assert (home.parent / "agent-tools" / "codex" / "0.171.0.json").is_file()
    request = ExecutionRequest(
        request_id="r", harness_profile_ref="codex", repository="/nowhere", title="page"
    )
    resolved = resolve(request, RunnerSettings())
    assert resolved.profile.command == profile.command
    assert resolved.readiness.state == "ready"

    assert _install(["codex"], installer) == 0
    assert "nothing to install" in capsys.readouterr().out
    assert installer.installed == ["0.171.0"]
    assert _install(["codex", "--version", "0.170.0"], installer) == 0
    assert installer.installed == ["0.171.0", "0.170.0"]
    folder = home.parent / "agent-tools" / "codex" / "0.170.0"
    assert (folder / "node_modules" / ".bin" / "codex").exists()


def test_an_installed_profile_overlays_the_catalog_only_without_sreforge_agents(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An explicit catalog (`SREFORGE_AGENTS`) is the whole catalog: a run-specific copy
    of the profile is never shadowed by the engine home's."""
    plan = plan_install("codex", home.parent / "agent-tools", home / "agents")
    assert install_tool(plan, FakeInstaller()) is not None
    write_profile(plan, REPO / "agents")
    assert RunnerSettings().installed_dir == home / "agents"
    monkeypatch.setenv("SREFORGE_AGENTS", str(REPO / "agents"))
    settings = RunnerSettings()
    assert settings.installed_dir is None
    profile = find_profile(settings.agents_dir, "codex", settings.installed_dir)
    assert profile.command is not None
    assert profile.command.executable == "codex"


@needs_bwrap
@pytest.mark.timeout(120)
def test_a_registry_failure_names_the_package_and_version_and_leaves_nothing(
    home: Path,
) -> None:
    """A release the registry does not have: the error names it; no folder, no marker."""
    plan = plan_install("codex", home.parent / "agent-tools", home / "agents", version="0.0.0-none")
    with pytest.raises(SreforgeError, match=r"@openai/codex 0\.0\.0-none from npm: `npm install"):
        install_tool(plan, JailedInstaller(progress=lambda line: None))
    assert not plan.folder.exists()
    assert not plan.staging.exists()
    assert not plan.marker.exists()


def test_the_profile_keeps_the_preset_and_sets_the_install_where_no_executable_was(
    home: Path,
) -> None:
    """A `[command]` without `executable` (or with stale install lines) gets the three
    install lines; comments and every other table stay as they were."""
    builtin = (
        '# my comment\nname = "aider"\nrein = "command"\n[command]\npreset = "aider"\n'
        'install_paths = ["/old"]\nargs = ["--yes-always"]\n[command.env]\nA = "1"\n'
    )
    plan = plan_install("aider", home.parent / "agent-tools", home / "agents")
    text = profile_text(builtin, plan)
    data = tomllib.loads(text)
    assert data["command"] == {
        "preset": "aider",
        "executable": str(plan.folder / "bin" / "aider"),
        "install_paths": [str(plan.folder)],
        "mount_at": {str(plan.folder): "/opt/agent/aider"},
        "args": ["--yes-always"],
        "env": {"A": "1"},
    }
    assert "# my comment" in text
    assert text.startswith("# Written by `sreforge agents install aider` (aider-chat 0.86.2")
    assert profile_text(text, plan) == text  # rewriting its own output changes nothing


def test_a_tools_folder_naming_the_harness_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tools under a folder whose path names the harness would show it to the agent
    (mountinfo): the install refuses before anything is installed, naming the setting."""
    monkeypatch.setenv("SREFORGE_TOOLS", str(home / "tools"))
    installer = FakeInstaller()
    with pytest.raises(SreforgeError, match=r"SREFORGE_TOOLS: .*'sreforge'"):
        _install(["codex"], installer)
    assert installer.installed == []
    assert not (home / "tools").exists()
