"""A loopback relay between TCP ports and unix sockets, standard library only.

Run as a script inside a network namespace of its own:

    python3 -I -S relay.py HOST:PORT... -- COMMAND [ARG...]

it listens on every HOST:PORT (all bound before COMMAND starts), joins each
connection to `<HOST>-<PORT>.sock` in its own folder, runs COMMAND, passes it
SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2, and exits with its status
(128 + N when a signal N ended it). Imported, `Relay` serves the other end: a
unix socket joined to a TCP port. Nothing here may import beyond the standard
library: the interpreter that runs the script has nothing else.
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

__all__ = ["Connector", "Relay", "listen_tcp", "socket_name"]

Connector = Callable[[], socket.socket]
"""Opens the far end for one accepted connection."""

_CHUNK = 65536
_BACKLOG = 128
_FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
_USAGE = "usage: relay.py HOST:PORT... -- COMMAND [ARG...]"


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
    `close` stops accepting and cuts every open connection.
    """

    def __init__(self, listener: socket.socket, connect: Connector) -> None:
        self._listener = listener
        self._connect = connect
        self._live: set[socket.socket] = set()
        self._lock = threading.Lock()
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
            try:
                conn, _ = self._listener.accept()
            except ConnectionError:
                continue
            except OSError:
                return
            threading.Thread(target=self._join, args=(conn,), daemon=True).start()

    def _join(self, downstream: socket.socket) -> None:
        try:
            upstream = self._connect()
        except OSError:
            downstream.close()
            return
        pair = (downstream, upstream)
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


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _unix_connector(path: str) -> Connector:
    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            raise
        return sock

    return connect


def _run(command: Sequence[str]) -> int:
    """Run `command` as a child, forwarding signals; its exit status, shell-style."""
    child: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child:
            child[0].send_signal(signum)
        else:
            pending.append(signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    try:
        process = subprocess.Popen(list(command))
    except OSError as error:
        print(f"{command[0]}: {error.strerror}", file=sys.stderr)
        return 126 if isinstance(error, PermissionError) else 127
    child.append(process)
    for early in pending:
        process.send_signal(early)
    code = process.wait()
    return 128 - code if code < 0 else code


def main(args: Sequence[str]) -> int:
    """Listen on every HOST:PORT before the command starts, then run it."""
    if "--" not in args or args.index("--") == len(args) - 1:
        print(_USAGE, file=sys.stderr)
        return 2
    split = args.index("--")
    folder = Path(__file__).resolve().parent
    relays = []
    for spec in args[:split]:
        host, _, digits = spec.rpartition(":")
        try:
            port = int(digits)
            if not host:
                raise ValueError("no host")
            listener = listen_tcp(host, port)
        except (OSError, ValueError) as error:
            print(f"relay: cannot listen on {spec}: {error}", file=sys.stderr)
            return 125
        path = str(folder / socket_name(host, port))
        relays.append(Relay(listener, _unix_connector(path)))
    for relay in relays:
        relay.start()
    return _run(args[split + 1 :])


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # daemon relay threads may be mid-copy: do not wait for them
