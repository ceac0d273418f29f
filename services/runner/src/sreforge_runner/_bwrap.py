"""The `host-sandboxed` confinement: the agent's layout of the shared bubblewrap jail.

Inside the sandbox the agent sees the system view of `sreforge_confine` (read-only
`/usr`, a short `/etc` list, fresh `/proc`, `/dev`, tmpfs `/tmp`), its workspace
read-write at `/workspace`, a private HOME read-write at `/home/agent`, and
`submit` read-only at `/opt/oncall/bin`. Nothing else of the host exists for it:
not `/work`, not `/root`, not the harness venv, not other runs' folders, not the
scenario (`verify/`, `solution/`). It runs in its own PID, IPC and UTS
namespaces, in a new session (no TIOCSTI), with every capability dropped, and
dies with its parent. Given the egress folder it also gets a network namespace of
its own, and reaches only the endpoints relayed through that folder (see `_egress`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sreforge_confine import Mount, bwrap_argv, probe_bwrap

__all__ = [
    "SANDBOX_BIN",
    "SANDBOX_HOME",
    "SANDBOX_NET",
    "SANDBOX_WORKSPACE",
    "bwrap_prefix",
    "probe_bwrap",
]

SANDBOX_WORKSPACE = Path("/workspace")
SANDBOX_HOME = Path("/home/agent")
SANDBOX_BIN = Path("/opt/oncall/bin")
SANDBOX_NET = Path("/run/net")


def bwrap_prefix(
    bwrap: str,
    workspace: Path,
    home: Path,
    bin_dir: Path,
    install_paths: Sequence[str] = (),
    network: Path | None = None,
) -> list[str]:
    """The bwrap argv (up to and including `--`) that confines a command. With `network`
    (the egress folder, bound read-only at `/run/net`) the command gets a network
    namespace of its own; without it, the host's."""
    mounts = [
        Mount(workspace, SANDBOX_WORKSPACE, writable=True),
        Mount(home, SANDBOX_HOME, writable=True),
        Mount(bin_dir, SANDBOX_BIN),
        *(Mount(Path(install)) for install in install_paths),
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
