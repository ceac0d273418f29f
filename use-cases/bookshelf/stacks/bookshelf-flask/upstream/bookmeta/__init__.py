"""bookmeta: a small book-metadata service (edition lookups by ISBN-13)."""

from ._app import Capacity, create_app
from ._catalogue import CATALOGUE, Catalogue, Edition, derived_edition, load_catalogue
from ._pacing import LookupSchedule, Pacing
from ._profiles import DEFAULT_PROFILE, PROFILES, Profile

__all__ = [
    "CATALOGUE",
    "DEFAULT_PROFILE",
    "PROFILES",
    "Capacity",
    "Catalogue",
    "Edition",
    "LookupSchedule",
    "Pacing",
    "Profile",
    "create_app",
    "derived_edition",
    "load_catalogue",
]
