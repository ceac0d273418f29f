"""The guard over the agent's sandbox (`sreforge_contracts`): process titles, env, HOME, bin."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from sreforge_contracts import (
    SANDBOX_PROBE,
    SandboxProbeFailed,
    SandboxView,
    Tells,
    find_leaks,
    parse_sandbox_probe,
    sandbox_surfaces,
)

GitRepo = Callable[..., Path]
TELLS = Tells.for_run("checkout-slow", "ShopCheckoutLatencyHigh")
CLEAN = SandboxView(
    process_titles=["bwrap --die-with-parent -- /usr/bin/python3 /run/net/relay.py", "bash"],
    env={"HOME": "/home/agent", "PATH": "/opt/oncall/bin:/usr/bin:/bin"},
    home_files={".gitconfig": "[user]\n\tname = On-call Engineer\n", "session/x.json": ""},
    bin_files={"submit": "#!/bin/sh\nexec true\n"},
)


def _found(view: SandboxView) -> list[tuple[str, str]]:
    return [(leak.what, leak.where) for leak in find_leaks(sandbox_surfaces(view), TELLS)]


def test_a_clean_view_has_no_tells() -> None:
    """The shapes the runner makes (relay, .gitconfig, submit) read as ordinary."""
    assert _found(CLEAN) == []


@pytest.mark.parametrize(
    ("view", "where"),
    [
        (SandboxView(process_titles=["/usr/bin/python3 /opt/oracle/relay.py"]), "titles"),
        (SandboxView(env={"RUN_MODE": "fault-drill"}), "env RUN_MODE"),
        (SandboxView(mounts="130 116 254:0 /srv/oracle /workspace rw - ext4 /dev/vda\n"), "mounts"),
        (SandboxView(home_files={"notes.md": "the solution is near\n"}), "HOME file notes.md"),
        (SandboxView(home_files={"inject.log": ""}), "HOME file names"),
        (SandboxView(bin_files={"harness-submit": "#!/bin/sh\n"}), "bin file names"),
        (SandboxView(bin_files={"submit": "# benchmark hook\n"}), "bin file submit"),
    ],
)
def test_a_tell_on_any_sandbox_surface_is_caught(view: SandboxView, where: str) -> None:
    """Each part of the sandbox the agent can list or read is scanned."""
    found = _found(view)
    assert len(found) == 1
    assert found[0][1].endswith(where)


def test_secret_values_are_redacted_but_their_names_are_scanned() -> None:
    """A key's value is never echoed into a reason; a telling *name* still is a tell."""
    view = SandboxView(env={"MODEL_API_KEY": "oracle-sk-123", "SREFORGE_TOKEN": "abc"})
    found = find_leaks(sandbox_surfaces(view), TELLS)
    assert [leak.excerpt for leak in found] == ["SREFORGE_TOKEN=<redacted>"]


def test_a_probe_that_printed_nothing_is_an_error() -> None:
    """No view line: the sandbox was not seen, which must not pass as clean."""
    with pytest.raises(SandboxProbeFailed, match="printed no view"):
        parse_sandbox_probe("bwrap: setting up uid map: Permission denied\n")
    with pytest.raises(SandboxProbeFailed, match="malformed"):
        parse_sandbox_probe("sandbox-view:" + json.dumps({"env": {}}))


@pytest.mark.timeout(60)
def test_the_probe_reads_titles_env_home_and_bin_inside_a_real_sandbox(
    tmp_path: Path, git_repo: GitRepo, clean_files: dict[str, str]
) -> None:
    """Under the runner's own bubblewrap sandbox, a process whose title names the harness
    is seen from inside, with the relay, HOME, `submit` and the mounts' host paths."""
    runner = pytest.importorskip("sreforge_runner")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    workspace = git_repo(clean_files)
    sandbox = runner.HostSandbox(
        workspace,
        tmp_path / "agent",
        runner.RunnerSettings(),
        kind="host-sandboxed",
    )
    sandbox.create()
    # A decoy process with a telling title, then the probe (exec'd: it keeps the sandbox).
    launcher = (
        "import os, subprocess, sys\n"
        "subprocess.Popen(['harness-sidecar', '30'], executable='/bin/sleep')\n"
        "os.execv(sys.executable, [sys.executable, '-c', sys.argv[1], '/opt/oncall/bin'])\n"
    )
    try:
        outcome = asyncio.run(
            sandbox.run(["/usr/bin/python3", "-c", launcher, SANDBOX_PROBE], 30.0)
        )
        output = sandbox.log_path.read_text()
    finally:
        sandbox.destroy()
    assert outcome.exit_code == 0, output
    view = parse_sandbox_probe(output)
    assert any("/run/net/relay.py" in title for title in view.process_titles), view
    assert view.env["HOME"] == "/home/agent"
    assert ".gitconfig" in view.home_files
    assert "submit" in view.bin_files
    assert f"{workspace} /workspace " in view.mounts, "a bind mount's host path shows inside"
    found = find_leaks(sandbox_surfaces(view), TELLS)
    # The decoy's title, and the launcher's text in the titles of bwrap and the relay.
    assert {(leak.what, leak.where) for leak in found} == {
        ("harness word 'harness'", "sandbox process titles")
    }
    assert "harness-sidecar 30" in {leak.excerpt for leak in found}
