"""Codex CLI (0.171): the conversations its model would have, in its own tools' terms.

For `gpt-5.5` codex declares `exec_command` (a function: `cmd`, optional
`yield_time_ms`) and `apply_patch` (a freeform tool whose input is codex's own patch
format, `*** Begin Patch` … `*** End Patch`). The scenario's fix is a git diff; it is
rewritten into that format so codex's own editor applies it.
"""

from __future__ import annotations

import re
import shlex

from replay import Script, ToolCall, Turn

__all__ = ["MODEL", "codex_patch", "fixed", "mistaken"]

MODEL = "gpt-5.5"
"""A model in codex 0.171's bundled catalog with the classic tools (no code mode)."""

_RCA = (
    "Each request built its own metadata cache, so every request missed and went "
    "upstream; the cache is now built once per process and shared."
)
_SUBMIT_WAIT_MS = 60_000  # submit runs to completion inside one exec_command call


def _exec(cmd: str, wait_ms: int | None = None) -> ToolCall:
    arguments: dict[str, object] = {"cmd": cmd}
    if wait_ms is not None:
        arguments["yield_time_ms"] = wait_ms
    return ToolCall("exec_command", arguments)


def _inspect() -> Turn:
    return Turn(
        text="Checking what changed recently before touching anything.",
        tool_calls=[_exec("git log --oneline -5 && git status --short")],
        tokens_in=1200,
        tokens_out=40,
    )


def _commit_and_submit(message: str) -> Turn:
    script = (
        f"git add -A && git commit -q -m {shlex.quote(message)} && "
        f'printf \'%s\\n\' {shlex.quote(_RCA)} > "$HOME/rca.md" && submit --rca "$HOME/rca.md"'
    )
    return Turn(
        text="Committing and submitting the fix.",
        tool_calls=[_exec(script, _SUBMIT_WAIT_MS)],
        tokens_in=1600,
        tokens_out=60,
    )


def fixed(fix_patch: str) -> Script:
    """Inspect, apply the fix with `apply_patch`, commit, `submit --rca`, stop."""
    return Script(
        [
            _inspect(),
            Turn(
                text="The metadata cache is rebuilt per request; sharing one per process.",
                tool_calls=[ToolCall("apply_patch", {"input": codex_patch(fix_patch)})],
                tokens_in=1400,
                tokens_out=300,
            ),
            _commit_and_submit("Share one metadata cache per process"),
        ]
    )


def mistaken(fix_patch: str) -> Script:
    """Apply the fix, then a CI-breaking edit (a syntax error) to the same file, commit
    and `submit`: the submission is made, and CI rejects it."""
    target = _files(fix_patch)[0]
    return Script(
        [
            _inspect(),
            Turn(
                tool_calls=[ToolCall("apply_patch", {"input": codex_patch(fix_patch)})],
                tokens_in=1400,
                tokens_out=300,
            ),
            Turn(
                text="Adding a guard while I am here.",
                tool_calls=[_exec(f"printf 'def guard(:\\n    pass\\n' >> {shlex.quote(target)}")],
            ),
            _commit_and_submit("Share one metadata cache per process, add a guard"),
        ]
    )


def codex_patch(diff: str) -> str:
    """A git diff (updates, additions, deletions) in codex's `apply_patch` format."""
    lines = ["*** Begin Patch"]
    for block in _blocks(diff):
        old, new = _paths(block)
        if old is None and new is None:
            continue
        body = _hunk_lines(block)
        if old is None:
            lines.append(f"*** Add File: {new}")
            lines.extend(line for line in body if line.startswith("+"))
        elif new is None:
            lines.append(f"*** Delete File: {old}")
        else:
            lines.append(f"*** Update File: {old}")
            lines.extend(body)
    lines.append("*** End Patch")
    return "\n".join(lines) + "\n"


def _blocks(diff: str) -> list[str]:
    return re.split(r"^(?=diff --git )", diff, flags=re.MULTILINE)


def _files(diff: str) -> list[str]:
    files = []
    for block in _blocks(diff):
        old, new = _paths(block)
        if path := new or old:
            files.append(path)
    return files


def _paths(block: str) -> tuple[str | None, str | None]:
    old = re.search(r"^--- (?:a/)?(.+)$", block, flags=re.MULTILINE)
    new = re.search(r"^\+\+\+ (?:b/)?(.+)$", block, flags=re.MULTILINE)
    if old is None or new is None:
        return None, None
    return (
        None if old.group(1) == "/dev/null" else old.group(1),
        None if new.group(1) == "/dev/null" else new.group(1),
    )


def _hunk_lines(block: str) -> list[str]:
    """Each hunk as `@@` then its lines (codex finds hunks by their context, not numbers)."""
    out: list[str] = []
    in_hunk = False
    for line in block.splitlines():
        if line.startswith("@@"):
            out.append("@@")
            in_hunk = True
        elif in_hunk and line[:1] in (" ", "+", "-"):
            out.append(line)
        elif in_hunk and line == "":
            out.append(" ")  # a blank context line whose leading space was trimmed
    return out
