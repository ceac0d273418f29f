"""`sreforge agents list|show|check|install`: the agent profile catalog and its readiness.

`cli.py` wires this in with `add_agents_commands(verbs)`. The catalog is
`agents/*.toml` (or `SREFORGE_AGENTS`); `check` probes a profile on this host and
stores the evidence under the engine home (`$SREFORGE_HOME/agents/<name>.json`),
where the runner reads it: a blocked profile is refused before any sandbox exists.
`install` puts a preset's real CLI into the engine home (`_installer`), writes its
ready profile beside the evidence (`$SREFORGE_HOME/agents/<preset>.toml`, which
overlays the catalog's unless `SREFORGE_AGENTS` is set) and checks it.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Callable
from typing import TypeVar

from sreforge_contracts import HARNESS_WORDS, HarnessProfile, OperationalReadiness
from sreforge_runner import (
    ProbeRecord,
    ProfileError,
    RunnerSettings,
    check_profile,
    effective_readiness,
    find_profile,
    load_catalog,
    load_profile,
    proxy_plan,
)

from sreforge._errors import SreforgeError
from sreforge._installer import Installer, JailedInstaller, install_tool, write_profile
from sreforge._installs import RELEASES, plan_install
from sreforge._settings import EngineSettings

__all__ = [
    "add_agents_commands",
    "handle_agents_check",
    "handle_agents_install",
    "handle_agents_list",
    "handle_agents_show",
]

T = TypeVar("T")


def add_agents_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `agents list`, `agents show <profile>` and `agents check <profile>`."""
    agents = verbs.add_parser("agents", help="list, show, check or install agent profiles")
    agent_verbs = agents.add_subparsers(dest="agents_verb", required=True, metavar="VERB")
    listing = agent_verbs.add_parser("list", help="every profile with its rein, sandbox, readiness")
    listing.set_defaults(handler=handle_agents_list)
    show = agent_verbs.add_parser("show", help="one profile in full, with its command line")
    show.add_argument("profile")
    show.add_argument("--json", action="store_true", help="the profile as JSON")
    show.set_defaults(handler=handle_agents_show)
    check = agent_verbs.add_parser("check", help="probe a profile here and store the evidence")
    check.add_argument("profile")
    check.set_defaults(handler=handle_agents_check)
    install = agent_verbs.add_parser(
        "install", help="install a preset's real CLI, write its ready profile, check it"
    )
    install.add_argument("preset", metavar="PRESET", help=", ".join(RELEASES))
    install.add_argument("--version", help="a release other than the pinned one")
    install.set_defaults(handler=handle_agents_install)


def handle_agents_list(args: argparse.Namespace) -> int:
    """Print one line per catalog profile."""
    settings = RunnerSettings()
    catalog = _guard(lambda: load_catalog(settings.agents_dir, settings.installed_dir))
    print(f"{'PROFILE':<16} {'REIN':<10} {'SANDBOX':<15} {'READINESS':<11} MODEL")
    for profile in catalog.values():
        try:
            readiness = effective_readiness(profile, settings)
        except ProfileError as error:
            raise SreforgeError(str(error)) from error
        state = readiness.state if profile.status == "enabled" else "disabled"
        model = profile.model or "-"
        print(f"{profile.name:<16} {profile.rein:<10} {profile.sandbox:<15} {state:<11} {model}")
    installed = f"installed: {settings.installed_dir}; " if settings.installed_dir else ""
    print(f"(catalog: {settings.agents_dir}; {installed}probes: {settings.readiness_dir})")
    return 0


