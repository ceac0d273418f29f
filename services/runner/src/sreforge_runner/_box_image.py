"""The `in-box` agent's image: `local/bookworm` with git and python3, built once.

No registry is reachable here, so the box image is built from the local base the
compose topology's stack image also starts from (`scripts/docker-engine` imports it)
plus Debian's `git` and `python3` (apt over plain HTTP works inside a build; nothing
else is fetched). The tag is `local/sreforge-box:<hash of the Dockerfile>`; a lock
file beside the build makes concurrent first runs build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from sreforge_runner._errors import SandboxError

__all__ = ["BOX_REPOSITORY", "box_dockerfile", "ensure_box_image"]

BOX_REPOSITORY = "local/sreforge-box"
_BUILD_TIMEOUT_S = 600.0


def box_dockerfile(base: str) -> str:
    """The box image's Dockerfile over `base`: what the agent's commands need (POSIX sh,
    git for its commits, python3 for the contamination guard's probe)."""
    return (
        f"FROM {base}\n"
        "RUN apt-get update -qq \\\n"
        "    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\\n"
        "        git python3 >/dev/null \\\n"
        "    && rm -rf /var/lib/apt/lists/*\n"
        "ENV PYTHONDONTWRITEBYTECODE=1\n"
    )


def ensure_box_image(docker: str, base: str, lock_dir: Path) -> str:
    """The box image's tag, built first when the engine lacks it; `SandboxError` says
    why it could not be (no engine, no base image, a failed build)."""
    dockerfile = box_dockerfile(base)
    tag = f"{BOX_REPOSITORY}:{hashlib.sha256(dockerfile.encode()).hexdigest()[:16]}"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / "box-image.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _present(docker, tag):
            return tag
        if not _present(docker, base):
            raise SandboxError(
                f"in-box: no base image {base} in the engine (scripts/docker-engine makes it)"
            )
        with tempfile.TemporaryDirectory(prefix="box-image-") as context:
            (Path(context) / "Dockerfile").write_text(dockerfile)
            build = [docker, "build", "-q", "-t", tag, context]
            env = {**os.environ, "DOCKER_BUILDKIT": "0"}
            try:
                done = subprocess.run(
                    build, capture_output=True, text=True, check=False, env=env,
                    timeout=_BUILD_TIMEOUT_S,
                )  # fmt: skip
            except (OSError, subprocess.TimeoutExpired) as error:
                raise SandboxError(f"in-box: building {tag} failed: {error}") from error
        if done.returncode != 0:
            raise SandboxError(
                f"in-box: building {tag} failed: {(done.stderr or done.stdout)[-800:]}"
            )
    return tag


def _present(docker: str, image: str) -> bool:
    probe = [docker, "image", "inspect", "--format", "{{.Id}}", image]
    try:
        return subprocess.run(probe, capture_output=True, check=False, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
