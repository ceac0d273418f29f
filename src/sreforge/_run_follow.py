"""Following one run to its record, as `sreforge run` does: the events, a lost follow,
an interrupt.

On the embedded engine the CLI's process is the run's whole engine, so whatever the
CLI does the run ends with its one record before the engine goes: a follow that is cut
short is taken up again until the run's deadline (the record found on disk meanwhile
counts as read); the first SIGINT or SIGTERM (`Interrupt`) ends the run `aborted`
through the normal path (a RunFailed the recorder records and the deployer cleans up
after); a deadline that passes without a verdict ends it `error` the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats.errors
from sreforge_bus import follow, misplaced
from sreforge_contracts import (
    CleanedUp,
    ContractError,
    Event,
    Recorded,
    RunFailed,
    RunRejected,
    Scored,
    Submitted,
    parse_event,
)

from sreforge._engine import RunningEngine
from sreforge._run_view import (
    CLEANUP_GRACE_S,
    RECORD_GRACE_S,
    Outcome,
    Progress,
    describe,
    is_proof_run,
)

__all__ = ["ENDED_GRACE_S", "FOLLOW_BACKOFF_S", "REPEAT_S", "Follower", "Interrupt", "record_path"]

FOLLOW_BACKOFF_S = (0.5, 1.0, 2.0, 4.0)
"""The waits before each new follow of a run whose follow was cut short (then the last,
again, until the run's deadline): the first ones about what a 3-node cluster takes to
elect new leaders after losing one."""
REPEAT_S = 1.0
"""A signal within this long of the first is the same stop delivered twice, not a second."""
ENDED_GRACE_S = 30.0
"""How long the CLI waits for the record of a run it ended itself (interrupted, or past
its deadline) before it leaves, the engine with it."""


class Interrupt:
    """SIGINT and SIGTERM alike: the first asks the run in flight to end (`aborted`, with
    its record, its stack torn down) and starts no other trial; the second leaves at once
    (the engine still stops its services and tears down the stacks it owns)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.signal_name: str | None = None
        self._first_at = 0.0

    @contextlib.contextmanager
    def installed(self, task: asyncio.Task[object] | None = None) -> Iterator[None]:
        """Handle both signals in this loop for the block; the second cancels `task`."""
        loop = asyncio.get_running_loop()
        target = task or asyncio.current_task()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._on_signal, signum, target)
        try:
            yield
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    def _on_signal(self, signum: int, task: asyncio.Task[object] | None) -> None:
        now = time.monotonic()
        if self.asked.is_set():
            # `timeout` signals its child and then its whole process group, so one stop
            # arrives twice at once: only a signal after REPEAT_S is a second one.
            if task is not None and now - self._first_at > REPEAT_S:
                task.cancel()
            return
        self._first_at = now
        self.signal_name = signal.Signals(signum).name
        self.asked.set()
        print(
            f"\n{self.signal_name}: ending the run (aborted, with its record); "
            "again to leave at once",
            file=sys.stderr,
            flush=True,
        )

    @property
    def reason(self) -> str:
        """The RunFailed reason of a run this interrupt ended."""
        return f"`sreforge run` was stopped ({self.signal_name or 'interrupted'})"


