"""A real Faust worker whose batch fails as a whole while it runs, on a real broker.

The plain loop seeks back and runs such a batch again (tests/unit/streams/test_loop.py);
without a broker, tests/unit/streams/test_faust_batch_failure.py. Here the batch's
events must reach the output topic, and the group's commit must not pass them first.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ragsift.schemas import FeedbackEvent
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS
from tests.integration.apps import end, start_faust_worker
from tests.integration.test_faust_stop_while_held import WAIT_S, committed, produce, wait_for
from tests.integration.test_kafka_roundtrip import _consume, create_topics

APP = Path(__file__).parent / "apps" / "failing_batch.py"


def test_a_batch_that_fails_as_a_whole_reaches_the_output_topic(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = group = f"it-failing-{unique}"
    source, out = TOPICS["queries"].name(prefix), TOPICS["feedback"].name(prefix)
    names = [source, out, TOPICS["deadletter"].name(prefix)]
    asyncio.run(create_topics(kafka_bootstrap, names, partitions=1))
    env = {"FAILING_PREFIX": prefix, "FAILING_APP_ID": group}
    proc, log = start_faust_worker(
        APP, bootstrap=kafka_bootstrap, env=env, workdir=tmp_path, log_name="worker.log"
    )
    try:
        asyncio.run(produce(kafka_bootstrap, source, "fine"))
        deadline = time.monotonic() + WAIT_S
        while asyncio.run(committed(kafka_bootstrap, group, source)) != 1:
            assert time.monotonic() < deadline, "the first batch was never committed"
            time.sleep(0.5)
        asyncio.run(produce(kafka_bootstrap, source, "boom"))
        wait_for("bug outside event handling", log)
        asyncio.run(produce(kafka_bootstrap, source, "after"))
        while asyncio.run(committed(kafka_bootstrap, group, source)) != 3:
            assert time.monotonic() < deadline, f"not committed to 3:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        values = asyncio.run(_consume(kafka_bootstrap, out, 3, timeout_s=20))
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
