"""The SREForge recorder service (placeholder until its issue fills it in)."""
