"""Named behaviours the service runs with (`--profile`), one table for every condition."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Profile:
    """What a profile changes about lookups; the CLI's seed still applies, and its latency
    and jitter unless the profile sets its own."""

    error_rate: float = 0.0
    # Errors (and brownouts) only while more lookups than this arrived in each of the
    # last 5 seconds (0: at any load).
    busy_above_rate: float = 0.0
    latency_seconds: float | None = None
    jitter_seconds: float | None = None
    # Lookups served at once (0: no limit); the others wait their turn, first come first
    # served, and one that has waited `queue_timeout_seconds` is refused with a 503. A
    # lookup keeps its place and its slot even when its caller has stopped waiting.
    capacity: int = 0
    queue_timeout_seconds: float = 0.0
    # Once traffic is sustained, lookups take `brownout_latency_seconds` for
    # `brownout_seconds`, at most once every `brownout_every_seconds` (0: never).
    brownout_seconds: float = 0.0
    brownout_every_seconds: float = 0.0
    brownout_latency_seconds: float = 0.0
    # Holdings: how long a count takes (None: the CLI's), how many are counted at once (0:
    # no limit; the others wait their turn as lookups do, and keep it when their caller
    # has gone), and a stall of `holdings_stall_seconds` every
    # `holdings_stall_every_seconds` (0: never) that answers starting in it, or under way
    # when it begins, wait out.
    holdings_seconds: float | None = None
    holdings_capacity: int = 0
    holdings_queue_timeout_seconds: float = 0.0
    holdings_stall_seconds: float = 0.0
    holdings_stall_every_seconds: float = 0.0


PROFILES: dict[str, Profile] = {
    "steady": Profile(),
    # One replica of several that cannot keep up once traffic is sustained: while more
    # than 15 lookups arrived in each of the last 5 seconds, 8 % of lookups answer 503
    # at once (no latency added); quieter traffic, or a burst after a quiet second, is
    # answered in full.
    "flaky-lookups": Profile(error_rate=0.08, busy_above_rate=15.0),
    # A small replica: 16 lookups at a time of ~0.4 s each (40 a second), a lookup that
    # waited 2.5 s for its turn refused. Once more than 15 lookups arrived in each of the
    # last 5 seconds it browns out: lookups take 2 s for 3 s (a fifth of its capacity),
    # then again 30 s later if the traffic is still sustained. A burst after a quiet
    # second (a warm-up) and a working cache's refreshes never brown it out.
    "brownout": Profile(
        busy_above_rate=15.0,
        latency_seconds=0.4,
        jitter_seconds=0.02,
        capacity=16,
        queue_timeout_seconds=2.5,
        brownout_seconds=3.0,
        brownout_every_seconds=30.0,
        brownout_latency_seconds=2.0,
    ),
    # A lending network that counts one book at a time (~50 ms each, 20 a second), a
    # count that waited 2.5 s for its turn refused, and that pauses for 0.15 s every 10 s
    # to sync. A caller that waits its turn sees a pause as at most 0.15 s more, once; one
    # that gives up on a count after 0.1 s and asks again at once leaves the abandoned
    # count in the queue: past 20 asks a second the queue never drains (retry
    # amplification).
    "holdings-hiccups": Profile(
        holdings_seconds=0.05,
        holdings_capacity=1,
        holdings_queue_timeout_seconds=2.5,
        holdings_stall_seconds=0.15,
        holdings_stall_every_seconds=10.0,
    ),
}

DEFAULT_PROFILE = "steady"
