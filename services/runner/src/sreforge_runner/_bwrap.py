"""The `host-sandboxed` confinement: the agent's layout of the shared bubblewrap jail.

Inside the sandbox the agent sees the system view of `sreforge_confine` (read-only
`/usr`, a short `/etc` list, fresh `/proc`, `/dev`, tmpfs `/tmp`), its workspace
read-write at `/workspace`, a private HOME read-write at `/home/agent`, and
`submit` read-only at `/opt/oncall/bin`, and the agent's install read-only (each
install path at the same place, or where the profile's `mount_at` shows it, such as
`/opt/agent/<preset>` for an engine-home install). Nothing else of the host exists for it:
not `/work`, not `/root`, not the harness venv, not other runs' folders, not the
scenario (`verify/`, `solution/`). It runs in its own PID, IPC and UTS
namespaces, in a new session (no TIOCSTI), with every capability dropped, and
dies with its parent. Given the egress folder it also gets a network namespace of
its own, and reaches only the endpoints relayed through that folder (see `_egress`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from sreforge_confine import Mount, bwrap_argv, probe_bwrap

__all__ = [
    "SANDBOX_BIN",
    "SANDBOX_HOME",
    "SANDBOX_NET",
    "SANDBOX_WORKSPACE",
    "bwrap_prefix",
    "outside_the_view",
    "probe_bwrap",
    "shown_at",
]

SANDBOX_WORKSPACE = Path("/workspace")
SANDBOX_HOME = Path("/home/agent")
SANDBOX_BIN = Path("/opt/oncall/bin")
SANDBOX_NET = Path("/run/net")
_SYSTEM = (Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"))
_MAX_HOPS = 16


def bwrap_prefix(
    bwrap: str,
    workspace: Path,
    home: Path,
    bin_dir: Path,
    install_paths: Sequence[str] = (),
    network: Path | None = None,
    mount_at: Mapping[str, str] | None = None,
) -> list[str]:
    """The bwrap argv (up to and including `--`) that confines a command. With `network`
    (the egress folder, bound read-only at `/run/net`) the command gets a network
    namespace of its own; without it, the host's. `mount_at` shows install paths
    elsewhere (host folder → inside folder)."""
    places = mount_at or {}
    mounts = [
        Mount(workspace, SANDBOX_WORKSPACE, writable=True),
        Mount(home, SANDBOX_HOME, writable=True),
        Mount(bin_dir, SANDBOX_BIN),
        *(Mount(Path(path), _inside(path, places)) for path in install_paths),
    ]
    if network is not None:
        mounts.append(Mount(network, SANDBOX_NET))
    return bwrap_argv(
        bwrap,
        mounts,
        SANDBOX_WORKSPACE,
        unshare_net=network is not None,
        die_with_parent=True,
        new_session=True,
    )


def shown_at(path: str, mount_at: Mapping[str, str]) -> str:
    """How a host path under a mapped install folder looks inside (else unchanged)."""
    for host, inside in mount_at.items():
        if path == host or Path(path).is_relative_to(host):
            return str(Path(inside) / Path(path).relative_to(host))
    return path


def outside_the_view(executable: str, install_paths: Sequence[str]) -> str | None:
    """Why `executable` (a host path) cannot start inside: a symlink, `#!` interpreter or
    venv `python` on its way that lies outside `/usr` and the install paths (bwrap would
    only say `execvp: No such file or directory`); None when all of it is there."""
    if not executable.startswith("/"):
        return None  # found on the agent's PATH inside; nothing to follow
    roots = (*_SYSTEM, *(Path(path) for path in install_paths))
    start = Path(executable)
    todo = [start]
    venv_python = start.parent / "python"
    if (start.parent.parent / "pyvenv.cfg").is_file() and (
        venv_python.is_symlink() or venv_python.exists()
    ):
        todo.append(venv_python)
    for path in todo:
        why = _follow(path, roots)
        if why:
            return why
    return None


def _follow(path: Path, roots: Sequence[Path]) -> str | None:
    seen: list[Path] = []
    current = path
    for _ in range(_MAX_HOPS):
        if not any(current == root or current.is_relative_to(root) for root in roots):
            via = f" (via {' -> '.join(map(str, seen))})" if seen else ""
            return (
                f"{current}{via} is outside the sandbox: not under /usr or an install "
                f"path ({', '.join(str(root) for root in roots[len(_SYSTEM) :]) or 'none'}); "
                "add its folder to install_paths or reinstall with a base under /usr"
            )
        seen.append(current)
        if current.is_symlink():
            current = Path(os.path.normpath(current.parent / current.readlink()))
            continue
        if not current.exists():
            via = f" (via {' -> '.join(map(str, seen[:-1]))})" if seen[1:] else ""
            return f"{current}{via}: no such file"
        interpreter = _shebang(current)
        if interpreter is None or interpreter == current:
            return None
        current = interpreter
    return None


def _shebang(path: Path) -> Path | None:
    try:
        with path.open("rb") as file:
            head = file.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    return Path(words[0].decode(errors="replace")) if words else None


def _inside(path: str, places: Mapping[str, str]) -> Path | None:
    return Path(places[path]) if path in places else None
