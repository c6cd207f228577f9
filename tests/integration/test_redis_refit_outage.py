"""The real redis-server stopped while a re-fit is put: the label is held, not dead-lettered,
and its re-fit is put once Redis is back.

Redis is stopped and started with ``scripts/services`` (the services tier runs serially,
as the fault tests that restart it do), on the port of ``RAGSIFT_REDIS_URL`` and under
``RAGSIFT_RUN_DIR``, where ``scripts/services up`` started it. It runs without
persistence, so the labels are kept where the embedded runtime keeps them (SQLite):
only the calibration store is in Redis, as for ``ragsift feedback`` or the console
with ``RAGSIFT_CALIBRATION_STORE=redis``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ragsift.confidence.registry import CalibrationRegistry, CalibrationScope
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import SqliteFeedbackStore
from ragsift.retrieval.redis_calibration import RedisCalibrationStore
from ragsift.schemas import DeadLetter
from ragsift.settings import FeedbackSettings, RedisSettings
from ragsift.streams.bus import InProcessBus
from ragsift.workers.calibration import FeedbackHandler, FeedbackLoop, ResultJoinHandler
from tests.unit.workers.test_calibration_worker import SCOPE, base_artifact, feedback, traffic

SERVICES = Path(__file__).resolve().parents[2] / "scripts" / "services"


def _port(settings: RedisSettings) -> int:
    return int(settings.url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def services(action: str, settings: RedisSettings) -> None:
    """``scripts/services ACTION redis`` for the Redis these tests use, and no other."""
    env = {**os.environ, "RAGSIFT_REDIS_PORT": str(_port(settings))}
    subprocess.run([str(SERVICES), action, "redis"], check=True, env=env, timeout=60)


def answers(settings: RedisSettings) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", _port(settings)), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def settings(redis_settings: RedisSettings, unique: str) -> Iterator[RedisSettings]:
    scoped = redis_settings.model_copy(update={"key_prefix": f"it-outage-{unique}"})
    yield scoped
    if not answers(scoped):
        services("start", scoped)  # whatever happened, later tests need it
    client = redis.Redis.from_url(scoped.url)
    for key in client.scan_iter(f"{scoped.key_prefix}:*"):
        client.delete(key)
    client.close()


class StopsRedisAtPut(RedisCalibrationStore):
    """The store, stopping the real Redis just before its first put reaches it."""

    stopped = False

    def put(self, scope: CalibrationScope, artifact: Any) -> None:
        if not self.stopped:
            self.stopped = True
            services("stop", self.settings)
            assert not answers(self.settings), "scripts/services did not stop this Redis"
        super().put(scope, artifact)

    def __init__(self, settings: RedisSettings) -> None:
        super().__init__(settings)
        self.settings = settings


async def test_redis_stopped_mid_publish_holds_the_label_and_puts_its_refit_when_back(
    settings: RedisSettings, tmp_path: Path
) -> None:
    store = StopsRedisAtPut(settings)
    registry = CalibrationRegistry(base_artifact(), store, refresh_s=0)
    labels = SqliteFeedbackStore(tmp_path / "feedback.sqlite")
    loop = FeedbackLoop(
        labels,
        registry,
        FeedbackSettings(min_labels=200, refit_interval_s=0, join_ttl_s=3600),
        Metrics(),
    )
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # the worker's wait: Redis comes back
        waits.append(seconds)
        if not answers(settings):
            await asyncio.to_thread(services, "start", settings)

    handlers = [ResultJoinHandler(loop, sleep=sleep), FeedbackHandler(loop, sleep=sleep)]
    bus = InProcessBus(handlers, metrics=loop.metrics, batch_size=16)
    labelled = traffic(200)
    for r, _ in labelled:
        await bus.publish("retrievals", r.query_id, r)
    await bus.drain()
    for r, y in labelled:
        await bus.publish("feedback", "acme", feedback(r.query_id, y))
    await bus.drain()
    await bus.close()

    # Before: the 200th label was dead-lettered (an OSError), its re-fit never put.
    assert [d for d in bus.published["deadletter"] if isinstance(d, DeadLetter)] == []
    assert store.stopped
    assert waits, "the put never met the stopped Redis"
    held = RedisCalibrationStore(settings).get(SCOPE)
    assert held is not None
    assert held.version != registry.default.version
    assert len(labels.labels(SCOPE)) == 200
