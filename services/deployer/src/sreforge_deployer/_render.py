"""Render the stack's Prometheus/Alertmanager templates for one run, time-scaled.

Templates are written at real scale with `string.Template` placeholders. Rendering
substitutes the placeholders, then multiplies *every* duration by the run's
`time_scale`: scrape/eval intervals and timeouts, rule `for:`/`keep_firing_for:`,
range windows, subquery steps and `offset`s inside expressions, and Alertmanager's
group/repeat/resolve timers. The scrape interval is then capped so each rate window
still holds at least `MIN_SAMPLES_PER_WINDOW` samples.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from sreforge_prom import DURATION_PATTERN, duration_ms, format_duration, scale_duration

from sreforge_deployer._errors import StackSpecError
from sreforge_deployer._spec import load_scenario_setup, load_stack_spec

__all__ = [
    "MIN_SAMPLES_PER_WINDOW",
    "RenderedObservability",
    "render_observability",
    "rule_problems",
    "stack_rule_problems",
]

MIN_SAMPLES_PER_WINDOW = 6

# Durations are read and written by sreforge_prom (Prometheus's own syntax); a malformed
# one inside PromQL is not matched here and Prometheus refuses the rule file at start-up.
_RANGE = re.compile(rf"\[({DURATION_PATTERN})(?::({DURATION_PATTERN})?)?\]")
_OFFSET = re.compile(rf"(\boffset\s+-?)({DURATION_PATTERN})")
# A function applied straight to a range selector: `changes(metric{labels}[5m])`.
_RANGE_CALL = re.compile(r"\b([a-z_]+)\s*\(\s*[A-Za-z_:][\w:]*\s*(?:\{[^{}]*\})?\s*\[[^\]]*\]")
_EVENT_COUNTS = frozenset({"changes", "resets"})
"""Functions whose window counts discrete events (a process start, a counter reset)."""

_PROM_GLOBAL_KEYS = ("scrape_interval", "scrape_timeout", "evaluation_interval")
_SCRAPE_KEYS = ("scrape_interval", "scrape_timeout")
_RULE_KEYS = ("for", "keep_firing_for")
_ROUTE_KEYS = ("group_wait", "group_interval", "repeat_interval")


@dataclass(frozen=True)
class RenderedObservability:
    """Paths of the rendered files plus the effective timings, for records and probes."""

    prometheus_config: Path
    rules: Path
    alertmanager_config: Path
    scrape_interval: str
    evaluation_interval: str
    shortest_window: str | None
    longest_window: str | None
    settle_window: str | None = None
    """The longest window a burst of requests can move: every window but those counting
    discrete events (`changes()`, `resets()`: a warm-up restarts nothing). A warm-up waits
    this long to age out of the rules; a restart count keeps its own memory, as it would
    in production (an alert on it clears a window after the last restart)."""


def render_observability(
    template_dir: Path,
    out_dir: Path,
    values: Mapping[str, str],
    time_scale: float,
) -> RenderedObservability:
    """Render prometheus.yml, rules.yml and alertmanager.yml from `template_dir`."""
    if not 0 < time_scale <= 1:
        raise ValueError(f"time_scale must be in (0, 1], got {time_scale}")
    out_dir.mkdir(parents=True, exist_ok=True)
    rules_path = out_dir / "rules.yml"
    values = {**values, "rules_path": str(rules_path)}
    rules = _scale_rules(_load(template_dir / "rules.yml", values), time_scale)
    problems = rule_problems(rules)
    if problems:
        raise StackSpecError("; ".join(problems), source=template_dir / "rules.yml")
    windows = [w for group in rules.get("groups", []) for w in _rule_windows(group)]
    request_windows = [
        w for group in rules.get("groups", []) for w in _rule_windows(group, requests_only=True)
    ]
    shortest = min(windows) if windows else None
    prom = _scale_prometheus(_load(template_dir / "prometheus.yml", values), time_scale, shortest)
    alerting = _scale_alertmanager(_load(template_dir / "alertmanager.yml", values), time_scale)
    prom_path = out_dir / "prometheus.yml"
    am_path = out_dir / "alertmanager.yml"
    _dump(rules_path, rules)
    _dump(prom_path, prom)
    _dump(am_path, alerting)
    global_section = prom.get("global", {})
    return RenderedObservability(
        prometheus_config=prom_path,
        rules=rules_path,
        alertmanager_config=am_path,
        scrape_interval=str(global_section.get("scrape_interval", "1m")),
        evaluation_interval=str(global_section.get("evaluation_interval", "1m")),
        shortest_window=format_duration(shortest) if shortest else None,
        longest_window=format_duration(max(windows)) if windows else None,
        settle_window=format_duration(max(request_windows)) if request_windows else None,
    )


def rule_problems(rules: Mapping[str, Any]) -> list[str]:
    """What the alerting contract refuses in a rules document (SPEC §6): every alerting
    rule names the `service` it pages for (the oracle scopes `no_new_alerts` by it, and an
    alert without one could never count against a fix), and `role`, where set, is
    `ambient` (the one role the oracle knows: ignored)."""
    problems = []
    for rule in _alerting_rules(rules):
        name, labels = rule["alert"], rule.get("labels") or {}
        if not isinstance(labels, dict) or not str(labels.get("service") or "").strip():
            problems.append(f"alert {name!r} has no `service` label")
        elif labels.get("role", "ambient") != "ambient":
            problems.append(f"alert {name!r}: role {labels['role']!r}, expected 'ambient'")
    return problems


def _alerting_rules(rules: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every alerting rule of a rules document (a recording rule pages nobody)."""
    for group in rules.get("groups") or []:
        for rule in (group or {}).get("rules") or []:
            if isinstance(rule, dict) and "alert" in rule:
                yield rule


