"""Command line: `python -m loadgen --target URL --rate R --profile P --port N [--truth-db DB]`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from ._control import control_app
from ._generator import LoadGenerator
from ._profiles import DEFAULT_SEED, PROFILE_NAMES, profile_named
from ._truth import TruthError

log = logging.getLogger("loadgen")


class _Server(uvicorn.Server):
    """uvicorn, but SIGTERM/SIGINT only end serving: no re-raise, so we exit 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._request_exit)
        try:
            yield
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    def _request_exit(self) -> None:
        self.should_exit = True


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="loadgen", description=__doc__)
    parser.add_argument("--target", required=True, help="base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--rate", type=float, required=True, help="arrivals per second")
    parser.add_argument("--profile", default="search-storm", choices=PROFILE_NAMES)
    parser.add_argument("--port", type=int, required=True, help="control/metrics port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--timeout-seconds", type=float, default=10.0)
    parser.add_argument("--window-seconds", type=float, default=10.0)
    parser.add_argument("--paused", action="store_true", help="start paused; POST /resume")
    parser.add_argument(
        "--truth-db", type=Path, help="the seeded library (read-only): expected answers"
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="orders and weights the working set"
    )
    return parser.parse_args(argv)


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
    )
    config = uvicorn.Config(
        control_app(generator), host=args.host, port=args.port, log_level="warning",
        lifespan="off",
    )  # fmt: skip
    server = _Server(config)
    arrivals = asyncio.create_task(generator.run())
    log.info("%s at %.1f rps against %s", args.profile, args.rate, args.target)
    try:
        await server.serve()
    finally:
        await generator.stop()
        arrivals.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await arrivals
    log.info("stopped")


def main(argv: list[str] | None = None) -> None:
    """Run until SIGTERM or SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s loadgen %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(_main(_parse(argv)))


if __name__ == "__main__":
    main()
