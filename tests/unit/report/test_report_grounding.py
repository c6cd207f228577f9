"""answer_issues: the D5 checks the report stage runs on generated answers."""

from __future__ import annotations

import pytest

from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.report import answer_issues, cited_numbers, is_exact_refusal

SOURCES = [
    "Orbit thermostats can be returned within 30 days of delivery for a full refund.",
    "Support is run by Acme Devices from Berlin since March 2019.",
]


def test_grounded_answer_passes() -> None:
    answer = "Orbit thermostats can be returned within 30 days [1]. Acme Devices runs support [2]."
    assert answer_issues(answer, SOURCES) == []


@pytest.mark.parametrize(
    ("answer", "issue"),
    [
        ("Returns are accepted within 60 days [1].", "number '60'"),
        ("Support started on 4 July 2021 [2].", "date"),
        ("Support is run by Globex Corporation [2].", "name 'Globex Corporation'"),
        ("Returns within 30 days [3].", "cites source [3], but 2 sources were given"),
        ("Photosynthesis converts sunlight into chemical energy.", "ungrounded"),
        ("I cannot answer this question based on the provided documents.", "refusal-looking"),
    ],
)
def test_each_issue(answer: str, issue: str) -> None:
    issues = answer_issues(answer, SOURCES)
    assert any(issue in i for i in issues), issues


def test_citation_markers_are_not_numbers_and_do_not_join_names() -> None:
    # "[2]" holds a digit absent from the sources; the two names around "[1]" must stay apart.
    answer = "Refunds are full within 30 days for Orbit [1] Acme Devices is in Berlin [2]."
    assert answer_issues(answer, SOURCES) == []


def test_coverage_bar_is_configurable() -> None:
    answer = "Orbit thermostats ship with batteries, screws and a manual."
    assert answer_issues(answer, SOURCES, min_term_coverage=0.0) == []
    assert answer_issues(answer, SOURCES, min_term_coverage=0.9)
    with pytest.raises(ValueError, match="min_term_coverage must be in"):
        answer_issues(answer, SOURCES, min_term_coverage=2)


def test_exact_refusal_and_citations() -> None:
    assert is_exact_refusal(f'  "{REFUSAL_SENTENCE}" ')
    assert not is_exact_refusal(REFUSAL_SENTENCE + " But maybe 30 days.")
    assert cited_numbers("a [1] b [3][1] c [x]") == {1, 3}
