"""What the run's endpoints tell the agent: headers and bodies it can read over loopback.

Per endpoint of the agent's view, the paths an agent would poke: for Prometheus its
targets (labels, scrape URLs, jobs), rules (names, labels, annotations, queries),
status pages, and every label's values; for Alertmanager its status (config,
cluster, version), alerts, receivers and silences; for anything else (the app's
API) `/`, `/healthz`, `/metrics` and an error body. The `Server:` banner and the
other headers come with each. An endpoint's paths are fetched in parallel, each GET
within 5 s, so a slow (faulted) app costs the brief seconds, not minutes. The I/O is
one `Fetch` callable, so the gatherer is tested with a fake one and run against the
live stack by `http_fetch`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sreforge_contracts import Surface

__all__ = [
    "ALERTMANAGER_PATHS",
    "APP_PATHS",
    "PROMETHEUS_PATHS",
    "EndpointReply",
    "Fetch",
    "endpoint_surfaces",
    "http_fetch",
]

PROMETHEUS_PATHS: tuple[str, ...] = (
    "/",
    "/api/v1/targets",
    "/api/v1/rules",
    "/api/v1/alerts",
    "/api/v1/status/flags",
    "/api/v1/status/config",
    "/api/v1/status/runtimeinfo",
    "/api/v1/status/buildinfo",
    "/api/v1/status/tsdb",
    "/api/v1/alertmanagers",
    "/api/v1/targets/metadata",
    "/api/v1/labels",
)
ALERTMANAGER_PATHS: tuple[str, ...] = (
    "/",
    "/api/v2/status",
    "/api/v2/alerts",
    "/api/v2/alerts/groups",
    "/api/v2/receivers",
    "/api/v2/silences",
)
APP_PATHS: tuple[str, ...] = ("/", "/healthz", "/metrics", "/no-such-page-3f9c")
_MAX_BODY_BYTES = 2_000_000
_TIMEOUT_S = 5.0
_PARALLEL_FETCHES = 8
# Loopback only: an `http_proxy` in the harness's env must not carry the probe elsewhere.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class EndpointReply:
    """One HTTP answer (any status: error bodies are readable too), or why there was none."""

    status: int = 0
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = ""
    error: str | None = None


Fetch = Callable[[str], EndpointReply]
"""GET a URL and return what came back; never raises."""


def http_fetch(url: str) -> EndpointReply:
    """GET `url` with the stdlib like an agent's `curl -L` (redirects followed, no proxy)."""
    request = urllib.request.Request(url, headers={"User-Agent": "curl/8.5.0"})
    try:
        with _OPENER.open(request, timeout=_TIMEOUT_S) as response:
            return _reply(response.status, dict(response.headers), response.read(_MAX_BODY_BYTES))
    except urllib.error.HTTPError as error:
        return _reply(error.code, dict(error.headers), error.read(_MAX_BODY_BYTES))
    except (OSError, ValueError) as error:
        return EndpointReply(error=f"{type(error).__name__}: {error}")


def _reply(status: int, headers: dict[str, str], body: bytes) -> EndpointReply:
    return EndpointReply(status=status, headers=headers, body=body.decode(errors="replace"))


def endpoint_surfaces(endpoints: Mapping[str, str], fetch: Fetch = http_fetch) -> list[Surface]:
    """Headers and body of each probed path of each endpoint (name → base URL)."""
    surfaces: list[Surface] = []
    for name, base in sorted(endpoints.items()):
        kind = _kind(name)
        paths = {"prometheus": PROMETHEUS_PATHS, "alertmanager": ALERTMANAGER_PATHS}.get(
            kind, APP_PATHS
        )
        replies = _fetch_all(base, paths, fetch)
        if kind == "prometheus":
            replies |= _fetch_all(base, _label_paths(replies["/api/v1/labels"]), fetch)
        surfaces += [
            Surface(f"endpoint {name} {path}", _render(reply))
            for path, reply in replies.items()
            if reply.error is None
        ]
    return surfaces


def _kind(name: str) -> str:
    lowered = name.lower()
    for kind in ("prometheus", "alertmanager"):
        if kind in lowered:
            return kind
    return "app"


def _fetch_all(base: str, paths: Sequence[str], fetch: Fetch) -> dict[str, EndpointReply]:
    # In parallel: the brief waits on this, and a faulted app may answer slowly.
    urls = [base.rstrip("/") + path for path in paths]
    with ThreadPoolExecutor(max_workers=_PARALLEL_FETCHES) as pool:
        return dict(zip(paths, pool.map(fetch, urls), strict=True))


def _label_paths(labels: EndpointReply) -> list[str]:
    try:
        names = json.loads(labels.body).get("data") or []
    except (ValueError, AttributeError):
        return []
    return [f"/api/v1/label/{urllib.parse.quote(str(n), safe='')}/values" for n in names]


def _render(reply: EndpointReply) -> str:
    headers = "\n".join(f"{key}: {value}" for key, value in sorted(reply.headers.items()))
    try:
        body = json.dumps(json.loads(reply.body), indent=1, sort_keys=True)
    except ValueError:
        body = reply.body
    return f"HTTP {reply.status}\n{headers}\n\n{body}"
