"""`sreforge up` on the embedded default, driven the way an operator drives it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from sreforge_bus import OPERATOR_USER, Credential, connect, follow
from sreforge_bus.embedded import start_nats_server

pytestmark = pytest.mark.integration

_DEADLINE = 30.0
_STOP_DEADLINE = 90.0


def _wait_for(predicate: object, what: str, timeout: float = _DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, str]]:
    """A `sreforge up` child process with its own home (so its own embedded NATS)."""
    env = {**os.environ, "SREFORGE_HOME": str(tmp_path / "home"), "SREFORGE_LOG_FORMAT": "json"}
    env.pop("SREFORGE_NATS_URL", None)
    log_path = tmp_path / "up.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sreforge", "up"], env=env, stdout=log, stderr=log
        )
    engine_file = tmp_path / "home" / "engine.json"
    try:
        _wait_for(
            lambda: engine_file.exists() and b"engine.ready" in log_path.read_bytes(),
            f"`sreforge up` to become ready (log: {log_path})",
        )
        yield env, log_path, json.loads(engine_file.read_text())["nats_url"]
    finally:
        proc.send_signal(signal.SIGTERM)
        # A graceful stop lets in-flight handlers finish: a stack still booting for the run
        # the test started is brought up and then torn down (~20 s on a loaded 2-core box).
        assert proc.wait(timeout=_STOP_DEADLINE) == 0, log_path.read_text()
        assert not engine_file.exists(), "a stopped engine must stop advertising itself"


def _operator(env: dict[str, str]) -> tuple[str, str]:
    """The operator's bus user and password, as the README reads them from the home."""
    record = json.loads((Path(env["SREFORGE_HOME"]) / "nats" / "operator.json").read_text())
    return record["user"], record["password"]


async def _core_publish(url: str, subject: str, payload: bytes, env: dict[str, str]) -> None:
    """Exactly what `nats pub --user operator --password ... SUBJECT PAYLOAD` does: a plain
    core-NATS publish, no headers, with the operator's credential."""
    user, password = _operator(env)
    nc = await nats.connect(url, user=user, password=password)
    try:
        await nc.publish(subject, payload)
        await nc.flush()
    finally:
        await nc.close()


