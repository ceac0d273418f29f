"""The package's public surface: sorted, complete, and what the engine imports."""

from __future__ import annotations

import sreforge_trigger
from sreforge_bus import Service


def test_all_is_sorted_and_every_name_exists() -> None:
    """`__all__` is sorted (constants first, as ruff's RUF022 sorts) and importable."""
    names = sreforge_trigger.__all__
    constants = [n for n in names if n.isupper()]
    assert names == sorted(constants) + sorted(n for n in names if not n.isupper())
    for name in names:
        assert hasattr(sreforge_trigger, name), name


def test_service_is_a_bus_service_named_trigger_with_no_consumers() -> None:
    """The engine runs `sreforge_trigger.SERVICE`; it publishes only, so it has no routes."""
    assert isinstance(sreforge_trigger.SERVICE, Service)
    assert sreforge_trigger.SERVICE.name == "trigger"
    assert sreforge_trigger.SERVICE.routes == ()
