"""Hidden CI: a positive in-flight limit still protects the service (runs in CI only)."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from bookshelf import Settings, create_app
from bookshelf.seed import seed
from flask import Flask


def _app(tmp_path: Path, limit: int) -> Flask:
    db_path = str(tmp_path / "hidden.db")
    seed(db_path, 200)
    settings = Settings(
        db_path=db_path, upstream_url="http://registry.test", max_inflight_requests=limit
    )
    transport = httpx.MockTransport(lambda _request: httpx.Response(404))
    return create_app(settings, upstream_transport=transport)


def test_a_positive_limit_still_refuses_the_excess(tmp_path: Path) -> None:
    """With 3 requests held in flight and a limit of 3, the next search is refused."""
    app = _app(tmp_path, 3)
    release, entered = threading.Event(), threading.Semaphore(0)

    @app.get("/held-for-test")
    def held() -> dict[str, str]:
        entered.release()
        release.wait(10)
        return {"status": "done"}

    client = app.test_client()
    threads = [threading.Thread(target=client.get, args=("/held-for-test",)) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for _ in threads:
            assert entered.acquire(timeout=10)
        refused = app.test_client().get("/search", query_string={"q": "dune"})
        assert refused.status_code in (429, 503)
        assert app.test_client().get("/healthz").status_code == 200
    finally:
        release.set()
        for thread in threads:
            thread.join(10)
    assert app.test_client().get("/search", query_string={"q": "dune"}).status_code == 200


def test_the_limit_is_read_from_the_environment() -> None:
    """The operator's knob still works for ordinary values; nonsense is refused at start."""
    assert Settings.from_env({"BOOKSHELF_MAX_INFLIGHT_REQUESTS": "48"}).max_inflight_requests == 48
    assert Settings.from_env({}).max_inflight_requests is None
    for bad in ("-1", "lots"):
        with pytest.raises(ValueError, match="BOOKSHELF_MAX_INFLIGHT_REQUESTS"):
            Settings.from_env({"BOOKSHELF_MAX_INFLIGHT_REQUESTS": bad})
