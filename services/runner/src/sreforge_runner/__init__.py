"""The SREForge runner service (placeholder until its issue fills it in)."""
