"""Whole-run test machinery shared by `tests/e2e` and `tests/integrity`.

`RunPool` starts `sreforge run … --json` subprocesses a few at a time, each with its own
engine home, records and stacks root; `finished` checks a run's one record against the
schema and that nothing of it is left. `_services` runs the seven services as separate
processes on one nats-server, `_crash` the crash-safety campaign over them (both imported
by module: `tests/e2e/test_crash_safety.py`, `bench/crash_recovery.py`). On `sys.path`
through the root `conftest.py`.
"""

from ._checks import SCHEMA, assert_nothing_left, events_of, finished, signals_of
from ._pool import (
    CASES_NOISE,
    ENGINE_HOME,
    REPO,
    RUN_LIMIT_S,
    SCENARIO,
    SCENARIO_PARTS,
    TIME_SCALE,
    Canaries,
    Run,
    RunPool,
    RunSpec,
    kill_session,
    open_pool,
    private_cases,
)

__all__ = [
    "CASES_NOISE",
    "ENGINE_HOME",
    "REPO",
    "RUN_LIMIT_S",
    "SCENARIO",
    "SCENARIO_PARTS",
    "SCHEMA",
    "TIME_SCALE",
    "Canaries",
    "Run",
    "RunPool",
    "RunSpec",
    "assert_nothing_left",
    "events_of",
    "finished",
    "kill_session",
    "open_pool",
    "private_cases",
    "signals_of",
]
