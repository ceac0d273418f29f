"""What the replayed model answers: turns of text and tool calls, taken in order."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_ids = itertools.count(1)


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model makes: the tool's name as the CLI declares it, its arguments."""

    name: str
    arguments: Mapping[str, Any]
    id: str = field(default_factory=lambda: f"call_{next(_ids):04d}")


@dataclass(frozen=True)
class Turn:
    """One model answer: optional text, then tool calls (none: the model is done)."""

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    tokens_in: int = 100
    tokens_out: int = 20


@dataclass(frozen=True)
class Received:
    """One request the agent sent (through the proxy): its path, headers and JSON body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any

    @property
    def flavor_path(self) -> str:
        """The path without its query string."""
        return self.path.split("?", 1)[0]


Aside = Callable[[Received], Turn | None]
"""Answers a side call (a title, a summary, a routing check) without taking a scripted turn."""

DONE = Turn(text="The fix is submitted; nothing more to do.")


class Script:
    """The conversation, one turn per main-loop model call; `DONE` once it is spent.

    `aside` sees every request first: a CLI's side calls (title generation, a
    "who speaks next" check) get its answer and do not advance the script.
    """

    def __init__(self, turns: Sequence[Turn], *, aside: Aside | None = None) -> None:
        self._turns = list(turns)
        self._aside = aside
        self._next = 0
        self._lock = threading.Lock()

    @property
    def spent(self) -> int:
        """How many scripted turns have been answered."""
        return self._next

    def answer(self, request: Received) -> Turn:
        """The turn for `request`: a side answer, the next scripted turn, or `DONE`."""
        if self._aside is not None and (side := self._aside(request)) is not None:
            return side
        with self._lock:
            if self._next >= len(self._turns):
                return DONE
            turn = self._turns[self._next]
            self._next += 1
            return turn
