"""The streaming indexer logs, once per scope, that most of a collection's text is not
English; the documents are indexed all the same."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.ingest.language_watch import LanguageWatch
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.schemas.ingest import DocumentEvent
from ragsift.workers.indexer import IndexerHandler

pytestmark = pytest.mark.unit

FRENCH = "Le thermostat Orbit est garanti pendant deux ans à compter de la date d'achat. " * 40
ENGLISH = "The Orbit thermostat is covered for two years from the date of purchase. " * 40


def event(n: int, text: str, tenant: str = "acme", op: str = "upsert") -> DocumentEvent:
    body = {"text": text} if op == "upsert" else {}
    return DocumentEvent(event_id=f"e{n}", tenant_id=tenant, doc_id=f"d{n}", op=op, **body)


async def test_a_french_collection_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    index = EdgeIndex(tmp_path / "edge")
    handler = IndexerHandler(Indexer(index, HashingEmbedder(64)))
    handler.languages = LanguageWatch(min_chars=len(FRENCH) + 1)
    with caplog.at_level(logging.WARNING, logger="ragsift.workers.indexer"):
        outcomes = await handler.handle_batch([event(1, FRENCH)])  # too little to judge
        assert not caplog.records
        outcomes += await handler.handle_batch(
            [event(2, FRENCH), event(3, FRENCH), event(1, "", op="delete")]
        )
        outcomes += await handler.handle_batch([event(4, ENGLISH, tenant="globex")] * 3)
    assert outcomes == [[]] * 7  # every document indexed: a warning only
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1
    assert "tenant 'acme' into collection 'default' looks non-English (mostly French" in said[0]
    assert (await index.documents("default", "acme")).keys() == {"d2", "d3"}
    await index.close()


async def test_language_checks_off_logs_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    index = EdgeIndex(tmp_path / "edge")
    handler = IndexerHandler(Indexer(index, HashingEmbedder(64)), languages=False)
    with caplog.at_level(logging.WARNING, logger="ragsift.workers.indexer"):
        outcomes = await handler.handle_batch([event(n, FRENCH) for n in range(3)])
    assert outcomes == [[]] * 3
    assert not caplog.records
    assert (await index.documents("default", "acme")).keys() == {"d0", "d1", "d2"}
    await index.close()
