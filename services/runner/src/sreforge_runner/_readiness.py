"""Readiness probes: is a profile runnable here? The evidence is stored, never assumed.

`check_profile` probes what the profile needs where it will run: for
`host-sandboxed`, that bubblewrap comes up and the agent's binary answers its
probe (`--version`, or the preset's own in `PROBE_ARGS`) with exit 0 *inside* it, at
the place the agent starts it (host-only installation is not availability); for
`host-open`, that the binary is on the agent's PATH and answers. The result is a
`ProbeRecord` (commands, exit codes, sha256 of output, first line, when), stored
as `<readiness_dir>/<profile>.json`; the stored readiness supersedes the one the
catalog declares.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError
from sreforge_contracts import BUILTIN_AGENTS, HarnessProfile, OperationalReadiness, RemoteSpec

from sreforge_runner._bwrap import SANDBOX_HOME, bwrap_prefix, outside_the_view, shown_at
from sreforge_runner._errors import ProfileError, SandboxError
from sreforge_runner._settings import RunnerSettings
from sreforge_runner._ssh import SshTransport
from sreforge_runner._transcript import route_secrets

__all__ = [
    "PROBE_ARGS",
    "ProbeCheck",
    "ProbeRecord",
    "check_profile",
    "effective_readiness",
    "probe_args",
    "stored_probe",
]

_TIMEOUT_S = 30.0
PROBE_ARGS: dict[str, tuple[str, ...]] = {
    # mini-swe-agent 2.x has no --version (exit 2, after printing its version banner);
    # --help exits 0 after the same banner, "This is mini-swe-agent version X.".
    "mini-swe-agent": ("--help",),
}
"""Per preset, the arguments that make its CLI print its version and exit 0 (default
`--version`)."""
_ENDPOINT_TIMEOUT_S = 5.0


class ProbeCheck(BaseModel):
    """One command the probe ran: argv, exit code, output digest and first line."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    what: str
    argv: tuple[str, ...]
    exit_code: int | None
    output_sha256: str
    first_line: str


class ProbeRecord(BaseModel):
    """The stored evidence of one `check`: the readiness it supports and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str
    readiness: OperationalReadiness
    checks: tuple[ProbeCheck, ...]
    checked_at: datetime


def check_profile(profile: HarnessProfile, settings: RunnerSettings) -> ProbeRecord:
    """Probe `profile` on this host, store the record, and return it."""
    path = settings.readiness_dir / f"{profile.name}.json"
    checks: list[ProbeCheck] = []
    readiness = _probe(profile, settings, checks)
    now = datetime.now(UTC)
    evidence = f"{path}: {readiness.evidence}" if readiness.evidence else None
    stored = readiness.model_copy(update={"evidence": evidence, "checked_at": now})
    record = ProbeRecord(
        profile=profile.name,
        readiness=OperationalReadiness.model_validate(stored.model_dump()),
        checks=tuple(checks),
        checked_at=now,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record.model_dump_json(indent=2) + "\n")
    return record


def stored_probe(profile: str, settings: RunnerSettings) -> ProbeRecord | None:
    """The stored probe record of `profile`, if a `check` ever ran."""
    path = settings.readiness_dir / f"{profile}.json"
    if not path.is_file():
        return None
    try:
        return ProbeRecord.model_validate_json(path.read_text())
    except (OSError, ValidationError) as error:
        raise ProfileError(f"{path}: unreadable probe record: {error}") from error


def effective_readiness(profile: HarnessProfile, settings: RunnerSettings) -> OperationalReadiness:
    """The stored probe's readiness when one exists, else the catalog's."""
    record = stored_probe(profile.name, settings)
    return record.readiness if record else profile.readiness


def _probe(
    profile: HarnessProfile, settings: RunnerSettings, checks: list[ProbeCheck]
) -> OperationalReadiness:
    if profile.rein in BUILTIN_AGENTS:
        return _need_tools(("sh", "git"), settings, checks)
    if profile.rein == "openai":
        return _probe_endpoint(profile, checks)
    if profile.command is None:
        return _blocked("runner", f"rein {profile.rein}: nothing to probe (no [command])")
    command = profile.command
    executable = command.executable or command.preset
    if profile.remote is not None:
        return _probe_remote(profile.remote, executable, checks)
    args = probe_args(command.preset)
    sandboxed = profile.sandbox == "host-sandboxed"
    if sandboxed:
        why = outside_the_view(executable, command.install_paths)
        if why is not None:
            return _blocked("operator", f"{executable}: {why}")
        executable = shown_at(executable, command.mount_at)
    probe = shlex.join([executable, *args])
    with tempfile.TemporaryDirectory(prefix="probe-") as scratch:
        prefix = _prefix(profile, settings, Path(scratch))
        if prefix:
            sandbox = _run("bubblewrap comes up", ["/bin/true"], settings, checks, prefix)
            if sandbox.exit_code != 0:
                return _blocked("infra", f"bubblewrap failed: {sandbox.first_line}")
        home = str(SANDBOX_HOME) if prefix else "/nonexistent"
        found = _run(probe, [executable, *args], settings, checks, prefix, home)
    if found.exit_code != 0:
        where = "inside the sandbox" if prefix else "on the agent PATH"
        detail = found.first_line or "no output"
        return _blocked("operator", f"`{probe}` exited {found.exit_code} {where}: {detail}")
    return OperationalReadiness(
        state="ready",
        reason="probe passed",
        owner="operator",
        evidence=f"`{probe}` exited 0: {found.first_line or 'no output'}",
    )


def probe_args(preset: str) -> tuple[str, ...]:
    """The arguments `check` probes a preset's CLI with (`PROBE_ARGS`, else `--version`)."""
    return PROBE_ARGS.get(preset, ("--version",))


