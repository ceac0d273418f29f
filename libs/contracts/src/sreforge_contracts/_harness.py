"""The harness contract 1.0 (SPEC §8, seed 004): profiles, readiness, requests, evidence.

The gateway resolves an `ExecutionRequest` against a `HarnessProfile` into a
`ResolvedExecutionContext`, drives the profile's rein in a sandbox, and returns a
`GatewayResult`: `ok`, compact `ExecutionEvidence` that is safe to publish (no
prompt, model output, tool output or secret value), and the direct-caller-only
`tool_output` / `tool_error`. Every model forbids unknown fields.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal, Self

from pydantic import Field, JsonValue, field_validator, model_validator

from sreforge_contracts._base import Contract

__all__ = [
    "BUILTIN_AGENTS",
    "HARNESS_CONTRACT_VERSION",
    "CommandSpec",
    "ExecutionEvidence",
    "ExecutionOutcome",
    "ExecutionRequest",
    "FailureStage",
    "GatewayResult",
    "HarnessProfile",
    "OperationalReadiness",
    "ProfileLimits",
    "ProfileStatus",
    "ReadinessState",
    "ReinRef",
    "RemoteSpec",
    "ResolvedExecutionContext",
    "SandboxKind",
    "StageError",
    "TeardownOutcome",
    "TimeoutKind",
]

HARNESS_CONTRACT_VERSION: Literal["1.0"] = "1.0"
"""The harness contract version every profile, request and evidence declares."""

ReinRef = Literal["noop", "reference", "scripted", "command", "openai"]
"""Which rein drives the agent's session."""
BUILTIN_AGENTS: tuple[ReinRef, ...] = ("noop", "reference", "scripted")
"""Agent profiles every engine knows without a catalog entry: each is its own rein."""
SandboxKind = Literal["host-open", "host-sandboxed", "remote", "in-box"]
"""Where the agent runs; the evidence records the kind actually achieved. `in-box` is a
container on the run's compose network (only the compose topology offers one)."""
ProfileStatus = Literal["enabled", "disabled"]
"""Catalog selection: a disabled profile is refused at resolution."""
ReadinessState = Literal["ready", "unverified", "blocked"]
"""Runtime readiness: ready (probe passed), unverified (proof runs only), blocked."""
FailureStage = Literal[
    "resolution", "sandbox_create", "session_start", "execution", "session_end", "teardown"
]
"""The lifecycle stage a failure belongs to."""
TeardownOutcome = Literal["not_attempted", "succeeded", "failed"]
"""What happened to the rein's session cleanup or the sandbox's destroy."""
TimeoutKind = Literal["session_start", "idle", "total"]
"""Which of the separate budgets fired."""
ExecutionOutcome = Literal["succeeded", "failed", "refused"]
"""`refused`: execution never proceeded; `failed`: an attempted lifecycle did not complete."""

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# ssh targets: each component begins alphanumerically, so none can be read as an ssh option.
_SSH_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")
_SSH_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_HOST_KEY = re.compile(
    r"^(ssh-[a-z0-9-]+|ecdsa-sha2-nistp[0-9]+|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+={0,2}$"
)
_REMOTE_BASE = re.compile(r"^(/[A-Za-z0-9._-]+)+$")
Version = Literal["1.0"]


class OperationalReadiness(Contract):
    """A profile's runtime readiness, its owner and the evidence it rests on."""

    state: ReadinessState = "unverified"
    reason: str = ""
    owner: str | None = None
    evidence: str | None = None
    """A reference to the evidence (a probe record's path or a short factual summary)."""
    checked_at: datetime | None = None

    @model_validator(mode="after")
    def _evidence_backs_the_state(self) -> Self:
        if self.state == "ready" and not (self.evidence or "").strip():
            raise ValueError("readiness ready: needs positive evidence (evidence is empty)")
        if self.state == "blocked":
            missing = [n for n in ("owner", "evidence") if not (getattr(self, n) or "").strip()]
            if missing:
                raise ValueError(f"readiness blocked: needs {' and '.join(missing)}")
        return self


class ProfileLimits(Contract):
    """The separate budgets, in wall seconds (never scaled by the run's time scale)."""

    session_start_s: float = Field(default=60.0, gt=0)
    """From spawn to the agent's first output."""
    idle_s: float = Field(default=300.0, gt=0)
    """The longest stretch without any output (the no-output watchdog)."""
    total_s: float = Field(default=1800.0, gt=0)
    """The whole session's wall budget."""


