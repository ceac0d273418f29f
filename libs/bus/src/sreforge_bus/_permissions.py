"""Who may publish and subscribe to what on the bus: one table, rendered as nats-server rules.

`SERVICE_EVENTS` is the single source of truth for "a service publishes only the events
it owns" (SPEC §3), `SERVICE_KEYS` for the run-store keys each may write. Everything else
a service gets is what a JetStream client needs: the read-only JetStream API, pulling from
and acking its OWN durable consumers, flow-control replies and its own reply inboxes. Only
the operator tails (creates ephemeral consumers); only `bootstrap` may create, change or
delete streams and durable consumers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sreforge_bus._names import (
    DEADLETTER_PREFIX,
    DEPLOYER_KEYS,
    ORACLE_KEYS,
    RECORDED,
    RUNNER_CLAIM,
    RUNS_BUCKET,
    STREAM,
    WORK_STREAM,
    stream_of,
)

__all__ = [
    "BOOTSTRAP_USER",
    "OPERATOR_USER",
    "SERVICE_EVENTS",
    "SERVICE_KEYS",
    "TAILING_SERVICES",
    "WATCHING_SERVICES",
    "Permissions",
    "bootstrap_permissions",
    "inbox_prefix",
    "operator_permissions",
    "service_permissions",
]

BOOTSTRAP_USER = "bootstrap"
OPERATOR_USER = "operator"

SERVICE_EVENTS: Mapping[str, tuple[str, ...]] = {
    "trigger": ("TriggerFired", "TriggerResolved"),
    "correlator": ("RunRequested", "RunRejected", "RunTriggered", "RunFailed"),
    "context": ("BriefReady", "RunFailed"),
    "runner": ("Submitted", "RunFailed"),
    "deployer": ("StackReady", "FaultArmed", "CiResult", "Deployed", "CleanedUp", "RunFailed"),
    "oracle": ("Scored", "RunFailed"),
    "recorder": ("Recorded",),
}
"""Service → the event types it alone may publish (SPEC §3 event catalog)."""

SERVICE_KEYS: Mapping[str, tuple[str, ...]] = {
    "trigger": (),
    "correlator": (">",),  # run states, `start.*`, `route.*`; it also sweeps others' scratch keys
    "context": (),
    "runner": (f"{RUNNER_CLAIM}.>",),
    "deployer": (f"{DEPLOYER_KEYS}.>",),
    "oracle": (f"{ORACLE_KEYS}.>",),
    "recorder": (f"{RECORDED}.>",),
}
"""Service → the run-store keys it may write (KV subject patterns); everyone may read all.

So no service can forge another's claim or journal (say, an unpublished `oracle.scored.*`
outcome that the oracle would then publish as its own). A new key belongs under its
service's prefix."""

TAILING_SERVICES: frozenset[str] = frozenset()
"""Services that may tail the event stream with `follow` (none: the recorder's backfill
reads stored events with `read_stored`, which needs no consumer)."""

WATCHING_SERVICES: frozenset[str] = frozenset({"recorder"})
"""Services that may watch every `sreforge.>` message with a core subscription (no
consumer, nothing stored): the recorder, for the dashboard's whole-bus stream."""

_TRIGGER_SUBJECTS = {
    "TriggerFired": "sreforge.trigger.fired",
    "TriggerResolved": "sreforge.trigger.resolved",
}
_RUN_START = "sreforge.run.start"
_KV_STREAM = f"KV_{RUNS_BUCKET}"
_REPLY_INBOXES = "_INBOX.>"

# Read-only JetStream API every client uses (stream/consumer info, KV reads).
_JS_READ = (
    "$JS.API.INFO",
    f"$JS.API.STREAM.INFO.{STREAM}",
    f"$JS.API.STREAM.INFO.{_KV_STREAM}",
    f"$JS.API.CONSUMER.INFO.{STREAM}.*",
    f"$JS.API.CONSUMER.INFO.{_KV_STREAM}.*",
    f"$JS.API.STREAM.INFO.{WORK_STREAM}",
    f"$JS.API.CONSUMER.INFO.{WORK_STREAM}.*",
    f"$JS.API.STREAM.MSG.GET.{STREAM}",
    f"$JS.API.STREAM.MSG.GET.{_KV_STREAM}",
    f"$JS.API.DIRECT.GET.{_KV_STREAM}",
    f"$JS.API.DIRECT.GET.{_KV_STREAM}.>",
    f"$JS.API.CONSUMER.CREATE.{_KV_STREAM}",  # key listing; that stream has no durables
    "$JS.FC.>",
)

