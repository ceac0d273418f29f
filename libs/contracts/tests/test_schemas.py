"""The committed JSON Schemas: in sync with the models, and they accept real records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from sreforge_contracts import RunContract, RunRecord, parse_run_start
from sreforge_contracts.schemas import SCHEMA_DIR, drifted_schemas, main

SEED_000_CONTRACT: dict[str, Any] = {
    "agent_context": {
        "services": {
            "prometheus": "http://prometheus:9090",
            "alertmanager": "http://alertmanager:9093",
            "grafana": "http://grafana:3000",
            "api": "http://booklogr-api:5000",
        },
        "run_workspace": {"path": "/work/run/abc-1/booklogr", "service": "booklogr-api"},
        "workspace_path": "/workspace",
        "submit_command": "submit",
    },
    "scenario": {
        "id": "latency-cache-stampede",
        "profile": "incident",
        "run_id": "abc-1",
        "expected_alert": "BooklogrApiLatencyP99High",
        "alert_fired_at": "2026-11-29T08:00:00Z",
    },
    "eval_only": {
        "alert_to_clear": "BooklogrApiLatencyP99High",
        "max_clear_time_seconds": 600,
        "sustained_clear_seconds": 360,
    },
}


def _schema(name: str) -> dict[str, Any]:
    loaded = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_committed_schemas_match_the_models() -> None:
    """Fails when a model changed and `python -m sreforge_contracts.schemas` was not rerun."""
    assert drifted_schemas() == [], "regenerate: python -m sreforge_contracts.schemas"


def test_check_mode_reports_drift_and_write_mode_fixes_it(tmp_path: Path) -> None:
    """`--check` exits 1 on a stale or missing file; writing makes it pass."""
    assert main(["--check", "--dir", str(tmp_path)]) == 1
    assert main(["--dir", str(tmp_path)]) == 0
    assert main(["--check", "--dir", str(tmp_path)]) == 0
    (tmp_path / "run-record.v1.schema.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "retired.v0.schema.json").write_text("{}\n", encoding="utf-8")
    assert drifted_schemas(tmp_path) == ["retired.v0.schema.json", "run-record.v1.schema.json"]


def test_sample_record_validates_against_the_committed_schema(record: RunRecord) -> None:
    """A full record and its pruned copy are valid run-record.v1 documents."""
    schema = _schema("run-record.v1")
    jsonschema.Draft202012Validator.check_schema(schema)
    for document in (record, record.pruned()):
        jsonschema.validate(json.loads(document.canonical_json()), schema)


def test_schema_rejects_a_record_with_a_bad_verdict(record: RunRecord) -> None:
    """The schema is not vacuous: a wrong enum fails it."""
    data = json.loads(record.canonical_json())
    data["verdict"] = "won"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, _schema("run-record.v1"))


def test_run_record_schema_carries_every_spec_field() -> None:
    """SPEC §4's fields, names and enums are all in the committed schema."""
    schema = _schema("run-record.v1")
    properties = schema["properties"]
    assert isinstance(properties, dict)
    required = {
        "record_version",
        "kind",
        "run_id",
        "scenario_id",
        "profile",
        "trigger",
        "trajectory",
        "diff",
        "ci",
        "deploy",
        "score",
        "verdict",
        "timings",
        "started_at",
        "finished_at",
    }
    optional = {
        "agent_transcript",
        "full_record_sha256",
        "time_scale",
        "sli_series",
        "abort_reason",
        "engine_version",
    }
    assert required <= set(schema["required"])
    assert required | optional <= set(properties)
    assert properties["verdict"]["enum"] == ["passed", "failed", "rejected", "aborted", "error"]
    assert properties["kind"]["const"] == "run-record"
    defs = schema["$defs"]
    assert isinstance(defs, dict)
    assert defs["AgentTranscriptHeader"]["properties"]["confinement"]["enum"] == [
        "host-open",
        "host-sandboxed",
        "in-box",
    ]
    assert set(defs["OracleSignal"]["required"]) == {"id", "satisfied", "value", "weight", "detail"}
    assert {
        "source",
        "alert_name",
        "severity",
        "labels",
        "annotations",
        "fired_at",
        "signals",
    } <= set(defs["Trigger"]["properties"])
    assert {"green", "output", "duration_ms", "exit_code"} <= set(defs["CiOutcome"]["properties"])
    assert {"redeployed", "service", "duration_ms"} <= set(defs["DeployOutcome"]["required"])


def test_seed_000_run_contract_parses_and_validates() -> None:
    """The run contract of seed 000 is accepted by the model and the committed schema."""
    contract = RunContract.model_validate(SEED_000_CONTRACT)
    assert contract.scenario.expected_alert == "BooklogrApiLatencyP99High"
    jsonschema.validate(SEED_000_CONTRACT, _schema("run-contract.v1"))
    dumped = json.loads(contract.model_dump_json())
    assert set(dumped) == {"agent_context", "scenario", "eval_only"}
    assert set(dumped["agent_context"]) == set(SEED_000_CONTRACT["agent_context"])


def test_event_and_run_start_schemas_accept_what_the_models_accept() -> None:
    """`nats pub sreforge.run.start` payloads valid for the model are valid for the schema."""
    payload = {"scenario": "latency-cache-stampede", "agent": "noop", "time_scale": 0.1}
    parse_run_start(json.dumps(payload))
    jsonschema.validate(payload, _schema("run-start.v1"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**payload, "colour": "red"}, _schema("run-start.v1"))
    event = {
        "type": "CleanedUp",
        "run_id": "abc-1",
        "producer": "deployer",
        "verified": True,
        "event_id": "abc-1.CleanedUp",
        "occurred_at": "2026-11-29T08:00:00Z",
    }
    jsonschema.validate(event, _schema("event.v1"))


def test_transcript_and_diagnosis_schemas_accept_model_output(record: RunRecord) -> None:
    """agent-transcript.v1 needs a raw payload; diagnosis.v1 documents validate."""
    transcript = record.agent_transcript
    assert transcript is not None
    full = json.loads(transcript.model_dump_json())
    jsonschema.validate(full, _schema("agent-transcript.v1"))
    header_only = {k: v for k, v in full.items() if k not in {"raw_text", "raw_json"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(header_only, _schema("agent-transcript.v1"))
    diagnosis = {
        "schema_version": "diagnosis.v1",
        "run_id": "abc-1",
        "scenario": "s",
        "score": 0.7,
        "axes": {"root_cause_correct": True, "evidence_grounded": False, "false_leads": False},
        "rationale": "r",
        "rubric_version": "1",
        "judge_model": "m",
        "judged_at": "2026-11-29T08:00:00Z",
    }
    jsonschema.validate(diagnosis, _schema("diagnosis.v1"))
