"""Campaigns: agents x scenarios x trials submitted to one engine, resumable, with statistics.

`sreforge campaign FILE` (see docs/campaigns.md). The statistics (`_stats`) are pure.
"""

from sreforge.campaign._cli import add_campaign_command

__all__ = ["add_campaign_command"]
