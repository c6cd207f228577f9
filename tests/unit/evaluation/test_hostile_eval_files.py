"""Evaluation inputs a user hands over (SQuAD files, BEIR folders, probe files): whatever
their bytes, one clear error naming the file (and line), or texts that can be embedded.

A lone surrogate escape (``"\\ud800"``: JSON, but no Unicode text) used to reach the
embedder and crash ``eval``/``calibrate`` with a traceback; so did a probe line nested
past the parser's stack or holding an integer past Python's digit limit, and a qrels
file that is not UTF-8 or has a field past csv's size limit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsift.errors import InvalidEventError
from ragsift.evaluation.beir import load_beir
from ragsift.evaluation.dataset import LabelledSet
from ragsift.evaluation.probes import load_probes
from ragsift.evaluation.squad import load_squad
from ragsift.ingest.loaders import jsonl_rows
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.engines import packaged_calibration_path
from tests.unit.cli.conftest import error_lines, run_cli

CORPUS = [{"_id": f"d{i}", "text": f"Doc {i}."} for i in range(3)]
QUERIES = [{"_id": f"q{i}", "text": f"Doc {i}?"} for i in range(3)]
QRELS = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(3))
FIXTURE = [
    ("corpus.jsonl", "".join(json.dumps(row) + "\n" for row in CORPUS)),
    ("queries.jsonl", "".join(json.dumps(row) + "\n" for row in QUERIES)),
    ("qrels/test.tsv", QRELS),
]


def _beir(folder: Path, **replaced: bytes) -> Path:
    for name, text in FIXTURE:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(replaced.get(name.split("/")[-1].replace(".", "_"), text.encode()))
    return folder


def _squad(question: str = "Which car?", context: str = "The car was red.") -> str:
    """A one-question SQuAD file; ``LONE`` in a text becomes the escape ``\\ud800``."""
    qas = [{"id": "q1", "question": question, "answers": [{"text": "red"}]}]
    paragraphs = [{"context": context, "qas": qas}]
    squad = json.dumps({"data": [{"title": "Cars", "paragraphs": paragraphs}]})
    return squad.replace("LONE", "\\ud800")


def _texts(dataset: LabelledSet) -> list[str]:
    return [d.text for d in dataset.documents] + [q.text for q in dataset.queries]


@pytest.mark.parametrize(
    ("replaced", "message"),
    [
        ({"test_tsv": b"q\xe90\td0\t1\n"}, r"qrels/test\.tsv: not UTF-8 text"),
        ({"test_tsv": b"q0\td0\t1\nq" + b"x" * 200_000 + b"\td1\t1\n"}, r"test\.tsv:2: not TSV"),
        ({"queries_jsonl": b'{"_id": "q0", "text": "a \\ud800 b"}\n'}, r"queries\.jsonl:1: holds"),
        ({"corpus_jsonl": b'{"_id": "d0", "text": "\\udfff"}\n'}, r"corpus\.jsonl:1: holds"),
    ],
)
def test_a_beir_folder_that_used_to_crash_is_one_error(
    tmp_path: Path, replaced: dict[str, bytes], message: str
) -> None:
    folder = _beir(tmp_path / "beir", **replaced)
    with pytest.raises(InvalidEventError, match=message):
        load_beir(folder)


@pytest.mark.parametrize(
    "squad",
    [_squad(question="Which LONE car?"), _squad(context="The LONE car.")],
)
def test_a_squad_file_with_a_lone_surrogate_is_one_error(tmp_path: Path, squad: str) -> None:
    path = tmp_path / "dev.json"
    path.write_text(squad, encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"dev\.json: holds .*a lone surrogate"):
        load_squad(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"text": "q", "group": ' + "9" * 5_000 + "}", "not JSON .*digits"),
        ('{"text": "q", "group": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
        ('{"text": "what \\ud800 is"}', "a lone surrogate"),
    ],
)
def test_a_probe_line_that_used_to_crash_is_one_error(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "probes.jsonl"
    path.write_text('{"text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InvalidEventError, match=rf"probes\.jsonl:2: .*{message}"):
        load_probes(path)


def test_a_probe_may_hold_a_line_separator_inside_its_json_string(tmp_path: Path) -> None:
    """JSON allows U+2028 and U+0085 in a string as they are; the line is not cut there."""
    path = tmp_path / "probes.jsonl"
    path.write_text('{"text": "one\u2028two"}\r\n{"text": "three\x85four"}\n', encoding="utf-8")
    assert [p.text for p in load_probes(path)] == ["one\u2028two", "three\x85four"]


def test_eval_exits_2_naming_the_file_not_with_a_traceback(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "beir", test_tsv=b"q\xff0\td0\t1\n")
    result = run_cli(["eval", "--dataset", str(folder)])
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [
        f"error: {folder / 'qrels' / 'test.tsv'}: not UTF-8 text (invalid start byte)"
    ]
    probes = tmp_path / "probes.jsonl"
    probes.write_text('{"text": "' + "\\ud800" + '"}\n', encoding="utf-8")
    artifact = packaged_calibration_path(HashingEmbedder().embedder_id, reader=False)
    args = ["--dataset", str(_beir(tmp_path / "ok")), "--artifact", str(artifact)]
    result = run_cli(["eval", *args, "--probes", str(probes)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    [line] = error_lines(result)
    assert line.startswith(f"error: {probes}:1: holds '\\ud800'")


_ANY_JSON = st.recursive(st.none() | st.integers() | st.text(max_size=6), st.lists, max_leaves=8)
_ESCAPES = ['{"text": "\\ud83d\\ude00 ok"}', '{"text": "\\ud83d"}', '{"_id": 1, "text": "\\udc00"}']
_LINE = st.one_of(
    st.text(max_size=40),
    st.builds(json.dumps, _ANY_JSON),
    st.sampled_from(_ESCAPES),
    st.builds(lambda n: '{"text": "q", "g": ' + "[" * n + "]" * n + "}", st.integers(0, 3_000)),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_LINE, max_size=4), raw=st.binary(max_size=40), where=st.integers(0, 2))
def test_any_lines_load_or_fail_with_one_error_and_every_text_encodes(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], raw: bytes, where: int
) -> None:
    """Lines of any kind (text, JSON of any shape, escapes, nesting past the stack) in a
    probe file, a BEIR file, or a SQuAD file with raw bytes mixed in: each reader returns
    texts that encode as UTF-8, or raises InvalidEventError: nothing else escapes."""
    folder = tmp_path_factory.mktemp("hostile")
    body = "\n".join(lines).encode("utf-8", "surrogatepass")
    mixed = body[: len(body) // 2] + raw + body[len(body) // 2 :]
    name = ("queries_jsonl", "corpus_jsonl", "test_tsv")[where]
    probes, squad = folder / "probes.jsonl", folder / "dev.json"
    probes.write_bytes(mixed)
    squad.write_bytes(mixed)
    readers = [
        lambda: [p.text for p in load_probes(probes)],
        lambda: [
            text for _, row in jsonl_rows(probes) for text in [json.dumps(row, ensure_ascii=False)]
        ],
        lambda: _texts(load_beir(_beir(folder / "beir", **{name: mixed}))),
        lambda: _texts(load_squad(squad)),
    ]
    for read in readers:
        try:
            texts = read()
        except InvalidEventError:
            continue
        for text in texts:
            text.encode("utf-8")  # what the embedder does first
