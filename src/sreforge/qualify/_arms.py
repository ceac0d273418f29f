"""The arms of a qualification: which agents run on the scenario, how often, what must happen.

noop and reference `trials` times each, every negative fixture of `verify/negative/` as
`scripted:<name>` `trials` times, every integrity cheat of the use case's `cheats.toml`
that applies to the scenario (its stack, its id, its profile) once, and the baseline
agents `trials` times, all at the qualification's time scale; below time scale 1, noop
and reference once more each at time scale 1 (`FULL_SCALE`: the scenario's real windows,
not only their scaled copy).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sreforge_contracts import Scenario

from sreforge.qualify._errors import QualifyError

__all__ = ["FULL_SCALE", "Arm", "CheatCatalog", "arms_for", "load_cheats"]

FULL_SCALE = 1.0

Expect = Literal["fail", "pass", "not-pass", "headroom"]
_FIXTURE_SUFFIXES = (".patch", ".sh")
_DEFAULT_PROFILES = ("incident",)


@dataclass(frozen=True)
class Arm:
    """One agent of the qualification: its `kind`, what it must do, and how many trials."""

    kind: Literal["noop", "reference", "negative", "cheat", "baseline"]
    agent: str
    expect: Expect
    trials: int
    full_scale: bool = False
    """Runs at time scale 1 (its own campaign), not at the qualification's scale."""

    @property
    def label(self) -> str:
        """The arm's kind as the evidence table shows it (`noop @ scale 1`)."""
        return f"{self.kind} @ scale 1" if self.full_scale else self.kind


@dataclass(frozen=True)
class CheatCatalog:
    """A use case's integrity cheats: their names (each `scripted:<name>`), the stacks each
    applies to, and the folder holding their `<name>.patch|.sh`; `only` names, per cheat,
    the scenarios it is limited to (a cheat bundled with one scenario's fix)."""

    folder: Path
    cheats: tuple[tuple[str, tuple[str, ...]], ...]
    only: dict[str, tuple[str, ...]] = field(default_factory=dict)
    profiles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per cheat, the scenario profiles it plays against (`incident` unless listed)."""

    def applying_to(
        self, stack: str, scenario: str | None = None, profile: str = "incident"
    ) -> list[str]:
        """The cheats that apply to `scenario` on `stack` with `profile` (no `stacks`: every
        stack; no `scenarios`: every scenario; no `profiles`: incident scenarios)."""
        return [
            name
            for name, stacks in self.cheats
            if (not stacks or stack in stacks)
            and (scenario is None or not self.only.get(name) or scenario in self.only[name])
            and profile in self.profiles.get(name, _DEFAULT_PROFILES)
        ]


def load_cheats(use_case: Path) -> CheatCatalog | None:
    """`<use case>/cheats.toml`, or None when the use case has none."""
    path = use_case / "cheats.toml"
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text())
        folder = (path.parent / data["folder"]).resolve()
        entries = data.get("cheat", ())
        cheats = tuple(
            (str(entry["name"]), tuple(str(s) for s in entry.get("stacks", ())))
            for entry in entries
        )
        only = {
            str(entry["name"]): tuple(str(s) for s in entry["scenarios"])
            for entry in entries
            if entry.get("scenarios")
        }
        profiles = {
            str(entry["name"]): tuple(str(p) for p in entry["profiles"])
            for entry in entries
            if "profiles" in entry
        }
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as error:
        raise QualifyError(f"{path}: not a cheat catalog: {error!r}") from None
    for name, _ in cheats:
        if not any((folder / f"{name}{suffix}").is_file() for suffix in _FIXTURE_SUFFIXES):
            raise QualifyError(f"{path}: cheat {name}: no {name}[.patch|.sh] in {folder}")
    return CheatCatalog(folder, cheats, only, profiles)


def negative_fixtures(scenario: Scenario) -> list[str]:
    """The scenario's negative fixtures (`verify/negative/<name>.patch|.sh`), by name."""
    folder = scenario.negative_dir
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.iterdir() if p.suffix in _FIXTURE_SUFFIXES)


def arms_for(
    scenario: Scenario,
    trials: int,
    cheats: CheatCatalog | None,
    baselines: tuple[str, ...],
    time_scale: float = 0.1,
) -> list[Arm]:
    """Every arm of the qualification of `scenario` at `time_scale`; `QualifyError` names a
    clash (a baseline listed twice or also one of the harness's own agents)."""
    arms = [Arm("noop", "noop", "fail", trials), Arm("reference", "reference", "pass", trials)]
    arms += [Arm("negative", f"scripted:{n}", "fail", trials) for n in negative_fixtures(scenario)]
    if cheats is not None:
        manifest = scenario.manifest
        applying = cheats.applying_to(manifest.stack, scenario.id, manifest.profile)
        arms += [Arm("cheat", f"scripted:{n}", "not-pass", 1) for n in applying]
    seen: dict[str, Arm] = {}
    for arm in arms:
        if arm.agent in seen:
            raise QualifyError(f"scenario {scenario.id}: cheat {arm.agent} is also a negative")
        seen[arm.agent] = arm
    for agent in baselines:
        if agent in seen:
            raise QualifyError(f"--baseline: {agent!r} is listed twice or is a harness arm")
        seen[agent] = Arm("baseline", agent, "headroom", trials)
    full: list[Arm] = []
    if time_scale < FULL_SCALE:
        full = [
            Arm("noop", "noop", "fail", 1, full_scale=True),
            Arm("reference", "reference", "pass", 1, full_scale=True),
        ]
    return list(seen.values()) + full
