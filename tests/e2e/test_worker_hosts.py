"""End to end across hosts: two worker hosts in network namespaces on a 3-node cluster.

Each host is a Linux network namespace with its own loopback (its stacks listen there,
out of the other's reach) and a veth to the root namespace, where three `nats-server`
nodes (the pinned binary) form one JetStream cluster (R3 streams and run store). Each
host runs `sreforge serve --worker <host>` (every service, one stack slot); the operator's
`sreforge campaign` runs in the root namespace and only submits and follows. SPEC §5:
scale-out is NATS-native. Four quick runs in all (about 3.5 min on 2 cores).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from sreforge_bus import STREAM, Bus, RunOwner, run_owner_key
from wholerun import SCENARIO, SCHEMA
from workerhosts import REPO, Fleet, fleet, netns_missing

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(netns_missing() is not None, reason=netns_missing() or ""),
]

CAMPAIGN_LIMIT_S = 420.0
EVENTS = ("RunRequested", "StackReady", "FaultArmed", "RunTriggered", "BriefReady",
          "Submitted", "CiResult", "Deployed", "Scored", "Recorded", "CleanedUp")  # fmt: skip
"""Every event a graded run has, each exactly once (noop's has no CI and no deploy)."""
UNSUBMITTED = tuple(event for event in EVENTS if event not in ("CiResult", "Deployed"))


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Hosts `a` and `b` on the cluster, for the module (the second test kills one)."""
    with fleet(tmp_path_factory.mktemp("fleet")) as group:
        yield group


def _campaign(group: Fleet, name: str, agents: list[str]) -> subprocess.Popen[str]:
    (group.root / "campaigns").mkdir(exist_ok=True)
    (group.root / f"{name}.before").write_text(
        "\n".join(path.name for path in (group.root / "campaigns").iterdir())
    )
    spec = group.root / f"{name}.toml"
    spec.write_text(f'scenarios = ["{SCENARIO}"]\nagents = {json.dumps(agents)}\n'
                    f"trials = 1\ntime_scale = 0.1\nconcurrency = 2\n")  # fmt: skip
    stderr = group.log(name).open("a")
    return subprocess.Popen(
        [sys.executable, "-m", "sreforge", "campaign", str(spec)], cwd=REPO, env=group.env(),
        stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True,
    )  # fmt: skip


def _ended(group: Fleet, proc: subprocess.Popen[str], name: str) -> list[dict[str, Any]]:
    try:
        proc.communicate(timeout=CAMPAIGN_LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"campaign {name} did not end:\n{group.tail(name)}\n{_workers(group)}")
    before = set((group.root / f"{name}.before").read_text().split())
    [folder] = [p for p in (group.root / "campaigns").iterdir() if p.name not in before]
    text = (folder / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _workers(group: Fleet) -> str:
    return "\n".join(f"--- {name}\n{group.tail(name)}" for name in group.workers)


async def _owners(group: Fleet, count: int, limit_s: float = 120.0) -> dict[str, str]:
    """Wait until `count` runs have an owner; return run id → host."""
    bus = await group.bus()
    try:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            keys = await bus.runs.keys(run_owner_key("*"), with_removed=True)
            if len(keys) >= count:
                return await _read_owners(bus, keys)
            await asyncio.sleep(0.5)
        raise AssertionError(f"fewer than {count} runs were taken:\n{_workers(group)}")
    finally:
        await bus.close()


async def _read_owners(bus: Bus, keys: list[str]) -> dict[str, str]:
    owners = {}
    for key in keys:
        entry = await bus.runs.get(key)
        owner = RunOwner.parse(entry.value) if entry else None
        owners[key.rsplit(".", 1)[1]] = owner.host if owner else "?"
    return owners


async def _events(group: Fleet, run_id: str, until: str, limit_s: float = 60.0) -> dict[str, int]:
    """Each event type's count on the run's subjects, once `until` is among them."""
    bus = await group.bus()
    try:
        deadline = time.monotonic() + limit_s
        while True:
            info = await bus.js.stream_info(STREAM, subjects_filter=f"sreforge.run.{run_id}.>")
            counts = {s.rsplit(".", 1)[1]: n for s, n in (info.state.subjects or {}).items()}
            if until in counts or time.monotonic() > deadline:
                return counts
            await asyncio.sleep(0.5)
    finally:
        await bus.close()


def _record(line: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(Path(line["record"]).read_text())
    jsonschema.validate(record, json.loads(SCHEMA.read_text()))
    return record


def test_a_campaign_spreads_over_both_hosts_and_outlives_a_nats_node(hosts: Fleet) -> None:
    """reference and noop at once, one stack slot per host: each host takes one run;
    one of the three NATS nodes is killed while both run, and still every event of both
    runs is stored exactly once and each run ends with its one record and the right
    verdict (reference passed, noop failed)."""
    started = time.monotonic()
    proc = _campaign(hosts, "spread", ["reference", "noop"])
    owners = asyncio.run(_owners(hosts, 2))
    assert sorted(owners.values()) == ["a", "b"], f"one run per host: {owners}"
    hosts.kill_node(0)
    lines = _ended(hosts, proc, "spread")
    print(f"\nspread campaign: {time.monotonic() - started:.0f}s, owners {owners}")
    assert proc.returncode == 0, hosts.tail("spread")
    verdicts = {line["agent"]: line["verdict"] for line in lines}
    assert verdicts == {"reference": "passed", "noop": "failed"}, lines
    records = sorted((hosts.root / "records").glob("*/record.json"))
    assert {line["run_id"] for line in lines} == {path.parent.name for path in records}
    for line in lines:
        assert _record(line)["verdict"] == line["verdict"]
        counts = asyncio.run(_events(hosts, line["run_id"], "CleanedUp"))
        expected = EVENTS if line["agent"] == "reference" else UNSUBMITTED
        assert counts == dict.fromkeys(expected, 1), f"{line['agent']}: {counts}"


def test_a_host_dying_mid_run_fails_its_run_once_and_the_campaign_reruns_it(
    hosts: Fleet,
) -> None:
    """The host running the trial is killed outright (its worker and its stack): the run
    ends `error` with one record naming the lost host, and the campaign runs the trial
    again on the surviving host, where it passes."""
    before = set(asyncio.run(_owners(hosts, 0)))
    proc = _campaign(hosts, "rerun", ["reference"])
    owners = asyncio.run(_owners(hosts, len(before) + 1))
    [(run_id, host)] = [(r, h) for r, h in owners.items() if r not in before]
    asyncio.run(_events(hosts, run_id, "StackReady"))
    [dying] = [h for h in hosts.hosts if h.name == host]
    dying.die()
    lines = _ended(hosts, proc, "rerun")
    assert proc.returncode == 0, hosts.tail("rerun")
    assert [line["verdict"] for line in lines] == ["error", "passed"], lines
    lost, rerun = lines
    assert lost["run_id"] == run_id
    assert lost["reason"].startswith("worker: worker host"), lost["reason"]
    assert _record(lost)["verdict"] == "error"
    assert _record(rerun)["verdict"] == "passed"
    counts = asyncio.run(_events(hosts, run_id, "Recorded"))
    assert counts["RunFailed"] == 1
    assert counts["Recorded"] == 1
    survivor = asyncio.run(_owners(hosts, len(before) + 2))[rerun["run_id"]]
    assert survivor != host
