"""Link cheats: a sandboxed agent points the files the harness reads on the host elsewhere.

In bubblewrap the agent cannot read the engine home or the scenario's `verify/`, but it can
make a symlink to their host paths (the default engine home is a fixed path, and
`/proc/self/mountinfo` shows where its binds come from), or a FIFO, in the files a harness
process then reads or writes on the host: the submission folder (`.oncall/submitted`,
`.oncall/rca.md`) and the session files collected from its HOME. Each cheat is a whole
`sreforge run` of a README-style profile around `fixtures/links/link-cheat`, no fix; each
must not pass, and nothing of its target (the bus operator's credential, the scenario's
authored root cause) may be in the record folder, the event log or the CLI's output.
The submitting cheats commit a failing test, so the run ends at the CI gate: the RCA is
taken with the submission, before CI, so what the harness read is already in the record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from wholerun import (
    REPO,
    SCENARIO_PARTS,
    Run,
    RunPool,
    RunSpec,
    WholeRuns,
    events_of,
    finished,
    open_pool,
    plug_in,
)

pytestmark = pytest.mark.integration

LINK_CHEAT = Path(__file__).resolve().parent / "fixtures" / "links" / "link-cheat"
AGENT = "on-call-links"
"""The profile's name (a harness word in it would rightly trip the contamination guard)."""
(SCENARIO_DIR,) = (REPO / "use-cases").glob("/".join(SCENARIO_PARTS))
ORACLE_NOTES = SCENARIO_DIR / "verify" / "oracle.md"
MIN_SECRET = 12
"""Shorter values (a NATS user name) would match by chance."""


def _operator(run: Run) -> Path:
    """The bus operator's credential in the run's engine home (written at engine start)."""
    return run.engine_home / "nats" / "operator.json"


def _planted(run: Run) -> Path:
    """A file of the engine home that only a write through the agent's link would make."""
    return run.engine_home / "written-through-a-link.json"


def _cheat(mode: str, targets: Callable[[Run], list[Path]], preset: str = "custom") -> RunSpec:
    """A run of `link-cheat PROMPT mode TARGET...` in bubblewrap; `aider` takes the preset
    whose exit counts as the submission and whose session files the runner collects."""

    def prepare(run: Run) -> None:
        args = ["{prompt_file}", mode, *(str(path) for path in targets(run))]
        metadata = {"proxy": "off"} if preset != "custom" else None
        description = "An on-call CLI agent inside bubblewrap (a link cheat of the suite)."
        plug_in(
            run,
            LINK_CHEAT,
            run.root / "tools",
            name=AGENT,
            description=description,
            args=args,
            check=False,  # unchecked: a labelled proof run, one CLI start-up less
            metadata=metadata,
            preset=preset,
        )

    return RunSpec(AGENT, prepare=prepare)


RUNS = {
    "rca-to-credential": _cheat("rca-link", lambda run: [_operator(run)]),
    "rca-to-notes": _cheat("rca-link", lambda run: [ORACLE_NOTES]),
    "rca-fifo": _cheat("rca-fifo", lambda run: []),
    "sentinel-to-credential": _cheat("sentinel-link", lambda run: [_operator(run)]),
    "sentinel-written-through": _cheat("sentinel-link", lambda run: [_planted(run)], "aider"),
    "session-to-secrets": _cheat(
        "session-link", lambda run: [_operator(run), ORACLE_NOTES, Path("/dev/zero")], "aider"
    ),
}
TEST_RUNS = {
    "test_an_rca_linked_to_the_bus_credential_carries_nothing_of_it": "rca-to-credential",
    "test_an_rca_linked_to_the_authored_root_cause_carries_nothing_of_it": "rca-to-notes",
    "test_an_rca_that_is_a_fifo_neither_hangs_nor_carries_anything": "rca-fifo",
    "test_a_sentinel_linked_to_a_credential_is_no_submission": "sentinel-to-credential",
    "test_the_runner_never_writes_a_sentinel_through_the_agents_link": ("sentinel-written-through"),
    "test_session_files_linked_to_secrets_are_not_collected": "session-to-secrets",
}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The selected link cheats' runs, all started when the first asks; torn down after."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs


def _home_secrets(run: Run) -> list[str]:
    """Every credential and token value of the run's engine home."""
    values: list[str] = []
    for path in sorted((run.engine_home / "nats").glob("*.json")):
        found = json.loads(path.read_text())
        if isinstance(found, dict) and isinstance(found.get("password"), str):
            values.append(found["password"])
    values += [path.read_text().strip() for path in run.engine_home.glob("*.token")]
    values = [value for value in values if len(value) >= MIN_SECRET]
    assert values, f"no credential found in {run.engine_home}: the probe cannot tell"
    return values


def _oracle_lines() -> list[str]:
    """The authored root cause's distinctive lines (long enough not to match by chance)."""
    lines = [line.strip() for line in ORACLE_NOTES.read_text().splitlines()]
    found = [line for line in lines if len(line) >= 40]
    assert found, f"{ORACLE_NOTES}: no line to look for"
    return found


