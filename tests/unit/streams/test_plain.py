"""The plain runtime without a broker: what it refuses, and /readyz before it runs."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import KafkaTimeoutError
from pydantic import ValidationError

from ragsift.errors import ConfigurationError
from ragsift.settings import KafkaSettings, Settings, WorkerSettings
from ragsift.streams.assembly import assemble
from ragsift.streams.plain import OutputsNotDeliveredError, PlainWorker, _Sender


def test_exactly_once_is_refused_with_the_runtime_that_has_it() -> None:
    settings = Settings(kafka=KafkaSettings(processing_guarantee="exactly_once"))
    with pytest.raises(ConfigurationError, match="--runtime faust"):
        PlainWorker(assemble(["decision"], settings), settings)


def test_before_it_runs_every_agent_is_down_and_nothing_is_assigned() -> None:
    settings = Settings()
    worker = PlainWorker(assemble(["decision", "report"], settings), settings)
    assert worker.readiness() == {
        "ready": False,
        "rebalancing": False,
        "agents_down": ["ragsift.decision", "ragsift.report"],
        "handlers_stalled": [],
        "assigned_partitions": None,
    }


def test_the_web_host_defaults_to_the_settings_and_the_option_wins() -> None:
    settings = Settings()
    parts = assemble(["decision"], settings)
    assert PlainWorker(parts, settings).web_host == "127.0.0.1"
    assert PlainWorker(parts, settings, web_host="127.0.0.2").web_host == "127.0.0.2"


class FakeProducer:
    """aiokafka's producer as the sender sees it: send hands back a delivery future."""

    def __init__(self) -> None:
        self.deliveries: list[asyncio.Future[object]] = []
        self.flushes = 0

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[object]:
        delivery: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.deliveries.append(delivery)
        return delivery

    async def flush(self) -> None:
        self.flushes += 1


async def test_a_flush_with_an_output_the_broker_did_not_take_raises() -> None:
    producer = FakeProducer()
    sender = _Sender(producer, "unit")
    for key in (b"a", b"b", b"c"):
        await sender.send("retrievals", key, b"{}")
    first, second, third = producer.deliveries
    first.set_result(None)
    second.set_exception(KafkaTimeoutError("batch expired"))
    third.cancel()
    with pytest.raises(OutputsNotDeliveredError, match="2 of 3 outputs not delivered"):
        await sender.flush(partial=False)
    assert producer.flushes == 1
    # The failed batch's deliveries are not carried into the next one.
    await sender.send("retrievals", b"d", b"{}")
    producer.deliveries[-1].set_result(None)
    await sender.flush(partial=True)  # no accumulator here: the plain flush
    assert producer.flushes == 2


@pytest.mark.parametrize("value", ["Faust", "plain\n", "plaın", "", "x" * 10_000, "faust;plain"])
def test_a_runtime_setting_that_is_not_exactly_plain_or_faust_is_refused(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSIFT_WORKER_RUNTIME", value)
    with pytest.raises(ValidationError, match="'plain' or 'faust'"):
        WorkerSettings()
