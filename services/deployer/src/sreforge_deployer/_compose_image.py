"""The one image every compose stack runs: built once, offline, cached by a content hash.

`local/bookworm` + Debian's python3 (apt over plain HTTP works inside a build here;
HTTPS does not), the stack's runtime requirements installed `--no-index` from the
wheels `scripts/compose-context` downloads on the host (`.sreforge/compose/wheels`,
the lockfile's pins), the host's Prometheus and Alertmanager binaries copied in
(Go binaries needing only libc: faster than apt-getting them, and the same versions
as the local topology; with Debian's assets under `/usr/share/prometheus`), and the
stdlib relay of `sreforge_confine` (the webhook forwarder).
The tag is `local/sreforge-stack:<hash>` over every input; a lock file makes
concurrent first runs build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import sreforge_confine

from sreforge_deployer._errors import DeployerError

__all__ = ["IMAGE_REPOSITORY", "STACK_PYTHON", "StackImage"]

IMAGE_REPOSITORY = "local/sreforge-stack"
STACK_PYTHON = "/opt/stack/bin/python"
"""The stack's interpreter inside the image (a venv over Debian's python3)."""
RELAY = "/opt/relay.py"
SHARE = "/usr/share/prometheus"
"""Debian's Prometheus and Alertmanager read their web assets and templates here."""

_DOCKERFILE = f"""\
FROM local/bookworm
RUN apt-get update -qq \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
        python3 python3-venv >/dev/null \\
    && rm -rf /var/lib/apt/lists/*
COPY requirements.txt wheels/ /tmp/wheels/
RUN python3 -m venv /opt/stack \\
    && /opt/stack/bin/pip install -q --no-index --find-links /tmp/wheels \\
        -r /tmp/wheels/requirements.txt \\
    && rm -rf /tmp/wheels
COPY bin/ /usr/local/bin/
COPY share/ {SHARE}/
COPY relay.py {RELAY}
ENV PATH=/opt/stack/bin:/usr/local/bin:/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
"""
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class StackImage:
    """The stack image for one stack's requirements, built on first use."""

    def __init__(
        self,
        stack_root: Path,
        wheels: Path,
        binaries: dict[str, str],
        lock_dir: Path,
        docker: str = "docker",
    ) -> None:
        self.stack_root = stack_root
        self.wheels = wheels
        self.binaries = binaries
        self.lock_dir = lock_dir
        self.docker = docker

    def requirements(self) -> list[str]:
        """The stack's requirement lines that the wheels can satisfy (pytest is CI's, not here)."""
        have = {_normal(path.name.split("-")[0]) for path in self.wheels.glob("*.whl")}
        lines = []
        for path in sorted(self.stack_root.glob("*/requirements.txt")):
            for line in path.read_text().splitlines():
                match = _NAME.match(line)
                if match and _normal(match.group(1)) in have:
                    lines.append(line.split("#")[0].strip())
        return sorted(set(lines))

    def tag(self) -> str:
        """`local/sreforge-stack:<hash>` of the Dockerfile, requirements, wheels, binaries."""
        digest = hashlib.sha256(_DOCKERFILE.encode())
        digest.update("\n".join(self.requirements()).encode())
        for path in self._inputs():
            digest.update(str(_relative(path)).encode())
            digest.update(_file_digest(path))
        return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:16]}"

    def ensure(self) -> str:
        """The image's tag, building it first if the engine does not have it."""
        if not self.wheels.is_dir() or not any(self.wheels.glob("*.whl")):
            raise DeployerError(
                f"no wheels in {self.wheels}: run scripts/compose-context --images-only first"
            )
        tag = self.tag()
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_dir / "stack-image.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self._present(tag):
                self._build(tag)
        return tag

    def _inputs(self) -> list[Path]:
        wheels = sorted(self.wheels.glob("*.whl"))
        binaries = [self._binary(name) for name in sorted(self.binaries)]
        return [*wheels, *binaries, _relay_source(), *_share_files()]

    def _binary(self, name: str) -> Path:
        found = shutil.which(self.binaries[name])
        if found is None:
            raise DeployerError(f"{name}: binary {self.binaries[name]!r} not found on PATH")
        return Path(found)

    def _present(self, tag: str) -> bool:
        probe = [self.docker, "image", "inspect", "--format", "{{.Id}}", tag]
        return subprocess.run(probe, capture_output=True, check=False).returncode == 0

    def _build(self, tag: str) -> None:
        with tempfile.TemporaryDirectory(prefix="stack-image-") as scratch:
            context = Path(scratch)
            (context / "Dockerfile").write_text(_DOCKERFILE)
            (context / "requirements.txt").write_text("\n".join(self.requirements()) + "\n")
            _link_tree(sorted(self.wheels.glob("*.whl")), context / "wheels")
            (context / "bin").mkdir()
            for name in self.binaries:
                _link(self._binary(name), context / "bin" / name)
            _link(_relay_source(), context / "relay.py")
            (context / "share").mkdir()
            share = Path(SHARE)
            for path in _share_files():
                dest = context / "share" / path.relative_to(share)
                dest.parent.mkdir(parents=True, exist_ok=True)
                _link(path, dest)
            build = [self.docker, "build", "-q", "-t", tag, str(context)]
            env = {**os.environ, "DOCKER_BUILDKIT": "0"}
            done = subprocess.run(build, capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout)[-2000:]
            raise DeployerError(f"building the stack image {tag} failed: {tail}")


def _relay_source() -> Path:
    return Path(sreforge_confine.__file__).parent / "_relay.py"


def _relative(path: Path) -> Path:
    return path.relative_to(SHARE) if path.is_relative_to(SHARE) else Path(path.name)


def _share_files() -> list[Path]:
    share = Path(SHARE)
    return sorted(p for p in share.rglob("*") if p.is_file()) if share.is_dir() else []


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _file_digest(path: Path) -> bytes:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").digest()


def _link_tree(files: list[Path], folder: Path) -> None:
    folder.mkdir()
    for path in files:
        _link(path, folder / path.name)


def _link(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:  # another filesystem: a copy then
        shutil.copy2(source, dest)
