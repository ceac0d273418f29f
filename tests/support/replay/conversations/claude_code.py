"""Claude Code's replayed conversations, in its own tool names (`Read`, `Write`, `Bash`).

Claude Code 2.1.332 in `--print` mode declares, among others, `Bash` (`command`,
`description`), `Read` (`file_path`, absolute), `Write` (`file_path`, `content`) and
`Edit`; every main-loop call carries the tool list. `fixed` reads the patched file,
writes the fix and a root cause to `/tmp`, then applies, commits and submits in one
shell call; `mistaken` writes a truncated patch, `git apply` rejects it, and the model
stops without submitting. 2.1.332 made no side call here (none with the preset's
env, none without it either); should a release add one (a request without tools, as a
title or summary call would be), `aside` answers it without taking a turn.
"""

from __future__ import annotations

from replay import Received, Script, ToolCall, Turn

MODEL = "claude-sonnet-4-5"
"""The model the profile names (a listed price, so cost is counted)."""

WORKSPACE = "/workspace"
_PATCH = "/tmp/fix.patch"
_RCA = "/tmp/rca.md"
RCA = (
    "Root cause: the metadata cache was created per request, so every request missed it "
    "and the upstream was hit on each one; the cache now lives once per process.\n"
)


def fixed(fix_patch: str) -> Script:
    """Inspect, write the fix and an RCA, apply + commit + `submit --rca`, then stop."""
    return Script(
        [
            Turn(
                text="Let me look at the code the page points at.",
                tool_calls=[ToolCall("Read", {"file_path": f"{WORKSPACE}/{_target(fix_patch)}"})],
            ),
            Turn(
                text="The cache is rebuilt per request. Writing the fix and a root cause.",
                tool_calls=[
                    ToolCall("Write", {"file_path": _PATCH, "content": fix_patch}),
                    ToolCall("Write", {"file_path": _RCA, "content": RCA}),
                ],
            ),
            Turn(
                tool_calls=[
                    ToolCall(
                        "Bash",
                        {
                            "command": f"git apply {_PATCH} && git commit -qam 'Keep one "
                            f"metadata cache per process' && submit --rca {_RCA}",
                            "description": "Apply the fix, commit it and submit it",
                        },
                    )
                ]
            ),
            Turn(text="The fix is committed and submitted."),
        ],
        aside=_side_call,
    )


def mistaken(fix_patch: str) -> Script:
    """Write a truncated patch, watch `git apply` reject it, and stop without submitting."""
    lines = fix_patch.splitlines(keepends=True)
    corrupt = "".join(lines[: max(6, len(lines) // 2)]) + "@@ corrupt\n"
    return Script(
        [
            Turn(
                text="Writing the fix.",
                tool_calls=[ToolCall("Write", {"file_path": _PATCH, "content": corrupt})],
            ),
            Turn(
                tool_calls=[
                    ToolCall(
                        "Bash",
                        {"command": f"git apply {_PATCH}", "description": "Apply the fix"},
                    )
                ]
            ),
            Turn(text="The patch does not apply. I am stopping here without submitting."),
        ],
        aside=_side_call,
    )


def _target(fix_patch: str) -> str:
    for line in fix_patch.splitlines():
        if line.startswith("+++ b/"):
            return line.removeprefix("+++ b/")
    raise ValueError("the fix patch names no file (+++ b/...)")


def _side_call(request: Received) -> Turn | None:
    body = request.body if isinstance(request.body, dict) else {}
    if request.method == "POST" and "messages" in body and not body.get("tools"):
        return Turn(text="Cache fix", tokens_in=20, tokens_out=3)
    return None
