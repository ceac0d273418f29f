"""Where a run's agent session runs, and the page as the agent there reads it.

- A profile with a `remote` target: over ssh (`RemoteSandbox`).
- On the compose topology (the stack reported an agent network), a profile with
  `in_box = true` and the runner's `in_box` setting on: in a container on that network
  (`BoxSandbox`, `in-box`); its page names the endpoints as the box reaches them
  (`http://prometheus:9090`) instead of the published loopback ports.
- Otherwise: on the host, in the profile's `sandbox` (`HostSandbox`), allowed the
  stack's agent endpoints.
"""

from __future__ import annotations

import re
from pathlib import Path

from sreforge_contracts import HarnessProfile, StackInfo

from sreforge_runner._agent_sandbox import AgentSandbox
from sreforge_runner._box import BoxSandbox
from sreforge_runner._remote import RemoteSandbox
from sreforge_runner._sandbox import HostSandbox
from sreforge_runner._settings import RunnerSettings

__all__ = ["agent_page", "place_session"]


def place_session(
    profile: HarnessProfile,
    stack: StackInfo | None,
    workspace: Path,
    agent_dir: Path,
    settings: RunnerSettings,
) -> AgentSandbox:
    """The sandbox the run's agent session gets (not created yet)."""
    if profile.remote is not None:
        return RemoteSandbox(workspace, agent_dir, settings, profile.remote)
    install_paths = profile.command.install_paths if profile.command else ()
    mount_at = dict(profile.command.mount_at) if profile.command else {}
    if stack is not None and stack.agent_network and profile.in_box and settings.in_box:
        return BoxSandbox(
            workspace,
            agent_dir,
            settings,
            stack.agent_network,
            dict(stack.network_endpoints),
            install_paths=install_paths,
            mount_at=mount_at,
        )
    return HostSandbox(
        workspace,
        agent_dir,
        settings,
        kind=profile.sandbox,
        fallback=profile.sandbox_fallback,
        install_paths=install_paths,
        mount_at=mount_at,
        endpoints=tuple(stack.agent_endpoints.values()) if stack else (),
    )


def agent_page(page: str, stack: StackInfo | None, sandbox: AgentSandbox) -> str:
    """The page as the agent in `sandbox` reads it: in a box, each endpoint's published
    URL replaced by its in-network one (same names, same paths); else `page` itself."""
    if not isinstance(sandbox, BoxSandbox) or stack is None:
        return page
    for name, published in stack.agent_endpoints.items():
        inside = stack.network_endpoints.get(name)
        if inside:  # not a prefix of a longer port: 127.0.0.1:3100 is not 127.0.0.1:31001
            page = re.sub(re.escape(published.rstrip("/")) + r"(?![0-9])", inside, page)
    return page
