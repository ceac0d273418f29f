"""The SREForge context service: the neutral on-call page and run contract, leak-checked.

On RunTriggered it builds the `RunContract` and the on-call page for the run, runs
the contamination guard (`guard_scan`) over the page, the agent's workspace and
the stack's endpoints, and publishes BriefReady, or RunFailed(aborted) naming what
leaked and where. The gatherers (`workspace_surfaces`, `endpoint_surfaces`) are
reusable on any agent-visible surface; the scanner (`Tells`, `find_leaks`) and the
sandbox's (`SANDBOX_PROBE`, `sandbox_surfaces`) live in `sreforge_contracts`, shared
with the runner, and are re-exported here; `sreforge guard` runs them all against a
stack it brings up.
"""

from sreforge_contracts import (
    GUARD_REASON_PREFIX,
    HARNESS_WORDS,
    SANDBOX_PROBE,
    Leak,
    SandboxProbeFailed,
    SandboxView,
    Surface,
    Tells,
    describe_leaks,
    find_leaks,
    parse_sandbox_probe,
    sandbox_surfaces,
)

from sreforge_context._adapter import SERVICE, build_service
from sreforge_context._brief import BriefHandler, brief_for, check_brief
from sreforge_context._endpoints import (
    ALERTMANAGER_PATHS,
    APP_PATHS,
    PROMETHEUS_PATHS,
    EndpointReply,
    Fetch,
    endpoint_surfaces,
    http_fetch,
)
from sreforge_context._errors import (
    ContextError,
    RunStateMissing,
    ScenarioInvalid,
    ScenarioNotFound,
    WorkspaceUnreadable,
)
from sreforge_context._guard import GuardScan, guard_scan
from sreforge_context._page import agent_services, build_contract, render_page
from sreforge_context._scenarios import find_scenario
from sreforge_context._settings import ContextSettings
from sreforge_context._workspace import workspace_surfaces

__all__ = [
    "ALERTMANAGER_PATHS",
    "APP_PATHS",
    "GUARD_REASON_PREFIX",
    "HARNESS_WORDS",
    "PROMETHEUS_PATHS",
    "SANDBOX_PROBE",
    "SERVICE",
    "BriefHandler",
    "ContextError",
    "ContextSettings",
    "EndpointReply",
    "Fetch",
    "GuardScan",
    "Leak",
    "RunStateMissing",
    "SandboxProbeFailed",
    "SandboxView",
    "ScenarioInvalid",
    "ScenarioNotFound",
    "Surface",
    "Tells",
    "WorkspaceUnreadable",
    "agent_services",
    "brief_for",
    "build_contract",
    "build_service",
    "check_brief",
    "describe_leaks",
    "endpoint_surfaces",
    "find_leaks",
    "find_scenario",
    "guard_scan",
    "http_fetch",
    "parse_sandbox_probe",
    "render_page",
    "sandbox_surfaces",
    "workspace_surfaces",
]
