"""A real Faust worker whose batch step fails on one event every run, on a real broker.

Without a broker, both runtimes: tests/unit/streams/test_poison.py. Here the batch
that keeps failing must run event by event, the poison event land in the dead-letter
topic once, and the group's commit pass it, the other events answered.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ragsift.schemas import DeadLetter, FeedbackEvent
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS
from tests.integration.apps import end, start_faust_worker
from tests.integration.test_faust_stop_while_held import WAIT_S, committed, produce, wait_for
from tests.integration.test_kafka_roundtrip import _consume, create_topics

APP = Path(__file__).parent / "apps" / "poison_batch.py"


def test_a_poison_event_is_dead_lettered_and_its_partition_goes_on(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = group = f"it-poison-{unique}"
    source, out = TOPICS["queries"].name(prefix), TOPICS["feedback"].name(prefix)
    letters = TOPICS["deadletter"].name(prefix)
    asyncio.run(create_topics(kafka_bootstrap, [source, out, letters], partitions=1))
    env = {"POISON_PREFIX": prefix, "POISON_APP_ID": group}
    proc, log = start_faust_worker(
        APP, bootstrap=kafka_bootstrap, env=env, workdir=tmp_path, log_name="worker.log"
    )
    try:
        asyncio.run(produce(kafka_bootstrap, source, "fine"))
        deadline = time.monotonic() + WAIT_S
        while asyncio.run(committed(kafka_bootstrap, group, source)) != 1:
            assert time.monotonic() < deadline, "the first batch was never committed"
            time.sleep(0.5)
        asyncio.run(produce(kafka_bootstrap, source, "poison"))
        wait_for("kept failing; run event by event", log)
        asyncio.run(produce(kafka_bootstrap, source, "after"))
        # Before: the batch ran again for ever; committed stayed at 1.
        while asyncio.run(committed(kafka_bootstrap, group, source)) != 3:
            assert time.monotonic() < deadline, f"not committed to 3:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        values = asyncio.run(_consume(kafka_bootstrap, out, 2, timeout_s=20))
        dead = asyncio.run(_consume(kafka_bootstrap, letters, 1, timeout_s=20))
    finally:
        end(proc)
    answered = {EventCodec(FeedbackEvent).decode(value).query_id for value in values}
    assert answered == {"fine-0", "after-0"}, log.read_text()[-3000:]
    letter = EventCodec(DeadLetter).decode(dead[0])
    assert (letter.stage, letter.offset, letter.query_id) == ("poison", 1, "poison-0")
    assert "batch step crashes on one event" in letter.error
