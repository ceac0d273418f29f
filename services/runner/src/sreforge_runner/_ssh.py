"""The `remote` sandbox's transport: ssh with a pinned host key, rsync over it.

Every call runs `ssh -F /dev/null` (no user config) with BatchMode, only the known
host key the runner wrote (`StrictHostKeyChecking=yes`, no global file, no key
updates), only the profile's identity (no agent), no forwarding of any kind. The
calls of one session share a control master (a private socket dir in /tmp, the
master exits 60 s after its last use or on `close`). Remote steps are one POSIX sh
script (`_CONTROL`) whose values arrive only as positional arguments.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sreforge_contracts import RemoteSpec

from sreforge_runner._errors import SandboxError

__all__ = ["SshTransport"]

_CONTROL_TIMEOUT_S = 60.0
_SYNC_TIMEOUT_S = 600.0
_CLOSE_TIMEOUT_S = 10.0
_HOST_KEY_FAILED = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED")
_OPTIONS = {
    "BatchMode": "yes",
    "StrictHostKeyChecking": "yes",
    "GlobalKnownHostsFile": "/dev/null",
    "CheckHostIP": "no",
    "UpdateHostKeys": "no",
    "IdentitiesOnly": "yes",
    "IdentityAgent": "none",
    "ForwardAgent": "no",
    "ForwardX11": "no",
    "ClearAllForwardings": "yes",
    "PasswordAuthentication": "no",
    "KbdInteractiveAuthentication": "no",
    "RequestTTY": "no",
    "ConnectTimeout": "15",
    "ServerAliveInterval": "10",
    "ServerAliveCountMax": "3",
    "LogLevel": "ERROR",
    "ControlMaster": "auto",
    "ControlPersist": "60",
}

_CONTROL = r"""
marked() {  # live processes whose env holds $mark (a zombie's environ reads empty)
  grep -lxzF -- "$mark" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/||; s|/environ$||'
}
step=$1; shift
case "$step" in
create)
  for tool in rsync setsid; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool is not installed" >&2; exit 3; }
  done
  umask 077
  mkdir -p -- "$1"
  dir=$(mktemp -d "$1/session.XXXXXXXX")
  mkdir -- "$dir/workspace" "$dir/home" "$dir/bin"
  echo "$dir" ;;
env)
  umask 077
  rm -f -- "$1/agent.pgid"
  cat > "$1/.env" ;;
stop)
  mark=$2
  rm -f -- "$1/.env"
  pg=$(cat "$1/agent.pgid" 2>/dev/null || true)
  case "$pg" in ''|*[!0-9]*) pg= ;; esac
  if [ -n "$pg" ]; then
    echo "pgid $pg"
    if [ "$3" -gt 0 ] && kill -s TERM -- "-$pg" 2>/dev/null; then
      i=0
      while [ "$i" -lt "$3" ] && kill -s 0 -- "-$pg" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
    fi
    kill -s KILL -- "-$pg" 2>/dev/null || true
  fi
  for p in $(marked); do kill -s KILL "$p" 2>/dev/null || true; done ;;
scan)
  mark=$1; i=0
  while :; do
    found=$(marked)
    if [ -z "$found" ] || [ "$i" -ge "$2" ]; then break; fi
    sleep 0.1; i=$((i+1))
  done
  [ -z "$found" ] || echo "$found" ;;
remove)
  case "$1" in
    "$2"/session.*) rm -rf -- "$1" ;;
    *) echo "refusing to remove $1: not a session folder under $2" >&2; exit 4 ;;
  esac ;;
