"""Connecting to NATS and publishing: the `Bus` handle every service holds."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import nats.errors
import structlog
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from pydantic import BaseModel
from sreforge_contracts import MAX_MESSAGE_BYTES, Event

from sreforge_bus._credentials import Credential
from sreforge_bus._errors import (
    ConnectError,
    MessageTooLarge,
    PermissionDenied,
    PublishError,
    ReplyTimeout,
)
from sreforge_bus._names import HEADER_MSG_ID, HEADER_REPLY_TO, INBOX_PREFIX
from sreforge_bus._runs import RunStore
from sreforge_bus._secrets import HarnessSecrets

if TYPE_CHECKING:
    from sreforge_bus._worker import Delivery

__all__ = ["Bus", "Published", "connect", "redact_url", "wire_size"]

log = structlog.get_logger("sreforge.bus")

# nats-py lowercases the server's error text, subject included.
_VIOLATION = re.compile(r"permissions violation for (publish|subscription) to \"?([^\"\s]+)", re.I)
_LOGIN_REFUSED = "authorization violation"
_URL_USERINFO = re.compile(r"//([^/@,]*)@")


class _Stoppable(Protocol):
    async def stop(self) -> None: ...

    def wake(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Published:
    """JetStream's acknowledgement of a stored message."""

    stream: str
    seq: int
    duplicate: bool


