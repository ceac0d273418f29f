"""The monitoring plane's API answers reduced to what `monitoring_intact` compares (pure).

Only what grading depends on goes into a fingerprint: rule states, evaluation times and
scrape health change every second and are left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sreforge_prom import RuleGroup, RuntimeInfo, Target

from sreforge_oracle._errors import ProbeError

__all__ = ["alertmanager_status", "rules_fingerprint", "runtime_info", "targets_fingerprint"]

_GROUP_KEYS = ("name", "file", "interval", "limit")
_RULE_KEYS = ("type", "name", "query", "duration", "keepFiringFor", "labels", "annotations")


def runtime_info(info: RuntimeInfo) -> tuple[datetime, datetime | None, bool]:
    """`/api/v1/status/runtimeinfo`: (start time, last config load time, last reload ok)."""
    return info.start_time, info.config_loaded_at, info.reload_config_success is not False


def rules_fingerprint(groups: Sequence[RuleGroup]) -> str:
    """`/api/v1/rules`: a hash of every group and rule as defined (not as evaluated)."""
    defined = []
    for group in groups:
        answered = group.model_dump(by_alias=True, exclude_unset=True)
        rules = [_pick(rule, _RULE_KEYS) for rule in answered["rules"]]
        defined.append({**_pick(answered, _GROUP_KEYS), "rules": rules})
    return _digest(sorted(defined, key=lambda group: json.dumps(group, sort_keys=True)))


def targets_fingerprint(targets: Sequence[Target], endpoint: str) -> tuple[str, tuple[str, ...]]:
    """`/api/v1/targets?state=active`: (a hash of each job's scrape URLs, the jobs)."""
    scraped: set[tuple[str, str]] = set()
    for target in targets:
        if "job" not in target.labels:
            raise ProbeError(f"target without a job label: {target!r:.200}", endpoint=endpoint)
        scraped.add((target.job, target.scrape_url))
    return _digest(sorted(scraped)), tuple(sorted({job for job, _ in scraped}))


def alertmanager_status(body: Any) -> tuple[datetime, str] | None:
    """`/api/v2/status`: (start time, a hash of the config as loaded); `None` if malformed."""
    if not isinstance(body, dict):
        return None
    config = body.get("config")
    original = config.get("original") if isinstance(config, dict) else None
    started = _time(body.get("uptime"))
    if started is None or not isinstance(original, str):
        return None
    return started, _digest(original)


def _pick(item: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: item[key] for key in keys if key in item}


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _time(raw: Any) -> datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        return None
    # Go's zero time means "never" (e.g. no config loaded yet).
    return None if moment.year <= 1 else moment
