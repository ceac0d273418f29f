"""The SREForge correlator service (placeholder until its issue fills it in)."""
