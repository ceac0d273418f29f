"""Qualification: `sreforge qualify <scenario>` runs its arms as one campaign and writes
`verify/headroom.md` (see docs/qualify.md). The decision (`_decide`) is pure."""

from sreforge.qualify._cli import add_qualify_command
from sreforge.qualify._render import qualification_of

__all__ = ["add_qualify_command", "qualification_of"]