def _nothing_of(run: Run, record_dir: Path, values: list[str]) -> None:
    """None of `values` is in any file of the record folder, the CLI's output or its log."""
    places = [path for path in record_dir.rglob("*") if path.is_file()]
    places.append(run.root / "stderr.log")
    for path in places:
        text = path.read_text(errors="replace")
        leaked = [value[:12] for value in values if value in text]
        assert not leaked, f"{run.name}: {path} holds what the link pointed at: {leaked}…"
    assert not [value for value in values if value in run.stdout], f"{run.name}: in stdout"


def _submission(record_dir: Path) -> dict[str, Any]:
    """The `Submitted` event's submission, from the run's event log."""
    found = [event for event in events_of(record_dir) if event["type"] == "Submitted"]
    assert len(found) == 1, f"expected one Submitted event, got {len(found)}"
    submission: dict[str, Any] = found[0]["submission"]
    return submission


def _ended(pool: RunPool, name: str, verdict: str) -> tuple[Run, Path, dict[str, Any]]:
    """The finished run `name` (never `passed`, `verdict` here), its record folder and the
    submission it published."""
    run, outcome, _ = finished(pool, name, graded=verdict == "failed")
    assert outcome["verdict"] != "passed", f"{name}: the cheat passed\n{run.progress}"
    assert outcome["verdict"] == verdict, f"{name}: {outcome}\n{run.progress}"
    record_dir = Path(outcome["record"]).parent
    return run, record_dir, _submission(record_dir)


@pytest.mark.timeout(300)
def test_an_rca_linked_to_the_bus_credential_carries_nothing_of_it(pool: RunPool) -> None:
    """`.oncall/rca.md` -> the engine home's `nats/operator.json`: the runner reads the RCA
    on the host, so following the link would publish the operator's password in
    `Submitted` (it did). The submission stands with no RCA; the password is nowhere."""
    run, record_dir, submission = _ended(pool, "rca-to-credential", "rejected")
    assert submission["submitted"], "the sentinel itself was the agent's own, and valid"
    assert submission["rca"] is None, f"an RCA was read through the link: {submission['rca']!r}"
    assert not (record_dir / "rca.txt").exists()
    _nothing_of(run, record_dir, _home_secrets(run))


@pytest.mark.timeout(300)
def test_an_rca_linked_to_the_authored_root_cause_carries_nothing_of_it(pool: RunPool) -> None:
    """`.oncall/rca.md` -> the scenario's `verify/oracle.md`: followed, the judge would
    grade the answer key as the agent's own diagnosis. No RCA, and no line of it kept."""
    run, record_dir, submission = _ended(pool, "rca-to-notes", "rejected")
    assert submission["rca"] is None, f"an RCA was read through the link: {submission['rca']!r}"
    _nothing_of(run, record_dir, _oracle_lines())


@pytest.mark.timeout(300)
def test_an_rca_that_is_a_fifo_neither_hangs_nor_carries_anything(pool: RunPool) -> None:
    """`.oncall/rca.md` a FIFO nobody writes: a plain open on the host would block the
    runner for good (the run would end at its deadline, if at all). The run ends at the
    gate like the others, with no RCA."""
    run, _, submission = _ended(pool, "rca-fifo", "rejected")
    assert submission["submitted"], submission
    assert submission["rca"] is None, submission
    assert run.wall_s is not None, run.name
    assert run.wall_s < 240, f"{run.name}: {run.wall_s} s"


@pytest.mark.timeout(300)
def test_a_sentinel_linked_to_a_credential_is_no_submission(pool: RunPool) -> None:
    """`.oncall/submitted` -> `operator.json` (a JSON object, so it would parse as a
    sentinel): a linked sentinel is not the agent's submission; nothing of it is kept."""
    run, record_dir, submission = _ended(pool, "sentinel-to-credential", "failed")
    assert submission["submitted"] is False, "a linked sentinel counted as a submission"
    _nothing_of(run, record_dir, _home_secrets(run))


@pytest.mark.timeout(300)
def test_the_runner_never_writes_a_sentinel_through_the_agents_link(pool: RunPool) -> None:
    """An exit-is-submit preset (aider's) exits 0 with `.oncall/submitted` a dangling link
    into the engine home: the runner writes that preset's sentinel itself, and writing
    through the link would create (or overwrite) a harness file as the harness's user. The
    link is replaced by the runner's own sentinel, so the failing commit reaches CI."""
    run, _, submission = _ended(pool, "sentinel-written-through", "rejected")
    assert not _planted(run).exists(), f"the runner wrote through the link: {_planted(run)}"
    assert submission["submitted"], "the preset's clean exit is its submission"


@pytest.mark.timeout(300)
def test_session_files_linked_to_secrets_are_not_collected(pool: RunPool) -> None:
    """The preset's session files in HOME (`session/chat.md`, `llm.log`, `input.history`)
    -> the credential, the authored root cause and `/dev/zero`: the runner copies session
    files into the record, and must take none of these (nor hang or fill the disk)."""
    run, record_dir, _ = _ended(pool, "session-to-secrets", "failed")
    native = record_dir / "agent" / "native"
    kept = sorted(path.name for path in native.rglob("*") if path.is_file())
    assert not kept, f"linked session files were collected: {kept}"
    _nothing_of(run, record_dir, [*_home_secrets(run), *_oracle_lines()])
