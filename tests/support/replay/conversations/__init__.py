"""Replayed conversations, one module per CLI preset: `MODEL`, `fixed`, `mistaken`."""
