"""Qualification: `sreforge qualify <scenario>` runs its arms as one campaign and writes
`verify/headroom.md` (see docs/qualify.md). The decision (`_decide`) is pure."""

from sreforge.qualify._cli import add_qualify_command

__all__ = ["add_qualify_command"]
