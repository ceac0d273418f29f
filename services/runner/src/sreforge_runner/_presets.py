"""How each CLI preset reaches its model through the proxy, and its quiet env: here.

`PROXY_PRESETS` says, per preset, the proxy flavor (the provider API the CLI
speaks), the provider's default base URL, the env var(s) the CLI reads its base
URL from, the env var(s) it reads its key from, and config files some CLIs need
under HOME. The proxy is on by default for these presets; a profile changes it
with metadata:

- `proxy = "off"` turns it off (the agent then gets its routed key, as before);
  it is off by default, and cannot be on, in a `remote` sandbox (the proxy listens
  on the runner's loopback, which ssh does not forward);
- `proxy = "openai" | "anthropic" | "gemini"` picks a flavor (also for `custom`);
- `upstream = <base URL>` repoints it (Ollama, vLLM, a company gateway);
- `proxy_url_env` / `proxy_key_env` rename the variables the agent gets.

Facts per CLI (reference/harness.md §7.4/§7.6 and the CLIs' docs and issues):

- claude-code (tested: 2.1.332, npm `@anthropic-ai/claude-code`, a native ELF at
  `<prefix>/node_modules/.bin/claude` -> `@anthropic-ai/claude-code/bin/claude.exe`,
  no Node needed): `ANTHROPIC_BASE_URL`, and `ANTHROPIC_API_KEY` (sent as
  `x-api-key`), honoured by `--print` without a prompt. It posts only the main loop
  to `/v1/messages?beta=true` (streamed, `anthropic-version: 2023-06-01`, one call
  per turn, tools `Bash`, `Read`, `Write`, `Edit`, ...); no token counter, no side
  call. Without `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` it also tries
  api.anthropic.com (bootstrap, MCP registry, fast-mode status, event export) and
  loses ~2 s to it, hence `PRESET_ENV`. Session files:
  `$CLAUDE_CONFIG_DIR/projects/<cwd>/<session id>.jsonl`.
- codex (tested: @openai/codex 0.171.0, `codex exec`): it speaks the Responses API.
  Its built-in `openai` provider ignores `OPENAI_BASE_URL` (from 0.118,
  openai/codex#16719), reads its key from `CODEX_API_KEY` (not `OPENAI_API_KEY`),
  tries a Responses WebSocket first (7 upgrades, ~6.6 s, before HTTPS) and cannot be
  redefined in `config.toml`. So `$CODEX_HOME/config.toml` defines a provider of its
  own, `model_provider = "proxy"`: `base_url` the proxy, `env_key = "OPENAI_API_KEY"`,
  `wire_api = "responses"`, `supports_websockets = false`; the token also goes in
  `CODEX_API_KEY` (`extra_key_envs`) and `openai_base_url` stays for the built-in
  provider. `check_for_update_on_startup = false`, `[analytics] enabled = false` and
  `[features] plugins = false, remote_plugin = false` (the plugin sync runs `git
  ls-remote https://github.com/openai/plugins.git`) keep it off the network.
- gemini-cli (tested: 0.61.0): the Gemini API (generativelanguage.googleapis.com)
  is neither OpenAI- nor Anthropic-shaped (model in the path, key in
  `x-goog-api-key` or `?key=`), hence its own pass-through flavor. Base URL from
  `GOOGLE_GEMINI_BASE_URL` (honoured since google-gemini/gemini-cli#25357, 2026-04;
  http is accepted for localhost only; an older CLI ignores it and fails auth with
  the dummy key rather than leak anything), key from `GEMINI_API_KEY` (sent as
  `x-goog-api-key`). With the base URL set, 0.61 defaults to auth type `gateway`,
  which its headless validation rejects (`Invalid auth method selected.`, exit 41),
  so `~/.gemini/settings.json` selects `gemini-api-key` (which still honours the
  base URL) and turns off usage statistics, telemetry and update checks. It calls
  only `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, one per turn
  (no side calls with the default settings). Its shell tool runs with
  `GIT_CONFIG_GLOBAL=/dev/null` and (when its env redaction is on) drops variables
  matching `AUTH`, hence the identity also in the workspace's `.git/config`
  (`write_git_identity`). Session file: `~/.gemini/tmp/<project>/chats/session-*.jsonl`.
- aider and mini-swe-agent use litellm: `OPENAI_API_BASE` (aider's docs) and
  `OPENAI_BASE_URL` (litellm reads either) with `OPENAI_API_KEY`; an
  OpenAI-compatible upstream takes the model as `openai/<model>` (litellm's
  provider prefix; the proxy sees `<model>`). Both profiles set
  `LITELLM_LOCAL_MODEL_COST_MAP=True`: litellm otherwise fetches its price list
  from raw.githubusercontent.com at import (3 tries with backoff, ~12 s lost where
  unreachable). Neither sends telemetry with the shipped flags (aider
  `--no-analytics`; mini-swe-agent and litellm send none).
- aider (tested 0.86.2, litellm 1.81.10): its own copy of that price list,
  `~/.aider/caches/model_prices_and_context_window.json`, is fetched from GitHub
  for each model it looks up while the file is empty or a day old, so the row
  writes a fresh, non-empty placeholder into HOME and aider takes model info
  from litellm's bundled map. The rest is in its profile (`--no-stream`: its
  streamed answers carry no usage; `--no-gitignore`, `--no-detect-urls`,
  `--no-check-update`, `--no-analytics`) and the `command` rein (its repo-map
  cache `.aider*` git-ignored in the clone).
- mini-swe-agent (tested 2.4.6, litellm 1.110.2): one `bash` tool (tool calls);
  it finishes when a command prints `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` first.
  Nothing under HOME is needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast, get_args
from urllib.parse import urlsplit

from sreforge_contracts import HarnessProfile

from sreforge_runner._errors import ProfileError
from sreforge_runner._proxy import ProxyFlavor

__all__ = ["PRESET_ENV", "PROXY_PRESETS", "ProxyPlan", "proxy_plan"]


@dataclass(frozen=True)
class ProxyPlan:
    """Where a session's proxy forwards, and how the agent is pointed at it."""

    flavor: ProxyFlavor
    upstream: str
    url_envs: tuple[str, ...]
    key_env: str
    config_files: tuple[tuple[str, str], ...] = ()
    """(path under HOME, text) written at session start; `{proxy_url}` is filled."""
    extra_key_envs: tuple[str, ...] = ()
    """More variables the CLI reads its key from; each gets the token too."""

    @property
    def key_envs(self) -> tuple[str, ...]:
        """Every variable the agent gets the proxy token in (`key_env` first)."""
        return (self.key_env, *self.extra_key_envs)


