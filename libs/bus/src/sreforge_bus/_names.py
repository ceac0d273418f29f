"""Every name on the bus in one place: the stream, the KV bucket and its keys, the
dead-letter subjects and the header keys.

The stream, bucket and dead-letter prefix are the contracts' vocabulary
(`sreforge_contracts`), re-exported here so there is one definition of each.

Run-store keys (KV `sreforge-runs`): the bare run id holds the run's state (only the
correlator writes it); every other key starts with its writer's prefix (`runner.`,
`deployer.`, `oracle.`, `recorded.`; the correlator's `route.` and `start.`), which is
also the prefix the writer's bus permission allows (`SERVICE_KEYS`). A key that marks
something done once per run is `once_key(owner, run_id)` = `<owner>.<run_id>`.

Worker hosts (scale-out): run requests reach them through the work-queue stream
`SREFORGE_WORK` (sourced from `SREFORGE`'s RunRequested) and its one shared durable
`workers-runs`; a host's lease is `deployer.host.<host>`, a run's owner
`deployer.owner.<run_id>` (the deployer writes both), and a host's own copy of a pinned
service's durable is `<durable>-<host>`.
"""

from __future__ import annotations

from sreforge_contracts import DEADLETTER_PREFIX, RUNS_BUCKET, STREAM_SUBJECTS
from sreforge_contracts import STREAM_NAME as STREAM

__all__ = [
    "DEADLETTER_PREFIX",
    "DEPLOYER_KEYS",
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
    "HOST_LEASES",
    "HOST_PATTERN",
    "INBOX_PREFIX",
    "ORACLE_HANDOFF",
    "ORACLE_KEYS",
    "ORACLE_SAMPLES",
    "ORACLE_SCORED",
    "RECORDED",
    "ROUTE_KEYS",
    "RUNNER_CLAIM",
    "RUNS_BUCKET",
    "RUN_OWNERS",
    "START_KEYS",
    "STREAM",
    "STREAM_SUBJECTS",
    "WORK_DURABLE",
    "WORK_SOURCE_SUBJECT",
    "WORK_STREAM",
    "deadletter_subject",
    "deployer_stage",
    "host_durable",
    "host_lease_key",
    "once_key",
    "oracle_samples_key",
    "oracle_samples_keys",
    "route_key",
    "run_owner_key",
    "run_state_key",
    "start_key",
    "stream_of",
]

DUPLICATE_WINDOW_S = 120.0

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

ROUTE_KEYS = "route"
"""The correlator's `route.<alert_route>` → the run id that owns the route."""
START_KEYS = "start"
"""The correlator's `start.<message>` → the StartPlan of one stored `run.start`."""
RUNNER_CLAIM = "runner"
"""`runner.<run_id>`: the runner's claim of the run's agent session."""
DEPLOYER_KEYS = "deployer"
"""`deployer.<stage>.<run_id>`: the deployer's claim of one stage and the events it stored."""
ORACLE_KEYS = "oracle"
"""Every oracle key starts `oracle.` (its write permission)."""
ORACLE_HANDOFF = f"{ORACLE_KEYS}.handoff"
"""`oracle.handoff.<run_id>`: the alerts firing when the agent got its page."""
ORACLE_SAMPLES = f"{ORACLE_KEYS}.samples"
"""`oracle.samples.<run_id>.<n>`: the grading samples, in chunks."""
ORACLE_SCORED = f"{ORACLE_KEYS}.scored"
"""`oracle.scored.<run_id>`: the run's one outcome and whether it was published."""
RECORDED = "recorded"
"""`recorded.<run_id>`: the recorder announced the run's record (`Recorded`)."""
HOST_LEASES = f"{DEPLOYER_KEYS}.host"
"""`deployer.host.<host>`: a worker host's lease (who holds it, until when)."""
RUN_OWNERS = f"{DEPLOYER_KEYS}.owner"
"""`deployer.owner.<run_id>`: the worker host (and its lease) that owns the run's stack."""

WORK_STREAM = "SREFORGE_WORK"
"""The work queue of run requests (WorkQueue retention: a request is gone once acked)."""
WORK_SOURCE_SUBJECT = "sreforge.run.*.RunRequested"
"""What `SREFORGE_WORK` sources from stream `SREFORGE`."""
WORK_DURABLE = "workers-runs"
"""The one durable every worker host pulls run requests from."""
HOST_PATTERN = r"^[a-z0-9][a-z0-9-]{0,23}$"
"""A worker host's name: it ends durable names and run-store keys."""


def deadletter_subject(durable: str) -> str:
    """Return the subject a consumer's poison messages are published on."""
    return f"{DEADLETTER_PREFIX}{durable}"


def run_state_key(run_id: str) -> str:
    """The key of a run's state: the bare run id (run ids have no dot; every other key has)."""
    return run_id


def once_key(owner: str, run_id: str) -> str:
    """The key that marks `owner`'s once-per-run work on `run_id` (`runner.<run_id>`)."""
    return f"{owner}.{run_id}"


def deployer_stage(stage: str) -> str:
    """The once-per-run owner of one deployer stage (`deployer.stack`, `deployer.ci`, ...)."""
    return f"{DEPLOYER_KEYS}.{stage}"


def route_key(route: str) -> str:
    """The key naming the run that owns alert route `route`."""
    return f"{ROUTE_KEYS}.{route}"


def start_key(message: str) -> str:
    """The key of one stored `run.start`'s plan (`message` names it across redeliveries)."""
    return f"{START_KEYS}.{message}"


def oracle_samples_key(run_id: str, n: int) -> str:
    """The key of the `n`-th chunk of a run's grading samples."""
    return f"{ORACLE_SAMPLES}.{run_id}.{n}"


def oracle_samples_keys(run_id: str) -> str:
    """A key filter matching every sample chunk of one run (for `RunStore.keys`)."""
    return f"{ORACLE_SAMPLES}.{run_id}.*"


def host_lease_key(host: str) -> str:
    """The key of worker host `host`'s lease."""
    return f"{HOST_LEASES}.{host}"


def run_owner_key(run_id: str) -> str:
    """The key naming the worker host that owns run `run_id`."""
    return f"{RUN_OWNERS}.{run_id}"


def host_durable(durable: str, host: str) -> str:
    """Worker host `host`'s own copy of a pinned service's durable consumer."""
    return f"{durable}-{host}"


def stream_of(durable: str) -> str:
    """The stream a durable consumer reads: the work queue's for `workers-runs`."""
    return WORK_STREAM if durable == WORK_DURABLE else STREAM
