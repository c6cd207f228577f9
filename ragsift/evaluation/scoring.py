"""Fit the calibration on a retrieval run: labels, hit threshold, calibrated scorer.

Label of a query: 1 when a document that answers it is among the hits
ragsift keeps (the context handed to the LLM contains the answer), 0
otherwise — always 0 for near-miss and out-of-scope questions. The data is
split by article (group): calibration is fit on one part; the report
(:mod:`ragsift.evaluation.report`) is made on the other, or on another set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ragsift.confidence import (
    BatchAssessment,
    CalibrationArtifact,
    ConfidenceConfig,
    ConfidenceEngine,
    HitBatch,
    fit_calibration,
    fit_similarity_threshold,
)
from ragsift.confidence.dense_only import fit_dense_only
from ragsift.confidence.features import DEFAULT_FEATURES, feature_matrix
from ragsift.confidence.fit_groups import fit_group_keys
from ragsift.confidence.keyword import KeywordFit
from ragsift.confidence.signals import SIGNAL_INDEX, prepare_batch
from ragsift.evaluation.dataset import first_side
from ragsift.evaluation.runner import RetrievalRun
from ragsift.retrieval.hit_scores import hit_scores

__all__ = [
    "FIT_FRACTION",
    "READER_SIGNAL_FEATURES",
    "SHIPPED_FEATURES",
    "SHIPPED_HOLES",
    "answer_in_kept",
    "fit_from_run",
    "hit_batch",
    "relevance_matrix",
    "split_mask",
    "with_dense_only",
    "with_keyword",
]

FIT_FRACTION = 0.5  # half the articles fit the calibration, the other half report
# The reader signals a calibration with the reader on adds to DEFAULT_FEATURES: sentence
# match and term coverage raised near-miss and out-of-scope AUROC on SQuAD 2.0
# (docs/confidence.md); token match tells a hole's neighbouring paragraph from the
# answer's (ADR 041), and is fit only where the embedder gives token states.
READER_SIGNAL_FEATURES: tuple[str, ...] = ("sentence_match", "term_coverage", "token_match")
# What `ragsift calibrate` fits by default: term coverage tells an on-topic hit that
# lacks the question's rarer terms from one that holds them, for a tokenization per
# chunk (ADR 020).
SHIPPED_FEATURES: tuple[str, ...] = (*DEFAULT_FEATURES, "term_coverage")
# The shipped artifacts' holes (`ragsift calibrate --dataset squad2 --holes 0.15`): about
# one paragraph in seven of each fit article is left out of the corpus, so about one
# on-topic question in seven has no answer there and the fit learns what such a
# question's hits look like, the way a user's corpus misses answers (ADR 020). 0.15 is
# the smallest share whose fit holds a corpus missing a quarter of its paragraphs at
# risk <= alpha + 0.03 on the articles it did not see, both ways round (ADR 026).
SHIPPED_HOLES = 0.15
# What a keyword-only query cannot read: no BM25-dense agreement (one retriever; the
# plain imputation copies the top score), and no sentence or token match (its query is
# never embedded). The keyword model fits the artifact's other features (ADR 029).
KEYWORD_UNREAD: frozenset[str] = frozenset({"agreement", "sentence_match", "token_match"})


def split_mask(run: RetrievalRun, fit_fraction: float = FIT_FRACTION, seed: int = 0) -> np.ndarray:
    """True for queries in the fit split; whole articles go to one side.

    At the default fraction the fit side holds exactly ``select_half``'s half 1
    (:func:`~ragsift.evaluation.dataset.first_side`), so a fit on a whole set reports
    on ``--half 2`` out of sample.
    """
    chosen = first_side((q.group for q in run.queries), fit_fraction, seed)
    return np.array([q.group in chosen for q in run.queries])


def relevance_matrix(run: RetrievalRun, mask: np.ndarray) -> np.ndarray:
    """(Q, K) True where hit k of a masked query is its answer's paragraph."""
    idx = np.flatnonzero(mask)
    width = max((len(run.hits[i]) for i in idx), default=0)
    out = np.zeros((len(idx), max(width, 1)), dtype=bool)
    for row, i in enumerate(idx):
        relevant = run.queries[i].relevant
        for col, hit in enumerate(run.hits[i]):
            out[row, col] = hit.doc_id in relevant
    return out


