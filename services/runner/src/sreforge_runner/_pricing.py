"""What a run's model calls cost: token counts per call and a small list-price table.

Token counts are normalised from the three usage shapes the proxy sees (OpenAI
chat/responses, Anthropic messages, Gemini `usageMetadata`): `tokens_in` counts
every input token (cached ones included, so the estimate is an upper bound when
the provider discounts cache hits), `tokens_out` every output token (reasoning
or thinking tokens included). A profile can set `metadata.price_in_per_mtok`
and `price_out_per_mtok` (both) to price its model; otherwise the model name is
looked up in `LIST_PRICES`. An unknown model has no price: its cost is None,
never 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sreforge_runner._errors import ProfileError

__all__ = ["LIST_PRICES", "LIST_PRICES_AS_OF", "Price", "price_of", "profile_price", "tokens_of"]

LIST_PRICES_AS_OF = "2025-11"
"""When `LIST_PRICES` was copied from the providers' public pricing pages."""

# USD per 1M tokens (input, output): public list prices as of 2025-11, standard tier,
# short prompts (Gemini 2.5 Pro and 3 Pro charge more above 200k input tokens), no
# batch or cache discounts. Not re-checked since; override per profile when it matters.
LIST_PRICES: Mapping[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "gpt-5.1": (1.25, 10.0),
    "gpt-5.1-codex": (1.25, 10.0),
    "gpt-5": (1.25, 10.0),
    "gpt-5-codex": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "o3": (2.0, 8.0),
    "o4-mini": (1.1, 4.4),
    "gemini-3-pro-preview": (2.0, 12.0),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.3, 2.5),
    "gemini-2.5-flash-lite": (0.1, 0.4),
}
# A listed name matches itself plus a dated snapshot suffix (claude-sonnet-4-5-20250929,
# gpt-4.1-2025-04-14) or -latest; any other variant is a different model, so unpriced.
_SNAPSHOT = re.compile(r"(-\d{4}-?\d{2}-?\d{2}|-latest)?")
_PROVIDER_PREFIX = re.compile(r"^(openai|anthropic|gemini|google|models)/")
# Each provider names its counts differently; the first key found is the count, the
# extras are added (Anthropic's cache tokens are not in its input_tokens, Gemini's
# thinking tokens are not in its candidatesTokenCount).
_IN_KEYS = ("input_tokens", "prompt_tokens", "promptTokenCount")
_IN_EXTRAS = ("cache_creation_input_tokens", "cache_read_input_tokens")
_OUT_KEYS = ("output_tokens", "completion_tokens", "candidatesTokenCount")
_OUT_EXTRAS = ("thoughtsTokenCount",)


@dataclass(frozen=True)
class Price:
    """USD per 1M input and output tokens, and where the figures come from."""

    in_per_mtok: float
    out_per_mtok: float
    source: str

    def cost_usd(self, tokens_in: int, tokens_out: int) -> float:
        """The estimated cost of that many tokens."""
        return (tokens_in * self.in_per_mtok + tokens_out * self.out_per_mtok) / 1_000_000


def profile_price(metadata: Mapping[str, str]) -> Price | None:
    """The profile's own price (`price_in_per_mtok` and `price_out_per_mtok`), if set."""
    given = {key: metadata.get(key) for key in ("price_in_per_mtok", "price_out_per_mtok")}
    if not any(given.values()):
        return None
    try:
        values = [float(value or "") for value in given.values()]
    except ValueError:
        raise ProfileError(
            f"metadata.price_in_per_mtok / price_out_per_mtok: both must be numbers, got {given}"
        ) from None
    if min(values) < 0:
        raise ProfileError(f"metadata.price_*_per_mtok: must not be negative, got {given}")
    return Price(values[0], values[1], source="profile")


def price_of(model: str | None, metadata: Mapping[str, str]) -> Price | None:
    """The price for `model`: the profile's override, else the list price, else None."""
    override = profile_price(metadata)
    if override is not None:
        return override
    if not model:
        return None
    name = _PROVIDER_PREFIX.sub("", model.strip().lower())
    for listed in sorted(LIST_PRICES, key=len, reverse=True):
        if name.startswith(listed) and _SNAPSHOT.fullmatch(name[len(listed) :]):
            price_in, price_out = LIST_PRICES[listed]
            return Price(price_in, price_out, source=f"list-{LIST_PRICES_AS_OF}")
    return None


def tokens_of(usage: Any) -> tuple[int, int] | None:
    """(tokens in, tokens out) from a usage object of any supported shape; None if none."""
    if not isinstance(usage, dict) or not any(isinstance(v, int) for v in usage.values()):
        return None
    return _count(usage, _IN_KEYS, _IN_EXTRAS), _count(usage, _OUT_KEYS, _OUT_EXTRAS)


def _count(usage: dict[str, Any], keys: tuple[str, ...], extras: tuple[str, ...]) -> int:
    first = next((_int(usage, key) for key in keys if key in usage), 0)
    return first + sum(_int(usage, key) for key in extras)


def _int(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
