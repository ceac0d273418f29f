"""The harness contract 1.0: each rule of profiles, readiness, context and evidence."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from sreforge_contracts import (
    CommandSpec,
    ExecutionEvidence,
    ExecutionRequest,
    GatewayResult,
    HarnessProfile,
    OperationalReadiness,
    RemoteSpec,
    ResolvedExecutionContext,
    StageError,
)


def test_ready_without_evidence_is_invalid() -> None:
    """`ready` is a claim that needs positive evidence."""
    with pytest.raises(ValidationError, match="ready: needs positive evidence"):
        OperationalReadiness(state="ready")
    assert OperationalReadiness(state="ready", evidence="probe ok").state == "ready"


@pytest.mark.parametrize(
    ("fields", "missing"),
    [({}, "owner and evidence"), ({"owner": "infra"}, "evidence"), ({"evidence": "x"}, "owner")],
)
def test_blocked_needs_owner_and_evidence(fields: dict[str, str], missing: str) -> None:
    """A block names who owns it and what shows it."""
    with pytest.raises(ValidationError, match=f"blocked: needs {missing}"):
        OperationalReadiness(state="blocked", **fields)


def test_unverified_is_the_default_readiness() -> None:
    """A profile nobody probed is unverified, never assumed ready."""
    assert HarnessProfile(name="x", rein="noop").readiness.state == "unverified"


def test_unknown_fields_are_forbidden() -> None:
    """A typo in a profile is an error, not silently ignored."""
    with pytest.raises(ValidationError, match="sandbx"):
        HarnessProfile.model_validate({"name": "x", "rein": "noop", "sandbx": "host-open"})


def test_the_command_rein_needs_a_command_and_only_it_may_have_one() -> None:
    """rein=command ⇔ a command spec."""
    with pytest.raises(ValidationError, match="required when rein is `command`"):
        HarnessProfile(name="x", rein="command")
    with pytest.raises(ValidationError, match="only for rein `command`"):
        HarnessProfile(name="x", rein="noop", command=CommandSpec(preset="codex"))


def test_credential_routes_are_names_never_values() -> None:
    """A route that looks like a key value is refused."""
    assert HarnessProfile(name="x", rein="openai", credential_routes=("OPENAI_API_KEY",))
    with pytest.raises(ValidationError, match="not an env var name"):
        HarnessProfile(name="x", rein="openai", credential_routes=("sk-abc123",))


def test_profile_names_are_plain() -> None:
    """A profile name is safe as a file name and a label."""
    with pytest.raises(ValidationError, match="not a profile name"):
        HarnessProfile(name="../etc", rein="noop")


def test_a_request_needs_a_profile_ref_repository_and_title() -> None:
    """The consumer boundary requires an explicit profile."""
    with pytest.raises(ValidationError, match="harness_profile_ref"):
        ExecutionRequest.model_validate({"request_id": "r", "repository": "/w", "title": "t"})


def _context(state: str, proof: bool, **readiness: Any) -> ResolvedExecutionContext:
    return ResolvedExecutionContext(
        request_id="run-1",
        profile=HarnessProfile(name="x", rein="noop"),
        readiness=OperationalReadiness(state=state, **readiness),  # type: ignore[arg-type]
        proof_run=proof,
    )


def test_a_blocked_profile_never_resolves() -> None:
    """Blocked is refused at resolution: no context exists for it."""
    with pytest.raises(ValidationError, match="blocked profile never resolves"):
        _context("blocked", False, owner="infra", evidence="bwrap missing")


def test_unverified_resolves_only_as_a_labelled_proof_run() -> None:
    """An unverified profile runs only labelled as a proof attempt; a ready one never is."""
    assert _context("unverified", True).proof_run
    with pytest.raises(ValidationError, match="proof_run"):
        _context("unverified", False)
    with pytest.raises(ValidationError, match="proof_run"):
        _context("ready", True, evidence="probe ok")


def _evidence(**fields: Any) -> ExecutionEvidence:
    return ExecutionEvidence(request_id="run-1", profile="x", **fields)


def test_evidence_outcome_follows_its_failures() -> None:
    """succeeded ⇔ no failure; failure_stage is the first failure's."""
    fail = StageError(stage="execution", error="TimeoutError: idle")
    cleanup = StageError(stage="teardown", error="OSError: busy")
    ok = _evidence(outcome="succeeded", session_cleanup="succeeded", sandbox_destroy="succeeded")
    assert ok.failure_stage is None
    failed = _evidence(outcome="failed", failure_stage="execution", failures=(fail, cleanup))
    assert failed.failure_stage == "execution"
    with pytest.raises(ValidationError, match="succeeded exactly when"):
        _evidence(outcome="succeeded", failure_stage="execution", failures=(fail,))
    with pytest.raises(ValidationError, match="first failure's stage"):
        _evidence(outcome="failed", failure_stage="teardown", failures=(fail, cleanup))


