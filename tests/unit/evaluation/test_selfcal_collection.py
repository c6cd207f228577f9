"""`ragsift calibrate --collection`: a collection calibrates itself, through the VectorIndex
protocol only, and `ragsift eval --pseudo-queries` measures the result."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import CalibrationArtifact, ConfidenceError
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.confidence.signals import SIGNAL_INDEX
from ragsift.errors import InvalidEventError
from ragsift.evaluation.dataset import LabelledSet, with_pseudo_queries
from ragsift.evaluation.selfcal import (
    MIN_CHUNKS,
    score_pseudo_labels,
    search_as_pipeline,
    self_calibrate,
)
from ragsift.ingest.loaders import SourceDocument
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder

EMBEDDER = HashingEmbedder()
BASE = CalibrationArtifact(
    embedder_id=EMBEDDER.embedder_id,
    metric="cosine",
    features=("top_score", "agreement"),
    coefficients=(4.0, 4.0),
    intercept=-3.0,
    similarity_threshold=0.05,
    conformal=ConformalSpec(
        alpha=0.1, delta=0.1, threshold=0.5, feasible=True, method="test", n_calibration=0
    ),
    data=DataSummary(source="test", n_examples=0),
)


def documents(n: int) -> list[SourceDocument]:
    """``n`` documents with their own made-up vocabulary (each is easy to find again)."""
    rng = np.random.default_rng(7)
    syllables = ["ka", "lo", "mi", "ren", "tu", "vos", "zel", "pra", "dun", "fio", "gar", "hul"]
    out = []
    for i in range(n):
        words = ["".join(rng.choice(syllables, 3)) for _ in range(40)]
        sentences = [" ".join(words[j : j + 10]).capitalize() + "." for j in range(0, 40, 10)]
        out.append(SourceDocument(f"doc-{i}", " ".join(sentences)))
    return out


async def test_a_collection_calibrates_itself_and_records_where_it_came_from(
    index: EdgeIndex,
) -> None:
    stages: list[str] = []
    result = await self_calibrate(
        index,
        EMBEDDER,
        BASE,
        collection="docs",
        tenant="alpha",
        sample=160,
        progress=lambda stage, done, total: stages.append(stage),
    )
    artifact, prov = result.artifact, result.artifact.provenance
    assert prov is not None
    assert (prov.base_version, prov.collection, prov.tenant) == (BASE.version, "docs", "alpha")
    assert prov.chunks == result.chunks == 40
    assert prov.positives >= 40
    assert prov.negatives >= 200
    assert artifact.features == BASE.features
    assert artifact.similarity_threshold == BASE.similarity_threshold
    assert artifact.conformal.method.endswith("on pseudo-labels")
    assert {"sample", "score"} <= set(stages)
    # Held-out pseudo-queries name real documents of that tenant and are not in the fit.
    assert result.held_out
    assert all(q.tenant_id == "alpha" for q in result.held_out)
    assert {q.doc_id for q in result.held_out} <= {f"doc-{i}" for i in range(40)}


async def test_pseudo_labels_read_term_coverage_from_the_query_texts(index: EdgeIndex) -> None:
    """Self-calibration scores its questions as the pipeline would: with the query
    texts, term coverage is read (a base that uses it must not see it imputed)."""
    texts = ["Kalomi renvos zeltu", "Who painted the red portrait?"]
    hits = await search_as_pipeline(index, EMBEDDER, "docs", [("alpha", t, None) for t in texts], 8)
    column = SIGNAL_INDEX["term_coverage"]
    read, _ = score_pseudo_labels(BASE, hits, [], queries=texts)
    imputed, _ = score_pseudo_labels(BASE, hits, [])
    assert np.isfinite(read[:, column]).all()
    assert np.isnan(imputed[:, column]).all()
    np.testing.assert_array_equal(np.delete(read, column, 1), np.delete(imputed, column, 1))


async def test_a_tiny_collection_is_refused_with_the_number_of_chunks_needed(
    index: EdgeIndex,
) -> None:
    with pytest.raises(InvalidEventError, match=f"has 3 chunks.*at least {MIN_CHUNKS}"):
        await self_calibrate(index, EMBEDDER, BASE, collection="docs", tenant="beta")
    with pytest.raises(InvalidEventError, match="has 0 chunks"):
        await self_calibrate(index, EMBEDDER, BASE, collection="docs", tenant="nobody")


async def test_a_base_without_a_fitted_hit_threshold_is_refused(index: EdgeIndex) -> None:
    bare = BASE.model_copy(update={"similarity_threshold": None})
    with pytest.raises(ConfidenceError, match="no fitted hit threshold"):
        await self_calibrate(index, EMBEDDER, bare, collection="docs", tenant="alpha")


def test_pseudo_queries_replace_the_in_scope_questions(tmp_path: Path) -> None:
    from ragsift.evaluation.dataset import EvalQuery

    base = LabelledSet(
        "set",
        documents(2),
        [
            EvalQuery("a", "real question", "in_scope", frozenset({"doc-0"}), "g"),
            EvalQuery("b", "elsewhere", "out_of_scope", frozenset(), "oos:x"),
        ],
    )
    path = tmp_path / "held.jsonl"
    path.write_text(json.dumps({"text": "made up", "doc_id": "extra"}) + "\n\n")
    merged = with_pseudo_queries(base, path, [SourceDocument("extra", "An extra document.")])
    assert [(q.text, q.kind) for q in merged.queries] == [
        ("made up", "in_scope"),
        ("elsewhere", "out_of_scope"),
    ]
    assert len(merged.documents) == 3

    for bad, message in [
        ("not json\n", "not JSON"),
        (json.dumps({"text": 1, "doc_id": "doc-0"}) + "\n", "needs string"),
        (json.dumps({"text": "q", "doc_id": "someone-elses"}) + "\n", "not in the corpus"),
        ("", "no pseudo-queries"),
    ]:
        path.write_text(bad)
        with pytest.raises(InvalidEventError, match=message):
            with_pseudo_queries(base, path)


def test_cli_calibrate_collection_explains_an_empty_collection(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["calibrate", "--collection", "missing", "--data-dir", str(tmp_path)],
        env={"RAGSIFT_EMBEDDER_KIND": "hashing"},
    )
    assert result.exit_code == 2
    assert "missing" in result.output
    help_text = runner.invoke(app, ["calibrate", "--help"]).output
    assert "--collection" in help_text
    assert "without labels" in help_text


def test_the_out_of_scope_share_can_be_set() -> None:
    from ragsift.evaluation.dataset import EvalQuery, limit_out_of_scope

    queries = [EvalQuery("in", "q", "in_scope", frozenset({"doc-0"}), "g")] + [
        EvalQuery(f"o{i}", "q", "out_of_scope", frozenset(), f"oos:{i}") for i in range(10)
    ]
    base = LabelledSet("set", documents(1), queries)
    limited = limit_out_of_scope(base, 3)
    assert [q.kind for q in limited.queries].count("out_of_scope") == 3
    assert limited.queries[0].query_id == "in"
    assert limit_out_of_scope(base, 3).queries == limited.queries  # seeded: reproducible
    assert limit_out_of_scope(base, 50) is base
    with pytest.raises(InvalidEventError, match=">= 0"):
        limit_out_of_scope(base, -1)


def test_the_in_scope_share_can_be_set_too() -> None:
    """`eval --max-in-scope`: a stream that is mostly unanswerable, from a balanced set."""
    from ragsift.evaluation.dataset import EvalQuery, limit_questions

    queries = [
        EvalQuery(f"i{i}", "q", "in_scope", frozenset({"doc-0"}), "g") for i in range(10)
    ] + [EvalQuery("out", "q", "out_of_scope", frozenset(), "oos")]
    base = LabelledSet("set", documents(1), queries)
    limited = limit_questions(base, "in_scope", 2)
    assert [q.kind for q in limited.queries] == ["in_scope", "in_scope", "out_of_scope"]
    with pytest.raises(InvalidEventError, match="in-scope limit must be >= 0"):
        limit_questions(base, "in_scope", -1)


async def test_a_long_probe_search_stops_at_the_next_batch_when_cancelled() -> None:
    # Qdrant Edge searches in the calling thread and cached probe vectors need no await:
    # Ctrl-C (a cancellation) waited for the last of 28 batches, 16 s on 20,000 chunks.
    import asyncio

    from ragsift.evaluation.selfcal import search_as_pipeline

    searched: list[int] = []

    class Index:
        async def search_batch(self, collection: str, requests: list[object]) -> list[list[object]]:
            searched.append(len(requests))  # no await inside: as Qdrant Edge's
            return [[] for _ in requests]

    class Keyword:  # keyword mode embeds nothing: no await there either
        embedder_id = "none"

    items = [("t", f"question {i}", None) for i in range(3_480)]
    task = asyncio.ensure_future(
        search_as_pipeline(Index(), Keyword(), "docs", items, 8, mode="keyword")  # type: ignore[arg-type]
    )
    await asyncio.sleep(0)  # the task runs its first batch
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 1 <= len(searched) < 3  # it stopped after a batch or two, not all 28
