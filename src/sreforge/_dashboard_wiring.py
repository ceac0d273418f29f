"""Where the recorder's live dashboard listens and the operator's token it wants.

The embedded engine's recorder serves it on loopback (`SREFORGE_RECORDER_DASHBOARD_*`);
the token is `SREFORGE_DASHBOARD_TOKEN`, else an HMAC of the engine home's operator bus
credential, kept in `<home>/dashboard.token` (0600) for the recorder to read, so it never
travels in an environment that child processes inherit. Once it listens the recorder
writes its URL to `<home>/dashboard.url` (the port it took: 8787, else a free one, as when
another engine or a concurrent run has 8787). Explicit settings always win.
"""

from __future__ import annotations

import os
import socket

from sreforge_report import dashboard_token

from sreforge._settings import EngineSettings

__all__ = ["announce_dashboard", "operator_token", "wire_dashboard"]

_PORT = 8787


def operator_token(settings: EngineSettings) -> str:
    """SREFORGE_DASHBOARD_TOKEN, else the HMAC of the operator's bus password."""
    configured = os.environ.get("SREFORGE_DASHBOARD_TOKEN")
    if configured:
        return configured
    from sreforge._engine import bus_credentials

    return dashboard_token(bus_credentials(settings).credential("operator").password)


def wire_dashboard(settings: EngineSettings) -> None:
    """Write the token file and point the recorder at it and at a port (idempotent)."""
    if "SREFORGE_RECORDER_DASHBOARD_TOKEN" not in os.environ:
        path = settings.home / "dashboard.token"
        token = operator_token(settings)
        if not path.is_file() or path.read_text().strip() != token:
            settings.home.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as file:
                file.write(token + "\n")
        os.environ.setdefault("SREFORGE_RECORDER_DASHBOARD_TOKEN_FILE", str(path))
    if "SREFORGE_RECORDER_DASHBOARD_PORT" not in os.environ:
        os.environ["SREFORGE_RECORDER_DASHBOARD_PORT"] = str(_PORT if _free(_PORT) else 0)
    os.environ.setdefault(
        "SREFORGE_RECORDER_DASHBOARD_URL_FILE", str(settings.home / "dashboard.url")
    )


def announce_dashboard(settings: EngineSettings) -> str:
    """Wire the dashboard and return the line `sreforge up` prints (the URL, and where the
    token is: the token itself stays out of the terminal's scrollback and logs)."""
    wire_dashboard(settings)
    host = os.environ.get("SREFORGE_RECORDER_DASHBOARD_HOST", "127.0.0.1")
    port = os.environ["SREFORGE_RECORDER_DASHBOARD_PORT"]
    where = os.environ.get(
        "SREFORGE_RECORDER_DASHBOARD_TOKEN_FILE", "SREFORGE_RECORDER_DASHBOARD_TOKEN"
    )
    if port == "0":
        found = os.environ["SREFORGE_RECORDER_DASHBOARD_URL_FILE"]
        return f"dashboard (a free port: 8787 is taken): $(cat {found})?token=$(cat {where})"
    return f"dashboard: http://{host}:{port}/?token=$(cat {where})"


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
