"""The reader in the pipeline: its scores reach the calibrated scorer's signals, the
setting picks the artifact, and a failing reader never fails a query."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pytest

from ragsift.confidence import CalibrationArtifact, save_calibration
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.errors import ConfigurationError
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder, OnnxMiniLMEmbedder
from ragsift.retrieval.engines import READER_SUFFIX, EngineSet, packaged_calibration_path
from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.pipeline import PipelineOutput
from ragsift.schemas import QueryEvent
from ragsift.settings import ConfidenceSettings, Settings
from ragsift.wiring import build_pipeline

EMBEDDER = HashingEmbedder()
DOCS = {
    "refunds.md": "Refunds are paid within fourteen days. They go back by bank transfer.",
    "shipping.md": "Shipping takes three days. Returns are free for damaged goods.",
}
READER_FEATURES = ("top_score", "sentence_match", "term_coverage")


class SentenceFailingEmbedder(HashingEmbedder):
    """Embeds queries, but its backend fails on the reader's sentence batch."""

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if any(t.endswith(".") for t in texts):  # sentences end with a period; queries do not
            raise ConnectionError("embedding backend down")
        return await super().embed(texts)


def artifact_file(
    tmp_path: Path, features: tuple[str, ...], embedder_id: str = EMBEDDER.embedder_id
) -> Path:
    artifact = CalibrationArtifact(
        embedder_id=embedder_id,
        metric="cosine",
        features=features,
        coefficients=tuple(1.0 for _ in features),
        intercept=-1.0,
        similarity_threshold=0.01,  # hashing cosines are small: keep every hit
        conformal=ConformalSpec(
            alpha=0.1, delta=0.1, threshold=0.3, feasible=True, method="test", n_calibration=0
        ),
        data=DataSummary(source="test", n_examples=0),
    )
    return save_calibration(artifact, tmp_path / f"{'-'.join(features)}.json")


def settings(tmp_path: Path, path: Path, reader: Literal["on", "off"]) -> Settings:
    return Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(calibration_path=path, reader_signals=reader, reader_top_n=2),
    )


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    built = EdgeIndex(tmp_path / "edge")
    await Indexer(built, EMBEDDER).ingest(
        "alpha", "default", [SourceDocument(name, text) for name, text in DOCS.items()]
    )
    yield built
    await built.close()


def q(query_id: str = "q1", text: str = "How are refunds paid", **extra: Any) -> QueryEvent:
    return QueryEvent(query_id=query_id, tenant_id="alpha", query=text, **extra)


def ok(output: PipelineOutput | Exception) -> PipelineOutput:
    assert isinstance(output, PipelineOutput), output
    return output


async def test_reader_scores_reach_the_calibrated_signals(tmp_path: Path, index: EdgeIndex) -> None:
    metrics = Metrics()
    pipe = build_pipeline(
        settings(tmp_path, artifact_file(tmp_path, READER_FEATURES), "on"),
        index=index,
        embedder=EMBEDDER,
        metrics=metrics,
    )
    assert pipe.reader is not None
    assert pipe.reader.top_n == 2
    result = ok((await pipe.process([q(), q("q2", "refunds bank transfer")]))[0]).result
    assert result.outcome == "ok"
    signals = result.breakdown.signals
    assert 0.0 < signals["sentence_match"] <= 1.0
    assert 0.0 < signals["term_coverage"] <= 1.0
    read = metrics.registry.get_sample_value(
        "ragsift_stage_duration_seconds_count", {"stage": "read"}
    )
    assert read == 1  # one read for the batch of two queries


async def test_an_artifact_without_reader_features_reads_nothing(
    tmp_path: Path, index: EdgeIndex
) -> None:
    path = artifact_file(tmp_path, ("top_score", "support"))
    pipe = build_pipeline(
        settings(tmp_path, path, "on"), index=index, embedder=EMBEDDER, metrics=Metrics()
    )
    assert pipe.reader is None
    result = ok((await pipe.process([q()]))[0]).result
    assert "sentence_match" not in result.breakdown.signals


async def test_a_failing_reader_leaves_the_query_scored_and_counted(
    tmp_path: Path, index: EdgeIndex
) -> None:
    metrics = Metrics()
    pipe = build_pipeline(
        settings(tmp_path, artifact_file(tmp_path, READER_FEATURES), "on"),
        index=index,
        embedder=SentenceFailingEmbedder(),
        metrics=metrics,
    )
    result = ok((await pipe.process([q()]))[0]).result
    assert result.outcome == "ok"
    assert "sentence_match" not in result.breakdown.signals  # imputed, not reported
    errors = metrics.registry.get_sample_value("ragsift_retrieval_errors_total", {"stage": "read"})
    assert errors == 1


async def test_term_coverage_is_read_with_the_switch_off(tmp_path: Path, index: EdgeIndex) -> None:
    """An artifact that uses term coverage is read whatever the switch says; only
    sentence match waits for "on" (ADR 020). The chunks' term sets come from the
    index, stored at ingest: no chunk is tokenized at query time."""
    path = artifact_file(tmp_path, ("top_score", "term_coverage"))
    pipe = build_pipeline(
        settings(tmp_path, path, "off"), index=index, embedder=EMBEDDER, metrics=Metrics()
    )
    assert pipe.reader is not None
    assert (pipe.reader.sentences, pipe.reader.encoder is not None) == (False, True)
    first = ok((await pipe.process([q()]))[0]).result.breakdown.signals
    assert 0.0 < first["term_coverage"] <= 1.0
    assert "sentence_match" not in first
    assert len(pipe.reader._terms) == 0


