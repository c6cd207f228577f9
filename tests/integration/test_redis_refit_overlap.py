"""Two calibration workers re-fitting one scope at once, on the real redis-server: the
calibration last put covers every stored label.

In a rebalance's overlap two workers apply labels of one tenant. The race is made
deterministic: the second worker stores a label and puts its re-fit of every label
while the first fits the labels before it, then the first puts its re-fit.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from ragsift.confidence.registry import CalibrationRegistry
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import RedisFeedbackStore
from ragsift.retrieval.redis_calibration import RedisCalibrationStore
from ragsift.settings import FeedbackSettings, RedisSettings
from ragsift.workers.feedback_loop import FeedbackLoop
from tests.unit.workers.test_calibration_worker import SCOPE, base_artifact, feedback, traffic
from tests.unit.workers.test_refit_overlap import before_put


@pytest.fixture
def settings(redis_settings: RedisSettings, unique: str) -> Iterator[RedisSettings]:
    scoped = redis_settings.model_copy(update={"key_prefix": f"it-overlap-{unique}"})
    yield scoped
    client = redis.Redis.from_url(scoped.url)
    for key in client.scan_iter(f"{scoped.key_prefix}:*"):
        client.delete(key)
    client.close()


def worker(settings: RedisSettings) -> FeedbackLoop:
    """One calibration worker's loop, as `build_calibration_handlers` makes it."""
    registry = CalibrationRegistry(base_artifact(), RedisCalibrationStore(settings), refresh_s=0)
    feedback_settings = FeedbackSettings(min_labels=200, refit_interval_s=0, join_ttl_s=3600)
    return FeedbackLoop(RedisFeedbackStore(settings), registry, feedback_settings, Metrics())


def test_the_refit_put_last_by_two_workers_covers_every_label(
    settings: RedisSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = worker(settings), worker(settings)
    labelled = traffic(201)
    first.remember([r for r, _ in labelled])
    for r, y in labelled[:199]:
        assert first.apply(feedback(r.query_id, y)) is None
    (r200, y200), (r201, y201) = labelled[199], labelled[200]
    before_put(first, monkeypatch, lambda: second.apply(feedback(r201.query_id, y201)))
    first.apply(feedback(r200.query_id, y200))

    in_force = RedisCalibrationStore(settings).get(SCOPE)
    assert in_force is not None
    assert len(first.store.labels(SCOPE)) == 201
    assert in_force.data.n_examples == 201  # before: 200, the second worker's label left out
