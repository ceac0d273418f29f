"""Gemini CLI's replayed conversations, in its own tool names (`read_file`, `run_shell_command`).

Gemini CLI 0.61.0 in `--prompt` mode declares, among others, `read_file` (`file_path`),
`write_file` (`file_path`, `content`), `replace` and `run_shell_command` (`command`,
`description`; run as `bash -c`), and calls only `:streamGenerateContent?alt=sse`,
one per turn. `fixed` reads the patched file, then applies the fix from a
here-document, commits, writes a root cause (another here-document) and submits it in
one shell call; `mistaken` applies a truncated patch, `git apply` rejects it, and the
model stops without submitting. Side calls (`:countTokens`, and the JSON-schema
checks the CLI can make: next speaker, loop detection, model routing) are answered
by `aside` without taking a turn.
"""

from __future__ import annotations

import json
from typing import Any

from replay import Received, Script, ToolCall, Turn

MODEL = "gemini-2.5-pro"
"""The model the profile names (a listed price, so cost is counted)."""

WORKSPACE = "/workspace"
RCA = (
    "Root cause: the metadata cache was created per request, so every request missed it "
    "and the upstream was hit on each one; the cache now lives once per process.\n"
)
_SIDE_ANSWER: dict[str, Any] = {
    "reasoning": "The task is finished; the user speaks next.",
    "next_speaker": "user",
    "unproductive_state_analysis": "Steady progress, no loop.",
    "unproductive_state_confidence": 0.0,
    "model_choice": "pro",
}


def fixed(fix_patch: str) -> Script:
    """Read the file, then apply + commit + write an RCA + `submit --rca`, then stop."""
    command = (
        "git apply --whitespace=nowarn - <<'PATCH' && "
        "git commit -qam 'Keep one metadata cache per process' && "
        "cat > /tmp/rca.md <<'RCA' && submit --rca /tmp/rca.md\n"
        f"{_lines(fix_patch)}PATCH\n{_lines(RCA)}RCA\n"
    )
    return Script(
        [
            Turn(
                text="Let me look at the code the page points at.",
                tool_calls=[
                    ToolCall("read_file", {"file_path": f"{WORKSPACE}/{_target(fix_patch)}"})
                ],
            ),
            Turn(
                text="The cache is rebuilt per request. Applying the fix and submitting it.",
                tool_calls=[
                    ToolCall(
                        "run_shell_command",
                        {"command": command, "description": "Apply, commit and submit the fix"},
                    )
                ],
            ),
            Turn(text="The fix is committed and submitted."),
        ],
        aside=_side_call,
    )


def mistaken(fix_patch: str) -> Script:
    """Apply a truncated patch, watch `git apply` reject it, and stop without submitting."""
    lines = fix_patch.splitlines(keepends=True)
    corrupt = "".join(lines[: max(6, len(lines) // 2)]) + "@@ corrupt\n"
    return Script(
        [
            Turn(
                text="Applying the fix.",
                tool_calls=[
                    ToolCall(
                        "run_shell_command",
                        {
                            "command": f"git apply - <<'PATCH'\n{_lines(corrupt)}PATCH\n",
                            "description": "Apply the fix",
                        },
                    )
                ],
            ),
            Turn(text="The patch does not apply. I am stopping here without submitting."),
        ],
        aside=_side_call,
    )


def _side_call(request: Received) -> Turn | None:
    """`:countTokens` and structured-output checks get an answer; the script does not move."""
    if request.flavor_path.endswith(":countTokens"):
        return Turn(tokens_in=0, tokens_out=0)
    body = request.body if isinstance(request.body, dict) else {}
    config = body.get("generationConfig") or {}
    if not isinstance(config, dict):
        return None
    if config.get("responseJsonSchema") or config.get("responseSchema"):
        return Turn(text=json.dumps(_SIDE_ANSWER), tokens_in=50, tokens_out=10)
    return None


def _lines(text: str) -> str:
    """A here-document's body: `text` ending in a newline (its quoted tag expands nothing)."""
    return text if text.endswith("\n") else text + "\n"


def _target(fix_patch: str) -> str:
    """The first file the patch changes (`diff --git a/<path> b/<path>`)."""
    for line in fix_patch.splitlines():
        if line.startswith("diff --git a/"):
            return line.split()[2][2:]
    raise ValueError("the fix patch names no file")
