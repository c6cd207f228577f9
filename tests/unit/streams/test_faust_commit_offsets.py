"""What Faust's consumer commits when an event at a partition's head is not acknowledged.

A characterisation of the Faust version ragsift pins, not of ragsift: Faust 0.15.3 commits
past one unacknowledged event at the head of a partition, or past any number of them when
nothing was committed yet (faust-streaming/faust#606, fix proposed in #707). At least once
needs the committed offset at or before the first unacknowledged one. ragsift never gives
Faust that state (docs/reliability.md, "Faust's commit past an unacknowledged head"); if
an upgrade changes this, these fail, and that section is to be read again.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest
from faust.types import TP, Message

from ragsift.settings import KafkaSettings
from ragsift.streams.app import create_app

TOPIC = "unit.queries.v1"
TP0 = TP(TOPIC, 0)


def consumer_at(committed: int | None) -> Any:
    """The app's own consumer, its partition 0 committed at ``committed`` (Kafka's
    meaning: the next offset to read), reading a topic whose events are acknowledged."""
    app = create_app(KafkaSettings(), app_id="unit-commit-offsets")
    app.topics._acking_topics.add(TOPIC)  # what subscribing an agent to it does
    consumer = app.consumer
    if committed is not None:
        consumer._committed_offset[TP0] = committed
    return consumer


def ack(consumer: Any, *offsets: int) -> None:
    for offset in offsets:
        consumer.ack(Message(TOPIC, 0, offset, 0.0, 0, None, b"k", b"v", None))


def to_commit(consumer: Any) -> int | None:
    """The offset the consumer's next commit writes for partition 0, if any."""
    offsets: dict[TP, int] = consumer._filter_committable_offsets({TP0})
    return offsets.get(TP0)


def test_the_faust_version_characterised_here() -> None:
    assert version("faust-streaming") == "0.15.3"


@pytest.mark.parametrize(
    ("committed", "acked", "unacked", "commits"),
    [
        # One event at the head not acknowledged: committed past it (at least once: <= 10).
        (10, (11, 12), 10, 13),
        # Nothing committed yet: past the first event, and past any number of them
        # (at least once: <= 0 and <= 3). A committed 0 counts as nothing committed.
        (None, (1, 2), 0, 3),
        (None, (4, 5), 0, 6),
        (0, (3, 4), 0, 5),
    ],
)
def test_faust_commits_past_an_unacknowledged_head(
    committed: int | None, acked: tuple[int, ...], unacked: int, commits: int
) -> None:
    consumer = consumer_at(committed)
    ack(consumer, *acked)
    assert to_commit(consumer) == commits
    assert commits > unacked  # the event at ``unacked`` is lost if the worker stops now


def test_faust_holds_back_for_two_unacknowledged_events_at_the_head() -> None:
    consumer = consumer_at(10)
    ack(consumer, 12, 13)
    assert to_commit(consumer) is None
    ack(consumer, 10, 11)
    assert to_commit(consumer) == 14


def test_the_tolerance_is_what_lets_a_record_that_never_reached_a_stream_be_passed() -> None:
    # Faust keeps no record of what it delivered: one missing offset at the head is
    # taken for a record the stream never got (compacted away, a transaction marker, an
    # unreadable record ragsift.streams.faust_read skipped), which must be passed over.
    consumer = consumer_at(10)
    ack(consumer, 11, 12)  # offset 10 was never delivered
    assert to_commit(consumer) == 13
