"""The SREForge runner service: the agent gateway's first shape (SPEC §8).

On BriefReady it claims the run, drives the run's agent profile through a `Rein`
in a `host-open` sandbox (own process group, scrubbed env, fresh HOME, cwd = the
workspace, a wall budget that kills the whole group), gives the agent a `submit`
command, then publishes Submitted with the diff against the base commit, whether
the agent submitted, its RCA and secret-free evidence.
"""

from sreforge_runner._adapter import CONSUMER, SERVICE, build_service
from sreforge_runner._diff import head_commit, workspace_diff
from sreforge_runner._errors import (
    DiffError,
    ProfileError,
    RunnerError,
    SandboxError,
)
from sreforge_runner._gateway import GatewayResult, Stage, StageFailure, drive
from sreforge_runner._handoff import RunnerHandler, claim_key
from sreforge_runner._process import ProcessOutcome, kill_group, run_in_group
from sreforge_runner._reins import (
    CommandRein,
    Dispatch,
    NoopRein,
    Rein,
    patch_rein,
    resolve_rein,
    script_rein,
)
from sreforge_runner._sandbox import CONFINEMENT, HostSandbox
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

__all__ = [
    "CONFINEMENT",
    "CONSUMER",
    "RCA_FILE",
    "SENTINEL_DIR",
    "SENTINEL_FILE",
    "SERVICE",
    "CommandRein",
    "DiffError",
    "Dispatch",
    "GatewayResult",
    "HostSandbox",
    "NoopRein",
    "ProcessOutcome",
    "ProfileError",
    "Rein",
    "RunnerError",
    "RunnerHandler",
    "RunnerSettings",
    "SandboxError",
    "Sentinel",
    "Stage",
    "StageFailure",
    "build_service",
    "claim_key",
    "drive",
    "exclude_sentinel_dir",
    "head_commit",
    "install_submit",
    "kill_group",
    "patch_rein",
    "read_sentinel",
    "resolve_rein",
    "run_in_group",
    "script_rein",
    "workspace_diff",
]
