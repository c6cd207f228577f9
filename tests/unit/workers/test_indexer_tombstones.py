"""A tombstone on the compacted documents topic deletes the document its key names.

Before: a record with a key and no value (how Kafka deletes a key from a compacted
topic) was decoded as an empty message and dead-lettered, and the document stayed
in the live index though a rebuild from the compacted topic would not have it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.errors import CollectionNotFoundError
from ragsift.retrieval.index import SearchRequest
from ragsift.streams.routing import BatchRouter, Received
from ragsift.streams.tombstones import TOMBSTONE_SKIPPED, tombstone_delete
from tests.unit.streams.scripted import RecordingSender, ScriptedHandler
from tests.unit.workers import test_indexer_poison as poison
from tests.unit.workers.test_indexer_poison import EMBEDDER, TOPIC

TEXT = "Refunds are paid within fourteen days by bank transfer."


def upsert(tenant: str, doc_id: str) -> bytes:
    return (
        f'{{"event_id": "e-{tenant}-{doc_id}", "tenant_id": "{tenant}", "doc_id": "{doc_id}",'
        f' "text": "{TEXT} ({tenant} {doc_id})"}}'
    ).encode()


class Rig(poison.Rig):
    """The poison tests' rig, fed records with their own keys (a tombstone has no value)."""

    async def feed_keyed(self, *records: tuple[bytes | None, bytes | None]) -> None:
        batch = []
        for value, key in records:
            batch.append(Received(value, key, TOPIC, 0, self.offset))
            self.offset += 1
        await self.router.process(batch)

    async def texts_of(self, tenant: str) -> list[str]:
        vector = (await EMBEDDER.embed(["refunds"]))[0]
        request = SearchRequest(tenant, "refunds", dense_vector=vector, mode="hybrid", limit=20)
        return sorted(h.text for h in await self.index.search("default", request))

    def count(self, result: str) -> float:
        labels = {"worker": "indexer", "result": result}
        return self.metrics.registry.get_sample_value("ragsift_events_total", labels) or 0.0


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    index = EdgeIndex(tmp_path / "edge")
    built = Rig(index)
    await built.feed_keyed(
        (upsert("acme", "faq"), b"acme/default/faq"),
        (upsert("acme", "terms"), b"acme/default/terms"),
        (upsert("zeta", "faq"), b"zeta/default/faq"),
    )
    yield built
    await index.close()


async def test_a_tombstone_deletes_the_document_its_key_names_and_no_other(rig: Rig) -> None:
    await rig.feed_keyed((None, b"acme/default/faq"))
    assert await rig.texts_of("acme") == [f"{TEXT} (acme terms)"]
    assert await rig.texts_of("zeta") == [f"{TEXT} (zeta faq)"]  # the same doc_id, another tenant
    assert rig.sender.dead_letters() == []
    # Read again (a replay), it is the same delete: nothing more happens, nothing fails.
    await rig.feed_keyed((None, b"acme/default/faq"))
    assert await rig.texts_of("acme") == [f"{TEXT} (acme terms)"]
    assert rig.sender.dead_letters() == []
    assert rig.count(TOMBSTONE_SKIPPED) == 0


@pytest.mark.parametrize(
    "key",
    [
        b"faq",  # keyed by doc_id alone, as the topic was: whose faq?
        None,
        b"",
        b"acme/default/f/aq",
        b"acme/no such collection!/faq",
        b"\xff\xfe/default/faq",
    ],
)
async def test_a_tombstone_whose_key_names_no_document_is_passed_over_and_counted(
    rig: Rig, key: bytes | None
) -> None:
    assert tombstone_delete(key) is None
    await rig.feed_keyed((None, key))
    assert await rig.texts_of("acme") == [f"{TEXT} (acme faq)", f"{TEXT} (acme terms)"]
    assert rig.sender.dead_letters() == []
    assert rig.count(TOMBSTONE_SKIPPED) == 1


