"""Replayed conversations per CLI preset: `MODEL`, `fixed(fix_patch)`, maybe `mistaken(fix_patch)`.

One module per preset (`<preset with underscores>.py`); each turns a scenario's
`solution/fix.patch` into the conversation a competent (or a mistaken) on-call
engineer would have with that CLI, in the CLI's own protocol (tool calls or edit
blocks in text).
"""
