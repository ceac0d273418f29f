"""A fake engine on a real nats-server for campaign tests: it answers `run.start` and ends
each run (Scored, Recorded, CleanedUp) only when the test releases it; `reference` passes,
every other agent fails."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from nats.aio.msg import Msg
from sreforge_bus import HEADER_REPLY_TO, Bus
from sreforge_bus.embedded import NatsServer
from sreforge_contracts import (
    CleanedUp,
    OracleScore,
    OracleSignal,
    Recorded,
    RunStart,
    RunStartReply,
    Scored,
)

__all__ = ["FakeEngine", "fake_engine"]


@dataclass
class FakeEngine:
    """Accepts every run; ends one (passed for `reference`, failed otherwise) on `release`."""

    bus: Bus
    started: list[tuple[str, str]] = field(default_factory=list)
    ended: set[str] = field(default_factory=set)
    most_in_flight: int = 0

    async def on_start(self, message: Msg) -> None:
        request = RunStart.model_validate_json(message.data)
        run_id = f"fake-run-{len(self.started) + 1}"
        self.started.append((run_id, request.agent))
        self.most_in_flight = max(self.most_in_flight, len(self.started) - len(self.ended))
        reply = RunStartReply(accepted=True, run_id=run_id)
        assert message.headers is not None
        answer = reply.model_dump_json().encode()
        await self.bus.nc.publish(message.headers[HEADER_REPLY_TO], answer)

    async def release(self) -> None:
        """End every run started so far."""
        for run_id, agent in self.started:
            if run_id not in self.ended:
                self.ended.add(run_id)
                await self._end(run_id, passed=agent == "reference")

    async def _end(self, run_id: str, *, passed: bool) -> None:
        signal_ = OracleSignal(
            id="time_to_clear", satisfied=passed, value=0.5, weight=1.0,
            detail="cleared after 3.0s of 6.0s" if passed else "not cleared within 6.0s",
        )  # fmt: skip
        score = OracleScore(score=0.9 if passed else 0.1, passed=passed, signals=[signal_])
        verdict = "passed" if passed else "failed"
        await self.bus.publish(
            Scored(run_id=run_id, producer="oracle", score=score, verdict=verdict)
        )
        path = f"/nowhere/{run_id}/record.json"
        await self.bus.publish(
            Recorded(run_id=run_id, producer="recorder", path=path, sha256="0" * 64,
                     verdict=verdict)
        )  # fmt: skip
        await self.bus.publish(CleanedUp(run_id=run_id, producer="deployer", verified=True))


@pytest.fixture
async def fake_engine(
    bus: Bus, nats_server: NatsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[FakeEngine]:
    """A fake engine answering on `nats_server`, which the campaign joins (SREFORGE_NATS_URL)."""
    monkeypatch.setenv("SREFORGE_NATS_URL", nats_server.url)
    monkeypatch.setenv("SREFORGE_HOME", str(tmp_path / "home"))
    engine = FakeEngine(bus)
    subscription = await bus.nc.subscribe("sreforge.run.start", cb=engine.on_start)
    try:
        yield engine
    finally:
        await subscription.unsubscribe()
