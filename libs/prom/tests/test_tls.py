"""The shared TLS context: built once, and as strict as httpx's own default."""

from __future__ import annotations

import ssl

from sreforge_prom import shared_tls_context


def test_every_client_gets_the_same_verifying_context() -> None:
    """One context per process (building one costs tens of milliseconds of CPU), which
    still verifies certificates and host names."""
    context = shared_tls_context()
    assert shared_tls_context() is context
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.get_ca_certs(), "no CA loaded: nothing could be verified"
