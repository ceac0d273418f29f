"""Cost: list prices by model and snapshot, profile overrides, token normalisation, and the
run's summary (null cost, never 0, when a model has no price)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sreforge_runner import ProfileError
from sreforge_runner._pricing import price_of, tokens_of
from sreforge_runner._transcript import model_usage


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5-20250929", (3.0, 15.0)),
        ("anthropic/claude-sonnet-4-5", (3.0, 15.0)),
        ("gpt-4.1-mini", (0.4, 1.6)),
        ("gpt-4.1-2025-04-14", (2.0, 8.0)),
        ("openai/gpt-4.1", (2.0, 8.0)),
        ("gpt-4.1-mini-finetuned", None),
        ("qwen2.5-coder:7b", None),
        (None, None),
    ],
)
def test_list_prices_match_a_model_and_its_snapshots_only(
    model: str | None, expected: tuple[float, float] | None
) -> None:
    """Dated snapshots and provider prefixes share the list price; any other variant is a
    different model and stays unpriced (None, never a guess)."""
    price = price_of(model, {})
    assert (None if price is None else (price.in_per_mtok, price.out_per_mtok)) == expected


def test_a_profile_price_overrides_the_list_and_must_be_complete() -> None:
    """`price_in_per_mtok` + `price_out_per_mtok` price any model (a local one too);
    one without the other, or a non-number, is a profile error."""
    price = price_of("qwen2.5-coder:7b", {"price_in_per_mtok": "0.5", "price_out_per_mtok": "1"})
    assert price is not None
    assert (price.source, price.cost_usd(2_000_000, 1_000_000)) == ("profile", 2.0)
    for metadata in (
        {"price_in_per_mtok": "1"},
        {"price_in_per_mtok": "x", "price_out_per_mtok": "1"},
    ):
        with pytest.raises(ProfileError, match="price"):
            price_of("gpt-4.1", metadata)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}, (7, 3)),
        ({"input_tokens": 20, "output_tokens": 4, "total_tokens": 24}, (20, 4)),
        (
            {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 2},
            (105, 2),
        ),
        ({"promptTokenCount": 12, "candidatesTokenCount": 6, "thoughtsTokenCount": 4}, (12, 10)),
        ({}, None),
        (None, None),
    ],
)
def test_tokens_in_and_out_from_every_usage_shape(
    usage: dict[str, int] | None, expected: tuple[int, int] | None
) -> None:
    """OpenAI chat/responses, Anthropic (cache tokens are input) and Gemini (thinking
    tokens are output) counts normalise to tokens in/out."""
    assert tokens_of(usage) == expected


def test_the_run_cost_is_null_when_any_call_has_no_price(tmp_path: Path) -> None:
    """One unpriced model makes the run's cost unknown (None, not 0); an override prices it."""
    log = tmp_path / "model-calls.jsonl"
    calls = [
        {"model": "gpt-4.1", "usage": {"prompt_tokens": 1000, "completion_tokens": 100}},
        {"model": "mystery-1", "usage": {"prompt_tokens": 10, "completion_tokens": 1}},
        {"model": "gpt-4.1", "status": 429, "usage": None, "latency_s": 0.5},
    ]
    log.write_text("".join(json.dumps(call) + "\n" for call in calls))
    usage = model_usage(tmp_path, {})
    assert usage is not None
    assert (usage["calls"], usage["tokens_in"], usage["tokens_out"]) == (3, 1010, 101)
    assert (usage["cost_usd"], usage["unpriced_models"]) == (None, ["mystery-1"])
    assert (usage["calls_without_usage"], usage["error_calls"]) == (1, 1)
    overridden = model_usage(tmp_path, {"price_in_per_mtok": "1", "price_out_per_mtok": "10"})
    assert overridden is not None
    assert overridden["cost_usd"] == round((1010 * 1 + 101 * 10) / 1e6, 6)
    assert model_usage(tmp_path / "nowhere", {}) is None
