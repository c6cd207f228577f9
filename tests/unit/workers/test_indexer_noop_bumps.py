"""A document event that changes nothing indexed leaves the tenant's index version alone.

Before: a delete of a document the tenant does not have (a tombstone redelivered after
a rebalance, a replay of the compacted topic, anyone able to write the documents topic)
bumped the version every time, and so emptied the tenant's result cache each time. A
bump is still never skipped where a change may not have been followed by one: a write
left unbumped by an indexer that died leaves its pending mark, and the next indexer's
no-op in the scope bumps (test_indexer_pending_marks.py).
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from ragsift.errors import InvalidEventError
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.schemas import DocumentEvent

TEXT = "Refunds are paid within fourteen days by bank transfer."
SCOPE = ("acme", "default")


def event(doc_id: str, op: str = "upsert", tenant: str = "acme", **fields: object) -> DocumentEvent:
    body: dict[str, object] = {"event_id": f"e-{doc_id}", "tenant_id": tenant, "doc_id": doc_id}
    body["op"] = op
    if op == "upsert":
        body["text"] = TEXT
    return DocumentEvent.model_validate({**body, **fields})


def indexer_on(index: EdgeIndex, cache: InMemoryCache, metrics: Metrics) -> Indexer:
    """One indexer (one process's) on ``index`` and ``cache``."""
    return Indexer(index, HashingEmbedder(64), cache=cache, metrics=metrics)


def skipped(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "ragsift_index_version_bumps_skipped_total", {"reason": reason}
    )
    return value or 0.0


async def test_a_delete_of_a_document_not_indexed_bumps_nothing(index: EdgeIndex) -> None:
    cache, metrics = InMemoryCache(), Metrics(CollectorRegistry())
    indexer = indexer_on(index, cache, metrics)
    await indexer.apply(event("gdpr"))
    assert await cache.index_version(*SCOPE) == 1
    for n in range(5):  # tombstones of documents the tenant never had, or had deleted
        report = await indexer.apply(event(f"never-{n}", op="delete"))
        assert report.deleted_documents == 0
        assert report.index_version is None
    assert await cache.index_version(*SCOPE) == 1  # its cached results stand
    assert skipped(metrics, "absent") == 5
    removed = await indexer.apply(event("gdpr", op="delete"))
    assert removed.deleted_documents == 1
    assert await cache.index_version(*SCOPE) == 2  # a delete that removed chunks bumps
    assert (await indexer.apply(event("gdpr", op="delete"))).index_version is None  # redelivered
    assert await cache.index_version(*SCOPE) == 2
    assert skipped(metrics, "absent") == 6


async def test_a_redelivered_upsert_bumps_nothing_and_is_counted(index: EdgeIndex) -> None:
    cache, metrics = InMemoryCache(), Metrics(CollectorRegistry())
    indexer = indexer_on(index, cache, metrics)
    await indexer.apply(event("gdpr"))
    for _ in range(3):
        assert (await indexer.apply(event("gdpr"))).unchanged == 1
    assert await cache.index_version(*SCOPE) == 1
    assert skipped(metrics, "unchanged") == 3
    await indexer.apply(event("gdpr", text=TEXT + " Or by cheque."))  # changed: bumps
    assert await cache.index_version(*SCOPE) == 2


async def test_a_delete_cut_off_before_its_bump_is_bumped_by_the_next_indexer(
    index: EdgeIndex,
) -> None:
    # An indexer removed the document, then died before bumping: its redelivery finds
    # nothing to remove, but the results cached before the delete still cite it.
    cache, metrics = InMemoryCache(), Metrics(CollectorRegistry())
    crashed = indexer_on(index, cache, metrics)
    await crashed.apply(event("gdpr"))
    await crashed.settle()  # its batch done: bumped, its mark cleared
    await crashed.versions.prepare([SCOPE])  # its next batch, marked first
    assert await index.delete("default", "acme", "gdpr") == 1  # its delete, then it died
    after_crash = indexer_on(index, cache, metrics)
    await after_crash.apply(event("gdpr", op="delete"))
    assert await cache.index_version(*SCOPE) == 2


async def test_another_tenants_document_id_is_not_a_change_of_this_tenant(
    index: EdgeIndex,
) -> None:
    cache, metrics = InMemoryCache(), Metrics(CollectorRegistry())
    indexer = indexer_on(index, cache, metrics)
    await indexer.apply(event("gdpr"))
    await indexer.apply(event("other", tenant="bravo"))
    versions = await cache.index_versions([SCOPE, ("bravo", "default")])
    # bravo deletes acme's id: nothing of bravo's goes, nothing of acme's either, and
    # neither version moves.
    report = await indexer.apply(event("gdpr", op="delete", tenant="bravo"))
    assert report.deleted_documents == 0
    # Ids the contract refuses (control and non-Latin characters, oversized) remove
    # nothing at the index either, and count nothing.
    for doc_id in ("gdpr\u202e\x07", "文書-" + "x" * 100_000):
        assert await index.delete("default", "bravo", doc_id) == 0
    assert await cache.index_versions([SCOPE, ("bravo", "default")]) == versions
    assert set(await index.documents("default", "acme")) == {"gdpr"}
    assert set(await index.documents("default", "bravo")) == {"other"}


async def test_an_invalid_event_withdraws_and_bumps_only_what_was_indexed(
    index: EdgeIndex,
) -> None:
    cache, metrics = InMemoryCache(), Metrics(CollectorRegistry())
    indexer = indexer_on(index, cache, metrics)
    await indexer.apply(event("gdpr"))
    # A document nothing of can be stored (a lone surrogate: the contract refuses it at
    # decode, an older producer's record in the compacted topic may still hold one).
    bad = DocumentEvent.model_construct(**{**event("never").model_dump(), "text": "a\ud800"})
    for _ in range(2):  # still refused, and nothing of it was indexed to withdraw
        with pytest.raises(InvalidEventError, match="withdrawn"):
            await indexer.apply(bad)
    assert await cache.index_version(*SCOPE) == 1
    assert skipped(metrics, "absent") == 2


async def test_ingest_and_prune_bump_only_what_they_changed(index: EdgeIndex) -> None:
    # `ragsift ingest` prints what it indexed and what was unchanged: its bump agrees.
    cache, metrics = InMemoryCache(), Metrics(CollectorRegistry())
    indexer = indexer_on(index, cache, metrics)
    doc = SourceDocument("gdpr", TEXT)
    assert (await indexer.ingest("acme", "default", [doc])).index_version == 1
    again = await indexer.ingest("acme", "default", [doc])
    assert (again.documents, again.unchanged, again.index_version) == (0, 1, None)
    pruned = await indexer.remove("acme", "default", ["never", "gone"])
    assert (pruned.deleted_documents, pruned.index_version) == (0, None)
    assert await cache.index_version(*SCOPE) == 1
    assert skipped(metrics, "unchanged") == skipped(metrics, "absent") == 1
    pruned = await indexer.remove("acme", "default", ["gdpr", "never"])
    assert (pruned.deleted_documents, pruned.index_version) == (1, 2)
