"""Where the deployer confines agent-controlled code: the CI gate and the deployed service.

Both run the agent's tree under the `sreforge_confine` jail with the harness
interpreter read-only (its venv and the base install it links to, nothing else of
the harness tree). The CI gate gets the checkout read-write and no network; the
service gets its workspace read-only, the run's `data/` read-write, its declared
dependencies as the only outbound endpoints, and its own port as the only way in.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Sequence
from pathlib import Path

from sreforge_confine import (
    Allowlist,
    Bubblewrap,
    Confined,
    Confinement,
    ConfinementError,
    Endpoint,
    Jail,
    NoNetwork,
)

from sreforge_deployer._errors import ConfinementFailed

__all__ = [
    "JAIL_HOME",
    "check",
    "ci_jail",
    "confine",
    "confinement_for",
    "interpreter_paths",
    "seed_jail",
    "service_jail",
]

JAIL_HOME = "/tmp"
"""HOME and TMPDIR inside a jail: its own tmpfs (the host's are not there)."""
_SYSTEM = Path("/usr")
_PREFIX_TIMEOUT_S = 15.0


@functools.cache
def confinement_for(bwrap: str) -> Confinement:
    """The local topology's confinement (one per bwrap path, probed once)."""
    return Bubblewrap(bwrap)


@functools.cache
def interpreter_paths(python: str) -> tuple[Path, ...]:
    """What `python` needs read-only: its prefix (the venv) and base prefix, unless in /usr."""
    try:
        done = subprocess.run(
            [python, "-I", "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
            capture_output=True,
            text=True,
            timeout=_PREFIX_TIMEOUT_S,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise ConfinementFailed(
            f"interpreter {python}: cannot ask its prefixes ({error})"
        ) from error
    found = {Path(line).resolve() for line in done.stdout.split()}
    found.add(Path(python).resolve().parent.parent)
    kept = [path for path in found if not path.is_relative_to(_SYSTEM) and path != Path("/")]
    return tuple(sorted(kept))


def ci_jail(checkout: Path, python: str, argv: Sequence[str]) -> Jail:
    """The CI gate's jail: the checkout read-write but its `.git` read-only (the tested
    tree's objects are what gets merged), the interpreter read-only, no network."""
    git_dir = (checkout / ".git",) if (checkout / ".git").is_dir() else ()
    return Jail(
        argv=tuple(argv),
        cwd=checkout,
        read_only=(*interpreter_paths(python), *_venv_link(python), *git_dir),
        writable=(checkout,),
        network=NoNetwork(),
        die_with_parent=True,
    )


def seed_jail(
    argv: Sequence[str], cwd: Path, *, workspace: Path, data_dir: Path, python: str
) -> Jail:
    """A seed of a submitted tree (the patch judge's): the workspace read-only, `data_dir`
    read-write, no network, tied to the process that starts it."""
    return Jail(
        argv=tuple(argv),
        cwd=cwd,
        read_only=_code_paths(python, workspace, cwd),
        writable=(data_dir,),
        network=NoNetwork(),
        die_with_parent=True,
    )


def service_jail(
    argv: Sequence[str],
    cwd: Path,
    *,
    workspace: Path,
    data_dir: Path,
    python: str,
    outbound: Sequence[Endpoint],
    port: int,
    relay_dir: Path,
) -> Jail:
    """The service's jail: the workspace read-only, `data_dir` read-write, only `outbound`
    reachable, reached on `port` only."""
    return Jail(
        argv=tuple(argv),
        cwd=cwd,
        read_only=_code_paths(python, workspace, cwd),
        writable=(data_dir,),
        network=Allowlist(relay_dir, outbound=tuple(outbound), inbound=(port,)),
    )


def check(confinement: Confinement) -> None:
    """`ConfinementFailed` (naming the tool) unless agent code can be confined here."""
    try:
        confinement.check()
    except ConfinementError as error:
        raise ConfinementFailed(str(error)) from error


def confine(confinement: Confinement, jail: Jail) -> Confined:
    """The confined command line, after checking the confinement works here; never the
    bare command (`ConfinementFailed` instead)."""
    try:
        confinement.check()
        return confinement.confine(jail)
    except ConfinementError as error:
        raise ConfinementFailed(str(error)) from error


def _code_paths(python: str, workspace: Path, cwd: Path) -> tuple[Path, ...]:
    """What a workspace's code needs read-only: the interpreter, the workspace, the cwd."""
    read_only = [*interpreter_paths(python), *_venv_link(python), workspace]
    if not cwd.is_relative_to(workspace):
        read_only.append(cwd)
    return tuple(read_only)


def _venv_link(python: str) -> tuple[Path, ...]:
    """The interpreter's own path when it lies outside every prefix (a bare symlink)."""
    path = Path(python)
    if not path.is_absolute() or path.is_relative_to(_SYSTEM):
        return ()
    if any(path.is_relative_to(prefix) for prefix in interpreter_paths(python)):
        return ()
    return (path,)
