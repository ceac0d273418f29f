"""Postgres mode: a run's own PostgreSQL server, wired to the service, torn down whole.

The unit tests read the scenario's `DATABASE` and the wiring; the integration tests start
real servers (the binaries `scripts/setup` installs) and the whole bookshelf stack on one.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from sreforge_deployer import DeployerSettings
from sreforge_deployer._compose_stack import ComposeStack
from sreforge_deployer._errors import DeployerError, StackSpecError
from sreforge_deployer._ports import PortAllocator, PortLease, listening_ports
from sreforge_deployer._process import group_members
from sreforge_deployer._spec import load_scenario_setup, load_stack_spec, refuse_postgres
from sreforge_deployer._wiring import Wiring
from sreforge_deployer.local import LocalStack
from sreforge_deployer.local._postgres import (
    POSTGRES,
    PostgresServer,
    database_url,
    find_postgres_bin,
    run_postgres,
)

from .conftest import BOOKSHELF, STAMPEDE

URL = "postgresql://bookshelf@127.0.0.1:24555/bookshelf"


def _postgres_scenario(root: Path) -> Path:
    """latency-cache-stampede as a Postgres-mode scenario, beside a link to its stacks."""
    use_case = root / "use-cases" / "bookshelf"
    (use_case / "scenarios").mkdir(parents=True)
    (use_case / "stacks").symlink_to(BOOKSHELF / "stacks")
    scenario = use_case / "scenarios" / STAMPEDE.name
    shutil.copytree(STAMPEDE, scenario)
    env = scenario / "environment" / "scenario.env"
    env.write_text(env.read_text() + "DATABASE=postgres\n")
    return scenario


@pytest.fixture
def postgres_scenario(tmp_path: Path) -> Path:
    """A Postgres-mode copy of latency-cache-stampede."""
    return _postgres_scenario(tmp_path)


def test_scenarios_run_on_sqlite_unless_they_ask() -> None:
    """Every scenario without `DATABASE` keeps the SQLite file."""
    assert load_scenario_setup(STAMPEDE).database == "sqlite"


def test_database_postgres_is_read_from_scenario_env(postgres_scenario: Path) -> None:
    """`DATABASE=postgres` reaches the topology's view of the scenario."""
    assert load_scenario_setup(postgres_scenario).database == "postgres"


def test_compose_topology_refuses_postgres_naming_the_field(postgres_scenario: Path) -> None:
    """Compose runs no PostgreSQL server: it refuses at once rather than half-working."""
    with pytest.raises(StackSpecError, match=r"scenario\.env: DATABASE=postgres: the compose"):
        ComposeStack(postgres_scenario)


def test_judge_refusal_names_the_field(postgres_scenario: Path) -> None:
    """The CI gate's judge would serve hidden tests on SQLite: it says why it refuses."""
    setup = load_scenario_setup(postgres_scenario)
    with pytest.raises(StackSpecError, match=r"DATABASE=postgres: the CI gate's judge"):
        refuse_postgres(setup, "the CI gate's judge (hidden tests)")
    refuse_postgres(load_scenario_setup(STAMPEDE), "the CI gate's judge")  # SQLite: fine


def test_stack_without_a_postgres_section_is_refused(postgres_scenario: Path) -> None:
    """A stack that only knows SQLite says so, naming the scenario's field."""
    setup = load_scenario_setup(postgres_scenario)
    spec = load_stack_spec(setup.stack_dir).model_copy(update={"postgres": None})
    with pytest.raises(StackSpecError, match="DATABASE=postgres, but stack"):
        run_postgres(spec, setup, DeployerSettings(), Path("/nonexistent"), 1)


def test_missing_binaries_name_the_setting(tmp_path: Path) -> None:
    """Without initdb the error says how to get it."""
    with pytest.raises(DeployerError, match="SREFORGE_DEPLOYER_POSTGRES_BIN_DIR"):
        find_postgres_bin(tmp_path)


def test_service_gets_the_url_and_its_jail_reaches_the_server(
    postgres_scenario: Path, tmp_path: Path
) -> None:
    """The service's env carries the database URL; its jail may dial that port only."""
    run_dir = tmp_path / "run"
    for folder in ("workspace", "data"):
        (run_dir / folder).mkdir(parents=True)
    setup = load_scenario_setup(postgres_scenario)
    spec = load_stack_spec(setup.stack_dir)
    ports = {c.name: 24500 + n for n, c in enumerate(spec.components)} | {POSTGRES: 24555}
    wiring = Wiring(spec, setup, DeployerSettings(), run_dir, ports, 0.1, URL)
    launch = wiring.launch(spec.component(spec.service), {})
    assert launch.env["BOOKSHELF_DATABASE_URL"] == URL
    assert any("127.0.0.1-24555.sock" in arg for arg in launch.argv)
    seed = wiring.postgres_seed_launch()
    assert seed is not None
    assert URL in seed.argv
    on_sqlite = Wiring(spec, setup, DeployerSettings(), run_dir, ports, 0.1)
    sqlite_launch = on_sqlite.launch(spec.component(spec.service), {})
    assert "BOOKSHELF_DATABASE_URL" not in sqlite_launch.env
    assert not any("127.0.0.1-24555.sock" in arg for arg in sqlite_launch.argv)
    assert on_sqlite.postgres_seed_launch() is None


