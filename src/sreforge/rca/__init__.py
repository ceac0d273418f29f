"""The RCA judge: a model grades the agent's RCA (diagnosis.v1), beside the verdict.

`sreforge judge RUN_ID`; see docs/reports.md. The prompt and parser (`_prompt`) are pure;
`_judge` reads the run folder and the scenario's oracle, calls the model, writes the file.
"""

from sreforge_report._judge import JudgeSettings, NotJudged, judge_run, root_cause
from sreforge_report._prompt import addresses_grader, messages, parse_grade

from sreforge.rca._cli import add_judge_command

__all__ = [
    "JudgeSettings",
    "NotJudged",
    "add_judge_command",
    "addresses_grader",
    "judge_run",
    "messages",
    "parse_grade",
    "root_cause",
]
