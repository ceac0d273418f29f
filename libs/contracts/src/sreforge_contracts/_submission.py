"""What the agent handed back: the diff, whether it submitted, its RCA and evidence."""

from __future__ import annotations

from pydantic import Field, JsonValue

from sreforge_contracts._base import Contract
from sreforge_contracts._harness import TimeoutKind

__all__ = ["AGENT_DIR", "MAX_STDERR_LINES", "SUBMISSION_DIR", "AgentExit", "Submission"]

SUBMISSION_DIR = ".oncall"
"""The workspace folder where the agent's `submit` leaves its sentinel and RCA: git-ignored,
never part of the diff, kept when CI cleans the checkout. Neutral: the agent sees it."""

AGENT_DIR = "agent"
"""The folder of a run's folder that holds the agent's kept files: `<stack run dir>/agent/`
while the stack lasts, `runs/<run_id>/agent/` once the run is recorded."""

MAX_STDERR_LINES = 20
_MAX_LINE = 400


class AgentExit(Contract):
    """How the agent's session ended, for the CLI and the record.

    `exit_code` is the agent process's (negative: the signal that ended it, e.g. -15 when
    a budget fired; None when the rein runs no process); `timeout` names the budget that
    fired; `stderr_tail` holds the last
    lines the agent wrote to stderr (capped, every known secret redacted) and
    `stderr_lines` how many it wrote in all.
    """

    exit_code: int | None = None
    timeout: TimeoutKind | None = None
    stderr_tail: tuple[str, ...] = Field(default=(), max_length=MAX_STDERR_LINES)
    stderr_lines: int = Field(default=0, ge=0)

    @property
    def failed(self) -> bool:
        """True when the agent's process exited non-zero or a budget stopped it."""
        return self.timeout is not None or self.exit_code not in (None, 0)

    def summary(self) -> str:
        """`exit code 2`, `the idle budget fired`, or `no exit code` (no process)."""
        if self.timeout is not None:
            return f"the {self.timeout} budget fired"
        return "no exit code" if self.exit_code is None else f"exit code {self.exit_code}"

    @staticmethod
    def clip(line: str) -> str:
        """One stderr line as the tail keeps it (capped)."""
        return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + "…"


class Submission(Contract):
    """The agent's result as the runner saw it.

    `diff` is taken against the base commit (new, staged and committed files,
    excluding `SUBMISSION_DIR`); `evidence` is the gateway's (secret-free) evidence.
    `agent_dir` is the runner's folder of the session's kept files (absolute, on the
    runner's host; removed with the stack), and `agent_files` names them relative to
    it: the recorder copies them into `runs/<run_id>/agent/` before the cleanup.
    `transcript_ref` points at the agent-transcript file relative to the run's folder
    (`agent/agent-transcript.json`: under the stack run dir while it lasts, under
    `runs/<run_id>/` once recorded); an absolute ref (older runners) is read as is.
    `agent_exit` says how the session ended (exit code, budget, stderr tail).
    `restarts` counts the sessions the harness restarted from the hand-off state
    because the runner died mid-session (a harness fault, never the agent's).
    """

    agent_name: str = Field(min_length=1)
    diff: str = ""
    submitted: bool
    rca: str | None = None
    transcript_ref: str | None = None
    duration_ms: float = Field(ge=0)
    stop_reason: str | None = None
    evidence: dict[str, JsonValue] = Field(default_factory=dict)
    agent_dir: str | None = None
    agent_files: tuple[str, ...] = ()
    agent_exit: AgentExit | None = None
    restarts: int = Field(default=0, ge=0)
