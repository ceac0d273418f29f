"""Seeded data from a content-addressed snapshot: seeded once per stack version, copied after."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from sreforge_deployer import ComponentStartError, DeployerSettings
from sreforge_deployer._process import LaunchSpec
from sreforge_deployer._seed_snapshot import seed_key, seed_with_snapshot
from sreforge_deployer.local import LocalStack

from .conftest import TINY_SCENARIOS

SEED = """\
import pathlib, sys, time
runs = pathlib.Path(sys.argv[2])
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
time.sleep(0.3)  # long enough for a concurrent first run to find the lock taken
(pathlib.Path(sys.argv[1]) / "app.db").write_text("rows " + sys.argv[3])
"""


def launch(tmp_path: Path, data: Path, rows: str = "1-100", code: str = SEED) -> LaunchSpec:
    """A seed writing `rows` into `data`/app.db and counting its runs in `tmp_path`/runs."""
    data.mkdir(parents=True, exist_ok=True)
    return LaunchSpec(
        name="seed",
        argv=[sys.executable, "-c", code, str(data), str(tmp_path / "runs"), rows],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        log_path=data.parent / "logs" / "seed.log",
    )


def key(spec: LaunchSpec, data: Path, tmp_path: Path, tree: str = "tree-1") -> str:
    """The snapshot key of `spec` seeding `data` on a workspace at `tmp_path`."""
    return seed_key(spec, data_dir=data, workspace=tmp_path, tree=tree)


def test_the_first_run_seeds_and_every_later_run_copies_the_snapshot(tmp_path: Path) -> None:
    """Two runs' data folders differ in path only: one seed, the same data, and the second
    run's seed log says where its data came from."""
    snapshots = tmp_path / "snapshots"
    first, second = tmp_path / "run-a" / "data", tmp_path / "run-b" / "data"
    spec_a, spec_b = launch(tmp_path, first), launch(tmp_path, second)
    assert key(spec_a, first, tmp_path) == key(spec_b, second, tmp_path)

    assert seed_with_snapshot(spec_a, first, snapshots, key(spec_a, first, tmp_path)) is False
    assert seed_with_snapshot(spec_b, second, snapshots, key(spec_b, second, tmp_path)) is True
    assert (tmp_path / "runs").read_text() == "x"
    assert (second / "app.db").read_text() == (first / "app.db").read_text() == "rows 1-100"
    assert "seeded from snapshot" in spec_b.log_path.read_text()
    (second / "app.db").write_text("written by the service")
    assert (snapshots / key(spec_a, first, tmp_path) / "app.db").read_text() == "rows 1-100"


def test_another_tree_or_command_is_another_snapshot(tmp_path: Path) -> None:
    """The workspace's tree and the seed's arguments are in the key: either changed seeds anew."""
    data = tmp_path / "run" / "data"
    spec = launch(tmp_path, data)
    assert key(spec, data, tmp_path) != key(spec, data, tmp_path, tree="tree-2")
    assert key(spec, data, tmp_path) != key(launch(tmp_path, data, rows="1-5"), data, tmp_path)


def test_a_failed_seed_keeps_no_snapshot(tmp_path: Path) -> None:
    """A seed that fails raises as before and leaves nothing a later run would copy."""
    snapshots, data = tmp_path / "snapshots", tmp_path / "run" / "data"
    spec = launch(tmp_path, data, code="raise SystemExit(3)")
    with pytest.raises(ComponentStartError, match="exited with code 3"):
        seed_with_snapshot(spec, data, snapshots, key(spec, data, tmp_path))
    assert not (snapshots / key(spec, data, tmp_path)).exists()


def test_concurrent_first_runs_seed_once(tmp_path: Path) -> None:
    """Three runs of a new stack version at once: one seeds, two wait and copy."""
    snapshots = tmp_path / "snapshots"
    folders = [tmp_path / f"run-{n}" / "data" for n in range(3)]
    specs = [launch(tmp_path, folder) for folder in folders]
    threads = [
        threading.Thread(
            target=seed_with_snapshot,
            args=(spec, folder, snapshots, key(spec, folder, tmp_path)),
        )
        for spec, folder in zip(specs, folders, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert (tmp_path / "runs").read_text() == "x"
    assert all((folder / "app.db").read_text() == "rows 1-100" for folder in folders)


@pytest.mark.integration
def test_two_stacks_of_one_version_seed_once(runs_root: Path, tmp_path: Path) -> None:
    """A stack's second boot takes its data from the first one's snapshot; with snapshots
    off, every boot seeds."""
    snapshots = tmp_path / "cache" / "seeds"
    on = DeployerSettings(runs_root=runs_root, cache_dir=tmp_path / "cache")
    for _ in range(2):
        stack = LocalStack(TINY_SCENARIOS / "tiny-ok", time_scale=0.1, settings=on)
        stack.up()
        try:
            assert (stack.run_dir / "data" / "tiny-api.db").read_text() == "seeded"
            log = (stack.run_dir / "logs" / "seed.log").read_text()
        finally:
            stack.down()
    assert len([p for p in snapshots.iterdir() if p.is_dir()]) == 1
    assert "seeded from snapshot" in log

    off = DeployerSettings(runs_root=runs_root, cache_dir=tmp_path / "cache", seed_snapshots=False)
    stack = LocalStack(TINY_SCENARIOS / "tiny-ok", time_scale=0.1, settings=off)
    stack.up()
    try:
        assert "seeded from snapshot" not in (stack.run_dir / "logs" / "seed.log").read_text()
    finally:
        stack.down()