async def test_chunks_indexed_without_term_ids_are_tokenized_once_to_the_same_coverage(
    tmp_path: Path, index: EdgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Points written before the term ids were stored: the reader tokenizes their text
    (cached for the next query) and reads the same coverage."""
    path = artifact_file(tmp_path, ("top_score", "term_coverage"))

    def pipeline() -> Any:
        return build_pipeline(
            settings(tmp_path, path, "off"), index=index, embedder=EMBEDDER, metrics=Metrics()
        )

    stored = ok((await pipeline().process([q()]))[0]).result.breakdown.signals
    monkeypatch.setattr(SearchHit, "indexed_terms", lambda self: None)
    pipe = pipeline()
    tokenized = ok((await pipe.process([q()]))[0]).result.breakdown.signals
    assert tokenized["term_coverage"] == stored["term_coverage"]
    cached = len(pipe.reader._terms)
    assert cached > 0
    ok((await pipe.process([q("q2", "refunds by bank transfer")]))[0])
    assert len(pipe.reader._terms) == cached  # the same two chunks: nothing new to read


def test_reader_artifact_with_reader_off_is_refused_at_start(tmp_path: Path) -> None:
    for features in (READER_FEATURES, ("top_score", "term_coverage", "token_match")):
        path = artifact_file(tmp_path, features)
        with pytest.raises(ConfigurationError, match="RAGSIFT_CONFIDENCE_READER_SIGNALS=on"):
            EngineSet(settings(tmp_path, path, "off").confidence, EMBEDDER.embedder_id)


def test_packaged_artifact_is_picked_by_embedder_and_signal_set() -> None:
    onnx = "onnx-all-MiniLM-L6-v2-int8-384"
    plain = packaged_calibration_path(onnx)
    with_reader = packaged_calibration_path(onnx, reader=True)
    assert plain is not None
    assert plain.name == f"{onnx}.json"
    assert with_reader is not None
    assert with_reader.name == f"{onnx}{READER_SUFFIX}.json"
    # No reader artifact for the hashing embedder: the plain one serves.
    hashing = packaged_calibration_path(EMBEDDER.embedder_id, reader=True)
    assert hashing is not None
    assert hashing.name == f"{EMBEDDER.embedder_id}.json"
    engines = EngineSet(ConfidenceSettings(reader_signals="on"), onnx)
    assert engines.reader_features == {"sentence_match", "term_coverage", "token_match"}
    # Off, the plain artifact reads term coverage only (ADR 020): no sentences embedded.
    assert EngineSet(ConfidenceSettings(), onnx).reader_features == {"term_coverage"}


async def test_keyword_queries_are_not_read(tmp_path: Path, index: EdgeIndex) -> None:
    metrics = Metrics()
    pipe = build_pipeline(
        settings(tmp_path, artifact_file(tmp_path, READER_FEATURES), "on"),
        index=index,
        embedder=EMBEDDER,
        metrics=metrics,
    )
    result = ok((await pipe.process([q(mode="keyword")]))[0]).result
    assert result.outcome == "ok"
    assert result.breakdown.scorer == "weighted"
    read = metrics.registry.get_sample_value(
        "ragsift_stage_duration_seconds_count", {"stage": "read"}
    )
    assert read is None  # the weighted scorer uses no reader signal: nothing was read


TOKEN_FEATURES = ("top_score", "term_coverage", "token_match")


def test_token_match_with_an_embedder_without_token_states_is_refused_at_start(
    tmp_path: Path, index: EdgeIndex
) -> None:
    path = artifact_file(tmp_path, TOKEN_FEATURES)
    with pytest.raises(ConfigurationError, match=r"uses token match.*RAGSIFT_EMBEDDER_KIND=onnx"):
        build_pipeline(
            settings(tmp_path, path, "on"), index=index, embedder=EMBEDDER, metrics=Metrics()
        )


async def test_token_match_reaches_the_calibrated_signals_with_onnx(tmp_path: Path) -> None:
    onnx = OnnxMiniLMEmbedder(threads=1)
    built = EdgeIndex(tmp_path / "onnx-edge")
    try:
        await Indexer(built, onnx).ingest(
            "alpha", "default", [SourceDocument(name, text) for name, text in DOCS.items()]
        )
        path = artifact_file(tmp_path, TOKEN_FEATURES, onnx.embedder_id)
        pipe = build_pipeline(
            settings(tmp_path, path, "on"), index=built, embedder=onnx, metrics=Metrics()
        )
        assert pipe.reader is not None
        assert pipe.reader.tokens
        assert not pipe.reader.sentences
        refunds, shipping = (
            ok(out).result
            for out in await pipe.process(
                [q("q1", "How are refunds paid"), q("q2", "How long does shipping take")]
            )
        )
        for result in (refunds, shipping):
            assert 0.0 < result.breakdown.signals["token_match"] <= 1.0
        assert refunds.breakdown.signals["token_match"] > 0.5  # "refunds" and "paid" are there
        assert set(pipe.reader._token_cache) <= set(DOCS.values())  # top hits kept, not queries
    finally:
        await built.close()
