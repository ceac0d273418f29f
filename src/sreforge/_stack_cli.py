"""`sreforge stack up|down|list`: run one scenario's stack by hand and poke at it.

`cli.py` wires this in with `add_stack_commands(subparsers)`; each verb sets
`args.handler`, a function `(argparse.Namespace) -> int` returning the exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType

from sreforge_deployer import DeployerError, DeployerSettings
from sreforge_deployer.local import LocalStack, StackRecord, list_stacks, owner_alive, teardown_run

__all__ = [
    "add_stack_commands",
    "cli_owned_settings",
    "describe_stack",
    "handle_stack_down",
    "handle_stack_list",
    "handle_stack_up",
    "main",
    "resolve_scenario",
    "sigterm_interrupts",
]

_SCENARIO_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def add_stack_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `stack up`, `stack down` and `stack list` on an argparse subparsers object."""
    stack = subparsers.add_parser("stack", help="run a scenario's stack locally, by hand")
    verbs = stack.add_subparsers(dest="stack_verb", required=True)
    up = verbs.add_parser("up", help="start a stack, print its endpoints, keep it until Ctrl-C")
    up.add_argument("scenario", help="scenario id (e.g. latency-cache-stampede) or folder")
    up.add_argument("--time-scale", type=float, default=1.0, help="0 < S <= 1 (default 1)")
    up.add_argument("--arm", action="store_true", help="deliver the fault and start the load")
    up.add_argument("--run-id", default=None, help="run id (default: a fresh run-xxxxxxxx)")
    up.add_argument(
        "--webhook-url",
        default=None,
        help="where Alertmanager pages (default: a receiver here that prints the pages)",
    )
    up.set_defaults(handler=handle_stack_up)
    down = verbs.add_parser("down", help="tear down stacks started by `stack up` elsewhere")
    down.add_argument("run_id", nargs="?", help="the run id `stack up` printed")
    down.add_argument(
        "--all", action="store_true", help="every stack this engine home (SREFORGE_HOME) started"
    )
    down.set_defaults(handler=handle_stack_down)
    listing = verbs.add_parser(
        "list", help="list every stack under the runs root, with its owner and whether it runs"
    )
    listing.set_defaults(handler=handle_stack_list)


