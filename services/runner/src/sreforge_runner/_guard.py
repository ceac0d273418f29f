"""The contamination guard over the agent's own sandbox, per run, before the agent starts.

The context service scans the page, the workspace and the endpoints before the
hand-off; the sandbox exists only in the runner. So the gateway, once the rein's
session is set up and before the agent is dispatched, runs `SANDBOX_PROBE` inside
that very `host-sandboxed` sandbox (same bwrap layout, egress relays, the rein's env),
or in a box container of the `in-box` one (same mounts and network),
and scans what it printed with the run's `Tells`. The probe's output stays on the
harness side: a temporary file outside the run folder, removed at once, never the
agent's output log or transcript. A hit is named by tell and surface only (a
sandbox's env or HOME may hold a secret-ish value), never by the line's text.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from sreforge_contracts import (
    SANDBOX_PROBE,
    SandboxView,
    Tells,
    describe_leaks,
    find_leaks,
    parse_sandbox_probe,
    sandbox_surfaces,
)

from sreforge_runner._box import BoxSandbox
from sreforge_runner._bwrap import SANDBOX_BIN
from sreforge_runner._errors import SandboxError
from sreforge_runner._sandbox import HostSandbox

__all__ = ["PROBE_PYTHON", "guard_sandbox", "probe_sandbox"]

PROBE_PYTHON = "/usr/bin/python3"
"""The interpreter the probe runs with (bwrap shows the host's `/usr`; the box image has
Debian's python3 there)."""
_PROBE_BUDGET_S = 30.0


async def probe_sandbox(
    sandbox: HostSandbox | BoxSandbox,
    extra_env: Mapping[str, str] | None = None,
    budget_s: float = _PROBE_BUDGET_S,
) -> SandboxView:
    """What the agent would find in `sandbox` (created, confined) with `extra_env` on top
    of its env; `SandboxError` when the probe could not run or printed no view."""
    if not sandbox.confined:
        raise SandboxError(f"sandbox in {sandbox.root}: not confined, nothing to probe")
    argv = [PROBE_PYTHON, "-c", SANDBOX_PROBE, str(SANDBOX_BIN)]
    with tempfile.TemporaryDirectory(prefix="probe-") as folder:
        log = Path(folder) / "probe.log"
        outcome = await sandbox.run(
            argv, budget_s, dict(extra_env or {}), log_path=log, transcript=False
        )
        output = log.read_text(errors="replace") if log.exists() else ""
    if outcome.timed_out:
        raise SandboxError(f"the sandbox probe did not finish within {budget_s:g} s")
    try:
        return parse_sandbox_probe(output)
    except ValueError as error:  # SandboxProbeFailed; its text may quote the sandbox
        raise SandboxError(f"the sandbox probe failed (exit {outcome.exit_code})") from error


async def guard_sandbox(
    sandbox: HostSandbox | BoxSandbox, tells: Tells, extra_env: Mapping[str, str] | None = None
) -> str | None:
    """The abort reason (`contamination guard: …`, tells and surfaces named, no values)
    when the agent's sandbox shows a tell; None when it is clean."""
    view = await probe_sandbox(sandbox, extra_env)
    leaks = find_leaks(sandbox_surfaces(view), tells)
    return describe_leaks(leaks, excerpts=False) if leaks else None
