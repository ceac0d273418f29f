"""The one exception tree of the bus kit."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "BootstrapError",
    "BusError",
    "CasConflict",
    "ConnectError",
    "CredentialError",
    "MessageTooLarge",
    "NatsServerError",
    "PermissionDenied",
    "PublishError",
    "ReplyTimeout",
    "RunStateUnreadable",
    "RunStoreError",
    "SecretRefused",
    "ServiceError",
]


class BusError(Exception):
    """Base of every error the bus kit raises; the message names the subject, key or server."""


class ConnectError(BusError):
    """The NATS server could not be reached within the connect deadline."""


class CredentialError(BusError):
    """A bus credential file is missing, unreadable or names the wrong user."""


class BootstrapError(BusError):
    """The stream, the KV bucket or a durable consumer could not be created or updated."""


class PublishError(BusError):
    """JetStream did not acknowledge a publish (no stream, timeout, or an API error)."""


class PermissionDenied(PublishError):
    """The server refused a publish: this client's credential may not publish on the subject."""


class MessageTooLarge(PublishError):
    """A message was refused before it was sent: it is over the stated limit or the server's.

    Sending it anyway would not just fail: a NATS server closes the connection of a client
    that exceeds its max payload, which would wedge every worker on that connection.
    """


class SecretRefused(PublishError):
    """A message (or a model about to be recorded) carried a harness secret that could not
    be redacted without breaking it (invalid JSON, an invalid event): refused, never sent."""


class ReplyTimeout(BusError):
    """A command was stored but nobody answered on its reply inbox before the deadline."""


class RunStoreError(BusError):
    """A `sreforge-runs` KV operation failed (bad key, missing bucket, server error)."""


class RunStateUnreadable(BusError, ValueError):
    """A run's state in KV is not a valid `RunState`.

    Also a `ValueError`: like any other invalid value read from outside, callers that
    fall back on bad data catch it as one.
    """


class CasConflict(RunStoreError):
    """A compare-and-swap update named a stale revision: someone else changed the key first."""

    def __init__(self, key: str, revision: int) -> None:
        super().__init__(f"run store key {key!r} changed since revision {revision}")
        self.key = key
        self.revision = revision


class ServiceError(BusError):
    """A service could not go on serving: one of its background tasks stopped early."""


class NatsServerError(BusError):
    """The embedded `nats-server` could not be found, started or made ready.

    `log_file` is the server's log (kept for reading) when it got as far as starting.
    """

    def __init__(self, message: str, log_file: Path | None = None) -> None:
        super().__init__(message)
        self.log_file = log_file
