"""Lenient reading: drop keys a model does not know, at every nesting level."""

from __future__ import annotations

from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationInfo

__all__ = ["LENIENT", "known_fields_only", "prune_when_lenient"]

LENIENT: dict[str, Any] = {"sreforge_lenient": True}
"""Validation context under which records drop unknown keys instead of failing."""


def known_fields_only(models: tuple[type[BaseModel], ...], data: Any) -> Any:
    """Return `data` without the keys none of `models` declares, recursively.

    Used to read records written by a later v1.x (additive-only): unknown fields
    are ignored while the models themselves still forbid them for producers.
    """
    if isinstance(data, list):
        return [known_fields_only(models, item) for item in data]
    if not isinstance(data, dict) or not models:
        return data
    kept: dict[str, Any] = {}
    for key, value in data.items():
        nested = _nested_models(models, key)
        if nested is None:
            continue
        kept[key] = known_fields_only(nested, value)
    return kept


def prune_when_lenient(model: type[BaseModel], data: Any, info: ValidationInfo) -> Any:
    """`known_fields_only` for `model` when validating under the LENIENT context.

    Readers pass LENIENT; producers building a record in code do not, so a
    misspelt field is still an error for them.
    """
    context = info.context
    if isinstance(context, dict) and context.get("sreforge_lenient"):
        return known_fields_only((model,), data)
    return data


def _nested_models(
    models: tuple[type[BaseModel], ...], key: str
) -> tuple[type[BaseModel], ...] | None:
    """The models a field may hold, or None when no model declares `key`."""
    found: list[type[BaseModel]] = []
    known = False
    for model in models:
        for name, field in model.model_fields.items():
            if key in (name, field.alias):
                known = True
                found.extend(_models_in(field.annotation))
    return tuple(found) if known else None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = get_origin(annotation)
    # dict values are not pruned: their keys are data (labels), not fields.
    if origin is None or origin is dict:
        return []
    return [model for arg in get_args(annotation) for model in _models_in(arg)]