_OPENAI = ProxyPlan("openai", "https://api.openai.com/v1", ("OPENAI_BASE_URL",), "OPENAI_API_KEY")
_ANTHROPIC = ProxyPlan(
    "anthropic", "https://api.anthropic.com", ("ANTHROPIC_BASE_URL",), "ANTHROPIC_API_KEY"
)
_GEMINI = ProxyPlan(
    "gemini",
    "https://generativelanguage.googleapis.com",
    ("GOOGLE_GEMINI_BASE_URL",),
    "GEMINI_API_KEY",
)
# gemini-cli 0.61 picks auth type "gateway" when GOOGLE_GEMINI_BASE_URL is set, which
# its own validation rejects (exit 41); the API-key type still honours the base URL.
_GEMINI_SETTINGS = json.dumps(
    {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    },
    indent=2,
)
_FLAVORS: Mapping[ProxyFlavor, ProxyPlan] = {
    "openai": _OPENAI,
    "anthropic": _ANTHROPIC,
    "gemini": _GEMINI,
}
_LITELLM_URL_ENVS = ("OPENAI_API_BASE", "OPENAI_BASE_URL")
_CODEX_CONFIG = """\
openai_base_url = "{proxy_url}"
model_provider = "proxy"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false

[model_providers.proxy]
name = "OpenAI"
base_url = "{proxy_url}"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = false
"""
# Non-empty and fresh, so aider does not fetch its copy of litellm's price list.
_AIDER_INFO = '{"_note": "model info comes from litellm\'s bundled map"}\n'

