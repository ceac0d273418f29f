"""The contamination guard, pure: find harness tells in text the agent can read (SPEC §10).

A tell is a harness word (`HARNESS_WORDS`), the scenario id, or an eval-only value
such as the alert the oracle waits on. Callers gather the agent-visible surfaces
(the context service: the page, the workspace and its git store, the endpoints; the
runner: the sandbox, see `_sandbox_view`) and pass them in with the run's `Tells`;
any `Leak` found aborts the run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "GUARD_REASON_PREFIX",
    "HARNESS_WORDS",
    "Leak",
    "Surface",
    "Tells",
    "describe_leaks",
    "find_leaks",
]

GUARD_REASON_PREFIX = "contamination guard:"
"""How every abort reason of the guard starts (the record's `abort_reason`)."""

HARNESS_WORDS: tuple[str, ...] = (
    "benchmark",
    "eval_only",
    "fault",
    "harness",
    "inject",
    "oracle",
    "scenario",
    "solution",
    "sreforge",
)
"""Words that give the rig away wherever the agent can read them (matched case-insensitively)."""

# A word starts where the text is not alphanumeric before it, or at a camelCase hump
# (`injectFault`); it ends the same way. `_`, `-` and `.` separate words, so
# `FAULT_MODE` is caught while `default` is not.
_START = r"(?:(?<![A-Za-z0-9])|(?-i:(?<=[a-z0-9])(?=[A-Z])))"
_END = r"(?:(?![A-Za-z0-9])|(?-i:(?<=[a-z])(?=[A-Z])))"
_SUFFIXES = r"(?:s|es|ed|ing|ion|ions|ive|or|ors|y)?"
_SEPARATOR = r"[-_ .]?"
_EXCERPT_CHARS = 80
_ALERT_TO_CLEAR = "eval-only alert_to_clear"
_EXPECTED_ALERT = "expected alert"
_RUNTIME_OVERRIDE = "runtime override"


def _word_pattern(word: str) -> str:
    body = _SEPARATOR.join(re.escape(part) for part in re.split(r"[-_ ]", word))
    return f"{_START}{body}{_SUFFIXES}{_END}"


def _value_pattern(value: str) -> str:
    parts = [re.escape(part) for part in re.split(r"[-_ ]+", value.strip()) if part]
    return f"{_START}{_SEPARATOR.join(parts)}{_END}"


@dataclass(frozen=True)
class Surface:
    """One text the agent can read, and where it lives (`page`, `workspace file app.py`…)."""

    where: str
    text: str


@dataclass(frozen=True)
class Leak:
    """One tell found: what it is, where, on which line, and the line's excerpt."""

    what: str
    where: str
    line: int
    excerpt: str

    def __str__(self) -> str:
        return f"{self.place} line {self.line}: {self.excerpt!r}"

    @property
    def place(self) -> str:
        """The tell and the surface, without the line's text (`harness word 'x' in page`)."""
        return f"{self.what} in {self.where}"


@dataclass(frozen=True)
class Tells:
    """What must not be readable: named values (label → value) and the harness words."""

    values: Mapping[str, str] = field(default_factory=dict)
    words: tuple[str, ...] = HARNESS_WORDS

    @classmethod
    def for_run(
        cls,
        scenario_id: str,
        alert_to_clear: str,
        expected_alert: str | None = None,
        *,
        runtime_override: str | None = None,
    ) -> Tells:
        """The tells of one run: its scenario id, the alert to clear and the expected alert,
        and an arm-runtime-notrace fault's override as `VAR=VALUE` (its name alone may be
        a setting the product reads; the pair is the fault, and must stay invisible)."""
        values = {"scenario id": scenario_id, _ALERT_TO_CLEAR: alert_to_clear}
        if expected_alert and expected_alert != alert_to_clear:
            values[_EXPECTED_ALERT] = expected_alert
        if runtime_override:
            values[_RUNTIME_OVERRIDE] = runtime_override
        return cls(values=values)

    def on_endpoints(self) -> Tells:
        """The tells on the stack's endpoints: all but the alert names, which Prometheus
        and Alertmanager show by design (finding the firing alert is the agent's job)."""
        kept = {k: v for k, v in self.values.items() if k not in (_ALERT_TO_CLEAR, _EXPECTED_ALERT)}
        return Tells(values=kept, words=self.words)

    def patterns(self) -> list[tuple[str, re.Pattern[str]]]:
        """(label, compiled pattern) per tell, values first."""
        found = [
            (label, re.compile(_value_pattern(value), re.IGNORECASE))
            for label, value in self.values.items()
            if value.strip()
        ]
        found += [
            (f"harness word {word!r}", re.compile(_word_pattern(word), re.IGNORECASE))
            for word in self.words
        ]
        return found


def find_leaks(surfaces: Iterable[Surface], tells: Tells) -> list[Leak]:
    """Every tell in every surface, in surface order then line order."""
    patterns = tells.patterns()
    leaks: list[Leak] = []
    for surface in surfaces:
        leaks.extend(_scan(surface, patterns))
    return leaks


def _scan(surface: Surface, patterns: list[tuple[str, re.Pattern[str]]]) -> list[Leak]:
    hits = [label for label, pattern in patterns if pattern.search(surface.text)]
    if not hits:
        return []
    found = []
    for number, line in enumerate(surface.text.splitlines(), 1):
        for label, pattern in patterns:
            match = pattern.search(line)
            if match is not None:
                found.append(Leak(label, surface.where, number, _excerpt(line, match)))
    return found


def _excerpt(line: str, match: re.Match[str]) -> str:
    start = max(match.start() - _EXCERPT_CHARS // 2, 0)
    return line[start : start + _EXCERPT_CHARS].strip()


def describe_leaks(leaks: Iterable[Leak], limit: int = 8, *, excerpts: bool = True) -> str:
    """One reason line naming what leaked and where (the first `limit` leaks). Without
    `excerpts` only the tell and the surface are named (for surfaces that may hold a
    secret-ish value, such as a sandbox's env or HOME), each pair once."""
    listed = list(leaks) if excerpts else list({leak.place: leak for leak in leaks}.values())
    shown = "; ".join(str(leak) if excerpts else leak.place for leak in listed[:limit])
    more = f"; and {len(listed) - limit} more" if len(listed) > limit else ""
    return f"{GUARD_REASON_PREFIX} harness tells visible to the agent: {shown}{more}"
