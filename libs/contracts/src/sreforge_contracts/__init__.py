"""SREForge's typed vocabulary: events, commands, run contract, manifests, records."""

from sreforge_contracts._envelope import CONTRACT_VERSION, Event, utcnow
from sreforge_contracts._errors import ContractError

__all__ = ["CONTRACT_VERSION", "ContractError", "Event", "utcnow"]
