"""ConsumerSpec: validation and the redelivery schedule (no server needed)."""

from __future__ import annotations

import pytest
from sreforge_bus import ConsumerSpec


def test_delay_follows_backoff_then_repeats_the_last_value() -> None:
    """Delivery n waits backoff[n-1] before the next attempt; beyond the list the last repeats."""
    spec = ConsumerSpec("svc", ("sreforge.>",), backoff=(0.5, 2, 5))
    assert [spec.delay_after(n) for n in (1, 2, 3, 4, 9)] == [0.5, 2, 5, 5, 5]


def test_deadletter_subject_is_named_after_the_durable() -> None:
    """Poison messages of durable `svc` go to `sreforge.deadletter.svc`."""
    assert ConsumerSpec("svc", ("sreforge.>",)).deadletter_subject == "sreforge.deadletter.svc"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"durable": "a.b", "filter_subjects": ("x",)}, "durable"),
        ({"durable": "", "filter_subjects": ("x",)}, "durable"),
        ({"durable": "svc", "filter_subjects": ()}, "filter_subjects"),
        ({"durable": "svc", "filter_subjects": ("x",), "max_deliver": 0}, "max_deliver"),
        ({"durable": "svc", "filter_subjects": ("x",), "backoff": (-1.0,)}, "backoff"),
        ({"durable": "svc", "filter_subjects": ("x",), "ack_wait": 0}, "ack_wait"),
    ],
)
def test_bad_spec_is_rejected_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    """A spec the server would reject (or that would loop forever) fails at construction."""
    with pytest.raises(ValueError, match=field):
        ConsumerSpec(**kwargs)  # type: ignore[arg-type]


def test_server_config_leaves_one_delivery_to_dead_letter_crashed_attempts() -> None:
    """The server's max_deliver exceeds the handler budget by one; filters map as given."""
    single = ConsumerSpec("svc", ("sreforge.a",), max_deliver=3).consumer_config()
    assert (single.max_deliver, single.filter_subject) == (4, "sreforge.a")
    assert single.filter_subjects is None
    multi = ConsumerSpec("svc", ("sreforge.a", "sreforge.b")).consumer_config()
    assert multi.filter_subjects == ["sreforge.a", "sreforge.b"]