PROXY_PRESETS: Mapping[str, ProxyPlan] = {
    "claude-code": _ANTHROPIC,
    "codex": ProxyPlan(
        "openai",
        "https://api.openai.com/v1",
        ("OPENAI_BASE_URL",),
        "OPENAI_API_KEY",
        config_files=((".codex/config.toml", _CODEX_CONFIG),),
        extra_key_envs=("CODEX_API_KEY",),
    ),
    "gemini-cli": ProxyPlan(
        "gemini",
        "https://generativelanguage.googleapis.com",
        ("GOOGLE_GEMINI_BASE_URL",),
        "GEMINI_API_KEY",
        config_files=((".gemini/settings.json", _GEMINI_SETTINGS),),
    ),
    "aider": ProxyPlan(
        "openai",
        "https://api.openai.com/v1",
        _LITELLM_URL_ENVS,
        "OPENAI_API_KEY",
        config_files=((".aider/caches/model_prices_and_context_window.json", _AIDER_INFO),),
    ),
    "mini-swe-agent": ProxyPlan(
        "openai", "https://api.openai.com/v1", _LITELLM_URL_ENVS, "OPENAI_API_KEY"
    ),
}
"""Per CLI preset: the proxy flavor, default upstream, env names and config files."""

PRESET_ENV: Mapping[str, Mapping[str, str]] = {
    "claude-code": {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    },
}
"""Per CLI preset: env it gets, proxy or not (no update checks, telemetry or other
traffic than the model's); the profile's `[command.env]` overrides a value."""


def proxy_plan(profile: HarnessProfile) -> ProxyPlan | None:
    """The profile's proxy plan: its preset's row with metadata overrides; None when off."""
    metadata = profile.metadata
    preset = PROXY_PRESETS.get(profile.command.preset) if profile.command else None
    remote = profile.sandbox == "remote"
    choice = metadata.get("proxy", "on" if preset and not remote else "off")
    if choice == "off":
        return None
    if remote:  # the proxy listens on the runner's loopback; ssh forwards nothing
        raise ProfileError(
            f"agent {profile.name}: metadata.proxy = {choice!r}: a remote sandbox cannot "
            "reach the runner's model proxy; leave it off (the key is routed to the remote)"
        )
    if choice == "on":
        if preset is None:
            raise ProfileError(
                f"agent {profile.name}: metadata.proxy = 'on' needs a preset with a proxy "
                f"({', '.join(PROXY_PRESETS)}); name a flavor ({', '.join(_FLAVORS)}) instead"
            )
        choice = preset.flavor
    if choice not in get_args(ProxyFlavor):
        raise ProfileError(
            f"agent {profile.name}: metadata.proxy: {choice!r} is not one of "
            f"on, off, {', '.join(_FLAVORS)}"
        )
    flavor = cast(ProxyFlavor, choice)
    base = preset if preset is not None and preset.flavor == flavor else _FLAVORS[flavor]
    upstream = metadata.get("upstream") or base.upstream
    target = urlsplit(upstream)
    if target.scheme not in ("http", "https") or not target.netloc:
        raise ProfileError(f"agent {profile.name}: metadata.upstream: {upstream!r} is not a URL")
    url_env = metadata.get("proxy_url_env")
    return ProxyPlan(
        flavor=flavor,
        upstream=upstream,
        url_envs=(url_env,) if url_env else base.url_envs,
        key_env=metadata.get("proxy_key_env") or base.key_env,
        config_files=base.config_files,
        extra_key_envs=base.extra_key_envs,
    )
