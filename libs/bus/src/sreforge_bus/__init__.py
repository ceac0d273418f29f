"""A thin typed kit over NATS JetStream: connect, bootstrap, publish, workers, run store.

`sreforge_bus.embedded` starts the pinned `nats-server` for tests and the embedded default.
"""

from sreforge_bus._bootstrap import ConsumerSpec, bootstrap
from sreforge_bus._connection import Bus, Published, connect
from sreforge_bus._errors import (
    BootstrapError,
    BusError,
    CasConflict,
    ConnectError,
    MessageTooLarge,
    NatsServerError,
    PublishError,
    ReplyTimeout,
    RunStoreError,
)
from sreforge_bus._follow import RawMessage, follow
from sreforge_bus._names import (
    DEADLETTER_PREFIX,
    HEADER_DEADLETTER_BODY_DROPPED,
    HEADER_DEADLETTER_DURABLE,
    HEADER_DEADLETTER_ERROR,
    HEADER_DEADLETTER_NUM_DELIVERED,
    HEADER_DEADLETTER_RUN_ID,
    HEADER_DEADLETTER_SUBJECT,
    HEADER_MSG_ID,
    HEADER_REPLY_TO,
    RUNS_BUCKET,
    STREAM,
    STREAM_SUBJECTS,
    deadletter_subject,
)
from sreforge_bus._runs import Entry, RunStore
from sreforge_bus._service import Context, Route, Service, log_only
from sreforge_bus._worker import Delivery, Worker, run_of_subject

__all__ = [
    "DEADLETTER_PREFIX",
    "HEADER_DEADLETTER_BODY_DROPPED",
    "HEADER_DEADLETTER_DURABLE",
    "HEADER_DEADLETTER_ERROR",
    "HEADER_DEADLETTER_NUM_DELIVERED",
    "HEADER_DEADLETTER_RUN_ID",
    "HEADER_DEADLETTER_SUBJECT",
    "HEADER_MSG_ID",
    "HEADER_REPLY_TO",
    "RUNS_BUCKET",
    "STREAM",
    "STREAM_SUBJECTS",
    "BootstrapError",
    "Bus",
    "BusError",
    "CasConflict",
    "ConnectError",
    "ConsumerSpec",
    "Context",
    "Delivery",
    "Entry",
    "MessageTooLarge",
    "NatsServerError",
    "PublishError",
    "Published",
    "RawMessage",
    "ReplyTimeout",
    "Route",
    "RunStore",
    "RunStoreError",
    "Service",
    "Worker",
    "bootstrap",
    "connect",
    "deadletter_subject",
    "follow",
    "log_only",
    "run_of_subject",
]
