"""Evaluation and calibration on a small SQuAD-format set written by the test."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import SIGNAL_NAMES, CalibrationArtifact, load_calibration
from ragsift.errors import ConfigurationError, InvalidEventError
from ragsift.evaluation import (
    evaluate_scorers,
    fit_from_run,
    load_squad,
    run_retrieval,
    select_half,
)
from ragsift.evaluation.dataset import limit_questions
from ragsift.evaluation.runner import RetrievalRun
from ragsift.evaluation.scoring import split_mask
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.engines import EngineSet, packaged_calibration_path
from ragsift.settings import ConfidenceSettings


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(3))


def make_topics(
    n_topics: int, per_topic: int, seed: int, prefix: str = "Topic"
) -> dict[str, list[tuple[str, str]]]:
    """Paragraphs of invented words, each with a question that shares its rare words."""
    rng = random.Random(seed)
    topics: dict[str, list[tuple[str, str]]] = {}
    for t in range(n_topics):
        rows = []
        for i in range(per_topic):
            a, b, c = _word(rng), _word(rng), _word(rng)
            context = f"The {a} {b} of region {t} measures {i + 3} units and grows near the {c}."
            rows.append((context, f"How many units does the {a} {b} measure?"))
        topics[f"{prefix}_{t}"] = rows
    return topics


TOPICS = make_topics(12, 6, seed=1)
OUTSIDE = make_topics(4, 8, seed=2, prefix="Elsewhere")


def write_squad(path: Path, topics: dict[str, list[tuple[str, str]]], answers: bool) -> Path:
    data = []
    for title, rows in topics.items():
        paragraphs = []
        for i, (context, question) in enumerate(rows):
            qas = [
                {
                    "id": f"{title}-{i}",
                    "question": question,
                    "answers": [{"text": context.split()[0], "answer_start": 0}] if answers else [],
                    "is_impossible": False,
                },
                {
                    "id": f"{title}-{i}-x",
                    "question": f"Who sold {title.lower()} in 1700?",
                    "answers": [],
                    "is_impossible": True,
                },
            ]
            paragraphs.append({"context": context, "qas": qas if answers else qas[:1]})
        data.append({"title": title, "paragraphs": paragraphs})
    path.write_text(json.dumps({"version": "v2.0", "data": data}), encoding="utf-8")
    return path


def test_loader_labels_and_kinds(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    ds = load_squad(labelled, outside)
    assert ds.counts() == {"documents": 72, "in_scope": 72, "near_miss": 72, "out_of_scope": 32}
    first = next(q for q in ds.queries if q.kind == "in_scope")
    assert first.relevant == {"Topic_0-0"}
    assert all(not q.relevant for q in ds.queries if q.kind != "in_scope")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"rows": []}', "not SQuAD format"),
        ("[" * 100_000 + "]" * 100_000, r"cannot read a SQuAD file \(nested too deep\)"),
        ('{"data": [], "n": ' + "9" * 5000 + "}", "cannot read a SQuAD file"),
        ('{"data": [\u0000]}', "cannot read a SQuAD file"),
    ],
    ids=["not squad", "nested", "huge int", "control character"],
)
def test_loader_rejects_non_squad(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidEventError, match=message):
        load_squad(bad)


def _one_article(
    qas: list[Any], context: Any = "The Orbit thermostat has a two-year warranty."
) -> str:
    return json.dumps(
        {"data": [{"title": "Orbit", "paragraphs": [{"context": context, "qas": qas}]}]}
    )


def test_loader_names_questions_without_ids_and_leaves_blank_ones_out(tmp_path: Path) -> None:
    answer = [{"text": "two-year", "answer_start": 30}]
    path = tmp_path / "quirks.json"
    path.write_text(
        _one_article(
            [
                {"question": "How long is the warranty?", "answers": answer},  # no id
                {"id": 7, "question": "What does the warranty cover?", "answers": []},
                {"id": "b", "question": "   ", "answers": answer},
            ]
        ),
        encoding="utf-8",
    )
    ds = load_squad(path)
    assert [q.query_id for q in ds.queries] == ["q-Orbit-0-0", "q-7"]
    assert [q.kind for q in ds.queries] == ["in_scope", "near_miss"]
    assert ds.notes == ["1 blank question left out"]


def test_loader_takes_hostile_question_ids_as_safe_ids(tmp_path: Path) -> None:
    ids: list[Any] = [{"a": [1]}, "日本語-ид", "a\x00b\x1f", "i" * 100_000, 10**40, True, ""]
    qas = [
        {"id": qid, "question": f"Question {n} \x07 ok?", "answers": []}
        for n, qid in enumerate(ids)
    ]
    path = tmp_path / "hostile.json"
    path.write_text(_one_article(qas), encoding="utf-8")
    got = [q.query_id for q in load_squad(path).queries]
    assert len(set(got)) == len(ids)
    assert got[0] == "q-Orbit-0-0"  # not a string or a number: named by position
    assert got[5] == "q-Orbit-0-5"  # a boolean is no id either
    assert got[6] == "q-Orbit-0-6"  # nor an empty string
    assert all(len(q) <= 200 and q.isprintable() and "/" not in q for q in got)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            _one_article([{"id": "a", "answers": []}]),
            r"question Orbit-0-0: needs a string 'question'",
        ),
        (_one_article(["just a string"]), r"question Orbit-0-0: needs a string 'question'"),
        (_one_article([], context=None), r"paragraph 0: 'context' must be a string"),
    ],
    ids=["no question", "question not an object", "context not a string"],
)
def test_loader_names_the_malformed_question_or_paragraph(
    tmp_path: Path, content: str, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidEventError, match=message):
        load_squad(bad)


@pytest.mark.parametrize(
    ("flag", "kind"),
    [
        (False, "in_scope"),
        (True, "near_miss"),
        ("false", "in_scope"),  # bool("false") is True: read as a near miss until now
        (" FALSE ", "in_scope"),
        ("True", "near_miss"),
    ],
)
def test_is_impossible_is_read_as_a_boolean(tmp_path: Path, flag: Any, kind: str) -> None:
    answer = [{"text": "two-year", "answer_start": 30}]
    path = tmp_path / "flags.json"
    qa = {"id": "a", "question": "How long?", "answers": answer, "is_impossible": flag}
    path.write_text(_one_article([qa]), encoding="utf-8")
    assert [q.kind for q in load_squad(path).queries] == [kind]
    del qa["is_impossible"]  # absent, as in SQuAD 1.1 and the shipped test-v2.0.json: false
    path.write_text(_one_article([qa]), encoding="utf-8")
    assert [q.kind for q in load_squad(path).queries] == ["in_scope"]


@pytest.mark.parametrize(
    ("flag", "shown"),
    [
        (None, "null"),
        (0, "0"),
        (1, "1"),
        ("no", "'no'"),
        ("", "''"),
        ("假", "'假'"),
        ([True], r"\[True\]"),
        ({"v": {"v": {"v": False}}}, r"\{'v'"),
        ("x" * 10_000, "'xxx"),
    ],
)
def test_any_other_is_impossible_is_an_error_naming_the_question(
    tmp_path: Path, flag: Any, shown: str
) -> None:
    path = tmp_path / "flags.json"
    qas = [
        {"id": "ok", "question": "Fine?", "answers": [], "is_impossible": True},
        {"id": "b", "question": "How long?", "answers": [], "is_impossible": flag},
    ]
    path.write_text(_one_article(qas), encoding="utf-8")
    with pytest.raises(
        InvalidEventError,
        match=rf"flags\.json: question Orbit-0-1: 'is_impossible' must be true or false,"
        rf" got {shown}",
    ) as caught:
        load_squad(path)
    assert len(str(caught.value)) < 300


def test_two_questions_with_one_id_are_an_error(tmp_path: Path) -> None:
    """The second question was scored under the first one's id: per-query reports and
    replays keyed by id mixed the two up."""
    path = write_squad(tmp_path / "dev.json", {"A": TOPICS["Topic_0"][:2]}, answers=True)
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["data"][0]["paragraphs"][1]["qas"][0]["id"] = "A-0"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(
        InvalidEventError,
        match=r"dev\.json: question A-1-0 has id 'A-0', as question A-0-0 has 'A-0';"
        " each question needs its own id",
    ):
        load_squad(path)
    # two ids that read as one (a space and a dash), and a number and its text
    for first, second in (("a b", "a-b"), (7, "7")):
        qas = [
            {"id": first, "question": "One?", "answers": []},
            {"id": second, "question": "Two?", "answers": []},
        ]
        path.write_text(_one_article(qas), encoding="utf-8")
        with pytest.raises(InvalidEventError, match=r"question Orbit-0-1 has id"):
            load_squad(path)
    # an out-of-scope file is held to it too; the labelled file's ids are another set
    labelled = write_squad(tmp_path / "dev.json", {"A": TOPICS["Topic_0"][:1]}, answers=True)
    outside = write_squad(tmp_path / "oos.json", {"B": OUTSIDE["Elsewhere_0"][:2]}, answers=False)
    raw = json.loads(outside.read_text(encoding="utf-8"))
    raw["data"][0]["paragraphs"][1]["qas"][0]["id"] = "A-0"  # the labelled question's id
    outside.write_text(json.dumps(raw), encoding="utf-8")
    assert load_squad(labelled, outside).counts()["out_of_scope"] == 2
    raw["data"][0]["paragraphs"][0]["qas"][0]["id"] = "A-0"
    outside.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"oos\.json: question B-1-0 has id 'A-0'"):
        load_squad(labelled, outside)


@pytest.mark.parametrize(
    ("title", "shown"),
    [(None, "null"), ("  ", "'  '"), ("", "''"), (["T"], r"\['T'\]"), (True, "True")],
)
def test_an_article_without_a_title_is_an_error(tmp_path: Path, title: Any, shown: str) -> None:
    """A null title became doc ids "None-0", "None-1" and group "None"; two untitled
    articles collided, and one in each file passed for one article on both sides."""
    topics = {"A": TOPICS["Topic_0"][:1], "B": TOPICS["Topic_1"][:1]}
    path = write_squad(tmp_path / "dev.json", topics, answers=True)
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["data"][1]["title"] = title
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(
        InvalidEventError,
        match=rf"dev\.json: article 2 of 'data' needs a non-blank string 'title', got {shown}",
    ):
        load_squad(path)
    del raw["data"][1]["title"]
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"article 2 of 'data' .* got no 'title'"):
        load_squad(path)
    raw["data"][1]["title"] = 1905  # a number names an article, as it names a question
    path.write_text(json.dumps(raw), encoding="utf-8")
    assert "1905" in {q.group for q in load_squad(path).queries}
    raw["data"][1]["title"] = None
    outside = tmp_path / "oos.json"
    outside.write_text(json.dumps({"data": raw["data"][1:]}), encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"oos\.json: article 1 of 'data'"):
        load_squad(write_squad(tmp_path / "ok.json", TOPICS, answers=True), outside)


async def test_run_fit_and_report(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    run = await run_retrieval(load_squad(labelled, outside), HashingEmbedder(), k=4)
    ranks = run.relevant_rank()
    in_scope = [i for i, q in enumerate(run.queries) if q.kind == "in_scope"]
    assert (ranks[in_scope] > 0).mean() >= 0.9  # the answer's paragraph is retrieved
    artifact, fit = fit_from_run(run, fit_fraction=0.5)
    assert artifact.embedder_id == "ragsift-hashing-v1-384"
    assert artifact.similarity_threshold is not None
    assert 0 < fit.sum() < len(fit)
    reports = evaluate_scorers(run, artifact, ~fit).reports
    seeds = [name for c in "ABCD" for name in (f"seed-{c}", f"seed-{c}@fit")]
    assert [r.name for r in reports] == ["calibrated", "calibrated@certified", *seeds, "seed-E"]
    for r in reports:
        assert 0.0 <= r.auroc <= 1.0
        assert 0.0 <= r.ece <= 1.0
        assert 0.0 <= r.coverage_at_p95 <= r.coverage_at_p90 <= 1.0


def test_shipped_artifact_matches_the_default_embedder() -> None:
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    artifact = load_calibration(path, embedder_id="ragsift-hashing-v1-384", metric="cosine")
    assert artifact.data.n_examples > 1000
    assert artifact.conformal.feasible
    assert artifact.similarity_threshold is not None
    engines = EngineSet(ConfidenceSettings(), "ragsift-hashing-v1-384")
    assert engines.base.similarity_threshold == artifact.similarity_threshold


def test_calibrated_scorer_refuses_an_embedder_without_its_artifact() -> None:
    with pytest.raises(ConfigurationError, match="no calibration artifact for embedder"):
        EngineSet(ConfidenceSettings(), "some-other-model")


def test_calibrated_scorer_refuses_a_mismatched_artifact(tmp_path: Path) -> None:
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    settings = ConfidenceSettings(calibration_path=path)
    with pytest.raises(ConfigurationError, match="ragsift-hashing-v1-384"):
        EngineSet(settings, "text-embedding-3-small")


def test_a_missing_calibration_file_is_a_configuration_error(tmp_path: Path) -> None:
    # A worker given a wrong path must say which setting to fix, not crash with OSError.
    settings = ConfidenceSettings(calibration_path=tmp_path / "missing.json")
    with pytest.raises(ConfigurationError, match="RAGSIFT_CONFIDENCE_CALIBRATION_PATH"):
        EngineSet(settings, "ragsift-hashing-v1-384")


def test_explicit_threshold_wins_over_the_artifact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_SIMILARITY_THRESHOLD", "0.42")
    engines = EngineSet(ConfidenceSettings(), "ragsift-hashing-v1-384")
    assert engines.base.similarity_threshold == 0.42


def test_non_latin_article_titles_keep_every_paragraph(tmp_path: Path) -> None:
    # Issue 13 #6: titles "ᅭ" and "ᄀ" both became doc id "0", one paragraph overwrote the other.
    topics = {"ᅭ": TOPICS["Topic_0"][:1], "ᄀ": TOPICS["Topic_1"][:1]}
    ds = load_squad(write_squad(tmp_path / "dev.json", topics, answers=True))
    ids = [d.doc_id for d in ds.documents]
    assert len(set(ids)) == 2
    assert [q.relevant for q in ds.queries if q.kind == "in_scope"] == [{i} for i in ids]


def test_two_articles_with_one_title_are_an_error(tmp_path: Path) -> None:
    path = write_squad(tmp_path / "dev.json", {"A": TOPICS["Topic_0"][:1]}, answers=True)
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["data"].append(raw["data"][0])
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(InvalidEventError, match="'A-0' is used twice"):
        load_squad(path)


def _artifact_with(artifact: CalibrationArtifact, **conformal: Any) -> CalibrationArtifact:
    data = artifact.model_dump(mode="json")
    data["conformal"].update(conformal)
    data["version"] = ""
    return CalibrationArtifact.model_validate(data)


async def test_report_never_shows_a_precision_for_nothing_answered(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    run = await run_retrieval(load_squad(labelled, outside), HashingEmbedder(), k=4)
    fitted, _ = fit_from_run(run, fit_fraction=1.0)
    artifact = _artifact_with(fitted, feasible=True, threshold=0.5)  # too few queries to certify
    everything = np.ones(len(run.queries), dtype=bool)
    result = evaluate_scorers(run, artifact, everything)
    cal = result.reports[0]
    assert cal.answered > 0
    assert cal.risk is not None
    assert cal.answer_rate == cal.answered / cal.n
    assert cal.target == ("held" if cal.risk <= artifact.conformal.alpha else "missed")
    assert cal.risk_interval is not None
    low, high = cal.risk_interval
    assert 0.0 <= low <= cal.risk <= high <= 1.0
    assert high - low > 0.05  # a few dozen answers: a wide interval, and it says so
    silent = next(r for r in result.reports if r.name == "seed-D")  # 0.70 bar keeps nothing
    assert silent.answered == 0
    assert silent.risk is None
    assert silent.risk_interval is None
    assert silent.target == "nothing answered"
    assert silent.to_dict()["risk"] is None
    assert "answered_precision" not in silent.to_dict()
    # An artifact whose conformal threshold was infeasible says so, with the reason.
    infeasible = _artifact_with(artifact, feasible=False, threshold=1.0)
    cal = evaluate_scorers(run, infeasible, everything).reports[0]
    assert cal.target.startswith("infeasible: no threshold certified risk <= 0.1")
    # Near misses as negatives join every figure.
    with_near = evaluate_scorers(run, artifact, everything, near_miss_negatives=True).reports[0]
    assert with_near.n == len(run.queries) > result.reports[0].n


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_fit_side_of_a_whole_set_is_half_one(tmp_path: Path, seed: int) -> None:
    """`calibrate` without --half fits on exactly the questions `eval --half 2` leaves out.

    One seeded draw over labelled and out-of-scope groups together put 3 of half 2's
    8 SQuAD articles into the shipped fits (ADR 025): the two splits must be one.
    """
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    ds = load_squad(labelled, outside)
    run = RetrievalRun(ds, "ragsift-hashing-v1-384", 4, "hybrid", [[] for _ in ds.queries])
    fit = split_mask(run, seed=seed)
    one, two = select_half(ds, 1, seed=seed), select_half(ds, 2, seed=seed)
    assert [q.query_id for q, f in zip(ds.queries, fit, strict=True) if f] == [
        q.query_id for q in one.queries
    ]
    assert {q.group for q, f in zip(ds.queries, fit, strict=True) if f}.isdisjoint(
        {q.group for q in two.queries}
    )
    kinds = {q.kind for q in one.queries}
    assert kinds == {"in_scope", "near_miss", "out_of_scope"}  # each kind is split, not lumped


def test_cli_calibrates_on_one_half_and_applies_the_artifact_to_the_other(
    tmp_path: Path,
) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    data = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    artifact = tmp_path / "half1.json"
    runner = CliRunner()
    fit = runner.invoke(app, ["calibrate", *data, "--half", "1", "--out", str(artifact)])
    assert fit.exit_code == 0, fit.output
    per_query = tmp_path / "per-query.jsonl"
    args = [*data, "--half", "2", "--artifact", str(artifact), "--per-query", str(per_query)]
    applied = runner.invoke(app, ["eval", *args, "--probes", "none", "--json"])
    assert applied.exit_code == 0, applied.output
    summary = json.loads(applied.stdout.strip().splitlines()[-1])
    assert summary["calibration"].startswith(f"applied artifact {artifact}")
    assert summary["calibration_version"] == load_calibration(artifact).version
    half2 = select_half(load_squad(labelled, outside), 2)
    assert summary["evaluated_queries"] == len(half2.queries)
    # It says whether the artifact saw these questions: fit on half 1, none of half 2...
    assert summary["in_sample_questions"] == 0
    assert "in sample" not in applied.stderr
    names = [s["name"] for s in summary["scorers"]]
    assert names[:4] == ["calibrated", "calibrated@certified", "seed-A", "seed-A@fit"]
    # What the mix did is said: the calibration's share, the estimate, the final bar.
    assert summary["mix"]["mode"] == "auto"
    assert 0 < summary["mix"]["calibration_share"] < 1
    for s in summary["scorers"]:
        assert {"answer_rate", "risk", "target", "target_held", "infeasible"} <= set(s)
    rows = [json.loads(line) for line in per_query.read_text(encoding="utf-8").splitlines()]
    assert [r["query_id"] for r in rows] == [q.query_id for q in half2.queries]
    assert set(rows[0]["scorers"]) == set(names)
    assert {"label", "kind", "hit_rank"} <= set(rows[0])
    # The signals the calibrated scorer read, named; null where a channel was not read.
    assert all(list(r["signals"]) == list(SIGNAL_NAMES) for r in rows)
    assert all(-1.0 <= r["signals"]["top_score"] <= 1.0 for r in rows)
    assert all(0.0 <= r["signals"]["term_coverage"] <= 1.0 for r in rows)
    assert {r["signals"]["reranker_impact"] for r in rows} == {None}
    # ... and every one of half 1, with a warning that they measure no transfer.
    seen = runner.invoke(
        app,
        ["eval", *data, "--half", "1", "--artifact", str(artifact), "--probes", "none", "--json"],
    )
    assert seen.exit_code == 0, seen.output
    half1 = select_half(load_squad(labelled, outside), 1)
    assert json.loads(seen.stdout.strip().splitlines()[-1])["in_sample_questions"] == len(
        half1.queries
    )
    assert f"warning: {len(half1.queries)} of {len(half1.queries)} questions" in seen.stderr
    refit = runner.invoke(app, ["eval", *data, "--json"])
    assert refit.exit_code == 0, refit.output
    assert json.loads(refit.stdout.strip().splitlines()[-1])["calibration"].startswith(
        "refit on half"
    )


def test_cli_refuses_an_artifact_of_another_embedder(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    data.update(embedder_id="text-embedding-3-small", version="")
    other = tmp_path / "other.json"
    other.write_text(CalibrationArtifact.model_validate(data).to_json(), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["eval", "--labelled", str(labelled), "--artifact", str(other)]
    )
    assert result.exit_code == 2
    assert "text-embedding-3-small" in result.output


@pytest.mark.parametrize(
    ("option", "kind"),
    [
        ("--max-in-scope", "in-scope"),
        ("--max-near-miss", "near-miss"),
        ("--max-out-of-scope", "out-of-scope"),
    ],
)
def test_cli_refuses_a_negative_mix_limit_before_any_retrieval(
    tmp_path: Path, option: str, kind: str
) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    result = CliRunner().invoke(app, ["eval", "--labelled", str(labelled), option, "-1"])
    assert result.exit_code == 2
    assert f"the {kind} limit must be >= 0, got -1" in result.output
    # A number past every set cuts nothing.
    ds = load_squad(labelled)
    assert limit_questions(ds, kind.replace("-", "_"), 10**30) is ds


def test_cli_eval_too_small_to_fit_is_one_clear_error(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    result = CliRunner().invoke(
        app,
        ["eval", "--labelled", str(labelled), "--max-in-scope", "3", "--max-near-miss", "3"],
    )
    assert result.exit_code == 2
    assert "cannot fit on" in result.output
    assert "need at least 20 examples" in result.output
    assert "Traceback" not in result.output


def test_cli_replays_the_served_answers_in_several_arrival_orders(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    path = str(packaged_calibration_path("ragsift-hashing-v1-384"))
    args = ["eval", "--labelled", str(labelled), "--out-of-scope", str(outside)]
    args += ["--artifact", path, "--probes", "none"]
    env = {"RAGSIFT_EMBEDDER_KIND": "hashing"}
    runner = CliRunner()
    once = runner.invoke(app, [*args, "--json"], env=env)
    assert once.exit_code == 0, once.output
    single = json.loads(once.stdout.strip().splitlines()[-1])
    assert "orders" not in single["mix"]
    many = runner.invoke(app, [*args, "--arrival-orders", "4", "--json"], env=env)
    assert many.exit_code == 0, many.output
    summary = json.loads(many.stdout.strip().splitlines()[-1])
    orders = summary["mix"].pop("orders")
    assert summary == single  # the figures are the first order's, as without orders
    assert orders["orders"] == 4
    assert set(orders["answer_rate"]) == {"p10", "p50", "p90"}
    assert 0.0 <= orders["answer_rate"]["p10"] <= orders["answer_rate"]["p90"] <= 1.0
    words = runner.invoke(app, [*args, "--arrival-orders", "4"], env=env)
    assert words.exit_code == 0, words.output
    assert "as served over 4 arrival orders" in " ".join(words.output.split())
    for bad in ("0", "1001", "x", "-3"):
        refused = runner.invoke(app, [*args, "--arrival-orders", bad], env=env)
        assert refused.exit_code == 2
        assert "--arrival-orders" in refused.output
