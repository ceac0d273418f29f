"""aider: no tools; its edits are SEARCH/REPLACE blocks in the answer's text (`diff` format).

aider picks its edit format per model: for a `gpt-4.1` name it is `diff`, blocks of
`path`, a fence, `<<<<<<< SEARCH` … `=======` … `>>>>>>> REPLACE`. Naming a file in an
answer makes aider offer to add it (`--yes-always` says yes) and send it back: that is
the read. It auto-commits, asking the weak model for the message (a side call, answered
without taking a turn). It cannot run `submit` (shell commands need an explicit yes,
which `--yes-always` withholds); the preset counts its clean exit as the submission.
"""

from __future__ import annotations

from collections.abc import Iterator

from replay import Received, Script, Turn

__all__ = ["MODEL", "edit_blocks", "fixed"]

MODEL = "openai/gpt-4.1"
"""A name aider knows (so it picks the `diff` edit format); the replay answers it."""

_COMMIT_MESSAGE = "fix: undo the regression behind the page"


def _hunks(fix_patch: str) -> Iterator[tuple[str, list[str], list[str]]]:
    path = ""
    search: list[str] | None = None
    replace: list[str] = []
    for line in fix_patch.splitlines():
        if line.startswith("+++ "):
            path = line.removeprefix("+++ ").removeprefix("b/")
        elif line.startswith(("--- ", "diff --git", "index ")):
            continue
        elif line.startswith("@@"):
            if search is not None:
                yield path, search, replace
            search, replace = [], []
        elif search is not None and not line.startswith("\\"):
            kind, text = (line[:1] or " "), line[1:]
            if kind != "+":
                search.append(text)
            if kind != "-":
                replace.append(text)
    if search is not None:
        yield path, search, replace


def edit_blocks(fix_patch: str) -> str:
    """The unified diff `fix_patch` as aider SEARCH/REPLACE blocks, one per hunk."""
    blocks = []
    for path, search, replace in _hunks(fix_patch):
        fenced = ["```python", "<<<<<<< SEARCH", *search, "=======", *replace, ">>>>>>> REPLACE"]
        blocks.append("\n".join([path, *fenced, "```"]))
    return "\n\n".join(blocks)


def _commit_message(request: Received) -> Turn | None:
    body = request.body if isinstance(request.body, dict) else {}
    messages = body.get("messages") or [{}]
    system = str(messages[0].get("content") or "")
    if "commit message" in system.lower():
        return Turn(text=_COMMIT_MESSAGE, tokens_in=60, tokens_out=10)
    return None


def fixed(fix_patch: str) -> Script:
    """Name the file (aider adds it: the read), answer with the fix as edit blocks (aider
    applies and commits them), then stop; aider's exit is the submission."""
    files = list(dict.fromkeys(path for path, _, _ in _hunks(fix_patch)))
    ask = "I need to read " + ", ".join(files) + " before changing anything."
    edit = "Found the regression; here is the fix.\n\n"
    return Script([Turn(ask), Turn(edit + edit_blocks(fix_patch))], aside=_commit_message)
