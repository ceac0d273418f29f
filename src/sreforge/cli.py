"""The `sreforge` command line."""

from __future__ import annotations

import argparse

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the `sreforge` command line and return its exit code."""
    parser = argparse.ArgumentParser(prog="sreforge", description=__doc__)
    parser.parse_args(argv)
    return 0
