"""Settings: the `SREFORGE_TRIGGER_` environment, and where the bearer token comes from."""

from __future__ import annotations

import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sreforge_trigger import TokenError, TriggerSettings


def test_environment_prefix_and_loopback_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings read `SREFORGE_TRIGGER_*`; the receiver binds 127.0.0.1 unless told otherwise."""
    monkeypatch.setenv("SREFORGE_TRIGGER_PORT", "9555")
    monkeypatch.setenv("SREFORGE_TRIGGER_TOKEN", "from-env")
    monkeypatch.setenv("SREFORGE_TRIGGER_POLL_URL", "http://127.0.0.1:9090")
    settings = TriggerSettings()
    assert settings.host == "127.0.0.1"
    assert settings.port == 9555
    assert settings.poll_url == "http://127.0.0.1:9090"
    assert settings.bearer_token().get_secret_value() == "from-env"


def test_token_file_is_read(tmp_path: Path) -> None:
    """`token_file` supplies the token, surrounding whitespace stripped."""
    path = tmp_path / "token"
    path.write_text("file-token\n")
    assert TriggerSettings(token_file=path).bearer_token().get_secret_value() == "file-token"


def test_missing_token_file_is_created_private_and_stable(tmp_path: Path) -> None:
    """A token file that does not exist is created (0600) and then read back unchanged."""
    path = tmp_path / "state" / "trigger.token"
    first = TriggerSettings(token_file=path).bearer_token().get_secret_value()
    assert len(first) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert TriggerSettings(token_file=path).bearer_token().get_secret_value() == first


@pytest.mark.timeout(60)
def test_services_starting_at_once_all_read_the_one_token(tmp_path: Path) -> None:
    """Two worker hosts on one home start their triggers together: every reader gets the
    same whole token (the file never exists empty), and no draft is left beside it."""
    for round_ in range(10):
        path = tmp_path / f"home-{round_}" / "trigger.token"
        start = threading.Barrier(12)

        def read(path: Path = path, start: threading.Barrier = start) -> str:
            start.wait()
            return TriggerSettings(token_file=path).bearer_token().get_secret_value()

        with ThreadPoolExecutor(12) as pool:
            tokens = list(pool.map(lambda _: read(), range(12)))
        assert len(set(tokens)) == 1, tokens
        assert len(tokens[0]) >= 32
        assert [p.name for p in path.parent.iterdir()] == ["trigger.token"]


def test_no_token_configured_is_an_error_naming_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Neither token nor token file: TokenError naming both variables; empty ones too."""
    monkeypatch.delenv("SREFORGE_TRIGGER_TOKEN", raising=False)
    monkeypatch.delenv("SREFORGE_TRIGGER_TOKEN_FILE", raising=False)
    with pytest.raises(TokenError, match="SREFORGE_TRIGGER_TOKEN_FILE"):
        TriggerSettings().bearer_token()
    with pytest.raises(TokenError, match="empty"):
        TriggerSettings(token="").bearer_token()
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(TokenError, match=str(empty)):
        TriggerSettings(token_file=empty).bearer_token()
