"""The profile catalog (`agents/*.toml`), readiness probes and resolution before any sandbox."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from sreforge_contracts import CommandSpec, ExecutionRequest, HarnessProfile, RemoteSpec
from sreforge_runner import (
    SUBMIT_ON_EXIT,
    ProfileError,
    ProfileRefused,
    RunnerSettings,
    check_profile,
    load_catalog,
    load_profile,
    refusal,
    resolve,
    stored_probe,
)
from sreforge_runner._presets import PROXY_PRESETS, proxy_plan

CATALOG = Path(__file__).resolve().parents[3] / "agents"
PRESETS = ("claude-code", "codex", "gemini-cli", "aider", "mini-swe-agent")


def test_the_repo_catalog_has_the_builtins_ready_and_the_presets_unverified() -> None:
    """Built-ins run as now (ready, host-open); CLI presets are unverified and sandboxed."""
    catalog = load_catalog(CATALOG)
    assert set(catalog) == {"noop", "reference", "scripted", "openai", *PRESETS}
    assert catalog["openai"].readiness.state == "unverified"
    for name in ("noop", "reference", "scripted"):
        assert catalog[name].rein == name
        assert catalog[name].readiness.state == "ready"
        assert catalog[name].sandbox == "host-open"
    for name in PRESETS:
        profile = catalog[name]
        assert profile.rein == "command"
        assert profile.readiness.state == "unverified"
        assert profile.sandbox == "host-sandboxed"
        assert profile.command is not None
        assert profile.command.preset == name
        joined = " ".join(profile.command.args)
        assert "{prompt}" in joined or "{prompt_file}" in joined


@pytest.mark.parametrize(
    ("name", "flags", "env"),
    [
        ("claude-code", ["--print", "stream-json", "bypassPermissions"], {"IS_SANDBOX": "1"}),
        ("codex", ["exec", "--json", "--dangerously-bypass-approvals-and-sandbox"], {}),
        ("gemini-cli", ["--yolo", "stream-json"], {"GEMINI_CLI_TRUST_WORKSPACE": "true"}),
        (
            "aider",
            [
                "--yes-always",
                "--no-gitignore",
                "--no-detect-urls",
                "--no-check-update",
                "--no-show-release-notes",
                "--no-analytics",
                "--disable-playwright",
            ],
            {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        ),
        (
            "mini-swe-agent",
            ["--yolo", "--exit-immediately"],
            {"MSWEA_CONFIGURED": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        ),
    ],
)
def test_presets_run_headless_with_their_inner_sandbox_off(
    name: str, flags: list[str], env: dict[str, str]
) -> None:
    """Each preset carries the headless / no-prompt / inner-sandbox-off flags of harness.md §7."""
    command = load_catalog(CATALOG)[name].command
    assert command is not None
    for flag in flags:
        assert any(flag in arg for arg in command.args), (name, flag)
    for key, value in env.items():
        assert command.env[key] == value


@pytest.mark.parametrize(
    ("name", "flavor", "upstream", "url_envs", "key_env"),
    [
        (
            "claude-code",
            "anthropic",
            "https://api.anthropic.com",
            ("ANTHROPIC_BASE_URL",),
            "ANTHROPIC_API_KEY",
        ),
        ("codex", "openai", "https://api.openai.com/v1", ("OPENAI_BASE_URL",), "OPENAI_API_KEY"),
        (
            "gemini-cli",
            "gemini",
            "https://generativelanguage.googleapis.com",
            ("GOOGLE_GEMINI_BASE_URL",),
            "GEMINI_API_KEY",
        ),
        (
            "aider",
            "openai",
            "https://api.openai.com/v1",
            ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
            "OPENAI_API_KEY",
        ),
        (
            "mini-swe-agent",
            "openai",
            "https://api.openai.com/v1",
            ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
            "OPENAI_API_KEY",
        ),
    ],
)
def test_every_preset_has_the_model_proxy_on_by_default(
    name: str, flavor: str, upstream: str, url_envs: tuple[str, ...], key_env: str
) -> None:
    """The preset table: each catalog preset is proxied with its provider's flavor,
    upstream and env names, and its first credential route is the key its CLI reads."""
    profile = load_catalog(CATALOG)[name]
    plan = proxy_plan(profile)
    assert plan is not None
    assert (plan.flavor, plan.upstream, plan.url_envs, plan.key_env) == (
        flavor,
        upstream,
        url_envs,
        key_env,
    )
    assert profile.credential_routes[0] == key_env
    assert "proxy" not in profile.metadata  # on by default, not by opt-in
    assert set(PROXY_PRESETS) == set(PRESETS)


def test_codex_reaches_the_proxy_by_its_own_provider_without_websockets() -> None:
    """codex >= 0.118 ignores OPENAI_BASE_URL and its built-in provider tries a Responses
    WebSocket first: CODEX_HOME's config (`{home}/.codex`) names a provider at the proxy
    (plain HTTP Responses, key from OPENAI_API_KEY), no update check, analytics or plugin
    sync; the token goes into CODEX_API_KEY too (what `codex exec` reads)."""
    profile = load_catalog(CATALOG)["codex"]
    plan = proxy_plan(profile)
    assert plan is not None
    [(path, text)] = plan.config_files
    config = tomllib.loads(text)
    provider = config["model_providers"][config["model_provider"]]
    assert (path, config["openai_base_url"], provider["base_url"]) == (
        ".codex/config.toml",
        "{proxy_url}",
        "{proxy_url}",
    )
    assert (provider["wire_api"], provider["supports_websockets"]) == ("responses", False)
    assert provider["env_key"] == plan.key_env
    assert config["check_for_update_on_startup"] is False
    assert config["analytics"] == {"enabled": False}
    assert config["features"] == {"plugins": False, "remote_plugin": False}
    assert plan.key_envs == ("OPENAI_API_KEY", "CODEX_API_KEY")
    assert profile.command is not None
    assert profile.command.env["CODEX_HOME"] == "{home}/.codex"


def _custom(preset: str = "custom", **metadata: str) -> HarnessProfile:
    command = CommandSpec(preset=preset, executable="agent")
    return HarnessProfile(name="x", rein="command", command=command, metadata=metadata)


def test_profile_metadata_turns_the_proxy_off_repoints_or_renames_it() -> None:
    """`proxy = "off"` disables it, `upstream` repoints it (Ollama, vLLM), a flavor other
    than the preset's takes that flavor's env names, `proxy_url_env`/`proxy_key_env`
    rename them, and a custom preset has no proxy unless it names a flavor."""
    assert proxy_plan(_custom("codex", proxy="off")) is None
    assert proxy_plan(_custom()) is None
    local = proxy_plan(_custom("aider", upstream="http://127.0.0.1:11434/v1"))
    assert local is not None
    assert (local.flavor, local.upstream) == ("openai", "http://127.0.0.1:11434/v1")
    switched = proxy_plan(_custom("claude-code", proxy="openai"))
    assert switched is not None
    assert (switched.url_envs, switched.key_env) == (("OPENAI_BASE_URL",), "OPENAI_API_KEY")
    renamed = proxy_plan(_custom(proxy="gemini", proxy_url_env="G_URL", proxy_key_env="G_KEY"))
    assert renamed is not None
    assert (renamed.flavor, renamed.url_envs, renamed.key_env) == ("gemini", ("G_URL",), "G_KEY")
    assert renamed.upstream == "https://generativelanguage.googleapis.com"


def test_a_remote_preset_runs_without_the_proxy() -> None:
    """The proxy listens on the runner's loopback, which a remote sandbox cannot reach: a
    preset there defaults to no proxy (its key is routed), and asking for one says why."""
    remote = RemoteSpec(
        host="agents.example.invalid", user="agent", host_key="ssh-ed25519 AAAA", identity_env="K"
    )
    codex = load_catalog(CATALOG)["codex"]
    moved = codex.model_copy(update={"sandbox": "remote", "remote": remote})
    assert proxy_plan(moved) is None
    forced = moved.model_copy(update={"metadata": {"proxy": "openai"}})
    with pytest.raises(ProfileError, match="remote sandbox cannot reach"):
        proxy_plan(forced)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"proxy": "bedrock"}, "'bedrock' is not one of"),
        ({"proxy": "on"}, "needs a preset"),
        ({"proxy": "openai", "upstream": "api.openai.com"}, "is not a URL"),
    ],
)
def test_a_bad_proxy_setting_is_a_profile_error(metadata: dict[str, str], message: str) -> None:
    """Unknown flavors, `on` without a preset and an upstream that is not a URL say so."""
    with pytest.raises(ProfileError, match=message):
        proxy_plan(_custom(**metadata))


def test_aider_counts_a_clean_exit_as_submit() -> None:
    """Aider has no tool protocol for `submit`."""
    assert "aider" in SUBMIT_ON_EXIT


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name = "bad"\nrein = "magic"\n', r"bad\.toml: rein: Input should be"),
        ('name = "bad"\nrein = "noop"\nsandbx = "x"\n', r"bad\.toml: sandbx: Extra inputs"),
        ('name = "other"\nrein = "noop"\n', r"bad\.toml: name: 'other' must match"),
        ('name = "bad"\nrein = "command"\n', r"bad\.toml: profile: Value error, command"),
        ('name = "bad"\nrein = "noop"\n[readiness]\nstate = "blocked"\n', r"readiness: Value"),
        ("name = ", r"bad\.toml: not valid TOML"),
    ],
)
def test_a_bad_profile_file_names_the_file_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    """Loader errors say which file and which field are wrong."""
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=message):
        load_profile(path)


def _request(agent: str) -> ExecutionRequest:
    return ExecutionRequest(
        request_id="run-1", harness_profile_ref=agent, repository="/w", title="page"
    )


def _settings(tmp_path: Path, agents: Path = CATALOG) -> RunnerSettings:
    return RunnerSettings(agents_dir=agents, readiness_dir=tmp_path / "readiness")


def test_builtins_resolve_ready_and_presets_only_as_proof_runs(tmp_path: Path) -> None:
    """scripted:<name> selects `scripted`; an unverified preset resolves labelled as proof."""
    settings = _settings(tmp_path)
    scripted = resolve(_request("scripted:notes-only"), settings)
    assert (scripted.profile.name, scripted.proof_run) == ("scripted", False)
    codex = resolve(_request("codex"), settings)
    assert codex.proof_run
    assert codex.readiness.state == "unverified"


def test_unknown_and_disabled_profiles_are_refused(tmp_path: Path) -> None:
    """Refusals happen at resolution and say why."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "off.toml").write_text('name = "off"\nrein = "noop"\nstatus = "disabled"\n')
    settings = _settings(tmp_path, agents)
    with pytest.raises(ProfileRefused, match="unknown profile"):
        resolve(_request("nope"), settings)
    with pytest.raises(ProfileRefused, match="disabled"):
        resolve(_request("off"), settings)


