"""A9 pinned: after known queries, each metric moved by exactly what those queries did."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import STATUS_CODES, Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.pipeline import PipelineOutput
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import ConfidenceSettings, Settings
from ragsift.wiring import build_pipeline

EMBEDDER = HashingEmbedder()
TENANT = "acme"


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    built = EdgeIndex(tmp_path / "edge")
    docs = [
        SourceDocument("a.md", "Refunds are paid within fourteen days by bank transfer."),
        SourceDocument("b.md", "Refunds for gift cards are paid as store credit."),
        SourceDocument("c.md", "Shipping takes three days within the country."),
    ]
    await Indexer(built, EMBEDDER).ingest(TENANT, "default", docs)
    yield built
    await built.close()


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_a9_metrics_move_by_what_the_queries_did(tmp_path: Path, index: EdgeIndex) -> None:
    settings = Settings(
        data_dir=tmp_path,
        cache={"enabled": False},  # every query is scored, none served from the cache
        confidence=ConfidenceSettings(
            scorer="weighted",
            similarity_threshold=0.3,  # refund documents pass, shipping does not
            min_results=0,
            high_threshold=0.30,
            medium_threshold=0.20,
            low_threshold=0.10,
        ),
    )
    metrics = Metrics()
    pipeline = build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=metrics)
    queries = [
        QueryEvent(query_id="q1", tenant_id=TENANT, query="How are refunds paid?"),
        QueryEvent(query_id="q2", tenant_id=TENANT, query="zzyzx qwxv"),  # matches nothing
    ]
    outs = await pipeline.process(queries)
    results: list[RetrievalResult] = []
    for out in outs:
        assert isinstance(out, PipelineOutput)
        results.append(out.result)
    found, nothing = results
    assert found.status != "no_relevant_context"
    assert nothing.status == "no_relevant_context"

    assert value(metrics, "ragsift_queries_total", tenant=TENANT, outcome="ok") == 2
    assert value(metrics, "ragsift_no_context_queries_total", tenant=TENANT) == 1
    drops = len(found.dropped) + len(nothing.dropped)
    assert drops > 0
    filtered = value(
        metrics, "ragsift_filtered_results_total", tenant=TENANT, rule="below_threshold"
    )
    assert filtered == drops
    for result in results:
        status = result.status
        count = value(metrics, "ragsift_confidence_count", tenant=TENANT, status=status)
        total = value(metrics, "ragsift_confidence_sum", tenant=TENANT, status=status)
        assert count == 1
        assert total == pytest.approx(result.confidence)
    # the gauge shows the tenant's latest result: the no-context one
    gauge = value(metrics, "ragsift_confidence_status", tenant=TENANT)
    assert gauge == STATUS_CODES["no_relevant_context"] == 0
