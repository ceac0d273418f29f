"""The SREForge context service: the neutral on-call page and run contract, leak-checked.

On RunTriggered it builds the `RunContract` and the on-call page for the run, runs
the contamination guard over the page and the agent's workspace, and publishes
BriefReady, or RunFailed(aborted) naming what leaked and where. The guard
(`find_leaks`, `workspace_surfaces`) is reusable on any agent-visible surface.
"""

from sreforge_context._adapter import SERVICE, build_service
from sreforge_context._brief import BriefHandler, brief_for, check_brief
from sreforge_context._errors import (
    ContextError,
    RunStateMissing,
    ScenarioInvalid,
    ScenarioNotFound,
    WorkspaceUnreadable,
)
from sreforge_context._leak import HARNESS_WORDS, Leak, Surface, Tells, describe_leaks, find_leaks
from sreforge_context._page import agent_services, build_contract, render_page
from sreforge_context._scenarios import find_scenario
from sreforge_context._settings import ContextSettings
from sreforge_context._workspace import workspace_surfaces

__all__ = [
    "HARNESS_WORDS",
    "SERVICE",
    "BriefHandler",
    "ContextError",
    "ContextSettings",
    "Leak",
    "RunStateMissing",
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
    "find_leaks",
    "find_scenario",
    "render_page",
    "workspace_surfaces",
]
