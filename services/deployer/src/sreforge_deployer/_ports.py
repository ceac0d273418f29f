"""Loopback port leases that cannot collide between stacks on one machine.

Why a lock-file scheme and not bind-and-hold: the components (Prometheus, gunicorn,
...) bind their own sockets, so the deployer cannot hand them a held socket. Instead,
every port a stack uses is *leased*:

1. candidates come from a range below the kernel's ephemeral range (default
   20000-32000; ephemeral ports start at 32768), so outgoing connections never
   squat on a port we are about to hand out;
2. a lease is an exclusive, non-blocking `flock` on `<lock_dir>/<port>.lock`, held by
   the stack's owning process for the stack's whole life. Another SREForge process
   cannot lease the same port; the kernel drops the lock if the owner dies, so a
   crashed owner never leaks a port forever;
3. the port must also be bindable right now (something outside SREForge may hold it);
4. just before a component starts, `ensure_free` re-checks the port, so a port taken
   in between fails with an error naming the component instead of a confusing crash.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from sreforge_deployer._errors import PortUnavailableError, StackLostError

__all__ = [
    "PortAllocator",
    "PortLease",
    "ensure_free",
    "is_bindable",
    "listening_ports",
    "reap_stale_lease",
    "reclaim_leases",
    "wait_bindable",
]

_LOOPBACK = "127.0.0.1"
_PROC_NET_TCP = ("/proc/net/tcp", "/proc/net/tcp6")
_TCP_LISTEN = "0A"  # the kernel's st code for LISTEN


@dataclass
class PortLease:
    """One leased loopback port; `release()` frees it (idempotent)."""

    port: int
    lock_path: Path
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        """Drop the lease and remove its lock file."""
        if self._fd is None:
            return
        # Unlink before unlocking: a waiter that opened the old inode re-checks the
        # inode after locking and retries, so two holders can never coexist.
        try:
            self.lock_path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None


class PortAllocator:
    """Leases free loopback ports from `[low, high)`, coordinated through `lock_dir`."""

    def __init__(self, lock_dir: Path, low: int = 20000, high: int = 32000) -> None:
        if not 1024 <= low < high <= 65536:
            raise ValueError(f"port range [{low}, {high}) is not a valid unprivileged range")
        self.lock_dir = lock_dir
        self.low = low
        self.high = high

    def lease(self, count: int = 1) -> list[PortLease]:
        """Lease `count` distinct ports, or raise `PortUnavailableError` leasing none."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        leases: list[PortLease] = []
        for port in self._candidates():
            lease = self._try_lease(port)
            if lease is None:
                continue
            leases.append(lease)
            if len(leases) == count:
                return leases
        for lease in leases:
            lease.release()
        raise PortUnavailableError(
            f"no {count} free loopback ports in [{self.low}, {self.high}) "
            f"(lock dir {self.lock_dir})"
        )

    def reclaim(self, port: int) -> PortLease | None:
        """Lease `port` again for a stack this process adopts (its component holds the
        port, so no bind check); None when a live process holds its lease."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        return self._try_lease(port, bound=True)

    def _candidates(self) -> Iterator[int]:
        span = self.high - self.low
        start = random.randrange(span)
        for offset in range(span):
            yield self.low + (start + offset) % span

    def _try_lease(self, port: int, *, bound: bool = False) -> PortLease | None:
        path = self.lock_dir / f"{port}.lock"
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EAGAIN, errno.EACCES):
                return None
            raise
        if not _same_inode(fd, path) or not (bound or is_bindable(port)):
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return PortLease(port=port, lock_path=path, _fd=fd)


def reap_stale_lease(lock_dir: Path, port: int) -> None:
    """Remove `port`'s lock file if no live process holds it (its owner was killed)."""
    path = lock_dir / f"{port}.lock"
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return
    PortLease(port=port, lock_path=path, _fd=fd).release()


def _same_inode(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def is_bindable(port: int) -> bool:
    """Whether a server could bind 127.0.0.1:`port` right now (as servers do, SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((_LOOPBACK, port))
        except OSError:
            return False
    return True


def wait_bindable(port: int, timeout_seconds: float) -> bool:
    """Poll until `port` can be bound (a stopped server's socket released), or the deadline."""
    deadline = time.monotonic() + timeout_seconds
    while not is_bindable(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def ensure_free(component: str, port: int) -> None:
    """Raise `PortUnavailableError` naming `component` if `port` cannot be bound now."""
    if is_bindable(port):
        return
    holders = sorted(
        {
            f"pid {conn.pid}" if conn.pid else "another user's process"
            for conn in psutil.net_connections(kind="tcp")
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN
        }
    )
    held_by = f" (held by {', '.join(holders)})" if holders else ""
    raise PortUnavailableError(
        f"component {component!r}: port {_LOOPBACK}:{port} is already taken{held_by}",
        component=component,
        port=port,
    )


def listening_ports(ports: set[int]) -> set[int]:
    """Those of `ports` that some process is listening on (any address)."""
    if not ports:
        return set()
    try:
        return _kernel_listening() & ports
    except OSError:  # no /proc/net: ask psutil, which also maps sockets to processes
        return {
            conn.laddr.port
            for conn in psutil.net_connections(kind="tcp")
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port in ports
        }


def _kernel_listening() -> set[int]:
    """Every TCP port in LISTEN state, read from the kernel's socket tables.

    Much cheaper than `psutil.net_connections`, which also walks every process's file
    descriptors to find each socket's owner; a teardown only needs the ports.
    """
    found = set()
    for table in _PROC_NET_TCP:
        with open(table, encoding="ascii") as rows:
            next(rows, None)  # the header
            for row in rows:
                fields = row.split()
                if len(fields) > 3 and fields[3] == _TCP_LISTEN:
                    found.add(int(fields[1].rsplit(":", 1)[1], 16))
    return found


def reclaim_leases(
    run_id: str, ports: Mapping[str, int], allocator: PortAllocator
) -> dict[str, PortLease]:
    """The leases of a stack being taken over (its state file's `ports`), all or none:
    `StackLostError` when a live process still holds one."""
    leases: dict[str, PortLease] = {}
    for name, port in ports.items():
        lease = allocator.reclaim(port)
        if lease is None:
            for held in leases.values():
                held.release()
            raise StackLostError(f"run {run_id}: port {port} ({name}) is leased by a live process")
        leases[name] = lease
    return leases
