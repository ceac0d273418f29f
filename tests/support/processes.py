"""Whether a process the test started has ended, for tests that check nothing outlives them."""

from __future__ import annotations

import psutil

__all__ = ["gone"]


def gone(pid: int) -> bool:
    """Whether process `pid` has exited: no such process, or a zombie not yet reaped."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
