"""A run's own PostgreSQL server: a fresh cluster in the run dir, on a leased loopback port.

For a scenario with `DATABASE=postgres` the local topology `initdb`s a cluster into
`<run dir>/postgres/`, starts `postgres` on the port leased for it (loopback TCP only, no
unix socket, trust authentication for 127.0.0.1 alone: the port is the run's, and what
reaches it is the service's jail and the harness), creates the database, and stops the
server and deletes the cluster at teardown, checking that nothing of it is left.

`initdb` and `postgres` refuse to run as root. A root deployer runs both in a user
namespace of their own (`unshare --user`) where its uid is seen as an unprivileged one:
the files stay the deployer's on the host, the run dir keeps its 0700, and no system
account is needed. Durability is off (`fsync`, full-page writes): the cluster lives as
long as the run.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

from sreforge_bus import forget_secret, guard_secret

from sreforge_deployer._errors import ComponentStartError, DeployerError, StackSpecError
from sreforge_deployer._ports import listening_ports
from sreforge_deployer._process import (
    Component,
    LaunchSpec,
    group_members,
    log_tail,
    run_once,
    stop_group,
)
from sreforge_deployer._run import RunLayout
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import ScenarioSetup, StackSpec

__all__ = ["POSTGRES", "PostgresServer", "database_url", "find_postgres_bin", "run_postgres"]

POSTGRES = "postgres"
"""The component name of the run's server (its port lease, process group and log)."""
DATABASE = "bookshelf"
USER = "bookshelf"
"""The service's role: it owns its database and is no superuser, because the server runs
outside the service's jail and a superuser can make it read files or run programs."""
_SUPERUSER = "postgres"  # the harness's own role: creates the service's role and database
_UNPRIVILEGED_ID = 1000  # the root deployer's uid/gid as the namespace shows it
_POLL_SECONDS = 0.05
_SEARCHED = "/usr/lib/postgresql/*/bin"
_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",
    "max_connections": "100",
    "shared_buffers": "16MB",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "logging_collector": "off",
}
_HBA = (
    "# The run's own server, on loopback TCP only: the service's role by trust, the\n"
    "# harness's superuser by its password (the service can reach this port too).\n"
    f"host all {_SUPERUSER} 127.0.0.1/32 scram-sha-256\n"
    f"host all {USER} 127.0.0.1/32 trust\n"
)


def database_url(port: int) -> str:
    """The libpq URL of the database of a run's server on `port` (no password: trust)."""
    return f"postgresql://{USER}@127.0.0.1:{port}/{DATABASE}"


def run_postgres(
    spec: StackSpec, setup: ScenarioSetup, settings: DeployerSettings, run_dir: Path, port: int
) -> PostgresServer:
    """The server of a run on PostgreSQL, not started yet: in `<run dir>/postgres`, on
    `port`. `StackSpecError` naming `DATABASE` when the stack has no `[postgres]`;
    `DeployerError` when the server binaries are missing."""
    if spec.postgres is None:
        raise StackSpecError(
            f"DATABASE=postgres, but stack {spec.name!r} has no [postgres] section in its "
            f"stack.toml (it runs on SQLite only)",
            source=setup.directory / "environment" / "scenario.env",
        )
    bin_dir = find_postgres_bin(settings.postgres_bin_dir)
    return PostgresServer(run_dir / POSTGRES, port, RunLayout(run_dir).logs, bin_dir)


def find_postgres_bin(configured: Path | None = None) -> Path:
    """The directory holding `initdb` and `postgres`: `configured`, else the one on PATH,
    else the newest `/usr/lib/postgresql/*/bin`; `DeployerError` when there is none."""
    if configured is not None:
        candidates = [configured]
    else:
        on_path = shutil.which("initdb")
        candidates = [Path(on_path).parent] if on_path else []
        versions = Path("/usr/lib/postgresql").glob("*/bin")
        candidates += sorted(versions, key=lambda p: _version(p.parent.name), reverse=True)
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "postgres", "pg_isready")):
            return folder
    searched = configured or f"PATH and {_SEARCHED}"
    raise DeployerError(
        f"DATABASE=postgres needs the PostgreSQL server binaries (initdb, postgres, "
        f"pg_isready), found none in {searched}: run scripts/setup, or set "
        "SREFORGE_DEPLOYER_POSTGRES_BIN_DIR"
    )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


