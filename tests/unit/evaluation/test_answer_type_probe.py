"""`scripts/answer_type_probe.py`: question types, candidates the question does not
hold, and a planted answer-type signal found where word coverage sees none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.factories import SCRIPTS, load_script

SCRIPT = SCRIPTS / "answer_type_probe.py"


def _script() -> ModuleType:
    return load_script("answer_type_probe")


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When did the bridge open?", "date"),
        ("In what year was it built?", "date"),
        ("How many people live there?", "number"),
        ("Who designed the bridge?", "name"),
        ("Where is the bridge?", "name"),
        ("What is the bridge made of?", None),
        ("Why was it closed?", None),
    ],
)
def test_each_question_word_asks_for_its_kind(question: str, kind: str | None) -> None:
    assert _script().expected_type(question) == kind


def test_a_candidate_the_question_already_holds_does_not_count() -> None:
    script = _script()
    assert not script.has_candidate("date", "It was rebuilt in 1920.", "What happened in 1920?")
    assert script.has_candidate("date", "It was rebuilt in 1921.", "What happened in 1920?")
    assert not script.has_candidate("number", "It was rebuilt.", "How many times?")


def _planted(path: Path) -> None:
    """Pairs that share the question's words equally; only the answering one has a year."""
    articles = []
    for i in range(40):
        name = f"Quelbridge{i}"
        gold = f"The {name} crossing opened in {1900 + i}. It spans the wide river."
        other = f"The {name} crossing opened with great fanfare. It spans the wide river."
        articles.append(
            {
                "title": name,
                "paragraphs": [
                    {
                        "context": gold,
                        "qas": [
                            {
                                "id": f"q{i}",
                                "question": f"When did the {name} crossing open?",
                                "is_impossible": False,
                                "answers": [{"text": str(1900 + i), "answer_start": 0}],
                            }
                        ],
                    },
                    {"context": other, "qas": []},
                ],
            }
        )
    path.write_text(json.dumps({"version": "v2.0", "data": articles}), encoding="utf-8")


def test_a_planted_answer_type_signal_is_found_where_coverage_sees_none(tmp_path: Path) -> None:
    source = tmp_path / "planted.json"
    _planted(source)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(source)], capture_output=True, text=True, check=True
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["pairs"] == 40
    assert figures["typed_share"] == 1.0
    assert figures["without_typed"]["auroc"] <= 0.6  # both paragraphs cover the question alike
    assert figures["with_typed"]["auroc"] == 1.0
    assert figures["candidate_found"]["date"] == {
        "questions": 40,
        "answering": 1.0,
        "on_topic": 0.0,
    }


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"data": "x"}', "not SQuAD format"),
        ("[" * 100_000, "cannot read a SQuAD file"),
        ('{"data": [{"title": "T", "paragraphs": [{"context": "", "qas": []}]}]}', "no paragraphs"),
        (
            r'{"data": [{"title": "T\u202e", "paragraphs": [{"context": "\u0000", "qas": '
            '[{"id": "1", "question": "When?", "answers": [{"text": "x"}]}]}]}]}',
            "0 pairs, need 5",
        ),
    ],
)
def test_a_file_it_cannot_use_gets_one_clear_error(tmp_path: Path, content: str, says: str) -> None:
    source = tmp_path / "bad.json"
    source.write_text(content, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(source)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
