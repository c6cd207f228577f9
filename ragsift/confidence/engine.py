"""The one entry point: ``ConfidenceEngine(config).assess(hits) -> Assessment``.

One call normalizes every channel, computes the signals, selects the kept hits
(threshold, adaptive or top-k), scores confidence, and derives levels, flags,
disclaimer, recommendations and answerability. ``assess_many`` gives exactly
``assess``'s results for many queries, sharing its numpy calls; ``assess_batch``
does the same work vectorized (its signals may differ from ``assess`` in the last bits).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragsift.confidence.adaptive import select_adaptive
from ragsift.confidence.answerability import documents_within
from ragsift.confidence.artifact import CalibrationArtifact, load_default_calibration
from ragsift.confidence.assessment import Assessment, BatchAssessment
from ragsift.confidence.config import RESPONSE_QUALITY_POINTS, ConfidenceConfig
from ragsift.confidence.errors import CalibrationMismatchError, ConfidenceError
from ragsift.confidence.filtering import Selection, select_threshold, select_top_k
from ragsift.confidence.hits import HitBatch, HitScores
from ragsift.confidence.levels import advisory_codes, level_codes
from ragsift.confidence.scorers import Scorer, ScoringInputs, make_scorer
from ragsift.confidence.signals import PreparedBatch, compute_signal_matrix, prepare_batch
from ragsift.confidence.single import assess_many, assess_one
from ragsift.confidence.strategies import strategy_for

__all__ = ["ConfidenceEngine", "ResponseQuality"]

FloatArray = npt.NDArray[np.float64]

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
            calibration.check_compatible(cfg.embedder_id, cfg.metric)
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
        """Assess one query's hits.

        Args:
            hits: the query's raw scores and metadata.
            threshold: per-query similarity threshold (A1 override).
            response_quality: C1 response quality for the composite scorer.
            task: E2 task type for adaptive selection.
            top_k: E4's k for this query (top_k selection); None keeps ``config.top_k``.
        """
        cfg = self.config
        t = cfg.similarity_threshold if threshold is None else threshold
        if not 0.0 <= t <= 1.0:
            raise ConfidenceError(f"threshold must be in [0, 1], got {t}")
        self._check_metric(hits.primary_metric, hits.n_hits)
        adaptive = cfg.adaptive if task is None else strategy_for(task).apply(cfg.adaptive)
        return assess_one(
            hits,
            cfg=cfg,
            scorer=self.scorer,
            answer_threshold=self.answer_threshold,
            calibration_version=self._calibration_version,
            threshold=t,
            response_quality=_response_value(response_quality),
            adaptive=adaptive,
            top_k=top_k,
        )

    def assess_many(
        self,
        hits: Sequence[HitScores],
        *,
        thresholds: Sequence[float | None] | None = None,
        tasks: Sequence[str | None] | None = None,
        top_ks: Sequence[int | None] | None = None,
    ) -> list[Assessment]:
        """Assess many queries: exactly ``[assess(h, threshold=t, task=k, top_k=n) ...]``.

        Unlike :meth:`assess_batch`, whose numpy reductions sum in another order than
        :meth:`assess` (signals differ in the last bits), this keeps :meth:`assess`'s
        arithmetic and only shares its numpy calls (normalization) across the queries,
        so each query's assessment is identical to assessing it alone.

        Args:
            hits: each query's raw scores and metadata.
            thresholds: per-query similarity threshold, None = the configured one.
            tasks: per-query E2 task type for adaptive selection, None = none.
            top_ks: per-query E4 k for top_k selection, None = ``config.top_k``.
        """
        cfg = self.config
        q = len(hits)
        ts = [None] * q if thresholds is None else list(thresholds)
        ks = [None] * q if tasks is None else list(tasks)
        ns = [None] * q if top_ks is None else list(top_ks)
        if len(ts) != q or len(ks) != q or len(ns) != q:
            raise ConfidenceError(
                f"thresholds, tasks and top_ks must have one value per query ({q}), "
                f"got {len(ts)}, {len(ks)} and {len(ns)}"
            )
        bars: list[float] = []
        for h, threshold in zip(hits, ts, strict=True):
            t = cfg.similarity_threshold if threshold is None else threshold
            if not 0.0 <= t <= 1.0:
                raise ConfidenceError(f"threshold must be in [0, 1], got {t}")
            self._check_metric(h.primary_metric, h.n_hits)
            bars.append(t)
        return assess_many(
            hits,
            cfg=cfg,
            scorer=self.scorer,
            answer_threshold=self.answer_threshold,
            calibration_version=self._calibration_version,
            thresholds=bars,
            response_quality=[_response_value(None)] * q,
            adaptive=[
                cfg.adaptive if task is None else strategy_for(task).apply(cfg.adaptive)
                for task in ks
            ],
            top_k=[cfg.top_k if n is None else n for n in ns],
        )

    def _check_metric(self, primary_metric: str, n: int) -> None:
        cal = self.calibration
        if (
            self.scorer.name == "calibrated"
            and cal is not None
            and n
            and primary_metric != cal.metric
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
        thresholds: Sequence[float] | FloatArray | None = None,
        response_quality: Sequence[ResponseQuality] | None = None,
        tasks: Sequence[str | None] | None = None,
    ) -> BatchAssessment:
        """Assess many queries at once (vectorized); per-query overrides as sequences."""
        if not isinstance(batch, HitBatch):
            batch = HitBatch.from_hits(list(batch))
        cfg = self.config
        q = batch.n_queries
        self._check_metric(batch.primary_metric, int(batch.lengths.sum()))
        t = (
            np.full(q, cfg.similarity_threshold)
            if thresholds is None
            else np.asarray(thresholds, dtype=np.float64)
        )
        if t.shape != (q,):
            raise ConfidenceError(f"thresholds must have one value per query ({q}), got {t.shape}")
        if np.any((t < 0) | (t > 1)):
            raise ConfidenceError(f"thresholds must be in [0, 1], got {t[(t < 0) | (t > 1)][0]}")
        prepared = prepare_batch(batch, cfg.normalization)
        signals = compute_signal_matrix(batch, cfg, prepared)
        selection = self._select(prepared, batch, t, tasks)
        kept = selection.kept_count
        pos = np.arange(prepared.ranked.shape[1])[None, :]
        kept_sum = np.where(pos < kept[:, None], prepared.ranked, 0.0).sum(1)
        kept_mean = kept_sum / np.maximum(kept, 1)
        rq = None
        if response_quality is not None:
            if len(response_quality) != q:
                raise ConfidenceError(
                    f"response_quality must have one value per query ({q}), "
                    f"got {len(response_quality)}"
                )
            rq = np.array([_response_value(v) for v in response_quality])
        confidence = self.scorer.score(ScoringInputs(signals, kept_mean, kept, t, rq))
        codes = level_codes(confidence, cfg.levels, kept)
        docs = documents_within(prepared.ranked, kept, t)
        answerable = (docs >= cfg.min_documents) & (confidence >= self.answer_threshold)
        return BatchAssessment(
            confidence=confidence,
            level_code=codes,
            advisory_code=advisory_codes(confidence, cfg.advisory),
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
        tasks: Sequence[str | None] | None,
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
            return select_top_k(prepared, cfg.top_k)
        if tasks is None:
            return select_adaptive(prepared, cfg.adaptive, batch=batch)
        if len(tasks) != batch.n_queries:
            raise ConfidenceError(
                f"tasks must have one value per query ({batch.n_queries}), got {len(tasks)}"
            )
        strategies = [strategy_for(task) for task in tasks]
        return select_adaptive(
            prepared,
            cfg.adaptive,
            batch=batch,
            threshold=[s.confidence_threshold for s in strategies],
            min_k=[s.min_k for s in strategies],
            max_k=[s.max_k for s in strategies],
        )
