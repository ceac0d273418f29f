"""A Submitted always fits on the bus: the RCA is cut, an oversize diff is refused."""

from __future__ import annotations

from sreforge_contracts import MAX_MESSAGE_BYTES, Submission, Submitted
from sreforge_runner._fit import fit_submitted


def _submitted(diff: str = "--- a\n+++ b\n", rca: str | None = "cache TTL too short") -> Submitted:
    submission = Submission(
        agent_name="scripted", diff=diff, submitted=True, rca=rca, duration_ms=1.0
    )
    return Submitted(run_id="r-fit", producer="runner", submission=submission)


def _size(event: Submitted) -> int:
    return len(event.model_dump_json().encode())


def test_a_submission_that_fits_is_left_as_it_is() -> None:
    """The common case: nothing changes."""
    event = _submitted()
    assert fit_submitted(event) == event


def test_a_long_rca_is_cut_to_fit_and_says_so() -> None:
    """An RCA over the limit next to a real diff: the diff stays, the RCA is cut with a note."""
    event = _submitted(diff="+fix\n" * 2000, rca="because " * (MAX_MESSAGE_BYTES // 7))
    fitted = fit_submitted(event)
    assert _size(fitted) <= MAX_MESSAGE_BYTES
    assert fitted.submission.submitted
    assert fitted.submission.diff == event.submission.diff
    assert fitted.submission.rca is not None
    assert fitted.submission.rca.endswith("[RCA cut to fit the bus message limit]")


def test_an_rca_of_escaped_characters_still_fits() -> None:
    """Control characters take 6 bytes each in JSON: the cut accounts for the encoding."""
    fitted = fit_submitted(_submitted(rca="\x01é" * MAX_MESSAGE_BYTES))
    assert _size(fitted) <= MAX_MESSAGE_BYTES
    assert fitted.submission.submitted


def test_a_diff_too_large_for_the_bus_is_refused_as_not_submitted() -> None:
    """A 2 MB file added to the tree: no Submitted the bus would refuse (a run ending
    `error`), but a refusal the oracle scores as the agent's failure, naming the limit."""
    fitted = fit_submitted(_submitted(diff="+" + "x" * 2_000_000))
    assert _size(fitted) <= MAX_MESSAGE_BYTES
    assert not fitted.submission.submitted
    assert fitted.submission.diff == ""
    assert fitted.submission.stop_reason is not None
    assert f"over the bus limit of {MAX_MESSAGE_BYTES} bytes" in fitted.submission.stop_reason
