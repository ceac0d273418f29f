"""The stack lifecycle's decisions (`_lifecycle`): arming, a redeploy and the load's start,
in order, over recorded effects; the delivery itself on a real git workspace."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from sreforge_deployer import Workspace
from sreforge_deployer._lifecycle import LoadControl, arm, redeploy, start_load
from sreforge_deployer._spec import ComponentSpec

from .conftest import BOOKSHELF_APP as APP
from .conftest import scenario_setup

LOAD = LoadControl(pause="/pause", resume="/resume", warmup="/warmup")


class Recorded:
    """Effects that write down what they were asked, with when (`time.time()`)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.warmed_at = 0.0
        self.settled_since = 0.0

    def post_load(self, path: str, timeout: float = 5.0) -> None:
        """Note the POST; a warm-up takes a moment, as a real one does."""
        self.calls.append(("post_load", path))
        if path == LOAD.warmup:
            time.sleep(0.05)  # the warm-up's own duration: a settle taken before it shows
            self.warmed_at = time.time()

    def settle(self, since: float) -> None:
        """Note the moment the rules must move past."""
        self.calls.append(("settle", None))
        self.settled_since = since

    def restart_service(self, runtime_env: Mapping[str, str]) -> None:
        """Note the restart and its environment."""
        self.calls.append(("restart_service", dict(runtime_env)))


def test_arming_pauses_delivers_restarts_then_warms_settles_and_resumes(
    series: list[Path], tmp_path: Path
) -> None:
    """A recent deploy: the load pauses before the commit lands, the service restarts on
    it, and the load resumes only after the warm-up settled; `armed_at` is the resume."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    built = workspace.head()
    effects = Recorded()
    before = datetime.now(UTC)
    armed = arm(
        effects, scenario_setup("arm-deploy-recent", series[-1:], tmp_path), workspace, LOAD
    )
    assert [name for name, _ in effects.calls] == [
        "post_load",
        "restart_service",
        "post_load",
        "settle",
        "post_load",
    ]
    assert [arg for name, arg in effects.calls if name == "post_load"] == [
        "/pause",
        "/warmup",
        "/resume",
    ]
    assert armed.fault_commit == workspace.head() != built
    assert armed.base_commit == workspace.head()
    assert armed.runtime_env == {}
    assert armed.armed_at >= before


def test_a_runtime_override_reaches_the_restart(series: list[Path], tmp_path: Path) -> None:
    """arm-runtime-notrace: the restart gets the override, and arming reports it for
    every later restart."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    effects = Recorded()
    armed = arm(
        effects, scenario_setup("arm-runtime-notrace", series[-1:], tmp_path), workspace, LOAD
    )
    assert ("restart_service", {"BOOKSHELF_MAX_INFLIGHT": "0"}) in effects.calls
    assert armed.runtime_env == {"BOOKSHELF_MAX_INFLIGHT": "0"}


def test_a_baked_fault_arms_without_a_restart(series: list[Path], tmp_path: Path) -> None:
    """setup-baked: the build already runs the fault; arming only starts the load."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    effects = Recorded()
    setup = scenario_setup("setup-baked", series[-1:], tmp_path)
    armed = arm(effects, setup, workspace, LOAD)
    assert "restart_service" not in [name for name, _ in effects.calls]
    assert armed.fault_commit is None


def test_the_warm_up_settles_from_its_end_not_its_start() -> None:
    """The rule windows must move past the warm-up's last request: the settle moment is
    taken once the warm-up returned (the compose stack used to take it before)."""
    effects = Recorded()
    start_load(effects, LOAD)
    assert effects.settled_since >= effects.warmed_at > 0


def test_a_load_without_warm_up_resumes_at_once() -> None:
    """No warm-up path: nothing to settle, the load resumes."""
    effects = Recorded()
    start_load(effects, LoadControl(pause="/pause", resume="/resume"))
    assert effects.calls == [("post_load", "/resume")]


def test_a_gated_redeploy_drains_restarts_warms_and_resumes() -> None:
    """Readiness gate on: pause, restart with the run's env, warm, settle, resume."""
    effects = Recorded()
    redeploy(effects, LOAD, {"A": "1"}, readiness_gate=True)
    assert effects.calls == [
        ("post_load", "/pause"),
        ("restart_service", {"A": "1"}),
        ("post_load", "/warmup"),
        ("settle", None),
        ("post_load", "/resume"),
    ]


def test_an_ungated_redeploy_restarts_under_load() -> None:
    """Readiness gate off: the load keeps running through the restart."""
    effects = Recorded()
    redeploy(effects, LOAD, {}, readiness_gate=False)
    assert effects.calls == [("restart_service", {})]


def test_load_control_needs_both_pause_and_resume() -> None:
    """Only a component with pause and resume paths is a load generator to control."""
    full = ComponentSpec(name="loadgen", cwd=".", argv=["lg"], pause="/p", resume="/r", warmup="/w")
    half = ComponentSpec(name="loadgen", cwd=".", argv=["lg"], pause="/p")
    assert LoadControl.of(full) == LoadControl("/p", "/r", "/w")
    assert LoadControl.of(half) is None
    assert LoadControl.of(None) is None
