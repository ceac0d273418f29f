"""What `sreforge agents install` installs, and where: one table, pure plans.

`RELEASES` pins, per CLI preset, the registry, the package, the release tested and
the executable it ships. `plan_install` lays an install out: the tool in
`<tools>/<preset>/<version>/` (an npm prefix or a relocatable venv; `<tools>` is
`SREFORGE_TOOLS`, a neutral folder outside the engine home, whose path names the
harness), a marker `<tools>/<preset>/<version>.json` beside it (outside the folder the
agent sees), and the ready profile `<home>/agents/<preset>.toml`, which overlays the
catalog's profile of the same name. The tool is installed, and runs, at
`/opt/agent/<preset>` inside a sandbox (`mount_at`), so what npm or pip record at
install time names that place; only mountinfo shows the host folder.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sreforge._errors import SreforgeError

__all__ = [
    "INSIDE_ROOT",
    "RELEASES",
    "InstallPlan",
    "ToolRelease",
    "install_commands",
    "plan_install",
    "profile_text",
]

Registry = Literal["npm", "pypi"]
INSIDE_ROOT = Path("/opt/agent")
"""Where installed tools appear inside a sandbox (`/opt/agent/<preset>`)."""
_HEADER = ("# Written by `sreforge agents install ", "# Shown to the agent at ")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]*$")


@dataclass(frozen=True)
class ToolRelease:
    """One preset's CLI on its registry."""

    preset: str
    registry: Registry
    package: str
    version: str
    """The release tested with this checkout (the default of `install`)."""
    executable: str
    """The command the package installs (npm `bin`, or a console script)."""


RELEASES: dict[str, ToolRelease] = {
    release.preset: release
    for release in (
        ToolRelease("claude-code", "npm", "@anthropic-ai/claude-code", "2.1.332", "claude"),
        ToolRelease("codex", "npm", "@openai/codex", "0.171.0", "codex"),
        ToolRelease("gemini-cli", "npm", "@google/gemini-cli", "0.61.0", "gemini"),
        ToolRelease("aider", "pypi", "aider-chat", "0.86.2", "aider"),
        ToolRelease("mini-swe-agent", "pypi", "mini-swe-agent", "2.4.6", "mini-swe-agent"),
    )
}
"""Per preset: registry, package, pinned version and executable."""


@dataclass(frozen=True)
class InstallPlan:
    """Where one release goes in the engine home and where the agent sees it."""

    release: ToolRelease
    folder: Path
    """`<tools>/<preset>/<version>`: the npm prefix or the venv."""
    profile_path: Path
    """`<home>/agents/<preset>.toml`: the ready profile."""

    @property
    def inside(self) -> Path:
        """Where the folder appears inside the sandbox (and the install ran)."""
        return INSIDE_ROOT / self.release.preset

    @property
    def staging(self) -> Path:
        """The folder an install fills before it is moved into place."""
        return self.folder.with_name(f".{self.folder.name}.partial")

    @property
    def marker(self) -> Path:
        """Written last: the install is complete (beside the folder, not in it)."""
        return self.folder.with_name(f"{self.folder.name}.json")

    @property
    def executable(self) -> Path:
        """The executable's host path."""
        return self.folder / self._bin

    @property
    def _bin(self) -> str:
        name = self.release.executable
        return f"node_modules/.bin/{name}" if self.release.registry == "npm" else f"bin/{name}"

    def marker_text(self, seconds: float) -> str:
        """The marker's content: what was installed, from where, how long it took."""
        body = {
            "preset": self.release.preset,
            "registry": self.release.registry,
            "package": self.release.package,
            "version": self.release.version,
            "executable": str(self.executable),
            "inside": str(self.inside),
            "install_seconds": round(seconds, 1),
        }
        return json.dumps(body, indent=2) + "\n"


def plan_install(
    preset: str, tools: Path, profiles: Path, version: str | None = None
) -> InstallPlan:
    """The plan for `preset` (at `version`, default the pinned one): the tool under
    `tools` (`SREFORGE_TOOLS`), its profile in `profiles` (`<home>/agents`)."""
    release = RELEASES.get(preset)
    if release is None:
        raise SreforgeError(
            f"agents install: no installable preset {preset!r} (one of {', '.join(RELEASES)})"
        )
    if version is not None:
        if not _VERSION.fullmatch(version):
            raise SreforgeError(f"agents install: --version {version!r} is not a version")
        release = ToolRelease(
            release.preset, release.registry, release.package, version, release.executable
        )
    return InstallPlan(
        release=release,
        folder=tools / preset / release.version,
        profile_path=profiles / f"{preset}.toml",
    )


def install_commands(plan: InstallPlan, uv: str, python: str) -> list[list[str]]:
    """The commands that fill `plan.inside` (run where the folder is shown there)."""
    release, inside = plan.release, str(plan.inside)
    if release.registry == "npm":
        spec = f"{release.package}@{release.version}"
        flags = ["--no-audit", "--no-fund", "--no-update-notifier"]
        return [["npm", "install", "--prefix", inside, *flags, spec]]
    spec = f"{release.package}=={release.version}"
    return [
        [uv, "venv", "--quiet", "--relocatable", "--python", python, inside],
        [uv, "pip", "install", "--python", f"{inside}/bin/python", "--compile-bytecode", spec],
    ]


def profile_text(builtin: str, plan: InstallPlan) -> str:
    """The catalog's profile text with the installed executable, its install path and
    the place the sandbox shows it at (the rest, comments included, kept)."""
    folder = json.dumps(str(plan.folder))
    lines = [
        f"executable = {json.dumps(str(plan.executable))}",
        f"install_paths = [{folder}]",
        f"mount_at = {{ {folder} = {json.dumps(str(plan.inside))} }}",
    ]
    out: list[str] = []
    table = ""
    placed = False
    for line in builtin.splitlines():
        if not out and line.startswith(_HEADER):
            continue  # a profile this command wrote before: one header is enough
        stripped = line.strip()
        if stripped.startswith("["):
            if table == "command" and not placed:
                out.extend([*lines, ""])
                placed = True
            table = stripped.strip("[]").strip()
        key = stripped.split("=", 1)[0].strip()
        if table == "command" and key in ("executable", "install_paths", "mount_at"):
            if not placed:
                out.extend(lines)
                placed = True
            continue
        out.append(line)
    if table == "command" and not placed:
        out.extend(lines)
        placed = True
    if not placed:
        raise SreforgeError(f"agents install: the {plan.release.preset} profile has no [command]")
    release = plan.release
    header = (
        f"{_HEADER[0]}{release.preset}` ({release.package} {release.version} from "
        f"{release.registry}); overlays the catalog's {release.preset}.toml.\n"
        f"{_HEADER[1]}{plan.inside}. Reinstall to rewrite.\n"
    )
    return header + "\n".join(out) + "\n"
