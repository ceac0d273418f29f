"""The one TLS context the harness's HTTP clients share."""

from __future__ import annotations

import functools
import ssl

import httpx

__all__ = ["shared_tls_context"]


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """httpx's default verifying context (certifi's CA bundle), built once per process.

    Pass it as `verify=` to every `httpx.Client`/`AsyncClient`/transport the harness makes:
    building one per client costs ~45 ms of CPU, and the harness makes a client per
    readiness wait, per stack check and per judged test.
    """
    return httpx.create_ssl_context(trust_env=False)
