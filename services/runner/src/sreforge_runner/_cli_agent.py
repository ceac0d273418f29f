"""The `command` rein: any CLI agent, from a catalog preset and its argv template.

`start_session` writes the prompt (the page plus how to submit) into the session
dir and fills the argv template: `{prompt}`, `{prompt_file}`, `{model}`,
`{workspace}`, `{home}`, `{session_dir}` and `{session_id}` are substituted, as the
agent sees those paths (inside the sandbox). The env gets the preset's quiet
settings (`PRESET_ENV`: no update checks or telemetry) and the profile's non-secret
settings over them. For the presets the model proxy is on by default (`_presets`):
the agent gets the proxy's base URL and a per-session dummy token, the proxy holds
the real key (the first credential route; a missing one fails `session_start`,
naming the variable). Otherwise, and for the other routes, the env gets the
routes' values (names from the profile, values from the runner's env, never
logged or recorded). `dispatch` runs the agent with stdin closed under all three
budgets. Presets without a tool protocol (aider) count a clean exit as the
submission. Files a preset's CLI keeps in the repository for itself (aider's
repo-map cache) are git-ignored in this clone only (`TOOL_FILES`), so they are
neither in the submitted diff nor a reason for the CLI to edit `.gitignore`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from sreforge_contracts import HarnessProfile

from sreforge_runner._agent_sandbox import AgentSandbox
from sreforge_runner._errors import ProfileError, SessionError
from sreforge_runner._kept import NATIVE_DIR, seal_logs
from sreforge_runner._presets import PRESET_ENV, ProxyPlan, proxy_plan
from sreforge_runner._pricing import profile_price
from sreforge_runner._process import Budgets
from sreforge_runner._proxy import ModelProxy
from sreforge_runner._reins import Dispatch
from sreforge_runner._sessions import collect_native, mini_swe_submitted
from sreforge_runner._submit import exclude_paths, has_submitted, write_sentinel
from sreforge_runner._transcript import (
    MODEL_CALLS_LOG,
    route_secrets,
    write_transcript,
)

__all__ = ["SUBMIT_ON_EXIT", "TOOL_FILES", "CliAgentRein", "build_prompt"]

SUBMIT_ON_EXIT = frozenset({"aider"})
"""Presets whose clean exit is the submission (no way to call `submit`)."""
TOOL_FILES: dict[str, tuple[str, ...]] = {"aider": ("/.aider*",)}
"""Per preset: `.git/info/exclude` patterns for what its CLI writes into the repository
for itself (aider: `.aider.tags.cache.v4/`, its repo-map cache, whatever its flags)."""
_PROMPT_FILE = "page.md"
_FOOTER = """

---
You are on call. The service's code is the git repository in `{workspace}` (your
current directory). Change the code to mitigate the incident. When your change is
ready, run `submit` (add `--rca FILE` to attach a short root-cause write-up).
Only what you submit is built, tested and deployed.
"""


def build_prompt(page: str, workspace: str) -> str:
    """The agent's prompt: the page, then where the code is and how to submit."""
    return page.rstrip() + _FOOTER.format(workspace=workspace)


