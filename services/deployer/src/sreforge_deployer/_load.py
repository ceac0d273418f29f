"""The load generator's control endpoints (pause, resume, warm-up): one POST each."""

from __future__ import annotations

import httpx
from sreforge_prom import shared_tls_context

from sreforge_deployer._errors import LoadControlError

__all__ = ["post_load"]


def post_load(url: str, timeout: float) -> None:
    """POST `url` on the load generator; `LoadControlError` unless it answers 2xx."""
    try:
        response = httpx.post(url, timeout=timeout, trust_env=False, verify=shared_tls_context())
    except httpx.HTTPError as error:
        raise LoadControlError(f"POST {url} failed: {error}") from error
    if not response.is_success:
        raise LoadControlError(f"POST {url} answered {response.status_code}: {response.text}")
