"""The bus authenticates: per-user credentials and subject permissions on a real nats-server.

Each test plays a client that wants more than it owns (a runner publishing a verdict, a
service deleting the stream or pulling another service's messages) and must be refused.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nats.errors
import pytest
from sreforge_bus import (
    BOOTSTRAP_USER,
    HEADER_DEADLETTER_ERROR,
    HEADER_REPLY_TO,
    OPERATOR_USER,
    SERVICE_EVENTS,
    STREAM,
    Bus,
    BusCredentials,
    ConnectError,
    ConsumerSpec,
    Delivery,
    PermissionDenied,
    RawMessage,
    RunStore,
    RunStoreError,
    bootstrap,
    connect,
    ensure_credentials,
    misplaced,
    read_stored,
)
from sreforge_bus.embedded import NatsServer, start_nats_server
from sreforge_bus.testing import Seen, consumer_settled, poll, read_stream
from sreforge_contracts import RunFailed, parse_event

pytestmark = pytest.mark.timeout(60)

ORACLE_DURABLE = "oracle-deployed"
RUNNER_DURABLE = "runner"
_REFUSED_WITHIN_S = 2.0  # well below the 5 s acknowledgement timeout
_NO_REPLY_S = 1.0

ConnectAs = Callable[[str], Awaitable[Bus]]
StartWorker = Callable[..., Any]


@pytest.fixture
def credentials(tmp_path: Path) -> BusCredentials:
    """The credentials of a fresh engine home, with one durable for the oracle and the runner."""
    durables = {"oracle": [ORACLE_DURABLE], "runner": [RUNNER_DURABLE]}
    return ensure_credentials(tmp_path / "home" / "nats", durables)


@pytest.fixture
def auth_server(credentials: BusCredentials) -> Iterator[NatsServer]:
    """A nats-server that knows only the home's users."""
    with start_nats_server(config_file=credentials.config_file) as server:
        yield server


@pytest.fixture
async def connect_as(
    auth_server: NatsServer, credentials: BusCredentials
) -> AsyncIterator[ConnectAs]:
    """Connect as a named bus user; the stream and both durables exist (made by bootstrap)."""
    opened: list[Bus] = []

    async def open_as(user: str) -> Bus:
        bus = await connect(
            auth_server.url, name=f"test-{user}", credential=credentials.credential(user)
        )
        opened.append(bus)
        return bus

    setup = await open_as(BOOTSTRAP_USER)
    await bootstrap(
        setup,
        [
            ConsumerSpec(ORACLE_DURABLE, ("sreforge.run.*.Deployed",)),
            ConsumerSpec(RUNNER_DURABLE, ("sreforge.run.*.BriefReady",)),
        ],
    )
    yield open_as
    for bus in opened:
        await bus.close()


async def _refused(publish: Awaitable[object]) -> PermissionDenied:
    started = time.monotonic()
    with pytest.raises(PermissionDenied) as refused:
        await publish
    assert time.monotonic() - started < _REFUSED_WITHIN_S, "the refusal waited out the ack timeout"
    return refused.value


async def _stored(bus: Bus) -> int:
    return (await bus.js.stream_info(STREAM)).state.messages


async def test_connecting_without_a_credential_is_refused(auth_server: NatsServer) -> None:
    """Anonymous clients get nothing: the login is refused, promptly and by name."""
    started = time.monotonic()
    with pytest.raises(ConnectError, match=r"without a credential.*refused the login"):
        await connect(auth_server.url, name="anonymous", connect_timeout=10)
    assert time.monotonic() - started < 5, "a refused login must not wait out the deadline"


async def test_a_wrong_password_is_refused(
    auth_server: NatsServer, credentials: BusCredentials
) -> None:
    """Knowing a user name is not enough."""
    forged = type(credentials.credential("oracle"))("oracle", "guessed-password")
    with pytest.raises(ConnectError, match=r"as bus user 'oracle'.*refused the login"):
        await connect(auth_server.url, name="forger", credential=forged, connect_timeout=10)


async def test_only_the_oracle_can_publish_scored(connect_as: ConnectAs) -> None:
    """The runner (closest to the agent) cannot store a verdict; the oracle can."""
    oracle, runner = await connect_as("oracle"), await connect_as("runner")
    await oracle.publish_raw("sreforge.run.r1.Scored", b"{}")
    refused = await _refused(runner.publish_raw("sreforge.run.r1.Scored", b"{}"))
    assert "'sreforge.run.r1.Scored' refused" in str(refused)
    assert "'runner'" in str(refused)
    await runner.publish_raw("sreforge.run.r1.Submitted", b"{}")  # its own event still flows
    assert await _stored(oracle) == 2