class PostgresServer:
    """One run's PostgreSQL server: `start()`, `url`, `stop()` (which checks it is gone)."""

    def __init__(
        self,
        root: Path,
        port: int,
        log_dir: Path,
        bin_dir: Path,
        *,
        startup_timeout_seconds: float = 60.0,
    ) -> None:
        self.root = root
        self.port = port
        self.log_path = log_dir / f"{POSTGRES}.log"
        self.bin_dir = bin_dir
        self.startup_timeout_seconds = startup_timeout_seconds
        self._component: Component | None = None
        self._password = secrets.token_urlsafe(24)  # the superuser's; kept in memory only
        guard_secret(self._password)  # redacted from every message and record of this process

    @property
    def data_dir(self) -> Path:
        """The cluster (inside `root`, which teardown removes whole)."""
        return self.root / "data"

    @property
    def url(self) -> str:
        """The database's libpq URL (no password: trust on loopback)."""
        return database_url(self.port)

    @property
    def admin_url(self) -> str:
        """The harness's own role on the maintenance database (never the service's)."""
        return f"postgresql://{_SUPERUSER}:{self._password}@127.0.0.1:{self.port}/postgres"

    @property
    def pgid(self) -> int | None:
        """The server's process group (its postmaster's pid), once started."""
        return None if self._component is None else self._component.pgid

    def start(self) -> int:
        """Create the cluster, start the server, create the database; return its pgid.

        `ComponentStartError` (with the log's tail) when any step fails or the server
        does not accept connections within the startup timeout.
        """
        self.root.mkdir(mode=0o700)
        pwfile = self.root / "superuser.pw"
        pwfile.touch(mode=0o600)
        pwfile.write_text(self._password + "\n")
        try:
            run_once(self._launch("initdb", ["-D", str(self.data_dir), "-U", _SUPERUSER,
                                             f"--pwfile={pwfile}", "--auth=scram-sha-256",
                                             "--encoding=UTF8", "--locale=C",
                                             "--no-sync"]))  # fmt: skip
        finally:
            pwfile.unlink(missing_ok=True)
        (self.data_dir / "pg_hba.conf").write_text(_HBA)
        options = [arg for key, value in _SETTINGS.items() for arg in ("-c", f"{key}={value}")]
        launch = self._launch("postgres", ["-D", str(self.data_dir), "-p", str(self.port),
                                           *options])  # fmt: skip
        self._component = Component(launch)
        self._component.start()
        self._wait_ready()
        role = ["--no-superuser", "--no-createdb", "--no-createrole", USER]
        run_once(self._launch("createuser", [*self._client_args(), *role]))
        run_once(self._launch("createdb", [*self._client_args(), "--owner", USER, DATABASE]))
        pgid = self._component.pgid
        assert pgid is not None
        return pgid

    def stop(self, timeout_seconds: float = 10.0) -> list[str]:
        """Stop the server (fast shutdown, then the group killed), delete the cluster;
        return what is left of it (processes, a listening port, the folder)."""
        component, self._component = self._component, None
        if component is not None and component.process is not None:
            process = component.process
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGINT)  # fast shutdown: clients disconnected
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=timeout_seconds)
            stop_group(process.pid, timeout_seconds)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=timeout_seconds)
        shutil.rmtree(self.root, ignore_errors=True)
        forget_secret(self._password)
        return self.leftovers(None if component is None else component.pgid)

    def leftovers(self, pgid: int | None) -> list[str]:
        """What of the server is still there: processes of its group, its port, its folder."""
        found = []
        if pgid is not None:
            found += [f"process {p.pid} of {POSTGRES} (group {pgid})" for p in group_members(pgid)]
        if listening_ports({self.port}):
            found.append(f"port 127.0.0.1:{self.port} ({POSTGRES}) still listening")
        if self.root.exists():
            found.append(f"{POSTGRES} cluster {self.root}")
        return found

    def _launch(self, program: str, args: list[str]) -> LaunchSpec:
        argv = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0 and program in ("initdb", "postgres"):
            unshare = shutil.which("unshare") or "/usr/bin/unshare"
            ids = [f"--map-user={_UNPRIVILEGED_ID}", f"--map-group={_UNPRIVILEGED_ID}"]
            argv = [unshare, "--user", *ids, *argv]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        if program not in ("initdb", "postgres"):  # the clients log in as the superuser
            env["PGPASSWORD"] = self._password
        return LaunchSpec(
            name=POSTGRES if program == "postgres" else f"{POSTGRES}-{program}",
            argv=argv,
            cwd=self.root,
            env=env,
            log_path=self.log_path,
            port=self.port if program == "postgres" else None,
            startup_timeout_seconds=self.startup_timeout_seconds,
        )

    def _client_args(self) -> list[str]:
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", _SUPERUSER]

    def _wait_ready(self) -> None:
        assert self._component is not None
        process = self._component.process
        assert process is not None
        probe = [str(self.bin_dir / "pg_isready"), "-q", *self._client_args(), "-d", "postgres"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        deadline = time.monotonic() + self.startup_timeout_seconds
        while True:
            if process.poll() is not None:
                self._failed(f"exited with code {process.returncode} during startup")
            if subprocess.run(probe, env=env, check=False, timeout=10).returncode == 0:
                return
            if time.monotonic() > deadline:
                self._failed(f"not accepting connections within {self.startup_timeout_seconds:g}s")
            time.sleep(_POLL_SECONDS)

    def _failed(self, reason: str) -> None:
        self.stop(3.0)
        raise ComponentStartError(
            POSTGRES, reason, log_path=self.log_path, log_tail=log_tail(self.log_path)
        )
