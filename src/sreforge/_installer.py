"""Installing a preset's CLI into the engine home: the install step and its bookkeeping.

`install_tool` is idempotent: a release whose marker and executable exist is left
alone. Otherwise the `Installer` fills a staging folder, which then moves into place
and gets its marker. `JailedInstaller`, the real one, runs npm or uv in bubblewrap
with the staging folder shown at `/opt/agent/<preset>` (the host's network, its
npm/uv download caches and npm user config visible): whatever the tools record at
install time (build files, bytecode, venv paths) names the place the agent sees,
never the engine home.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from sreforge_confine import Mount, bwrap_argv

from sreforge._errors import SreforgeError
from sreforge._installs import InstallPlan, install_commands, profile_text

__all__ = ["Installer", "JailedInstaller", "install_tool", "system_python", "write_profile"]

_CHECKOUT = Path(__file__).resolve().parents[2]
_UV_INSIDE = Path("/run/installer/uv")
_PATH = "/usr/local/bin:/usr/bin:/bin"
_PASSED = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
# A machine's own CA (a TLS-intercepting gateway) reaches npm, node and uv this way.
_CERTS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE")
_PASSED_PREFIXES = ("npm_config_", "NPM_CONFIG_", "UV_INDEX", "UV_EXTRA_INDEX", "UV_DEFAULT_INDEX")
_PYTHONS = ("python3.12", "python3.11", "python3.13", "python3.10", "python3")
_TAIL_LINES = 8


class Installer(Protocol):
    """Fills `plan.staging` with a working install of `plan.release`, as it will be
    shown at `plan.inside`; raises `SreforgeError` naming the package and version."""

    def install(self, plan: InstallPlan) -> None:
        """Install `plan.release` into `plan.staging`."""
        ...


def install_tool(plan: InstallPlan, installer: Installer) -> float | None:
    """Install `plan.release` unless already there; the seconds it took, None if nothing
    was to do."""
    if plan.marker.is_file() and plan.executable.exists():
        return None
    started = time.monotonic()
    shutil.rmtree(plan.staging, ignore_errors=True)
    plan.staging.mkdir(parents=True)
    try:
        installer.install(plan)
        staged = plan.staging / plan.executable.relative_to(plan.folder)
        if not staged.exists():
            release = plan.release
            raise SreforgeError(
                f"agents install: {release.package} {release.version} installed no "
                f"`{release.executable}` (looked for {staged.relative_to(plan.staging)})"
            )
        shutil.rmtree(plan.folder, ignore_errors=True)  # a half install without its marker
        plan.staging.rename(plan.folder)
    except BaseException:
        shutil.rmtree(plan.staging, ignore_errors=True)
        raise
    seconds = time.monotonic() - started
    plan.marker.write_text(plan.marker_text(seconds))
    return seconds


def write_profile(plan: InstallPlan, catalog: Path) -> Path:
    """Write the ready profile from the catalog's `<preset>.toml`; its path."""
    builtin = catalog / f"{plan.release.preset}.toml"
    try:
        text = builtin.read_text()
    except OSError as error:
        raise SreforgeError(
            f"agents install: the preset's profile {builtin}: {error.strerror}"
        ) from error
    plan.profile_path.parent.mkdir(parents=True, exist_ok=True)
    plan.profile_path.write_text(profile_text(text, plan))
    return plan.profile_path


def system_python() -> str:
    """A Python 3 under /usr, which every sandbox shows (a venv's base must be visible)."""
    for name in _PYTHONS:
        for folder in ("/usr/local/bin", "/usr/bin"):
            path = Path(folder) / name
            if path.is_file():
                return str(path)
    raise SreforgeError(
        "agents install: no python3 under /usr/bin or /usr/local/bin (a venv's base "
        "interpreter must lie under /usr, which the sandbox shows)"
    )