async def test_the_operator_starts_runs_and_tails_but_cannot_publish_events(
    connect_as: ConnectAs,
) -> None:
    """The operator's credential: `run.start` and tailing, never a run event or a KV write."""
    operator, oracle = await connect_as(OPERATOR_USER), await connect_as("oracle")
    await operator.publish_raw("sreforge.run.start", b'{"scenario": "s", "agent": "noop"}')
    await oracle.publish_raw("sreforge.run.r1.Scored", b"{}")
    tailed = await read_stream(operator, "sreforge.>", 2)
    assert [message.subject for message in tailed] == [
        "sreforge.run.start",
        "sreforge.run.r1.Scored",
    ]
    await _refused(operator.publish_raw("sreforge.run.r1.Scored", b"{}"))
    await _refused(operator.publish_raw("sreforge.trigger.fired", b"{}"))
    with pytest.raises(Exception, match="put of run store key"):
        await asyncio.wait_for(operator.runs.put("r1", b"{}"), 10)


async def test_no_service_may_start_a_run(connect_as: ConnectAs) -> None:
    """`run.start` is the operator's: a service cannot start runs of its own choosing."""
    runner = await connect_as("runner")
    await _refused(runner.publish_raw("sreforge.run.start", b"{}"))


async def test_a_service_cannot_delete_or_purge_the_stream(connect_as: ConnectAs) -> None:
    """Destructive JetStream API is bootstrap's alone: the events (and the verdicts) stay."""
    oracle = await connect_as("oracle")
    await oracle.publish_raw("sreforge.run.r1.Scored", b"{}")
    runner = (await connect_as("runner")).nc.jetstream(timeout=_NO_REPLY_S)
    for attempt in (runner.delete_stream(STREAM), runner.purge_stream(STREAM)):
        with pytest.raises(nats.errors.TimeoutError):
            await attempt
    with pytest.raises(nats.errors.TimeoutError):
        await runner.delete_consumer(STREAM, ORACLE_DURABLE)
    assert await _stored(oracle) == 1
    assert (await oracle.js.consumer_info(STREAM, ORACLE_DURABLE)).name == ORACLE_DURABLE


async def test_a_service_cannot_rewrite_another_services_durable(connect_as: ConnectAs) -> None:
    """A create request naming the oracle's durable would re-point it: it never gets through."""
    runner = await connect_as("runner")
    config = {"name": ORACLE_DURABLE, "filter_subject": "sreforge.nothing", "ack_policy": "none"}
    request = json.dumps({"stream_name": STREAM, "config": config}).encode()
    for subject in (
        f"$JS.API.CONSUMER.CREATE.{STREAM}",
        f"$JS.API.CONSUMER.CREATE.{STREAM}.{ORACLE_DURABLE}",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{STREAM}.{ORACLE_DURABLE}",
    ):
        with pytest.raises(nats.errors.TimeoutError):
            await runner.nc.request(subject, request, timeout=_NO_REPLY_S)
    info = await runner.js.consumer_info(STREAM, ORACLE_DURABLE)
    assert info.config.filter_subject == "sreforge.run.*.Deployed"


@pytest.mark.parametrize("service", sorted(SERVICE_EVENTS))
async def test_no_service_may_create_a_consumer(connect_as: ConnectAs, service: str) -> None:
    """Even an ephemeral create may carry a durable's name and rewrite it: no service gets it."""
    bus = await connect_as(service)
    config = {"name": ORACLE_DURABLE, "filter_subject": "sreforge.nothing", "ack_policy": "none"}
    request = json.dumps({"stream_name": STREAM, "config": config}).encode()
    with pytest.raises(nats.errors.TimeoutError):
        await bus.nc.request(f"$JS.API.CONSUMER.CREATE.{STREAM}", request, timeout=_NO_REPLY_S)
    info = await bus.js.consumer_info(STREAM, ORACLE_DURABLE)
    assert info.config.filter_subject == "sreforge.run.*.Deployed"


async def test_a_service_pulls_only_from_its_own_durables(connect_as: ConnectAs) -> None:
    """The runner cannot take (and ack away) the Deployed events the oracle grades."""
    runner, oracle = await connect_as("runner"), await connect_as("oracle")
    pull = json.dumps({"batch": 1, "no_wait": True}).encode()
    own = await oracle.nc.request(
        f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{ORACLE_DURABLE}", pull, timeout=5
    )
    assert own.headers is not None
    assert own.headers.get("Status") == "404"  # nothing pending, but the oracle was heard
    with pytest.raises(nats.errors.TimeoutError):
        await runner.nc.request(
            f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{ORACLE_DURABLE}", pull, timeout=_NO_REPLY_S
        )


