"""`ragsift deadletters` and `deadletters replay` against the real broker: letters are
read back, and the originals land on their source topic with their keys and bytes."""

from __future__ import annotations

import asyncio
import json

from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.schemas import DeadLetter
from ragsift.settings import KafkaSettings
from ragsift.streams import clients
from ragsift.streams.codec import EventCodec
from ragsift.streams.topic_read import Record, read_to_end


def _query(n: int, unique: str) -> bytes:
    return json.dumps(
        {"query_id": f"q{n}-{unique}", "tenant_id": "acme", "query": f"question {n}?"}
    ).encode()


async def _produce(kafka: KafkaSettings, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = clients.producer(kafka)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


def _read(kafka: KafkaSettings, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    got: list[tuple[bytes | None, bytes | None]] = []

    def take(record: Record) -> None:
        got.append((record.key, record.value))

    asyncio.run(read_to_end(kafka, topic, take))
    return got


def test_deadletters_lists_then_replays_originals_to_their_topic(
    kafka_bootstrap: str, unique: str
) -> None:
    prefix = f"it-dl-{unique}"
    env = {
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGSIFT_KAFKA_TOPIC_PREFIX": prefix,
        "RAGSIFT_KAFKA_PARTITIONS": "1",
        "COLUMNS": "300",
    }
    runner = CliRunner()
    created = runner.invoke(app, ["topics", "--create"], env=env)
    assert created.exit_code == 0, created.output
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    queries, deadletter = f"{prefix}.queries.v1", f"{prefix}.deadletter.v1"

    # The originals, on the source topic where the worker read them.
    originals = [(f"q{n}-{unique}".encode(), _query(n, unique)) for n in range(3)]
    big = (b"big", _query(9, unique) + b" " * 2_000)  # cut in its letter
    asyncio.run(_produce(kafka, queries, [*originals, big]))

    def letter(offset: int, key: bytes, value: bytes, **kw: object) -> DeadLetter:
        fields: dict[str, object] = {
            "original": value,
            "stage": "service",
            "error_type": "ServiceUnavailableError",
            "error": "qdrant unreachable\nafter 3 attempts",
            "worker": "retrieval",
            "topic": queries,
            "partition": 0,
            "offset": offset,
            "key": key,
            "query_id": key.decode(),
            "tenant_id": "acme",
            **kw,
        }
        return DeadLetter.build(**fields)  # type: ignore[arg-type]  # the fields above

    letters = [letter(n, *originals[n]) for n in range(3)]
    letters.append(letter(3, *big, max_original_bytes=1_024))
    letters.append(letter(4, b"loop", b"{}", topic=deadletter, worker="audit", stage="decode"))
    codec = EventCodec(DeadLetter)
    asyncio.run(
        _produce(kafka, deadletter, [(x.dead_letter_id.encode(), codec.encode(x)) for x in letters])
    )

    listed = runner.invoke(app, ["deadletters", "--worker", "retrieval"], env=env)
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert len(lines) == 4
    assert f"{queries}:0@0  acme/q0-{unique}" in lines[0]
    assert "qdrant unreachable after 3 attempts" in lines[0]
    assert lines[3].endswith("  truncated")
    assert f"4 dead letters of 5 on {deadletter}; by worker/stage: retrieval/service 4" in (
        listed.stderr
    )
    as_json = runner.invoke(app, ["deadletters", "--json", "--stage", "decode"], env=env)
    assert [json.loads(x)["topic"] for x in as_json.stdout.splitlines()] == [deadletter]

    refused = runner.invoke(app, ["deadletters", "replay"], env=env)  # no terminal, no --yes
    assert refused.exit_code == 2
    assert len(_read(kafka, queries)) == 4  # nothing sent

    replayed = runner.invoke(app, ["deadletters", "replay", "--yes"], env=env)
    assert replayed.exit_code == 0, replayed.output
    assert replayed.stdout.strip() == (
        "replayed 3; skipped: truncated 1, damaged 0, empty original 0,"
        " not replayable topic 1, refused key 0, duplicate 0; filtered out 0"
    )
    assert f"skipped (truncated): {queries}:0@3" in replayed.stderr
    assert f"skipped (not replayable topic): {deadletter}:0@4" in replayed.stderr
    on_topic = _read(kafka, queries)
    assert on_topic[:4] == [*originals, big]
    assert on_topic[4:] == originals  # the replays: same keys, same bytes, source order
    assert len(_read(kafka, deadletter)) == 5  # the letters stay
