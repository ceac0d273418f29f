"""mini-swe-agent 2.x: one `bash` tool (tool calls), finished by echoing its sentinel.

mini-swe-agent 2.x declares a single function tool, `bash` (`{"command": ...}`),
runs each command in a fresh `sh -c` in the workspace, and stops when a command's
output starts with `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` (its trajectory then says
`exit_status: Submitted`). The harness's `submit` is one more bash command before that.
"""

from __future__ import annotations

import re

from replay import Script, ToolCall, Turn

__all__ = ["MODEL", "fixed", "mistaken"]

MODEL = "openai/replay-1"
"""litellm needs the provider prefix for an OpenAI-compatible base URL."""

_FINISH = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command})


def _first_file(fix_patch: str) -> str:
    found = re.search(r"^\+\+\+ b/(\S+)", fix_patch, re.MULTILINE)
    return found.group(1) if found else "."


def _apply(patch: str, message: str) -> str:
    body = patch if patch.endswith("\n") else patch + "\n"
    return f"git apply --index <<'PATCH' && git commit -q -m '{message}'\n{body}PATCH"


def _submit(target: str) -> str:
    rca = f"Root cause: a regression in {target}; the committed change reverts its effect."
    return f"cat > /tmp/rca.md <<'RCA'\n{rca}\nRCA\nsubmit --rca /tmp/rca.md"


def _turns(patch: str, fix_patch: str) -> list[Turn]:
    target = _first_file(fix_patch)
    read = f"git log --oneline -3; nl -ba {target} | head -120"
    commit = _apply(patch, f"Fix the regression in {target}")
    return [
        Turn("I'll read the code the page points at.", [_bash(read)]),
        Turn("Found it; applying the fix and committing.", [_bash(commit)]),
        Turn("Handing the change over.", [_bash(_submit(target))]),
        Turn("Submitted; finishing.", [_bash(_FINISH)]),
    ]


def fixed(fix_patch: str) -> Script:
    """Inspect, `git apply` the fix and commit, `submit --rca`, then finish."""
    return Script(_turns(fix_patch, fix_patch))


def mistaken(fix_patch: str) -> Script:
    """The same, but the patch is applied against context that does not exist (`git apply`
    fails), and the engineer submits anyway: nothing changed, so nothing ships."""
    broken = re.sub(r"^ (\S)", r" stale \1", fix_patch, count=1, flags=re.MULTILINE)
    return Script(_turns(broken, fix_patch))
