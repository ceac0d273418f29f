"""The contamination guard over plain text: every kind of tell caught, plain English not."""

from __future__ import annotations

import pytest
from sreforge_contracts import HARNESS_WORDS, Surface, Tells, describe_leaks, find_leaks

TELLS = Tells.for_run("latency-cache-stampede", "BookshelfApiLatencyP99High")


def _whats(text: str) -> list[str]:
    return [leak.what for leak in find_leaks([Surface("page", text)], TELLS)]


@pytest.mark.parametrize("word", HARNESS_WORDS)
def test_each_harness_word_is_caught_in_any_case(word: str) -> None:
    """Every word of the single list is a tell, whatever its case."""
    assert _whats(f"see the {word.upper()} notes") == [f"harness word {word!r}"]
    assert _whats(f"see the {word} notes") == [f"harness word {word!r}"]


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("FAULT_MODE=1", "fault"),
        ("injectFault()", "inject"),
        ("the injected delay", "inject"),
        ("faulty cache", "fault"),
        ("oracles agree", "oracle"),
        ("evalOnly", "eval_only"),
        ("eval-only values", "eval_only"),
        ("sreforge.run", "sreforge"),
    ],
)
def test_word_forms_and_identifier_spellings_are_caught(text: str, word: str) -> None:
    """Plurals, verb forms, snake_case, camelCase and dotted names all give the rig away."""
    assert f"harness word {word!r}" in _whats(text)


@pytest.mark.parametrize(
    "text",
    [
        "default = 3",
        "DEFAULT_TTL",
        "setdefault(key)",
        "timer resolution",
        "Resolutions differ",
        "an unharnessed horse",
    ],
)
def test_ordinary_words_containing_a_tell_are_not_flagged(text: str) -> None:
    """`default` contains `fault`, `resolution` contains `solution`: neither is a tell."""
    assert _whats(text) == []


def test_scenario_id_is_caught_in_its_spellings() -> None:
    """The scenario id leaks with dashes, underscores or spaces."""
    for text in ("latency-cache-stampede", "LATENCY_CACHE_STAMPEDE", "latency cache stampede"):
        assert _whats(text) == ["scenario id"], text
    assert _whats("cache stampede on latency") == []


def test_alert_name_is_caught_case_insensitively() -> None:
    """The eval-only alert name must not reach the page, whatever its case."""
    assert _whats("firing: bookshelfapilatencyp99high") == ["eval-only alert_to_clear"]


def test_a_distinct_expected_alert_is_a_tell_too() -> None:
    """When expected_alert differs from alert_to_clear, both are tells."""
    tells = Tells.for_run("s1", "AlertA", "AlertB")
    found = find_leaks([Surface("page", "AlertB fired")], tells)
    assert [leak.what for leak in found] == ["expected alert"]


def test_a_runtime_override_is_a_tell_as_the_pair_only() -> None:
    """arm-runtime-notrace: `VAR=VALUE` in an env dump or a file is a tell; the setting's
    name alone (the product reads it, its code and tests name it) is not."""
    tells = Tells.for_run("s1", "AlertA", runtime_override="BOOKSHELF_MAX_INFLIGHT_REQUESTS=0")
    surfaces = [
        Surface("sandbox env BOOKSHELF_MAX_INFLIGHT_REQUESTS", "BOOKSHELF_MAX_INFLIGHT_REQUESTS=0"),
        Surface("workspace file .env", "export BOOKSHELF_MAX_INFLIGHT_REQUESTS=0\n"),
        Surface("workspace file config.py", '_count(environ, "BOOKSHELF_MAX_INFLIGHT_REQUESTS")'),
        Surface("workspace file README.md", "BOOKSHELF_MAX_INFLIGHT_REQUESTS=04 is not it"),
    ]
    found = find_leaks(surfaces, tells)
    assert [(leak.what, leak.where) for leak in found] == [
        ("runtime override", "sandbox env BOOKSHELF_MAX_INFLIGHT_REQUESTS"),
        ("runtime override", "workspace file .env"),
    ]
    assert Tells.for_run("s1", "AlertA").values.keys() == {
        "scenario id",
        "eval-only alert_to_clear",
    }


def test_leak_names_what_where_and_line() -> None:
    """The abort reason says which tell, on which surface and line, with an excerpt."""
    leaks = find_leaks([Surface("workspace file app.py", "ok\nx = 1  # oracle hook\n")], TELLS)
    assert len(leaks) == 1
    assert (leaks[0].where, leaks[0].line) == ("workspace file app.py", 2)
    reason = describe_leaks(leaks)
    assert "harness word 'oracle' in workspace file app.py line 2" in reason
    assert "oracle hook" in reason


def test_describe_leaks_caps_the_list() -> None:
    """A tree full of tells still gives a short reason."""
    leaks = find_leaks([Surface("f", "oracle\n" * 20)], TELLS)
    reason = describe_leaks(leaks, limit=3)
    assert reason.count("oracle' in f") == 3
    assert reason.endswith("and 17 more")


def test_describe_leaks_without_excerpts_names_only_the_tell_and_the_surface() -> None:
    """A surface that may hold a secret-ish value (a sandbox's env) is named, its text is
    not; each tell and surface is named once however many lines carry it."""
    leaks = find_leaks([Surface("sandbox env TOOLS", "TOOLS=/opt/sreforge/s3cr3t\n" * 2)], TELLS)
    reason = describe_leaks(leaks, excerpts=False)
    assert reason.endswith(": harness word 'sreforge' in sandbox env TOOLS")
    assert "s3cr3t" not in reason