def stack_rule_problems(scenario_dir: Path, paging_alert: str | None = None) -> list[str]:
    """The rules lint on the `rules.yml` template of a scenario's stack, before any run
    (`sreforge scenarios validate`): `rule_problems`, and `paging_alert` (the scenario's
    `[expected].alert`) must be one of its alerts, else no run of it could ever page.
    Each problem names the file."""
    try:
        spec = load_stack_spec(load_scenario_setup(scenario_dir).stack_dir)
    except StackSpecError as error:
        return [str(error)]
    path = spec.root / spec.observability / "rules.yml"
    try:
        rules = yaml.safe_load(string.Template(path.read_text()).safe_substitute()) or {}
    except (OSError, yaml.YAMLError) as error:
        return [f"{path}: cannot read: {error}"]
    if not isinstance(rules, dict):
        return [f"{path}: expected a YAML mapping at the top"]
    problems = [f"{path}: {problem}" for problem in rule_problems(rules)]
    alerts = {rule["alert"] for rule in _alerting_rules(rules)}
    if paging_alert is not None and paging_alert not in alerts:
        problems.append(f"{path}: no alert {paging_alert!r} (the scenario's [expected].alert)")
    return problems


def _load(path: Path, values: Mapping[str, str]) -> dict[str, Any]:
    try:
        text = string.Template(path.read_text()).substitute(values)
    except FileNotFoundError as error:
        raise StackSpecError("template missing", source=path) from error
    except (KeyError, ValueError) as error:
        raise StackSpecError(f"unknown or malformed placeholder {error}", source=path) from error
    loaded = yaml.safe_load(text) or {}
    if not isinstance(loaded, dict):
        raise StackSpecError("expected a YAML mapping at the top", source=path)
    return loaded


def _dump(path: Path, document: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=1000))


def _scale_keys(section: dict[str, Any], keys: tuple[str, ...], time_scale: float) -> None:
    for key in keys:
        if key in section:
            section[key] = scale_duration(str(section[key]), time_scale)


def scale_expr(expr: str, time_scale: float) -> str:
    """Scale range windows, subquery steps and offsets inside a PromQL expression."""

    def window(match: re.Match[str]) -> str:
        scaled = scale_duration(match.group(1), time_scale)
        if match.group(0).count(":") == 0:
            return f"[{scaled}]"
        step = match.group(2)
        return f"[{scaled}:{scale_duration(step, time_scale) if step else ''}]"

    expr = _RANGE.sub(window, expr)
    return _OFFSET.sub(lambda m: m.group(1) + scale_duration(m.group(2), time_scale), expr)


def _scale_rules(rules: dict[str, Any], time_scale: float) -> dict[str, Any]:
    for group in rules.get("groups", []) or []:
        _scale_keys(group, ("interval",), time_scale)
        for rule in group.get("rules", []) or []:
            _scale_keys(rule, _RULE_KEYS, time_scale)
            if "expr" in rule:
                rule["expr"] = scale_expr(str(rule["expr"]), time_scale)
    return rules


def _rule_windows(group: dict[str, Any], requests_only: bool = False) -> list[int]:
    windows = []
    for rule in group.get("rules", []) or []:
        expr = str(rule.get("expr", ""))
        counted = {
            call.end() for call in _RANGE_CALL.finditer(expr) if call.group(1) in _EVENT_COUNTS
        }
        windows += [
            duration_ms(match.group(1))
            for match in _RANGE.finditer(expr)
            if not (requests_only and match.end() in counted)
        ]
    return windows


def _scale_prometheus(
    prom: dict[str, Any], time_scale: float, shortest_window_ms: int | None
) -> dict[str, Any]:
    global_section = prom.setdefault("global", {})
    _scale_keys(global_section, _PROM_GLOBAL_KEYS, time_scale)
    sections = [global_section, *(prom.get("scrape_configs") or [])]
    for section in sections[1:]:
        _scale_keys(section, _SCRAPE_KEYS, time_scale)
    for section in sections:
        _cap_scrape_interval(section, shortest_window_ms)
    return prom


def _cap_scrape_interval(section: dict[str, Any], shortest_window_ms: int | None) -> None:
    if shortest_window_ms is None or "scrape_interval" not in section:
        return
    cap = math.floor(shortest_window_ms / MIN_SAMPLES_PER_WINDOW)
    if duration_ms(section["scrape_interval"]) > cap:
        section["scrape_interval"] = format_duration(max(1, cap))
    timeout = section.get("scrape_timeout")
    if timeout and duration_ms(timeout) > duration_ms(section["scrape_interval"]):
        section["scrape_timeout"] = section["scrape_interval"]


def _scale_alertmanager(config: dict[str, Any], time_scale: float) -> dict[str, Any]:
    _scale_keys(config.setdefault("global", {}), ("resolve_timeout",), time_scale)
    routes = [config.get("route") or {}]
    while routes:
        route = routes.pop()
        _scale_keys(route, _ROUTE_KEYS, time_scale)
        routes.extend(route.get("routes") or [])
    return config
