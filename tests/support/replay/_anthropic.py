"""Anthropic Messages (`POST /v1/messages`): not written yet (answers 501)."""

from __future__ import annotations

from ._script import Received, Turn
from ._server import Reply


class AnthropicMessages:
    """A placeholder: serves nothing until written."""

    def serves(self, request: Received) -> bool:
        """Nothing yet."""
        return False

    def reply(self, turn: Turn, request: Received) -> Reply:
        """Not written."""
        return Reply.json({"error": {"message": "not written"}}, 501)
