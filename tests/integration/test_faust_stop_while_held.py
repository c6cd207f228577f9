"""A real Faust worker stopped while a handler holds its batch for a store, on a real broker.

The plain loop gives such a batch up at SIGTERM (tests/unit/streams/test_loop.py);
these check the Faust runtime does the same: the worker leaves, the held batch is
not committed (the next member reads it again), and a batch that is only slow is
finished and committed first.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from tests.integration.apps import end
from tests.integration.faust_worker import (
    Topics,
    app_env,
    committed,
    fresh_topics,
    produce,
    start,
    wait_committed,
    wait_for,
)

APP = Path(__file__).parent / "apps" / "held_store.py"
#: Far longer than a stop takes; a worker still there after it waits for the store.
STOP_TIMEOUT_S = 45


def stopped(proc: subprocess.Popen[bytes]) -> bool:
    """SIGTERM, then whether the worker left before :data:`STOP_TIMEOUT_S`."""
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False
    return True


def started(
    bootstrap: str, unique: str, tmp_path: Path
) -> tuple[Topics, subprocess.Popen[bytes], Path]:
    """A held-store worker on fresh topics (one partition): its topics, process, log."""
    topics = fresh_topics(bootstrap, f"it-held-{unique}")
    proc, log = start(APP, bootstrap, app_env("HELD", topics), tmp_path)
    return topics, proc, log


def test_a_stop_gives_up_a_held_batch_uncommitted_and_the_worker_leaves(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topics, proc, log = started(kafka_bootstrap, unique, tmp_path)
    try:
        asyncio.run(produce(kafka_bootstrap, topics.source, "fine"))
        wait_committed(kafka_bootstrap, topics, 1, log)
        asyncio.run(produce(kafka_bootstrap, topics.source, "hold"))
        wait_for("holding the batch", log)
        left = stopped(proc)
    finally:
        end(proc)
    assert left, f"the worker waited for the store at SIGTERM:\n{log.read_text()[-3000:]}"
    # Not committed past the held event (offset 1): the next member reads it again.
    assert asyncio.run(committed(kafka_bootstrap, topics.group, topics.source)) == 1


def test_a_stop_finishes_a_slow_batch_and_commits_it(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topics, proc, log = started(kafka_bootstrap, unique, tmp_path)
    try:
        asyncio.run(produce(kafka_bootstrap, topics.source, "fine", "slow"))
        wait_for("slow batch started", log)
        left = stopped(proc)
    finally:
        end(proc)
    assert left, f"the worker did not stop:\n{log.read_text()[-3000:]}"
    assert asyncio.run(committed(kafka_bootstrap, topics.group, topics.source)) == 2