def test_a_refusal_happens_before_any_sandbox() -> None:
    """refused = a resolution failure with no confinement and nothing torn down."""
    refusal = StageError(stage="resolution", error="ProfileBlocked: owner infra")
    assert _evidence(outcome="refused", failure_stage="resolution", failures=(refusal,))
    with pytest.raises(ValidationError, match="before any sandbox"):
        _evidence(
            outcome="refused",
            failure_stage="resolution",
            failures=(refusal,),
            sandbox_destroy="succeeded",
        )


def test_gateway_ok_is_derived_from_the_outcome() -> None:
    """ok cannot disagree with the evidence."""
    evidence = _evidence(outcome="succeeded")
    assert GatewayResult(ok=True, evidence=evidence).ok
    with pytest.raises(ValidationError, match="ok: derived"):
        GatewayResult(ok=False, evidence=evidence)


def test_evidence_round_trips_through_json() -> None:
    """Evidence is published as JSON and read back unchanged."""
    evidence = _evidence(
        outcome="failed",
        failure_stage="execution",
        timeout="idle",
        failures=(StageError(stage="execution", error="idle"),),
    )
    assert ExecutionEvidence.model_validate_json(evidence.model_dump_json()) == evidence


_HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEtQ9z0Xo6bJ0pQxN2X0Yb8m4xYv5U1mZkR1r8b0QvQx"


def _remote(**fields: Any) -> RemoteSpec:
    base: dict[str, Any] = {
        "host": "agents.example.org",
        "user": "agent",
        "host_key": _HOST_KEY,
        "identity_file": "/etc/sreforge/agent-key",
    }
    return RemoteSpec.model_validate({**base, **fields})


def test_the_remote_spec_is_required_exactly_for_the_remote_sandbox() -> None:
    """sandbox=remote ⇔ a remote spec; it is never silently ignored."""
    with pytest.raises(ValidationError, match="required exactly when sandbox is `remote`"):
        HarnessProfile(name="x", rein="noop", sandbox="remote")
    with pytest.raises(ValidationError, match="required exactly when sandbox is `remote`"):
        HarnessProfile(name="x", rein="noop", remote=_remote())
    profile = HarnessProfile(name="x", rein="noop", sandbox="remote", remote=_remote())
    assert profile.remote is not None
    assert (profile.remote.port, profile.remote.base_dir) == (22, "/tmp/agent-sessions")


def test_the_remote_identity_is_a_route_never_a_key() -> None:
    """Exactly one of a host path or an env var name; a key value is refused."""
    assert _remote(identity_file=None, identity_env="SREFORGE_AGENT_SSH_KEY").identity_env
    with pytest.raises(ValidationError, match="exactly one of identity_file or identity_env"):
        _remote(identity_file=None)
    with pytest.raises(ValidationError, match="exactly one of identity_file or identity_env"):
        _remote(identity_env="KEY_PATH")
    with pytest.raises(ValidationError, match="not an env var name"):
        _remote(identity_file=None, identity_env="-----BEGIN OPENSSH PRIVATE KEY-----")
    with pytest.raises(ValidationError, match="not an absolute path"):
        _remote(identity_file="-----BEGIN OPENSSH PRIVATE KEY-----")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("host", "-oProxyCommand=sh", "not a host name"),
        ("host", "a b", "not a host name"),
        ("user", "-l", "not a user name"),
        ("host_key", "-----BEGIN OPENSSH PRIVATE KEY-----", "not a public host key line"),
        ("host_key", "ssh-ed25519", "not a public host key line"),
        ("base_dir", "relative/dir", "not an absolute path"),
        ("base_dir", "/tmp/../etc", "not an absolute path"),
        ("port", 0, "greater than or equal to 1"),
    ],
)
def test_a_remote_target_cannot_be_read_as_an_ssh_option(
    field: str, value: object, message: str
) -> None:
    """Host and user begin alphanumerically, the host key is a public key line, the base dir
    is a plain absolute path."""
    with pytest.raises(ValidationError, match=message):
        _remote(**{field: value})


def test_a_host_key_line_keeps_only_type_and_key_and_unknown_fields_are_refused() -> None:
    """A pasted `ssh-keyscan`/`.pub` line loses its comment; a typo in the spec is an error."""
    assert _remote(host_key=f"{_HOST_KEY} root@box").host_key == _HOST_KEY
    with pytest.raises(ValidationError, match="hostname"):
        _remote(hostname="x")
