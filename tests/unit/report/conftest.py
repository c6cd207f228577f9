"""Factories for the report tests: retrieval results, hits and a scripted chat client."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from ragsift.report import ChatMessage, ChatReply
from ragsift.schemas import Citation, ConfidenceBreakdown, RetrievalResult, RetrievedChunk

TEXTS = (
    "Orbit thermostats can be returned within 30 days of delivery for a full refund. "
    "Refunds are paid to the original payment method.",
    "The Orbit thermostat supports Wi-Fi and works with most heating systems.",
    "Return shipping is free for customers in the European Union.",
)
QUESTION = "How many days do I have to return the Orbit thermostat for a full refund?"


def hit(n: int, text: str, **overrides: Any) -> RetrievedChunk:
    """Hit ``n`` (rank n) with ``text``; keyword overrides replace the defaults."""
    fields: dict[str, Any] = {
        "chunk_id": f"c{n}",
        "doc_id": f"d{n}",
        "text": text,
        "rank": n,
        "score": max(0.95 - 0.05 * n, 0.0),
        "citation": Citation(chunk_id=f"c{n}", doc_id=f"d{n}", source=f"docs/policy-{n}.md"),
    }
    fields.update(overrides)
    return RetrievedChunk(**fields)


def _levels(confidence: float) -> dict[str, Any]:
    """Status, level and flag for a confidence, as the retrieval worker's defaults set them."""
    if confidence >= 0.85:
        status, level = "high_confidence", "HIGH"
    elif confidence >= 0.70:
        status, level = "medium_confidence", "MEDIUM"
    elif confidence >= 0.50:
        status, level = "low_confidence", "LOW"
    else:
        status, level = "no_relevant_context", "VERY_LOW"
    if confidence >= 0.90:
        flag = "HIGH_CONFIDENCE"
    elif confidence >= 0.70:
        flag = "MEDIUM_CONFIDENCE"
    elif confidence >= 0.50:
        flag = "LOW_CONFIDENCE"
    else:
        flag = "VERY_LOW_CONFIDENCE"
    return {
        "status": status,
        "level": level,
        "advisory_flag": flag,
        "advisory_only": confidence < 0.70,
        "answerable": confidence >= 0.50,
    }


def build_result(**overrides: Any) -> RetrievalResult:
    """A high-confidence, answerable result over :data:`TEXTS`; overrides replace fields.

    Passing ``confidence`` alone also sets the status, level, flag and answerability
    it implies; passing ``texts`` builds the hits from them.
    """
    texts = overrides.pop("texts", TEXTS)
    confidence = overrides.get("confidence", 0.93)
    hits = overrides.pop("hits", [hit(n, t) for n, t in enumerate(texts, 1)])
    fields: dict[str, Any] = {
        "result_id": "r-q1",
        "query_id": "q1",
        "tenant_id": "acme",
        "collection": "default",
        "query": QUESTION,
        "confidence": confidence,
        "breakdown": ConfidenceBreakdown(scorer="calibrated"),
        "hits": hits,
        "filtered_count": 0,
        "total_found": len(hits),
        "match_count": len(hits),
        "threshold": 0.7,
        "stop_reason": "threshold" if hits else "no_results",
        "chunks_retrieved": len(hits),
        "embedder_id": "offline",
        **_levels(confidence),
    }
    fields.update(overrides)
    return RetrievalResult(**fields)


@pytest.fixture
def make_result() -> Callable[..., RetrievalResult]:
    """The :func:`build_result` factory."""
    return build_result


class ScriptedChat:
    """A chat client that answers from a script and records what it was asked."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.calls: list[list[ChatMessage]] = []
        self.closed = False

    async def complete(self, messages: Sequence[ChatMessage]) -> ChatReply:
        """The next scripted reply (the last one repeats)."""
        self.calls.append(list(messages))
        reply = self.replies[0] if len(self.replies) == 1 else self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return ChatReply(reply, "scripted")

    async def close(self) -> None:
        """Remember it was closed."""
        self.closed = True


@pytest.fixture
def chat() -> Callable[..., ScriptedChat]:
    """Build a :class:`ScriptedChat` from replies."""
    return ScriptedChat


@pytest.fixture
def make_hit() -> Callable[..., RetrievedChunk]:
    """The :func:`hit` factory."""
    return hit
