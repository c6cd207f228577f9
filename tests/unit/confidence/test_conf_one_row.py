"""The one scoring path on a one-query batch: the same bits as in any batch, and cheap.

Issue #17: ``assess`` is ``assess_batch`` on one row, so its cost is numpy's per-call
overhead. The fixes keep one arithmetic path; these tests pin that a row scores the
same alone and padded into a batch (a one-query batch now skips the no-op padding
masks), and that the one-row path calls none of numpy's Python-level wrappers that
cost more than the work they do on a few hits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ragsift.confidence import ConfidenceConfig, ConfidenceEngine, HitScores

SCORERS = ("weighted", "mean-kept", "composite", "calibrated")
SELECTIONS = ("threshold", "adaptive", "top_k")
SEED = 17
QUERIES = 24
MAX_HITS = 20
SOURCE_TYPES = ("government", "regulatory", "blog", "not-in-the-table")


def _mixed_hits(rng: np.random.Generator, *, rerank: bool) -> HitScores:
    """One query's hits: 0-20 hybrid hits, ties, -0.0, metadata and reader scores."""
    n = int(rng.integers(0, MAX_HITS + 1))
    # Rounding makes ties and, from small negatives, -0.0 cosines.
    dense = rng.uniform(-1.0, 1.0, n).round(int(rng.integers(1, 4)))
    fields: dict[str, Any] = {
        "dense": dense,
        "sparse": rng.uniform(0.0, 40.0, n),
        "fused": rng.uniform(0.0, 0.033, n),
        "doc_ids": [str(d) for d in rng.choice(list("abcd"), n)],
        "source_types": [str(s) for s in rng.choice(SOURCE_TYPES, n)],
    }
    if rerank:
        fields["rerank"] = rng.uniform(-8.0, 8.0, n)
    if rng.random() < 0.5:
        fields["entity_matrix"] = rng.random((n, int(rng.integers(0, 4)))) > 0.5
    if rng.random() < 0.5:
        sentence = rng.uniform(-0.2, 1.1, n)
        sentence[rng.random(n) < 0.4] = np.nan  # not read
        fields["sentence_scores"] = sentence
        fields["term_coverage"] = rng.uniform(0.0, 1.0, n)
    return HitScores(**fields)


def _cases() -> Iterator[tuple[str, str]]:
    for scorer in SCORERS:
        for selection in SELECTIONS:
            yield scorer, selection


@pytest.mark.parametrize(("scorer", "selection"), list(_cases()))
def test_each_row_of_a_padded_batch_is_bit_for_bit_its_one_query_assessment(
    scorer: str, selection: str
) -> None:
    # repr, not ==: 0.0 == -0.0, but a row that lost its sign would still differ.
    rng = np.random.default_rng(SEED)
    # The packaged calibration is for cosine scores; a reranked list has another metric.
    rerank = scorer != "calibrated"
    hits = [_mixed_hits(rng, rerank=rerank) for _ in range(QUERIES)]
    assert len({h.n_hits for h in hits}) > 1, "the batch must pad some rows"
    engine = ConfidenceEngine(ConfidenceConfig(scorer=scorer, selection=selection))  # type: ignore[arg-type]
    thresholds = [None if i % 3 else float(rng.uniform(0.0, 1.0)) for i in range(QUERIES)]
    tasks = [(None, "debugging", "explanation", "unknown-task")[i % 4] for i in range(QUERIES)]
    top_ks = [None if i % 2 else int(rng.integers(1, 8)) for i in range(QUERIES)]
    batch = engine.assess_batch(hits, thresholds=thresholds, tasks=tasks, top_ks=top_ks)
    for i, one in enumerate(hits):
        alone = engine.assess(one, threshold=thresholds[i], task=tasks[i], top_k=top_ks[i])
        assert repr(batch.item(i).to_dict()) == repr(alone.to_dict()), f"query {i}"


@pytest.mark.parametrize("where", [0, 1, -1])
def test_a_query_that_found_nothing_fits_a_batch_wherever_it_stands(where: int) -> None:
    # hit_scores([]) is HitScores.empty(): no sparse or fused channel. First in a batch
    # of hybrid lists it once set the batch's channels, and every other query was
    # refused (the missing-answer estimate failed on a pseudo-query that found nothing).
    rng = np.random.default_rng(SEED)
    hits = [h for h in (_mixed_hits(rng, rerank=False) for _ in range(40)) if h.n_hits][:3]
    hits.insert(where % (len(hits) + 1), HitScores.empty())
    engine = ConfidenceEngine(ConfidenceConfig())
    batch = engine.assess_batch(hits)
    for i, one in enumerate(hits):
        got, alone = batch.item(i).to_dict(), engine.assess(one).to_dict()
        if not one.n_hits:  # in a hybrid batch, agreement reads 0.0 where alone it is None
            got.pop("signals"), alone.pop("signals")
        assert repr(got) == repr(alone), f"query {i}"
    assert batch.statuses[where] == "no_relevant_context"


# numpy functions written in Python around a C call: on a few hits the wrapper costs
# more than the call (np.take_along_axis ~3.6 us against ~1.4 us for the indexing it
# does). The one-row path uses the ndarray methods or plain indexing instead.
_SLOW_WRAPPERS = (
    "take_along_axis",
    "broadcast_to",
    "stack",
    "errstate",
    "clip",
    "round",
    "any",
    "argsort",
    "sort",
    "cumsum",
    "argmax",
    "ones_like",
)


@pytest.mark.parametrize("selection", SELECTIONS)
def test_a_one_query_assess_calls_no_slow_numpy_wrapper(
    selection: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = ConfidenceEngine(ConfidenceConfig(selection=selection))  # type: ignore[arg-type]
    hits = HitScores(
        dense=np.array([0.91, 0.84, 0.8, 0.77, 0.6, 0.52, 0.4, 0.1]),
        sparse=np.array([12.0, 3.5, 9.0, 0.0, 1.0, 22.0, 4.0, 2.0]),
        fused=1.0 / (61.0 + np.arange(8.0)),
        doc_ids=["a", "b", "a", "c", "d", "b", "e", "a"],
        source_types=["government", "blog", "regulatory", "blog", "x", "blog", "blog", "x"],
        entity_matrix=np.eye(8, 2, dtype=bool),
    )
    expected = engine.assess(hits).to_dict()
    called: list[str] = []
    for name in _SLOW_WRAPPERS:
        real = getattr(np, name)

        def spy(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            called.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(np, name, spy)
    assert engine.assess(hits).to_dict() == expected
    assert called == []
