"""The in-process bus isolates failures like the agents: per event, with a deadline."""

from __future__ import annotations

from ragsift.observability.metrics import Metrics
from ragsift.schemas import DeadLetter, FeedbackEvent
from ragsift.streams.bus import InProcessBus
from tests.unit.streams.scripted import ScriptedHandler, huge_query, nested_brackets, raw

DEADLINE_S = 0.2


def bus(**overrides: object) -> InProcessBus:
    options: dict[str, object] = {"metrics": Metrics(), "batch_size": 64, "deadline_s": DEADLINE_S}
    options.update(overrides)
    return InProcessBus([ScriptedHandler()], **options)  # type: ignore[arg-type]  # keyword overrides


def outputs(b: InProcessBus) -> list[str]:
    return sorted(e.query_id for e in b.published["feedback"] if isinstance(e, FeedbackEvent))


def letters(b: InProcessBus) -> list[DeadLetter]:
    return [e for e in b.published["deadletter"] if isinstance(e, DeadLetter)]


async def test_one_bad_event_fails_alone_and_its_batch_is_processed() -> None:
    # Before: the batch call's exception escaped drain(); the agents dead-lettered all.
    b = bus()
    for i in range(36):
        await b.publish("queries", f"ok-{i}", raw(f"ok-{i}"))
        if i % 12 == 5:
            await b.publish("queries", f"bad-{i}", raw(f"bad-{i}", "crash"))
    await b.drain()
    assert outputs(b) == sorted(f"ok-{i}" for i in range(36))
    assert sorted(d.query_id or "" for d in letters(b)) == ["bad-17", "bad-29", "bad-5"]
    assert {d.stage for d in letters(b)} == {"handler"}


async def test_an_event_past_its_deadline_is_dead_lettered_and_the_rest_go_on() -> None:
    b = bus()
    for qid, text in (("a", "refund?"), ("slow", "hang"), ("b", "refund?")):
        await b.publish("queries", qid, raw(qid, text))
    await b.drain()
    assert outputs(b) == ["a", "b"]
    [letter] = letters(b)
    assert (letter.stage, letter.query_id) == ("deadline", "slow")


async def test_poison_bytes_get_bounded_letters_and_the_bus_keeps_going() -> None:
    b = bus(max_original_bytes=1024)
    await b.publish("queries", "deep", nested_brackets())
    await b.publish("queries", "huge", huge_query(50_000))
    await b.publish("queries", "after", raw("after"))
    await b.drain()
    assert outputs(b) == ["after"]
    deep, huge = letters(b)
    assert "nests too deeply" in deep.error
    assert len(huge.original) == 1024
    assert huge.original_truncated
    assert huge.original_length is not None
    assert huge.original_length > 50_000


async def test_a_handler_that_declares_no_deadline_is_waited_for() -> None:
    # The audit sink sets deadline_s = None: it waits for a failing disk rather
    # than let the runtime dead-letter evidence after the default deadline.
    handler = ScriptedHandler()
    handler.deadline_s = None  # type: ignore[attr-defined]  # the optional attribute under test
    b = InProcessBus([handler], metrics=Metrics(), deadline_s=DEADLINE_S)
    await b.publish("queries", "patient", raw("patient", "slow"))
    await b.drain()
    assert outputs(b) == ["patient"]
    assert letters(b) == []