def answer_in_kept(assessed: BatchAssessment, relevant: np.ndarray) -> np.ndarray:
    """1 when the answer's paragraph is among the kept hits (the context an LLM gets)."""
    order = assessed.prepared.order
    ranked = np.take_along_axis(relevant[:, : order.shape[1]], order, axis=1)
    kept = np.arange(order.shape[1])[None, :] < assessed.selection.kept_count[:, None]
    return np.asarray((ranked & kept).any(axis=1), dtype=np.float64)


def served_config(artifact: CalibrationArtifact) -> ConfidenceConfig:
    """The calibrated scorer's configuration as the pipeline runs it
    (:class:`~ragsift.retrieval.engines.EngineSet`): the artifact's hit threshold
    (the default where it has none), its collection's score alignment, one document
    enough."""
    config = ConfidenceConfig(embedder_id=artifact.embedder_id)
    fitted = artifact.similarity_threshold
    return dataclasses.replace(
        config,
        scorer="calibrated",
        similarity_threshold=config.similarity_threshold if fitted is None else fitted,
        min_documents=1,
        normalization=artifact.normalization(config.normalization),
    )


def hit_batch(run: RetrievalRun, mask: np.ndarray) -> HitBatch:
    """The masked queries' hits as one padded batch for the confidence engine."""
    idx = np.flatnonzero(mask)
    reader = run.reader
    return HitBatch.from_hits(
        [hit_scores(run.hits[i], run.mode, (), reader[i] if reader else None) for i in idx]
    )


def fit_from_run(
    run: RetrievalRun,
    *,
    alpha: float = 0.1,
    fit_fraction: float = FIT_FRACTION,
    seed: int = 0,
    features: Sequence[str] = DEFAULT_FEATURES,
    near_miss_negatives: bool = False,
) -> tuple[CalibrationArtifact, np.ndarray]:
    """Fit the hit threshold and the calibrated scorer on the fit split.

    First the A1 hit threshold for this embedder (keeping 90% of the hits that
    hold an answer), then the probability that the kept context holds the answer.
    Returns the artifact and the split mask (True = fit side); with
    ``fit_fraction=1`` every article fits (``ragsift calibrate --half``).
    ``features`` are the calibrated model's; ``near_miss_negatives`` fits near-miss
    questions as negatives too (by default they are left out of the fit).
    """
    fit = split_mask(run, fit_fraction, seed)
    mask = fit & np.array([near_miss_negatives or q.kind != "near_miss" for q in run.queries])
    batch = hit_batch(run, mask)
    relevant = relevance_matrix(run, mask)
    base = ConfidenceConfig(scorer="weighted", embedder_id=run.embedder_id)
    primary = prepare_batch(batch, base.normalization).primary
    threshold = fit_similarity_threshold(primary, relevant[:, : primary.shape[1]])
    config = dataclasses.replace(base, similarity_threshold=threshold)
    assessed = ConfidenceEngine(config).assess_batch(batch)
    labels = answer_in_kept(assessed, relevant)
    counts = run.dataset.counts()
    fitted = fit_calibration(
        assessed.signals,
        labels,
        embedder_id=run.embedder_id,
        # Keyword-only searches rank by BM25, which is then the primary score.
        metric="bm25" if run.mode == "keyword" else "cosine",
        alpha=alpha,
        seed=seed,
        features=features,
        source=f"{run.dataset.name} ({run.mode}, k={run.k})",
        # Questions about one article are not independent draws (conformal module doc).
        groups=[run.queries[i].group for i in np.flatnonzero(mask)],
        # Near misses fitted as negatives are on topic: they stay in the in-scope sample
        # (unanswered there), which probes re-certify with; only out-of-scope rows are
        # what probes stand in for.
        in_scope=[run.queries[i].kind != "out_of_scope" for i in np.flatnonzero(mask)],
        # Certified on every question, each scored by the half that did not see it: one
        # split's bar moved 0.65-0.86 with the seed on SQuAD, this one 0.73-0.76 (ADR 025).
        cross_fit=True,
        notes=(
            f"label: the answer's paragraph is among the kept hits ({run.mode} top {run.k},"
            f" hit threshold {threshold} keeping 90% of answer-holding hits); fit on"
            f" {int(mask.sum())} in-scope"
            f"{', near-miss (as unanswered)' if near_miss_negatives else ''} and out-of-scope"
            " questions from"
            f" {fit_fraction:.0%} of the articles of {run.dataset.name};"
            f" corpus {counts['documents']} paragraphs"
        ),
    )
    data = fitted.model_dump(mode="json")
    data.update(similarity_threshold=threshold, version="")
    # Which articles it saw, so `eval --artifact` can say what it scores in sample.
    data["data"]["fit_groups"] = fit_group_keys(run.queries[i].group for i in np.flatnonzero(fit))
    return CalibrationArtifact.model_validate(data), fit


