"""bookmeta: a small book-metadata service (edition lookups and holdings by ISBN-13)."""

from ._app import Capacity, create_app
from ._catalogue import CATALOGUE, Catalogue, Edition, derived_edition, load_catalogue
from ._holdings import (
    HOLDINGS_SECONDS,
    SHELF_CHANGE_SECONDS,
    HoldingsPacing,
    holdings,
    holdings_between,
)
from ._pacing import LookupSchedule, Pacing
from ._profiles import DEFAULT_PROFILE, PROFILES, Profile

__all__ = [
    "CATALOGUE",
    "DEFAULT_PROFILE",
    "HOLDINGS_SECONDS",
    "PROFILES",
    "SHELF_CHANGE_SECONDS",
    "Capacity",
    "Catalogue",
    "Edition",
    "HoldingsPacing",
    "LookupSchedule",
    "Pacing",
    "Profile",
    "create_app",
    "derived_edition",
    "holdings",
    "holdings_between",
    "load_catalogue",
]
