"""A thin typed kit over NATS JetStream: connect, bootstrap, publish, workers, run store.

`sreforge_bus.embedded` starts the pinned `nats-server` for tests and the embedded default.
"""

from sreforge_bus._bootstrap import ConsumerSpec, bootstrap
from sreforge_bus._connection import Bus, Published, connect, redact_url
from sreforge_bus._credentials import (
    BusCredentials,
    Credential,
    ensure_credentials,
    load_credentials,
)
from sreforge_bus._errors import (
    BootstrapError,
    BusError,
    CasConflict,
    ConnectError,
    CredentialError,
    MessageTooLarge,
    NatsServerError,
    PermissionDenied,
    PublishError,
    ReplyTimeout,
    RunStoreError,
)
from sreforge_bus._follow import RawMessage, follow, read_stored
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
from sreforge_bus._permissions import (
    BOOTSTRAP_USER,
    OPERATOR_USER,
    SERVICE_EVENTS,
    SERVICE_KEYS,
    Permissions,
    operator_permissions,
    service_permissions,
)
from sreforge_bus._runs import Entry, RunStore
from sreforge_bus._service import Context, Route, Service, log_only
from sreforge_bus._worker import Delivery, Worker, misplaced, run_of_subject

__all__ = [
    "BOOTSTRAP_USER",
    "DEADLETTER_PREFIX",
    "HEADER_DEADLETTER_BODY_DROPPED",
    "HEADER_DEADLETTER_DURABLE",
    "HEADER_DEADLETTER_ERROR",
    "HEADER_DEADLETTER_NUM_DELIVERED",
    "HEADER_DEADLETTER_RUN_ID",
    "HEADER_DEADLETTER_SUBJECT",
    "HEADER_MSG_ID",
    "HEADER_REPLY_TO",
    "OPERATOR_USER",
    "RUNS_BUCKET",
    "SERVICE_EVENTS",
    "SERVICE_KEYS",
    "STREAM",
    "STREAM_SUBJECTS",
    "BootstrapError",
    "Bus",
    "BusCredentials",
    "BusError",
    "CasConflict",
    "ConnectError",
    "ConsumerSpec",
    "Context",
    "Credential",
    "CredentialError",
    "Delivery",
    "Entry",
    "MessageTooLarge",
    "NatsServerError",
    "PermissionDenied",
    "Permissions",
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
    "ensure_credentials",
    "follow",
    "load_credentials",
    "log_only",
    "misplaced",
    "operator_permissions",
    "read_stored",
    "redact_url",
    "run_of_subject",
    "service_permissions",
]