@dataclass
class CliAgentRein:
    """A CLI agent driven headless inside the sandbox."""

    profile: HarnessProfile
    page: str
    run_id: str = "run"
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _argv: list[str] = field(default_factory=list, init=False, repr=False)
    _env: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _exit_code: int | None = field(default=None, init=False, repr=False)
    _proxy: ModelProxy | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.profile.command is None:
            raise ProfileError(f"agent {self.profile.name}: rein command needs a [command]")

    @property
    def name(self) -> str:
        """The profile's name."""
        return self.profile.name

    @property
    def session_env(self) -> Mapping[str, str]:
        """The profile's env templates filled, the routed credentials, the proxy's URL."""
        return dict(self._env)

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """Write the prompt file and fill the argv and env templates."""
        command = self.profile.command
        assert command is not None
        workspace = str(sandbox.inside(sandbox.workspace))
        prompt = build_prompt(self.page, workspace)
        prompt_file = sandbox.session_dir / _PROMPT_FILE
        prompt_file.write_text(prompt)
        exclude_paths(sandbox.workspace, TOOL_FILES.get(command.preset, ()))
        values = {
            "prompt": prompt,
            "prompt_file": str(sandbox.inside(prompt_file)),
            "model": self.profile.model or "",
            "workspace": workspace,
            "home": str(sandbox.inside(sandbox.home)),
            "session_dir": str(sandbox.inside(sandbox.session_dir)),
            "session_id": self.session_id,
        }
        executable = command.executable or command.preset
        self._argv = [executable, *(_fill(arg, values) for arg in command.args)]
        env = {**PRESET_ENV.get(command.preset, {}), **command.env}
        self._env = {key: _fill(value, values) for key, value in env.items()}
        routed = route_secrets(self.profile.credential_routes)
        plan = proxy_plan(self.profile)
        profile_price(self.profile.metadata)  # a bad price override fails here, not at the end
        if plan is None:
            self._env.update(routed)
            return
        model_route = self.profile.credential_routes[:1]
        self._env.update({k: v for k, v in routed.items() if k not in model_route})
        self._env.update(self._start_proxy(sandbox, plan, model_route))

    def _start_proxy(
        self, sandbox: AgentSandbox, plan: ProxyPlan, model_route: tuple[str, ...]
    ) -> dict[str, str]:
        """Start the session's model proxy; the agent gets its URL and token, not the key."""
        key = route_secrets(model_route).get(model_route[0]) if model_route else None
        if model_route and key is None:
            raise SessionError(
                f"agent {self.name}: the model proxy needs the real key in ${model_route[0]}, "
                "which is not set in the runner's environment"
            )
        self._proxy = ModelProxy(
            flavor=plan.flavor,
            upstream=plan.upstream,
            key=key,
            log_path=sandbox.root / MODEL_CALLS_LOG,
            key_name=model_route[0] if model_route else "MODEL_KEY",
        )
        base_url = self._proxy.start()
        sandbox.allow_endpoint(base_url)
        for relative, text in plan.config_files:
            config = sandbox.home / relative
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(text.replace("{proxy_url}", base_url))
        return {
            **dict.fromkeys(plan.url_envs, base_url),
            **dict.fromkeys(plan.key_envs, self._proxy.token),
        }

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Run the agent, stdin closed, under session-start, idle and total budgets."""
        if not self._argv:
            raise SessionError(f"agent {self.name}: dispatch before start_session")
        started = time.monotonic()
        outcome = await sandbox.run(self._argv, budgets, extra_env=self._env)
        self._exit_code = outcome.exit_code
        return Dispatch.of(outcome, started)

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """Exit-is-submit presets get their sentinel; the native session files are copied
        and the logs sealed (capped, every secret and the proxy token redacted); the
        transcript (`agent-transcript.json`) is written, listing what was kept."""
        if self._exit_is_submit(sandbox) and not has_submitted(sandbox.workspace):
            write_sentinel(sandbox.workspace, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        secrets = route_secrets(self.profile.credential_routes)
        if self._proxy is not None:
            secrets.update(self._proxy.secrets())
        command = self.profile.command
        preset = command.preset if command else ""
        native = collect_native(preset, sandbox.home, sandbox.root / NATIVE_DIR, secrets)
        kept = [*seal_logs(sandbox.root, secrets), *native]
        write_transcript(
            sandbox.root,
            run_id=self.run_id,
            harness=self.profile.name,
            model=self.profile.model,
            session=self.session_id,
            confinement=sandbox.confinement,
            submitted=has_submitted(sandbox.workspace),
            secrets=secrets,
            native_files=tuple(found.name.removeprefix(f"{NATIVE_DIR}/") for found in native),
            provider=self._proxy.flavor if self._proxy else None,
            profile_metadata=self.profile.metadata,
            files=[found.as_json() for found in kept],
        )

    def _exit_is_submit(self, sandbox: AgentSandbox) -> bool:
        command = self.profile.command
        if command is None or self._exit_code != 0:
            return False
        if command.preset == "mini-swe-agent":
            return mini_swe_submitted(sandbox.home)
        return command.preset in SUBMIT_ON_EXIT

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Stop the proxy, forget the credential values, remove the prompt file."""
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None
        self._env.clear()
        (sandbox.session_dir / _PROMPT_FILE).unlink(missing_ok=True)


def _fill(template: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template
