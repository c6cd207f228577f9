"""A dead letter fits the broker whatever the poison carries, so it is published, not dropped."""

from __future__ import annotations

import json

from ragsift.observability.metrics import Metrics
from ragsift.streams.routing import BatchRouter, Received
from tests.unit.streams.scripted import RecordingSender, ScriptedHandler, raw

TOPIC = "ragsift.queries.v1"


def count(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, {"worker": "scripted", **labels}) or 0.0


async def test_a_megabytes_long_query_id_in_an_undecodable_event_is_cut_in_its_letter() -> None:
    # Before: the decode error carried the 2 MB query id into the letter, past the
    # broker's 1 MB limit: three refused sends (1.5 s of backoff holding the batch),
    # the minimal letter refused too (it kept the id), and the letter dropped.
    poison = json.dumps({"query_id": "q" * 2_000_000, "tenant_id": "acme", "query": ""}).encode()
    sender, metrics = RecordingSender(max_message_bytes=1_000_000), Metrics()
    router = BatchRouter(ScriptedHandler(), sender, metrics=metrics, deadline_s=1.0)
    await router.process(
        [Received(poison, b"k", TOPIC, 0, 0), Received(raw("after"), b"k", TOPIC, 0, 1)]
    )
    [letter] = sender.dead_letters()
    assert letter.stage == "decode"
    assert "query: String should have at least 1 character" in letter.error
    assert letter.query_id is not None
    assert letter.query_id == "q" * len(letter.query_id)
    assert len(letter.query_id) <= 256
    assert letter.original_length == len(poison)
    assert sender.output_ids() == ["after"]
    assert count(metrics, "ragsift_dead_letter_send_failures_total", letter="full") == 0
    assert count(metrics, "ragsift_dead_letters_dropped_total") == 0
