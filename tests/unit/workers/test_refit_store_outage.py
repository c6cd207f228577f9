"""A re-fit whose calibration store (Redis) is down is held, not dead-lettered; one
that Redis refuses for good is dead-lettered, with the stage ``redis``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import ResponseError

from ragsift.confidence.artifact import CalibrationArtifact
from ragsift.confidence.registry import CalibrationRegistry, CalibrationScope
from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import SqliteFeedbackStore
from ragsift.retrieval.redis_calibration import RedisCalibrationStore
from ragsift.retrieval.redis_replies import RedisRefusedError
from ragsift.schemas import DeadLetter
from ragsift.settings import FeedbackSettings, RedisSettings
from ragsift.streams.bus import InProcessBus
from ragsift.workers.calibration import FeedbackHandler, FeedbackLoop, ResultJoinHandler
from tests.unit.workers.test_calibration_worker import (
    SCOPE,
    Clock,
    base_artifact,
    feedback,
    traffic,
)

#: What redis-py raises when nothing listens on Redis's port.
DOWN = redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
WRONGTYPE = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")


class FlakyRedis:
    """As much of a Redis client as :class:`RedisCalibrationStore` uses, in memory.

    ``fail[op]`` is how many of the next calls of ``op`` (``hget``, ``hkeys``, ``get``,
    ``script``) raise ``errors[op]`` (an outage unless told otherwise).
    """

    def __init__(self) -> None:
        self.fields: dict[str, bytes] = {}
        self.counter = 0
        self.fail: dict[str, int] = {}
        self.errors: dict[str, Exception] = {}

    def _gate(self, op: str) -> None:
        if self.fail.get(op, 0) > 0:
            self.fail[op] -= 1
            raise self.errors.get(op, DOWN)

    def register_script(self, _source: str) -> Any:
        def run(keys: list[str], args: list[str]) -> int:
            self._gate("script")
            self.counter += 1
            if args[0] == "put":
                self.fields[args[1]] = args[2].encode()
                return 0
            return int(self.fields.pop(args[1], None) is not None)

        return run

    def hget(self, _key: str, field: str) -> bytes | None:
        self._gate("hget")
        return self.fields.get(field)

    def hkeys(self, _key: str) -> list[bytes]:
        self._gate("hkeys")
        return [f.encode() for f in self.fields]

    def get(self, _key: str) -> bytes | None:
        self._gate("get")
        return str(self.counter).encode() if self.counter else None

    def close(self) -> None:
        """Nothing to close."""


@pytest.fixture
def client() -> FlakyRedis:
    return FlakyRedis()


@pytest.fixture
def store(client: FlakyRedis) -> RedisCalibrationStore:
    return RedisCalibrationStore(RedisSettings(), client=client)  # type: ignore[arg-type]


@pytest.fixture
def loop(tmp_path: Path, store: RedisCalibrationStore) -> FeedbackLoop:
    clock = Clock()
    registry = CalibrationRegistry(base_artifact(), store, refresh_s=0)
    settings = FeedbackSettings(min_labels=200, refit_interval_s=0, join_ttl_s=3600)
    labels = SqliteFeedbackStore(tmp_path / "feedback.sqlite", clock=clock)
    return FeedbackLoop(labels, registry, settings, Metrics(), clock=clock)


@pytest.mark.parametrize("op", ["hget", "hkeys", "get", "script"])
def test_redis_down_is_a_service_error_and_still_an_os_error(
    store: RedisCalibrationStore, client: FlakyRedis, op: str
) -> None:
    # The registry keeps serving what it read on an OSError; a handler holds its batch
    # on a service error. Before, an outage was a bare OSError: dead-lettered.
    client.fail[op] = 1
    calls = {
        "hget": lambda: store.get(SCOPE),
        "hkeys": store.scopes,
        "get": store.generation,
        "script": lambda: store.put(SCOPE, base_artifact()),
    }
    with pytest.raises(ServiceUnavailableError) as caught:
        calls[op]()
    assert isinstance(caught.value, OSError)
    assert caught.value.service == "redis"
    assert "redis calibration store" in str(caught.value)


def test_a_key_redis_refuses_for_good_is_a_refusal_naming_no_data(
    store: RedisCalibrationStore, client: FlakyRedis
) -> None:
    client.fail["script"], client.errors["script"] = 1, WRONGTYPE
    with pytest.raises(RedisRefusedError) as caught:
        store.put(CalibrationScope("docs", "tenant\u202eevil"), base_artifact())
    assert isinstance(caught.value, OSError)
    assert not isinstance(caught.value, ServiceUnavailableError)
    assert (caught.value.store, caught.value.code, caught.value.stage) == (
        "calibration",
        "WRONGTYPE",
        "redis",
    )
    assert "evil" not in str(caught.value)


def test_a_reply_that_passes_is_an_outage_not_a_refusal(
    store: RedisCalibrationStore, client: FlakyRedis
) -> None:
    # A replica promoted after a failover answers READONLY for a while.
    client.fail["script"] = 1
    client.errors["script"] = ResponseError("READONLY You can't write against a read only replica.")
    with pytest.raises(ServiceUnavailableError):
        store.put(SCOPE, base_artifact())


async def run_labels(
    loop: FeedbackLoop, client: FlakyRedis, **fail: int
) -> tuple[Any, list[float]]:
    """200 labels through the worker's handlers; ``fail`` applies from the last label on."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    handlers = [ResultJoinHandler(loop, sleep=sleep), FeedbackHandler(loop, sleep=sleep)]
    bus = InProcessBus(handlers, metrics=loop.metrics, batch_size=16)
    labelled = traffic(200)
    for r, _ in labelled:
        await bus.publish("retrievals", r.query_id, r)
    await bus.drain()
    for r, y in labelled[:-1]:
        await bus.publish("feedback", "acme", feedback(r.query_id, y))
    await bus.drain()
    assert waits == []
    assert loop.store.labels(SCOPE)
    client.fail.update(fail)
    r, y = labelled[-1]
    await bus.publish("feedback", "acme", feedback(r.query_id, y))
    await bus.drain()
    await bus.close()
    return bus, waits


