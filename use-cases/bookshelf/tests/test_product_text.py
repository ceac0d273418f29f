"""What reaches the agent (the app tree and the fault commit) reads like a product."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import APP, FAULT_PATCH, STACK

TELLS = re.compile(
    r"\b(sreforge|scenarios?|inject\w*|faults?|faulty|oracles?|benchmarks?|solutions?|"
    r"incidents?|agents?|harness\w*)\b",
    re.IGNORECASE,
)
BANNERS = re.compile(r"\b(stub|mock server|fake server)\b", re.IGNORECASE)
TEXT_SUFFIXES = {".py", ".md", ".txt", ".ini", ".toml", ".cfg"}


def _text_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in TEXT_SUFFIXES
    )


@pytest.mark.parametrize("root", [APP, STACK / "upstream", STACK / "loadgen"], ids=lambda p: p.name)
def test_product_source_has_no_harness_words(root: Path) -> None:
    """The agent's workspace (and the services it can query) must not reveal the rig."""
    files = _text_files(root)
    assert files, f"no source found under {root}"
    hits = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TELLS.search(line) or BANNERS.search(line)
    ]
    assert not hits, "harness words in product source:\n" + "\n".join(hits)


def test_fault_commit_has_no_harness_words() -> None:
    """The commit message and diff land in the agent's `git log`."""
    text = FAULT_PATCH.read_text(encoding="utf-8")
    assert not TELLS.search(text), TELLS.search(text)


def test_app_requirements_cover_its_imports() -> None:
    """The CI gate installs requirements.txt; every third-party import must be listed."""
    listed = {
        re.split(r"[<>=\[ ]", line)[0].strip().lower().replace("_", "-")
        for line in (APP / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {"flask", "gunicorn", "prometheus-client", "httpx", "pytest"} <= listed