def _probe_remote(
    remote: RemoteSpec, executable: str, checks: list[ProbeCheck]
) -> OperationalReadiness:
    """`<executable> --version` on the remote, over ssh pinned to the profile's host key."""
    command = shlex.join([executable, "--version"])
    with tempfile.TemporaryDirectory(prefix="probe-") as scratch:
        transport = SshTransport(remote, Path(scratch) / "known_hosts")
        transport.pin_host_key()
        try:
            output, code = transport.run(command, f"`{command}`"), 0
        except SandboxError as error:
            output, code = str(error), 1
        finally:
            transport.close()
    first = (output.strip().splitlines() or [""])[0][:200]
    checks.append(
        ProbeCheck(
            what=f"{command} on {transport.target}",
            argv=("ssh", command),
            exit_code=code,
            output_sha256=hashlib.sha256(output.encode()).hexdigest(),
            first_line=first,
        )
    )
    if code != 0:
        return _blocked("operator", output)
    return OperationalReadiness(
        state="ready", reason="probe passed", owner="operator", evidence=first
    )


def _probe_endpoint(profile: HarnessProfile, checks: list[ProbeCheck]) -> OperationalReadiness:
    """`GET <base_url>/models` answers 200 (the key, if routed, is sent, never stored)."""
    base = profile.metadata.get("base_url", "")
    if not base:
        return _blocked("operator", "metadata.base_url is not set")
    url = base.rstrip("/") + "/models"
    request = urllib.request.Request(url, method="GET")
    for value in route_secrets(profile.credential_routes).values():
        request.add_header("Authorization", f"Bearer {value}")
        break
    try:
        with urllib.request.urlopen(request, timeout=_ENDPOINT_TIMEOUT_S) as response:
            body, code = response.read(), response.status
    except urllib.error.HTTPError as error:
        body, code = str(error).encode(), error.code
    except (urllib.error.URLError, OSError) as error:
        body, code = f"{type(error).__name__}: {error}".encode(), None
    first = body.decode(errors="replace").strip().splitlines()[:1]
    checks.append(
        ProbeCheck(
            what=f"GET {url}",
            argv=("GET", url),
            exit_code=code,
            output_sha256=hashlib.sha256(body).hexdigest(),
            first_line=(first[0] if first else "")[:200],
        )
    )
    if code != 200:
        return _blocked("operator", f"GET {url} answered {code}: {first[0] if first else ''}")
    return OperationalReadiness(
        state="ready", reason="endpoint answered", owner="operator", evidence=f"GET {url}: 200"
    )


def _prefix(profile: HarnessProfile, settings: RunnerSettings, scratch: Path) -> list[str]:
    if profile.sandbox != "host-sandboxed":
        return []
    for name in ("workspace", "home", "bin"):
        (scratch / name).mkdir()
    command = profile.command
    return bwrap_prefix(
        settings.bwrap_path,
        scratch / "workspace",
        scratch / "home",
        scratch / "bin",
        command.install_paths if command else (),
        mount_at=command.mount_at if command else None,
    )


def _need_tools(
    tools: tuple[str, ...], settings: RunnerSettings, checks: list[ProbeCheck]
) -> OperationalReadiness:
    for tool in tools:
        found = shutil.which(tool, path=settings.agent_path)
        digest = hashlib.sha256((found or "").encode()).hexdigest()
        checks.append(
            ProbeCheck(
                what=f"{tool} on the agent PATH",
                argv=("which", tool),
                exit_code=0 if found else 1,
                output_sha256=digest,
                first_line=found or "not found",
            )
        )
        if not found:
            return _blocked("operator", f"{tool} not found on {settings.agent_path}")
    return OperationalReadiness(
        state="ready", reason="built-in rein", owner="runner", evidence="sh and git present"
    )


def _run(
    what: str,
    command: list[str],
    settings: RunnerSettings,
    checks: list[ProbeCheck],
    prefix: list[str] | None = None,
    home: str = "/nonexistent",
) -> ProbeCheck:
    """Run `command` (under the sandbox `prefix`, if any); the check keeps `command`."""
    argv = [*(prefix or []), *command]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=_TIMEOUT_S,
            check=False,
            env={"PATH": settings.agent_path, "HOME": home},
        )
        output = done.stdout + done.stderr
        code: int | None = done.returncode
    except FileNotFoundError:
        output, code = f"{argv[0]}: not found on {settings.agent_path}".encode(), 127
    except (OSError, subprocess.TimeoutExpired) as error:
        output, code = f"{type(error).__name__}: {error}".encode(), None
    text = output.decode(errors="replace").strip()
    check = ProbeCheck(
        what=what,
        argv=tuple(command),
        exit_code=code,
        output_sha256=hashlib.sha256(output).hexdigest(),
        first_line=(text.splitlines() or [""])[0][:200],
    )
    checks.append(check)
    return check


def _blocked(owner: str, evidence: str) -> OperationalReadiness:
    return OperationalReadiness(
        state="blocked", reason="probe failed", owner=owner, evidence=evidence
    )
