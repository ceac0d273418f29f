"""The SREForge deployer service (placeholder until its issue fills it in)."""