def _tail_until(env: dict[str, str], needle: str) -> list[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sreforge", "tail", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + _DEADLINE
    try:
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if needle in line:
                return lines
    finally:
        proc.kill()
        proc.wait()
    raise AssertionError(f"`sreforge tail` never showed {needle!r}; it showed {lines}")


async def test_run_start_published_like_nats_pub_shows_up_in_tail(
    engine: tuple[dict[str, str], Path, str],
) -> None:
    """`nats pub sreforge.run.start '<json>'` against `sreforge up` appears in `sreforge tail`."""
    env, _, url = engine
    command = {"scenario": "latency-cache-stampede", "agent": "noop", "time_scale": 0.1}
    await _core_publish(url, "sreforge.run.start", json.dumps(command).encode(), env)
    lines = _tail_until(env, "latency-cache-stampede")
    shown = json.loads(lines[-1])
    assert shown["subject"] == "sreforge.run.start"
    assert shown["event"]["agent"] == "noop"


async def test_malformed_run_start_is_rejected_and_the_engine_keeps_serving(
    engine: tuple[dict[str, str], Path, str],
) -> None:
    """A bad `run.start` gets a RunRejected naming the field; the next command still flows."""
    env, _, url = engine
    await _core_publish(url, "sreforge.run.start", b'{"scenario": "../x", "agent": "noop"}', env)
    rejected = json.loads(_tail_until(env, '"RunRejected"')[-1])
    assert "scenario" in rejected["event"]["reason"]
    good = {"scenario": "latency-cache-stampede", "agent": "noop", "time_scale": 0.1}
    await _core_publish(url, "sreforge.run.start", json.dumps(good).encode(), env)
    requested = json.loads(_tail_until(env, '"RunRequested"')[-1])
    assert requested["event"]["agent"] == "noop"


async def test_sreforge_up_refuses_clients_without_a_credential(
    engine: tuple[dict[str, str], Path, str],
) -> None:
    """A plain `nats pub` (no credential) is turned away; the advertised URL holds no secret."""
    env, _, url = engine
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(url, allow_reconnect=False, connect_timeout=5)
    _, password = _operator(env)
    advertised = (Path(env["SREFORGE_HOME"]) / "engine.json").read_text()
    assert password not in advertised
    assert "@" not in json.loads(advertised)["nats_url"]
    bus_dir = Path(env["SREFORGE_HOME"]) / "nats"
    assert stat.S_IMODE(bus_dir.stat().st_mode) == 0o700
    for path in bus_dir.glob("*.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def _logged_users(log_path: Path) -> dict[str, str | None]:
    """Client name → bus user, from the engine's JSON `nats connected` log lines."""
    users = {}
    for line in log_path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == "nats connected":
                users[entry["client"]] = entry.get("user")
    return users


def test_each_service_of_sreforge_up_connects_as_itself(
    engine: tuple[dict[str, str], Path, str],
) -> None:
    """One connection per service, each logged in as its own user (so its permissions apply)."""
    _, log_path, _ = engine
    users = _logged_users(log_path)
    services = ("trigger", "correlator", "context", "runner", "deployer", "oracle", "recorder")
    for service in services:
        assert users.get(f"sreforge-{service}") == service, users
    assert users.get("sreforge-engine") == "operator"


_WIRED = (
    "SREFORGE_TRIGGER_PORT",
    "SREFORGE_TRIGGER_TOKEN",
    "SREFORGE_TRIGGER_TOKEN_FILE",
    "SREFORGE_DEPLOYER_ALERT_WEBHOOK_BASE",
    "SREFORGE_DEPLOYER_ALERT_TOKEN_FILE",
    "SREFORGE_DEPLOYER_ENGINE_HOME",
    "SREFORGE_DASHBOARD_TOKEN",
    "SREFORGE_RECORDER_DASHBOARD_TOKEN",
    "SREFORGE_RECORDER_DASHBOARD_TOKEN_FILE",
    "SREFORGE_RECORDER_DASHBOARD_PORT",
    "SREFORGE_RECORDER_DASHBOARD_URL_FILE",
)


def _unset_wiring(monkeypatch: pytest.MonkeyPatch) -> None:
    # setenv first so monkeypatch records the original state and undoes what wiring sets.
    for name in _WIRED:
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)


@pytest.mark.parametrize("separate", [False, True])
def test_wiring_points_the_deployer_at_the_trigger(
    separate: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stacks' Alertmanagers page the port the trigger listens on, with its token file.

    In one process any free port works; separate `serve` processes cannot agree on a
    random one, so they meet on the trigger's fixed default.
    """
    from sreforge_trigger import TriggerSettings

    from sreforge._engine import wire_defaults
    from sreforge._settings import EngineSettings

    _unset_wiring(monkeypatch)
    wire_defaults(EngineSettings(home=tmp_path), separate_processes=separate)
    port = TriggerSettings().port
    assert os.environ["SREFORGE_DEPLOYER_ALERT_WEBHOOK_BASE"] == (
        f"http://127.0.0.1:{port}/v1/alertmanager"
    )
    if separate:
        assert port == TriggerSettings.model_fields["port"].default
    token_file = str(tmp_path / "trigger.token")
    assert os.environ["SREFORGE_TRIGGER_TOKEN_FILE"] == token_file
    assert os.environ["SREFORGE_DEPLOYER_ALERT_TOKEN_FILE"] == token_file
    assert os.environ["SREFORGE_DEPLOYER_ENGINE_HOME"] == str(tmp_path)


def test_explicit_settings_win_over_the_wiring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's own port and webhook base are never overwritten."""
    from sreforge._engine import wire_defaults
    from sreforge._settings import EngineSettings

    _unset_wiring(monkeypatch)
    monkeypatch.setenv("SREFORGE_TRIGGER_PORT", "12345")
    monkeypatch.setenv("SREFORGE_DEPLOYER_ALERT_WEBHOOK_BASE", "http://127.0.0.1:1/x")
    wire_defaults(EngineSettings(home=tmp_path))
    assert os.environ["SREFORGE_TRIGGER_PORT"] == "12345"
    assert os.environ["SREFORGE_DEPLOYER_ALERT_WEBHOOK_BASE"] == "http://127.0.0.1:1/x"


def test_wiring_gives_the_recorders_dashboard_the_operators_token_in_a_private_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token is the operator's (an HMAC of its bus password), kept 0600 in the home and
    named by path, never put in the environment children inherit; `sreforge up`'s line
    names the URL and where the token is, not the token."""
    from sreforge_report import dashboard_token

    from sreforge._dashboard_wiring import announce_dashboard
    from sreforge._engine import bus_credentials
    from sreforge._settings import EngineSettings

    _unset_wiring(monkeypatch)
    settings = EngineSettings(home=tmp_path)
    line = announce_dashboard(settings)
    token_file = tmp_path / "dashboard.token"
    password = bus_credentials(settings).credential("operator").password
    assert token_file.read_text().strip() == dashboard_token(password)
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert os.environ["SREFORGE_RECORDER_DASHBOARD_TOKEN_FILE"] == str(token_file)
    assert dashboard_token(password) not in line
    assert dashboard_token(password) not in "".join(os.environ.values())
    assert os.environ["SREFORGE_RECORDER_DASHBOARD_URL_FILE"] == str(tmp_path / "dashboard.url")
    port = os.environ["SREFORGE_RECORDER_DASHBOARD_PORT"]
    assert port == "0" or f"http://127.0.0.1:{port}/?token=$(cat {token_file})" in line


def test_a_dashboard_on_a_free_port_is_announced_by_its_url_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the dashboard takes any free port (8787 taken), `sreforge up`'s line reads the
    URL from the file the recorder writes once it listens."""
    from sreforge._dashboard_wiring import announce_dashboard
    from sreforge._settings import EngineSettings

    _unset_wiring(monkeypatch)
    monkeypatch.setenv("SREFORGE_RECORDER_DASHBOARD_PORT", "0")
    line = announce_dashboard(EngineSettings(home=tmp_path))
    token_file = tmp_path / "dashboard.token"
    assert f"$(cat {tmp_path / 'dashboard.url'})?token=$(cat {token_file})" in line


def test_tail_with_a_stale_operator_password_says_the_login_was_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A home whose credentials do not match the server's fails fast with a clear line."""
    from sreforge_bus import ensure_credentials
    from sreforge_bus.embedded import start_nats_server

    from sreforge._engine import tail_events

    server_home = ensure_credentials(tmp_path / "server" / "nats")
    with start_nats_server(config_file=server_home.config_file) as server:
        monkeypatch.setenv("SREFORGE_HOME", str(tmp_path / "other"))
        monkeypatch.setenv("SREFORGE_NATS_URL", server.url)
        assert tail_events(run_id=None, as_json=True, only_new=True) == 2
    err = capsys.readouterr().err
    assert "sreforge tail: cannot connect" in err
    assert "as bus user 'operator'" in err
    assert "refused the login" in err


@dataclass
class _Served:
    url: str
    operator: Credential
    log_path: Path


@pytest.fixture
def served_correlator(tmp_path: Path) -> Iterator[_Served]:
    """`sreforge serve correlator` against a server started with the home's `server.conf`."""
    from sreforge._engine import bus_credentials
    from sreforge._settings import EngineSettings

    home = tmp_path / "home"
    credentials = bus_credentials(EngineSettings(home=home))
    with start_nats_server(config_file=credentials.config_file) as server:
        env = {**os.environ, "SREFORGE_HOME": str(home), "SREFORGE_NATS_URL": server.url}
        env["SREFORGE_LOG_FORMAT"] = "json"
        log_path = tmp_path / "serve.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sreforge", "serve", "correlator"],
                env=env,
                stdout=log,
                stderr=log,
            )
        try:
            _wait_for(lambda: b"engine.ready" in log_path.read_bytes(), f"serve ({log_path})")
            yield _Served(server.url, credentials.credential(OPERATOR_USER), log_path)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=_STOP_DEADLINE) == 0, log_path.read_text()


@pytest.mark.timeout(90)
async def test_sreforge_serve_logs_in_as_its_service_on_an_external_server(
    served_correlator: _Served,
) -> None:
    """It bootstraps as `bootstrap`, serves as `correlator`, and its answer reaches the
    operator; the server checks logins, so the engine does not warn."""
    served = served_correlator
    operator = await connect(served.url, name="test-operator", credential=served.operator)
    try:
        await operator.publish_raw("sreforge.run.start", b'{"scenario": "../x"}')
        async for message in follow(operator, "sreforge.run.*.RunRejected"):
            assert json.loads(message.data)["producer"] == "correlator"
            break
    finally:
        await operator.close()
    users = _logged_users(served.log_path)
    assert users.get("sreforge-bootstrap") == "bootstrap"
    assert users.get("sreforge-correlator") == "correlator"
    assert "engine.bus_unauthenticated" not in served.log_path.read_text()
