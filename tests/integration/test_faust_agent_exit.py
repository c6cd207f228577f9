"""A real Faust worker whose agent leaves its loop by a BaseException, on a real broker.

Without a broker: tests/unit/streams/test_faust_batch_failure.py. The worker must exit
non-zero (so the orchestrator restarts it) without committing the batch, and the
restarted worker must answer it.
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

APP = Path(__file__).parent / "apps" / "dying_agent.py"


def test_an_agent_that_dies_ends_the_worker_and_its_batch_is_read_again(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = group = f"it-dying-{unique}"
    source, out = TOPICS["queries"].name(prefix), TOPICS["feedback"].name(prefix)
    names = [source, out, TOPICS["deadletter"].name(prefix)]
    asyncio.run(create_topics(kafka_bootstrap, names, partitions=1))
    env = {"DYING_PREFIX": prefix, "DYING_APP_ID": group}
    proc, log = start_faust_worker(
        APP,
        bootstrap=kafka_bootstrap,
        env={**env, "DYING_ARMED": "1"},
        workdir=tmp_path,
        log_name="armed.log",
    )
    try:
        asyncio.run(produce(kafka_bootstrap, source, "fine"))
        deadline = time.monotonic() + WAIT_S
        while asyncio.run(committed(kafka_bootstrap, group, source)) != 1:
            assert time.monotonic() < deadline, "the first batch was never committed"
            time.sleep(0.5)
        asyncio.run(produce(kafka_bootstrap, source, "die"))
        wait_for("agent left its loop", log)
        # Before, the agent was dead and the worker stayed up, not ready, for ever.
        try:
            code = proc.wait(timeout=WAIT_S)
        except Exception:
            raise AssertionError(f"the worker stayed up:\n{log.read_text()[-3000:]}") from None
    finally:
        end(proc)
    assert code != 0, log.read_text()[-3000:]
    assert asyncio.run(committed(kafka_bootstrap, group, source)) == 1  # "die" not committed
    proc, log = start_faust_worker(
        APP, bootstrap=kafka_bootstrap, env=env, workdir=tmp_path, log_name="restarted.log"
    )
    try:
        values = asyncio.run(_consume(kafka_bootstrap, out, 2, timeout_s=WAIT_S))
        deadline = time.monotonic() + WAIT_S
        while asyncio.run(committed(kafka_bootstrap, group, source)) != 2:
            assert time.monotonic() < deadline, f"not committed to 2:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
    finally:
        end(proc)
    codec = EventCodec(FeedbackEvent)
    assert {codec.decode(value).query_id for value in values} == {"fine-0", "die-0"}
