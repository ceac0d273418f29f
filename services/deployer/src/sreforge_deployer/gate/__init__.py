"""The CI gate (being moved here)."""
