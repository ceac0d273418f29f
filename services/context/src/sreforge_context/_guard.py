"""The contamination guard over every agent-visible surface of one run (SPEC §10).

`guard_leaks` gathers the page, the workspace (tree, history, refs, stray objects,
`.git`), the stack's endpoints (headers and bodies, live) and, when known, the
sandbox (process titles, env, HOME, bin), and returns every tell found. The alert
names are tells everywhere but on the endpoints, where Prometheus and Alertmanager
show them by design. The context service runs it before every hand-off;
`sreforge guard` runs it against a stack it brings up.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sreforge_context._endpoints import Fetch, endpoint_surfaces, http_fetch
from sreforge_context._leak import Leak, Surface, Tells, find_leaks
from sreforge_context._sandbox import SandboxView, sandbox_surfaces
from sreforge_context._workspace import workspace_surfaces

__all__ = ["guard_leaks"]


def guard_leaks(
    tells: Tells,
    *,
    page: str | None = None,
    workspace: Path | None = None,
    endpoints: Mapping[str, str] | None = None,
    sandbox: SandboxView | None = None,
    fetch: Fetch = http_fetch,
) -> list[Leak]:
    """Every tell on the surfaces given: page, workspace, endpoints (fetched), sandbox."""
    surfaces = [Surface("page", page)] if page is not None else []
    if workspace is not None:
        surfaces += workspace_surfaces(workspace)
    if sandbox is not None:
        surfaces += sandbox_surfaces(sandbox)
    leaks = find_leaks(surfaces, tells)
    if endpoints:
        leaks += find_leaks(endpoint_surfaces(endpoints, fetch), tells.on_endpoints())
    return leaks
