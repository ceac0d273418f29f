"""How each CLI preset reaches its model through the proxy: one table, here.

`PROXY_PRESETS` says, per preset, the proxy flavor (the provider API the CLI
speaks), the provider's default base URL, the env var(s) the CLI reads its base
URL from, the env var it reads its key from, and config files some CLIs need
under HOME. The proxy is on by default for these presets; a profile changes it
with metadata:

- `proxy = "off"` turns it off (the agent then gets its routed key, as before);
  it is off by default, and cannot be on, in a `remote` sandbox (the proxy listens
  on the runner's loopback, which ssh does not forward);
- `proxy = "openai" | "anthropic" | "gemini"` picks a flavor (also for `custom`);
- `upstream = <base URL>` repoints it (Ollama, vLLM, a company gateway);
- `proxy_url_env` / `proxy_key_env` rename the variables the agent gets.

Facts per CLI (reference/harness.md §7.4/§7.6 and the CLIs' docs and issues):

- claude-code: `ANTHROPIC_BASE_URL`, and `ANTHROPIC_API_KEY` (sent as `x-api-key`),
  honoured by `--print` without a prompt.
- codex: `OPENAI_BASE_URL` is deprecated and ignored from 0.118 on (openai/codex
  #16719); the top-level `openai_base_url` in `$CODEX_HOME/config.toml` is read, so
  both are set. Key from `OPENAI_API_KEY`. Codex speaks the Responses API.
- gemini-cli: the Gemini API (generativelanguage.googleapis.com) is neither
  OpenAI- nor Anthropic-shaped (model in the path, key in `x-goog-api-key` or
  `?key=`), hence its own pass-through flavor. Base URL from
  `GOOGLE_GEMINI_BASE_URL` (honoured since google-gemini/gemini-cli#25357, 2026-04;
  http is accepted for localhost only; an older CLI ignores it and fails auth with
  the dummy key rather than leak anything), key from `GEMINI_API_KEY`.
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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast, get_args
from urllib.parse import urlsplit

from sreforge_contracts import HarnessProfile

from sreforge_runner._errors import ProfileError
from sreforge_runner._proxy import ProxyFlavor

__all__ = ["PROXY_PRESETS", "ProxyPlan", "proxy_plan"]


@dataclass(frozen=True)
class ProxyPlan:
    """Where a session's proxy forwards, and how the agent is pointed at it."""

    flavor: ProxyFlavor
    upstream: str
    url_envs: tuple[str, ...]
    key_env: str
    config_files: tuple[tuple[str, str], ...] = ()
    """(path under HOME, text) written at session start; `{proxy_url}` is filled."""


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
_FLAVORS: Mapping[ProxyFlavor, ProxyPlan] = {
    "openai": _OPENAI,
    "anthropic": _ANTHROPIC,
    "gemini": _GEMINI,
}
_LITELLM_URL_ENVS = ("OPENAI_API_BASE", "OPENAI_BASE_URL")
# Non-empty and fresh, so aider does not fetch its copy of litellm's price list.
_AIDER_INFO = '{"_note": "left empty by the harness: model info from litellm\'s own map"}\n'

PROXY_PRESETS: Mapping[str, ProxyPlan] = {
    "claude-code": _ANTHROPIC,
    "codex": ProxyPlan(
        "openai",
        "https://api.openai.com/v1",
        ("OPENAI_BASE_URL",),
        "OPENAI_API_KEY",
        config_files=((".codex/config.toml", 'openai_base_url = "{proxy_url}"\n'),),
    ),
    "gemini-cli": _GEMINI,
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
    )
