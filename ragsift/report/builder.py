"""The report builder: one retrieval result in, one user-facing report and its evidence out.

Pure apart from the injected chat client: it counts nothing, and says in
:class:`BuiltReport` whether the LLM failed (``llm_fallback``), so that its caller
counts a report once it goes out (a batch cut off by its deadline is built again).
The order of decisions:

1. greeting / scope outcomes (D7) bypass generation: the result's ``answer_hint``.
2. an error outcome, no kept hits, or (strict mode) an unanswerable or
   ``no_relevant_context`` result is refused with exactly the D4 sentence, says
   so in the A8 disclaimer, and records RAG_REFUSAL.
3. otherwise the LLM answers from the confidence-aware prompt (extractive when
   no LLM is configured or it stays unavailable after its retries), and the
   answer is validated (D5); an invalid one is replaced by the refusal sentence,
   its reasons listed in ``validation_issues``, and RAG_RESPONSE_INVALIDATED
   recorded next to RAG_REFUSAL.
4. when the result's kept sources disagree (``contradiction``, D7), an answer
   that is not a refusal ends with a note naming both sides.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from ragsift.confidence import (
    REFUSAL_SENTENCE,
    RESPONSE_QUALITY_POINTS,
    SIGNAL_NAMES,
    CompositeScorer,
    ConfidenceConfig,
    disclaimer_for,
)
from ragsift.confidence.scorers import ScoringInputs
from ragsift.report.contradictions import contradiction_note
from ragsift.report.extractive import extractive_answer
from ragsift.report.grounding import (
    answer_issues,
    cited_numbers,
    is_exact_refusal,
)
from ragsift.report.llm import (
    ChatClient,
    LlmDeadlineError,
    LlmUnavailableError,
)
from ragsift.report.prompts import build_prompt, chat_messages
from ragsift.report.settings import ReportSettings, badge_for, banner_for
from ragsift.retrieval.results import evidence_about
from ragsift.schemas import (
    EvidenceEvent,
    EvidenceType,
    Report,
    RetrievalResult,
    RetrievedChunk,
    derive_query_id,
)

__all__ = [
    "EVIDENCE_SOURCE",
    "BuiltReport",
    "FallbackReason",
    "ReportBuilder",
    "ReportSettings",
    "badge_for",
    "banner_for",
]

log = logging.getLogger(__name__)

EVIDENCE_SOURCE = "/ragsift/worker/report"

GeneratedBy = Literal["extractive", "llm", "bypass"]
#: Why a report was built without the LLM it has: errors after the retries, or its deadline.
FallbackReason = Literal["unavailable", "deadline"]
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_QUALITY_SCALE = max(RESPONSE_QUALITY_POINTS.values())  # C1's 0.3 share -> [0, 1]
_SOURCE_QUALITY_SLOT = SIGNAL_NAMES.index("source_quality")


@dataclass(frozen=True, slots=True)
class _Answer:
    text: str
    generated_by: GeneratedBy
    variant: str
    is_refusal: bool
    issues: tuple[str, ...] = ()
    replaced: bool = False  # a generated answer was thrown away
    refusal_reason: str = ""
    response_quality: str = "invalid"


@dataclass(frozen=True, slots=True)
class BuiltReport:
    """One result's report, the evidence it calls for, and the LLM fallback it took.

    ``llm_fallback`` is set when the LLM call failed and the report was built without
    it (``None`` otherwise, and for reports that never call the LLM); ``llm_error``
    then says how it failed, for the caller's log (the builder logs it only at debug:
    a batch of reports that fell back is one line, :class:`~ragsift.workers.report.ReportHandler`).
    """

    report: Report
    evidence: list[EvidenceEvent]
    llm_fallback: FallbackReason | None = None
    llm_error: str | None = None


class ReportBuilder:
    """Builds the report of one retrieval result (module docstring).

    Args:
        settings: report settings.
        llm: the chat client; ``None`` for extractive reports.
        confidence_config: supplies the C1 source-quality table (defaults to the seeds').
    """

    def __init__(
        self,
        settings: ReportSettings,
        llm: ChatClient | None = None,
        *,
        confidence_config: ConfidenceConfig | None = None,
    ) -> None:
        self.settings = settings
        self.llm = llm
        if llm is not None and not settings.nonce_key:
            # Safe either way (the per-process key is secret); only replays differ.
            log.warning(
                "no prompt nonce key configured (RAGSIFT_REPORT_NONCE_KEY): using a random"
                " key for this process; set one for prompts that are stable across"
                " restarts and replays"
            )
        config = confidence_config if confidence_config is not None else ConfidenceConfig()
        self._source_quality: Callable[[str], float] = config.source_quality_of
        self._composite_scorer = CompositeScorer(settings.composite_weights)

    async def build(self, result: RetrievalResult) -> tuple[Report, list[EvidenceEvent]]:
        """The report of ``result`` and the evidence events it calls for; a warning
        when the LLM call failed and it was answered extractively."""
        built = await self.build_report(result)
        if built.llm_fallback is not None:
            log.warning(
                "LLM %s for query %s, answering extractively: %s",
                built.llm_fallback,
                result.query_id,
                built.llm_error,
            )
        return built.report, built.evidence

    async def build_report(self, result: RetrievalResult) -> BuiltReport:
        """The report of ``result``, its evidence and the LLM fallback it took, if any."""
        if result.outcome in ("greeting", "scope"):
            return BuiltReport(self._bypass(result), [])
        hits = self._sources(result)
        reason = self._refusal_reason(result, hits)
        if reason is not None:
            answer = _Answer(
                REFUSAL_SENTENCE, "extractive", "insufficient", True, refusal_reason=reason
            )
            return BuiltReport(*self._assemble(result, [], answer, context_used=False))
        answer, fallback, failed = await self._generate(result, hits)
        if not answer.is_refusal and is_exact_refusal(answer.text):
            # D6: the model obeyed the refusal instruction; mark it whatever validation says.
            answer = _Answer(
                REFUSAL_SENTENCE,
                answer.generated_by,
                answer.variant,
                True,
                refusal_reason="the model found no answer in the sources",
            )
        if self.settings.validate_responses:
            answer = self._validate(answer, hits)
        if result.contradiction is not None and not answer.is_refusal:
            # D7: after validation, which judges the answer, not ragsift's own note
            note = contradiction_note(result.contradiction, hits)
            answer = replace(answer, text=f"{answer.text}\n\n{note}")
        report, evidence = self._assemble(result, hits, answer, context_used=not answer.is_refusal)
        return BuiltReport(report, evidence, fallback, failed)

    def _sources(self, result: RetrievalResult) -> list[RetrievedChunk]:
        if not self.settings.strict_mode:
            return list(result.hits)
        return list(result.hits[: self.settings.max_sources])

    def _refusal_reason(
        self, result: RetrievalResult, hits: Sequence[RetrievedChunk]
    ) -> str | None:
        if result.outcome == "error":
            stage = result.error.stage if result.error else "unknown"
            return f"retrieval failed at stage {stage}"
        if not hits:
            return f"no context retrieved (status {result.status})"
        if self.settings.strict_mode and not result.answerable:
            return f"not answerable ({result.answerability_reason or 'unknown reason'})"
        if self.settings.strict_mode and result.status == "no_relevant_context":
            return "no relevant context"
        return None

    async def _generate(
        self, result: RetrievalResult, hits: Sequence[RetrievedChunk]
    ) -> tuple[_Answer, FallbackReason | None, str | None]:
        """The answer, and why the LLM was not used and how it failed, where it did."""
        s = self.settings
        fallback: FallbackReason | None = None
        failed: str | None = None
        if self.llm is not None:
            prompt = build_prompt(
                result,
                strict_mode=s.strict_mode,
                max_sources=s.max_sources,
                max_source_chars=s.max_source_chars,
                nonce_key=s.nonce_key,
            )
            try:
                reply = await self.llm.complete(chat_messages(prompt))
            except LlmUnavailableError as exc:
                # Outage or stall: serve the extractive report rather than nothing.
                fallback = "deadline" if isinstance(exc, LlmDeadlineError) else "unavailable"
                failed = f"after {exc.attempts} attempts: {exc.message}"
                log.debug("LLM %s for query %s %s", fallback, result.query_id, failed)
            else:
                text = _clip(reply.text.strip(), s.max_answer_chars)
                answer = _Answer(text, "llm", prompt.variant, False, response_quality="complete")
                return answer, None, None
        text = extractive_answer(result.query, hits, max_chars=s.max_answer_chars)
        if not text:
            refusal = _Answer(
                REFUSAL_SENTENCE,
                "extractive",
                "extractive",
                True,
                refusal_reason="no sentence of the retrieved context matches the question",
            )
            return refusal, fallback, failed
        answer = _Answer(text, "extractive", "extractive", False, response_quality="complete")
        return answer, fallback, failed

    def _validate(self, answer: _Answer, hits: Sequence[RetrievedChunk]) -> _Answer:
        if answer.is_refusal:
            return answer
        issues = answer_issues(
            answer.text, [h.text for h in hits], min_term_coverage=self.settings.min_term_coverage
        )
        if not issues:
            # C1: a complete answer cites its sources; one without citations lacks a part.
            quality = "complete" if cited_numbers(answer.text) else "missing_optional"
            return _Answer(
                answer.text, answer.generated_by, answer.variant, False, response_quality=quality
            )
        return _Answer(
            REFUSAL_SENTENCE,
            answer.generated_by,
            answer.variant,
            True,
            issues=tuple(issues),
            replaced=True,
            refusal_reason="the generated answer failed validation",
        )

    def _composite_of(
        self, result: RetrievalResult, hits: Sequence[RetrievedChunk], quality: str
    ) -> float:
        signals = np.full((1, len(SIGNAL_NAMES)), np.nan)
        if hits:
            signals[0, _SOURCE_QUALITY_SLOT] = sum(
                self._source_quality(h.source_type) for h in hits
            ) / len(hits)
        one = ScoringInputs(
            signals=signals,
            kept_mean=np.array([result.confidence]),
            kept_count=np.array([len(hits)], dtype=np.int64),
            threshold=np.array([result.threshold]),
            response_quality=np.array([RESPONSE_QUALITY_POINTS[quality] / _QUALITY_SCALE]),
        )
        return float(self._composite_scorer.score(one)[0])

    def _bypass(self, result: RetrievalResult) -> Report:
        return Report(
            report_id=derive_query_id(result.tenant_id, result.query_id, "report"),
            query_id=result.query_id,
            tenant_id=result.tenant_id,
            collection=result.collection,
            answer=result.answer_hint or "",
            is_refusal=False,
            advisory_only=False,
            disclaimer=None,
            status=result.status,
            level=result.level,
            confidence=result.confidence,
            badge="green",
            prompt_variant="bypass",
            generated_by="bypass",
        )

    def _assemble(
        self,
        result: RetrievalResult,
        hits: Sequence[RetrievedChunk],
        answer: _Answer,
        *,
        context_used: bool,
    ) -> tuple[Report, list[EvidenceEvent]]:
        s = self.settings
        confidence = result.confidence
        threshold = s.advisory_threshold_for(result)
        advisory = confidence < threshold
        if advisory:
            # C3: the report still goes out, flagged. Normal running, not a fault: the
            # report's own flag and its evidence event carry it (a warning per
            # low-confidence report would flood the log of a worker serving refusals).
            log.debug(
                "report for query %s is advisory only: confidence %.2f < %.2f",
                result.query_id,
                confidence,
                threshold,
            )
        if answer.is_refusal and not answer.replaced:
            # A8: refused before using any context: say the answer has none behind it.
            disclaimer = disclaimer_for("no_relevant_context", confidence).text
        else:
            disclaimer = disclaimer_for(result.status, confidence).text
        report = Report(
            report_id=derive_query_id(result.tenant_id, result.query_id, "report"),
            query_id=result.query_id,
            tenant_id=result.tenant_id,
            collection=result.collection,
            answer=answer.text,
            is_refusal=answer.is_refusal,
            advisory_only=advisory,
            disclaimer=disclaimer,
            status=result.status,
            level=result.level,
            confidence=confidence,
            composite_confidence=self._composite_of(result, hits, answer.response_quality),
            badge="red" if answer.is_refusal else badge_for(confidence, s, threshold),
            banner=banner_for(confidence) if advisory else None,
            citations=[h.citation for h in hits] if context_used else [],
            prompt_variant=answer.variant,
            generated_by=answer.generated_by,
            validation_issues=list(answer.issues),
            contradiction=result.contradiction if context_used else None,
        )
        return report, self._evidence(result, answer)

    def _evidence(self, result: RetrievalResult, answer: _Answer) -> list[EvidenceEvent]:
        out: list[EvidenceEvent] = []
        threshold = self.settings.advisory_threshold_for(result)
        details = {"generated_by": answer.generated_by, "prompt_variant": answer.variant}
        if answer.replaced:
            out.append(
                evidence_about(
                    result,
                    EvidenceType.RESPONSE_INVALIDATED,
                    f"{answer.generated_by} answer replaced by the refusal: "
                    + "; ".join(answer.issues),
                    threshold=threshold,
                    source=EVIDENCE_SOURCE,
                    issues=list(answer.issues),
                    **details,
                )
            )
        if answer.is_refusal:
            out.append(
                evidence_about(
                    result,
                    EvidenceType.REFUSAL,
                    f"refused: {answer.refusal_reason}"
                    f" (outcome {result.outcome}, status {result.status})",
                    threshold=threshold,
                    source=EVIDENCE_SOURCE,
                    reason=answer.refusal_reason,
                    **details,
                )
            )
        return out


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, at the last sentence end when there is one."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    return head[: ends[-1]] if ends else head.rstrip() + "…"
