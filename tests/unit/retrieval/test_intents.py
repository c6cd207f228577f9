"""D7: greetings and questions about the corpus itself bypass retrieval; the rest is searched."""

from __future__ import annotations

import pytest

from ragsift.retrieval.intents import classify_intent


@pytest.mark.parametrize(
    "text",
    [
        "What topics can you help with?",  # issue 16: was searched before
        "What topics can you help me with",
        "What can you help me with?",
        "What kind of questions can you answer?",
        "Which subjects do you cover?",
        "What are you able to help with?",
        "What can you do?",
        "What documents do you have?",
        "what sources do you have access to?",
        "List your documents.",
        "Show me your topics",
    ],
)
def test_scope_questions(text: str) -> None:
    assert classify_intent(text) == "scope"


@pytest.mark.parametrize("text", ["Hello!", "good morning", "Thanks again"])
def test_greetings(text: str) -> None:
    assert classify_intent(text) == "greeting"


@pytest.mark.parametrize(
    "text",
    [
        "What topics does the warranty cover?",  # about a document, not about the corpus
        "What can you tell me about refunds?",
        "Can you help me return my thermostat?",
        "What documents do I need to return an item?",
        "Which topics can you help with regarding shipping delays in Europe?",
        "hello, how do I reset the thermostat?",
        "What do you know about the Orbit thermostat's warranty?",
    ],
)
def test_real_questions_are_searched(text: str) -> None:
    assert classify_intent(text) == "search"
