"""What is ingested is mostly not English: said once, with its share and what it means."""

from __future__ import annotations

import pytest

from ragsift.ingest.language_watch import LanguageWatch, language_warning
from ragsift.retrieval.language import LanguageShares, language_shares

pytestmark = pytest.mark.unit

FRENCH = "Le thermostat Orbit est garanti pendant deux ans à compter de la date d'achat. " * 20
GERMAN = (
    "Die Garantie für den Orbit-Thermostat gilt zwei Jahre ab dem Kaufdatum und ist kostenlos. "
)
ENGLISH = "The Orbit thermostat is covered for two years from the date of purchase. " * 20


def test_the_warning_names_the_share_the_language_and_the_docs() -> None:
    said = language_warning(language_shares([FRENCH, ENGLISH[:300]]), "acme", "manuals")
    assert said is not None
    assert "looks non-English (mostly French," in said
    assert "'acme'" in said
    assert "'manuals'" in said
    assert "read English" in said
    assert "docs/confidence.md, section 13" in said
    assert "The documents are indexed" in said


def test_no_warning_unless_most_of_the_text_is_foreign() -> None:
    assert language_warning(language_shares([ENGLISH]), "t", "c") is None
    assert language_warning(language_shares([FRENCH, ENGLISH, ENGLISH]), "t", "c") is None
    assert language_warning(LanguageShares(0, {}), "t", "c") is None
    assert language_warning(LanguageShares(100, {"fr": 50}), "t", "c") is None  # half: not most


def test_a_non_latin_corpus_is_named_by_its_script() -> None:
    said = language_warning(language_shares(["保修期为两年，自购买之日起计算。" * 10]), "t", "c")
    assert said is not None
    assert "mostly text in a non-Latin script" in said


def test_the_watch_warns_once_per_scope_after_enough_text() -> None:
    watch = LanguageWatch(min_chars=len(FRENCH) + 1)
    assert watch.observe("acme", "manuals", [FRENCH]) is None  # too little seen to judge
    said = watch.observe("acme", "manuals", [GERMAN])
    assert said is not None
    assert "mostly French" in said
    assert watch.observe("acme", "manuals", [FRENCH]) is None  # once
    # Another tenant's scope, and another collection, are judged on their own text.
    assert watch.observe("globex", "manuals", [ENGLISH, ENGLISH]) is None
    assert watch.observe("acme", "faq", [FRENCH, FRENCH]) is not None


def test_english_text_later_outweighs_a_foreign_start() -> None:
    watch = LanguageWatch(min_chars=len(FRENCH) + len(ENGLISH) * 2)
    assert watch.observe("t", "c", [FRENCH]) is None
    assert watch.observe("t", "c", [ENGLISH, ENGLISH]) is None  # judged now: mostly English


def test_the_watch_forgets_the_least_recent_scope_past_its_bound() -> None:
    watch = LanguageWatch(max_scopes=2, min_chars=0)
    assert watch.observe("a", "c", [FRENCH]) is not None
    watch.observe("b", "c", [ENGLISH])
    watch.observe("d", "c", [ENGLISH])  # "a" is forgotten: at worst warned again
    assert watch.observe("a", "c", [FRENCH]) is not None


@pytest.mark.parametrize("bad", [0, -1])
def test_a_watch_that_keeps_no_scope_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="max_size must be >= 1"):
        LanguageWatch(max_scopes=bad)


def test_a_negative_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="min_chars must be >= 0, got -5"):
        LanguageWatch(min_chars=-5)