class CommandSpec(Contract):
    """A CLI agent for the `command` rein: a preset and extra arguments."""

    preset: str = Field(min_length=1)
    """claude-code, codex, gemini-cli, aider, mini-swe-agent, or `custom`."""
    executable: str | None = None
    """The binary to run; defaults to the preset's."""
    args: tuple[str, ...] = ()
    """The headless argv after the executable; `{prompt}`, `{model}`… are substituted."""
    env: dict[str, str] = Field(default_factory=dict)
    """Non-secret settings for the agent (credentials travel only by `credential_routes`)."""
    install_paths: tuple[str, ...] = ()
    """Absolute host folders holding the agent's install (a venv, an npm prefix), bound
    read-only at the same place inside `host-sandboxed` (or where `mount_at` says);
    `/usr` is always there."""
    mount_at: dict[str, str] = Field(default_factory=dict)
    """Install paths shown elsewhere inside `host-sandboxed`: host folder → inside folder
    (`sreforge agents install` shows its engine-home install at `/opt/agent/<preset>`,
    so the harness's path never reaches the agent); an `executable` under a mapped
    folder runs from its inside place."""

    @field_validator("install_paths")
    @classmethod
    def _absolute(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if not path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"{path!r} is not an absolute path without `..`")
        return value

    @field_validator("mount_at")
    @classmethod
    def _absolute_places(cls, value: dict[str, str]) -> dict[str, str]:
        for host, inside in value.items():
            for path in (host, inside):
                if not path.startswith("/") or ".." in path.split("/") or path.strip("/") == "":
                    raise ValueError(f"{path!r} is not an absolute folder without `..`")
        return value

    @model_validator(mode="after")
    def _mounts_name_installs(self) -> Self:
        stray = sorted(set(self.mount_at) - set(self.install_paths))
        if stray:
            raise ValueError(f"mount_at: {', '.join(stray)} is not one of install_paths")
        return self


class RemoteSpec(Contract):
    """Where the `remote` sandbox runs the agent: an ssh target with a pinned host key.

    The identity is a route, never a key: `identity_file` is a path on the runner host,
    `identity_env` names the runner's env var holding such a path (exactly one is set).
    Each session gets its own directory under `base_dir` on the remote side.
    """

    host: str
    """The remote host name or IPv4 address."""
    port: int = Field(default=22, ge=1, le=65535)
    user: str
    host_key: str
    """The remote's public host key line, `<type> <base64>` (public, not a secret)."""
    identity_file: str | None = None
    identity_env: str | None = None
    base_dir: str = "/tmp/agent-sessions"
    """The remote folder under which each session's `remote_dir` is made (and removed)."""

    @field_validator("host")
    @classmethod
    def _plain_host(cls, value: str) -> str:
        if not _SSH_HOST.fullmatch(value):
            raise ValueError(f"{value!r} is not a host name (begins alphanumeric; . and -)")
        return value

    @field_validator("user")
    @classmethod
    def _plain_user(cls, value: str) -> str:
        if not _SSH_USER.fullmatch(value):
            raise ValueError(f"{value!r} is not a user name (begins alphanumeric; . _ -)")
        return value

    @field_validator("host_key")
    @classmethod
    def _public_key_line(cls, value: str) -> str:
        key = " ".join(value.split()[:2])
        if not _HOST_KEY.fullmatch(key):
            raise ValueError("host_key: not a public host key line (`<type> <base64>`)")
        return key

    @field_validator("identity_file", "base_dir")
    @classmethod
    def _absolute_path(cls, value: str | None) -> str | None:
        if value is not None and (not _REMOTE_BASE.fullmatch(value) or ".." in value.split("/")):
            raise ValueError(f"{value!r} is not an absolute path (letters, digits, . _ -)")
        return value

    @field_validator("identity_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an env var name (a route names, never holds)")
        return value

    @model_validator(mode="after")
    def _one_identity_route(self) -> Self:
        if (self.identity_file is None) == (self.identity_env is None):
            raise ValueError("remote: exactly one of identity_file or identity_env is required")
        return self


