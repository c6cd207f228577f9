"""How reports are built (:class:`ReportSettings`) and how a confidence is shown (C2, C6).

Split from the builder so the settings, the badge and the banner can be read
(and imported by workers, the console and the CLI) without the builder's
generation and validation steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ragsift.confidence import CompositeWeights
from ragsift.errors import ConfigurationError
from ragsift.report.grounding import DEFAULT_MIN_TERM_COVERAGE
from ragsift.report.llm import DEFAULT_DEADLINE_S, DEFAULT_TIMEOUT_S, OpenAIChatClient
from ragsift.report.prompts import DEFAULT_MAX_SOURCE_CHARS
from ragsift.schemas import Badge, RetrievalResult

__all__ = [
    "DEFAULT_ADVISORY_THRESHOLD",
    "DEFAULT_GREEN_AT",
    "DEFAULT_MAX_ANSWER_CHARS",
    "DEFAULT_MAX_SOURCES",
    "ReportSettings",
    "badge_for",
    "banner_for",
]

# C2: the advisory threshold (below it a result is advisory only) and the
# HIGH_CONFIDENCE flag (the only confidence that earns a green badge, C6).
DEFAULT_ADVISORY_THRESHOLD = 0.70
DEFAULT_GREEN_AT = 0.90
DEFAULT_MAX_ANSWER_CHARS = 2_000  # a report is a paragraph or two, not a document
DEFAULT_MAX_SOURCES = 8  # seed E's largest max_k: more sources dilute the prompt


@dataclass(frozen=True, slots=True)
class ReportSettings:
    """How reports are built.

    Args:
        strict_mode: D2 guardrails; off (D8 rollback) uses the standard prompt over
            every hit and answers even unanswerable results that have hits.
        validate_responses: D5 validation of generated answers.
        advisory_threshold: C2/C3 confidence below which a report is advisory only.
        collection_thresholds: D9 per-collection advisory thresholds replacing
            ``advisory_threshold``; a result of several collections (D3) takes the strictest.
        green_at: C2 HIGH_CONFIDENCE bound; at or above it the badge is green (C6).
        max_answer_chars: longer answers are cut at a sentence end.
        max_sources: hits given to the LLM in strict mode.
        max_source_chars: characters of one hit given to the LLM.
        min_term_coverage: D5 grounding bar (share of answer words found in the sources).
        composite_weights: C1 shares of the composite confidence.
        nonce_key: secret mixed into the prompt boundary nonce (``RAGSIFT_REPORT_NONCE_KEY``);
            ``None`` or empty: a random key per process, so prompts change on restart.
        llm_base_url, llm_model, llm_api_key: the OpenAI-compatible chat endpoint;
            no base URL means extractive reports.
        llm_timeout_s: seconds per read of the chat request.
        llm_deadline_s: seconds for a whole chat call, retries included; past it the
            report is answered extractively.
    """

    strict_mode: bool = True
    validate_responses: bool = True
    advisory_threshold: float = DEFAULT_ADVISORY_THRESHOLD
    collection_thresholds: Mapping[str, float] = field(default_factory=dict)
    green_at: float = DEFAULT_GREEN_AT
    max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS
    max_sources: int = DEFAULT_MAX_SOURCES
    max_source_chars: int = DEFAULT_MAX_SOURCE_CHARS
    min_term_coverage: float = DEFAULT_MIN_TERM_COVERAGE
    composite_weights: CompositeWeights = field(default_factory=CompositeWeights)
    nonce_key: bytes | None = field(default=None, repr=False)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout_s: float = DEFAULT_TIMEOUT_S
    llm_deadline_s: float = DEFAULT_DEADLINE_S

    def __post_init__(self) -> None:
        for name in ("advisory_threshold", "green_at", "min_term_coverage"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigurationError(f"{name} must be in [0, 1], got {value}")
        if self.green_at < self.advisory_threshold:
            raise ConfigurationError(
                f"green_at must be >= advisory_threshold ({self.advisory_threshold}), "
                f"got {self.green_at}"
            )
        for name, value in self.collection_thresholds.items():
            if not 0.0 <= value <= 1.0:
                raise ConfigurationError(
                    f"collection_thresholds[{name!r}] must be in [0, 1], got {value}"
                )
        for name in ("max_answer_chars", "max_sources", "max_source_chars"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("llm_timeout_s", "llm_deadline_s"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.llm_base_url and not self.llm_model:
            raise ConfigurationError(
                f"llm_model is required with llm_base_url {self.llm_base_url!r}, got none"
            )

    def advisory_threshold_for(self, result: RetrievalResult) -> float:
        """D9: the advisory threshold of ``result``'s collections (the strictest of several)."""
        collections = result.collections or [result.collection]
        return max(self.collection_thresholds.get(c, self.advisory_threshold) for c in collections)

    def make_llm_client(self) -> OpenAIChatClient | None:
        """The configured chat client, or ``None`` for extractive reports."""
        if not self.llm_base_url or not self.llm_model:
            return None
        return OpenAIChatClient(
            self.llm_base_url,
            self.llm_model,
            self.llm_api_key,
            timeout=self.llm_timeout_s,
            deadline=self.llm_deadline_s,
        )


def badge_for(
    confidence: float, settings: ReportSettings, advisory_threshold: float | None = None
) -> Badge:
    """C6 badge: green at HIGH_CONFIDENCE, orange at or above the advisory threshold, red below.

    ``advisory_threshold`` replaces the settings' (a collection's own, D9); a
    confidence below it is never green.
    """
    bar = settings.advisory_threshold if advisory_threshold is None else advisory_threshold
    if confidence >= max(settings.green_at, bar):
        return "green"
    return "orange" if confidence >= bar else "red"


def banner_for(confidence: float) -> str:
    """The C6 banner of an advisory-only report."""
    return f"Advisory only — confidence {round(100 * confidence)}%"
