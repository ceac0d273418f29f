"""The run store (KV `sreforge-runs`): create-as-claim and compare-and-swap."""

from __future__ import annotations

import pytest
from sreforge_bus import Bus, CasConflict, Entry, RunStoreError

pytestmark = pytest.mark.integration


async def test_claim_succeeds_once(bus: Bus) -> None:
    """The first claim of a key wins; every later claim of it reports False."""
    assert await bus.runs.claim("run.r1", b"pending") is True
    assert await bus.runs.claim("run.r1", b"other") is False
    entry = await bus.runs.get("run.r1")
    assert entry is not None
    assert entry.value == b"pending"


async def test_stale_revision_update_is_a_cas_conflict(bus: Bus) -> None:
    """Two writers start from the same revision: the second write raises CasConflict."""
    await bus.runs.claim("run.r1", b"pending")
    start = await bus.runs.get("run.r1")
    assert start is not None
    newer = await bus.runs.update("run.r1", b"running", start.revision)
    with pytest.raises(CasConflict, match=r"run\.r1") as conflict:
        await bus.runs.update("run.r1", b"failed", start.revision)
    assert conflict.value.revision == start.revision
    assert await bus.runs.get("run.r1") == Entry("run.r1", b"running", newer)


async def test_get_put_and_keys(bus: Bus) -> None:
    """A missing key reads as None; put overwrites; keys lists live keys sorted."""
    assert await bus.runs.get("run.nope") is None
    assert await bus.runs.keys() == []
    first = await bus.runs.put("run.b", b"1")
    second = await bus.runs.put("run.b", b"2")
    await bus.runs.put("run.a", b"x")
    assert second > first
    assert await bus.runs.keys() == ["run.a", "run.b"]


async def test_bad_key_names_the_key(bus: Bus) -> None:
    """Keys outside NATS's alphabet raise RunStoreError naming the key."""
    with pytest.raises(RunStoreError, match="bad key!"):
        await bus.runs.put("bad key!", b"x")


async def test_keys_filter_by_subject_pattern_and_removed_keys_are_gone(bus: Bus) -> None:
    """`*` lists only dot-free keys; a pattern narrows to one prefix; a removed key is gone."""
    for key in ("run-0001", "run-0002", "route.abc", "oracle.samples.run-0001.0"):
        await bus.runs.put(key, b"x")
    await bus.runs.put("oracle.samples.run-0001.1", b"y")
    assert await bus.runs.keys("*") == ["run-0001", "run-0002"]
    assert await bus.runs.keys("oracle.samples.run-0001.*") == [
        "oracle.samples.run-0001.0",
        "oracle.samples.run-0001.1",
    ]
    assert await bus.runs.keys("nothing.*") == []
    await bus.runs.remove("oracle.samples.run-0001.0")
    assert await bus.runs.get("oracle.samples.run-0001.0") is None
    assert await bus.runs.keys("oracle.samples.run-0001.*") == ["oracle.samples.run-0001.1"]
    assert "oracle.samples.run-0001.0" not in await bus.runs.keys()
    assert await bus.runs.claim("oracle.samples.run-0001.0", b"again"), "a removed key is free"


async def test_keys_with_removed_come_from_the_stream_leader_and_name_removed_keys(
    bus: Bus,
) -> None:
    """The listing that needs no consumer (it survives a lost cluster node) answers the same
    patterns, and also names keys whose last write removed them (callers read each)."""
    for key in ("run-0001", "run-0002", "oracle.samples.run-0001.0"):
        await bus.runs.put(key, b"x")
    await bus.runs.remove("run-0002")
    assert await bus.runs.keys("*", with_removed=True) == ["run-0001", "run-0002"]
    assert await bus.runs.keys("oracle.samples.*.*", with_removed=True) == [
        "oracle.samples.run-0001.0"
    ]
    assert await bus.runs.keys("nothing.*", with_removed=True) == []
