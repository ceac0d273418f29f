"""Bus credentials per engine home: private files, created once, agreed on by racing starts;
the permission table's shape; secrets kept out of reprs and URLs shown in logs."""

from __future__ import annotations

import json
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sreforge_bus import (
    BOOTSTRAP_USER,
    OPERATOR_USER,
    SERVICE_EVENTS,
    SERVICE_KEYS,
    BusCredentials,
    CredentialError,
    ensure_credentials,
    load_credentials,
    redact_url,
)

DURABLES = {"oracle": ["oracle-deployed"], "runner": ["runner"]}


@pytest.fixture
def credentials(tmp_path: Path) -> BusCredentials:
    """The credentials of a fresh engine home."""
    return ensure_credentials(tmp_path / "home" / "nats", DURABLES)


def test_credential_files_are_private(credentials: BusCredentials) -> None:
    """Only the engine's user reads a password: the directory is 0700, every file 0600."""
    assert stat.S_IMODE(credentials.directory.stat().st_mode) == 0o700
    files = sorted(credentials.directory.iterdir())
    expected = {f"{user}.json" for user in (*SERVICE_EVENTS, OPERATOR_USER, BOOTSTRAP_USER)}
    assert {path.name for path in files} == expected | {"server.conf"}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_generation_is_idempotent_and_repairs_modes(credentials: BusCredentials) -> None:
    """A second start keeps every password (running clients stay valid) and the same config."""
    config = credentials.config_file.read_text()
    (credentials.directory / "oracle.json").chmod(0o644)
    again = ensure_credentials(credentials.directory, DURABLES)
    assert again.users == credentials.users
    assert again.config_file.read_text() == config
    assert stat.S_IMODE((credentials.directory / "oracle.json").stat().st_mode) == 0o600
    assert load_credentials(credentials.directory).users == credentials.users


def test_passwords_stay_out_of_reprs(credentials: BusCredentials) -> None:
    """A credential logged by accident shows its user, never its password."""
    oracle = credentials.credential("oracle")
    assert oracle.password not in repr(oracle)
    assert oracle.password not in repr(credentials)


def test_a_bad_credential_file_is_named(credentials: BusCredentials) -> None:
    """A hand-edited or foreign file fails with its path, not with a login error later."""
    path = credentials.directory / "runner.json"
    path.write_text(json.dumps({"user": "oracle", "password": "x"}))
    with pytest.raises(CredentialError, match=r"runner\.json"):
        ensure_credentials(credentials.directory)
    with pytest.raises(CredentialError, match="no bus credential for 'nobody'"):
        credentials.credential("nobody")


def test_every_event_type_has_exactly_one_owner_but_run_failed() -> None:
    """The permission table names each event's producer once (SPEC §3); RunFailed is any stage's."""
    from sreforge_contracts import EVENT_TYPES

    owners: dict[str, list[str]] = {}
    for service, kinds in SERVICE_EVENTS.items():
        for kind in kinds:
            owners.setdefault(kind, []).append(service)
    assert set(owners) == set(EVENT_TYPES), "every event type needs a producer, and only those"
    assert set(SERVICE_KEYS) == set(SERVICE_EVENTS), "every service has a run-store entry"
    shared = {kind for kind, services in owners.items() if len(services) > 1}
    assert shared == {"RunFailed"}
    assert owners["Scored"] == ["oracle"]
    assert owners["Recorded"] == ["recorder"]


def test_services_starting_together_agree_on_the_passwords(tmp_path: Path) -> None:
    """Seven `sreforge serve` processes on a fresh home race to create it; one set wins."""
    directory = tmp_path / "nats"
    with ThreadPoolExecutor(max_workers=8) as pool:
        made = list(pool.map(lambda _: ensure_credentials(directory).users, range(8)))
    assert all(users == made[0] for users in made)
    assert load_credentials(directory).users == made[0]
    assert not [path for path in directory.iterdir() if path.name.startswith(".")]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("nats://operator:s3cret@h:4222", "nats://operator:***@h:4222"),
        ("nats://a:x@h:1,nats://b:y@g:2", "nats://a:***@h:1,nats://b:***@g:2"),
        ("nats://t0ken@h:4222", "nats://***@h:4222"),
    ],
)
def test_urls_in_logs_and_errors_carry_no_secret(url: str, shown: str) -> None:
    """An operator's SREFORGE_NATS_URL may embed a password; logs and errors mask it."""
    assert redact_url(url) == shown
