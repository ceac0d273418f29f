"""The SREForge trigger service (placeholder until its issue fills it in)."""
