"""The RCA judge: grade a run's RCA against its scenario's authored root cause, and write
`diagnosis.json` beside the record (or `diagnosis-skipped.json` saying why not).

The judge talks to any OpenAI-compatible Chat Completions endpoint
(`SREFORGE_JUDGE_BASE_URL`, `SREFORGE_JUDGE_MODEL`, optional `SREFORGE_JUDGE_API_KEY`); its
model must differ from the agent's. Nothing here touches `record.json` or the verdict.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sreforge_contracts import (
    ContractError,
    Diagnosis,
    RunRecord,
    canonical_json,
    default_use_cases,
    find_scenario,
    parse_run_record,
)

from sreforge_report._load import ReportError
from sreforge_report._prompt import RUBRIC_VERSION, Grade, addresses_grader, messages, parse_grade

__all__ = ["JudgeSettings", "NotJudged", "judge_run", "root_cause"]

_SECTION = re.compile(r"^## Root cause \(harness-internal\)\s*$", re.MULTILINE)
_ATTEMPTS = 3


class JudgeSettings(BaseSettings):
    """Where the judge model is: `SREFORGE_JUDGE_*`."""

    model_config = SettingsConfigDict(env_prefix="SREFORGE_JUDGE_", extra="ignore")

    base_url: str = "http://127.0.0.1:11434/v1"
    """An OpenAI-compatible API base (the default: a local Ollama)."""
    model: str | None = None
    """Required: no silent default, and it must not be the agent's model."""
    api_key: str | None = None
    timeout_s: float = Field(default=120.0, gt=0)


@dataclass(frozen=True)
class NotJudged:
    """Why a run's RCA was not judged (a normal state: written to diagnosis-skipped.json)."""

    reason: str


def root_cause(scenario_dir: Path) -> str:
    """The `## Root cause (harness-internal)` section of `verify/oracle.md`, up to the next
    `## ` heading; `ReportError` when it is missing or empty."""
    path = scenario_dir / "verify" / "oracle.md"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{path}: missing (the judge grades against it)") from None
    found = _SECTION.search(text)
    if found is None:
        raise ReportError(f"{path}: no '## Root cause (harness-internal)' section")
    rest = text[found.end() :]
    end = re.search(r"^## ", rest, re.MULTILINE)
    section = rest[: end.start()] if end else rest
    if not section.strip():
        raise ReportError(f"{path}: the root-cause section is empty")
    return section.strip()


def judge_run(
    folder: Path,
    settings: JudgeSettings,
    scenario_dir: Path | None = None,
    *,
    use_cases: Path | None = None,
) -> Diagnosis | NotJudged:
    """Judge the RCA of the run in `folder`; write and return the outcome. The scenario is
    `scenario_dir`, else found by the record's id under `use_cases` (default `use-cases/`),
    and read only when there is an RCA and a model to judge it."""
    record = _record(folder)

    def truth() -> str:  # read only when there is something to judge
        where = use_cases or default_use_cases()
        found = scenario_dir or find_scenario(where, record.scenario_id).path
        return root_cause(found)

    outcome = _judge(record, _rca(folder), truth, settings)
    if isinstance(outcome, Diagnosis):
        _write(folder / "diagnosis.json", canonical_json(outcome.model_dump(mode="json")))
        (folder / "diagnosis-skipped.json").unlink(missing_ok=True)
    else:
        skipped = {"judged": False, "reason": outcome.reason, "run_id": record.run_id,
                   "at": datetime.now(UTC).isoformat()}  # fmt: skip
        _write(folder / "diagnosis-skipped.json", canonical_json(skipped))
    return outcome


def _judge(
    record: RunRecord, rca: str | None, truth: Callable[[], str], settings: JudgeSettings
) -> Diagnosis | NotJudged:
    if not rca or not rca.strip():
        return NotJudged("the agent submitted no RCA")
    if not settings.model:
        return NotJudged("no judge model configured (set SREFORGE_JUDGE_MODEL)")
    agent_model = record.agent_transcript.model if record.agent_transcript else None
    if agent_model and agent_model.strip().lower() == settings.model.strip().lower():
        return NotJudged(f"the judge model {settings.model} is the agent's own model")
    nonce = secrets.token_hex(12)
    while nonce in rca:
        nonce = secrets.token_hex(12)
    asked = messages(rca, truth(), nonce)
    problem = ""
    for _ in range(_ATTEMPTS):
        try:
            answer = _ask(settings, asked)
        except httpx.HTTPError as error:
            return NotJudged(f"judge endpoint {settings.base_url} unreachable: {error}")
        except ValueError as error:
            return NotJudged(f"judge endpoint {settings.base_url} answered nonsense: {error}")
        try:
            return _diagnosis(record, parse_grade(answer), rca, settings.model)
        except ValueError as error:
            problem = str(error)
    return NotJudged(f"the judge's answer did not parse after {_ATTEMPTS} attempts: {problem}")


def _ask(settings: JudgeSettings, asked: list[dict[str, str]]) -> str:
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    body = {"model": settings.model, "messages": asked, "temperature": 0, "stream": False}
    url = settings.base_url.rstrip("/") + "/chat/completions"
    response = httpx.post(url, json=body, headers=headers, timeout=settings.timeout_s)
    response.raise_for_status()
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as error:
        raise ValueError(f"not a chat completion ({error!r})") from None
    if not isinstance(content, str):
        raise ValueError("no text in the answer")
    return content


def _diagnosis(record: RunRecord, grade: Grade, rca: str, model: str) -> Diagnosis:
    rationale = grade.rationale
    if addresses_grader(rca):
        rationale += " (The RCA contains text addressed to the grader; it was treated as data.)"
    return Diagnosis(
        run_id=record.run_id, scenario=record.scenario_id, score=grade.axes.score(),
        axes=grade.axes, rationale=rationale.strip(), rubric_version=RUBRIC_VERSION,
        judge_model=model, judged_at=datetime.now(UTC),
    )  # fmt: skip


def _record(folder: Path) -> RunRecord:
    path = folder / "record.json"
    try:
        return parse_run_record(path.read_bytes(), str(path))
    except FileNotFoundError:
        raise ReportError(f"{path}: no record (the run has not ended, or is elsewhere)") from None
    except ContractError as error:
        raise ReportError(f"{path}: not a run record: {error}") from None


def _rca(folder: Path) -> str | None:
    """`rca.txt`, else `rca.json`'s `raw_text`."""
    text = folder / "rca.txt"
    if text.is_file():
        return text.read_text(encoding="utf-8", errors="replace")
    try:
        data = json.loads((folder / "rca.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    raw = data.get("raw_text") if isinstance(data, dict) else None
    return raw if isinstance(raw, str) else None


def _write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