async def test_the_log_line_of_a_passed_over_tombstone_is_bounded(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    # The key is the producer's: a 900 KB one was logged whole, on one line.
    with caplog.at_level(logging.WARNING):
        await rig.feed_keyed((None, b"acme/default/" + b"x" * 900_000))
    (line,) = [r.getMessage() for r in caplog.records if "tombstone" in r.getMessage()]
    assert len(line) < 200
    assert rig.count(TOMBSTONE_SKIPPED) == 1


async def test_a_tombstone_in_a_collection_that_does_not_exist_creates_none(rig: Rig) -> None:
    # The delete ensured the collection first: any tombstone could add one, and a query
    # to it then answered "no relevant context" instead of "unknown collection".
    await rig.feed_keyed((None, b"acme/nocoll/faq"))
    assert rig.sender.dead_letters() == []
    assert rig.count("ok") == 4  # the fixture's three upserts and this delete
    with pytest.raises(CollectionNotFoundError):
        await rig.index.collection_info("nocoll")


@pytest.mark.parametrize(
    "value",
    [
        b"not json at all",
        b'{"event_id": "e", "tenant_id": "acme"}',
        b"",
        upsert("acme", "faq")[:-1],
    ],
)
async def test_a_record_that_does_not_decode_withdraws_the_document_its_key_names(
    rig: Rig, value: bytes
) -> None:
    # A rebuild from the compacted topic finds this record as the key's last, refuses
    # it, and has no "faq"; the live index kept the version before, so a new replica
    # answered from another corpus than the old ones.
    await rig.feed_keyed((value, b"acme/default/faq"))
    (letter,) = rig.sender.dead_letters()
    assert letter.stage == "decode"
    assert await rig.texts_of("acme") == [f"{TEXT} (acme terms)"]
    assert await rig.texts_of("zeta") == [f"{TEXT} (zeta faq)"]  # same doc id, other tenant
    withdrawn = rig.metrics.registry.get_sample_value(
        "ragsift_documents_withdrawn_total", {"worker": "indexer"}
    )
    assert withdrawn == 1
    assert rig.count("ok") == 3  # the fixture's upserts: the withdrawal is not an event
    await rig.feed_keyed((upsert("acme", "faq"), b"acme/default/faq"))  # a valid version
    assert f"{TEXT} (acme faq)" in await rig.texts_of("acme")


async def test_a_record_keyed_by_doc_id_alone_withdraws_nothing(rig: Rig) -> None:
    await rig.feed_keyed((b"not json", b"faq"))  # whose faq? as such a tombstone
    assert len(rig.sender.dead_letters()) == 1
    assert await rig.texts_of("acme") == [f"{TEXT} (acme faq)", f"{TEXT} (acme terms)"]


async def test_a_null_value_elsewhere_is_still_a_broken_message() -> None:
    sender, metrics = RecordingSender(), Metrics()
    router = BatchRouter(ScriptedHandler(), sender, metrics=metrics, deadline_s=1)
    await router.process([Received(None, b"q-1", "ragsift.queries.v1", 0, 0)])
    (letter,) = sender.dead_letters()
    assert "empty message (null value)" in letter.error


@pytest.mark.parametrize(
    "key",
    [
        b"acme/default/terms",  # another document of the tenant: compaction replaced it
        b"zeta/default/news",  # another tenant's key over acme's body
        b"k",
        None,
        b"\xff\xfe/default/news",  # not UTF-8
        b"acme/default/" + b"n" * 100_000,  # oversized
        "acme/default/news\u202e".encode(),  # a control character past the right key
    ],
)
async def test_an_upsert_whose_key_names_another_document_is_dead_lettered(
    rig: Rig, key: bytes | None
) -> None:
    # It was applied: the live index had both documents while compaction kept only this
    # record under the other key, so a rebuild from the topic lost acme's "terms".
    await rig.feed_keyed((upsert("acme", "news"), key))
    texts = " ".join(await rig.texts_of("acme"))
    assert "(acme news)" not in texts
    # The document the key names is withdrawn (as in a rebuild, where this record is
    # the key's last); a key that names none withdraws nothing.
    assert ("(acme terms)" in texts) == (key != b"acme/default/terms")
    assert await rig.texts_of("zeta") == [f"{TEXT} (zeta faq)"]
    (letter,) = rig.sender.dead_letters()
    assert letter.stage == "validate"
    assert "is not its event's 'acme/default/news'" in letter.error
    # The right key is read. The doc_id alone (as the topic was keyed before it named
    # tenant and collection) is refused: acme's and globex's "old" shared that key, and
    # compaction kept one of them (helper-23).
    await rig.feed_keyed((upsert("acme", "news"), b"acme/default/news"))
    await rig.feed_keyed((upsert("acme", "old"), b"old"))
    texts = " ".join(await rig.texts_of("acme"))
    assert "(acme news)" in texts
    assert "(acme old)" not in texts
    _, refused = rig.sender.dead_letters()
    assert "names no tenant" in refused.error
    assert "ragsift submit" in refused.error
