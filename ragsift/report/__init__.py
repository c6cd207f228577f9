"""Reports: confidence-aware prompts, the LLM edge, extractive answers, validation (D4–D8).

Start with :class:`ReportBuilder`::

    builder = ReportBuilder(ReportSettings(), llm=None)   # extractive
    report, evidence = await builder.build(result)
"""

from ragsift.report.builder import (
    EVIDENCE_SOURCE,
    BuiltReport,
    FallbackReason,
    ReportBuilder,
    ReportSettings,
    badge_for,
    banner_for,
)
from ragsift.report.extractive import content_terms, extractive_answer, split_sentences
from ragsift.report.grounding import answer_issues, cited_numbers, is_exact_refusal
from ragsift.report.llm import (
    ChatClient,
    ChatReply,
    LlmDeadlineError,
    LlmResponseError,
    LlmUnavailableError,
    OpenAIChatClient,
)
from ragsift.report.prompts import (
    BOUNDARY_FENCE,
    VARIANTS,
    ChatMessage,
    Prompt,
    PromptVariant,
    boundary_lines,
    build_prompt,
    chat_messages,
    make_nonce,
    neutralise,
    normalise,
    variant_for,
)

__all__ = [
    "BOUNDARY_FENCE",
    "EVIDENCE_SOURCE",
    "VARIANTS",
    "BuiltReport",
    "ChatClient",
    "ChatMessage",
    "ChatReply",
    "FallbackReason",
    "LlmDeadlineError",
    "LlmResponseError",
    "LlmUnavailableError",
    "OpenAIChatClient",
    "Prompt",
    "PromptVariant",
    "ReportBuilder",
    "ReportSettings",
    "answer_issues",
    "badge_for",
    "banner_for",
    "boundary_lines",
    "build_prompt",
    "chat_messages",
    "cited_numbers",
    "content_terms",
    "extractive_answer",
    "is_exact_refusal",
    "make_nonce",
    "neutralise",
    "normalise",
    "split_sentences",
    "variant_for",
]
