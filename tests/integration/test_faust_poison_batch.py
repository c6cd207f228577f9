"""A real Faust worker whose batch step fails on one event every run, on a real broker.

Without a broker, both runtimes: tests/unit/streams/test_poison.py. Here the batch
that keeps failing must run event by event, the poison event land in the dead-letter
topic once, and the group's commit pass it, the other events answered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ragsift.schemas import DeadLetter, FeedbackEvent
from ragsift.streams.codec import EventCodec
from tests.integration.apps import end
from tests.integration.faust_worker import (
    app_env,
    fresh_topics,
    produce,
    start,
    wait_committed,
    wait_for,
)
from tests.integration.test_kafka_roundtrip import _consume

APP = Path(__file__).parent / "apps" / "poison_batch.py"


def test_a_poison_event_is_dead_lettered_and_its_partition_goes_on(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topics = fresh_topics(kafka_bootstrap, f"it-poison-{unique}")
    proc, log = start(APP, kafka_bootstrap, app_env("POISON", topics), tmp_path)
    try:
        asyncio.run(produce(kafka_bootstrap, topics.source, "fine"))
        wait_committed(kafka_bootstrap, topics, 1, log)
        asyncio.run(produce(kafka_bootstrap, topics.source, "poison"))
        wait_for("kept failing; run event by event", log)
        asyncio.run(produce(kafka_bootstrap, topics.source, "after"))
        # Before: the batch ran again for ever; committed stayed at 1.
        wait_committed(kafka_bootstrap, topics, 3, log)
        values = asyncio.run(_consume(kafka_bootstrap, topics.out, 2, timeout_s=20))
        dead = asyncio.run(_consume(kafka_bootstrap, topics.letters, 1, timeout_s=20))
    finally:
        end(proc)
    answered = {EventCodec(FeedbackEvent).decode(value).query_id for value in values}
    assert answered == {"fine-0", "after-0"}, log.read_text()[-3000:]
    letter = EventCodec(DeadLetter).decode(dead[0])
    assert (letter.stage, letter.offset, letter.query_id) == ("poison", 1, "poison-0")
    assert "batch step crashes on one event" in letter.error
