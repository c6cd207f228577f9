"""Response validation (D5): refusals, unsupported facts, answer-source similarity."""

from __future__ import annotations

import numpy as np
import pytest

from ragsift.confidence import (
    REFUSAL_SENTENCE,
    ConfidenceError,
    answer_source_similarity,
    is_refusal,
    unsupported_facts,
    validate_response,
)

SOURCES = [
    "Mobile conversions decreased 15% on 2024-03-04 due to a checkout flow issue.",
    "Jane Smith led the fix; revenue recovered to 1,200,000 by March 18, 2024.",
]


@pytest.mark.parametrize(
    "text",
    [
        REFUSAL_SENTENCE,
        "I CANNOT answer this  based on the provided documents!",
        "Sorry - I can\u2019t answer this question based on the provided documents.",
        "The provided documents do not contain that information.",
    ],
)
def test_refusals_are_detected(text: str) -> None:
    assert is_refusal(text)


def test_ordinary_answer_is_not_a_refusal() -> None:
    assert not is_refusal("Conversions fell 15% because of a checkout issue.")


def test_supported_facts_pass() -> None:
    answer = "Conversions fell 15% on 2024-03-04; Jane Smith fixed it and revenue hit 1200000."
    assert unsupported_facts(answer, SOURCES) == ()


def test_unsupported_number_date_and_name_are_reported() -> None:
    answer = "Conversions fell 40% on 2023-01-02 after John Doe changed the checkout."
    found = {(f.kind, f.text) for f in unsupported_facts(answer, SOURCES)}
    assert found == {("number", "40"), ("date", "2023-01-02"), ("name", "John Doe")}


def test_sentence_initial_capital_is_not_a_name() -> None:
    assert unsupported_facts("Conversions fell. Revenue recovered.", SOURCES) == ()


def test_month_name_dates() -> None:
    assert unsupported_facts("It recovered by March 18, 2024.", SOURCES) == ()
    facts = unsupported_facts("It recovered by April 2, 2024.", SOURCES)
    assert [f.kind for f in facts] == ["date"]


def test_similarity_is_best_cosine() -> None:
    sources = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert answer_source_similarity([1.0, 1.0], sources) == pytest.approx(np.sqrt(0.5))
    with pytest.raises(ConfidenceError, match="answer vector"):
        answer_source_similarity([1.0, 0.0, 0.0], sources)


def test_invalid_answer_is_replaced_by_the_refusal() -> None:
    result = validate_response(
        "Revenue was 9,999 in 1999.",
        SOURCES,
        answer_embedding=[0.0, 1.0],
        source_embeddings=[[1.0, 0.0]],
    )
    assert not result.is_valid
    assert result.final_answer == REFUSAL_SENTENCE
    assert result.similarity == pytest.approx(0.0)
    assert len(result.reasons) == 2
    assert result.to_dict()["unsupported"][0]["kind"] == "number"


def test_valid_answer_and_refusal_pass_through() -> None:
    answer = "Conversions decreased 15% due to a checkout flow issue."
    ok = validate_response(answer, SOURCES, answer_embedding=[1, 0], source_embeddings=[[1, 0.1]])
    assert ok.is_valid
    assert ok.final_answer == answer
    refusal = validate_response(REFUSAL_SENTENCE, [])
    assert refusal.is_valid
    assert refusal.is_refusal
    assert not validate_response("Anything at all.", []).is_valid
