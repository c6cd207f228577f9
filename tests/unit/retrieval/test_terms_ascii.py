"""content_terms tells an ASCII text from one that may hold Chinese or Japanese
without searching it: the search cost ~6 us a chunk, on every chunk the
contradiction check reads for the first time (issue 17)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragsift.retrieval import terms

pytestmark = pytest.mark.unit


class _CountingPattern:
    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.searched: list[str] = []

    def search(self, text: str) -> Any:
        self.searched.append(text)
        return self.pattern.search(text)

    def finditer(self, text: str) -> Any:
        return self.pattern.finditer(text)


@pytest.fixture
def cjk(monkeypatch: pytest.MonkeyPatch) -> _CountingPattern:
    counting = _CountingPattern(terms._CJK)
    monkeypatch.setattr(terms, "_CJK", counting)
    return counting


def test_an_ascii_text_is_not_searched_for_chinese_or_japanese(cjk: _CountingPattern) -> None:
    assert terms.content_terms("Items returned within 30 days are refunded.") == {
        "item",
        "return",
        "within",
        "30",
        "day",
        "refund",
    }
    assert cjk.searched == []


def test_a_text_beyond_ascii_is_still_read_in_character_pairs(cjk: _CountingPattern) -> None:
    assert terms.content_terms("Café 退货政策") == {"café", "退货", "货政", "政策"}
    assert cjk.searched  # not ASCII: searched, as before


_REFERENCE_WORDS = re.compile(r"[^\W_]+", re.UNICODE)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_ascii_texts_read_as_every_folded_content_word(text: str) -> None:
    folded = text.casefold()
    expected = {terms._fold(w) for w in _REFERENCE_WORDS.findall(folded) if w not in terms._STOP}
    assert terms.content_terms(text) == expected