class Bus:
    """A connection to NATS with JetStream, the run store and the workers bound to it."""

    def __init__(
        self,
        nc: Client,
        *,
        publish_timeout: float = 5.0,
        user: str | None = None,
        secrets: HarnessSecrets | None = None,
    ) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=publish_timeout)
        self.runs = RunStore(self.js)
        self.user = user
        self.secrets = secrets if secrets is not None else HarnessSecrets()
        """What never leaves through this connection: redacted from every message sent."""
        self._publish_timeout = publish_timeout
        self._workers: set[_Stoppable] = set()
        self._refusals: dict[str, set[asyncio.Future[None]]] = {}
        self._closing = False

    @property
    def server_requires_auth(self) -> bool:
        """Whether the server asked this client to log in (False: it takes anyone)."""
        return bool(self.nc._server_info.get("auth_required"))

    async def publish(self, event: Event) -> Published:
        """Store `event` on `event.subject`, deduplicated by `event.event_id`.

        Waits for JetStream's acknowledgement; raises `PublishError` when none comes.
        """
        data = event.model_dump_json().encode()
        return await self.publish_raw(event.subject, data, {HEADER_MSG_ID: event.event_id})

    async def publish_raw(
        self, subject: str, data: bytes, headers: Mapping[str, str] | None = None
    ) -> Published:
        """Store raw bytes on `subject` through JetStream and wait for the acknowledgement.

        Raises `MessageTooLarge`, sending nothing, for a body over `MAX_MESSAGE_BYTES` or a
        message over the server's max payload (which would make the server drop us), and
        `PermissionDenied` as soon as the server reports that this client may not publish
        on `subject` (instead of waiting out the acknowledgement timeout). A harness secret
        in the body or a header is redacted first (`SecretRefused` when that breaks the body).
        """
        data, headers = self._redacted(subject, data, headers)
        self._check_size(subject, data, headers)
        refusal: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._refusals.setdefault(subject, set()).add(refusal)
        stored = asyncio.ensure_future(
            self.js.publish(
                subject, data, timeout=self._publish_timeout, headers=dict(headers or {})
            )
        )
        try:
            either: set[asyncio.Future[Any]] = {stored, refusal}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if refusal.done() and not stored.done():
                raise PermissionDenied(
                    f"publish to {subject!r} refused: bus user {self.user!r} "
                    "may not publish on that subject"
                )
            ack = stored.result()
        except (nats.errors.Error, TimeoutError) as err:
            raise PublishError(f"publish to {subject!r} was not acknowledged: {err!r}") from err
        finally:
            self._forget_refusal(subject, refusal)
            if not stored.done():
                stored.cancel()
                await asyncio.gather(stored, return_exceptions=True)
        return Published(stream=ack.stream, seq=ack.seq, duplicate=bool(ack.duplicate))

    def _redacted(
        self, subject: str, data: bytes, headers: Mapping[str, str] | None
    ) -> tuple[bytes, Mapping[str, str] | None]:
        """`data` and `headers` without a harness secret (logged, never the value)."""
        data, count = self.secrets.redact_payload(subject, data)
        if headers and self.secrets.found_in("\n".join(headers.values()).encode()):
            cleaned = {key: self.secrets.redact_text(value) for key, value in headers.items()}
            headers = {key: value for key, (value, _) in cleaned.items()}
            count += sum(found for _, found in cleaned.values())
        if count:
            log.warning("harness secret redacted", subject=subject, user=self.user, count=count)
        return data, headers

    def _forget_refusal(self, subject: str, refusal: asyncio.Future[None]) -> None:
        waiting = self._refusals.get(subject)
        if waiting is not None:
            waiting.discard(refusal)
            if not waiting:
                del self._refusals[subject]

    def _refused(self, subject: str) -> None:
        for waiting, refusals in self._refusals.items():
            if waiting.lower() != subject.lower():
                continue
            for refusal in refusals:
                if not refusal.done():
                    refusal.set_result(None)

    def _check_size(self, subject: str, data: bytes, headers: Mapping[str, str] | None) -> None:
        if len(data) > MAX_MESSAGE_BYTES:
            raise MessageTooLarge(
                f"publish to {subject!r}: message is {len(data)} bytes, over the limit of "
                f"{MAX_MESSAGE_BYTES} bytes (MAX_MESSAGE_BYTES)"
            )
        size = wire_size(data, headers)
        if size > self.nc.max_payload:
            raise MessageTooLarge(
                f"publish to {subject!r}: message with headers is {size} bytes, over the "
                f"server's max payload of {self.nc.max_payload} bytes"
            )

    async def command(
        self,
        subject: str,
        model: BaseModel | bytes,
        timeout: float = 5.0,  # noqa: ASYNC109 (the documented command API)
        *,
        msg_id: str | None = None,
    ) -> bytes:
        """Store a command on `subject` and return the answer a consumer sends back.

        The command goes through JetStream (so it is captured like a plain
        `nats pub`), carrying a fresh inbox in the `Sreforge-Reply-To` header;
        the consumer answers with `Bus.reply`. Raises `ReplyTimeout` if no answer
        arrives within `timeout` seconds.
        """
        data = model if isinstance(model, bytes) else model.model_dump_json().encode()
        if msg_id is None and isinstance(model, Event):
            msg_id = model.event_id
        inbox = self.nc.new_inbox()
        headers = {HEADER_REPLY_TO: inbox}
        if msg_id is not None:
            headers[HEADER_MSG_ID] = msg_id
        sub = await self.nc.subscribe(inbox, max_msgs=1)
        try:
            await self.publish_raw(subject, data, headers)
            answer = await sub.next_msg(timeout=timeout)
        except nats.errors.TimeoutError as err:
            raise ReplyTimeout(f"no reply to command on {subject!r} within {timeout}s") from err
        finally:
            await _quietly_unsubscribe(sub)
        return answer.data

    async def reply(self, delivery: Delivery, model: BaseModel | bytes) -> None:
        """Answer a command received through a worker; a no-op when nobody asked for a reply.

        Only an inbox (`_INBOX.…`, what `command` sends) is answered: the header is the
        sender's, and a reply to `sreforge.run.<id>.RunFailed` would store a forged message
        on another run's subject with this service's permissions.
        """
        if delivery.reply_to is None:
            return
        if not delivery.reply_to.startswith(INBOX_PREFIX):
            log.warning("reply refused: not an inbox", reply_to=delivery.reply_to[:200])
            return
        data = model if isinstance(model, bytes) else model.model_dump_json().encode()
        data, _ = self._redacted(delivery.reply_to, data, None)
        await self.nc.publish(delivery.reply_to, data)
        await self.nc.flush()

    def _register(self, worker: _Stoppable) -> None:
        self._workers.add(worker)

    def _unregister(self, worker: _Stoppable) -> None:
        self._workers.discard(worker)

    def _wake_workers(self) -> None:
        for worker in list(self._workers):
            worker.wake()

    async def close(self) -> None:
        """Stop every worker's fetch loop (letting in-flight handlers finish), then drain."""
        self._closing = True
        await asyncio.gather(*(worker.stop() for worker in list(self._workers)))
        if self.nc.is_closed:
            return
        try:
            await self.nc.drain()
        except (nats.errors.ConnectionReconnectingError, nats.errors.ConnectionClosedError):
            await self.nc.close()


