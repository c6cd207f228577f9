"""The one entry point: ``ConfidenceEngine(config).assess(hits) -> Assessment``.

One call normalizes every channel, computes the signals, selects the kept hits
(threshold, adaptive or top-k), scores confidence, and derives levels, flags,
disclaimer, recommendations and answerability. There is one implementation of
that arithmetic, vectorized over queries (:meth:`ConfidenceEngine.assess_batch`);
``assess`` runs it on one query and ``assess_many`` on queries whose channels
differ. A query's result does not depend on the batch it is scored in (ADR 011).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from ragsift.confidence._rows import row_sums
from ragsift.confidence.adaptive import select_adaptive
from ragsift.confidence.answerability import documents_within
from ragsift.confidence.artifact import CalibrationArtifact, load_default_calibration
from ragsift.confidence.assessment import Assessment, BatchAssessment
from ragsift.confidence.config import RESPONSE_QUALITY_POINTS, ConfidenceConfig
from ragsift.confidence.errors import CalibrationMismatchError, ConfidenceError
from ragsift.confidence.filtering import Selection, select_threshold, select_top_k
from ragsift.confidence.hits import HitBatch, HitScores
from ragsift.confidence.levels import advisory_codes, level_codes
from ragsift.confidence.normalize import DENSE_METRICS
from ragsift.confidence.scorers import Scorer, ScoringInputs, make_scorer
from ragsift.confidence.signals import PreparedBatch, compute_signal_matrix, prepare_batch
from ragsift.confidence.strategies import strategy_for

__all__ = ["ConfidenceEngine", "ResponseQuality"]

FloatArray = npt.NDArray[np.float64]
_T = TypeVar("_T")

ResponseQuality = float | str | None
"""C1 response quality: in [0, 1], a RESPONSE_QUALITY_POINTS key, or None (unknown)."""

# Seed C's response points are out of a 0.3 share: divide by it to land in [0, 1].
_RESPONSE_SHARE = 0.30


def _response_value(value: ResponseQuality) -> float:
    if value is None:
        return float("nan")
    if isinstance(value, str):
        if value not in RESPONSE_QUALITY_POINTS:
            raise ConfidenceError(
                f"response_quality must be one of {sorted(RESPONSE_QUALITY_POINTS)} or a number, "
                f"got {value!r}"
            )
        return RESPONSE_QUALITY_POINTS[value] / _RESPONSE_SHARE
    if not 0.0 <= value <= 1.0:
        raise ConfidenceError(f"response_quality must be in [0, 1], got {value}")
    return float(value)


class ConfidenceEngine:
    """Assess retrievals: signals, confidence, kept hits, levels and advice.

    Args:
        config: the engine's settings (seed defaults if omitted).
        calibration: the artifact of the calibrated scorer; the packaged default is
            loaded when the calibrated scorer is configured and none is given.

    Raises:
        CalibrationMismatchError: the artifact was fit for another embedder or metric.
    """

    def __init__(
        self,
        config: ConfidenceConfig | None = None,
        *,
        calibration: CalibrationArtifact | None = None,
    ) -> None:
        self.config = config if config is not None else ConfidenceConfig()
        cfg = self.config
        if calibration is None and cfg.scorer == "calibrated":
            calibration = load_default_calibration()
        if calibration is not None:
            # A keyword model (metric bm25, ADR 029) reads no dense score: each batch's
            # primary metric is checked against it instead (_check_metric).
            dense = calibration.metric in DENSE_METRICS
            calibration.check_compatible(
                cfg.embedder_id, cfg.metric if dense else calibration.metric
            )
        self.calibration = calibration
        self.scorer: Scorer = make_scorer(cfg.scorer, cfg, calibration)
        self._calibration_version = (
            calibration.version if calibration is not None and cfg.scorer == "calibrated" else None
        )
        if cfg.answer_threshold is not None:
            self.answer_threshold = cfg.answer_threshold
        elif cfg.scorer == "calibrated" and calibration is not None:
            conformal = calibration.conformal
            # An infeasible certificate means "answer nothing": no confidence exceeds 1.
            self.answer_threshold = conformal.threshold if conformal.feasible else 1.0
        else:
            self.answer_threshold = cfg.levels.low

    def assess(
        self,
        hits: HitScores,
        *,
        threshold: float | None = None,
        response_quality: ResponseQuality = None,
        task: str | None = None,
        top_k: int | None = None,
    ) -> Assessment:
        """Assess one query's hits: :meth:`assess_batch` on a one-query batch.

        Args:
            hits: the query's raw scores and metadata.
            threshold: per-query similarity threshold (A1 override).
            response_quality: C1 response quality for the composite scorer.
            task: E2 task type for adaptive selection.
            top_k: E4's k for this query (top_k selection); None keeps ``config.top_k``.
        """
        batch = self.assess_batch(
            [hits],
            thresholds=[threshold],
            response_quality=[response_quality],
            tasks=[task],
            top_ks=[top_k],
        )
        return batch.item(0)

    def assess_many(
        self,
        hits: Sequence[HitScores],
        *,
        thresholds: Sequence[float | None] | None = None,
        tasks: Sequence[str | None] | None = None,
        top_ks: Sequence[int | None] | None = None,
    ) -> list[Assessment]:
        """Assess many queries whose hit lists may carry different channels.

        A :class:`HitBatch` holds one set of channels, so the queries are grouped by
        theirs and each group is one :meth:`assess_batch` call; every query's
        assessment is exactly what :meth:`assess` gives it alone.

        Args:
            hits: each query's raw scores and metadata.
            thresholds: per-query similarity threshold, None = the configured one.
            tasks: per-query E2 task type for adaptive selection, None = none.
            top_ks: per-query E4 k for top_k selection, None = ``config.top_k``.
        """
        q = len(hits)
        ts = _per_query("thresholds", thresholds, q)
        ks = _per_query("tasks", tasks, q)
        ns = _per_query("top_ks", top_ks, q)
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, h in enumerate(hits):
            groups.setdefault(_channel_key(h), []).append(i)
        out: dict[int, Assessment] = {}
        for idxs in groups.values():
            batch = self.assess_batch(
                [hits[i] for i in idxs],
                thresholds=[ts[i] for i in idxs],
                tasks=[ks[i] for i in idxs],
                top_ks=[ns[i] for i in idxs],
            )
            out.update((i, batch.item(j)) for j, i in enumerate(idxs))
        return [out[i] for i in range(q)]

    def _check_metric(self, primary_metric: str, lengths: npt.NDArray[np.int64]) -> None:
        cal = self.calibration
        if (
            self.scorer.name == "calibrated"
            and cal is not None
            and primary_metric != cal.metric
            and lengths.any()  # a batch without hits has no metric to disagree
        ):
            raise CalibrationMismatchError(
                expected_embedder=self.config.embedder_id,
                actual_embedder=cal.embedder_id,
                expected_metric=primary_metric,
                actual_metric=cal.metric,
            )

    def assess_batch(
        self,
        batch: HitBatch | Sequence[HitScores],
        *,
        thresholds: Sequence[float | None] | FloatArray | None = None,
        response_quality: Sequence[ResponseQuality] | None = None,
        tasks: Sequence[str | None] | None = None,
        top_ks: Sequence[int | None] | None = None,
    ) -> BatchAssessment:
        """Assess many queries at once: the engine's one scoring path.

        Args:
            batch: the queries' hits, padded (or a list to pad; one set of channels).
            thresholds: per-query similarity threshold (A1), None = the configured one.
            response_quality: per-query C1 response quality for the composite scorer.
            tasks: per-query E2 task type for adaptive selection, None = the configured
                adaptive parameters.
            top_ks: per-query E4 k for top_k selection, None = ``config.top_k``.

        Raises:
            ConfidenceError: an override out of range, or not one value per query.
            CalibrationMismatchError: the hits' primary metric is not the calibration's.
        """
        if not isinstance(batch, HitBatch):
            batch = HitBatch.from_hits(list(batch))
        cfg = self.config
        q = batch.n_queries
        self._check_metric(batch.primary_metric, batch.lengths)
        ts = [
            cfg.similarity_threshold if v is None else float(v)
            for v in _per_query("thresholds", thresholds, q)
        ]
        # Checked in Python: a list this short costs less than four numpy calls.
        outside = next((v for v in ts if not 0.0 <= v <= 1.0), None)  # NaN is outside too
        if outside is not None:
            raise ConfidenceError(f"threshold must be in [0, 1], got {outside}")
        t = np.array(ts, dtype=np.float64)
        rq = np.array(
            [_response_value(v) for v in _per_query("response_quality", response_quality, q)],
            dtype=np.float64,
        )
        prepared = prepare_batch(batch, cfg.normalization)
        signals = compute_signal_matrix(batch, cfg, prepared)
        selection = self._select(
            prepared, batch, t, _per_query("tasks", tasks, q), _per_query("top_ks", top_ks, q)
        )
        kept = selection.kept_count
        pos = np.arange(prepared.ranked.shape[1])[None, :]
        kept_sum = row_sums(np.where(pos < kept[:, None], prepared.ranked, 0.0))
        kept_mean = kept_sum / np.maximum(kept, 1)
        # One set of channels per batch: with no BM25 channel, every query is dense-only.
        dense_only = batch.dense is not None and batch.sparse is None
        confidence = self.scorer.score(
            ScoringInputs(signals, kept_mean, kept, t, rq, dense_only=dense_only)
        )
        docs = documents_within(prepared.ranked, kept, t)
        answerable = (docs >= cfg.min_documents) & (confidence >= self.answer_threshold)
        codes = level_codes(confidence, cfg.levels, kept, answered=answerable)
        return BatchAssessment(
            confidence=confidence,
            level_code=codes,
            advisory_code=advisory_codes(confidence, cfg.advisory, answered=answerable),
            answerable=answerable,
            docs_within=docs,
            answer_threshold=self.answer_threshold,
            signals=signals,
            selection=selection,
            prepared=prepared,
            config=cfg,
            scorer=self.scorer.name,
            primary_metric=batch.primary_metric,
            calibration_version=self._calibration_version,
        )

    def _select(
        self,
        prepared: PreparedBatch,
        batch: HitBatch,
        thresholds: FloatArray,
        tasks: Sequence[str | None],
        top_ks: Sequence[int | None],
    ) -> Selection:
        cfg = self.config
        if cfg.selection == "threshold":
            return select_threshold(
                prepared,
                thresholds,
                min_results=cfg.min_results,
                relax_fraction=cfg.relax_fraction,
            )
        if cfg.selection == "top_k":
            return select_top_k(prepared, [cfg.top_k if k is None else k for k in top_ks])
        # A query without a task keeps the configured parameters, not the general task's.
        params = [
            cfg.adaptive if task is None else strategy_for(task).apply(cfg.adaptive)
            for task in tasks
        ]
        return select_adaptive(
            prepared,
            cfg.adaptive,
            batch=batch,
            threshold=[p.threshold for p in params],
            min_k=[p.min_k for p in params],
            max_k=[p.max_k for p in params],
        )


def _per_query(name: str, values: Sequence[_T] | FloatArray | None, q: int) -> list[_T | None]:
    """``values`` as a list of one value per query; None = a None for every query."""
    if values is None:
        return [None] * q
    out = list(values)
    if len(out) != q:
        raise ConfidenceError(f"{name} must have one value per query ({q}), got {len(out)}")
    return out


def _channel_key(hits: HitScores) -> tuple[str, ...]:
    """The score channels and dense metric of ``hits``: what a HitBatch needs to share."""
    channels = tuple(
        c for c in ("dense", "sparse", "fused", "rerank") if getattr(hits, c) is not None
    )
    return (*channels, hits.metric)
