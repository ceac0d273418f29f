"""A loopback relay between TCP ports and unix sockets, standard library only.

Run as a script:

    python3 -I -S relay.py [--linger] SPEC... -- COMMAND [ARG...]

it listens on every SPEC (all bound before COMMAND starts), runs COMMAND, passes
it SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2, and exits with its
status (128 + N when a signal N ended it). A SPEC is `HOST:PORT` (listen there,
join each connection to `<HOST>-<PORT>.sock` in the script's own folder: the
side inside a network namespace of its own), or `LISTEN=CONNECT` where each side
is `tcp:HOST:PORT` or `unix:PATH` (any length: bound and dialled through the
folder's fd). With `--linger` the relay becomes a child subreaper and exits only
once every descendant has (COMMAND may be a launcher that exits before what it
started, e.g. bubblewrap's monitor on SIGTERM while the sandbox drains).
Imported, `Relay` serves one listener from Python. Nothing here may import beyond
the standard library: the interpreter that runs the script has nothing else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

__all__ = [
    "MAX_CONNECTIONS",
    "Connector",
    "Relay",
    "listen_tcp",
    "listen_unix",
    "socket_name",
    "tcp_connector",
    "unix_connector",
]

Connector = Callable[[], socket.socket]
"""Opens the far end for one accepted connection."""

_CHUNK = 65536
_BACKLOG = 128
MAX_CONNECTIONS = 512
"""Connections one relay joins at once (two threads each); the next ones wait to be accepted.

