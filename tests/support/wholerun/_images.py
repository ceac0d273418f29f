"""The compose topology's image inputs, readied once for the session (fixture or thread)."""

from __future__ import annotations

import subprocess
import threading

from ._pool import REPO

__all__ = ["stack_image_inputs_ready", "stop_engine_started_here"]


def _answers(*command: str) -> bool:
    try:
        done = subprocess.run(command, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


_engine_started_here: list[bool] = []
_inputs_lock = threading.Lock()


def stack_image_inputs_ready() -> str | None:
    """Make the compose topology's stack image inputs ready; why not, if they cannot be.

    A Docker engine with Compose and `local/bookworm`, and the lockfile's wheels in
    `.sreforge/compose/wheels`. What is missing is made by `scripts/docker-engine` and
    `scripts/compose-context --images-only`; a dockerd started here is stopped when the
    session ends (that one, by its PID). Safe to call from a thread, and more than once.
    """
    with _inputs_lock:
        ready = _answers("docker", "compose", "version") and _answers(
            "docker", "image", "inspect", "local/bookworm"
        )
        marker = REPO / ".sreforge" / "dockerd.pid"
        if not ready:
            started_here = not marker.exists() and not _answers("docker", "info")
            engine = subprocess.run(
                [REPO / "scripts" / "docker-engine", "start"], capture_output=True, text=True
            )
            if engine.returncode != 0 or not _answers("docker", "info"):
                return f"no Docker engine could start here: {engine.stderr.strip()[-300:]}"
            if started_here:
                _engine_started_here.append(True)
        if not any((REPO / ".sreforge" / "compose" / "wheels").glob("*.whl")):
            script = REPO / "scripts" / "compose-context"
            subprocess.run([script, "--images-only"], check=True, capture_output=True, timeout=300)
        return None


def stop_engine_started_here() -> None:
    """Stop the dockerd `stack_image_inputs_ready` started, if it did (by its PID)."""
    if _engine_started_here:
        subprocess.run([REPO / "scripts" / "docker-engine", "stop"], check=False)
