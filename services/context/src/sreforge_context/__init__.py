"""The SREForge context service (placeholder until its issue fills it in)."""
