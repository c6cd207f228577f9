"""The first-hit line of ``ragsift eval``: which order puts the relevant hit first.

Hit lists are written here, so each order's share is known before it is measured;
the CLI test runs the real packaged cross-encoder on a BEIR folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.evaluation.dataset import EvalQuery, LabelledSet
from ragsift.evaluation.first_hit import RerankFailedError, first_hits
from ragsift.evaluation.runner import RetrievalRun
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.rerank.packaged import PACKAGED_RERANKER_ID
from tests.unit.evaluation.test_beir_eval import write_beir


def _hit(doc: str, rank: int, dense: float | None, text: str = "") -> SearchHit:
    return SearchHit(
        chunk_id=f"{doc}:0",
        doc_id=doc,
        tenant_id="eval",
        text=text or doc,
        source=doc,
        source_type="text",
        score=1.0 / rank,
        rank=rank,
        dense_score=dense,
    )


def _query(qid: str, kind: str, relevant: str | None) -> EvalQuery:
    rel = frozenset({relevant}) if relevant else frozenset()
    return EvalQuery(qid, f"question {qid}", kind, rel, qid)  # type: ignore[arg-type]


def _run(mode: str = "hybrid") -> RetrievalRun:
    # q1: relevant first in every order; q2: first by cosine only (RRF put it second);
    # q3: first in no order but the reranker's ("answer" in its text); q4: no hits;
    # q5: a near miss, never counted.
    queries = [
        _query("q1", "in_scope", "a"),
        _query("q2", "in_scope", "b"),
        _query("q3", "in_scope", "c"),
        _query("q4", "in_scope", "d"),
        _query("q5", "near_miss", None),
    ]
    hits = [
        [_hit("a", 1, 0.9, "the answer"), _hit("x", 2, 0.5)],
        [_hit("y", 1, None), _hit("b", 2, 0.7), _hit("z", 3, 0.6, "answer here")],
        [_hit("w", 1, 0.8), _hit("v", 2, 0.6), _hit("c", 3, 0.4, "an answer")],
        [],
        [_hit("a", 1, 0.9)],
    ]
    data = LabelledSet("synthetic", [], queries)
    return RetrievalRun(data, "test-embedder", 8, mode, hits)


class _ByWord:
    """Scores a passage 1 when it says "answer", else 0."""

    reranker_id = "test:by-word"

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.asked: list[int] = []

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        raise NotImplementedError

    async def rerank_many(
        self, queries: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | Exception]:
        self.asked.extend(len(texts) for _, texts in queries)
        return [
            RuntimeError("down")
            if query == self.fail_on
            else [1.0 if "answer" in t else 0.0 for t in texts]
            for query, texts in queries
        ]

    async def close(self) -> None:
        return None


ALL = np.ones(5, dtype=bool)


async def test_each_order_counts_the_in_scope_questions_it_puts_right_first() -> None:
    reranker = _ByWord()
    got = await first_hits(_run(), ALL, reranker, candidates=20)
    assert got["in_scope"] == 4  # the near miss is not counted; q4 (no hits) is, as a miss
    assert got["retriever"] == 0.25  # q1
    assert got["dense"] == 0.5  # q1, q2 (y has no cosine: last)
    assert got["reranked"] == 0.5  # q1, q3; q2's "answer" is z, not b
    assert got["reranker_id"] == "test:by-word"
    assert reranker.asked == [2, 3, 3, 0]  # every in-scope question's hits, none of q5's


async def test_the_reranker_reads_only_its_window_and_the_evaluated_questions() -> None:
    reranker = _ByWord()
    evaluated = np.array([True, True, True, False, True])
    got = await first_hits(_run(), evaluated, reranker, candidates=2)
    assert got["in_scope"] == 3
    assert reranker.asked == [2, 2, 2]
    assert got["reranked_window"] == 2
    assert got["reranked"] == pytest.approx(1 / 3, abs=1e-4)  # q3: "answer" is past the window


async def test_one_channel_runs_have_no_cosine_order_and_no_reranker_no_reranked() -> None:
    got = await first_hits(_run("dense"), ALL)
    assert got["dense"] is None
    assert got["retriever"] == 0.25
    assert "reranked" not in got


async def test_a_reranker_failure_is_an_error_not_a_figure() -> None:
    with pytest.raises(RerankFailedError, match="q2: down"):
        await first_hits(_run(), ALL, _ByWord(fail_on="question q2"))


def test_eval_prints_the_packaged_cross_encoders_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_beir(tmp_path / "mini")
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")
    artifact = str(packaged_calibration_path("ragsift-hashing-v1-384"))
    args = ["eval", "--dataset", str(folder), "--artifact", artifact, "--probes", "none"]
    runner = CliRunner()
    plain = runner.invoke(app, [*args, "--json"])
    assert plain.exit_code == 0, plain.output
    first = json.loads(plain.stdout.strip().splitlines()[-1])["first_hit"]
    assert first["in_scope"] == 3
    assert "reranked" not in first
    monkeypatch.setenv("RAGSIFT_RERANKER_KIND", "onnx")
    shown = runner.invoke(app, args)
    assert shown.exit_code == 0, shown.output
    words = " ".join(shown.stdout.split())
    assert f"reranked by {PACKAGED_RERANKER_ID} over the first 8 hits 1.000" in words
    assert "scored without the reranker" in words
    monkeypatch.setenv("RAGSIFT_RERANKER_MODEL_DIR", str(tmp_path / "absent"))
    broken = runner.invoke(app, args)
    assert broken.exit_code == 2
    assert "reranker:" in broken.output
    assert "does not exist" in broken.output
    assert "documents," not in broken.output  # refused before the set was searched
