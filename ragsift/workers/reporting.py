"""The report handler: retrieval results in, user-facing reports out (extractive).

Without an LLM endpoint the report is extractive: the sentences of the kept
context that share most words with the question, each with its citation. A
result that is not answerable gets exactly the refusal sentence (D4) and a
RAG_REFUSAL evidence event; the status's disclaimer (A7, A8), the C6 badge and
the advisory banner (C3) come with every report. The LLM prompt variants and
answer validation of issue 6 build on this (see the notes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.results import evidence_about
from ragsift.schemas import (
    EvidenceEvent,
    EvidenceType,
    Report,
    RetrievalResult,
    derive_id,
)
from ragsift.settings import GuardrailSettings
from ragsift.workers.base import Emit, Outcome

__all__ = ["ReportHandler", "build_report"]

SOURCE = "/ragsift/worker/report"
MAX_SENTENCES = 3  # an extractive answer longer than this stops being an answer
GREEN_AT = 0.90  # C2/C6: HIGH_CONFIDENCE flag
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOP = frozenset(
    {
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "do",
        "does",
        "did",
        "i",
        "you",
        "it",
        "how",
        "what",
        "when",
        "which",
        "who",
        "why",
        "where",
        "can",
        "my",
        "your",
        "with",
        "by",
        "at",
        "as",
        "from",
        "this",
        "that",
    }
)


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP}


def _extract(result: RetrievalResult) -> str:
    """The best sentences of the kept hits, each with its [n] citation."""
    question = _terms(result.query)
    scored = []
    for n, hit in enumerate(result.hits, 1):
        for position, sentence in enumerate(_SENTENCE.split(hit.text)):
            overlap = len(question & _terms(sentence))
            if overlap:
                # Prefer overlap, then better-ranked hits, then earlier sentences.
                scored.append((-overlap, n, position, f"{sentence.strip()} [{n}]"))
    if not scored:
        return ""
    return " ".join(s for *_, s in sorted(scored)[:MAX_SENTENCES])


def _badge(confidence: float, threshold: float) -> str:
    if confidence >= GREEN_AT:
        return "green"
    return "orange" if confidence >= threshold else "red"


def build_report(
    result: RetrievalResult, guardrails: GuardrailSettings
) -> tuple[Report, list[EvidenceEvent]]:
    """The report of one result and the evidence it calls for."""
    threshold = guardrails.threshold_for(result.collection)
    evidence: list[EvidenceEvent] = []
    if result.outcome in ("greeting", "scope"):
        answer, kind, refusal, disclaimer = result.answer_hint or "", "bypass", False, None
    else:
        answer = _extract(result) if result.answerable and result.outcome == "ok" else ""
        refusal = not answer
        answer = answer or REFUSAL_SENTENCE
        kind, disclaimer = "extractive", result.disclaimer
        if refusal:
            evidence.append(
                evidence_about(
                    result,
                    EvidenceType.REFUSAL,
                    "refused: the retrieved context does not support an answer"
                    f" (outcome {result.outcome}, status {result.status})",
                    threshold=threshold,
                    source=SOURCE,
                )
            )
    advisory = result.outcome == "ok" and result.confidence < threshold
    report = Report(
        report_id=derive_id(result.query_id, "report"),
        query_id=result.query_id,
        tenant_id=result.tenant_id,
        collection=result.collection,
        answer=answer,
        is_refusal=refusal,
        advisory_only=advisory,
        disclaimer=disclaimer,
        status=result.status,
        level=result.level,
        confidence=result.confidence,
        badge="green" if kind == "bypass" else _badge(result.confidence, threshold),
        banner=f"Advisory only — confidence {round(100 * result.confidence)}%"
        if advisory
        else None,
        citations=[h.citation for h in result.hits] if not refusal else [],
        prompt_variant="extractive",
        generated_by=kind,
    )
    return report, evidence


class ReportHandler:
    """Builds one report per result; emits it and its evidence."""

    name = "report"
    source = "retrievals"

    def __init__(self, guardrails: GuardrailSettings, metrics: Metrics):
        self.guardrails = guardrails
        self.metrics = metrics

    @property
    def model(self) -> type[BaseModel]:
        """Retrieval results in."""
        return RetrievalResult

    async def handle_batch(self, events: Sequence[RetrievalResult]) -> list[Outcome]:
        """A report (and maybe a refusal evidence event) per result."""
        outcomes: list[Outcome] = []
        for result in events:
            report, evidence = build_report(result, self.guardrails)
            kind = (
                "bypass"
                if report.generated_by == "bypass"
                else ("refusal" if report.is_refusal else "answer")
            )
            self.metrics.reports.labels(result.collection, kind).inc()
            emits = [Emit("reports", result.query_id, report)]
            emits += [Emit("audit", result.query_id, ev) for ev in evidence]
            for ev in evidence:
                self.metrics.evidence.labels(ev.type.value).inc()
            outcomes.append(emits)
        return outcomes

    async def close(self) -> None:
        """Nothing held."""
