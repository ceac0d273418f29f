"""A run's identity and run-dir layout, the one home both topologies build theirs from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sreforge_deployer import DeployerError, DeployerSettings
from sreforge_deployer._compose_stack import ComposeStack
from sreforge_deployer._run import RunIdentity
from sreforge_deployer.local import LocalStack

from .conftest import STAMPEDE


def _settings(tmp_path: Path) -> DeployerSettings:
    return DeployerSettings(runs_root=tmp_path / "runs")


def test_an_unnamed_run_gets_a_fresh_id_route_and_token(tmp_path: Path) -> None:
    """No id, route or token file: each is minted, and two runs never share one."""
    settings = _settings(tmp_path)
    one, two = (
        RunIdentity.describe(
            settings,
            time_scale=0.5,
            run_id=None,
            webhook_url=None,
            webhook_route=None,
            webhook_token_file=None,
        )
        for _ in range(2)
    )
    assert re.fullmatch(r"run-[0-9a-f]{8}", one.run_id)
    assert one.run_dir == settings.runs_root / one.run_id
    assert one.webhook_url is None
    assert one.run_id != two.run_id
    assert one.webhook_route != two.webhook_route
    assert one.webhook_token != two.webhook_token


def test_a_named_run_pages_its_route_with_the_shared_token(tmp_path: Path) -> None:
    """A given id, route and token file are used as is; the URL is base + route."""
    token_file = tmp_path / "trigger.token"
    token_file.write_text("shared-token\n")
    identity = RunIdentity.describe(
        _settings(tmp_path),
        time_scale=1.0,
        run_id="run-given",
        webhook_url="http://127.0.0.1:8088/v1/alertmanager/",
        webhook_route="opaque",
        webhook_token_file=token_file,
    )
    assert identity.run_id == "run-given"
    assert identity.webhook_token == "shared-token"
    assert identity.webhook_url == "http://127.0.0.1:8088/v1/alertmanager/opaque"
    layout = identity.layout
    assert [layout.workspace, layout.data, layout.logs, layout.observability] == [
        identity.run_dir / name for name in ("workspace", "data", "logs", "observability")
    ]


@pytest.mark.parametrize("scale", [0.0, -0.1, 1.5])
def test_a_time_scale_outside_zero_to_one_is_refused(tmp_path: Path, scale: float) -> None:
    """Both stacks refuse it the same way, before anything is made."""
    with pytest.raises(ValueError, match="time_scale must be in"):
        RunIdentity.describe(
            _settings(tmp_path),
            time_scale=scale,
            run_id=None,
            webhook_url=None,
            webhook_route=None,
            webhook_token_file=None,
        )


def test_a_reused_run_id_is_refused(tmp_path: Path) -> None:
    """The run dir is made once (0700); a second run with that id is an error."""
    identity = RunIdentity.describe(
        _settings(tmp_path),
        time_scale=1.0,
        run_id="run-twice",
        webhook_url=None,
        webhook_route=None,
        webhook_token_file=None,
    )
    identity.make_run_dir()
    assert identity.run_dir.stat().st_mode & 0o777 == 0o700
    with pytest.raises(DeployerError, match="already exists"):
        identity.make_run_dir()


def test_both_topologies_describe_a_run_alike(tmp_path: Path) -> None:
    """The local and the compose stack of the same arguments name the same run and dir."""
    settings = _settings(tmp_path)
    stacks = [
        make(STAMPEDE, time_scale=0.1, run_id="run-alike", webhook_route="r1", settings=settings)
        for make in (LocalStack, ComposeStack)
    ]
    for stack in stacks:
        assert (stack.run_id, stack.run_dir, stack.webhook_route) == (
            "run-alike",
            settings.runs_root / "run-alike",
            "r1",
        )
    assert not (settings.runs_root / "run-alike").exists()  # described, nothing made