class Follower:
    """Reads one run's events until its record, or until the run's deadline (extended by a
    grace period when the verdict comes late) with the verdict alone."""

    def __init__(
        self,
        engine: RunningEngine,
        run_id: str,
        progress: Progress,
        deadline_s: float,
        interrupt: Interrupt | None = None,
    ) -> None:
        self._engine = engine
        self._run_id = run_id
        self._progress = progress
        self._deadline = time.monotonic() + deadline_s
        self._interrupt = interrupt
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._verdict: Event | None = None
        self._record: tuple[str, str] | None = None
        """(verdict, path) once the record stands: from Recorded, or found on disk."""
        self._ended_by_us = False
        self._follow_down = False
        self._proof_run = False
        self._submitted: Submitted | None = None

    async def run(self) -> Outcome:
        """Follow the run to its outcome."""
        reader = asyncio.create_task(self._read())
        try:
            return await self._watch()
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def _read(self) -> None:
        """Follow the run's subjects; a follow cut short (a cluster node lost, the engine
        too busy to create the consumer in time) is taken up again from the start,
        skipping what was read, until the follower is done."""
        read, failures = 0, 0
        while True:
            try:
                async for message in follow(self._engine.bus, f"sreforge.run.{self._run_id}.>"):
                    self._follow_down, failures = False, 0
                    if message.seq <= read:
                        continue
                    read = message.seq
                    self._take(message.subject, message.data)
                error: BaseException | None = None
            except (TimeoutError, nats.errors.Error) as cut:
                error = cut
            if not self._follow_down:
                print(
                    f"lost the run's event stream ({error!r}); following again",
                    file=sys.stderr,
                    flush=True,
                )
            self._follow_down = True
            await asyncio.sleep(FOLLOW_BACKOFF_S[min(failures, len(FOLLOW_BACKOFF_S) - 1)])
            failures += 1

    def _take(self, subject: str, data: bytes) -> None:
        with contextlib.suppress(ContractError):
            event = parse_event(data)
            if misplaced(event, subject) is None:  # a forged body on another's subject
                self._events.put_nowait(event)

    async def _watch(self) -> Outcome:
        while True:
            if self._interrupted():
                await self._end(self._interrupt_reason(), "aborted")
            left = self._deadline - time.monotonic()
            if left <= 0:
                if await self._end_overdue():
                    continue
                break
            try:
                wait = min(left, self._progress.tick_s)
                event = await asyncio.wait_for(self._events.get(), wait)
            except TimeoutError:
                if crash := self._engine.crashed():
                    return Outcome(self._run_id, "error", reason=crash)
                if self._found_on_disk():
                    # No teardown to wait for that could be seen: the engine's stop tears
                    # down what is left of the run's stack, and verifies.
                    assert self._record is not None
                    return self._ended(*self._record)
                self._progress.wait()
                continue
            if (ended := self._see(event)) is not None:
                return ended
        if self._record is not None:
            return self._ended(*self._record)
        if self._verdict is not None:
            return self._ended(None, None)
        return Outcome(
            self._run_id, "error", reason=f"no verdict before the deadline (last phase: "
            f"{self._progress.last_phase}); see `sreforge tail --run {self._run_id}`",
        )  # fmt: skip

    def _see(self, event: Event) -> Outcome | None:
        """Take one event in; the outcome once the run is over (its teardown seen)."""
        if (shown := describe(event)) is not None:
            self._progress.phase(*shown)
        self._proof_run = self._proof_run or is_proof_run(event)
        if isinstance(event, Submitted) and self._submitted is None:
            self._submitted = event
        if isinstance(event, CleanedUp) and self._record is not None:
            return self._ended(*self._record)
        if isinstance(event, Recorded) and self._record is None:
            self._recorded(event.verdict, event.path)
        if isinstance(event, Scored | RunFailed | RunRejected) and self._verdict is None:
            self._verdict = event
            # The record follows the verdict, late when the recorder restarts: wait for
            # it until the run's own deadline (at least RECORD_GRACE_S more).
            self._deadline = max(self._deadline, time.monotonic() + RECORD_GRACE_S)
        return None

    def _recorded(self, verdict: str, path: str) -> None:
        self._record = (verdict, path)  # the record stands; wait briefly for the teardown
        self._deadline = min(self._deadline, time.monotonic() + CLEANUP_GRACE_S)

    def _interrupted(self) -> bool:
        return (
            self._interrupt is not None and self._interrupt.asked.is_set() and not self._ended_by_us
        )

    def _interrupt_reason(self) -> str:
        assert self._interrupt is not None
        return self._interrupt.reason

    async def _end_overdue(self) -> bool:
        """At the deadline with no verdict, end the run on this engine (`error`) and wait a
        grace period for its record; False when there is nothing more to wait for."""
        if self._verdict is not None or self._record is not None or self._ended_by_us:
            return False
        reason = f"no verdict before the run's deadline (last phase: {self._progress.last_phase})"
        return await self._end(reason, "error", stage="deadline")

    async def _end(self, reason: str, verdict: str, *, stage: str = "interrupted") -> bool:
        """End the run through the normal path (RunFailed, recorded, cleaned up) when this
        process runs its engine and it has no verdict yet; wait `ENDED_GRACE_S` at most for
        the record. False when the engine runs elsewhere (the run is its to finish)."""
        self._ended_by_us = True
        ours = self._verdict is None and self._record is None
        if ours and not await self._engine.end_run(self._run_id, stage, reason, verdict):
            self._deadline = time.monotonic()
            return False
        self._deadline = time.monotonic() + ENDED_GRACE_S
        return True

    def _found_on_disk(self) -> bool:
        """While the follow is down, a record written meanwhile counts as read: whether
        one was found now."""
        if not self._follow_down or self._record is not None or self._engine.records_dir is None:
            return False
        path = record_path(self._engine.records_dir, self._run_id)
        with contextlib.suppress(OSError, ValueError):  # not there yet
            verdict = json.loads(path.read_text()).get("verdict")
            if isinstance(verdict, str):
                self._recorded(verdict, str(path.resolve()))
                return True
        return False

    def _ended(self, verdict: str | None, record: str | None) -> Outcome:
        found = self._verdict
        score = found.score if isinstance(found, Scored) else None
        reason = None
        if isinstance(found, RunFailed):
            reason = f"{found.stage}: {found.reason}"
        elif isinstance(found, RunRejected):
            reason = found.reason
        if verdict is None:
            verdict = found.verdict if isinstance(found, Scored | RunFailed) else "aborted"
        submission = self._submitted.submission if self._submitted else None
        return Outcome(
            self._run_id,
            verdict,
            reason=reason,
            score=score,
            record=record,
            proof_run=self._proof_run,
            submitted=submission.submitted if submission else None,
            agent_exit=submission.agent_exit if submission else None,
        )


def record_path(records_dir: Path, run_id: str) -> Path:
    """Where the recorder writes the run's record under its runs dir."""
    return records_dir / run_id / "record.json"
