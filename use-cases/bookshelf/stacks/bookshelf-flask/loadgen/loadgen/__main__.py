"""Command line: `python -m loadgen --target URL --rate R --profile P --port N [--truth-db DB]`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import threading
from pathlib import Path
from types import FrameType

from ._control import ControlServer
from ._generator import LoadGenerator
from ._profiles import DEFAULT_SEED, PROFILE_NAMES, profile_named
from ._truth import TruthError

log = logging.getLogger("loadgen")
_EXIT_DEADLINE_SECONDS = 5.0
"""After SIGTERM/SIGINT the process is gone within this long, whatever is in flight."""


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="loadgen", description=__doc__)
    parser.add_argument("--target", required=True, help="base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--rate", type=float, required=True, help="arrivals per second")
    parser.add_argument("--profile", default="search-storm", choices=PROFILE_NAMES)
    parser.add_argument("--port", type=int, required=True, help="control/metrics port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--timeout-seconds", type=float, default=10.0)
    parser.add_argument("--window-seconds", type=float, default=10.0)
    parser.add_argument(
        "--max-inflight", type=int, help="in flight at most; beyond, arrivals are shed"
    )
    parser.add_argument(
        "--nice", type=int, default=-5, help="scheduling priority to take when allowed (0: keep)"
    )
    parser.add_argument("--paused", action="store_true", help="start paused; POST /resume")
    parser.add_argument(
        "--truth-db", type=Path, help="the seeded library (read-only): expected answers"
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="orders and weights the working set"
    )
    return parser.parse_args(argv)


def _force_exit() -> None:
    log.warning(
        "still winding down %.0fs after the stop signal; exiting now", _EXIT_DEADLINE_SECONDS
    )
    logging.shutdown()
    os._exit(0)


def _take_priority(nice: int) -> None:
    """Best effort: a busy host should delay the measured service, not the measurement.

    Taken before any thread starts (threads inherit it); refused without the privilege,
    and then the generator runs at the priority it was given.
    """
    if nice == 0:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError as error:
        log.info("running at the given priority (nice %d refused: %s)", nice, error.strerror)


def _stop_on_signals(loop: asyncio.AbstractEventLoop, stopping: asyncio.Event) -> None:
    """SIGTERM/SIGINT: stop now, and be gone within the deadline; a second one exits at once.

    A plain handler, not the loop's: it runs as soon as the main thread gets the signal,
    so a starved loop neither delays the deadline nor hides the signal.
    """
    received: list[int] = []

    def handle(signum: int, _frame: FrameType | None) -> None:
        if received:
            os._exit(0)
        received.append(signum)
        threading.Timer(_EXIT_DEADLINE_SECONDS, _force_exit).start()
        loop.call_soon_threadsafe(stopping.set)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handle)


async def _main(args: argparse.Namespace) -> None:
    try:
        profile = profile_named(args.profile, args.truth_db, args.seed)
    except (TruthError, ValueError) as error:
        raise SystemExit(f"loadgen: {error}") from None
    generator = LoadGenerator(
        args.target,
        args.rate,
        profile,
        timeout_seconds=args.timeout_seconds,
        window_seconds=args.window_seconds,
        paused=args.paused,
        max_inflight=args.max_inflight,
    )
    loop = asyncio.get_running_loop()
    try:
        control = ControlServer(generator, loop, args.host, args.port)
    except OSError as error:
        raise SystemExit(f"loadgen: cannot listen on {args.host}:{args.port}: {error}") from None
    stopping = asyncio.Event()
    _stop_on_signals(loop, stopping)
    control.start()
    arrivals = asyncio.create_task(generator.run())
    log.info(
        "%s at %.1f rps against %s (at most %d in flight)",
        args.profile, args.rate, args.target, generator.max_inflight,
    )  # fmt: skip
    try:
        await stopping.wait()
    finally:
        control.close()
        await generator.stop()
        arrivals.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await arrivals
    log.info("stopped")


def main(argv: list[str] | None = None) -> None:
    """Run until SIGTERM or SIGINT, then exit 0 (within `_EXIT_DEADLINE_SECONDS`)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s loadgen %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args = _parse(argv)
    _take_priority(args.nice)
    asyncio.run(_main(args))
    logging.shutdown()
    # Daemon threads (keep-alive control connections) must not hold the exit up.
    os._exit(0)


if __name__ == "__main__":
    main()
