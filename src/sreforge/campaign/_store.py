"""`campaigns/<id>/`: the campaign's spec copy, one result line per finished trial, summaries.

Resume bookkeeping lives here: the last line of a trial (agent, scenario, trial number)
is the one that counts, and a trial is *finished* when that line has a verdict other
than `error` (an engine error is retried on the next resume).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sreforge_contracts import new_run_id

from sreforge.campaign._errors import CampaignError
from sreforge.campaign._spec import CampaignSpec, load_spec
from sreforge.campaign._stats import GroupStats, Trial

__all__ = [
    "CampaignSettings",
    "CampaignStore",
    "Result",
    "TrialKey",
    "finished_keys",
    "new_campaign_id",
    "pending_trials",
    "planned_trials",
]

_ID = re.compile(r"^[a-z0-9][a-z0-9-]{2,63}$")


class CampaignSettings(BaseSettings):
    """Where campaign folders go: `SREFORGE_CAMPAIGNS_DIR`, default `campaigns` in the
    working directory, beside the recorder's `runs/` (`SREFORGE_RECORDER_RUNS_DIR`)."""

    model_config = SettingsConfigDict(env_prefix="SREFORGE_CAMPAIGNS_", extra="ignore")

    dir: Path = Field(default=Path("campaigns"))


@dataclass(frozen=True, order=True)
class TrialKey:
    """One cell of the campaign: an agent on a scenario, trial number `trial` (from 1)."""

    agent: str
    scenario: str
    trial: int


@dataclass(frozen=True)
class Result:
    """One line of `results.jsonl`: how one trial ended."""

    agent: str
    scenario: str
    trial: int
    run_id: str | None
    verdict: str
    score: float | None = None
    time_to_clear_s: float | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    wall_s: float | None = None
    record: str | None = None
    reason: str | None = None
    submitted: bool | None = None
    """Whether the agent submitted (None: unknown, e.g. the run ended before its session)."""

    @property
    def key(self) -> TrialKey:
        """Which trial this is."""
        return TrialKey(self.agent, self.scenario, self.trial)

    def for_stats(self) -> Trial:
        """What the statistics read of it."""
        return Trial(
            self.agent, self.scenario, self.verdict, self.score,
            self.time_to_clear_s, self.tokens, self.cost_usd,
        )  # fmt: skip


def new_campaign_id() -> str:
    """A fresh campaign id that sorts by start time (the run id format)."""
    return new_run_id()


def planned_trials(spec: CampaignSpec) -> list[TrialKey]:
    """Every trial of the spec, round-robin (trial 1 of every pair first), so a campaign
    stopped early has every agent x scenario about equally far; the `once` agents have
    trial 1 only."""
    return [
        TrialKey(agent, scenario, trial)
        for trial in range(1, spec.trials + 1)
        for scenario in spec.scenarios
        for agent in spec.agents
        if trial == 1 or agent not in spec.once
    ]


def finished_keys(results: Iterable[Result]) -> set[TrialKey]:
    """Trials whose last result stands (any verdict but `error`)."""
    last = {result.key: result for result in results}
    return {key for key, result in last.items() if result.verdict != "error"}


def pending_trials(spec: CampaignSpec, results: Iterable[Result]) -> list[TrialKey]:
    """The trials a (re)run still has to run, in plan order."""
    done = finished_keys(results)
    return [key for key in planned_trials(spec) if key not in done]


class CampaignStore:
    """One campaign's folder."""

    def __init__(self, root: Path, campaign_id: str) -> None:
        if not _ID.fullmatch(campaign_id):
            raise CampaignError(
                f"campaign id {campaign_id!r} is not valid (e.g. 20261201-190000-a1b2c3)"
            )
        self.campaign_id = campaign_id
        self.path = root / campaign_id

    @property
    def spec_file(self) -> Path:
        """`campaign.toml`: the effective spec (file + flags) the campaign runs."""
        return self.path / "campaign.toml"

    @property
    def results_file(self) -> Path:
        """`results.jsonl`: one line per finished trial, appended as each ends."""
        return self.path / "results.jsonl"

    def exists(self) -> bool:
        """Whether the campaign was started before (its spec copy is there)."""
        return self.spec_file.is_file()

    def create(self, spec: CampaignSpec) -> None:
        """Make the folder and write the spec copy."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.spec_file.write_text(spec.to_toml())

    def spec(self) -> CampaignSpec:
        """The stored spec (for `resume ID` and `show ID`)."""
        if not self.exists():
            raise CampaignError(f"no campaign {self.campaign_id} under {self.path.parent}")
        return load_spec(self.spec_file)

    def results(self) -> list[Result]:
        """Every result line, in the order written (a torn last line is skipped)."""
        if not self.results_file.exists():
            return []
        found = []
        for line in self.results_file.read_text().splitlines():
            try:
                found.append(Result(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                continue  # a line cut short by a kill; its trial reruns
        return found

    def append(self, result: Result) -> None:
        """Append one result line and flush it to disk."""
        with self.results_file.open("a") as out:
            out.write(json.dumps(asdict(result)) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def write_summaries(self, summary: dict[str, object], rows: Sequence[GroupStats]) -> None:
        """`summary.json` and `summary.csv` (one row per agent x scenario)."""
        _replace(self.path / "summary.json", json.dumps(summary, indent=2) + "\n")
        _replace(self.path / "summary.csv", _csv(rows))


def _csv(rows: Sequence[GroupStats]) -> str:
    out = io.StringIO()
    ks = sorted({k for row in rows for k in row.pass_at})
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["agent", "scenario", "n", "passed", "not_counted", "pass_rate"]
        + [f"pass@{k}" for k in ks] + [f"pass^{k}" for k in ks]
        + ["mean_score", "score_stderr", "median_clear_s", "p90_clear_s",
           "mean_tokens", "mean_cost_usd"]
    )  # fmt: skip
    for row in rows:
        writer.writerow(
            [row.agent, row.scenario, row.n, row.passed, row.not_counted, _cell(row.pass_rate)]
            + [_cell(row.pass_at.get(k)) for k in ks] + [_cell(row.pass_hat.get(k)) for k in ks]
            + [_cell(v) for v in (row.mean_score, row.score_stderr, row.median_clear_s,
                                  row.p90_clear_s, row.mean_tokens, row.mean_cost_usd)]
        )  # fmt: skip
    return out.getvalue()


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def _replace(path: Path, text: str) -> None:
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(text)
    partial.replace(path)
