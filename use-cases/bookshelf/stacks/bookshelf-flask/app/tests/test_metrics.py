from __future__ import annotations

from flask.testing import FlaskClient


def _metrics(client: FlaskClient) -> str:
    return client.get("/metrics").get_data(as_text=True)


def test_requests_are_counted_by_route_template_and_status(client: FlaskClient) -> None:
    client.get("/books/3")
    client.get("/books/999999")
    text = _metrics(client)
    assert (
        'bookshelf_http_requests_total{endpoint="/books/<int:book_id>",method="GET",status="200"}'
        in text
    )
    assert 'endpoint="/books/<int:book_id>",method="GET",status="404"' in text


def test_latency_histogram_has_fine_buckets(client: FlaskClient) -> None:
    client.get("/books")
    text = _metrics(client)
    for bound in ("0.05", "0.3", "1.0", "2.5"):
        assert (
            f'bookshelf_http_request_duration_seconds_bucket{{endpoint="/books",le="{bound}"'
            in text
        )


def test_probes_and_scrapes_are_not_observed(client: FlaskClient) -> None:
    client.get("/healthz")
    client.get("/metrics")
    assert 'endpoint="/healthz"' not in _metrics(client)
    assert 'endpoint="/metrics"' not in _metrics(client)


def test_upstream_calls_are_counted_by_outcome(client: FlaskClient) -> None:
    client.get("/search?q=dracula")
    text = _metrics(client)
    assert 'bookshelf_upstream_requests_total{outcome="ok"} 1.0' in text
    assert 'bookshelf_metadata_cache_lookups_total{result="miss"} 1.0' in text


def test_health(client: FlaskClient) -> None:
    assert client.get("/healthz").get_json() == {"status": "ok"}


def test_the_serving_process_is_described(client: FlaskClient) -> None:
    """Its start time and memory: a restarted worker shows as a new start time."""
    text = _metrics(client)
    assert "\nprocess_start_time_seconds " in text
    assert "\nprocess_resident_memory_bytes " in text
