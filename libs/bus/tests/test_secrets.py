"""Harness secrets never leave on the bus: every publish redacts the engine home's values.

The canary plays the incident that motivated it: an agent's RCA carrying the bus operator's
password and the trigger's webhook token, published by the runner in `Submitted`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sreforge_bus import (
    BOOTSTRAP_USER,
    MARKER,
    OPERATOR_USER,
    Bus,
    BusCredentials,
    HarnessSecrets,
    SecretRefused,
    bootstrap,
    connect,
    ensure_credentials,
    forget_secret,
    guard_secret,
)
from sreforge_bus.embedded import start_nats_server
from sreforge_bus.testing import engine_home, operator_password, read_stream
from sreforge_contracts import RunFailed, Submission, Submitted, parse_event

pytestmark = pytest.mark.timeout(60)

TRIGGER_TOKEN = "trigger-token-0123456789abcdefghijKLMNOP"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh engine home: the bus users' credentials and the trigger's token file."""
    return engine_home(tmp_path / "home", TRIGGER_TOKEN)


def submitted(rca: str) -> Submitted:
    """A runner's `Submitted` whose RCA is `rca`."""
    submission = Submission(agent_name="cheat", submitted=True, rca=rca, duration_ms=1.0)
    return Submitted(run_id="run-0001", producer="runner", submission=submission)


def test_the_homes_secrets_are_its_passwords_tokens_and_secret_env(home: Path) -> None:
    """Every bus password, every `*.token` file and `SREFORGE_*TOKEN` values are guarded;
    a short value (it would redact ordinary words) or a path never is."""
    env = {
        "SREFORGE_DASHBOARD_TOKEN": "env-token-abcdefghijklmnop",
        "SREFORGE_X_TOKEN": "short",
        "SREFORGE_AGENT_SSH_KEY": "/etc/sreforge/agent-key",
    }
    secrets = HarnessSecrets(home, environ=env)
    for name in ("operator", "bootstrap", "runner", "oracle"):
        password = json.loads((home / "nats" / f"{name}.json").read_text())["password"]
        assert secrets.found_in(f"x{password}y".encode()), name
    assert secrets.found_in(TRIGGER_TOKEN.encode())
    assert secrets.found_in(b"env-token-abcdefghijklmnop")
    assert not secrets.found_in(b"a short value")
    assert not secrets.found_in(b"/etc/sreforge/agent-key"), "a path is not a secret"


def test_a_secret_minted_after_loading_is_guarded_at_once(home: Path) -> None:
    """A token file the engine writes later, and a value the process registers, count from
    the next check on (the home is re-read when its directory changes)."""
    secrets = HarnessSecrets.of_home(home)
    assert not secrets.found_in(b"dashboard-0123456789abcdefghij")
    (home / "dashboard.token").write_text("dashboard-0123456789abcdefghij")
    assert secrets.found_in(b"dashboard-0123456789abcdefghij")
    minted = "postgres-superuser-0123456789abc"
    guard_secret(minted)
    try:
        assert HarnessSecrets().found_in(minted.encode())
    finally:
        forget_secret(minted)
    assert not HarnessSecrets().found_in(minted.encode())


def test_a_json_escaped_secret_is_redacted_and_the_event_still_parses() -> None:
    """A value with characters JSON escapes is found as the payload spells it."""
    secret = 'pa"ss\\word/\u00e9\u2028-0123456789'
    secrets = HarnessSecrets(values=[secret])
    data = submitted(f"found {secret} in the home").model_dump_json().encode()
    assert secret.encode() not in data, "the payload spells the secret escaped"
    clean, count = secrets.redact_payload("sreforge.run.run-0001.Submitted", data)
    assert count == 1
    event = parse_event(clean)
    assert isinstance(event, Submitted)
    assert event.submission.rca == f"found {MARKER} in the home"


def test_a_redaction_that_breaks_the_event_is_refused() -> None:
    """A secret that is the run id cannot be masked into a valid event: nothing is sent."""
    secrets = HarnessSecrets(values=["run-0123456789abcdef"])
    data = RunFailed(
        run_id="run-0123456789abcdef",
        producer="oracle",
        stage="oracle",
        reason="x",
        verdict="error",
    ).model_dump_json()
    with pytest.raises(SecretRefused, match="invalid event") as refused:
        secrets.redact_payload("sreforge.run.x.RunFailed", data.encode())
    assert "run-0123456789abcdef" not in str(refused.value)


@pytest.fixture
async def guarded_runner(home: Path) -> AsyncIterator[tuple[Bus, Bus]]:
    """The runner connected as the engine connects it (the home's secrets guarded) and the
    operator reading the stream, on a nats-server that knows only the home's users."""
    credentials: BusCredentials = ensure_credentials(home / "nats")
    with start_nats_server(config_file=credentials.config_file) as server:
        bootstrap_user = credentials.credential(BOOTSTRAP_USER)
        setup = await connect(server.url, name="t-setup", credential=bootstrap_user)
        await bootstrap(setup)
        await setup.close()
        runner = await connect(
            server.url,
            name="t-runner",
            credential=credentials.credential("runner"),
            secrets=HarnessSecrets.of_home(home),
        )
        reader = await connect(
            server.url, name="t-op", credential=credentials.credential(OPERATOR_USER)
        )
        try:
            yield runner, reader
        finally:
            await runner.close()
            await reader.close()


async def test_the_operators_password_in_an_rca_never_reaches_the_stream(
    home: Path, guarded_runner: tuple[Bus, Bus], log_events: Callable[[], list[dict[str, Any]]]
) -> None:
    """The canary: what is stored holds the marker, not the password or the token, still
    parses as the `Submitted` it was, and a warning names the subject (never the value)."""
    runner, reader = guarded_runner
    password = operator_password(home)
    rca = f"root cause: user operator password {password}; webhook {TRIGGER_TOKEN}"
    await runner.publish(submitted(rca))
    logs = log_events()
    [stored] = await read_stream(reader, "sreforge.run.run-0001.Submitted", 1)
    assert password.encode() not in stored.data
    assert TRIGGER_TOKEN.encode() not in stored.data
    assert MARKER.encode() in stored.data
    event = parse_event(stored.data)
    assert isinstance(event, Submitted)
    assert event.submission.rca == f"root cause: user operator password {MARKER}; webhook {MARKER}"
    [warning] = [entry for entry in logs if entry["event"] == "harness secret redacted"]
    assert warning["log_level"] == "warning"
    assert warning["subject"] == "sreforge.run.run-0001.Submitted"
    assert warning["count"] == 2
    assert password not in repr(logs)
    assert TRIGGER_TOKEN not in repr(logs)


async def test_a_clean_message_is_published_untouched(
    guarded_runner: tuple[Bus, Bus], log_events: Callable[[], list[dict[str, Any]]]
) -> None:
    """No secret, no change and no warning: the guard costs a few byte checks."""
    runner, reader = guarded_runner
    event = submitted("the cache TTL was zero")
    await runner.publish(event)
    [stored] = await read_stream(reader, "sreforge.run.run-0001.Submitted", 1)
    assert stored.data == event.model_dump_json().encode()
    assert not [entry for entry in log_events() if entry["event"] == "harness secret redacted"]
