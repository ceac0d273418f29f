"""loadgen: an open-model (constant arrival rate) HTTP load generator."""

from ._checks import OkWindow, ResponseChecks, judge, search_enriched
from ._control import control_app
from ._generator import LoadGenerator, WarmupReport
from ._profiles import PROFILES, Profile, profile_named
from ._stats import LoadMetrics, RateWindow

__all__ = [
    "PROFILES",
    "LoadGenerator",
    "LoadMetrics",
    "OkWindow",
    "Profile",
    "RateWindow",
    "ResponseChecks",
    "WarmupReport",
    "control_app",
    "judge",
    "profile_named",
    "search_enriched",
]
