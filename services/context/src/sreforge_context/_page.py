"""Building the run contract and the neutral on-call page, pure (SPEC §4, seed 000).

The page is the scenario's `trigger.md` plus what any on-call engineer would be
handed: the services and their addresses, where the code is, and how to ship a
change. It never names the firing alert (the agent reads it off Alertmanager) nor
the scenario.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sreforge_contracts import (
    AgentContext,
    Profile,
    RunContract,
    RunState,
    RunWorkspace,
    ScenarioManifest,
    ScenarioRef,
)

__all__ = ["agent_services", "build_contract", "render_page"]


def agent_services(
    agent_endpoints: Mapping[str, str], names: Mapping[str, str] | None
) -> dict[str, str]:
    """The agent's services map: manifest name → the stack's agent-view URL.

    `names` is the manifest's `[endpoints]` (name → stack component). A name whose
    component the stack does not have is left out; a component no name maps to is
    listed under its own name. Without `[endpoints]` the stack's map is used as is.
    """
    if not names:
        return dict(agent_endpoints)
    services = {name: agent_endpoints[c] for name, c in names.items() if c in agent_endpoints}
    mapped = set(names.values())
    services.update({c: url for c, url in agent_endpoints.items() if c not in mapped})
    return services


def build_contract(
    state: RunState,
    manifest: ScenarioManifest,
    workspace: RunWorkspace,
    *,
    alert_fired_at: datetime,
    submit_command: str = "submit",
    agent_workspace_path: str | None = None,
) -> RunContract:
    """The run contract for `state` at its time scale; `eval_only` comes from the manifest."""
    endpoints = state.stack.agent_endpoints if state.stack else {}
    expected_alert = state.expected_alert or (
        manifest.expected.alert if manifest.expected else None
    )
    return RunContract(
        agent_context=AgentContext(
            services=agent_services(endpoints, manifest.endpoints),
            run_workspace=workspace,
            workspace_path=agent_workspace_path or workspace.path,
            submit_command=submit_command,
        ),
        scenario=ScenarioRef(
            id=state.scenario_id,
            profile=manifest.profile,
            run_id=state.run_id,
            expected_alert=expected_alert,
            alert_fired_at=state.alert_fired_at or alert_fired_at,
        ),
        eval_only=manifest.eval_only(state.time_scale) if manifest.profile == "incident" else None,
    )


def render_page(trigger_text: str, context: AgentContext, *, profile: Profile = "incident") -> str:
    """The agent's page (markdown): the trigger text, services, workspace, how to submit.

    An incident's is an on-call page; a patch run's is a task page, with no services
    (there is no stack) and no redeploy.
    """
    submit = context.submit_command
    rows = "\n".join(f"| {name} | {url} |" for name, url in sorted(context.services.items()))
    services = ["## Services\n\n| Service | Address |\n|---|---|\n" + rows] if rows else []
    after_ci = "merged and redeployed" if profile == "incident" else "sent for review"
    sections = [
        "# On-call page" if profile == "incident" else "# Task",
        trigger_text.strip(),
        *services,
        "## Workspace\n\n"
        f"The service's source is a git checkout at `{context.workspace_path}` "
        f"(service `{context.run_workspace.service}`). Work there: edit, run its tests, "
        "commit.",
        "## Shipping your change\n\n"
        f"When your fix is ready, run `{submit}` from a shell. To hand over your write-up "
        f"of the cause as well, run `{submit} --rca FILE` (markdown or plain text). "
        f"Your change goes through CI and, when green, is {after_ci}. "
        f"`{submit}` is final: run it once, when you are done.",
    ]
    return "\n\n".join(sections) + "\n"
