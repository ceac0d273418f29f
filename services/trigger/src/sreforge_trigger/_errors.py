"""The one exception tree of the trigger service."""

from __future__ import annotations

from pydantic import ValidationError
from sreforge_contracts import ContractError

__all__ = ["BodyTooLarge", "PayloadError", "PublishFailed", "TokenError", "TriggerError"]


class TriggerError(Exception):
    """Base of every error the trigger service raises; the message names what is at fault."""


class PayloadError(TriggerError):
    """An inbound body (webhook, feed signal, poll answer) did not match its model.

    `field` is the dotted path of the first offending field (`""` for malformed JSON);
    `malformed` is true when the body was not JSON at all.
    """

    def __init__(self, message: str, *, field: str = "", malformed: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.malformed = malformed

    @classmethod
    def from_validation(cls, error: ValidationError, source: str) -> PayloadError:
        """One line per problem, `source: a.b: what went wrong`, as the contracts phrase it."""
        described = ContractError.from_validation(error, source)
        malformed = any(detail["type"] == "json_invalid" for detail in error.errors())
        return cls(str(described), field=described.field, malformed=malformed)


class BodyTooLarge(TriggerError):
    """A request body over the configured cap (`SREFORGE_TRIGGER_MAX_BODY_BYTES`): 413."""

    def __init__(self, limit: int, seen: str) -> None:
        super().__init__(
            f"request body too large: {seen}, over the limit of {limit} bytes "
            "(SREFORGE_TRIGGER_MAX_BODY_BYTES)"
        )
        self.limit = limit


class PublishFailed(TriggerError):
    """An event was not acknowledged by JetStream in time; the sender should retry."""


class TokenError(TriggerError):
    """No usable webhook token is configured (neither a token nor a readable token file)."""
