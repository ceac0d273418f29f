"""The `sreforge` command line: start the engine, follow runs, manage scenarios and stacks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]

SERVICE_NAMES = ("trigger", "correlator", "context", "runner", "deployer", "oracle", "recorder")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `sreforge` command line and return its exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    from sreforge_report import ReportError

    from sreforge._errors import SreforgeError

    try:
        code: int = args.handler(args)
    except (SreforgeError, ReportError) as error:
        print(f"sreforge: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sreforge",
        description="Benchmark AI SRE agents on live incidents they must fix in code.",
    )
    verbs = parser.add_subparsers(title="commands", metavar="COMMAND")

    up = verbs.add_parser("up", help="run every service in one process (embedded NATS by default)")
    up.set_defaults(handler=_up)

    serve = verbs.add_parser(
        "serve",
        help="run services against SREFORGE_NATS_URL (one, several, or a worker host's)",
        description="Run the named services in this process against SREFORGE_NATS_URL. "
        "With --worker HOST (default: every service) this process is worker host HOST: it "
        "pulls run requests from the work queue while it has a free stack slot "
        "(SREFORGE_WORKER_SLOTS), holds a lease on HOST, and owns each run it takes to the end.",
    )
    serve.add_argument("service", nargs="*", metavar="SERVICE", help=", ".join(SERVICE_NAMES))
    serve.add_argument("--worker", metavar="HOST", help="serve as this worker host")
    serve.set_defaults(handler=_serve)

    tail = verbs.add_parser("tail", help="follow the bus: one line per event")
    tail.add_argument("--run", metavar="RUN_ID", help="only this run's events")
    tail.add_argument("--json", action="store_true", help="one JSON object per line")
    tail.add_argument("--new", action="store_true", help="skip events already in the stream")
    tail.set_defaults(handler=_tail)

    bus = verbs.add_parser("bus", help="the bus's users: credentials and nats-server config")
    bus_verbs = bus.add_subparsers(title="bus commands", metavar="VERB")
    config = bus_verbs.add_parser(
        "config",
        help="create the home's bus credentials if needed and print the server config's path",
        description="Print the path of the nats-server configuration (users and subject "
        "permissions) of this SREFORGE_HOME. An external server enforces the bus users "
        'when started with it: nats-server -js -c "$(sreforge bus config)".',
    )
    config.add_argument(
        "--credential", metavar="USER", help="print the path of USER's credential file instead"
    )
    config.set_defaults(handler=_bus_config)

    from sreforge._scenarios import add_scenarios_commands

    add_scenarios_commands(verbs)

    from sreforge._agents_cli import add_agents_commands
    from sreforge._run_cli import add_run_command
    from sreforge.campaign import add_campaign_command
    from sreforge.qualify import add_qualify_command
    from sreforge.rca import add_judge_command
    from sreforge.report import add_report_commands

    add_run_command(verbs)
    add_campaign_command(verbs)
    add_qualify_command(verbs)
    add_agents_commands(verbs)
    add_report_commands(verbs)
    add_judge_command(verbs)
    _add_stack_commands(verbs)
    _add_guard_command(verbs)
    return parser


def _add_stack_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    try:
        from sreforge._stack_cli import add_stack_commands
    except ImportError:  # the local topology is optional until its package lands
        return
    add_stack_commands(verbs)


def _add_guard_command(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    try:
        from sreforge._guard_cli import add_guard_command
    except ImportError:  # needs the local topology, like `stack`
        return
    add_guard_command(verbs)


def _up(args: argparse.Namespace) -> int:
    from sreforge._dashboard_wiring import announce_dashboard
    from sreforge._engine import run_engine
    from sreforge._settings import EngineSettings

    print(announce_dashboard(EngineSettings()), flush=True)
    return run_engine(SERVICE_NAMES)


def _serve(args: argparse.Namespace) -> int:
    from sreforge._engine import run_engine

    unknown = [name for name in args.service if name not in SERVICE_NAMES]
    if unknown or (not args.service and args.worker is None):
        why = f"unknown service {unknown[0]!r}" if unknown else "name a service (or --worker)"
        print(f"sreforge serve: {why}; services: {', '.join(SERVICE_NAMES)}", file=sys.stderr)
        return 2
    import re

    from sreforge_bus import HOST_PATTERN

    if args.worker is not None and not re.match(HOST_PATTERN, args.worker):
        print(f"sreforge serve: worker host {args.worker!r} must match {HOST_PATTERN}",
              file=sys.stderr)  # fmt: skip
        return 2
    names = tuple(args.service) or SERVICE_NAMES
    return run_engine(names, embedded=False, worker=args.worker)


def _tail(args: argparse.Namespace) -> int:
    from sreforge._engine import tail_events

    return tail_events(run_id=args.run, as_json=args.json, only_new=args.new)


def _bus_config(args: argparse.Namespace) -> int:
    from sreforge_bus import BusError

    from sreforge._engine import bus_credentials
    from sreforge._settings import EngineSettings

    try:
        credentials = bus_credentials(EngineSettings())
        path = credentials.config_file
        if args.credential is not None:
            path = credentials.credential_file(args.credential)
    except BusError as error:
        print(f"sreforge bus config: {error}", file=sys.stderr)
        return 2
    print(path)
    return 0
