"""E3: adaptive selection runs in the dense step of a hybrid search, before fusion;
fusion itself is unchanged (seed E)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import (
    DenseCut,
    RawPoint,
    SearchHit,
    SearchRequest,
    cut_dense,
    plan_search,
    rank_answers,
    rrf_fuse,
)
from ragsift.retrieval.pipeline import PipelineOutput
from ragsift.schemas import QueryEvent
from ragsift.settings import Settings
from ragsift.wiring import build_pipeline
from tests.factories import low_bar_confidence

EMBEDDER = HashingEmbedder()
# seed E's general strategy: threshold 0.7, 1 to 5 hits, floor 0.2
GENERAL = DenseCut(floor=0.2, threshold=0.7, min_k=1, max_k=5)


def points(*scores: float) -> list[RawPoint]:
    return [RawPoint(f"p{i}", s) for i, s in enumerate(scores)]


def ids(found: Sequence[RawPoint]) -> list[str]:
    return [str(p.id) for p in found]


def test_the_cut_stops_at_the_threshold_the_floor_or_max_k() -> None:
    # mean 0.9 >= 0.7 after one hit (min_k 1): stop with one
    assert ids(cut_dense(points(0.9, 0.85, 0.3), GENERAL)) == ["p0"]
    # means 0.6, 0.55, 0.5333: never 0.7; the 0.1 hit is under the floor
    assert ids(cut_dense(points(0.6, 0.5, 0.5, 0.1), GENERAL)) == ["p0", "p1", "p2"]
    # min_k 2 keeps a second hit even though the first reached the threshold
    two = DenseCut(floor=0.2, threshold=0.7, min_k=2, max_k=8)
    assert ids(cut_dense(points(0.9, 0.8, 0.3), two)) == ["p0", "p1"]
    # max_k
    assert len(cut_dense(points(*[0.5] * 9), GENERAL)) == 5
    assert cut_dense(points(0.1, 0.05), GENERAL) == []


def test_bad_cuts_are_refused() -> None:
    with pytest.raises(ValueError, match="min_k <= max_k"):
        DenseCut(floor=0.2, threshold=0.7, min_k=3, max_k=2)
    with pytest.raises(ValueError, match="threshold"):
        DenseCut(floor=0.2, threshold=1.5, min_k=1, max_k=2)


@pytest.mark.parametrize("fusion", ["client", "qdrant"])
def test_fusion_sees_only_the_dense_hits_the_cut_kept(fusion: Any) -> None:
    request = SearchRequest(
        tenant_id="acme", query="q", dense_vector=[1.0, 0.0], limit=5, dense_cut=GENERAL
    )
    plan = plan_search(request, dim=2, sparse=None, hybrid_fusion=fusion)
    assert plan.fetch_payload  # the cut needs client fusion, whatever the index prefers
    assert [q.kind for q in plan.queries] == ["dense"]
    dense = points(0.9, 0.85, 0.3)
    ranked = rank_answers(plan, [dense])
    # the same RRF as without a cut, over the dense hits the cut kept
    assert ranked.winners == rrf_fuse([dense[:1]])


def test_without_a_cut_fusion_sees_every_dense_candidate() -> None:
    request = SearchRequest(tenant_id="acme", query="q", dense_vector=[1.0, 0.0], limit=5)
    plan = plan_search(request, dim=2, sparse=None)
    assert len(rank_answers(plan, [points(0.9, 0.85, 0.3)]).winners) == 3


# -- in the pipeline ---------------------------------------------------------------------------


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    built = EdgeIndex(tmp_path / "edge")
    docs = [
        SourceDocument(f"d{i}.md", f"Refund rule {i}: refunds take {i} days.") for i in range(6)
    ]
    await Indexer(built, EMBEDDER).ingest("acme", "default", docs)
    yield built
    await built.close()


async def test_adaptive_hybrid_queries_cut_their_dense_step_by_their_task(
    tmp_path: Path, index: EdgeIndex
) -> None:
    sent: list[SearchRequest] = []
    real = index.search_batch

    async def recording(
        collection: str, requests: Sequence[SearchRequest]
    ) -> list[list[SearchHit]]:
        sent.extend(requests)
        return list(await real(collection, requests))

    index.search_batch = recording  # type: ignore[method-assign]  # see what the pipeline asks
    settings = Settings(data_dir=tmp_path, confidence=low_bar_confidence())
    pipeline = build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=Metrics())
    queries = [
        QueryEvent(query_id="a", tenant_id="acme", query="refund days", task_type="debugging"),
        QueryEvent(query_id="b", tenant_id="acme", query="refund rule", selection="adaptive"),
        QueryEvent(query_id="c", tenant_id="acme", query="refund take"),  # threshold
        QueryEvent(
            query_id="d", tenant_id="acme", query="refunds", selection="adaptive", mode="dense"
        ),
    ]
    outs = await pipeline.process(queries)
    assert all(isinstance(o, PipelineOutput) for o in outs)
    cuts = {r.query: r.dense_cut for r in sent}
    # debugging: seed E's 0.6, 2..8; general: 0.7, 1..5; floor 0.2 for both
    assert cuts["refund days"] == DenseCut(floor=0.2, threshold=0.6, min_k=2, max_k=8)
    assert cuts["refund rule"] == GENERAL
    assert cuts["refund take"] is None  # not adaptive
    assert cuts["refunds"] is None  # dense mode: E1 selects from the dense hits themselves
    first = outs[1]
    assert isinstance(first, PipelineOutput)
    # every hit of the fused list came through the cut dense step or from BM25
    for hit in first.result.hits:
        assert hit.raw_scores.get("bm25") is not None or (hit.raw_scores.get("dense") or 0) >= 0.2
