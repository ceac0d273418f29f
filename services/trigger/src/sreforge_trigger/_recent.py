"""A bounded memory of event ids already acknowledged, so re-sent notifications are cheap."""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["RecentIds"]


class RecentIds:
    """The last `size` event ids seen, least recently used evicted first.

    Only an optimisation: JetStream's `Nats-Msg-Id` dedupe is what makes a
    republish harmless; this skips the round trip for notifications we just handled.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, event_id: object) -> bool:
        if not isinstance(event_id, str) or event_id not in self._ids:
            return False
        self._ids.move_to_end(event_id)
        return True

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, event_id: str) -> None:
        """Remember `event_id`, evicting the least recently used one when full."""
        self._ids[event_id] = None
        self._ids.move_to_end(event_id)
        while len(self._ids) > self._size:
            self._ids.popitem(last=False)