async def test_redis_down_while_a_refit_is_published_holds_the_label_not_dead_letters_it(
    loop: FeedbackLoop, client: FlakyRedis
) -> None:
    bus, waits = await run_labels(loop, client, script=2)
    assert [d for d in bus.published["deadletter"] if isinstance(d, DeadLetter)] == []
    assert len(waits) == 2  # held through two failed puts, then the re-fit was stored
    assert client.fail["script"] == 0
    held = loop.registry.examine(SCOPE)[0]
    assert held is not None
    assert held.version != loop.registry.default.version


async def test_a_calibration_key_redis_refuses_for_good_dead_letters_the_label_at_once(
    loop: FeedbackLoop, client: FlakyRedis
) -> None:
    client.errors["script"] = WRONGTYPE
    bus, waits = await run_labels(loop, client, script=1)
    letters = [d for d in bus.published["deadletter"] if isinstance(d, DeadLetter)]
    assert [d.stage for d in letters] == ["redis"]
    assert "WRONGTYPE" in letters[0].error
    assert waits == []  # not waited out: no retry fixes it
    assert len(loop.store.labels(SCOPE)) == 200  # the label itself is stored


async def test_redis_down_while_the_refit_reads_its_base_holds_not_fits_on_the_default(
    loop: FeedbackLoop, client: FlakyRedis, store: RedisCalibrationStore
) -> None:
    # Read as "unreadable", the collection's calibration gave way to the shipped one:
    # Redis back by the put, the tenant's re-fit re-mapped the wrong calibration.
    collection = base_artifact().model_copy(update={"intercept": -7.0, "version": ""})
    collection = CalibrationArtifact.model_validate(collection.model_dump())  # its own version
    assert collection.version != base_artifact().version
    store.put(CalibrationScope("docs"), collection)
    bus, waits = await run_labels(loop, client, hget=1)
    assert [d for d in bus.published["deadletter"] if isinstance(d, DeadLetter)] == []
    assert len(waits) == 1
    held = loop.registry.examine(SCOPE)[0]
    assert held is not None
    assert held.data.notes.startswith(f"re-fit of {collection.version} ")


