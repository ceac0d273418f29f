"""The grading window: which samples count, when it ends, and whether it was observed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sreforge_contracts import OracleSignal

from sreforge_oracle._model import GradingConfig, GradingSample

__all__ = [
    "Drop",
    "Finding",
    "Window",
    "first_drop",
    "first_gap",
    "first_lasting_run",
    "gate",
    "increase",
    "lasting_shortfall",
    "span",
    "window_of",
]


@dataclass(frozen=True)
class Finding:
    """A signal as of the samples so far, plus the best value later samples could still give it.

    A settled signal has `best_value == signal.value`; an unsettled one (e.g. the
    alert has not cleared yet but may) has a higher `best_value`. `blind` marks a gate
    that is unsatisfied only because the harness could not observe what it judges (a
    harness fault, not evidence against the agent's fix).
    """

    signal: OracleSignal
    best_value: float
    blind: bool = False


def gate(
    signal_id: str, satisfied: bool, detail: str, *, settled: bool = True, blind: bool = False
) -> Finding:
    """A weight-0 integrity gate's finding; unsettled (not observed yet) it may still hold.

    A `blind` finding is never settled: what went unobserved is no evidence either way.
    """
    signal = OracleSignal(
        id=signal_id, satisfied=satisfied, value=float(satisfied), weight=0.0, detail=detail
    )
    return Finding(signal, best_value=signal.value if settled and not blind else 1.0, blind=blind)


@dataclass(frozen=True)
class Window:
    """The samples of the grading window so far.

    The window runs from `Deployed` (offset 0) to `end`: first clear +
    sustained_clear_seconds, or max_clear_time_seconds when the alert has not
    cleared. `samples` stops at the first sample at or past `end`; `complete`
    says such a sample exists. `clear` is the first not-firing sample from
    clear_settle_seconds to max_clear_time_seconds.
    """

    samples: tuple[GradingSample, ...]
    clear: GradingSample | None
    end: float
    complete: bool

    @property
    def last_offset(self) -> float:
        """Offset of the latest sample in the window (0 before any sample)."""
        return self.samples[-1].offset_seconds if self.samples else 0.0


def window_of(config: GradingConfig, samples: Sequence[GradingSample]) -> Window:
    """Cut the grading window out of the samples (in any order) taken since `Deployed`."""
    ordered = sorted(samples, key=lambda sample: sample.offset_seconds)
    clear = next(
        (
            sample
            for sample in ordered
            if config.clear_settle_seconds <= sample.offset_seconds <= config.max_clear_time_seconds
            and sample.target_state != "firing"
        ),
        None,
    )
    if clear is None:
        end = config.max_clear_time_seconds
    else:
        end = clear.offset_seconds + config.sustained_clear_seconds
    taken: list[GradingSample] = []
    for sample in ordered:
        taken.append(sample)
        if sample.offset_seconds >= end:
            return Window(tuple(taken), clear, end, complete=True)
    return Window(tuple(taken), clear, end, complete=False)


def first_gap(
    samples: Sequence[GradingSample], start: float, limit: float
) -> tuple[float, float] | None:
    """The first stretch longer than `limit` seconds without a sample, from `start` on.

    Samples before `start` are ignored; the stretch from `start` to the first
    sample counts, so a window whose first sample came late is not observed.
    """
    previous = start
    for sample in samples:
        if sample.offset_seconds < start:
            continue
        if sample.offset_seconds - previous > limit:
            return (previous, sample.offset_seconds)
        previous = sample.offset_seconds
    return None


def first_lasting_run(
    samples: Sequence[GradingSample],
    is_short: Callable[[GradingSample], bool],
    tolerance_seconds: float,
) -> list[GradingSample]:
    """The first run of consecutive short samples lasting `tolerance_seconds` or longer.

    A run lasts from its first short sample to its last, so with a tolerance of 0 any
    single short sample is one. `[]` when every shortfall ended sooner.
    """
    run: list[GradingSample] = []
    for sample in samples:
        if not is_short(sample):
            run = []
            continue
        run.append(sample)
        if sample.offset_seconds - run[0].offset_seconds >= tolerance_seconds:
            return run
    return []


@dataclass(frozen=True)
class Drop:
    """A counter read lower than at the sample before it: it was reset (its process restarted)."""

    before: GradingSample
    after: GradingSample
    was: float
    now: float

    def between(self) -> str:
        """`between t=…s and t=…s`, for a finding's detail."""
        return f"between t={self.before.offset_seconds:.1f}s and t={self.after.offset_seconds:.1f}s"


def first_drop(
    samples: Iterable[GradingSample], read: Callable[[GradingSample], float | None]
) -> Drop | None:
    """The first time a counter (`read`) fell between two samples that read it, else `None`."""
    previous: tuple[GradingSample, float] | None = None
    for sample in samples:
        value = read(sample)
        if value is None:
            continue
        if previous is not None and value < previous[1]:
            return Drop(previous[0], sample, previous[1], value)
        previous = (sample, value)
    return None


def increase(
    samples: Sequence[GradingSample], read: Callable[[GradingSample], float | None]
) -> float | None:
    """A counter's growth from the first sample that read it to the last; `None` if under two."""
    values = [value for sample in samples if (value := read(sample)) is not None]
    return values[-1] - values[0] if len(values) >= 2 else None


def span(run: Sequence[GradingSample]) -> str:
    """`at t=…s` for one sample, `from t=…s to t=…s (n samples)` for more."""
    first, last = run[0].offset_seconds, run[-1].offset_seconds
    if len(run) == 1:
        return f"at t={first:.1f}s"
    return f"from t={first:.1f}s to t={last:.1f}s ({len(run)} samples)"


def lasting_shortfall(
    samples: Sequence[GradingSample],
    is_short: Callable[[GradingSample], bool],
    tolerance_seconds: float,
) -> list[GradingSample]:
    """Like `first_lasting_run`, but the whole run: through its last consecutive short sample."""
    run = first_lasting_run(samples, is_short, tolerance_seconds)
    if not run:
        return []
    start = next(i for i, sample in enumerate(samples) if sample is run[0])
    whole: list[GradingSample] = []
    for sample in samples[start:]:
        if not is_short(sample):
            break
        whole.append(sample)
    return whole
