"""The SREForge runner service: the agent gateway (SPEC §8, harness contract 1.0).

On BriefReady it resolves the run's agent profile from the catalog (`agents/*.toml`)
and its readiness (a blocked profile is refused before any sandbox exists), claims
the run, and drives the profile's rein through the gateway in a `host-open`,
`host-sandboxed` (bubblewrap), `remote` (ssh) or, on the compose topology, `in-box`
(a container on the run's agent network, `_box.py`) sandbox with separate
session-start, idle and total budgets. The agent gets a `submit` command; the
runner publishes Submitted with the diff against the base commit, whether the
agent submitted, its RCA and publishable `ExecutionEvidence`. Before a confined
agent starts, the contamination guard probes its sandbox from inside (`guard_sandbox`)
and a harness tell there fails the run `aborted` instead.
"""

from sreforge_runner._adapter import CONSUMER, SERVICE, build_service
from sreforge_runner._agent_sandbox import SESSION_MARKER, AgentSandbox
from sreforge_runner._box import BoxSandbox
from sreforge_runner._catalog import catalog_name, find_profile, load_catalog, load_profile
from sreforge_runner._cli_agent import SUBMIT_ON_EXIT, CliAgentRein, build_prompt
from sreforge_runner._diff import head_commit, workspace_diff
from sreforge_runner._errors import (
    ContaminationFound,
    DiffError,
    ProfileError,
    ProfileRefused,
    RunnerError,
    SandboxError,
    SessionError,
)
from sreforge_runner._gateway import GatewayRun, drive, refusal, resolve
from sreforge_runner._guard import PROBE_PYTHON, guard_sandbox, probe_sandbox
from sreforge_runner._handoff import RunnerHandler, claim_key
from sreforge_runner._kept import KeptFile, kept_files, seal_logs
from sreforge_runner._openai_rein import MODEL_CALLS_FILE, TOOLS, OpenAIRein
from sreforge_runner._placement import agent_page, place_session
from sreforge_runner._presets import PROXY_PRESETS, ProxyPlan, proxy_plan
from sreforge_runner._process import Budgets, ProcessOutcome, kill_group, run_in_group
from sreforge_runner._proxy import PROXY_TOKEN_NAME, ModelProxy, ProxyFlavor, usage_of
from sreforge_runner._readiness import (
    ProbeCheck,
    ProbeRecord,
    check_profile,
    effective_readiness,
    stored_probe,
)
from sreforge_runner._reins import (
    CommandRein,
    Dispatch,
    NoopRein,
    Rein,
    patch_rein,
    resolve_rein,
    script_rein,
)
from sreforge_runner._remote import RemoteSandbox
from sreforge_runner._sandbox import CONFINEMENT, HostSandbox
from sreforge_runner._sessions import NATIVE_DIR, SESSION_FILES, collect_native
from sreforge_runner._settings import RunnerSettings
from sreforge_runner._submit import (
    RCA_FILE,
    SENTINEL_DIR,
    SENTINEL_FILE,
    Sentinel,
    exclude_sentinel_dir,
    install_submit,
    read_sentinel,
)
from sreforge_runner._transcript import (
    TRANSCRIPT_FILE,
    redact,
    route_secrets,
    scrub_file,
    write_transcript,
)

__all__ = [
    "CONFINEMENT",
    "CONSUMER",
    "MODEL_CALLS_FILE",
    "NATIVE_DIR",
    "PROBE_PYTHON",
    "PROXY_PRESETS",
    "PROXY_TOKEN_NAME",
    "RCA_FILE",
    "SENTINEL_DIR",
    "SENTINEL_FILE",
    "SERVICE",
    "SESSION_FILES",
    "SESSION_MARKER",
    "SUBMIT_ON_EXIT",
    "TOOLS",
    "TRANSCRIPT_FILE",
    "AgentSandbox",
    "BoxSandbox",
    "Budgets",
    "CliAgentRein",
    "CommandRein",
    "ContaminationFound",
    "DiffError",
    "Dispatch",
    "GatewayRun",
    "HostSandbox",
    "KeptFile",
    "ModelProxy",
    "NoopRein",
    "OpenAIRein",
    "ProbeCheck",
    "ProbeRecord",
    "ProcessOutcome",
    "ProfileError",
    "ProfileRefused",
    "ProxyFlavor",
    "ProxyPlan",
    "Rein",
    "RemoteSandbox",
    "RunnerError",
    "RunnerHandler",
    "RunnerSettings",
    "SandboxError",
    "Sentinel",
    "SessionError",
    "agent_page",
    "build_prompt",
    "build_service",
    "catalog_name",
    "check_profile",
    "claim_key",
    "collect_native",
    "drive",
    "effective_readiness",
    "exclude_sentinel_dir",
    "find_profile",
    "guard_sandbox",
    "head_commit",
    "install_submit",
    "kept_files",
    "kill_group",
    "load_catalog",
    "load_profile",
    "patch_rein",
    "place_session",
    "probe_sandbox",
    "proxy_plan",
    "read_sentinel",
    "redact",
    "refusal",
    "resolve",
    "resolve_rein",
    "route_secrets",
    "run_in_group",
    "script_rein",
    "scrub_file",
    "seal_logs",
    "stored_probe",
    "usage_of",
    "workspace_diff",
    "write_transcript",
]
