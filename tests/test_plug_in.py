"""The README's "Plug in your agent" walk-through: its commands and its profile are real.

The block after the `<!-- plug-in install` marker (install a preset, show it, run it)
must parse with the real CLI for a preset `agents install` knows. The blocks after the
`<!-- plug-in walk-through` marker are read from README.md: each
`sreforge ...` line of the shell block must parse with the real CLI, and the TOML block
must load with the real catalog loader and pass `sreforge agents check` once its
executable is a real binary (the scripted fake agent the e2e `cli-agent` run uses).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tomllib
from pathlib import Path

import pytest
from sreforge_contracts import ExecutionRequest, find_scenario
from sreforge_runner import ProfileRefused, RunnerSettings, load_profile, resolve

from sreforge._agents_cli import handle_agents_check, handle_agents_install, handle_agents_show
from sreforge._installs import RELEASES
from sreforge._run_cli import run_command
from sreforge.cli import _build_parser, main

REPO = Path(__file__).resolve().parents[1]
WALKTHROUGH = "<!-- plug-in walk-through"
INSTALL = "<!-- plug-in install"
FAKE_AGENT = REPO / "tests" / "e2e" / "fixtures" / "fake-cli-agent" / "fake-cli-agent"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def _blocks(kind: str) -> list[str]:
    """The walk-through section's fenced blocks of `kind` (up to the next heading)."""
    readme = (REPO / "README.md").read_text()
    assert WALKTHROUGH in readme, "README.md lost its walk-through marker"
    section = readme.split(WALKTHROUGH, 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"^```{kind}\n(.*?)^```", section, flags=re.M | re.S)


def _commands() -> list[list[str]]:
    """Every `sreforge ...` line of the walk-through's shell block, as argv after `sreforge`."""
    (block,) = _blocks("sh")
    lines = (shlex.split(line, comments=True) for line in block.splitlines())
    return [argv[1:] for argv in lines if argv and argv[0] == "sreforge"]


def _profile_text(**fields: object) -> str:
    """The walk-through's profile, with `fields` set to other values."""
    (profile,) = _blocks("toml")
    for key, value in fields.items():
        lines = profile.splitlines(keepends=True)
        at = [n for n, line in enumerate(lines) if line.startswith(f"{key} = ")]
        assert len(at) == 1, f"expected one `{key} =` line in the walk-through profile"
        lines[at[0]] = f"{key} = {json.dumps(value)}\n"  # JSON strings and lists are TOML too
        profile = "".join(lines)
    return profile


def _write_profile(catalog: Path, text: str) -> Path:
    catalog.mkdir(exist_ok=True)
    path = catalog / f"{tomllib.loads(text)['name']}.toml"
    path.write_text(text)
    return path


def _request(agent: str) -> ExecutionRequest:
    return ExecutionRequest(
        request_id="run-plug-in", harness_profile_ref=agent, repository="/nowhere", title="page"
    )


def test_every_walkthrough_command_parses_with_the_real_cli() -> None:
    """Check, show and run parse as the CLI's own verbs, for the profile the README writes
    and a scenario that exists."""
    name = tomllib.loads(_profile_text())["name"]
    handlers = {("agents", "check"): handle_agents_check, ("agents", "show"): handle_agents_show}
    seen = []
    for argv in _commands():
        args = _build_parser().parse_args(argv)  # SystemExit(2) on anything it does not know
        if argv[0] == "run":
            assert args.handler is run_command
            assert args.agent == name
            find_scenario(REPO / "use-cases", args.scenario)
        else:
            assert args.handler is handlers[argv[0], argv[1]], argv
            assert args.profile == name
        seen.append(argv[0] if argv[0] == "run" else " ".join(argv[:2]))
    assert seen == ["agents check", "agents show", "run"]


def test_the_section_starts_with_one_install_command_that_parses_with_the_real_cli() -> None:
    """`sreforge agents install <preset>` comes first, for a preset with a pinned
    release; `show` and `run` then name the same preset and a scenario that exists."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Plug in your agent", 1)[1]
    assert section.index(INSTALL) < section.index(WALKTHROUGH)
    block = section.split(INSTALL, 1)[1].split(WALKTHROUGH, 1)[0]
    (shell,) = re.findall(r"^```sh\n(.*?)^```", block, flags=re.M | re.S)
    lines = (shlex.split(line, comments=True) for line in shell.splitlines())
    commands = [argv[1:] for argv in lines if argv and argv[0] == "sreforge"]
    install, show, run = (_build_parser().parse_args(argv) for argv in commands)
    assert install.handler is handle_agents_install
    assert install.preset in RELEASES
    assert show.handler is handle_agents_show
    assert show.profile == install.preset
    assert run.handler is run_command
    assert run.agent == install.preset
    find_scenario(REPO / "use-cases", run.scenario)


def test_the_walkthrough_profile_loads_with_the_real_catalog_loader(tmp_path: Path) -> None:
    """A `custom` command profile in bubblewrap, its page as `{prompt_file}`, and an
    executable inside one of its install paths (else the sandbox could not run it)."""
    profile = load_profile(_write_profile(tmp_path, _profile_text()))
    assert (profile.rein, profile.sandbox) == ("command", "host-sandboxed")
    command = profile.command
    assert command is not None
    assert command.preset == "custom"
    assert "{prompt_file}" in command.args
    assert command.executable is not None
    executable = Path(command.executable)
    assert any(executable.is_relative_to(path) for path in command.install_paths)


@needs_bwrap
def test_agents_check_readies_the_walkthrough_profile_whose_binary_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sreforge agents check` runs the executable's `--version` inside bubblewrap: the
    fake agent answers, so the stored readiness is `ready` and runs are no proof runs."""
    text = _profile_text(executable=str(FAKE_AGENT), install_paths=[str(FAKE_AGENT.parent)])
    _write_profile(tmp_path / "agents", text)
    monkeypatch.setenv("SREFORGE_AGENTS", str(tmp_path / "agents"))
    monkeypatch.setenv("SREFORGE_HOME", str(tmp_path / "home"))
    name = tomllib.loads(text)["name"]
    assert main(["agents", "check", name]) == 0
    out = capsys.readouterr().out
    assert "fake-cli-agent 1.0" in out
    assert "readiness READY" in out
    resolved = resolve(_request(name), RunnerSettings())
    assert resolved.readiness.state == "ready"
    assert not resolved.proof_run


@needs_bwrap
def test_agents_check_blocks_a_profile_whose_binary_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A binary that fails `--version` inside the sandbox is stored as `blocked`, which
    refuses runs until a check passes."""
    text = _profile_text(executable="/bin/false", install_paths=[])
    _write_profile(tmp_path / "agents", text)
    monkeypatch.setenv("SREFORGE_AGENTS", str(tmp_path / "agents"))
    monkeypatch.setenv("SREFORGE_HOME", str(tmp_path / "home"))
    name = tomllib.loads(text)["name"]
    assert main(["agents", "check", name]) == 1
    assert "readiness BLOCKED" in capsys.readouterr().out
    with pytest.raises(ProfileRefused, match="blocked"):
        resolve(_request(name), RunnerSettings())
