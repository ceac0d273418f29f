"""What `sreforge run` shows: phase lines, the verdict block, trial summaries, exit codes."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from sreforge_contracts import (
    AgentExit,
    BriefReady,
    CiResult,
    CleanedUp,
    Deployed,
    Determinism,
    Event,
    FaultArmed,
    OracleScore,
    Recorded,
    RunFailed,
    RunRejected,
    RunRequested,
    RunTriggered,
    Scored,
    StackReady,
    Submitted,
)

__all__ = [
    "CLEANUP_GRACE_S",
    "EXIT_ABORTED",
    "EXIT_CODES_HELP",
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_PASSED",
    "RECORD_GRACE_S",
    "REJECTION_GRACE_S",
    "Outcome",
    "Progress",
    "describe",
    "exit_code",
    "format_outcome",
    "format_progress",
    "format_summary",
    "is_proof_run",
    "outcome_json",
    "run_deadline",
]

EXIT_PASSED, EXIT_FAILED, EXIT_ABORTED, EXIT_ERROR = 0, 1, 3, 4
_EXIT_BY_VERDICT = {
    "passed": EXIT_PASSED,
    "failed": EXIT_FAILED,
    "rejected": EXIT_FAILED,
    "aborted": EXIT_ABORTED,
    "error": EXIT_ERROR,
}
EXIT_CODES_HELP = """\
exit codes:
  0  passed
  1  failed, or rejected (by the CI gate, or run.start refused)
  3  aborted (setup failed, or the alert never fired: confirm-fire)
  4  error (an engine error, or no verdict before the run's deadline)
  130  stopped by SIGINT or SIGTERM (on the embedded engine the run ends aborted, recorded)
  with --trials N, the worst of the trials' codes
"""
# Allowances for the unscaled parts of a run when deriving its overall deadline.
_STACK_BOOT_S = 180.0
_CI_AND_DEPLOY_S = 600.0
RECORD_GRACE_S = 30.0  # the least the CLI waits for the record after the verdict
CLEANUP_GRACE_S = 30.0  # how long the CLI waits for the teardown once the record stands
REJECTION_GRACE_S = 10.0
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@dataclass(frozen=True)
class Outcome:
    """How one trial ended."""

    run_id: str | None
    verdict: str
    reason: str | None = None
    score: OracleScore | None = None
    record: str | None = None
    time_scale: float = 1.0
    proof_run: bool = False
    """The agent's profile was unverified: a labelled proof run, never banked."""
    submitted: bool | None = None
    """Whether the agent submitted (None when the run never got a submission)."""
    agent_exit: AgentExit | None = None
    """How the agent's session ended (exit code, budget, stderr tail), when it ran."""

    @property
    def smoke(self) -> bool:
        """A verdict at a time scale below 1 is a smoke verdict (SPEC §2)."""
        return self.time_scale < 1

    @property
    def exit_code(self) -> int:
        """The process exit code this outcome stands for."""
        return exit_code(self.verdict)


def exit_code(verdict: str) -> int:
    """0 passed, 1 failed/rejected, 3 aborted, 4 error (and anything unknown)."""
    return _EXIT_BY_VERDICT.get(verdict, EXIT_ERROR)


def run_deadline(determinism: Determinism, time_scale: float, agent_budget_s: float) -> float:
    """Seconds after which a run with no verdict is given up on: never hang forever."""
    windows = determinism.scaled(time_scale)
    system = (
        windows.confirm_fire_timeout_seconds
        + windows.max_clear_time_seconds
        + windows.sustained_clear_seconds
    )
    return _STACK_BOOT_S + system + agent_budget_s + _CI_AND_DEPLOY_S + RECORD_GRACE_S


def describe(event: Event) -> tuple[str, str] | None:
    """The phase an event marks and a one-line detail, or None for events that are no phase."""
    if isinstance(event, RunRequested):
        scale = f"time scale {event.time_scale:g}"
        where = "" if event.topology in (None, "local") else f", topology {event.topology}"
        return "requested", f"{event.scenario}, agent {event.agent}, {scale}{where}"
    if isinstance(event, RunRejected):
        return "rejected", event.reason
    if isinstance(event, StackReady):
        on = "" if event.topology in (None, "local") else f" (topology {event.topology})"
        return "stack ready", f"{event.stack}{on}"
    if isinstance(event, FaultArmed):
        return "armed", "fault delivered, load running; waiting for the alert"
    if isinstance(event, RunTriggered):
        return "triggered", f"{event.trigger.alert_name} fired"
    if isinstance(event, BriefReady):
        return "briefed", "the agent has the page"
    if isinstance(event, Submitted):
        return "submitted", _submission(event)
    if isinstance(event, CiResult):
        return "ci", f"{'green' if event.green else 'red'} in {event.duration_ms / 1000:.1f}s"
    if isinstance(event, Deployed):
        return "deployed", _deployment(event)
    if isinstance(event, Scored):
        return "scored", f"{event.verdict}, score {event.score.score:.2f}"
    if isinstance(event, RunFailed):
        return "failed", f"{event.stage}: {event.reason} ({event.verdict})"
    if isinstance(event, Recorded):
        return "recorded", event.path
    if isinstance(event, CleanedUp):
        left = ", ".join(event.leftovers)
        return "cleaned up", "verified: nothing left" if event.verified else f"LEFT: {left}"
    return None


def is_proof_run(event: Event) -> bool:
    """Whether `event` is a submission the gateway made as a proof run (unverified profile)."""
    return isinstance(event, Submitted) and event.submission.evidence.get("proof_run") is True


def _submission(event: Submitted) -> str:
    found = event.submission
    proof = " (proof run)" if is_proof_run(event) else ""
    ended = found.agent_exit
    how = f", {ended.summary()}" if ended and _telling(ended, found.submitted) else ""
    if not found.submitted:
        return f"no submission ({found.stop_reason or 'agent stopped'}{how}){proof}"
    lines = len(found.diff.splitlines())
    return f"{lines} diff lines in {found.duration_ms / 1000:.1f}s{how}{proof}"


def _deployment(event: Deployed) -> str:
    if not event.redeployed:
        return f"{event.service} redeploy failed: {event.error or 'no reason given'}"
    return f"{event.service} redeployed (readiness {event.readiness})"


def format_progress(elapsed_s: float, phase: str, detail: str) -> str:
    """One progress line: `  12.3s  triggered    BookshelfApiLatencyP99High fired`."""
    return f"{elapsed_s:7.1f}s  {phase:<12} {detail}".rstrip()


def format_outcome(outcome: Outcome) -> str:
    """The verdict, the score with one line per signal, and the record path."""
    headline = f"verdict: {outcome.verdict}"
    if outcome.smoke:
        headline += f" — smoke verdict at time scale {outcome.time_scale:g}"
    if outcome.proof_run:
        headline += " — proof run of an unverified profile (not banked)"
    lines = [headline + (f" (run {outcome.run_id})" if outcome.run_id else "")]
    if outcome.reason:
        lines.append(f"reason:  {outcome.reason}")
    lines += _agent_lines(outcome)
    if outcome.score is not None:
        lines.append(f"score:   {outcome.score.score:.2f}")
        for signal in outcome.score.signals:
            mark = "✓" if signal.satisfied else "✗"
            detail = f"  {signal.detail}" if signal.detail else ""
            weight = f"weight {signal.weight:.2f}"
            lines.append(f"  {mark} {signal.id:<16} {signal.value:4.2f}  {weight}{detail}")
    lines.append(f"record:  {outcome.record or '(none written)'}")
    lines += _diagnosis_lines(outcome.record)
    return "\n".join(lines)


def _diagnosis_lines(record: str | None) -> list[str]:
    """The RCA judge's diagnosis beside the verdict (never in the score), or why there is
    none; nothing when the record is not on this machine."""
    if record is None or not Path(record).is_file():
        return []
    folder = Path(record).parent
    try:
        diagnosis = json.loads((folder / "diagnosis.json").read_text(encoding="utf-8"))
        return [f"diagnosis: {float(diagnosis['score']):.2f} by {diagnosis['judge_model']} "
                "(the RCA judge, beside the verdict, not in the score)"]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        skipped = json.loads((folder / "diagnosis-skipped.json").read_text(encoding="utf-8"))
        return [f"diagnosis: not judged: {skipped['reason']}"]
    except (OSError, ValueError, KeyError, TypeError):
        return ["diagnosis: pending (the recorder's RCA judge is at work: sreforge show RUN_ID)"]


def _telling(ended: AgentExit, submitted: bool) -> bool:
    """Whether how the agent ended explains something: it failed, or it ran a process
    and made no submission (a built-in that runs none has nothing to add)."""
    ran = ended.exit_code is not None or bool(ended.stderr_tail)
    return ended.failed or (not submitted and ran)


def _agent_lines(outcome: Outcome) -> list[str]:
    """How the agent ended, when it failed or made no submission: exit code or budget,
    then its last stderr lines."""
    ended = outcome.agent_exit
    if ended is None or not _telling(ended, outcome.submitted is not False):
        return []
    submitted = "submitted" if outcome.submitted else "no submission"
    lines = [f"agent:   {ended.summary()}, {submitted}"]
    if ended.stderr_tail:
        shown = len(ended.stderr_tail)
        lines.append(f"stderr:  (last {shown} of {ended.stderr_lines} lines)")
        lines += [f"  | {line}" for line in ended.stderr_tail]
    return lines


def format_summary(outcomes: Sequence[Outcome]) -> str:
    """`N trials: passed 2, failed 1; pass rate 67%; mean score 0.81 ± 0.05 (std. error)`."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.verdict] = counts.get(outcome.verdict, 0) + 1
    tally = ", ".join(f"{verdict} {count}" for verdict, count in sorted(counts.items()))
    rate = 100 * counts.get("passed", 0) / len(outcomes)
    text = f"{len(outcomes)} trials: {tally}; pass rate {rate:.0f}%"
    if proofs := sum(outcome.proof_run for outcome in outcomes):
        text += f"; {proofs} proof runs (unverified profile, not banked)"
    scores = [o.score.score for o in outcomes if o.score is not None]
    if scores:
        mean = sum(scores) / len(scores)
        spread = sum((s - mean) ** 2 for s in scores) / max(len(scores) - 1, 1)
        text += f"; mean score {mean:.2f} ± {(spread / len(scores)) ** 0.5:.2f} (std. error)"
    return text


def outcome_json(outcome: Outcome) -> str:
    payload: dict[str, Any] = {
        "run_id": outcome.run_id,
        "verdict": outcome.verdict,
        "exit_code": outcome.exit_code,
        "reason": outcome.reason,
        "score": outcome.score.model_dump(mode="json") if outcome.score else None,
        "record": outcome.record,
        "time_scale": outcome.time_scale,
        "smoke": outcome.smoke,
        "proof_run": outcome.proof_run,
        "submitted": outcome.submitted,
        "agent_exit": outcome.agent_exit.model_dump(mode="json") if outcome.agent_exit else None,
    }
    return json.dumps(payload)


class Progress:
    """Phase lines on stderr with the elapsed time; a spinner line while waiting on a TTY."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._start = time.monotonic()
        self._ticks = 0
        self.last_phase = "submitting"

    @property
    def tick_s(self) -> float:
        """How often the waiting line is redrawn (and the engine checked)."""
        return 0.1 if self._tty else 0.5

    def restart(self) -> None:
        """Measure elapsed time from now (a new trial)."""
        self._start = time.monotonic()
        self.last_phase = "submitting"

    def phase(self, phase: str, detail: str) -> None:
        """Print a phase line."""
        self.last_phase = phase
        self._write(format_progress(time.monotonic() - self._start, phase, detail) + "\n")

    def done(self) -> None:
        """Clear the spinner line before the verdict is printed."""
        if self._tty:
            self._write("", newline=False)

    def wait(self) -> None:
        """Redraw the spinner line (TTY only)."""
        if self._tty:
            self._ticks += 1
            spin = _SPINNER[self._ticks % len(_SPINNER)]
            elapsed = time.monotonic() - self._start
            self._write(f"{elapsed:7.1f}s  {spin} {self.last_phase} …", newline=False)

    def _write(self, text: str, newline: bool = True) -> None:
        prefix = "\r\x1b[2K" if self._tty else ""
        self._stream.write(prefix + text)
        self._stream.flush()