async def test_a_service_dead_letters_only_its_own_durables(connect_as: ConnectAs) -> None:
    """A forged dead letter for another durable would fail that run; only its own are allowed."""
    runner = await connect_as("runner")
    await runner.publish_raw(f"sreforge.deadletter.{RUNNER_DURABLE}", b"{}")
    await _refused(runner.publish_raw(f"sreforge.deadletter.{ORACLE_DURABLE}", b"{}"))


async def test_services_keep_the_run_store_and_their_replies(connect_as: ConnectAs) -> None:
    """What every JetStream client needs still works under a service credential."""
    deployer = await connect_as("deployer")
    assert await deployer.runs.claim("deployer.stack.r1", b"1")
    entry = await deployer.runs.get("deployer.stack.r1")
    assert entry is not None
    assert entry.value == b"1"
    assert await deployer.runs.keys("deployer.>") == ["deployer.stack.r1"]
    await deployer.runs.remove("deployer.stack.r1")
    assert await deployer.runs.get("deployer.stack.r1") is None


async def test_a_service_cannot_forge_another_services_run_store_keys(
    connect_as: ConnectAs,
) -> None:
    """An unpublished outcome planted in the oracle's journal would be published by the oracle
    itself; the runner may write only its own `runner.*` claims."""
    runner = await connect_as("runner")
    store = RunStore(runner.nc.jetstream(timeout=_NO_REPLY_S))
    assert await store.claim("runner.run-0001", b"mine")
    for key in ("oracle.scored.run-0001", "run-0001", "recorded.run-0001"):
        with pytest.raises(RunStoreError):
            await store.claim(key, b"forged")
    oracle = await connect_as("oracle")
    assert await oracle.runs.get("oracle.scored.run-0001") is None
    assert await oracle.runs.claim("oracle.scored.run-0001", b"{}")


async def test_a_service_cannot_read_another_services_replies(connect_as: ConnectAs) -> None:
    """Reply inboxes are per user: the runner cannot listen in on the oracle's acks and reads."""
    runner = await connect_as("runner")
    errors: list[str] = []
    original = runner.nc._error_cb

    async def record(err: Exception) -> None:
        errors.append(str(err))
        if original is not None:
            await original(err)

    runner.nc._error_cb = record
    await runner.nc.subscribe("_INBOX.oracle.>")

    async def refused() -> bool:
        return any("permissions violation for subscription" in error for error in errors)

    await poll(refused, "the subscription to the oracle's inboxes to be refused", timeout=5)


async def test_the_recorder_watches_the_whole_bus_and_no_other_service_does(
    connect_as: ConnectAs,
) -> None:
    """The dashboard's whole-bus stream: the recorder's core subscription to `sreforge.>`
    sees every message; the same subscription by another service is refused."""
    recorder = await connect_as("recorder")
    watcher = await connect_as("runner")
    oracle = await connect_as("oracle")
    seen: list[str] = []

    async def keep(message: Any) -> None:
        seen.append(message.subject)

    await recorder.nc.subscribe("sreforge.>", cb=keep)
    await recorder.nc.flush()  # the server has the subscription before anything is published
    errors: list[str] = []

    async def record(err: Exception) -> None:
        errors.append(str(err))

    watcher.nc._error_cb = record
    await watcher.nc.subscribe("sreforge.>")
    await oracle.publish(_failed())

    async def both() -> bool:
        refused = any("permissions violation for subscription" in e for e in errors)
        return refused and "sreforge.run.run-0001.RunFailed" in seen

    await poll(both, "the recorder to see the event and the runner to be refused", timeout=15)


def _failed(run_id: str = "run-0001") -> RunFailed:
    return RunFailed(run_id=run_id, producer="tests", stage="ci", reason="r", verdict="error")


