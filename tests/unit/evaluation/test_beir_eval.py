"""Issue 13 #2: BEIR folders (written by the test), per-query pools, integrity errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsift.errors import InvalidEventError
from ragsift.evaluation import load_beir, run_retrieval, select_half
from ragsift.retrieval.embedders import HashingEmbedder

CORPUS = [
    {
        "_id": "d1",
        "title": "Zorblat",
        "text": "The zorblat festival happens every spring in Vantu.",
    },
    {"_id": "d2", "title": "", "text": "Kelpmoss grows on the northern cliffs of Ardo."},
    {"_id": "ᅭ", "title": "Quenna", "text": "Quenna river floods the plains of Mirel in autumn."},
    {"_id": "ᄀ", "title": "Tovik", "text": "Tovik bridges are built from woven reeds."},
    {"_id": "d5", "title": "Salmi", "text": "Salmi bakers sell blue bread at the harbour market."},
]
QUERIES = [
    {"_id": "q1", "text": "When does the zorblat festival happen?"},
    {"_id": "q2", "text": "Where does kelpmoss grow?"},
    {"_id": "q3", "text": "Which river floods the plains of Mirel?"},
    {"_id": "q4", "text": "What colour is the harbour bread of the Salmi bakers?"},
    {"_id": "q9", "text": "A training query of another split."},
]
QRELS = [("q1", "d1", 1), ("q2", "d2", 2), ("q3", "ᅭ", 1), ("q4", "d5", 0), ("q9", "d1", 1)]


def write_beir(folder: Path, *, qrels: list[tuple[str, str, int]] = QRELS) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in CORPUS), encoding="utf-8"
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in QUERIES), encoding="utf-8"
    )
    rows = [("query-id", "corpus-id", "score"), *[r for r in qrels if r[0] != "q9"]]
    (folder / "qrels" / "test.tsv").write_text(
        "".join(f"{q}\t{d}\t{s}\n" for q, d, s in rows), encoding="utf-8"
    )
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td1\t1\n", "utf-8")
    return folder


def test_beir_folder_reads_as_a_labelled_set(tmp_path: Path) -> None:
    ds = load_beir(write_beir(tmp_path / "mini"), split="test")
    assert ds.counts() == {"documents": 5, "in_scope": 3, "near_miss": 1}
    by_id = {q.query_id: q for q in ds.queries}
    assert "q9" not in by_id  # another split's query is left out
    assert by_id["q4"].kind == "near_miss"  # judged, nothing relevant
    ids = [d.doc_id for d in ds.documents]
    assert len(set(ids)) == 5  # the two Hangul ids stay distinct
    assert by_id["q3"].relevant == {ids[2]}
    assert ds.documents[0].text.startswith("Zorblat\n\n")  # title is indexed with the text
    assert load_beir(tmp_path / "mini", split="train").counts()["in_scope"] == 1


async def test_a_pooled_query_is_searched_only_within_its_candidates(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "mini")
    (folder / "candidates.jsonl").write_text(
        json.dumps({"query_id": "q1", "doc_ids": ["d2", "d5"]}) + "\n", encoding="utf-8"
    )
    ds = load_beir(folder)
    run = await run_retrieval(ds, HashingEmbedder(64), k=4)
    q1 = next(i for i, q in enumerate(run.queries) if q.query_id == "q1")
    assert {h.doc_id for h in run.hits[q1]} <= {"d2", "d5"}  # d1 would win the whole corpus
    q2 = next(i for i, q in enumerate(run.queries) if q.query_id == "q2")
    assert run.hits[q2][0].doc_id == "d2"  # no pool: the whole corpus
    assert run.relevant_rank()[q1] == 0
    pooled = load_beir(folder, pool="qrels")
    assert all(q.candidates is not None and len(q.candidates) == 1 for q in pooled.queries)


def test_beir_integrity_errors(tmp_path: Path) -> None:
    bad = write_beir(tmp_path / "unknown-doc", qrels=[*QRELS, ("q1", "nope", 1)])
    with pytest.raises(InvalidEventError, match=r"'nope' is not in corpus\.jsonl"):
        load_beir(bad)
    dup = write_beir(tmp_path / "dup")
    with (dup / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"_id": "d1", "text": "a second d1"}) + "\n")
    with pytest.raises(InvalidEventError, match="'d1' is used twice"):
        load_beir(dup)
    broken = write_beir(tmp_path / "broken")
    (broken / "queries.jsonl").write_text('{"_id": "q1", "text": "ok"}\n[[[\n', "utf-8")
    with pytest.raises(InvalidEventError, match=r"queries\.jsonl:2: not JSON"):
        load_beir(broken)
    with pytest.raises(
        InvalidEventError, match=r"dev\.tsv: missing; this folder has qrels for test, train"
    ):
        load_beir(tmp_path / "unknown-doc", split="dev")


def test_qrels_with_any_header_or_none_and_judged_queries_missing(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "mini")
    qrels = folder / "qrels" / "test.tsv"
    body = "q1\td1\t1\nq2\td2\t2\nq3\tᅭ\t1\nq4\td5\t0\n"
    for header in ("", "qid\tdocid\trel\n", "query-id\tcorpus-id\tscore\n"):
        qrels.write_text(header + body, encoding="utf-8")
        ds = load_beir(folder)
        assert ds.counts() == {"documents": 5, "in_scope": 3, "near_miss": 1}, header
        assert ds.notes == []
    # a first line with a number where the score goes is a judgment, never a header
    qrels.write_text("q1\td1\t" + "9" * 5000 + "\n" + body, encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"test\.tsv:1: expected query-id"):
        load_beir(folder)
    # a malformed line past the first is still an error, not a header
    qrels.write_text(body + "q5\td1\tyes\n", encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"test\.tsv:5: expected query-id"):
        load_beir(folder)
    # judged queries that queries.jsonl lacks are left out and named, not dropped silently
    qrels.write_text(body + "q7\td1\t1\nq8\td2\t1\n", encoding="utf-8")
    ds = load_beir(folder)
    assert ds.counts()["in_scope"] == 3
    assert len(ds.notes) == 1
    assert "2 judged queries are not in queries.jsonl, left out" in ds.notes[0]
    assert "'q7'" in ds.notes[0]
    empty = tmp_path / "noqrels"
    write_beir(empty)
    for tsv in (empty / "qrels").glob("*.tsv"):
        tsv.unlink()
    with pytest.raises(InvalidEventError, match="holds no qrels file"):
        load_beir(empty)


def test_halves_split_queries_and_keep_the_beir_corpus(tmp_path: Path) -> None:
    ds = load_beir(write_beir(tmp_path / "mini"))
    one, two = select_half(ds, 1), select_half(ds, 2)
    ids_one = {q.query_id for q in one.queries}
    ids_two = {q.query_id for q in two.queries}
    assert not ids_one & ids_two
    assert ids_one | ids_two == {q.query_id for q in ds.queries}
    assert len(one.documents) == len(two.documents) == 5


def test_cli_shows_what_loading_left_out(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ragsift.cli import app

    folder = write_beir(tmp_path / "mini", qrels=[*QRELS, ("q7", "d1", 1)])
    # --half 3 stops the run right after loading: the warning is printed before
    result = CliRunner().invoke(app, ["eval", "--dataset", str(folder), "--half", "3"])
    assert result.exit_code == 2
    assert "1 judged query is not in queries.jsonl, left out (first: 'q7')" in result.stderr


@pytest.mark.parametrize("text", ["\t \u3000 ", "\n"])
def test_a_whitespace_question_is_refused_as_an_empty_one(tmp_path: Path, text: str) -> None:
    # Only "" was refused: whitespace questions were evaluated, and took recall@8 from
    # 1.000 to 0.558 on a set where half the questions were blank.
    folder = write_beir(tmp_path / "blank")
    (folder / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": text}) + "\n", encoding="utf-8"
    )
    with pytest.raises(InvalidEventError, match=r"queries\.jsonl:1: needs a non-empty string"):
        load_beir(folder)


def test_a_set_question_in_the_out_of_scope_file_is_left_out_and_said(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "both")
    oos = tmp_path / "oos.jsonl"
    rows = [
        {"_id": "o1", "text": "  WHERE does kelpmoss   grow? "},  # q2, case and spacing aside
        {"_id": "o2", "text": "Who painted the ceiling of the Sistine Chapel?"},
    ]
    oos.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    labelled = load_beir(folder, out_of_scope=oos)
    off = [q for q in labelled.queries if q.kind == "out_of_scope"]
    assert [q.query_id for q in off] == ["oos-o2"]
    assert any("1 out-of-scope question is also in queries.jsonl" in n for n in labelled.notes)


def test_a_query_id_on_two_lines_with_other_text_is_an_error(tmp_path: Path) -> None:
    """Which question the qrels judge was whichever line came last: two texts under one id
    were both asked, or the later one replaced nothing and was scored as the first."""
    folder = write_beir(tmp_path / "dup")
    with (folder / "queries.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"_id": "q2", "text": "Where does the zorblat happen?"}) + "\n")
    with pytest.raises(
        InvalidEventError,
        match=r"queries\.jsonl:6: query id 'q2' is on line 2 too, with another 'text'",
    ):
        load_beir(folder)
    # another split's query is no exception: the file holds one question per id
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for row in [*QUERIES, {"_id": "q9", "text": "Ｑ９ in other words 中文"}]:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    with pytest.raises(InvalidEventError, match=r"queries\.jsonl:6: query id 'q9'"):
        load_beir(folder)


def test_a_query_repeated_exactly_is_asked_once_and_said(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "again")
    with (folder / "queries.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(QUERIES[0]) + "\n")
        handle.write(json.dumps({"_id": 7, "text": "seven"}) + "\n")
        handle.write(json.dumps({"_id": "7", "text": "seven"}) + "\n")  # 7 and "7": one id
    ds = load_beir(folder)
    assert ds.counts() == {"documents": 5, "in_scope": 3, "near_miss": 1}
    assert [q.query_id for q in ds.queries].count("q1") == 1
    assert ds.notes == [
        f"{folder / 'queries.jsonl'}: 2 lines repeat an earlier query (same id and text),"
        " read once (first: 'q1')"
    ]
    oos = tmp_path / "oos.jsonl"
    rows = [{"_id": "o1", "text": "Who won?"}, {"_id": "o1", "text": "Who won?"}]
    oos.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    off = [q for q in load_beir(folder, out_of_scope=oos).queries if q.kind == "out_of_scope"]
    assert [q.query_id for q in off] == ["oos-o1"]
    oos.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"_id": "o1", "text": "Who lost?"}))
    with pytest.raises(InvalidEventError, match=r"oos\.jsonl:2: query id 'o1' is on line 1"):
        load_beir(folder, out_of_scope=oos)


def test_a_pair_judged_with_two_scores_is_an_error(tmp_path: Path) -> None:
    """The last line's score decided silently: `q1 d1 1` then `q1 d1 0` made q1 a near
    miss, `q4 d5 0` then `q4 d5 1` made it in scope."""
    for extra, line in ((("q1", "d1", 0), 6), (("q4", "d5", 1), 6)):
        folder = write_beir(tmp_path / f"{extra[0]}", qrels=[*QRELS[:4], extra])
        first = [r[:2] for r in QRELS].index(extra[:2]) + 2
        with pytest.raises(
            InvalidEventError,
            match=rf"test\.tsv:{line}: query '{extra[0]}', doc '{extra[1]}' is judged"
            rf" {extra[2]} here and {1 - extra[2]} on line {first}; a pair takes one score",
        ):
            load_beir(folder)
    same = write_beir(tmp_path / "same", qrels=[*QRELS, ("q1", "d1", 1)])  # a repeat: harmless
    assert load_beir(same).counts() == {"documents": 5, "in_scope": 3, "near_miss": 1}


def test_a_query_with_two_pools_is_an_error(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "pools")
    rows = [{"query_id": "q1", "doc_ids": ["d1", "d2"]}, {"query_id": "q1", "doc_ids": ["d5"]}]
    (folder / "candidates.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    with pytest.raises(InvalidEventError, match=r"candidates\.jsonl:2: query id 'q1' is on line 1"):
        load_beir(folder)
    (folder / "candidates.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[0]))
    assert next(q for q in load_beir(folder).queries if q.query_id == "q1").candidates == (
        "d1",
        "d2",
    )


@pytest.mark.parametrize("doc_id", ["NaN", "Infinity", "1e999", "2.0", "true", "null"])
def test_a_pool_doc_id_that_is_no_string_or_integer_is_an_error(
    tmp_path: Path, doc_id: str
) -> None:
    """str() named a NaN doc "nan", 1e999 "inf": a corpus with such an _id matched."""
    folder = write_beir(tmp_path / "pools")
    (folder / "candidates.jsonl").write_text(
        f'{{"query_id": "q1", "doc_ids": ["d1", {doc_id}]}}\n', encoding="utf-8"
    )
    with pytest.raises(
        InvalidEventError, match=r"candidates\.jsonl:1: 'doc_ids' must hold strings or integers"
    ):
        load_beir(folder)
