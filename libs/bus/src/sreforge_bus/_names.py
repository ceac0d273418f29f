"""Names the bus owns: the stream, the KV bucket, the dead-letter subjects and header keys."""

from __future__ import annotations

__all__ = [
    "DEADLETTER_PREFIX",
    "DUPLICATE_WINDOW_S",
    "HEADER_DEADLETTER_BODY_DROPPED",
    "HEADER_DEADLETTER_DURABLE",
    "HEADER_DEADLETTER_ERROR",
    "HEADER_DEADLETTER_NUM_DELIVERED",
    "HEADER_DEADLETTER_RUN_ID",
    "HEADER_DEADLETTER_SEQ",
    "HEADER_DEADLETTER_SUBJECT",
    "HEADER_MSG_ID",
    "HEADER_REPLY_TO",
    "INBOX_PREFIX",
    "RUNS_BUCKET",
    "STREAM",
    "STREAM_SUBJECTS",
    "deadletter_subject",
]

STREAM = "SREFORGE"
STREAM_SUBJECTS = ("sreforge.>",)
DUPLICATE_WINDOW_S = 120.0
RUNS_BUCKET = "sreforge-runs"
DEADLETTER_PREFIX = "sreforge.deadletter."

HEADER_MSG_ID = "Nats-Msg-Id"
HEADER_REPLY_TO = "Sreforge-Reply-To"
INBOX_PREFIX = "_INBOX."
"""Where command replies go (nats-py's default inbox prefix); no other reply-to is answered."""
HEADER_DEADLETTER_SUBJECT = "Sreforge-Original-Subject"
HEADER_DEADLETTER_ERROR = "Sreforge-Error"
HEADER_DEADLETTER_NUM_DELIVERED = "Sreforge-Num-Delivered"
HEADER_DEADLETTER_SEQ = "Sreforge-Stream-Seq"
HEADER_DEADLETTER_DURABLE = "Sreforge-Durable"
HEADER_DEADLETTER_BODY_DROPPED = "Sreforge-Body-Dropped"
"""Set (to the original size in bytes) when the dead letter left the original body out."""
HEADER_DEADLETTER_RUN_ID = "Sreforge-Run-Id"
"""The run the dead-lettered message belongs to, when its subject names one."""


def deadletter_subject(durable: str) -> str:
    """Return the subject a consumer's poison messages are published on."""
    return f"{DEADLETTER_PREFIX}{durable}"
