"""A real Faust worker whose batch fails as a whole while it runs, on a real broker.

The plain loop seeks back and runs such a batch again (tests/unit/streams/test_loop.py);
without a broker, tests/unit/streams/test_faust_batch_failure.py. Here the batch's
events must reach the output topic, and the group's commit must not pass them first.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ragsift.schemas import FeedbackEvent
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

APP = Path(__file__).parent / "apps" / "failing_batch.py"


def test_a_batch_that_fails_as_a_whole_reaches_the_output_topic(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topics = fresh_topics(kafka_bootstrap, f"it-failing-{unique}")
    proc, log = start(APP, kafka_bootstrap, app_env("FAILING", topics), tmp_path)
    try:
        asyncio.run(produce(kafka_bootstrap, topics.source, "fine"))
        wait_committed(kafka_bootstrap, topics, 1, log)
        asyncio.run(produce(kafka_bootstrap, topics.source, "boom"))
        wait_for("bug outside event handling", log)
        asyncio.run(produce(kafka_bootstrap, topics.source, "after"))
        wait_committed(kafka_bootstrap, topics, 3, log)
        values = asyncio.run(_consume(kafka_bootstrap, topics.out, 3, timeout_s=20))
    finally:
        end(proc)
    codec = EventCodec(FeedbackEvent)
    answered = {codec.decode(value).query_id for value in values}
    # Committed past "boom" (offset 1): its output must be on the broker. Before, the
    # error left the agent's loop: Faust restarted the agent, whose new batch generator
    # stood behind the crashed one's (kept, unfinished, by the crash's traceback), so
    # nothing more was read (committed stayed 1; "boom" and "after" never answered) and
    # a SIGTERM waited for that batch until the worker was killed. Once that generator
    # was closed while the app ran, it acknowledged the batch and Faust committed it.
    assert answered == {"fine-0", "boom-0", "after-0"}, log.read_text()[-3000:]
