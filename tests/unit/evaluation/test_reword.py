"""Questions reworded with synonyms (ADR 042): the bundled table, the rewording, the
loader and the command line's ``--reword``."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.evaluation.reword import reword, reworded_articles, synonym
from ragsift.evaluation.squad import load_squad
from tests.factories import load_script

CONTEXT = "The car of the king was a gift from the teacher, who built it in 1905."


def _rng() -> random.Random:
    return random.Random(7)


def test_a_word_its_paragraph_uses_is_swapped_for_one_it_does_not() -> None:
    question, eligible, swapped = reword("Which car did the teacher give?", CONTEXT, _rng(), 1.0)
    assert question == "Which auto did the instructor give?"
    assert (eligible, swapped) == (2, 2)
    unchanged, eligible, swapped = reword("Which car did the teacher give?", CONTEXT, _rng(), 0.0)
    assert unchanged == "Which car did the teacher give?"
    assert (eligible, swapped) == (2, 0)


def test_names_numbers_function_words_and_unshared_words_stay() -> None:
    # "King" is capitalised (a name), "1905" a number, "movie" not in the paragraph.
    question, eligible, _ = reword(
        "When did King Edward see the movie in 1905?", CONTEXT, _rng(), 1.0
    )
    assert question == "When did King Edward see the movie in 1905?"
    assert eligible == 0
    # The first word is capitalised by the sentence, not because it is a name.
    assert reword("Car of which king?", CONTEXT, _rng(), 1.0)[0] == "Auto of which rex?"


def test_a_synonym_the_paragraph_uses_is_passed_over() -> None:
    assert synonym("car", set()) == "auto"
    assert synonym("car", {"auto"}) == "automobile"
    assert synonym("car", {"auto", "automobile", "machine", "motorcar"}) is None
    assert synonym("cars", set()) == "autos"  # a plural noun keeps its s
    assert synonym("dogs", set()) is None  # "dog" is a verb too: "dogs" may be one
    assert synonym("qwertyuiop", set()) is None


def test_articles_are_reworded_in_order_from_one_seed_and_bad_entries_left_alone() -> None:
    articles: list[Any] = [
        {"title": "A", "paragraphs": [{"context": CONTEXT, "qas": [{"question": "A car?"}]}]},
        {"title": "B", "paragraphs": "not a list"},
        {"title": "C", "paragraphs": [{"context": 3, "qas": [{"question": "A car?"}]}]},
        {"title": "D", "paragraphs": [{"context": CONTEXT, "qas": [{"question": None}, "x"]}]},
    ]
    counts: dict[str, int] = {}
    first = reworded_articles(articles, 1.0, counts)
    assert first == reworded_articles(articles, 1.0)  # seeded: the same every time
    assert first[0]["paragraphs"][0]["qas"][0]["question"] == "A auto?"
    assert first[1:] == articles[1:]  # left for the loader to name
    assert counts == {"questions": 1, "changed": 1, "eligible_words": 1, "swapped_words": 1}
    assert articles[0]["paragraphs"][0]["qas"][0]["question"] == "A car?"  # not in place
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        reworded_articles(articles, 1.5)


def _squad(path: Path) -> Path:
    qas = [
        {"id": "q1", "question": "Which car was a gift?", "answers": [{"text": "x"}]},
        {"id": "q2", "question": "Who built the car?", "answers": [{"text": "y"}]},
    ]
    raw = {"data": [{"title": "Gift", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    path.write_text(json.dumps(raw))
    return path


def test_the_loader_rewords_both_files_and_says_so_in_the_sets_name(tmp_path: Path) -> None:
    labelled = _squad(tmp_path / "dev.json")
    other = tmp_path / "other.json"
    other.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "title": "Elsewhere",
                        "paragraphs": [
                            {"context": "A teacher.", "qas": [{"question": "A teacher?"}]}
                        ],
                    }
                ]
            }
        )
    )
    plain = load_squad(labelled, other)
    reworded = load_squad(labelled, other, reword=1.0)
    assert [q.text for q in plain.queries] == [
        "Which car was a gift?",
        "Who built the car?",
        "A teacher?",
    ]
    assert [q.text for q in reworded.queries] == [
        "Which auto was a gift?",
        "Who reinforced the auto?",
        "A instructor?",
    ]
    assert reworded.name == "dev reworded at 100%"
    assert plain.name == "dev"
    assert reworded.documents == plain.documents  # the paragraphs are not touched


def test_reword_is_refused_for_a_beir_folder_and_outside_zero_to_one(tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "A car."}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "A car?"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    runner = CliRunner()
    out = tmp_path / "cal.json"
    refused = runner.invoke(
        app, ["calibrate", "--dataset", str(beir), "--reword", "0.5", "-o", str(out)]
    )
    assert refused.exit_code == 2
    assert "--reword: SQuAD-format sets only" in " ".join(refused.stderr.split())
    labelled = _squad(tmp_path / "dev.json")
    wide = runner.invoke(app, ["eval", "--labelled", str(labelled), "--reword", "1.5"])
    assert wide.exit_code == 2
    assert not out.exists()


def test_the_table_writer_reads_wordnets_files_as_wordnet_writes_them(tmp_path: Path) -> None:
    """A two-synset WordNet in the database's own format: the script's lines are what
    the rewording needs (most frequent sense, candidates filtered, the noun sense kept
    apart for a plural's stem)."""
    head = "  1 This software and database is being provided to you\n"
    car = "00000001 06 n 03 car 0 auto 0 carriage 0 000 | a motor vehicle  \n"
    data_noun = head + car
    offset = len(head.encode())
    drive = "00000002 38 v 02 drive 0 motor 0 000 | travel in a car  \n"
    data_verb = head + drive
    files = {
        "index.noun": head + f"car n 1 0 1 1 {offset:08d}  \n",
        "index.verb": head + f"drive v 1 0 1 3 {offset:08d}  \n",
        "index.adj": head,
        "index.adv": head,
        "data.noun": data_noun,
        "data.verb": data_verb,
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    script = load_script("wordnet_synonyms")
    script.WORDNET = tmp_path
    script.synset_lemmas.cache_clear()
    assert script.table_lines(script.wordnet_index()) == [
        "car\tauto,carriage\tauto,carriage",  # "car" itself and "car"-prefixed lemmas never
        "drive\tmotor\t",  # a verb: its plural-looking "drives" is no noun
    ]


@pytest.mark.parametrize("share", ["nan", "inf", "-0.1", "1.5"])
def test_a_share_that_is_no_share_is_one_clear_error(share: str, tmp_path: Path) -> None:
    labelled = _squad(tmp_path / "dev.json")
    result = CliRunner().invoke(app, ["eval", "--labelled", str(labelled), "--reword", share])
    assert result.exit_code == 2
    assert "Invalid value for '--reword'" in " ".join(result.stderr.split())


def test_hostile_questions_are_reworded_or_left_alone_never_broken(tmp_path: Path) -> None:
    """Non-Latin words, control characters, a 100,000-character question and ids of odd
    kinds go through the rewording as the plain loader takes them: only the Latin words
    the paragraph shares change, and each question keeps its id and place."""
    long_question = "car " * 25_000
    qas = [
        {"id": "q1", "question": "Которая car была подарком?", "answers": [{"text": "x"}]},
        {"id": "q2", "question": "car\x00\x07\u202e teacher?", "answers": [{"text": "y"}]},
        {"id": "q3", "question": long_question, "answers": [{"text": "z"}]},
        {"id": {"nested": [1, [2, [3]]]}, "question": "汽车 car?", "answers": [{"text": "w"}]},
    ]
    raw = {"data": [{"title": "Gift", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(raw))
    plain, reworded = load_squad(path), load_squad(path, reword=1.0)
    assert [q.query_id for q in reworded.queries] == [q.query_id for q in plain.queries]
    texts = [q.text for q in reworded.queries]
    assert texts[0] == "Которая auto была подарком?"
    assert texts[1] == "auto\x00\x07\u202e instructor?"
    assert texts[2] == "auto " * 25_000
    assert texts[3] == "汽车 auto?"
