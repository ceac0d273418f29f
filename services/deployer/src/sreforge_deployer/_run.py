"""A run's identity and its folder, the same on every topology."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["remove_run_dir"]


def remove_run_dir(run_dir: Path) -> None:
    """Delete the run dir; tolerate it being gone already."""
    shutil.rmtree(run_dir, ignore_errors=True)
