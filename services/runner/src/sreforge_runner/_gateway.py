"""The gateway: create the sandbox, drive a rein through its session, always clean up.

Stages, in order: `sandbox_create`, `session_start`, `execution`, `session_end`,
then `cleanup` (the rein's `cleanup_session`) and `teardown` (the sandbox's
destroy), which are attempted whatever happened before. Every failure is kept;
the first one is the primary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from pydantic import JsonValue

from sreforge_runner._reins import Dispatch, Rein
from sreforge_runner._sandbox import CONFINEMENT, HostSandbox

__all__ = ["GatewayResult", "Stage", "StageFailure", "drive"]

Stage = Literal[
    "sandbox_create", "session_start", "execution", "session_end", "cleanup", "teardown"
]
T = TypeVar("T")


@dataclass(frozen=True)
class StageFailure:
    """A stage that failed and the error it raised."""

    stage: Stage
    error: str


@dataclass(frozen=True)
class GatewayResult:
    """What one drive produced: the dispatch (if reached) and every stage failure."""

    rein: str
    dispatch: Dispatch | None
    budget_s: float
    failures: tuple[StageFailure, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when every stage, cleanup and teardown included, succeeded."""
        return not self.failures

    @property
    def primary(self) -> StageFailure | None:
        """The first failure, the one that explains the outcome."""
        return self.failures[0] if self.failures else None

    def evidence(self) -> dict[str, JsonValue]:
        """Secret-free evidence for the submission: rein, exit code, timeout, failures."""
        dispatch = self.dispatch
        return {
            "rein": self.rein,
            "confinement": CONFINEMENT,
            "budget_seconds": self.budget_s,
            "gateway_ok": self.ok,
            "exit_code": dispatch.exit_code if dispatch else None,
            "timeout": dispatch.timeout if dispatch else None,
            "failures": [{"stage": f.stage, "error": f.error} for f in self.failures],
        }


async def drive(rein: Rein, sandbox: HostSandbox, budget_s: float) -> GatewayResult:
    """Run `rein` in `sandbox` within `budget_s`; cleanup and teardown are always attempted."""
    failures: list[StageFailure] = []

    async def step(stage: Stage, action: Callable[[], Awaitable[T]]) -> T | None:
        if failures and stage not in ("cleanup", "teardown"):
            return None
        try:
            return await action()
        except Exception as error:
            failures.append(StageFailure(stage, f"{type(error).__name__}: {error}"))
            return None

    async def create() -> None:
        sandbox.create()

    async def destroy() -> None:
        sandbox.destroy()

    dispatch: Dispatch | None = None
    try:
        await step("sandbox_create", create)
        await step("session_start", lambda: rein.start_session(sandbox))
        dispatch = await step("execution", lambda: rein.dispatch(sandbox, budget_s))
        await step("session_end", lambda: rein.end_session(sandbox))
    finally:
        await step("cleanup", lambda: rein.cleanup_session(sandbox))
        await step("teardown", destroy)
    return GatewayResult(
        rein=rein.name, dispatch=dispatch, budget_s=budget_s, failures=tuple(failures)
    )