@pytest.mark.parametrize(
    ("subject", "wrong"),
    [
        ("sreforge.run.run-0001.RunFailed", None),
        ("sreforge.run.run-0001.Submitted", "belongs on 'sreforge.run.run-0001.RunFailed'"),
        ("sreforge.run.run-0002.RunFailed", "belongs on 'sreforge.run.run-0001.RunFailed'"),
        ("sreforge.trigger.fired", "belongs on 'sreforge.run.run-0001.RunFailed'"),
        ("sreforge.deadletter.oracle-deployed", None),  # dead letters carry others' bodies
        ("sreforge.run.start", None),
    ],
)
def test_an_event_must_come_on_its_own_subject(subject: str, wrong: str | None) -> None:
    """Subject permissions only hold if the body's type and run are the subject's."""
    found = misplaced(_failed(), subject)
    if wrong is None:
        assert found is None
    else:
        assert found is not None
        assert wrong in found


async def test_a_verdict_smuggled_onto_another_subject_is_dead_lettered(
    bus: Bus, start_worker: StartWorker
) -> None:
    """The runner may publish on `...Submitted`; a body there saying it is another event (here
    a RunFailed for the run) never reaches a handler, while the genuine one does."""
    spec = ConsumerSpec("events", ("sreforge.run.*.*",))
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()

    async def handle(event: Any, delivery: Delivery) -> None:
        seen.add(event, delivery)

    start_worker(spec, handle, parse=parse_event)
    smuggled = _failed().model_dump_json().encode()
    await bus.publish_raw("sreforge.run.run-0001.Submitted", smuggled)
    await bus.publish(_failed("run-0002"))
    await seen.wait_for(1)
    [dead] = await read_stream(bus, "sreforge.deadletter.events", 1)
    assert "belongs on 'sreforge.run.run-0001.RunFailed'" in dead.headers[HEADER_DEADLETTER_ERROR]
    await poll(lambda: consumer_settled(bus, "events"), "the smuggled event terminated")
    assert [event.run_id for event, _, _ in seen.items] == ["run-0002"]


async def test_a_client_can_tell_an_open_server_from_one_that_checks(
    connect_as: ConnectAs, bus: Bus
) -> None:
    """The engine warns when the external NATS takes anyone (permissions are then moot)."""
    assert (await connect_as("oracle")).server_requires_auth
    assert not bus.server_requires_auth


async def test_a_refused_connect_names_the_url_without_its_password(
    auth_server: NatsServer,
) -> None:
    """The error a user sees says where and as whom, never the password it tried."""
    url = auth_server.url.replace("nats://", "nats://oracle:wrong-s3cret@")
    with pytest.raises(ConnectError) as refused:
        await connect(url, name="url-login", connect_timeout=10)
    assert "wrong-s3cret" not in str(refused.value)
    assert "oracle:***@" in str(refused.value)


async def test_a_service_reads_stored_events_back_without_creating_a_consumer(
    connect_as: ConnectAs,
) -> None:
    """The recorder's backfill needs the run's stored events, not the right to create
    consumers (which could rewrite a durable): `read_stored` gets them one by one."""
    oracle, recorder = await connect_as("oracle"), await connect_as("recorder")
    for n, subject in enumerate(["a.Scored", "b.Scored", "a.RunFailed", "a.Scored"]):
        await oracle.publish_raw(f"sreforge.run.{subject}", str(n).encode())
    stored = [m async for m in read_stored(recorder, "sreforge.run.a.*", upto=3)]
    assert [(m.seq, m.data) for m in stored] == [(1, b"0"), (3, b"2")]
    every = [m.seq async for m in read_stored(recorder, "sreforge.run.a.*")]
    assert every == [1, 3, 4]
    with pytest.raises(nats.errors.TimeoutError):
        await recorder.nc.request(f"$JS.API.CONSUMER.CREATE.{STREAM}", b"{}", timeout=_NO_REPLY_S)


async def test_only_the_correlator_answers_the_operators_run_start(connect_as: ConnectAs) -> None:
    """A forged `run.start` answer (say, an accepted run id) could steer `sreforge run`; only
    the correlator may publish on the operator's reply inboxes."""
    operator = await connect_as("operator")
    correlator, runner = await connect_as("correlator"), await connect_as("runner")
    asked = asyncio.create_task(operator.command("sreforge.run.start", b"{}", timeout=10))
    stored: list[RawMessage] = []

    async def arrived() -> bool:
        stored[:] = [m async for m in read_stored(correlator, "sreforge.run.start")]
        return bool(stored)

    await poll(arrived, "the run.start command to be stored")
    reply_to = stored[0].headers[HEADER_REPLY_TO]
    assert reply_to.startswith("_INBOX.operator.")
    await runner.nc.publish(reply_to, b"forged")
    await runner.nc.flush()
    await correlator.nc.publish(reply_to, b"accepted")
    assert await asked == b"accepted"
