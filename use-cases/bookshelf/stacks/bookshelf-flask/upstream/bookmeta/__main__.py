"""Command line: `python -m bookmeta --port N [--library DB] [--profile NAME] ...`."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from types import FrameType

import uvicorn

from ._app import Capacity, create_app
from ._catalogue import load_catalogue
from ._holdings import HOLDINGS_SECONDS, HoldingsPacing
from ._pacing import Pacing
from ._profiles import DEFAULT_PROFILE, PROFILES


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bookmeta", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency-seconds", type=float, default=1.2)
    parser.add_argument("--jitter-seconds", type=float, default=0.1)
    parser.add_argument("--profile", choices=sorted(PROFILES), default=DEFAULT_PROFILE)
    parser.add_argument(
        "--error-rate", type=float, default=None, help="overrides the profile's error rate"
    )
    parser.add_argument(
        "--holdings-seconds", type=float, default=HOLDINGS_SECONDS,
        help="time a holdings answer takes (± a fifth), unless the profile sets its own",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--library", type=Path, help="SQLite library whose books get editions (read-only)"
    )
    return parser.parse_args(argv)


def _exit_cleanly(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM/SIGINT, then exit with status 0."""
    args = _parse(argv)
    # uvicorn drains, restores this handler and re-raises the signal it caught.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    profile = PROFILES[args.profile]
    error_rate = profile.error_rate if args.error_rate is None else args.error_rate
    pacing = Pacing(
        args.latency_seconds if profile.latency_seconds is None else profile.latency_seconds,
        args.jitter_seconds if profile.jitter_seconds is None else profile.jitter_seconds,
        error_rate,
        args.seed,
        busy_above_rate=profile.busy_above_rate,
        brownout_seconds=profile.brownout_seconds,
        brownout_every_seconds=profile.brownout_every_seconds,
        brownout_latency_seconds=profile.brownout_latency_seconds,
    )
    capacity = Capacity(profile.capacity, profile.queue_timeout_seconds)
    holdings_pacing = HoldingsPacing(
        args.holdings_seconds if profile.holdings_seconds is None else profile.holdings_seconds,
        args.seed,
        stall_seconds=profile.holdings_stall_seconds,
        stall_every_seconds=profile.holdings_stall_every_seconds,
    )
    holdings_capacity = Capacity(profile.holdings_capacity, profile.holdings_queue_timeout_seconds)
    try:
        catalogue = load_catalogue(args.library)
    except ValueError as error:
        raise SystemExit(f"bookmeta: {error}") from None
    uvicorn.run(
        create_app(pacing, catalogue, capacity, holdings_pacing, holdings_capacity),
        host=args.host,
        port=args.port,
        log_level="warning",
        lifespan="off",
        server_header=False,
        backlog=2048,
        timeout_graceful_shutdown=3,
    )


if __name__ == "__main__":
    main()
