"""Worker hosts on one machine: Linux network namespaces, a 3-node NATS cluster, workers.

Each `NetHost` is a network namespace with its own loopback (where its stacks listen)
and a veth pair to the root namespace; the NATS nodes listen in the root namespace on
the first host's outer address, which every namespace reaches through its veth (its
default route). `Fleet` starts the cluster with the engine home's bus users, then one
`sreforge serve --worker <host>` per namespace. Needs root and `ip` (iproute2).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from sreforge_bus import BOOTSTRAP_USER, OPERATOR_USER, Bus, BusError, connect, load_credentials
from sreforge_bus.embedded import find_nats_server

from sreforge._engine import bus_credentials
from sreforge._settings import EngineSettings

__all__ = ["Fleet", "NetHost", "fleet", "netns_missing"]

REPO = Path(__file__).resolve().parents[2]
CLUSTER_READY_S = 60.0
WORKER_READY_S = 90.0


def netns_missing() -> str | None:
    """Why network namespaces cannot be made here (not root, no `ip`), else None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2): run scripts/setup"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@dataclass
class NetHost:
    """One network namespace `ns` joined to the root namespace by a veth pair."""

    name: str
    ns: str
    inner: str
    outer: str

    @property
    def veth(self) -> str:
        """The root-side end of the pair."""
        return f"{self.ns}o"

    def create(self) -> NetHost:
        """Make the namespace, its loopback and the veth pair with a default route."""
        self.remove()  # one a killed test session left behind
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.veth, "type", "veth", "peer", "name", f"{self.ns}i")
        _ip("link", "set", f"{self.ns}i", "netns", self.ns)
        _ip("addr", "add", f"{self.outer}/30", "dev", self.veth)
        _ip("link", "set", self.veth, "up")
        inside = ("netns", "exec", self.ns, "ip")
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "addr", "add", f"{self.inner}/30", "dev", f"{self.ns}i")
        _ip(*inside, "link", "set", f"{self.ns}i", "up")
        _ip(*inside, "route", "add", "default", "via", self.outer)
        return self

    def argv(self, command: list[str]) -> list[str]:
        """`command` run inside the namespace."""
        return ["ip", "netns", "exec", self.ns, *command]

    def pids(self) -> list[int]:
        """Every process whose network namespace is this one."""
        found = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True,
                               text=True, timeout=10)  # fmt: skip
        return [int(pid) for pid in found.stdout.split()]

    def die(self) -> None:
        """The host dies: SIGKILL everything in it (its worker and all its stacks).

        A stack's jailed service runs in a network namespace of its own, nested in the
        host's, so `pids` does not list it: the descendants of what it lists go too.
        """
        doomed = set(self.pids())
        for pid in list(doomed):
            with contextlib.suppress(psutil.Error):
                doomed.update(child.pid for child in psutil.Process(pid).children(recursive=True))
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Kill what runs inside, then delete the pair and the namespace."""
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            self.die()
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", self.veth)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", self.ns)


@dataclass
class Fleet:
    """A 3-node NATS cluster and one worker per `NetHost`, sharing one engine home."""

    root: Path
    hosts: list[NetHost]
    ports: list[int]
    nodes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def hub(self) -> str:
        """The address every NATS node listens on (reachable from every namespace)."""
        return self.hosts[0].outer

    @property
    def nats_url(self) -> str:
        """Every node's client URL, comma-separated (clients fail over between them)."""
        return ",".join(f"nats://{self.hub}:{port}" for port in self.ports)

    @property
    def home(self) -> Path:
        """The engine home every worker and the operator share (bus users, token)."""
        return self.root / "home" / "sreforge"

    def env(self, agents: str = "reference,noop") -> dict[str, str]:
        """Settings of the workers and of the operator's `sreforge campaign`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SREFORGE_")}
        env.update(
            SREFORGE_HOME=str(self.home),
            SREFORGE_NATS_URL=self.nats_url,
            SREFORGE_NATS_REPLICAS="3",
            SREFORGE_WORKER_HOSTS=",".join(host.name for host in self.hosts),
            SREFORGE_WORKER_SLOTS="1",
            # Over a cluster's fail-over (a new leader for the run store in ~5 s here).
            SREFORGE_WORKER_LEASE_TTL_SECONDS="15",
            SREFORGE_RECORDER_RUNS_DIR=str(self.root / "records"),
            SREFORGE_RECORDER_BANK="false",
            SREFORGE_DEPLOYER_RUNS_ROOT=str(self.root / "stacks"),
            SREFORGE_CAMPAIGNS_DIR=str(self.root / "campaigns"),
            SREFORGE_CORRELATOR_AGENTS=agents,
            SREFORGE_LOG_FORMAT="json",
        )
        return env

    def log(self, name: str) -> Path:
        """The log file of node or worker `name`."""
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        return self.root / "logs" / f"{name}.log"

    def tail(self, name: str) -> str:
        """The end of `name`'s log, for failure messages."""
        path = self.log(name)
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"

    def start_cluster(self, config: Path) -> None:
        """Three JetStream nodes routed to each other, enforcing the home's bus users."""
        binary = str(find_nats_server())
        cluster = _free_ports(self.hub, len(self.ports))
        for index, port in enumerate(self.ports):
            routes = ",".join(f"nats://{self.hub}:{c}" for c in cluster if c != cluster[index])
            argv = [binary, "-c", str(config), "-js", "-sd", str(self.root / f"node{index}"),
                    "-n", f"node{index}", "--cluster_name", "sreforge", "-a", self.hub,
                    "-p", str(port), "--cluster", f"nats://{self.hub}:{cluster[index]}",
                    "--routes", routes]  # fmt: skip
            with self.log(f"node{index}").open("ab") as out:
                self.nodes.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                   start_new_session=True))  # fmt: skip

    async def bus(self, user: str = OPERATOR_USER) -> Bus:
        """A connection to the cluster as `user` of the home (read, never re-rendered: a
        render without `SREFORGE_WORKER_HOSTS` would drop the hosts' durables)."""
        credential = load_credentials(EngineSettings(home=self.home).bus_dir).credential(user)
        return await connect(self.nats_url, name=f"pytest-{user}", credential=credential)

    async def jetstream_ready(self) -> None:
        """Wait until the cluster has a JetStream meta leader (it answers account info)."""
        deadline = time.monotonic() + CLUSTER_READY_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            with contextlib.suppress(BusError):
                bus = await self.bus(BOOTSTRAP_USER)
                try:
                    await bus.js.account_info()
                    return
                except Exception as error:  # not ready yet: no meta leader
                    last = error
                finally:
                    await bus.close()
            await asyncio.sleep(0.5)
        logs = "\n".join(self.tail(f"node{i}") for i in range(len(self.ports)))
        raise AssertionError(f"the NATS cluster had no JetStream leader ({last!r}):\n{logs}")

    def start_worker(self, host: NetHost) -> None:
        """`sreforge serve --worker <host>` inside the host's namespace."""
        argv = host.argv([sys.executable, "-m", "sreforge", "serve", "--worker", host.name])
        with self.log(host.name).open("ab") as out:
            self.workers[host.name] = subprocess.Popen(
                argv, cwd=REPO, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def workers_ready(self) -> None:
        """Every worker host served every service (and its trigger listens)."""
        deadline = time.monotonic() + WORKER_READY_S
        while time.monotonic() < deadline:
            for name, proc in self.workers.items():
                if proc.poll() is not None:
                    raise AssertionError(f"worker {name} exited {proc.returncode}:\n"
                                         f"{self.tail(name)}")  # fmt: skip
            texts = [self.log(name).read_text(errors="replace") for name in self.workers]
            if all('"engine.ready"' in t and '"trigger.listening"' in t for t in texts):
                return
            time.sleep(0.5)
        raise AssertionError("workers not ready:\n" + "\n".join(map(self.tail, self.workers)))

    def kill_node(self, index: int) -> None:
        """SIGKILL one NATS node (the cluster goes on with the other two)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.nodes[index].pid, signal.SIGKILL)
        self.nodes[index].wait(timeout=10)

    def stop(self) -> None:
        """Stop the workers (SIGTERM, then SIGKILL), the hosts, then the nodes."""
        for proc in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.workers.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        try:
            for host in self.hosts:
                host.remove()
        finally:
            for node in self.nodes:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.pid, signal.SIGKILL)
                node.wait(timeout=10)


@contextlib.contextmanager
def fleet(root: Path, names: tuple[str, ...] = ("a", "b")) -> Iterator[Fleet]:
    """Two worker hosts in namespaces on a 3-node cluster, ready; all removed afterwards."""
    tag = f"sf{os.getpid() % 100000}"
    net = 100 + os.getpid() % 100
    hosts = [NetHost(name, f"{tag}{name}", f"10.{net}.{i}.2", f"10.{net}.{i}.1")
             for i, name in enumerate(names, start=1)]  # fmt: skip
    group = Fleet(root, hosts, [])
    try:
        for host in hosts:
            host.create()
        group.ports = _free_ports(group.hub, 3)
        settings = EngineSettings(home=group.home, worker_hosts=",".join(names))
        config = bus_credentials(settings).config_file
        group.start_cluster(config)
        asyncio.run(group.jetstream_ready())
        for host in hosts:
            group.start_worker(host)
        group.workers_ready()
        yield group
    finally:
        group.stop()


def _free_ports(address: str, count: int) -> list[int]:
    """`count` distinct ports free on `address` right now."""
    probes = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for probe in probes:
            probe.bind((address, 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()
