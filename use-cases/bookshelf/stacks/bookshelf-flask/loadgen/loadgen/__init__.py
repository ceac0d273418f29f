"""loadgen: an open-model (constant arrival rate) HTTP load generator."""

from ._checks import OkWindow, ResponseChecks, judge
from ._control import ControlServer
from ._generator import LoadGenerator, WarmupReport, default_max_inflight
from ._holdings_mix import HOLDINGS_EVERY, HoldingsMix, catalogue_holdings
from ._profiles import PROFILE_NAMES, Profile, profile_named, search_storm
from ._search_page import PAGE_LIMIT, PAGE_SEARCH_EVERY, SearchPage, build_search_page
from ._searches import SearchSet, build_search_set
from ._stats import LatencyWindow, LoadMetrics, RateWindow
from ._truth import (
    ExpectedHit,
    SearchTruth,
    TruthError,
    catalogue_editions,
    open_library,
    title_search,
)

__all__ = [
    "HOLDINGS_EVERY",
    "PAGE_LIMIT",
    "PAGE_SEARCH_EVERY",
    "PROFILE_NAMES",
    "ControlServer",
    "ExpectedHit",
    "HoldingsMix",
    "LatencyWindow",
    "LoadGenerator",
    "LoadMetrics",
    "OkWindow",
    "Profile",
    "RateWindow",
    "ResponseChecks",
    "SearchPage",
    "SearchSet",
    "SearchTruth",
    "TruthError",
    "WarmupReport",
    "build_search_page",
    "build_search_set",
    "catalogue_editions",
    "catalogue_holdings",
    "default_max_inflight",
    "judge",
    "open_library",
    "profile_named",
    "search_storm",
    "title_search",
]
