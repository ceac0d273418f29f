"""The load generator's `/metrics` text, read once per sample: rates, ok ratio, latency."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sreforge_oracle._errors import ProbeError

__all__ = ["CLIENT_LATENCY", "LoadgenReading", "finite", "read_loadgen"]

CLIENT_LATENCY = "loadgen_client_latency_seconds"
"""The generator's histogram of every completed load request, as its client timed it."""
_CLIENT_P99 = "loadgen_client_p99_seconds"
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class LoadgenReading:
    """What one scrape of the generator says; each field `None` when absent from the text.

    `client_within_objective` is the histogram's cumulative bucket at the objective
    (`None` also when no bucket bound equals it). `observed` is `False` when the
    generator could not be read in time though its port was open (every field `None`):
    the load was not observed, which is not evidence that it died.
    """

    target_rps: float | None = None
    achieved_rps: float | None = None
    ok_ratio: float | None = None
    client_requests: float | None = None
    client_within_objective: float | None = None
    client_p99_seconds: float | None = None
    observed: bool = True


def read_loadgen(text: str, url: str, objective_seconds: float | None) -> LoadgenReading:
    """Parse the generator's exposition text; the worst ok ratio, the others summed."""
    series = _series(text, url)
    ok = [value for name, _, value in series if name == "loadgen_ok_ratio"]
    p99 = [value for name, _, value in series if name == _CLIENT_P99]
    within = None
    if objective_seconds is not None:
        within = _sum(
            value
            for name, labels, value in series
            if name == f"{CLIENT_LATENCY}_bucket" and _is_bound(labels.get("le"), objective_seconds)
        )
    return LoadgenReading(
        target_rps=_sum(v for n, _, v in series if n == "loadgen_target_rps"),
        achieved_rps=_sum(v for n, _, v in series if n == "loadgen_achieved_rps"),
        ok_ratio=min(ok) if ok else None,
        client_requests=_sum(v for n, _, v in series if n == f"{CLIENT_LATENCY}_count"),
        client_within_objective=within,
        client_p99_seconds=max(p99) if p99 else None,
    )


def finite(raw: Any, endpoint: str) -> float | None:
    """A sample value as a float; `None` for NaN and infinities (no value, never 0)."""
    try:
        value = float(raw)
    except (TypeError, ValueError) as error:
        raise ProbeError(f"sample value {raw!r} is not a number", endpoint=endpoint) from error
    return value if math.isfinite(value) else None


def _series(text: str, url: str) -> list[tuple[str, dict[str, str], float]]:
    """Every series line with a finite value: (metric name, labels, value)."""
    found: list[tuple[str, dict[str, str], float]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        head = line.split(" ", 1)[0]
        if "{" in head:
            name, _, rest = line.partition("{")
            labels, _, tail = rest.rpartition("}")
        else:
            name, _, tail = line.partition(" ")
            labels = ""
        fields = tail.split()
        if not fields:
            raise ProbeError(f"no value on the line {line!r}", endpoint=url)
        value = finite(fields[0], url)
        if value is not None:
            found.append((name, dict(_LABEL.findall(labels)), value))
    return found


def _sum(values: Iterable[float]) -> float | None:
    present = list(values)
    return sum(present) if present else None


def _is_bound(le: str | None, objective: float) -> bool:
    try:
        return le is not None and math.isclose(float(le), objective, rel_tol=1e-9)
    except ValueError:
        return False
