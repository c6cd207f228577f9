"""A real Faust worker whose agent leaves its loop by a BaseException, on a real broker.

Without a broker: tests/unit/streams/test_faust_batch_failure.py. The worker must exit
non-zero (so the orchestrator restarts it) without committing the batch, and the
restarted worker must answer it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ragsift.schemas import FeedbackEvent
from ragsift.streams.codec import EventCodec
from tests.integration.apps import end
from tests.integration.faust_worker import (
    WAIT_S,
    app_env,
    committed,
    fresh_topics,
    produce,
    start,
    wait_committed,
    wait_for,
)
from tests.integration.test_kafka_roundtrip import _consume

APP = Path(__file__).parent / "apps" / "dying_agent.py"


def test_an_agent_that_dies_ends_the_worker_and_its_batch_is_read_again(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topics = fresh_topics(kafka_bootstrap, f"it-dying-{unique}")
    env = app_env("DYING", topics)
    proc, log = start(APP, kafka_bootstrap, {**env, "DYING_ARMED": "1"}, tmp_path, "armed.log")
    try:
        asyncio.run(produce(kafka_bootstrap, topics.source, "fine"))
        wait_committed(kafka_bootstrap, topics, 1, log)
        asyncio.run(produce(kafka_bootstrap, topics.source, "die"))
        wait_for("agent left its loop", log)
        # Before, the agent was dead and the worker stayed up, not ready, for ever.
        try:
            code = proc.wait(timeout=WAIT_S)
        except Exception:
            raise AssertionError(f"the worker stayed up:\n{log.read_text()[-3000:]}") from None
    finally:
        end(proc)
    assert code != 0, log.read_text()[-3000:]
    # "die" (offset 1) not committed: the restarted worker reads it again.
    assert asyncio.run(committed(kafka_bootstrap, topics.group, topics.source)) == 1
    proc, log = start(APP, kafka_bootstrap, env, tmp_path, "restarted.log")
    try:
        values = asyncio.run(_consume(kafka_bootstrap, topics.out, 2, timeout_s=WAIT_S))
        wait_committed(kafka_bootstrap, topics, 2, log)
    finally:
        end(proc)
    codec = EventCodec(FeedbackEvent)
    assert {codec.decode(value).query_id for value in values} == {"fine-0", "die-0"}