def with_dense_only(
    artifact: CalibrationArtifact,
    run: RetrievalRun,
    fit: np.ndarray,
    *,
    near_miss_negatives: bool = False,
) -> CalibrationArtifact:
    """``artifact`` with the agreement its dense-only queries are imputed (ADR 028),
    fit on ``run``: the same questions as its fit (``fit`` = its split mask), searched
    dense-only, labelled as the pipeline would serve them with it."""
    if run.mode != "dense":
        raise ValueError(f"the dense-only imputation is fit on a dense run, got {run.mode!r}")
    if "agreement" not in artifact.features:
        return artifact  # the model never reads agreement: nothing to impute
    mask = fit & np.array([near_miss_negatives or q.kind != "near_miss" for q in run.queries])
    batch = hit_batch(run, mask)
    relevant = relevance_matrix(run, mask)
    config = dataclasses.replace(served_config(artifact), scorer="weighted")
    assessed = ConfidenceEngine(config).assess_batch(batch)
    where = artifact.features.index("agreement")
    x = feature_matrix(assessed.signals, artifact.features)
    x[:, where] = 0.0
    coef = artifact.coef_array
    conformal = artifact.conformal
    dense = fit_dense_only(
        x @ coef + artifact.intercept,
        float(coef[where]),
        assessed.signals[:, SIGNAL_INDEX["top_score"]],
        answer_in_kept(assessed, relevant),
        assessed.selection.kept_count,
        threshold=conformal.threshold,
        alpha=conformal.alpha,
        delta=conformal.delta,
        groups=[run.queries[i].group for i in np.flatnonzero(mask)],
    )
    # Validated anew: the version is the new content's hash.
    return CalibrationArtifact.model_validate(
        {**artifact.model_dump(mode="json"), "version": "", "dense_only": dense.model_dump()}
    )


def with_keyword(
    artifact: CalibrationArtifact,
    run: RetrievalRun,
    *,
    alpha: float = 0.1,
    fit_fraction: float = FIT_FRACTION,
    near_miss_negatives: bool = False,
) -> CalibrationArtifact:
    """``artifact`` with the model its keyword-only queries are scored with (ADR 029),
    fit on ``run``: the same questions as its own fit, searched keyword-only, with the
    same split, target and near-miss rule, and the artifact's features but those a
    keyword query cannot read (:data:`KEYWORD_UNREAD`)."""
    if run.mode != "keyword":
        raise ValueError(f"the keyword model is fit on a keyword run, got {run.mode!r}")
    features = [f for f in artifact.features if f not in KEYWORD_UNREAD]
    fitted, _ = fit_from_run(
        run,
        alpha=alpha,
        fit_fraction=fit_fraction,
        features=features,
        near_miss_negatives=near_miss_negatives,
    )
    assert fitted.similarity_threshold is not None  # fit_from_run always fits one
    part = KeywordFit(
        features=fitted.features,
        coefficients=fitted.coefficients,
        intercept=fitted.intercept,
        similarity_threshold=fitted.similarity_threshold,
        # with its in-scope sample: a collection's probes re-certify it as the hybrid one
        conformal=fitted.conformal,
    )
    return CalibrationArtifact.model_validate(
        {**artifact.model_dump(mode="json"), "version": "", "keyword": part.model_dump()}
    )
