"""A CLI agent plugged in as the README's walk-through says: its profile in the run's catalog.

The README's own `[command]` profile (`readme_profile`) is the one a user copies; a whole
run takes it with the executable, install folder and argv of a scripted agent, in a catalog
of the run's own (`SREFORGE_AGENTS`), and optionally `sreforge agents check`s it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._pool import REPO, Run

__all__ = ["WALKTHROUGH", "plug_in", "readme_profile"]

WALKTHROUGH = "<!-- plug-in walk-through"
"""The README marker the walk-through's profile follows."""


def readme_profile(metadata: Mapping[str, str] | None = None, **fields: object) -> str:
    """The README walk-through's profile with `fields` set (each an existing `key = ` line)
    and, when given, a `[metadata]` table."""
    readme = (REPO / "README.md").read_text()
    section = readme.split(WALKTHROUGH, 1)[1].split("\n## ", 1)[0]
    (found,) = re.findall(r"^```toml\n(.*?)^```", section, flags=re.M | re.S)
    profile = str(found)
    for key, value in fields.items():
        lines = profile.splitlines(keepends=True)
        at = [n for n, line in enumerate(lines) if line.startswith(f"{key} = ")]
        assert len(at) == 1, f"README walk-through profile: expected one `{key} =` line"
        lines[at[0]] = f"{key} = {json.dumps(value)}\n"  # JSON strings and lists are TOML too
        profile = "".join(lines)
    if metadata:
        table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in metadata.items())
        profile += f"\n[metadata]\n{table}"
    return profile


def plug_in(
    run: Run,
    executable: Path,
    tools: Path,
    *,
    name: str,
    description: str,
    args: Sequence[str],
    check: bool = True,
    metadata: Mapping[str, str] | None = None,
    **fields: object,
) -> None:
    """`executable`'s folder copied into `tools` (installed outside the checkout, as a
    user's agent is), the README's profile for it in the run's own catalog, then (with
    `check`) `sreforge agents check`, whose output lands in `run.check_output`."""
    catalog = run.root / "agents"
    if not catalog.exists():
        shutil.copytree(REPO / "agents", catalog)
    install = shutil.copytree(executable.parent, tools / executable.name)
    profile = readme_profile(
        metadata,
        name=name,
        description=description,
        executable=str(install / executable.name),
        install_paths=[str(install)],
        args=list(args),
        **fields,
    )
    (catalog / f"{name}.toml").write_text(profile)
    run.extra_env["SREFORGE_AGENTS"] = str(catalog)
    if not check:
        return
    argv = [sys.executable, "-m", "sreforge", "agents", "check", name]
    done = subprocess.run(
        argv, cwd=REPO, env=run.env(), capture_output=True, text=True, timeout=60, check=False
    )
    run.check_output = f"exit {done.returncode}\n{done.stdout}{done.stderr}"
