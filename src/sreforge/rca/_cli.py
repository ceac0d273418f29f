"""`sreforge judge RUN_ID`: grade the run's RCA, beside its verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from sreforge_report._judge import JudgeSettings, NotJudged, judge_run

__all__ = ["add_judge_command"]


def add_judge_command(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `judge`."""
    judge = verbs.add_parser(
        "judge",
        help="grade a run's RCA with a model (diagnosis.json, beside the verdict)",
        description="Grade the RCA of RUN_ID against its scenario's authored root cause "
        "with the model at SREFORGE_JUDGE_BASE_URL (OpenAI-compatible; SREFORGE_JUDGE_MODEL "
        "required, and not the agent's model). Writes diagnosis.json in the run's folder, or "
        "diagnosis-skipped.json saying why it did not judge; record.json is never touched.",
    )
    judge.add_argument("run_id", metavar="RUN_ID")
    judge.add_argument("--scenario", type=Path, help="the scenario folder (default: found "
                       "by the record's scenario id under use-cases/)")  # fmt: skip
    judge.set_defaults(handler=_judge)


def _judge(args: argparse.Namespace) -> int:
    from sreforge_report._load import runs_dir

    folder = runs_dir() / args.run_id
    outcome = judge_run(folder, JudgeSettings(), args.scenario)
    if isinstance(outcome, NotJudged):
        print(f"not judged: {outcome.reason} ({folder / 'diagnosis-skipped.json'})")
        return 0
    axes = outcome.axes
    print(f"diagnosis: {outcome.score:.2f} by {outcome.judge_model} (beside the verdict) — "
          f"root cause {'correct' if axes.root_cause_correct else 'wrong'}, evidence "
          f"{'grounded' if axes.evidence_grounded else 'not grounded'}, "
          f"{'a false lead' if axes.false_leads else 'no false lead'}")  # fmt: skip
    print(f"  {outcome.rationale}")
    print(f"  {folder / 'diagnosis.json'}")
    return 0
