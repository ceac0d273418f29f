"""What the oracle keeps in KV per run, so that a restarted oracle picks up where it was.

Keys in the `sreforge-runs` bucket (the correlator owns the bare run-id keys):

- `oracle.handoff.<run_id>`: the alerts firing when the agent got its page (created once);
- `oracle.samples.<run_id>.<n>`: the grading samples in chunks, `n` = 0, 1, 2, ... in order
  (append-only: a chunk is created once and never rewritten, so two oracles can never
  interleave samples of one run);
- `oracle.scored.<run_id>`: the run's one outcome event (Scored or RunFailed) and whether
  it was published; created by the first grader to finish, so later ones defer to it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import TypeAdapter
from sreforge_bus import ORACLE_HANDOFF, ORACLE_SCORED, RunStore, oracle_samples_key
from sreforge_contracts import Event, RunFailed, Scored, parse_event

from sreforge_oracle._errors import GradingInterrupted
from sreforge_oracle._model import GradingSample, ObservedAlert

__all__ = ["Outcome", "RunJournal"]

_SAMPLES = TypeAdapter(list[GradingSample])
_ALERTS = TypeAdapter(list[ObservedAlert])
_CHUNK_LIMIT = 200  # samples per KV value: stays far below the 1 MB message limit


@dataclass(frozen=True)
class Outcome:
    """The run's verdict event as the oracle claimed it, and whether it reached the stream."""

    event: Scored | RunFailed
    published: bool

    def to_bytes(self) -> bytes:
        """KV encoding."""
        return json.dumps(
            {"event": self.event.model_dump(mode="json"), "published": self.published}
        ).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Outcome:
        """Decode a KV value written by `to_bytes`."""
        data = json.loads(raw)
        event: Event = parse_event(json.dumps(data["event"]).encode())
        if not isinstance(event, Scored | RunFailed):
            raise ValueError(f"oracle outcome holds a {event.type}, not Scored or RunFailed")
        return cls(event=event, published=bool(data["published"]))


class RunJournal:
    """The oracle's KV records of one run (see the module docstring for the keys)."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id
        self._chunks = 0
        self._handoff = store.once(ORACLE_HANDOFF, run_id)
        self._outcome = store.once(ORACLE_SCORED, run_id)

    async def save_handoff(self, alerts: Sequence[ObservedAlert]) -> bool:
        """Keep the hand-off snapshot unless one exists (a redelivery keeps the first)."""
        value = _ALERTS.dump_json(list(alerts))
        return await self._handoff.claim(value)

    async def handoff(self) -> list[ObservedAlert] | None:
        """The hand-off snapshot, or `None` if none was taken."""
        value = await self._handoff.value()
        return None if value is None else _ALERTS.validate_json(value)

    async def samples(self) -> list[GradingSample]:
        """Every saved sample, in order; also positions the next `append`."""
        found: list[GradingSample] = []
        self._chunks = 0
        while (entry := await self._store.get(self._chunk_key(self._chunks))) is not None:
            found.extend(_SAMPLES.validate_json(entry.value))
            self._chunks += 1
        return found

    async def append(self, samples: Sequence[GradingSample]) -> None:
        """Save `samples` after the ones saved so far (call `samples()` first).

        Chunks are created, never overwritten: finding the next one taken means
        another oracle is grading this run, and this one backs off
        (`GradingInterrupted`) rather than interleave its samples.
        """
        for first in range(0, len(samples), _CHUNK_LIMIT):
            chunk = list(samples[first : first + _CHUNK_LIMIT])
            key = self._chunk_key(self._chunks)
            if not await self._store.claim(key, _SAMPLES.dump_json(chunk)):
                raise GradingInterrupted(
                    f"run {self._run_id}: {key} was written by another oracle grading this run"
                )
            self._chunks += 1

    async def outcome(self) -> Outcome | None:
        """The claimed outcome, if any grader got that far."""
        value = await self._outcome.value()
        return None if value is None else Outcome.from_bytes(value)

    async def claim_outcome(self, event: Scored | RunFailed) -> Outcome:
        """Make `event` the run's outcome unless another is claimed; return the one in force."""
        mine = Outcome(event=event, published=False)
        if await self._outcome.claim(mine.to_bytes()):
            return mine
        claimed = await self.outcome()
        return claimed if claimed is not None else mine

    async def mark_published(self, outcome: Outcome) -> None:
        """Record that the outcome is on the stream: redeliveries then publish nothing."""
        await self._outcome.record(Outcome(outcome.event, True).to_bytes())

    def _chunk_key(self, n: int) -> str:
        return oracle_samples_key(self._run_id, n)