async def test_a_store_down_after_the_label_was_stored_still_re_fits_when_it_returns(
    loop: FeedbackLoop, client: FlakyRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The label was stored, then the re-fit's first read failed: the label tried again
    # found itself "unchanged", and the scope, not due, was not re-fit until the next
    # changed label.
    reads = loop.store.last_refit
    down = [0]

    def last_refit(scope: CalibrationScope) -> tuple[str, float] | None:
        if down[0] > 0:
            down[0] -= 1
            raise ServiceUnavailableError("redis feedback store: TimeoutError", service="redis")
        return reads(scope)

    monkeypatch.setattr(loop.store, "last_refit", last_refit)
    original = loop.store.put_label

    def put_label(*args: Any, **kwargs: Any) -> Any:
        put = original(*args, **kwargs)
        if len(loop.store.labels(SCOPE)) == 200 and put == "stored":
            down[0] = 1  # down from the moment the 200th label is stored
        return put

    monkeypatch.setattr(loop.store, "put_label", put_label)
    bus, waits = await run_labels(loop, client)
    assert [d for d in bus.published["deadletter"] if isinstance(d, DeadLetter)] == []
    assert len(waits) == 1
    held = loop.registry.examine(SCOPE)[0]
    assert held is not None
    assert held.version != loop.registry.default.version


def test_the_poison_guard_reads_an_outage_as_transient_and_a_refusal_as_not() -> None:
    from ragsift.retrieval.redis_calibration import (
        CalibrationStoreDownError,
        CalibrationStoreRefusedError,
    )
    from ragsift.streams.poison import is_transient

    down = CalibrationStoreDownError("redis calibration store: down", service="redis")
    refusal = CalibrationStoreRefusedError(
        "redis calibration store: refused", store="calibration", key_kind="write", code="ERR"
    )
    assert is_transient(down)
    # An OSError too (the registry's contract), it read as a network failure: held for good.
    assert not is_transient(refusal)


def test_an_own_artifact_that_cannot_be_read_is_still_replaced_by_the_refit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only a store that is down holds the re-fit: any other read failure reads as an
    # unusable artifact, as the query path reads it, and the re-fit's put replaces it.
    from ragsift.confidence.registry import DirectoryCalibrationStore

    folder = DirectoryCalibrationStore(tmp_path / "calibrations")
    clock = Clock()
    registry = CalibrationRegistry(base_artifact(), folder, refresh_s=0)
    settings = FeedbackSettings(min_labels=200, refit_interval_s=0, join_ttl_s=3600)
    labels = SqliteFeedbackStore(tmp_path / "feedback.sqlite", clock=clock)
    loop = FeedbackLoop(labels, registry, settings, Metrics(), clock=clock)
    get = folder.get

    def unreadable(scope: CalibrationScope) -> Any:
        if scope == SCOPE and not (tmp_path / "replaced").exists():
            raise PermissionError(13, "Permission denied")
        return get(scope)

    put = folder.put

    def put_and_mark(scope: CalibrationScope, artifact: CalibrationArtifact) -> None:
        put(scope, artifact)
        (tmp_path / "replaced").touch()

    monkeypatch.setattr(folder, "get", unreadable)
    monkeypatch.setattr(folder, "put", put_and_mark)
    labelled = traffic(200)
    loop.remember([r for r, _ in labelled])
    versions = [loop.apply(feedback(r.query_id, y)) for r, y in labelled]
    assert versions[-1] is not None
    assert folder.get(SCOPE) is not None


def test_the_calibration_workers_refusals_are_counted_by_kind_of_key(client: FlakyRedis) -> None:
    # Every Redis user counts what Redis refuses for good (docs/reliability.md); the
    # calibration worker's store is built so (wiring), and an outage is not counted.
    from ragsift.settings import CalibrationSettings, Settings
    from ragsift.wiring import build_calibration_registry

    metrics = Metrics()
    settings = Settings(calibration=CalibrationSettings(store="redis"))
    registry = build_calibration_registry(settings, base_artifact().embedder_id, metrics=metrics)
    assert isinstance(registry.store, RedisCalibrationStore)
    store = RedisCalibrationStore(
        RedisSettings(),
        client=client,  # type: ignore[arg-type]
        on_refused=registry.store.on_refused,
    )
    client.fail["script"] = 1
    with pytest.raises(ServiceUnavailableError):
        store.put(SCOPE, base_artifact())
    client.fail["script"], client.errors["script"] = 1, WRONGTYPE
    with pytest.raises(RedisRefusedError):
        store.put(SCOPE, base_artifact())
    sample = metrics.registry.get_sample_value
    labels = {"store": "calibration", "key": "write"}
    assert sample("ragsift_redis_refused_total", labels) == 1