esac
"""
# Runs with `env -i`: takes the agent's env from the 0600 file and deletes it, then
# execs the agent as the leader of its own session, recording its pgid, stdin closed.
_LAUNCH = r"""
r=$1; shift
set -a; . "$r/.env"; set +a
rm -f -- "$r/.env"
exec setsid -w /bin/sh -c 'echo "$$" > "$0"; exec "$@"' "$r/agent.pgid" "$@" < /dev/null
"""


@dataclass
class SshTransport:
    """ssh and rsync to one remote, pinned to its host key, for one session."""

    spec: RemoteSpec
    known_hosts: Path
    _control_dir: Path | None = field(default=None, init=False, repr=False)

    @property
    def target(self) -> str:
        """`user@host:port`, for messages."""
        return f"{self.spec.user}@{self.spec.host}:{self.spec.port}"

    def pin_host_key(self) -> None:
        """Write the known_hosts file holding only the profile's host key."""
        spec = self.spec
        host = spec.host if spec.port == 22 else f"[{spec.host}]:{spec.port}"
        self.known_hosts.write_text(f"{host} {spec.host_key}\n")

    def control(self, *steps: tuple[str, ...], stdin: str | None = None) -> str:
        """Run `_CONTROL` steps (`&&`-chained) remotely; their stdout."""
        script = " && ".join(
            shlex.join(["/bin/sh", "-c", _CONTROL, "remote-step", *step]) for step in steps
        )
        return self._call(self.ssh(script), stdin, _CONTROL_TIMEOUT_S, "ssh")

    def launch(self, remote_dir: PurePosixPath, argv: Sequence[str]) -> list[str]:
        """The local argv that runs `argv` remotely in the session's workspace (`_LAUNCH`)."""
        launch = shlex.join(["/bin/sh", "-c", _LAUNCH, "agent-launch", str(remote_dir), *argv])
        workspace = shlex.quote(str(remote_dir / "workspace"))
        return self.ssh(f"cd {workspace} && exec env -i {launch}")

    def rsync(self, source: str, destination: str) -> None:
        """Mirror `source` to `destination` (one of them `host:path`), deleting extras.
        By checksum: a same-size edit within the same second must not be skipped."""
        shell = shlex.join(["ssh", *self._options()])
        argv = ["rsync", "-rlptD", "--checksum", "--delete", "-e", shell, "--", source, destination]
        self._call(argv, None, _SYNC_TIMEOUT_S, "rsync")

    def run(self, command: str, what: str) -> str:
        """Run a shell `command` remotely; its stdout, or `SandboxError` explaining `what`
        failed (a host key mismatch is named as such)."""
        return self._call(self.ssh(command), None, _CONTROL_TIMEOUT_S, what)

    def ssh(self, command: str) -> list[str]:
        """The local argv running `command` on the remote."""
        return ["ssh", *self._options(), "--", self.spec.host, command]

    def close(self) -> None:
        """Stop the session's control master (if any) and remove its socket dir."""
        if self._control_dir is None:
            return
        stop = ["ssh", "-F", "/dev/null", "-o", f"ControlPath={self._control_dir / 'cm'}"]
        # On failure the master still exits on its own, ControlPersist after its last use.
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            subprocess.run(
                [*stop, "-O", "exit", "--", self.spec.host],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_CLOSE_TIMEOUT_S,
                env=client_env(),
                check=False,
            )
        shutil.rmtree(self._control_dir, ignore_errors=True)
        self._control_dir = None

    def _options(self) -> list[str]:
        if self._control_dir is None:
            # A short private path: a unix socket's path is limited to ~100 bytes.
            self._control_dir = Path(tempfile.mkdtemp(prefix="sreforge-ssh-"))
        options = {
            **_OPTIONS,
            "UserKnownHostsFile": str(self.known_hosts),
            "ControlPath": str(self._control_dir / "cm"),
        }
        flags = ["-F", "/dev/null", "-p", str(self.spec.port), "-l", self.spec.user]
        flags += ["-i", self.identity()]
        for name, value in options.items():
            flags += ["-o", f"{name}={value}"]
        return flags

    def identity(self) -> str:
        """The private key's path on the runner, from the profile's route."""
        spec = self.spec
        path = spec.identity_file or os.environ.get(spec.identity_env or "", "")
        route = f"identity_env {spec.identity_env}" if spec.identity_env else "identity_file"
        if not path:
            raise SandboxError(f"remote {self.target}: {route} is not set on the runner")
        if not Path(path).is_file():
            raise SandboxError(f"remote {self.target}: {route} names no file on the runner")
        return path

    def _call(self, argv: list[str], stdin: str | None, timeout_s: float, what: str) -> str:
        try:
            done = subprocess.run(
                argv,
                input=stdin,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=client_env(),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SandboxError(
                f"remote {self.target}: {what} got no answer in {timeout_s:g} s"
            ) from None
        except OSError as error:
            raise SandboxError(f"remote {self.target}: cannot run {what}: {error}") from error
        if done.returncode != 0:
            raise SandboxError(self._failure(what, done.returncode, done.stderr))
        return done.stdout

    def _failure(self, what: str, code: int, stderr: str) -> str:
        if any(sign in stderr for sign in _HOST_KEY_FAILED):
            kind = self.spec.host_key.split()[0]
            return (
                f"remote {self.target}: host key verification failed; the server's host key "
                f"does not match the pinned host_key ({kind})"
            )
        last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
        return f"remote {self.target}: {what} exited {code}: {last.strip()[:300]}"


def client_env() -> dict[str, str]:
    """ssh's and rsync's own env: a PATH, nothing else (no agent socket, no secrets)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
