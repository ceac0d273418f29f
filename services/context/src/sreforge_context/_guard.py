"""The contamination guard over every agent-visible surface of one run (SPEC §10).

`guard_scan` gathers the page, the workspace (tree, history, refs, stray objects,
`.git`), the stack's endpoints (headers and bodies, live) and, when known, the
sandbox (process titles, env, HOME, bin), and returns every tell found. The alert
names are tells everywhere but on the endpoints, where Prometheus and Alertmanager
show them by design. The context service runs it before every hand-off;
`sreforge guard` runs it against a stack it brings up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sreforge_contracts import Leak, SandboxView, Surface, Tells, find_leaks, sandbox_surfaces

from sreforge_context._endpoints import Fetch, endpoint_surfaces, http_fetch
from sreforge_context._workspace import workspace_surfaces

__all__ = ["GuardScan", "guard_scan"]


@dataclass(frozen=True)
class GuardScan:
    """What one guard pass read (surfaces per kind: page, workspace, endpoints, sandbox)
    and the tells it found there."""

    surfaces: Mapping[str, Sequence[Surface]]
    leaks: list[Leak]


def guard_scan(
    tells: Tells,
    *,
    page: str | None = None,
    workspace: Path | None = None,
    endpoints: Mapping[str, str] | None = None,
    sandbox: SandboxView | None = None,
    fetch: Fetch = http_fetch,
) -> GuardScan:
    """Gather the surfaces given (endpoints fetched live) and find every tell on them."""
    gathered: dict[str, list[Surface]] = {}
    if page is not None:
        gathered["page"] = [Surface("page", page)]
    if workspace is not None:
        gathered["workspace"] = workspace_surfaces(workspace)
    if endpoints:
        gathered["endpoints"] = endpoint_surfaces(endpoints, fetch)
    if sandbox is not None:
        gathered["sandbox"] = sandbox_surfaces(sandbox)
    leaks: list[Leak] = []
    for kind, surfaces in gathered.items():
        leaks += find_leaks(surfaces, tells.on_endpoints() if kind == "endpoints" else tells)
    return GuardScan(surfaces=gathered, leaks=leaks)
