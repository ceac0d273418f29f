"""A Submitted that fits on the bus, whatever the agent left in its workspace.

The diff and the RCA are the agent's: a 2 MB file added to the tree, or a long RCA next to
a large diff, would make a Submitted over `MAX_MESSAGE_BYTES`. The bus refuses to send
it, the runner's handler would fail until its BriefReady is dead-lettered, and the run
would end `error`, a harness fault bought by the agent. Instead the RCA is cut to the room
left (it says so), and a diff that alone does not fit is refused: the submission counts
as not submitted, and `stop_reason` names the limit, so the verdict is the agent's.
"""

from __future__ import annotations

from sreforge_contracts import MAX_MESSAGE_BYTES, Submitted

__all__ = ["fit_submitted"]

_CUT_NOTE = "\n[RCA cut to fit the bus message limit]"
_MARGIN = 256
"""Bytes kept free under the limit (the bus adds nothing to the body, but be safe)."""


def fit_submitted(event: Submitted) -> Submitted:
    """`event` if it fits; else with its RCA cut to fit; else with the submission refused."""
    size = _size(event)
    if size <= MAX_MESSAGE_BYTES - _MARGIN:
        return event
    rca = event.submission.rca
    if rca:
        cut = _cut_rca(event, rca)
        if cut is not None:
            return cut
    submission = event.submission
    reason = (
        f"submission refused: the Submitted message is {size} bytes (diff {len(submission.diff)}"
        f" characters), over the bus limit of {MAX_MESSAGE_BYTES} bytes (MAX_MESSAGE_BYTES)"
    )
    refused = submission.model_copy(
        update={"diff": "", "rca": None, "submitted": False, "stop_reason": reason}
    )
    return event.model_copy(update={"submission": refused})


def _cut_rca(event: Submitted, rca: str) -> Submitted | None:
    """The event with the longest RCA prefix that fits, or None when even none fits."""
    limit = MAX_MESSAGE_BYTES - _MARGIN
    bare = _size(_with_rca(event, None))
    room = limit - bare - 2 * len(_CUT_NOTE)
    keep = min(len(rca), room)
    while keep > 0:  # escapes and UTF-8 make a character 1 to 6 bytes: shrink until it fits
        candidate = _with_rca(event, rca[:keep] + _CUT_NOTE)
        size = _size(candidate)
        if size <= limit:
            return candidate
        keep = min(keep - 1, keep * room // (size - bare))
    return None


def _with_rca(event: Submitted, rca: str | None) -> Submitted:
    return event.model_copy(update={"submission": event.submission.model_copy(update={"rca": rca})})


def _size(event: Submitted) -> int:
    return len(event.model_dump_json().encode())
