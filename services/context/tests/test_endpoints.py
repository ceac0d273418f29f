"""The guard over the stack's endpoints: banners, labels, rules, status pages, error bodies."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from sreforge_context import (
    ALERTMANAGER_PATHS,
    APP_PATHS,
    PROMETHEUS_PATHS,
    EndpointReply,
    Tells,
    endpoint_surfaces,
    find_leaks,
    guard_scan,
)

TELLS = Tells.for_run("checkout-slow", "ShopCheckoutLatencyHigh")
HttpApp = Callable[..., str]


def fake_fetch(bodies: dict[str, object]) -> Callable[[str], EndpointReply]:
    """A `Fetch` answering JSON (or text) by full URL, 404 for the rest; records nothing."""

    def fetch(url: str) -> EndpointReply:
        if url not in bodies:
            return EndpointReply(status=404, body="404 page not found\n")
        body = bodies[url]
        return EndpointReply(status=200, body=body if isinstance(body, str) else json.dumps(body))

    return fetch


def _leaks(endpoints: dict[str, str], bodies: dict[str, object]) -> list[tuple[str, str]]:
    surfaces = endpoint_surfaces(endpoints, fake_fetch(bodies))
    return [(leak.what, leak.where) for leak in find_leaks(surfaces, TELLS.on_endpoints())]


def test_each_kind_of_endpoint_is_probed_on_its_own_paths() -> None:
    """Prometheus, Alertmanager and the app each get their paths; error bodies count too."""
    endpoints = {
        "prometheus": "http://p",
        "alertmanager": "http://a",
        "shop-api": "http://s",
    }
    wheres = {s.where for s in endpoint_surfaces(endpoints, fake_fetch({}))}
    assert {f"endpoint prometheus {path}" for path in PROMETHEUS_PATHS} <= wheres
    assert {f"endpoint alertmanager {path}" for path in ALERTMANAGER_PATHS} <= wheres
    assert {f"endpoint shop-api {path}" for path in APP_PATHS} <= wheres


def test_the_values_of_every_label_are_read() -> None:
    """`/api/v1/label/<name>/values` for each name `/api/v1/labels` lists."""
    bodies: dict[str, object] = {
        "http://p/api/v1/labels": {"status": "success", "data": ["job", "team"]},
        "http://p/api/v1/label/job/values": {"data": ["shop-api"]},
        "http://p/api/v1/label/team/values": {"data": ["injector-crew"]},
    }
    found = _leaks({"prometheus": "http://p"}, bodies)
    assert found == [("harness word 'inject'", "endpoint prometheus /api/v1/label/team/values")]


def test_a_target_label_and_a_rule_annotation_are_caught() -> None:
    """What `/api/v1/targets` and `/api/v1/rules` show is read (labels, annotations)."""
    bodies: dict[str, object] = {
        "http://p/api/v1/targets": {"data": {"activeTargets": [{"labels": {"job": "faults"}}]}},
        "http://p/api/v1/rules": {"data": {"groups": [{"annotations": {"runbook": "solution"}}]}},
    }
    found = _leaks({"prometheus": "http://p"}, bodies)
    assert ("harness word 'fault'", "endpoint prometheus /api/v1/targets") in found
    assert ("harness word 'solution'", "endpoint prometheus /api/v1/rules") in found


@pytest.mark.parametrize(
    ("receiver", "hit"),
    [
        ("http://127.0.0.1:8089/v1/alertmanager/9f3c1a2b", False),
        ("http://127.0.0.1:8089/sreforge/hooks/9f3c1a2b", True),
    ],
)
def test_the_webhook_receiver_url_is_a_tell_only_with_harness_words(
    receiver: str, hit: bool
) -> None:
    """Alertmanager's status shows its config: an opaque route is fine, a named one is not."""
    config = f"receivers:\n- name: pager\n  webhook_configs:\n  - url: {receiver}\n"
    bodies: dict[str, object] = {"http://a/api/v2/status": {"config": {"original": config}}}
    found = _leaks({"alertmanager": "http://a"}, bodies)
    assert (("harness word 'sreforge'", "endpoint alertmanager /api/v2/status") in found) is hit
    assert len(found) == int(hit)


def test_the_alert_name_is_a_tell_on_the_page_but_not_on_the_endpoints() -> None:
    """Finding the firing alert in Prometheus is the agent's job; being told it is not."""
    bodies: dict[str, object] = {
        "http://p/api/v1/alerts": {
            "data": {"alerts": [{"labels": {"alertname": "ShopCheckoutLatencyHigh"}}]}
        }
    }
    scan = guard_scan(
        TELLS,
        page="ShopCheckoutLatencyHigh is firing\n",
        endpoints={"prometheus": "http://p"},
        fetch=fake_fetch(bodies),
    )
    assert [leak.where for leak in scan.leaks] == ["page"]
    assert "ShopCheckoutLatencyHigh" in "\n".join(s.text for s in scan.surfaces["endpoints"])


def test_an_endpoint_that_does_not_answer_gives_no_surface() -> None:
    """Nothing listening: the agent cannot read it either (and the check does not fail)."""

    def refused(url: str) -> EndpointReply:
        return EndpointReply(error="ConnectionRefusedError: [Errno 111]")

    assert endpoint_surfaces({"shop-api": "http://127.0.0.1:9"}, refused) == []


@pytest.mark.timeout(30)
def test_a_server_banner_is_caught_on_a_live_app(http_app: HttpApp) -> None:
    """The `Server:` header of every response is read (here a real loopback server)."""
    url = http_app("sreforge-stack/1.0", {"/": "shop\n", "/healthz": "ok\n"})
    found = [
        (leak.what, leak.where, leak.excerpt)
        for leak in find_leaks(endpoint_surfaces({"shop-api": url}), TELLS.on_endpoints())
    ]
    wheres = {where for _, where, _ in found}
    assert {f"endpoint shop-api {path}" for path in APP_PATHS} == wheres  # 404s included
    assert all(excerpt.startswith("Server: sreforge") for _, _, excerpt in found)


@pytest.mark.timeout(60)
@pytest.mark.integration
def test_a_live_prometheus_shows_its_target_labels_and_rule_annotations(
    planted_prometheus: str,
) -> None:
    """A real Prometheus: the label in `/api/v1/targets`, the annotation in `/api/v1/rules`."""
    surfaces = endpoint_surfaces({"prometheus": planted_prometheus})
    found = {(leak.what, leak.where) for leak in find_leaks(surfaces, TELLS.on_endpoints())}
    assert ("harness word 'fault'", "endpoint prometheus /api/v1/targets") in found
    assert ("harness word 'oracle'", "endpoint prometheus /api/v1/rules") in found
    assert not any(
        leak.what.startswith("eval-only") for leak in find_leaks(surfaces, TELLS.on_endpoints())
    )