A slow service behind the relay holds connections its clients already gave up on until it
answers them; without a bound, their threads piled up (1,780 in one relay under a load
generator's timeouts), and every relayed byte then contended with them for the GIL.
"""
_FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
_USAGE = "usage: relay.py [--linger] SPEC... -- COMMAND [ARG...]"
_PR_SET_CHILD_SUBREAPER = 36


def socket_name(host: str, port: int) -> str:
    """The unix socket's file name for the TCP endpoint host:port."""
    return f"{host}-{port}.sock"


def listen_tcp(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (IPv6 when the host is an IPv6 literal)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(_BACKLOG)
    except OSError:
        listener.close()
        raise
    return listener


class Relay:
    """Accepts on a listening socket; joins each connection to a fresh one from `connect`.

    Each direction is copied by its own thread until EOF (then half-closed);
    `close` stops accepting and cuts every open connection. At most
    `max_connections` are joined at once: the next connection is accepted only when
    one ends (it waits in the listen backlog meanwhile), so the threads stay bounded.
    """

    def __init__(
        self, listener: socket.socket, connect: Connector, max_connections: int = MAX_CONNECTIONS
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self._listener = listener
        self._connect = connect
        self._live: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._closed = False

    def start(self) -> None:
        """Serve in a daemon thread (the listener is already listening: no bring-up race)."""
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        """Stop accepting and cut every connection; idempotent."""
        with self._lock:
            self._closed = True
            doomed = [self._listener, *self._live]
            self._live.clear()
        for sock in doomed:
            _cut(sock)

    def _accept(self) -> None:
        while True:
            self._slots.acquire()
            try:
                conn, _ = self._listener.accept()
            except ConnectionError:
                self._slots.release()
                continue
            except OSError:
                self._slots.release()
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, downstream: socket.socket) -> None:
        try:
            self._join(downstream)
        finally:
            self._slots.release()

    def _join(self, downstream: socket.socket) -> None:
        try:
            upstream = self._connect()
        except OSError:
            downstream.close()
            return
        pair = (downstream, upstream)
        for sock in pair:
            _no_delay(sock)
        with self._lock:
            admitted = not self._closed
            if admitted:
                self._live.update(pair)
        if not admitted:
            for sock in pair:
                _cut(sock)
            return
        back = threading.Thread(target=_copy, args=(upstream, downstream), daemon=True)
        back.start()
        _copy(downstream, upstream)
        back.join()
        with self._lock:
            self._live.difference_update(pair)
        for sock in pair:
            sock.close()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    """Copy until EOF, then half-close the sink; an error cuts both ends."""
    try:
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
    except OSError:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _no_delay(sock: socket.socket) -> None:
    """Forward small writes at once: the relay must not add Nagle's wait to a response."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _at_folder(path: str, act: Callable[[str], None]) -> None:
    """Run `act` on `path` spelled through its folder's fd (no sun_path length limit)."""
    folder, name = os.path.split(path)
    handle = os.open(folder or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        act(f"/proc/self/fd/{handle}/{name}")
    finally:
        os.close(handle)


def listen_unix(path: str) -> socket.socket:
    """A listening unix socket at `path` (a stale socket file there is replaced)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        _at_folder(path, listener.bind)
        listener.listen(_BACKLOG)
    except OSError:
        listener.close()
        raise
    return listener


def unix_connector(path: str) -> Connector:
    """Dials the unix socket at `path` for each connection."""

    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _at_folder(path, sock.connect)
        except OSError:
            sock.close()
            raise
        return sock

    return connect


def tcp_connector(host: str, port: int) -> Connector:
    """Dials host:port for each connection (10 s to connect, then no timeout)."""

    def connect() -> socket.socket:
        sock = socket.create_connection((host, port), timeout=10.0)
        sock.settimeout(None)
        return sock

    return connect


def _host_port(text: str) -> tuple[str, int]:
    host, _, digits = text.rpartition(":")
    if not host:
        raise ValueError("no host")
    return host, int(digits)


def _side(text: str) -> tuple[str, str, int]:
    """('tcp', host, port) or ('unix', path, 0) from `tcp:HOST:PORT` / `unix:PATH`."""
    kind, _, rest = text.partition(":")
    if kind == "unix" and rest:
        return "unix", rest, 0
    if kind == "tcp":
        return ("tcp", *_host_port(rest))
    raise ValueError(f"{text!r} is neither tcp:HOST:PORT nor unix:PATH")


def _relay_for(spec: str, folder: Path) -> Relay:
    """The relay a command-line SPEC describes, its listener already bound."""
    if "=" not in spec:
        host, port = _host_port(spec)
        return Relay(listen_tcp(host, port), unix_connector(str(folder / socket_name(host, port))))
    listen, _, connect = spec.partition("=")
    l_kind, l_where, l_port = _side(listen)
    c_kind, c_where, c_port = _side(connect)
    listener = listen_tcp(l_where, l_port) if l_kind == "tcp" else listen_unix(l_where)
    connector = tcp_connector(c_where, c_port) if c_kind == "tcp" else unix_connector(c_where)
    return Relay(listener, connector)


def _become_subreaper() -> None:
    import ctypes  # only the lingering (host) side needs it

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _reap_all() -> None:
    """Wait for every descendant (orphans come to us as the subreaper)."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _run(command: Sequence[str], linger: bool = False) -> int:
    """Run `command` as a child, forwarding signals; its exit status, shell-style."""
    child: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child:
            with contextlib.suppress(ProcessLookupError):
                child[0].send_signal(signum)
        else:
            pending.append(signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    # A mask inherited from whoever started us would hold the signals pending forever
    # (and pass the mask on to the command); the relay threads keep theirs blocked, so a
    # signal always interrupts this thread's wait for the command.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
    try:
        process = subprocess.Popen(list(command))
    except OSError as error:
        print(f"{command[0]}: {error.strerror}", file=sys.stderr)
        return 126 if isinstance(error, PermissionError) else 127
    child.append(process)
    for early in pending:
        process.send_signal(early)
    code = process.wait()
    if linger:
        _reap_all()
    return 128 - code if code < 0 else code


def main(args: Sequence[str]) -> int:
    """Listen on every SPEC before the command starts, then run it."""
    args = list(args)
    linger = bool(args) and args[0] == "--linger"
    if linger:
        args = args[1:]
    if "--" not in args or args.index("--") == len(args) - 1:
        print(_USAGE, file=sys.stderr)
        return 2
    split = args.index("--")
    folder = Path(__file__).resolve().parent
    relays = []
    for spec in args[:split]:
        try:
            relays.append(_relay_for(spec, folder))
        except (OSError, ValueError) as error:
            print(f"relay: cannot listen on {spec}: {error}", file=sys.stderr)
            return 125
    if linger:
        try:
            _become_subreaper()
        except OSError as error:
            print(f"relay: {error}", file=sys.stderr)
            return 125
    signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
    for relay in relays:
        relay.start()
    return _run(args[split + 1 :], linger)


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # daemon relay threads may be mid-copy: do not wait for them
