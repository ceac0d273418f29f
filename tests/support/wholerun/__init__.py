"""Whole-run test machinery shared by `tests/e2e` and `tests/integrity`.

`RunPool` starts `sreforge run … --json` subprocesses as its `Slots` allow, each with its
own engine home, records and stacks root; `_session` runs every module's `WholeRuns` in one
set of slots, behind the ordinary tests (hooked in by the root `conftest.py`); `finished`
checks a run's one record against the schema and that nothing of it is left. `_services`
runs the seven services as separate processes on one nats-server, `_crash` the
crash-safety campaign over them (both imported by module: `tests/e2e/test_crash_safety.py`,
`bench/crash_recovery.py`). On `sys.path` through the root `conftest.py`.
"""

from ._checks import SCHEMA, assert_nothing_left, events_of, finished, signals_of
from ._images import stack_image_inputs_ready, stop_engine_started_here
from ._plug_in import WALKTHROUGH, plug_in, readme_profile
from ._pool import (
    CASES_NOISE,
    DOCKER_LANE,
    ENGINE_HOME,
    REPO,
    RUN_CACHE,
    RUN_LIMIT_S,
    SCENARIO,
    SCENARIO_PARTS,
    TIME_SCALE,
    Canaries,
    Run,
    RunPool,
    RunSpec,
    Slots,
    kill_session,
    private_cases,
)
from ._session import (
    WholeRuns,
    close_session,
    entering,
    live_pids,
    open_pool,
    ordered,
    start_runs,
)

__all__ = [
    "CASES_NOISE",
    "DOCKER_LANE",
    "ENGINE_HOME",
    "REPO",
    "RUN_CACHE",
    "RUN_LIMIT_S",
    "SCENARIO",
    "SCENARIO_PARTS",
    "SCHEMA",
    "TIME_SCALE",
    "WALKTHROUGH",
    "Canaries",
    "Run",
    "RunPool",
    "RunSpec",
    "Slots",
    "WholeRuns",
    "assert_nothing_left",
    "close_session",
    "entering",
    "events_of",
    "finished",
    "kill_session",
    "live_pids",
    "open_pool",
    "ordered",
    "plug_in",
    "private_cases",
    "readme_profile",
    "signals_of",
    "stack_image_inputs_ready",
    "start_runs",
    "stop_engine_started_here",
]
