"""`sreforge up` on the embedded default, driven the way an operator drives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

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


async def _core_publish(url: str, subject: str, payload: bytes) -> None:
    """Exactly what `nats pub SUBJECT PAYLOAD` does: a plain core-NATS publish, no headers."""
    nc = await nats.connect(url)
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
    await _core_publish(url, "sreforge.run.start", json.dumps(command).encode())
    lines = _tail_until(env, "latency-cache-stampede")
    shown = json.loads(lines[-1])
    assert shown["subject"] == "sreforge.run.start"
    assert shown["event"]["agent"] == "noop"


async def test_malformed_run_start_is_rejected_and_the_engine_keeps_serving(
    engine: tuple[dict[str, str], Path, str],
) -> None:
    """A bad `run.start` gets a RunRejected naming the field; the next command still flows."""
    env, _, url = engine
    await _core_publish(url, "sreforge.run.start", b'{"scenario": "../x", "agent": "noop"}')
    rejected = json.loads(_tail_until(env, '"RunRejected"')[-1])
    assert "scenario" in rejected["event"]["reason"]
    good = {"scenario": "latency-cache-stampede", "agent": "noop", "time_scale": 0.1}
    await _core_publish(url, "sreforge.run.start", json.dumps(good).encode())
    requested = json.loads(_tail_until(env, '"RunRequested"')[-1])
    assert requested["event"]["agent"] == "noop"


_WIRED = (
    "SREFORGE_TRIGGER_PORT",
    "SREFORGE_TRIGGER_TOKEN",
    "SREFORGE_TRIGGER_TOKEN_FILE",
    "SREFORGE_DEPLOYER_ALERT_WEBHOOK_BASE",
    "SREFORGE_DEPLOYER_ALERT_TOKEN_FILE",
    "SREFORGE_DEPLOYER_ENGINE_HOME",
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
