"""What the agent sees of its own sandbox: process titles, mounts, env, HOME, its bin dir.

Inside bubblewrap's PID namespace the agent's `ps` shows bwrap's child (its command
line holds every bind mount's host path), the egress relay and itself;
`/proc/self/mountinfo` shows each bind mount's host source path too; its env is the
runner's allowlist plus PATH, HOME and the session marker; HOME holds a `.gitconfig`
and the session folder; `/opt/oncall/bin` holds `submit`. `SANDBOX_PROBE` is a
stdlib-only script that prints all of that as JSON from inside a sandbox;
`parse_sandbox_probe` reads it back into a `SandboxView` and `sandbox_surfaces` turns a
view into surfaces. Secret values (names like `*_KEY`, `*_TOKEN`) are redacted: only
their names are scanned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sreforge_contracts._errors import SandboxProbeFailed
from sreforge_contracts._tells import Surface

__all__ = ["SANDBOX_PROBE", "SandboxView", "parse_sandbox_probe", "sandbox_surfaces"]

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$", re.IGNORECASE)
_PROBE_MARK = "sandbox-view:"

SANDBOX_PROBE = f"""
import json, os, sys
def cmdline(pid):
    try:
        with open(f"/proc/{{pid}}/cmdline", "rb") as f:
            return f.read().rstrip(b"\\0").replace(b"\\0", b" ").decode(errors="replace")
    except OSError:
        return ""
def files(root, limit=200000):
    found = {{}}
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            try:
                data = open(path, "rb").read(limit) if os.path.isfile(path) else b""
            except OSError:
                data = b""
            text = "" if b"\\0" in data else data.decode(errors="replace")
            found[os.path.relpath(path, root)] = text
    return found
me = os.getpid()
titles = [cmdline(p) for p in sorted(os.listdir("/proc"), key=str) if p.isdigit() and int(p) != me]
bin_dir = sys.argv[1] if len(sys.argv) > 1 else ""
view = {{
    "process_titles": [t for t in titles if t],
    "env": dict(os.environ),
    "home": files(os.environ.get("HOME", "/nonexistent")),
    "bin": files(bin_dir) if bin_dir else {{}},
    "mounts": open("/proc/self/mountinfo", errors="replace").read(),
}}
print("{_PROBE_MARK}" + json.dumps(view))
"""
"""Run as `python3 -c SANDBOX_PROBE BIN_DIR` inside the sandbox; prints one JSON line."""


@dataclass(frozen=True)
class SandboxView:
    """The sandbox as the agent finds it when it starts (paths relative to their folder)."""

    process_titles: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    home_files: Mapping[str, str] = field(default_factory=dict)
    bin_files: Mapping[str, str] = field(default_factory=dict)
    mounts: str = ""
    """`/proc/self/mountinfo` as read inside (a bind mount's host path is in it)."""


def parse_sandbox_probe(output: str) -> SandboxView:
    """The view `SANDBOX_PROBE` printed (its last marked line); SandboxProbeFailed if none."""
    marked = [line for line in output.splitlines() if line.startswith(_PROBE_MARK)]
    if not marked:
        raise SandboxProbeFailed(f"the sandbox probe printed no view; output: {output[-400:]!r}")
    try:
        raw = json.loads(marked[-1][len(_PROBE_MARK) :])
        return SandboxView(
            process_titles=[str(t) for t in raw["process_titles"]],
            env={str(k): str(v) for k, v in raw["env"].items()},
            home_files={str(k): str(v) for k, v in raw["home"].items()},
            bin_files={str(k): str(v) for k, v in raw["bin"].items()},
            mounts=str(raw["mounts"]),
        )
    except (ValueError, KeyError, AttributeError, TypeError) as error:
        raise SandboxProbeFailed(f"the sandbox probe's view is malformed: {error}") from error


def sandbox_surfaces(view: SandboxView) -> list[Surface]:
    """Process titles, mounts, env one variable a surface (secret values redacted), HOME
    and bin file names and texts."""
    surfaces = [
        Surface("sandbox process titles", "\n".join(view.process_titles)),
        Surface("sandbox mounts", view.mounts),
    ]
    for name, value in sorted(view.env.items()):  # one a variable: a hit can name it alone
        shown = "<redacted>" if _SECRET_NAME.search(name) else value
        surfaces.append(Surface(f"sandbox env {name}", f"{name}={shown}"))
    for where, files in (("HOME", view.home_files), ("bin", view.bin_files)):
        surfaces.append(Surface(f"sandbox {where} file names", "\n".join(sorted(files))))
        surfaces += [
            Surface(f"sandbox {where} file {name}", text)
            for name, text in sorted(files.items())
            if text.strip()
        ]
    return surfaces
