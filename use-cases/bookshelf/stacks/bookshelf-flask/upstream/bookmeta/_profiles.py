"""Named behaviours the service runs with (`--profile`), one table for every condition."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Profile:
    """What a profile changes about lookups; the CLI's latency and seed still apply."""

    error_rate: float = 0.0
    # Errors only while more lookups than this arrived in each of the last 5 seconds
    # (0: at any load).
    busy_above_rate: float = 0.0


PROFILES: dict[str, Profile] = {
    "steady": Profile(),
    # One replica of several that cannot keep up once traffic is sustained: while more
    # than 15 lookups arrived in each of the last 5 seconds, 8 % of lookups answer 503
    # at once (no latency added); quieter traffic, or a burst after a quiet second, is
    # answered in full.
    "flaky-lookups": Profile(error_rate=0.08, busy_above_rate=15.0),
}

DEFAULT_PROFILE = "steady"
