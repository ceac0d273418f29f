"""bookmeta: a small book-metadata service (edition lookups by ISBN-13)."""

from ._app import create_app
from ._catalogue import CATALOGUE, Edition
from ._pacing import LookupSchedule, Pacing

__all__ = ["CATALOGUE", "Edition", "LookupSchedule", "Pacing", "create_app"]
