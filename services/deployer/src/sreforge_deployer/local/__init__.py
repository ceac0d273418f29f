"""The local topology (being moved here)."""