class HarnessProfile(Contract):
    """One catalog entry: which rein, in which sandbox, with which model and limits."""

    contract_version: Version = HARNESS_CONTRACT_VERSION
    name: str
    description: str = ""
    status: ProfileStatus = "enabled"
    rein: ReinRef
    sandbox: SandboxKind = "host-open"
    sandbox_fallback: Literal["host-open"] | None = None
    """What to run in when `host-sandboxed` cannot be created; None refuses instead."""
    model: str | None = None
    limits: ProfileLimits = ProfileLimits()
    credential_routes: tuple[str, ...] = ()
    """Names of env vars / secrets the rein may route (never their values)."""
    command: CommandSpec | None = None
    remote: RemoteSpec | None = None
    """The ssh target; required exactly when `sandbox` is `remote`."""
    in_box: bool = False
    """Whether the agent may run `in-box` on the compose topology: a container on the
    run's agent network, instead of `sandbox` on the host. Its command must run in the
    box image (POSIX sh, git, python3); a host-installed CLI cannot."""
    readiness: OperationalReadiness = OperationalReadiness()
    """The readiness the catalog declares; a stored `check` probe supersedes it."""
    metadata: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a profile name (lowercase, digits, . _ -)")
        return value

    @field_validator("credential_routes")
    @classmethod
    def _names_only(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for route in value:
            if not _ENV_NAME.fullmatch(route):
                raise ValueError(f"{route!r} is not an env var name (a route names, never holds)")
        return value

    @model_validator(mode="after")
    def _command_matches_rein(self) -> Self:
        if self.rein == "command" and self.command is None:
            raise ValueError("command: required when rein is `command`")
        if self.rein != "command" and self.command is not None:
            raise ValueError(f"command: only for rein `command`, not {self.rein!r}")
        if (self.sandbox == "remote") != (self.remote is not None):
            raise ValueError("remote: required exactly when sandbox is `remote`")
        if self.sandbox == "in-box":
            raise ValueError("sandbox: `in-box` is the compose topology's; say `in_box = true`")
        return self


class ExecutionRequest(Contract):
    """What a consumer asks the gateway to run: a profile, a repository, a task."""

    contract_version: Version = HARNESS_CONTRACT_VERSION
    request_id: str = Field(min_length=1)
    """The run id the execution is bound to."""
    harness_profile_ref: str = Field(min_length=1)
    repository: str = Field(min_length=1)
    """The workspace checkout the agent works in."""
    title: str = Field(min_length=1)
    description: str = ""
    """The task (the page); never copied into evidence."""
    labels: dict[str, str] = Field(default_factory=dict)


class ResolvedExecutionContext(Contract):
    """A request bound to its profile and readiness, decided before any sandbox exists."""

    contract_version: Version = HARNESS_CONTRACT_VERSION
    request_id: str
    profile: HarnessProfile
    readiness: OperationalReadiness
    proof_run: bool
    """True for an unverified profile: the run is labelled a proof attempt."""

    @model_validator(mode="after")
    def _never_blocked(self) -> Self:
        if self.readiness.state == "blocked":
            raise ValueError("readiness: a blocked profile never resolves")
        if self.proof_run != (self.readiness.state == "unverified"):
            raise ValueError("proof_run: true exactly when readiness is unverified")
        return self


class StageError(Contract):
    """One failure: its stage and a secret-free `Type: message`."""

    stage: FailureStage
    error: str


class ExecutionEvidence(Contract):
    """Compact, publishable facts of one execution; no prompt, output or secret."""

    contract_version: Version = HARNESS_CONTRACT_VERSION
    request_id: str
    profile: str
    rein: ReinRef | None = None
    model: str | None = None
    readiness: ReadinessState | None = None
    proof_run: bool = False
    sandbox_requested: SandboxKind | None = None
    confinement: SandboxKind | None = None
    """The confinement actually achieved; None when no sandbox was created."""
    outcome: ExecutionOutcome
    failure_stage: FailureStage | None = None
    """The primary (first) failure's stage."""
    failures: tuple[StageError, ...] = ()
    session_cleanup: TeardownOutcome = "not_attempted"
    sandbox_destroy: TeardownOutcome = "not_attempted"
    timeout: TimeoutKind | None = None
    limits: ProfileLimits | None = None
    exit_code: int | None = None
    stop_reason: str | None = None
    duration_ms: float | None = None
    survivors: int | None = None
    """Agent processes found alive after teardown (should be 0)."""
    reaped: int | None = None
    """Detached agent processes (setsid, double fork, a cleared env) that outlived a command
    and were killed at its end by host-open's subreaper; None where none was tracked."""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _outcome_is_consistent(self) -> Self:
        first = self.failures[0].stage if self.failures else None
        if self.failure_stage != first:
            raise ValueError("failure_stage: must be the first failure's stage")
        if (self.outcome == "succeeded") != (not self.failures):
            raise ValueError("outcome: succeeded exactly when there is no failure")
        if self.outcome == "refused" and (
            first != "resolution" or self.confinement is not None or self._torn_down()
        ):
            raise ValueError("outcome refused: a resolution failure before any sandbox exists")
        return self

    def _torn_down(self) -> bool:
        return self.session_cleanup != "not_attempted" or self.sandbox_destroy != "not_attempted"


class GatewayResult(Contract):
    """The gateway's answer: ok, publishable evidence, and direct-caller-only output."""

    ok: bool
    evidence: ExecutionEvidence
    tool_output: str | None = None
    """For the direct caller only (may hold model output); never published."""
    tool_error: str | None = None

    @model_validator(mode="after")
    def _ok_follows_outcome(self) -> Self:
        if self.ok != (self.evidence.outcome == "succeeded"):
            raise ValueError("ok: derived from the evidence's outcome")
        return self
