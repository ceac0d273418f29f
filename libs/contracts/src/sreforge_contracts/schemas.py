"""JSON Schemas generated from the models; `python -m sreforge_contracts.schemas [--check]`.

Without `--check` it (re)writes `libs/contracts/schemas/*.schema.json`; with
`--check` it exits 1 and names each file that differs from the models.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from sreforge_contracts._catalog import AnyEvent
from sreforge_contracts._commands import RunStart
from sreforge_contracts._contract import RunContract
from sreforge_contracts._diagnosis import Diagnosis
from sreforge_contracts._manifest import ScenarioManifest
from sreforge_contracts._run_record import RunRecord, canonical_json
from sreforge_contracts._transcript import AgentTranscript

__all__ = ["SCHEMA_DIR", "drifted_schemas", "generate_schemas", "main", "write_schemas"]

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"
"""`libs/contracts/schemas/` in a source checkout."""

_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _model(model: type[BaseModel]) -> Callable[[], dict[str, Any]]:
    return lambda: model.model_json_schema()


_SOURCES: dict[str, Callable[[], dict[str, Any]]] = {
    "run-record.v1": _model(RunRecord),
    "agent-transcript.v1": _model(AgentTranscript),
    "diagnosis.v1": _model(Diagnosis),
    "scenario-manifest.v1": _model(ScenarioManifest),
    "run-contract.v1": _model(RunContract),
    "run-start.v1": _model(RunStart),
    "event.v1": lambda: TypeAdapter(AnyEvent).json_schema(),
}


def generate_schemas() -> dict[str, str]:
    """File name → canonical schema text, for every committed schema."""
    files: dict[str, str] = {}
    for name, build in _SOURCES.items():
        schema = {"$schema": _DIALECT, "$id": f"urn:sreforge:schema:{name}", **build()}
        schema.setdefault("title", name)
        files[f"{name}.schema.json"] = canonical_json(schema)
    return files


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema into `directory`; return the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generate_schemas().items():
        target = directory / name
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def drifted_schemas(directory: Path = SCHEMA_DIR) -> list[str]:
    """Names of committed schemas that are missing, stale or no longer generated."""
    expected = generate_schemas()
    drifted = []
    for name, text in expected.items():
        target = directory / name
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            drifted.append(name)
    stale = {p.name for p in directory.glob("*.schema.json")} - set(expected)
    return sorted(drifted + list(stale))


def main(argv: list[str] | None = None) -> int:
    """Write the schemas, or with `--check` report drift and exit 1."""
    parser = argparse.ArgumentParser(prog="python -m sreforge_contracts.schemas")
    parser.add_argument("--check", action="store_true", help="fail if committed schemas drift")
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR, help="schema directory")
    args = parser.parse_args(argv)
    if args.check:
        drifted = drifted_schemas(args.dir)
        for name in drifted:
            print(f"{args.dir / name}: differs from the models", file=sys.stderr)
        if drifted:
            print("regenerate: python -m sreforge_contracts.schemas", file=sys.stderr)
        return 1 if drifted else 0
    for path in write_schemas(args.dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
