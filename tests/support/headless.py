"""Open a page in a real headless Chromium (Debian's `chromium`): its DOM after load, every
console message it logged, and optionally a screenshot."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["NO_CHROMIUM", "Loaded", "chromium", "find_chromium", "open_page"]

_CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)$")
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
          "--no-first-run", "--enable-logging=stderr", "--v=0")  # fmt: skip


@dataclass(frozen=True)
class Loaded:
    """What Chromium saw of one page."""

    dom: str
    console: list[str]


NO_CHROMIUM = "no chromium on PATH: run scripts/setup (it installs Debian's chromium)"


def find_chromium() -> str | None:
    """The Chromium binary on PATH (`scripts/setup` installs it), if any."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium binary; a visible skip where there is none."""
    found = find_chromium()
    if found is None:
        pytest.skip(NO_CHROMIUM)
    return found


def open_page(
    browser: str, url: str, profile: Path, *, screenshot: Path | None = None, height: int = 2400
) -> Loaded:
    """Load `url` once for its DOM and console messages, and once more for a screenshot."""
    base = [browser, *_FLAGS, f"--user-data-dir={profile}", f"--window-size=1200,{height}"]
    done = subprocess.run(
        [*base, "--dump-dom", url], capture_output=True, text=True, timeout=90, check=True
    )
    console = [m.group(1) for line in done.stderr.splitlines() if (m := _CONSOLE.search(line))]
    if screenshot is not None:
        subprocess.run(
            [*base, f"--screenshot={screenshot}", url],
            capture_output=True, text=True, timeout=90, check=True,
        )  # fmt: skip
        assert screenshot.stat().st_size > 10_000, f"{screenshot}: the screenshot is blank"
    return Loaded(dom=done.stdout, console=console)
