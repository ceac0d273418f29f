"""The bubblewrap command line: what of the host a confined command sees.

Every confined command sees a read-only `/usr` (with the merged-usr symlinks), a
short list of `/etc` entries (no credentials, no service configs), fresh `/proc`
(its machine-wide knobs, `/proc/sys` and `/proc/sysrq-trigger`, read-only) and
`/dev`, a tmpfs `/tmp`, and then only the mounts its caller lists. It runs in
its own PID, IPC and UTS namespaces (cgroup too where the kernel allows) with
every capability dropped; with `unshare_net` also in a network namespace of its
own (bwrap brings its loopback up). Nothing else of the host exists for it: not
`/work`, not `/root`, not other runs' folders.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Mount", "bwrap_argv", "probe_bwrap"]

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
# Parts of a fresh /proc that act on the whole machine (sysctls, sysrq, irq, bus): bwrap
# run as root does not cover them, and root without capabilities can still write them.
_PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")
_PROBE_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Mount:
    """A host path shown inside at `inside` (the same path when None)."""

    host: Path
    inside: Path | None = None
    writable: bool = False

    @property
    def target(self) -> Path:
        """Where the mount appears inside."""
        return self.inside or self.host


def bwrap_argv(
    bwrap: str,
    mounts: Sequence[Mount],
    chdir: Path,
    *,
    unshare_net: bool,
    die_with_parent: bool,
    new_session: bool,
) -> list[str]:
    """The bwrap argv, up to and including `--`, showing the system view then `mounts`
    in the order given (a mount over a folder another one shows must come after it).

    `new_session` guards a command that shares a terminal (TIOCSTI); a command started
    in a session of its own needs none, and keeps the whole sandbox in its process
    group. `die_with_parent` ties the sandbox to the process that starts bwrap."""
    argv = [bwrap]
    if die_with_parent:
        argv.append("--die-with-parent")
    if new_session:
        argv.append("--new-session")
    argv += [
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
    argv += ["--proc", "/proc"]
    for name in _PROC_COVERED:
        argv += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    argv += ["--dev", "/dev", "--tmpfs", "/tmp"]
    for mount in mounts:
        argv += ["--bind" if mount.writable else "--ro-bind", str(mount.host), str(mount.target)]
    if unshare_net:
        argv.append("--unshare-net")
    argv += ["--chdir", str(chdir), "--"]
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