def test_a_missing_binary_is_blocked_and_then_refused_with_owner_and_evidence(
    tmp_path: Path,
) -> None:
    """`check` stores blocked evidence; resolution then refuses, naming owner and evidence,
    and the refusal's evidence shows nothing was created or torn down."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "ghost.toml").write_text(
        'name = "ghost"\nrein = "command"\nsandbox = "host-open"\n'
        '[command]\npreset = "custom"\nexecutable = "no-such-agent-binary"\n'
    )
    settings = _settings(tmp_path, agents)
    profile = load_profile(agents / "ghost.toml")
    record = check_profile(profile, settings)
    assert record.readiness.state == "blocked"
    assert record.readiness.owner == "operator"
    assert "no-such-agent-binary" in (record.readiness.evidence or "")
    assert stored_probe("ghost", settings) == record
    with pytest.raises(ProfileRefused) as refused:
        resolve(_request("ghost"), settings)
    assert "owner: operator" in str(refused.value)
    assert "no-such-agent-binary" in str(refused.value)
    result = refusal(_request("ghost"), refused.value)
    assert not result.ok
    evidence = result.evidence
    assert (evidence.outcome, evidence.failure_stage) == ("refused", "resolution")
    assert (evidence.session_cleanup, evidence.sandbox_destroy) == ("not_attempted",) * 2
    assert evidence.confinement is None


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_a_binary_that_answers_inside_the_sandbox_is_ready(tmp_path: Path) -> None:
    """The probe runs `--version` inside bubblewrap: positive, stored evidence → ready."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "gitty.toml").write_text(
        'name = "gitty"\nrein = "command"\nsandbox = "host-sandboxed"\n'
        '[command]\npreset = "custom"\nexecutable = "git"\n'
    )
    settings = _settings(tmp_path, agents)
    record = check_profile(load_profile(agents / "gitty.toml"), settings)
    assert record.readiness.state == "ready", record
    assert "git version" in (record.readiness.evidence or "")
    assert [check.exit_code for check in record.checks] == [0, 0]
    assert not resolve(_request("gitty"), settings).proof_run


def test_no_preset_writes_a_harness_tell_where_its_agent_reads() -> None:
    """What a preset puts in the agent's HOME and env (config files, quiet env) names no
    harness word: the per-run contamination guard would abort every run of it (aider's
    price-list placeholder once said "left empty by the harness")."""
    from sreforge_contracts import HARNESS_WORDS
    from sreforge_runner._presets import PRESET_ENV, PROXY_PRESETS

    told = [
        (preset, where, word)
        for preset, plan in PROXY_PRESETS.items()
        for where, text in plan.config_files
        for word in HARNESS_WORDS
        if word in text.lower() or word in where.lower()
    ]
    told += [
        (preset, name, word)
        for preset, env in PRESET_ENV.items()
        for name, value in env.items()
        for word in HARNESS_WORDS
        if word in f"{name}={value}".lower()
    ]
    assert told == []
