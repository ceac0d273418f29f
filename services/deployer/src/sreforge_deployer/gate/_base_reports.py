"""The hand-off tree's own test report, learned once per tree: every later gate reads it.

The CI gate runs the base commit's tests to learn which exist and how each ended there
(`_gate._learn_base`). The base is the hand-off commit the harness made before the agent
had the workspace, and the gate's clone checks every object's hash on arrival, so its tree
id names its files exactly: the same id, the same tests. The report is kept under a key
over that id, the interpreter and the jail, written beside and renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from sreforge_deployer.gate._test_sets import JunitReport, Outcome

__all__ = ["BaseReports"]

_FORMAT = "base-report.v1"
_OUTCOMES = frozenset(get_args(Outcome))


@dataclass(frozen=True)
class BaseReports:
    """The learned base reports in `folder`, keyed by `key_for`."""

    folder: Path

    @staticmethod
    def key_for(tree: str, python: str, jail: str) -> str:
        """The key of base tree `tree` tested on `python` in `jail` (how it is confined)."""
        inputs = json.dumps([_FORMAT, tree, python, jail])
        return hashlib.sha256(inputs.encode()).hexdigest()[:32]

    def read(self, key: str) -> JunitReport | None:
        """The report kept under `key`; `None` when there is none or it is not one."""
        try:
            cases = json.loads((self.folder / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(cases, dict) or not all(
            isinstance(case, str) and seen in _OUTCOMES for case, seen in cases.items()
        ):
            return None
        return JunitReport(cases)

    def keep(self, key: str, report: JunitReport) -> None:
        """Keep `report` under `key` (a concurrent gate's equal report may win the rename)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        scratch = self.folder / f".{key}.{secrets.token_hex(6)}.json"
        scratch.write_text(json.dumps(report.cases, sort_keys=True))
        scratch.replace(self.folder / f"{key}.json")