def wire_size(data: bytes, headers: Mapping[str, str] | None = None) -> int:
    """The bytes a message takes against the server's max payload: body plus header block."""
    if not headers:
        return len(data)
    block = sum(len(key.encode()) + len(value.encode()) + 4 for key, value in headers.items())
    return len(data) + len(b"NATS/1.0\r\n") + block + 2


async def _quietly_unsubscribe(sub: Subscription) -> None:
    # The connection may be gone, or the single reply already auto-unsubscribed.
    with contextlib.suppress(nats.errors.Error):
        await sub.unsubscribe()


def redact_url(url: str) -> str:
    """`url` fit for logs and errors: a password (`nats://u:p@h`) or token (`nats://t@h`)
    embedded in it is masked."""

    def mask(found: re.Match[str]) -> str:
        user, colon, _ = found.group(1).partition(":")
        return f"//{user}:***@" if colon else "//***@"

    return _URL_USERINFO.sub(mask, url)


async def connect(
    url: str,
    *,
    name: str,
    credential: Credential | None = None,
    secrets: HarnessSecrets | None = None,
    connect_timeout: float = 10.0,
    reconnect_time_wait: float = 0.5,
) -> Bus:
    """Connect to NATS at `url` as client `name` and return a `Bus`.

    With `credential` the client logs in as its user (and uses that user's reply-inbox
    prefix, the only inboxes its permissions let it read). Once connected the client
    reconnects forever; the first connection must succeed within `connect_timeout`
    seconds or `ConnectError` is raised (also when the server refuses the credential).
    `secrets` (the engine home's, `HarnessSecrets.of_home`) are redacted from everything
    published; without it only what this process registered with `guard_secret` is.
    `url` may list several servers of one cluster, comma-separated: the client fails over
    between them.
    """
    servers: str | list[str] = [u.strip() for u in url.split(",")] if "," in url else url
    nc = Client()
    holder: list[Bus] = []
    user = credential.user if credential is not None else None
    shown = redact_url(url)

    async def on_disconnected() -> None:
        if not (holder and holder[0]._closing):
            log.warning("nats disconnected", client=name, url=shown)

    async def on_reconnected() -> None:
        log.info("nats reconnected", client=name, url=shown)
        if holder:
            holder[0]._wake_workers()

    async def on_closed() -> None:
        log.info("nats connection closed", client=name)
        if holder:
            holder[0]._wake_workers()  # their loops see the closed connection and end

    login_refused = asyncio.Event()  # retrying a refused login until the deadline is pointless

    async def on_error(err: Exception) -> None:
        if _LOGIN_REFUSED in str(err).lower():
            login_refused.set()
            if holder:  # a reconnect refused: the server's users changed under us
                log.warning("nats refused the login", client=name, user=user, url=shown)
            return
        violation = _VIOLATION.search(str(err))
        if violation is None:
            log.debug("nats client error", client=name, error=repr(err))
            return
        kind, subject = violation.groups()
        log.warning("nats permission violation", client=name, user=user, kind=kind, subject=subject)
        if holder and kind.lower() == "publish":
            holder[0]._refused(subject)

    attempt = asyncio.ensure_future(
        nc.connect(
            servers,
            name=name,
            max_reconnect_attempts=-1,
            reconnect_time_wait=reconnect_time_wait,  # type: ignore[arg-type]  # float works
            disconnected_cb=on_disconnected,
            reconnected_cb=on_reconnected,
            closed_cb=on_closed,
            error_cb=on_error,
            user=user,
            password=credential.password if credential is not None else None,
            inbox_prefix=credential.inbox_prefix if credential is not None else "_INBOX",
        )
    )
    refused = asyncio.ensure_future(login_refused.wait())
    try:
        either: set[asyncio.Future[Any]] = {attempt, refused}
        await asyncio.wait(either, timeout=connect_timeout, return_when=asyncio.FIRST_COMPLETED)
        if not attempt.done():
            raise TimeoutError
        attempt.result()
    except (TimeoutError, OSError, nats.errors.Error) as err:
        attempt.cancel()
        await asyncio.gather(attempt, return_exceptions=True)
        await nc.close()
        who = "without a credential" if user is None else f"as bus user {user!r}"
        why = "refused the login" if login_refused.is_set() else f"not reachable ({err!r})"
        raise ConnectError(
            f"cannot connect to NATS at {shown} {who} within {connect_timeout}s: {why}"
        ) from err
    finally:
        refused.cancel()
    bus = Bus(nc, user=user, secrets=secrets)
    holder.append(bus)
    log.info("nats connected", client=name, user=user, url=shown)
    return bus