# Creating a tailing (ephemeral) consumer on the event stream. A create request may also
# carry the name of an existing durable and rewrite it, and no subject rule can tell the
# two apart, so only the clients that tail get it: the operator (and `TAILING_SERVICES`).
_TAIL = (f"$JS.API.CONSUMER.CREATE.{STREAM}",)

_JS_DESTRUCTIVE = (
    "$JS.API.STREAM.CREATE.>",
    "$JS.API.STREAM.UPDATE.>",
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.API.STREAM.MSG.DELETE.>",
    "$JS.API.STREAM.RESTORE.>",
    "$JS.API.STREAM.SNAPSHOT.>",
    "$JS.API.STREAM.PEER.>",
    "$JS.API.STREAM.LEADER.>",
    "$JS.API.CONSUMER.DELETE.>",
    "$JS.API.CONSUMER.DURABLE.>",
    "$JS.API.CONSUMER.CREATE.*.>",
    "$JS.API.CONSUMER.PAUSE.>",
    "$JS.API.CONSUMER.UNPIN.>",
    "$JS.API.META.>",
    "$JS.API.ACCOUNT.>",
    "$JS.API.SERVER.>",
)
"""Denied to every user but `bootstrap`, whatever its allow list says."""


@dataclass(frozen=True, slots=True)
class Permissions:
    """Subject allow and deny lists for one bus user (nats-server `permissions` block)."""

    publish_allow: tuple[str, ...]
    publish_deny: tuple[str, ...] = ()
    subscribe_allow: tuple[str, ...] = (">",)
    subscribe_deny: tuple[str, ...] = ()

    def as_config(self) -> dict[str, dict[str, list[str]]]:
        """The nats-server `permissions` map (allow/deny lists for publish and subscribe)."""
        return {
            "publish": {"allow": list(self.publish_allow), "deny": list(self.publish_deny)},
            "subscribe": {"allow": list(self.subscribe_allow), "deny": list(self.subscribe_deny)},
        }


def inbox_prefix(user: str) -> str:
    """The reply-inbox prefix of `user`'s connections: a service reads only its own replies."""
    return f"_INBOX.{user}"


def event_subjects(event_types: Sequence[str]) -> tuple[str, ...]:
    """The subjects events of `event_types` are published on (any run)."""
    return tuple(_TRIGGER_SUBJECTS.get(kind, f"sreforge.run.*.{kind}") for kind in event_types)


def service_permissions(service: str, durables: Sequence[str] = ()) -> Permissions:
    """What `service` may do: publish its own events, write its own run-store keys, and pull
    from and ack its own `durables`.

    It may dead-letter only its own durables' messages, and it subscribes only to its
    own reply inboxes. The correlator also answers `run.start` on the operator's inboxes.
    """
    if service not in SERVICE_EVENTS:
        known = ", ".join(sorted(SERVICE_EVENTS))
        raise ValueError(f"unknown service {service!r} (known: {known})")
    own: list[str] = list(event_subjects(SERVICE_EVENTS[service]))
    for durable in durables:
        stream = stream_of(durable)
        own += [
            f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
            f"$JS.ACK.{stream}.{durable}.>",
            f"{DEADLETTER_PREFIX}{durable}",
        ]
    if service == "correlator":  # answers `run.start`, which only the operator may send
        own.append(f"{inbox_prefix(OPERATOR_USER)}.>")
    if service in TAILING_SERVICES:
        own += _TAIL
    own += [f"$KV.{RUNS_BUCKET}.{pattern}" for pattern in SERVICE_KEYS.get(service, ())]
    return Permissions(
        publish_allow=(*own, *_JS_READ),
        publish_deny=_JS_DESTRUCTIVE,
        subscribe_allow=(
            f"{inbox_prefix(service)}.>",
            *(("sreforge.>",) if service in WATCHING_SERVICES else ()),
        ),
    )


def operator_permissions() -> Permissions:
    """The operator starts runs and tails the bus; it publishes no run event and no KV write."""
    return Permissions(
        publish_allow=(
            _RUN_START,
            *_JS_READ,
            *_TAIL,
            "$JS.API.STREAM.NAMES",
            "$JS.API.STREAM.LIST",
            f"$JS.API.CONSUMER.NAMES.{STREAM}",
            f"$JS.API.CONSUMER.LIST.{STREAM}",
        ),
        publish_deny=(*_JS_DESTRUCTIVE, "sreforge.run.*.*", "sreforge.trigger.>", "$KV.>"),
        subscribe_allow=("sreforge.>", _REPLY_INBOXES),
    )


def bootstrap_permissions() -> Permissions:
    """The set-up user: creates and updates the stream, the run store and durable consumers."""
    return Permissions(
        publish_allow=("$JS.API.>",),
        subscribe_allow=(_REPLY_INBOXES,),
    )
