"""The recorder's RCA judge: each recorded run's RCA graded beside its record, never in it.

With no judge model configured (`SREFORGE_JUDGE_MODEL`) the reason is written at once
(`diagnosis-skipped.json`), before `Recorded` is announced, so the CLI's final table can
say so; with one, the model is asked in the background (it may take minutes) and
`diagnosis.json` lands when it answers. A run already judged is not judged again.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import structlog
from sreforge_contracts import canonical_json
from sreforge_report import JudgeSettings, NotJudged, judge_run

__all__ = ["Judging"]

log = structlog.get_logger("sreforge.recorder")


class Judging:
    """Judges recorded runs; keeps its background tasks until they finish."""

    def __init__(self, use_cases: Path) -> None:
        self._use_cases = use_cases
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, folder: Path, scenario_id: str, run_id: str) -> None:
        """Judge the run in `folder` (now, when no model is configured; else in the background)."""
        if (folder / "diagnosis.json").exists() or (folder / "diagnosis-skipped.json").exists():
            return
        settings = JudgeSettings()
        if not settings.model:
            self._judge(folder, scenario_id, run_id, settings)
            return
        task = asyncio.create_task(
            asyncio.to_thread(self._judge, folder, scenario_id, run_id, settings),
            name=f"recorder-judge-{run_id}",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the judgements in flight (the engine is stopping)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _judge(self, folder: Path, scenario_id: str, run_id: str, settings: JudgeSettings) -> None:
        try:
            outcome = judge_run(folder, settings, use_cases=self._use_cases)
        except Exception as error:  # a judge that fails must never touch the record
            _skipped(folder, run_id, f"could not judge: {error}")
            log.warning("recorder.not_judged", run_id=run_id, reason=str(error))
            return
        if isinstance(outcome, NotJudged):
            log.info("recorder.not_judged", run_id=run_id, reason=outcome.reason)
        else:
            log.info("recorder.judged", run_id=run_id, score=outcome.score)


def _skipped(folder: Path, run_id: str, reason: str) -> None:
    skipped = {"judged": False, "reason": reason, "run_id": run_id,
               "at": datetime.now(UTC).isoformat()}  # fmt: skip
    partial = folder / "diagnosis-skipped.json.partial"
    partial.write_text(canonical_json(skipped), encoding="utf-8")
    partial.replace(folder / "diagnosis-skipped.json")
