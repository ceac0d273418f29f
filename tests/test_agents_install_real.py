"""`sreforge agents install` for real: one npm preset and one PyPI preset from the registries.

Each installs into a fresh engine home whose path names the harness (as the default
`~/.local/state/sreforge` does), through the shared npm and uv download caches, then
`agents check` runs the real CLI inside bubblewrap at `/opt/agent/<preset>`. Nothing in
the installed tree may name the engine home, and a second install is a quick no-op.
Needs bubblewrap and the registries (npm, PyPI); a cold cache takes minutes.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from sreforge_runner import RunnerSettings, stored_probe

from sreforge.cli import main

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.skipif(shutil.which("npm") is None, reason="npm not installed"),
]


def _naming(folder: Path, *needles: str) -> list[str]:
    """Files under `folder` whose bytes contain any of `needles` (grep, for speed)."""
    args = [arg for needle in needles for arg in ("-e", needle)]
    done = subprocess.run(
        ["grep", "-rlF", *args, str(folder)], capture_output=True, text=True, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.splitlines()


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("preset", "version", "probe"),
    [
        ("gemini-cli", "0.61.0", "0.61.0"),
        # The other presets (mini-swe-agent's `--help` probe included) are installed the
        # same way, into the kept tools folder, by tests/agents/test_real_agents.py.
    ],
)
def test_a_real_install_is_checked_ready_names_no_harness_and_is_idempotent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    preset: str,
    version: str,
    probe: str,
) -> None:
    """From zero to a checked agent in one command; the real CLI answers its probe inside
    the sandbox, and what the agent can read of its install never names the harness."""
    home = tmp_path / "sreforge-state"
    monkeypatch.setenv("SREFORGE_HOME", str(home))
    monkeypatch.setenv("SREFORGE_TOOLS", str(tmp_path / "agent-tools"))
    monkeypatch.delenv("SREFORGE_AGENTS", raising=False)
    started = time.monotonic()
    assert main(["agents", "install", preset]) == 0, capsys.readouterr()
    first = time.monotonic() - started
    out = capsys.readouterr().out
    assert "readiness READY" in out, out
    record = stored_probe(preset, RunnerSettings())
    assert record is not None
    assert record.checks[-1].exit_code == 0
    assert record.checks[-1].first_line == probe
    folder = tmp_path / "agent-tools" / preset / version
    assert _naming(folder, str(home), "sreforge") == []

    started = time.monotonic()
    assert main(["agents", "install", preset]) == 0
    again = time.monotonic() - started
    assert "nothing to install" in capsys.readouterr().out
    assert again < 60, f"a second install took {again:.1f} s"
    print(f"{preset} {version}: install {first:.1f} s, again {again:.1f} s")
