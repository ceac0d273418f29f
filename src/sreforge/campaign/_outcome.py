"""From how a trial's run ended (`sreforge run`'s Outcome and its record) to a result line."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import JsonValue
from sreforge_contracts import AgentTranscript, ContractError, OracleScore, parse_run_record

from sreforge._run_view import Outcome
from sreforge.campaign._store import Result, TrialKey

__all__ = ["HOST_LOST", "lost_its_host", "result_of", "time_to_clear", "usage"]

HOST_LOST = "worker: "
"""How the reason of a run whose worker host died starts (RunFailed{stage=worker})."""
_CLEARED = re.compile(r"cleared after ([0-9]+(?:\.[0-9]+)?)s")


def time_to_clear(score: OracleScore | None) -> float | None:
    """Seconds from the fix going live to the alert clearing, from the `time_to_clear`
    signal; None when the alert never cleared (or the run was never graded)."""
    if score is None:
        return None
    for signal in score.signals:
        if signal.id == "time_to_clear" and signal.satisfied:
            found = _CLEARED.search(signal.detail)
            return float(found.group(1)) if found else None
    return None


def usage(raw: JsonValue) -> tuple[int | None, float | None]:
    """Tokens (in + out) and the estimated cost in USD of a session's model calls, as the
    harness counted them (the transcript's `model_calls`: the model proxy's or the `openai`
    rein's log, never the agent's own claim); None where nothing was counted or priced."""
    calls = raw.get("model_calls") if isinstance(raw, dict) else None
    if not isinstance(calls, dict):
        return None, None
    parts = [calls.get("tokens_in"), calls.get("tokens_out")]
    tokens = sum(p for p in parts if isinstance(p, int)) if any(parts) else None
    cost = calls.get("cost_usd")
    return tokens, float(cost) if isinstance(cost, int | float) else None


def _record_usage(record: str | None) -> tuple[int | None, float | None]:
    if record is None:
        return None, None
    path = Path(record)
    path = path / "record.json" if path.is_dir() else path
    try:
        parsed = parse_run_record(path.read_bytes(), str(path))
    except (OSError, ContractError):
        return None, None  # an engine on another machine: its records are not here
    transcript = parsed.agent_transcript
    if isinstance(transcript, AgentTranscript) and transcript.raw_json is not None:
        return usage(transcript.raw_json)
    return None, None


def result_of(key: TrialKey, outcome: Outcome, wall_s: float) -> Result:
    """The result line of trial `key`, which ended as `outcome` after `wall_s` seconds.

    A trial without a record did not finish (an unanswered `run.start`, an engine error,
    no record before the deadline): its line says `error`, and a resume runs it again. A
    `run.start` the engine refused (an unknown scenario, an agent it does not allow) is
    `aborted`, as its record says: it graded nothing, and running it again would not help.
    """
    tokens, cost = _record_usage(outcome.record)
    verdict, reason = outcome.verdict, outcome.reason
    if verdict == "rejected" and outcome.score is None:  # refused at run.start: no grade
        verdict, reason = "aborted", f"run.start refused: {reason or 'no reason given'}"
    if outcome.record is None:
        verdict, reason = "error", f"no record ({verdict}): {reason or 'no reason given'}"
    return Result(
        agent=key.agent,
        scenario=key.scenario,
        trial=key.trial,
        run_id=outcome.run_id,
        verdict=verdict,
        score=outcome.score.score if outcome.score else None,
        time_to_clear_s=time_to_clear(outcome.score),
        tokens=tokens,
        cost_usd=cost,
        wall_s=round(wall_s, 1),
        record=outcome.record,
        reason=reason,
        submitted=outcome.submitted,
    )


def lost_its_host(result: Result) -> bool:
    """Whether the trial ended `error` because the worker host running it died: nothing
    about the agent or the scenario, so running the trial again is the right answer."""
    return result.verdict == "error" and (result.reason or "").startswith(HOST_LOST)