def test_the_url_comes_from_the_lease(postgres_scenario: Path, settings: DeployerSettings) -> None:
    """An adopted stack has its server's lease, not the object that started it: its
    service is still pointed at that server on a redeploy."""
    stack = LocalStack(postgres_scenario, settings=settings)
    assert stack._wiring().database_url is None
    stack._leases = {POSTGRES: PortLease(24555, Path("/nonexistent.lock"))}
    assert stack._wiring().database_url == database_url(24555) == URL


@pytest.fixture
def server(tmp_path: Path, settings: DeployerSettings) -> Iterator[PostgresServer]:
    """A real server in a 0700 run dir, on a leased port; stopped after the test."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    allocator = PortAllocator(settings.port_lock_dir)
    lease = allocator.lease(1)[0]
    server = PostgresServer(run_dir / POSTGRES, lease.port, run_dir / "logs", find_postgres_bin())
    try:
        yield server
    finally:
        server.stop()
        lease.release()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_service_role_cannot_reach_the_host_through_the_server(
    server: PostgresServer, tmp_path: Path
) -> None:
    """The cheat: the deployed service (the agent's code) uses its database URL to make the
    server, which runs outside the service's jail, read a harness file or run a program.
    Its role owns its database but is no superuser: both are refused."""
    secret = tmp_path / "eval-only.txt"
    secret.write_text("the answer")
    secret.chmod(0o600)
    server.start()
    with psycopg.connect(server.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert row == (False, False, False)
        conn.execute("CREATE TABLE mine (id integer)")  # its own database: it may build
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT pg_read_file(%s)", (str(secret),))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"COPY (SELECT 1) TO PROGRAM 'touch {tmp_path}/ran'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"COPY mine FROM '{secret}'")
    assert not (tmp_path / "ran").exists()
    # Nor can it become the harness's superuser: trust is the service role's alone.
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(f"postgresql://postgres@127.0.0.1:{server.port}/postgres").close()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_server_serves_loopback_only_then_leaves_nothing(server: PostgresServer) -> None:
    """initdb and postgres run unprivileged; the database answers on 127.0.0.1 with trust,
    no unix socket; its files stay ours; stop() leaves no process, port or folder."""
    pgid = server.start()
    with psycopg.connect(server.url) as conn:
        (user,) = conn.execute("SELECT current_user").fetchone() or (None,)
    # The server's settings are readable by the harness's own role, not the service's.
    with psycopg.connect(server.admin_url) as conn:
        sockets, listen = conn.execute(
            "SELECT current_setting('unix_socket_directories'), current_setting('listen_addresses')"
        ).fetchone() or (None, None)
    assert (user, sockets, listen) == ("bookshelf", "", "127.0.0.1")
    assert server.data_dir.stat().st_uid == os.geteuid()
    assert group_members(pgid)
    assert listening_ports({server.port}) == {server.port}

    assert server.stop() == []
    assert not server.root.exists()
    assert group_members(pgid) == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), 1).close()


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_bookshelf_runs_on_its_own_postgres_and_tears_down(
    tmp_path: Path, settings: DeployerSettings
) -> None:
    """A whole stack on PostgreSQL: the service answers from the copied library through
    its jail, and down() stops the server and removes its cluster with the run dir."""
    scenario = _postgres_scenario(tmp_path)
    stack = LocalStack(scenario, time_scale=0.1, settings=settings)
    stack.up()
    try:
        assert POSTGRES not in stack.endpoints.operator
        port = stack.ports[POSTGRES]
        answer = httpx.get(f"{stack.url(stack.spec.service)}/search?q=dune", timeout=10).json()
        assert [hit["title"] for hit in answer["results"]] == ["Dune", "Dune Messiah"]
        url = f"postgresql://bookshelf@127.0.0.1:{port}/bookshelf"
        with psycopg.connect(url) as conn:
            clients = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = 'bookshelf'"
                " AND pid <> pg_backend_pid()"
            ).fetchone()
            books = conn.execute("SELECT count(*) FROM books").fetchone()
        assert clients is not None
        assert clients[0] >= 1  # the service's pool
        assert books == (20_000,)
    finally:
        report = stack.down()
    assert report.leftovers == []
    assert POSTGRES in report.groups
    assert not listening_ports({port})
