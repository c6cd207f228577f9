"""Extractive answers: best sentences first, each cited, bounded, empty when nothing matches."""

from __future__ import annotations

from typing import Any

import pytest

from ragsift.report import content_terms, extractive_answer, split_sentences


def test_best_sentence_first_with_its_citation(make_hit: Any) -> None:
    hits = [
        make_hit(1, "The Orbit has a blue display. Thermostats can be returned within 30 days."),
        make_hit(2, "Returned thermostats are refunded in full within 30 days."),
    ]
    answer = extractive_answer("Can thermostats be returned for a refund?", hits)
    assert answer.startswith("Returned thermostats are refunded in full within 30 days. [2]")
    assert "Thermostats can be returned within 30 days. [1]" in answer
    assert "blue display" not in answer


def test_ties_prefer_the_better_ranked_hit(make_hit: Any) -> None:
    hits = [make_hit(1, "Refunds take five days."), make_hit(2, "Refunds take two days.")]
    answer = extractive_answer("refunds", hits, max_sentences=1)
    assert answer == "Refunds take five days. [1]"


def test_bounded_by_sentences_and_chars(make_hit: Any) -> None:
    text = " ".join(f"Refund rule number {n} applies." for n in range(10))
    assert extractive_answer("refund", [make_hit(1, text)]).count("[1]") == 3
    short = extractive_answer("refund", [make_hit(1, text)], max_chars=60)
    assert len(short) <= 60
    cut = extractive_answer("refund", [make_hit(1, "refund " * 50)], max_chars=30)
    assert len(cut) <= 30
    assert cut.endswith("… [1]")


def test_nothing_matching_gives_empty(make_hit: Any) -> None:
    assert extractive_answer("quantum entanglement", [make_hit(1, "Refunds take days.")]) == ""
    assert extractive_answer("anything", []) == ""


def test_duplicate_sentences_are_quoted_once(make_hit: Any) -> None:
    hits = [make_hit(1, "Refunds take five days."), make_hit(2, "Refunds take five days.")]
    assert extractive_answer("refunds", hits) == "Refunds take five days. [1]"


def test_terms_and_sentences() -> None:
    assert content_terms("How is the thermostat returned?") == {"thermostat", "return"}
    assert split_sentences("One. Two!  Three?\n\nFour") == ["One.", "Two!", "Three?", "Four"]


def test_arguments_are_checked(make_hit: Any) -> None:
    with pytest.raises(ValueError, match="max_sentences must be >= 1, got 0"):
        extractive_answer("q", [make_hit(1, "t")], max_sentences=0)


def test_a_chinese_question_is_answered_from_the_sentence_it_asks_about(make_hit: Any) -> None:
    # Asked densely of a Chinese warranty page, '保修' ("warranty") scored HIGH 0.98 and
    # the report refused it: a run of Han characters was one word, shared with nothing.
    hits = [
        make_hit(1, "每台Orbit恒温器自交付之日起享有两年有限保修。"),
        make_hit(2, "退货须在30天内。"),
    ]
    assert extractive_answer("保修", hits) == "每台Orbit恒温器自交付之日起享有两年有限保修。 [1]"
    assert extractive_answer("恒温器的保修期是多久？", hits).endswith("[1]")
    assert {"保修", "恒温", "orbit"} <= content_terms("Orbit恒温器保修")
    assert content_terms("猫") == {"猫"}  # a lone character stands for itself


def test_a_text_without_chinese_or_japanese_reads_as_its_words_do_one_by_one() -> None:
    # content_terms looks for Chinese or Japanese once per text, not once per word:
    # a text with a run of them anywhere still has its words read piece by piece.
    from ragsift.retrieval.terms import _STOP, _WORD, _fold, _pieces

    for text in (
        "Returned items are refunded within 30 days.",
        "Straße ÉCOLE naïve Ünïcode_words and the stops",
        "Returns: 退货须在30天内 for the Orbit恒温器",
        "",
    ):
        assert content_terms(text) == {
            _fold(p) for w in _WORD.findall(text.casefold()) for p in _pieces(w) if p not in _STOP
        }
    assert content_terms("Returns: 退货须 policy") == {"return", "退货", "货须", "policy"}


def test_chinese_sentences_end_at_their_full_width_marks(make_hit: Any) -> None:
    # Without spaces after 。, a page was one sentence, quoted whole as the answer.
    text = "每台恒温器享有两年有限保修。退货须在30天内！门店几点开门？九点。"
    assert split_sentences(text) == [
        "每台恒温器享有两年有限保修。",
        "退货须在30天内！",
        "门店几点开门？",
        "九点。",
    ]
    assert extractive_answer("保修", [make_hit(1, text)]) == "每台恒温器享有两年有限保修。 [1]"
