"""Real CLI agents as shipped: each preset's current release in a whole graded run.

Each preset's CLI is installed with `sreforge agents install <preset>`, exactly as a user
would: into the default tools folder (`~/.local/share/agent-tools`, kept between CI runs,
so a second install is a no-op), its profile into a test engine home
(`SREFORGE_TEST_AGENTS_HOME`, default `~/.cache/sreforge-test-agents`).
Each run gets that profile in a catalog of its own, pointed (`metadata.upstream`) at a
**replay model server** — the test double for the hosted model API, which cannot run
here — that plays the preset's conversation from `replay.conversations`: inspect, apply
the scenario's fix, commit, `submit`. The real binary runs in bubblewrap and talks to the
runner's model proxy, which holds the (dummy) real key and forwards to the replay.
A second kind of run makes a mistake on the way and must be recorded truthfully.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from replay import ReplayServer, Script
from wholerun import (
    REPO,
    SCENARIO_PARTS,
    Run,
    RunPool,
    RunSpec,
    WholeRuns,
    finished,
    open_pool,
)

pytestmark = pytest.mark.integration

AGENTS_HOME = Path(
    os.environ.get("SREFORGE_TEST_AGENTS_HOME", Path.home() / ".cache" / "sreforge-test-agents")
)
INSTALL_LIMIT_S = 900
_OPENAI_FLAVORED = {"codex", "aider", "mini-swe-agent"}  # their upstream ends in /v1
_servers: dict[str, ReplayServer] = {}
_keys: dict[str, str] = {}


def _fix_patch() -> str:
    (fix,) = REPO.glob("use-cases/" + "/".join((*SCENARIO_PARTS, "solution", "fix.patch")))
    return fix.read_text()


def _conversation(preset: str) -> Any:
    return importlib.import_module(f"replay.conversations.{preset.replace('-', '_')}")


def install(preset: str) -> dict[str, Any]:
    """`sreforge agents install <preset>` into the kept test engine home; its profile."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SREFORGE_")}
    env["SREFORGE_HOME"] = str(AGENTS_HOME)
    argv = [sys.executable, "-m", "sreforge", "agents", "install", preset]
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=INSTALL_LIMIT_S
    )
    assert done.returncode == 0, (
        f"install {preset}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    )
    profile = AGENTS_HOME / "agents" / f"{preset}.toml"
    return tomllib.loads(profile.read_text())


def _toml(table: dict[str, Any], prefix: str = "") -> str:
    """A profile as TOML (its values are strings, numbers, booleans, lists and tables)."""
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
    lines = [f"[{prefix}]"] if prefix and scalars else []
    lines += [f"{json.dumps(key)} = {json.dumps(value)}" for key, value in scalars]
    for key, value in table.items():
        if isinstance(value, dict):
            header = f"{prefix}.{json.dumps(key)}" if prefix else json.dumps(key)
            lines += ["", _toml(value, header)]
    return "\n".join(lines)


def _plug_in(preset: str, conversation: Callable[[str], Script]) -> Callable[[Run], None]:
    """The installed profile in the run's own catalog, upstream at a fresh replay server."""

    def prepare(run: Run) -> None:
        profile = install(preset)
        module = _conversation(preset)
        server = ReplayServer(conversation(_fix_patch()), model=module.MODEL).start()
        _servers[run.name] = server
        upstream = server.url + ("/v1" if preset in _OPENAI_FLAVORED else "")
        profile["model"] = module.MODEL
        profile.setdefault("metadata", {})["upstream"] = upstream
        profile.pop("readiness", None)
        catalog = run.root / "agents"
        shutil.copytree(REPO / "agents", catalog)
        (catalog / f"{preset}.toml").write_text(_toml(profile) + "\n")
        key = f"sk-replay-{secrets.token_hex(12)}"
        _keys[run.name] = key
        (route,) = profile["credential_routes"][:1]
        run.extra_env = {"SREFORGE_AGENTS": str(catalog), route: key}
        check = [sys.executable, "-m", "sreforge", "agents", "check", preset]
        done = subprocess.run(
            check, cwd=REPO, env=run.env(), capture_output=True, text=True, timeout=120
        )
        run.check_output = f"exit {done.returncode}\n{done.stdout}{done.stderr}"

    return prepare


def _fixed(preset: str) -> Callable[[str], Script]:
    return lambda patch: _conversation(preset).fixed(patch)


def _mistaken(preset: str) -> Callable[[str], Script]:
    return lambda patch: _conversation(preset).mistaken(patch)


PRESETS = ("claude-code", "codex", "gemini-cli", "aider", "mini-swe-agent")
RUNS = {
    **{preset: RunSpec(preset, prepare=_plug_in(preset, _fixed(preset))) for preset in PRESETS},
    "claude-code-mistaken": RunSpec(
        "claude-code", prepare=_plug_in("claude-code", _mistaken("claude-code"))
    ),
    "codex-mistaken": RunSpec("codex", prepare=_plug_in("codex", _mistaken("codex"))),
}
TEST_RUNS = {
    **{f"test_{p.replace('-', '_')}_passes_as_shipped": p for p in PRESETS},
    "test_a_failing_apply_is_recorded_truthfully": "claude-code-mistaken",
    "test_a_ci_breaking_edit_is_rejected_with_the_agents_output": "codex-mistaken",
}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The selected runs, all started when the first test asks; replay servers closed after."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs
    for server in _servers.values():
        server.close()


def _passes_as_shipped(pool: RunPool, preset: str) -> None:
    run, outcome, record = finished(pool, preset)
    assert "readiness READY" in run.check_output, run.check_output
    assert outcome["verdict"] == "passed", f"{outcome}\n{run.progress}"
    assert record["proof_run"] is False
    transcript = record["agent_transcript"]
    assert (transcript["harness"], transcript["confinement"]) == (preset, "host-sandboxed")
    calls = transcript["raw_json"]["model_calls"]
    assert calls["calls"] >= 2, calls
    assert calls["tokens_in"] > 0, calls
    assert calls["tokens_out"] > 0, calls
    assert calls["error_calls"] == 0, f"refused or failed model calls: {calls}"
    print(
        f"{preset}: {outcome['verdict']} {record['score']['score']}, {calls['calls']} calls, "
        f"{calls['tokens_in']}/{calls['tokens_out']} tokens, wall {run.wall_s:.0f} s"
    )
    server, key = _servers[preset], _keys[preset]
    auth = [
        " ".join(r.headers.get(h, "") for h in ("authorization", "x-api-key", "x-goog-api-key"))
        for r in server.calls()
    ]
    assert auth, "the replay server got no model call"
    assert all(key in seen for seen in auth), "the proxy forwards the real key on every call"
    record_dir = Path(outcome["record"]).parent
    for path in (p for p in record_dir.rglob("*") if p.is_file()):
        assert key not in path.read_text(errors="replace"), f"the key is in {path}"


@pytest.mark.timeout(1200)
def test_claude_code_passes_as_shipped(pool: RunPool) -> None:
    """Claude Code, as installed by `agents install`, fixes the incident and passes."""
    _passes_as_shipped(pool, "claude-code")


@pytest.mark.timeout(1200)
def test_codex_passes_as_shipped(pool: RunPool) -> None:
    """Codex CLI, as installed by `agents install`, fixes the incident and passes."""
    _passes_as_shipped(pool, "codex")


@pytest.mark.timeout(1200)
def test_gemini_cli_passes_as_shipped(pool: RunPool) -> None:
    """Gemini CLI, as installed by `agents install`, fixes the incident and passes."""
    _passes_as_shipped(pool, "gemini-cli")


@pytest.mark.timeout(1200)
def test_aider_passes_as_shipped(pool: RunPool) -> None:
    """aider, as installed by `agents install`, fixes the incident and passes."""
    _passes_as_shipped(pool, "aider")


@pytest.mark.timeout(1200)
def test_mini_swe_agent_passes_as_shipped(pool: RunPool) -> None:
    """mini-swe-agent, as installed by `agents install`, fixes the incident and passes."""
    _passes_as_shipped(pool, "mini-swe-agent")


@pytest.mark.timeout(1200)
def test_a_failing_apply_is_recorded_truthfully(pool: RunPool) -> None:
    """Claude Code whose patch does not apply and who stops: failed, no submission, and the
    record keeps what the agent saw (the failing apply) and its model calls."""
    run, outcome, record = finished(pool, "claude-code-mistaken")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert record["ci"] is None
    assert not record["trajectory"]["submitted"]
    assert record["agent_transcript"]["raw_json"]["model_calls"]["calls"] >= 1
    assert "patch" in json.dumps(record["agent_transcript"]).lower()


@pytest.mark.timeout(1200)
def test_a_ci_breaking_edit_is_rejected_with_the_agents_output(pool: RunPool) -> None:
    """Codex that submits an edit breaking the app's tests: rejected by CI with its output."""
    run, outcome, record = finished(pool, "codex-mistaken")
    assert outcome["verdict"] == "rejected", f"{outcome}\n{run.progress}"
    assert record["ci"]["green"] is False
    assert record["trajectory"]["submitted"]
    assert record["agent_transcript"]["raw_json"]["model_calls"]["calls"] >= 1
