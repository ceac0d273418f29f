"""The SREForge oracle service (placeholder until its issue fills it in)."""