def handle_stack_up(args: argparse.Namespace) -> int:
    """Start the stack, print endpoints, optionally arm, wait for Ctrl-C/SIGTERM, tear down."""
    try:
        scenario = resolve_scenario(args.scenario)
    except ValueError as error:
        print(f"sreforge stack up: {error}", file=sys.stderr)
        return 2
    receiver = None if args.webhook_url else _PageReceiver()
    webhook = args.webhook_url or (receiver.url if receiver else None)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    stack: LocalStack | None = None
    try:
        stack = LocalStack(
            scenario,
            time_scale=args.time_scale,
            run_id=args.run_id,
            webhook_url=webhook,
            settings=cli_owned_settings(),
        )
        print(
            f"starting stack {stack.run_id} for {scenario.name} "
            f"(time scale {args.time_scale:g}) in {stack.run_dir} ...",
            flush=True,
        )
        started = time.monotonic()
        stack.up()
        print(f"up in {time.monotonic() - started:.1f}s", flush=True)
        _print_endpoints(stack)
        if args.arm:
            print(f"armed at base commit {stack.arm()}; load running", flush=True)
        print(f"Ctrl-C (or `sreforge stack down {stack.run_id}`) to tear down.", flush=True)
        _wait_until_interrupted(stack)
    except KeyboardInterrupt:
        pass
    except DeployerError as error:
        print(f"sreforge stack up: {error}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        code = _down(stack)
        if receiver is not None:
            receiver.close()
    return code


def handle_stack_down(args: argparse.Namespace) -> int:
    """Tear down one stack by run id, or all of them with `--all`; verify nothing remains."""
    root = DeployerSettings().runs_root
    if args.all == bool(args.run_id):
        print("sreforge stack down: give a RUN_ID or --all (not both)", file=sys.stderr)
        return 2
    run_ids = _stacks_of_this_home(root) if args.all else [args.run_id]
    if not run_ids:
        print(f"no stacks of this engine home under {root}")
    failed = 0
    for run_id in run_ids:
        try:
            teardown_run(root, run_id)
            print(f"{run_id}: torn down, nothing left")
        except DeployerError as error:
            print(f"{run_id}: {error}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _stacks_of_this_home(root: Path) -> list[str]:
    """Run ids of the stacks this engine home started; says which others it leaves alone."""
    home = DeployerSettings().engine_home
    mine = []
    for record in list_stacks(root):
        if record.owned_by(home):
            mine.append(record.run_id)
        elif record.engine_home is None:
            print(
                f"{record.run_id}: left alone: its record names no engine home (older "
                f"format); `sreforge stack down {record.run_id}` tears it down"
            )
        else:
            print(f"{record.run_id}: left alone: started from engine home {record.engine_home}")
    return mine


def handle_stack_list(args: argparse.Namespace) -> int:
    """Print every stack under the runs root (whichever home started it): run id,
    scenario, its owner and whether that owner runs, its home, its agent endpoints."""
    root = DeployerSettings().runs_root
    records = list_stacks(root)
    print(f"{len(records)} stack(s) under {root}")
    for record in records:
        print(describe_stack(record, alive=owner_alive(record)))
    return 0


def describe_stack(record: StackRecord, *, alive: bool) -> str:
    """One line of `stack list`: who owns the stack, whether it runs, what becomes of it."""
    if alive:
        owner = f"owner pid {record.owner_pid} running"
    elif record.dies_with_owner:
        owner = f"owner pid {record.owner_pid} GONE (reaped at the next engine start)"
    else:
        owner = f"owner pid {record.owner_pid} GONE (`sreforge stack down {record.run_id}`)"
    home = f"home {record.engine_home}" if record.engine_home else "home unrecorded"
    endpoints = " ".join(f"{k}={v}" for k, v in sorted(record.agent_endpoints.items()))
    return f"{record.run_id}  {record.scenario_id}  {owner}  {home}  {endpoints}".rstrip()


def cli_owned_settings() -> DeployerSettings:
    """The settings of a stack a command owns (`stack up`, `guard`): nobody adopts it, so
    it dies with the command, however that ends, unless
    `SREFORGE_DEPLOYER_STACKS_DIE_WITH_OWNER` says otherwise."""
    settings = DeployerSettings()
    if "SREFORGE_DEPLOYER_STACKS_DIE_WITH_OWNER" in os.environ:
        return settings
    return settings.model_copy(update={"stacks_die_with_owner": True})


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt for the block, as Ctrl-C does: a command stopped
    by `timeout` or `kill` takes the Ctrl-C path (its stack torn down on the way out)."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def resolve_scenario(name: str) -> Path:
    """A scenario folder from a path, or from an id under `use-cases/*/scenarios/`."""
    as_path = Path(name)
    if as_path.is_dir():
        return as_path.resolve()
    if not _SCENARIO_ID.match(name):
        raise ValueError(f"scenario id {name!r} must match {_SCENARIO_ID.pattern}")
    for root in _use_case_roots():
        found = sorted(root.glob(f"*/scenarios/{name}"))
        if found:
            return found[0]
    raise ValueError(f"no scenario {name!r} under use-cases/*/scenarios/")


def _use_case_roots() -> list[Path]:
    roots = [Path(os.environ["SREFORGE_USE_CASES"])] if "SREFORGE_USE_CASES" in os.environ else []
    for start in (Path.cwd(), Path(__file__).resolve()):
        roots += [parent / "use-cases" for parent in (start, *start.parents)]
    return [root for root in roots if root.is_dir()]


def _print_endpoints(stack: LocalStack) -> None:
    endpoints = stack.endpoints
    print("agent view:")
    for name, url in endpoints.agent.items():
        print(f"  {name:14} {url}")
    print("operator view:")
    for name, url in endpoints.operator.items():
        if name not in endpoints.agent:
            print(f"  {name:14} {url}")
    workspace = stack.workspace.path if stack.workspace else "-"
    print(f"  {'workspace':14} {workspace}")
    print(f"  {'logs':14} {stack.run_dir / 'logs'}")
    print(f"  {'webhook':14} {stack.webhook_url or '-'}", flush=True)


def _wait_until_interrupted(stack: LocalStack) -> None:
    # Also stop if someone removed the run dir under us (a forced `stack down`).
    while stack.run_dir.exists():
        time.sleep(0.5)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _down(stack: LocalStack | None) -> int:
    if stack is None:
        return 0
    print("tearing down ...", flush=True)
    try:
        stack.down()
    except DeployerError as error:
        print(f"sreforge stack up: {error}", file=sys.stderr)
        return 1
    print(f"{stack.run_id}: torn down, nothing left", flush=True)
    return 0


class _PageReceiver:
    """A loopback webhook receiver that prints each page Alertmanager sends."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                for alert in body.get("alerts", []):
                    name = alert.get("labels", {}).get("alertname", "?")
                    print(f"page: {name} {alert.get('status', '?')}", flush=True)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/pages"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m sreforge._stack_cli stack up ...`) until cli.py wires it."""
    parser = argparse.ArgumentParser(prog="sreforge")
    add_stack_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