def _cert_paths() -> list[Path]:
    """The CA files the env names that the sandbox's /usr and /etc list do not show."""
    paths = []
    for name in _CERTS:
        path = Path(os.environ.get(name, ""))
        shown = path.is_relative_to("/usr") or path.is_relative_to("/etc")
        if path.is_absolute() and path.exists() and not shown:
            paths.append(path)
    return paths


def _uv() -> Path:
    """uv's binary (shown alone inside the install's sandbox, so a shim will not do)."""
    found = [shutil.which("uv"), shutil.which("uv", path=str(_CHECKOUT / ".tools" / "bin"))]
    for candidate in filter(None, found):
        path = Path(candidate).resolve()
        with path.open("rb") as binary:
            if binary.read(4) == b"\x7fELF":
                return path
    raise SreforgeError(
        "agents install: the PyPI presets need uv's binary: none on PATH nor in the "
        "checkout's .tools/bin (scripts/setup installs it there)"
    )


@dataclass
class JailedInstaller:
    """Runs the install commands in bubblewrap, the staging folder at `plan.inside`."""

    bwrap: str = "bwrap"
    progress: Callable[[str], None] = print

    def install(self, plan: InstallPlan) -> None:
        """Install `plan.release` into `plan.staging` (see the module docstring)."""
        home = Path.home()
        caches = self._caches(home)
        mounts = [Mount(plan.staging, plan.inside, writable=True)]
        mounts += [Mount(cache, writable=True) for cache in caches.values()]
        if (home / ".npmrc").is_file():
            mounts.append(Mount(home / ".npmrc"))
        mounts += [Mount(path) for path in _cert_paths()]
        uv = ""
        if plan.release.registry == "pypi":
            mounts.append(Mount(_uv(), _UV_INSIDE))
            uv = str(_UV_INSIDE)
        prefix = bwrap_argv(
            self.bwrap,
            mounts,
            plan.inside,
            unshare_net=False,
            die_with_parent=True,
            new_session=True,
        )
        env = self._env(home, caches)
        log = plan.folder.with_name(f"{plan.folder.name}.log")
        with log.open("w") as out:
            for command in install_commands(plan, uv, system_python() if uv else ""):
                self.progress(f"  running   {shlex.join(command)}")
                self._run(plan, [*prefix, *command], command, env, out, log)

    def _run(
        self,
        plan: InstallPlan,
        argv: Sequence[str],
        shown: Sequence[str],
        env: dict[str, str],
        out: IO[str],
        log: Path,
    ) -> None:
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
        except OSError as error:
            raise SreforgeError(f"agents install: cannot start {argv[0]}: {error}") from error
        if done.returncode != 0:
            release = plan.release
            tail = log.read_text(errors="replace").strip().splitlines()[-_TAIL_LINES:]
            raise SreforgeError(
                f"agents install: {release.package} {release.version} from "
                f"{release.registry}: `{shlex.join(shown)}` exited {done.returncode} "
                f"(log {log}):\n  " + "\n  ".join(tail)
            )

    def _caches(self, home: Path) -> dict[str, Path]:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(home / ".cache")
        caches = {
            "NPM_CONFIG_CACHE": Path(os.environ.get("NPM_CONFIG_CACHE") or home / ".npm"),
            "UV_CACHE_DIR": Path(os.environ.get("UV_CACHE_DIR") or Path(xdg) / "uv"),
        }
        for cache in caches.values():
            cache.mkdir(parents=True, exist_ok=True)
        return caches

    def _env(self, home: Path, caches: dict[str, Path]) -> dict[str, str]:
        env = {
            "PATH": _PATH,
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "NPM_CONFIG_UPDATE_NOTIFIER": "false",
            "UV_LINK_MODE": "copy",  # the caches are other mounts: no hard links across
            "UV_PYTHON_DOWNLOADS": "never",
        }
        env.update({name: str(path) for name, path in caches.items()})
        for name, value in os.environ.items():
            if name in (*_PASSED, *_CERTS) or name.startswith(_PASSED_PREFIXES):
                env.setdefault(name, value)
        return env
