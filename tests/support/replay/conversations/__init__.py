"""Scripted conversations per CLI preset (module `<preset with underscores>`).

Each module exports `MODEL` (the model name for the profile), `fixed(fix_patch)` (a
competent on-call engineer: inspect, apply the scenario's fix, commit, `submit`) and
optionally `mistaken(fix_patch)` (a conversation with a mistake, recorded truthfully).
"""
