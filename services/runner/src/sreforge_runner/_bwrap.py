"""The `host-sandboxed` confinement: a bubblewrap command line around the agent.

Inside the sandbox the agent sees a read-only `/usr` (with the merged-usr
symlinks), a short list of `/etc` entries, fresh `/proc`, `/dev` and a tmpfs
`/tmp`, its workspace read-write at `/workspace`, a private HOME read-write at
`/home/agent`, and `submit` read-only at `/opt/oncall/bin`. Nothing else of the
host exists for it: not `/work`, not `/root`, not the harness venv, not other
runs' folders, not the scenario (`verify/`, `solution/`). It runs in its own PID,
IPC and UTS namespaces, in a new session (no TIOCSTI), with every capability
dropped, and dies with its parent. Given the egress folder it also gets a network
namespace of its own (bwrap brings its loopback up), and reaches only the
endpoints relayed through that folder (see `_egress`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

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

# What a shell, git, python and node need from /etc; no credentials, no service configs.
_ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "protocols",
    "python3",
    "python3.11",
    "resolv.conf",
    "services",
    "ssl",
    "terminfo",
    "timezone",
)
_PROBE_TIMEOUT_S = 15.0


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
    argv = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/") / link
        if target.is_symlink():
            argv += ["--symlink", str(target.readlink()), str(target)]
    for name in _ETC:
        path = Path("/etc") / name
        if path.exists():
            argv += ["--ro-bind", str(path), str(path)]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--bind",
        str(workspace),
        str(SANDBOX_WORKSPACE),
        "--bind",
        str(home),
        str(SANDBOX_HOME),
        "--ro-bind",
        str(bin_dir),
        str(SANDBOX_BIN),
    ]
    for install in install_paths:
        argv += ["--ro-bind", install, install]
    if network is not None:
        argv += ["--unshare-net", "--ro-bind", str(network), str(SANDBOX_NET)]
    argv += [
        "--chdir",
        str(SANDBOX_WORKSPACE),
        "--",
    ]
    return argv


def probe_bwrap(prefix: Sequence[str]) -> str | None:
    """Run `true` under `prefix`; None when the sandbox came up, else why it did not."""
    try:
        done = subprocess.run(
            [*prefix, "/bin/true"],
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
            env={"PATH": "/usr/bin:/bin"},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{type(error).__name__}: {error}"
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()
        return f"bwrap exited {done.returncode}: {stderr or 'no message'}"
    return None
