"""bookmeta: a small book-metadata service (edition lookups by ISBN-13)."""

from ._app import create_app
from ._catalogue import CATALOGUE, Catalogue, Edition, derived_edition, load_catalogue
from ._pacing import LookupSchedule, Pacing

__all__ = [
    "CATALOGUE",
    "Catalogue",
    "Edition",
    "LookupSchedule",
    "Pacing",
    "create_app",
    "derived_edition",
    "load_catalogue",
]
