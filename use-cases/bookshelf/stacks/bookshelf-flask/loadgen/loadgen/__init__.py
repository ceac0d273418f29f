"""loadgen: an open-model (constant arrival rate) HTTP load generator."""

from ._control import control_app
from ._generator import LoadGenerator, WarmupReport
from ._profiles import PROFILES, Profile, profile_named
from ._stats import LoadMetrics, RateWindow

__all__ = [
    "PROFILES",
    "LoadGenerator",
    "LoadMetrics",
    "Profile",
    "RateWindow",
    "WarmupReport",
    "control_app",
    "profile_named",
]
