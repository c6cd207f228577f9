"""The language guess: non-English questions are named, English ones never flagged."""

from __future__ import annotations

import pytest

from ragsift.retrieval.language import (
    LANGUAGE_NAMES,
    OTHER_SCRIPT,
    SAMPLE_CHARS,
    guess_language,
    language_shares,
)

pytestmark = pytest.mark.unit

FOREIGN = [
    ("fr", "Combien de temps dure la garantie du thermostat Orbit ?"),
    ("fr", "Quelle est la politique de remboursement ?"),
    ("fr", "Qu'est-ce que le RGPD ?"),
    ("fr", "Où se trouve le siège de l\u2019entreprise ?"),  # a typographic apostrophe
    ("fr", "Pourquoi mon appareil ne s'allume pas ?"),
    ("es", "¿Cuánto dura la garantía del termostato Orbit?"),
    ("es", "¿Cómo restablezco la contraseña?"),
    ("es", "¿Cuál es la política de devoluciones?"),
    ("es", "¿Puedo cancelar mi suscripción en cualquier momento?"),
    ("de", "Wie lange gilt die Garantie für den Orbit-Thermostat?"),
    ("de", "Was ist die Rückgaberichtlinie?"),
    ("de", "Kann ich mein Abo jederzeit kündigen?"),
    ("de", "WIE SETZE ICH DAS PASSWORT ZURÜCK?"),
    ("it", "Quanto dura la garanzia del termostato Orbit?"),
    ("it", "Dove si trova la sede dell'azienda?"),
    ("pt", "Qual é a política de devolução?"),
    ("pt", "Como faço para redefinir a senha?"),
    ("nl", "Hoe lang duurt de garantie van de Orbit-thermostaat?"),
    ("nl", "Waar is het hoofdkantoor van het bedrijf?"),
    (OTHER_SCRIPT, "Orbit 恒温器的保修期是多久？"),
    (OTHER_SCRIPT, "Сколько длится гарантия на термостат Orbit?"),
]

ENGLISH = [
    # SQuAD-like
    "How long is the Orbit thermostat warranty?",
    "In what country is Normandy located?",
    "When did Otto von Bismarck die?",
    "Who was Charles de Gaulle?",
    "What public policy school found it's home in the building Mies van der Rohe designed?",
    "At Millingen aan de Rijn where the Rhine splits, what does it change its name to?",
    "What is la vie en rose?",
    "What does 'est' mean in French?",
    "Don't you have the refund policy?",
    # keyword queries, names borrowed from other languages
    "API rate limits",
    "Los Angeles population",
    "Han dynasty era",
    "die hard sin city son",
    "El Niño effects on Peru",
    "Don Quixote de la Mancha author",
    "Le Mans 24 hours winner",
    "Tour de France 2020 winner",
    "café au lait recipe",
    "Déjà vu à la carte",
    "coup d'état in Chile",
    "Über Eats delivery fees",
    "Das Boot director",
    # greetings
    "Hi there!",
    "Hello",
    "thanks!",
    "Salut",
    # code-ish
    "def foo(x): return x",
    "SELECT * FROM users WHERE id = 1",
    "kubectl get pods -n default",
    "pip install ragsift==0.3",
    "What is π to 5 digits?",
    # nothing to go by
    "",
    "   ",
    "12345 ?!",
]


@pytest.mark.parametrize(("code", "question"), FOREIGN)
def test_non_english_questions_are_named(code: str, question: str) -> None:
    assert guess_language(question) == code
    assert code in LANGUAGE_NAMES


@pytest.mark.parametrize("question", ENGLISH)
def test_english_questions_are_never_flagged(question: str) -> None:
    assert guess_language(question) is None


@pytest.mark.parametrize(
    "text",
    [
        "\x00\x01\x1b[31mcombien\x7f",  # control characters
        "de " * 100_000,  # huge, one shared word repeated
        "\ud800 la garantie",  # a lone surrogate
        "é" * 10_000,
        "l'" * 5_000,
        "\u200b\u200d\ufeff",  # zero-width characters
    ],
)
def test_hostile_text_gets_an_answer_not_an_error(text: str) -> None:
    assert guess_language(text) in (None, *LANGUAGE_NAMES)


def test_a_shared_word_alone_never_makes_a_text_foreign() -> None:
    # "de" is French, Spanish, Portuguese and Dutch, and a WordNet lemma: half a word
    # in each, never two of any language's own.
    assert guess_language("de de") is None
    assert guess_language("la la land") is None


def test_shares_weigh_each_text_by_its_length() -> None:
    french = "Le thermostat est garanti pendant deux ans à compter de la date d'achat. " * 10
    english = "The thermostat is covered for two years from the date of purchase. "
    shares = language_shares([french, english, ""])
    assert shares.total == len(french) + len(english)
    assert shares.foreign == {"fr": len(french)}
    assert shares.top() == ("fr", pytest.approx(len(french) / shares.total))
    assert shares.foreign_share == pytest.approx(len(french) / shares.total)


def test_shares_of_english_or_nothing() -> None:
    english = language_shares(["The warranty lasts two years.", "Refunds take 14 days."])
    assert english.foreign == {}
    assert english.foreign_share == 0.0
    assert english.top() is None
    assert language_shares([]).foreign_share == 0.0


def test_a_long_document_is_guessed_from_its_start() -> None:
    # Past SAMPLE_CHARS nothing is read, but the whole length counts.
    text = "The warranty lasts two years. " * (SAMPLE_CHARS // 10) + "la garantie est de " * 100
    shares = language_shares([text])
    assert shares.foreign == {}
    assert shares.total == len(text)