def handle_agents_show(args: argparse.Namespace) -> int:
    """Print one profile: fields, command line, routes (names only), readiness."""
    settings = RunnerSettings()
    profile = _guard(
        lambda: find_profile(settings.agents_dir, args.profile, settings.installed_dir)
    )
    readiness = _guard(lambda: effective_readiness(profile, settings))
    if args.json:
        body = {
            "profile": profile.model_dump(mode="json"),
            "readiness": readiness.model_dump(mode="json"),
        }
        print(json.dumps(body, indent=2))
        return 0
    print(f"{profile.name}: {profile.description}")
    print(f"  rein      {profile.rein}    sandbox {profile.sandbox}    status {profile.status}")
    print(f"  model     {profile.model or '-'}")
    limits = profile.limits
    print(
        f"  limits    session start {limits.session_start_s:g} s, "
        f"idle {limits.idle_s:g} s, total {limits.total_s:g} s"
    )
    if profile.credential_routes:
        print(f"  routes    {', '.join(profile.credential_routes)} (names; values never shown)")
    if profile.command is not None:
        executable = profile.command.executable or profile.command.preset
        print(f"  command   {shlex.join([executable, *profile.command.args])}")
        for key, value in profile.command.env.items():
            print(f"  env       {key}={value}")
        for host, inside in profile.command.mount_at.items():
            print(f"  mount     {host} -> {inside} (inside the sandbox)")
    plan = _guard(lambda: proxy_plan(profile))
    if plan is not None:
        given = ", ".join(plan.url_envs)
        print(f"  proxy     {plan.flavor} -> {plan.upstream} (the agent gets {given})")
    _print_readiness(readiness)
    return 0


def handle_agents_check(args: argparse.Namespace) -> int:
    """Probe the profile on this host, store the evidence, print it; exit 1 unless ready."""
    settings = RunnerSettings()
    profile: HarnessProfile = _guard(
        lambda: find_profile(settings.agents_dir, args.profile, settings.installed_dir)
    )
    record = _check(profile, settings)
    return 0 if record.readiness.state == "ready" else 1


def handle_agents_install(args: argparse.Namespace, installer: Installer | None = None) -> int:
    """Install the preset's CLI (unless there), write its ready profile, check it; exit 1
    unless the check passes."""
    settings = RunnerSettings()
    tools = EngineSettings().tools
    named = [word for word in HARNESS_WORDS if word in str(tools.absolute()).lower()]
    if named:
        raise SreforgeError(
            f"SREFORGE_TOOLS: {tools} names the harness ({named[0]!r}); a confined agent can "
            "read its tools' host path (/proc/self/mountinfo) and the contamination guard "
            "would abort every run: choose a folder with a neutral name"
        )
    plan = plan_install(args.preset, tools, settings.readiness_dir, args.version)
    release = plan.release
    print(
        f"installing {release.preset}: {release.package} {release.version} from "
        f"{release.registry} into {plan.folder} (the agent sees {plan.inside}) ...",
        flush=True,
    )
    seconds = install_tool(plan, installer or JailedInstaller(bwrap=settings.bwrap_path))
    if seconds is None:
        print(f"  installed already ({plan.marker}): nothing to install")
    else:
        print(f"  installed in {seconds:.1f} s")
    path = write_profile(plan, settings.agents_dir)
    profile = _guard(lambda: load_profile(path))
    print(f"  profile   {path}")
    if settings.installed_dir is None:
        print("  note      SREFORGE_AGENTS names the catalog: copy the profile into it to use it")
    record = _check(profile, settings)
    return 0 if record.readiness.state == "ready" else 1


def _check(profile: HarnessProfile, settings: RunnerSettings) -> ProbeRecord:
    print(f"checking {profile.name} ({profile.rein}, {profile.sandbox}) ...", flush=True)
    record = check_profile(profile, settings)
    for check in record.checks:
        print(f"  {check.what}: exit {check.exit_code}: {check.first_line}")
    _print_readiness(record.readiness)
    print(f"  stored    {settings.readiness_dir / (profile.name + '.json')}")
    return record


def _print_readiness(readiness: OperationalReadiness) -> None:
    label = readiness.state.upper()
    print(f"  readiness {label}" + (f" ({readiness.reason})" if readiness.reason else ""))
    if readiness.owner:
        print(f"  owner     {readiness.owner}")
    if readiness.evidence:
        print(f"  evidence  {readiness.evidence}")
    if readiness.state == "unverified":
        print("  note      runs only as a labelled proof run until a check passes")


def _guard(action: Callable[[], T]) -> T:
    try:
        return action()
    except ProfileError as error:
        raise SreforgeError(str(error)) from error
