"""Probes: questions a collection does not answer, searched in it to re-certify the
answer threshold there (`ragsift calibrate --collection`, `ragsift eval --probes`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import CalibrationArtifact, ConfidenceError
from ragsift.confidence.probes import MIN_PROBES, InScopeSample
from ragsift.errors import InvalidEventError
from ragsift.evaluation import load_squad, select_half
from ragsift.evaluation.probes import (
    MAX_PROBE_CHARS,
    Probe,
    bundled_probes,
    load_probes,
    probe_calibrate,
    probe_confidence,
)
from ragsift.evaluation.reads import read_embedded
from ragsift.evaluation.selfcal import search_as_pipeline
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.embedders.base import TokenStates
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.reader import ReaderScores, term_coverage
from tests.factories import write_corpus
from tests.unit.evaluation.test_selfcal_collection import BASE as SELFCAL_BASE
from tests.unit.evaluation.test_selfcal_collection import documents
from tests.unit.evaluation.test_squad_eval import OUTSIDE, TOPICS, make_topics, write_squad

EMBEDDER = HashingEmbedder()


def _sample() -> InScopeSample:
    rng = np.random.default_rng(0)
    relevant = rng.random(400) < 0.9
    conf = np.where(relevant, rng.beta(6, 2, 400), rng.beta(2, 4, 400))
    return InScopeSample(
        confidence=tuple(round(float(c), 4) for c in conf),
        relevant=tuple(bool(r) for r in relevant),
        groups=tuple(i % 8 for i in range(400)),
        n_out_of_scope=800,
    )


#: test_selfcal_collection's base, with an in-scope sample to re-certify with.
BASE = CalibrationArtifact.model_validate(
    SELFCAL_BASE.model_dump()
    | {
        "version": "",
        "conformal": SELFCAL_BASE.conformal.model_dump()
        | {"in_scope": _sample().model_dump(), "n_calibration": 1200},
    }
)
PROBES = [
    Probe(f"Who painted the {w} portrait in {1500 + i}?", f"art{i % 5}")
    for i, w in enumerate(["red", "blue", "green", "grey", "gold"] * 50)
]


def test_the_bundled_bank_is_real_questions_in_eighteen_articles() -> None:
    """Ten test-v2.0 articles whole and eight dev-v2.0 ones sampled: a Wikipedia corpus
    that holds the ten still leaves enough probes about the others."""
    probes = bundled_probes()
    assert len(probes) >= 3000
    assert len({p.group for p in probes}) == 18
    assert len({p.text for p in probes}) == len(probes)
    assert all(p.text.endswith("?") or len(p.text) > 10 for p in probes)
    assert load_probes("bundled") == probes


def test_probe_files_are_jsonl_or_text(tmp_path: Path) -> None:
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"text": "What is X?", "group": "a"}\n\n{"text": " Why Y? "}\n')
    assert load_probes(jsonl) == [Probe("What is X?", "a"), Probe("Why Y?", f"{jsonl}:3")]
    text = tmp_path / "p.txt"
    text.write_text("# a comment\nWhat is X?\n\nWho is Z?\n")
    assert [p.text for p in load_probes(text)] == ["What is X?", "Who is Z?"]
    assert len({p.group for p in load_probes(text)}) == 2  # each line its own group


def test_probe_text_in_any_script_is_kept_as_written(tmp_path: Path) -> None:
    """Non-Latin text, control characters and odd groups are questions like any other."""
    path = tmp_path / "p.jsonl"
    rows = [
        {"text": "東京タワーの高さは？", "group": "日本"},
        {"text": "Wer baute\tden\u0007 Turm?", "group": 12345678901234567890},
        {"text": "ما هو أطول نهر؟", "group": {"nested": [1, 2]}},
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    probes = load_probes(path)
    assert [p.text for p in probes] == [r["text"] for r in rows]
    assert [p.group for p in probes] == ["日本", "12345678901234567890", "{'nested': [1, 2]}"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json\n", r"p.jsonl:1: not JSON"),
        ('{"text": {"deep": {"er": ["What?"]}}}\n', r"p.jsonl:1: needs"),
        ('{"text": 1e400}\n', r"p.jsonl:1: needs"),
        ('["What?"]\n', r"p.jsonl:1: needs"),
        ('{"group": "a"}\n', r"p.jsonl:1: needs"),
        ('{"text": "   "}\n', r"p.jsonl:1: empty question"),
        (json.dumps({"text": "x" * (MAX_PROBE_CHARS + 1)}) + "\n", "at most"),
        ("\n\n", "no probe questions"),
    ],
)
def test_a_bad_probe_file_is_one_clear_error_naming_the_line(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(InvalidEventError, match=message):
        load_probes(path)
    with pytest.raises(InvalidEventError, match="cannot read"):
        load_probes(tmp_path / "missing.jsonl")


async def test_a_collection_is_certified_on_its_own_probe_scores(index: EdgeIndex) -> None:
    stages: list[str] = []
    artifact = await probe_calibrate(
        index,
        EMBEDDER,
        BASE,
        PROBES,
        collection="docs",
        tenant="alpha",
        progress=lambda stage, done, total: stages.append(stage),
    )
    prov = artifact.provenance
    assert prov is not None
    assert (prov.base_version, prov.collection, prov.tenant, prov.chunks) == (
        BASE.version,
        "docs",
        "alpha",
        40,
    )
    assert (prov.positives, prov.negatives) == (400, len(PROBES))
    assert prov.method.startswith("probes")
    assert artifact.coefficients == BASE.coefficients
    assert artifact.conformal.in_scope == BASE.conformal.in_scope
    assert artifact.conformal.mix is not None
    assert artifact.conformal.feasible
    assert set(stages) == {"search"}


async def test_probing_refuses_what_it_cannot_do(index: EdgeIndex) -> None:
    with pytest.raises(InvalidEventError, match="has 0 chunks; calibrating it needs at least 1"):
        await probe_calibrate(index, EMBEDDER, BASE, PROBES, collection="docs", tenant="nobody")
    with pytest.raises(ConfidenceError, match=f"at least {MIN_PROBES} probe"):
        await probe_calibrate(index, EMBEDDER, BASE, PROBES[:10], collection="docs")
    bare = BASE.model_copy(
        update={"conformal": BASE.conformal.model_copy(update={"in_scope": None})}
    )
    with pytest.raises(ConfidenceError, match="keeps no in-scope sample"):
        await probe_calibrate(index, EMBEDDER, bare, PROBES, collection="docs")
    tokens = BASE.model_copy(
        update={
            "features": (*BASE.features, "token_match"),
            "coefficients": (*BASE.coefficients, 1.0),
            "version": "cal-t",
        }
    )
    with pytest.raises(ConfidenceError, match="cal-t: token match needs an embedder that gives"):
        await probe_calibrate(index, EMBEDDER, tokens, PROBES, collection="docs")


class TokenHashing(HashingEmbedder):
    """The hashing embedder, giving each word's own vector as its token state."""

    async def token_states(self, texts: Sequence[str]) -> list[TokenStates]:
        out = []
        for text in texts:
            words = text.lower().split()
            vectors = await self.embed(words) if words else np.zeros((0, self.dim), np.float32)
            out.append(TokenStates(vectors, tuple(words)))
        return out


async def test_probes_read_sentence_and_token_match_as_the_pipeline_would(
    index: EdgeIndex,
) -> None:
    """A calibration that embeds at query time (the reader switch) is probed with those
    signals read, not imputed from the top score (ADR 041)."""
    embedder = TokenHashing()
    reads = BASE.model_copy(
        update={
            "features": (*BASE.features, "sentence_match", "token_match"),
            "coefficients": (*BASE.coefficients, 2.0, 4.0),
            "intercept": BASE.intercept - 3.0,
            "version": "cal-reads",
        }
    )
    texts = [p.text for p in PROBES[:40]]
    hits = await search_as_pipeline(index, embedder, "docs", [("alpha", t, None) for t in texts], 8)
    read = await read_embedded(reads, embedder, texts, hits)
    assert read is not None
    assert all(np.isfinite(r.token[0]) and np.isnan(r.token[1:]).all() for r in read)
    assert all(np.isfinite(r.sentence[0]) for r in read)
    assert await read_embedded(BASE, embedder, texts, hits) is None  # nothing embedded to read
    scored = probe_confidence(reads, hits, reader=read, queries=texts)
    imputed = probe_confidence(reads, hits, queries=texts)
    assert not np.allclose(scored, imputed)
    artifact = await probe_calibrate(index, embedder, reads, PROBES, collection="docs")
    assert artifact.provenance is not None
    assert artifact.provenance.base_version == reads.version
    assert artifact.features == reads.features


async def test_probes_read_term_coverage_when_the_calibration_uses_it(index: EdgeIndex) -> None:
    """A calibration with term coverage is probed as the pipeline scores it: each
    probe's coverage is read from its own text, not imputed as "every term held"."""
    terms = BASE.model_copy(
        update={
            "features": (*BASE.features, "term_coverage"),
            "coefficients": (*BASE.coefficients, 6.0),
            "intercept": BASE.intercept - 6.0,
            "version": "cal-terms",
        }
    )
    texts = [p.text for p in PROBES[:40]]
    hits = await search_as_pipeline(index, EMBEDDER, "docs", [("alpha", t, None) for t in texts], 8)
    with pytest.raises(ConfidenceError, match="each searched query's text"):
        probe_confidence(terms, hits)
    read = probe_confidence(terms, hits, queries=texts)
    # Uncached, from the tokenizer itself: the probes' cached term sets must agree.
    encoder = Bm25Encoder()
    expected = [
        ReaderScores(
            np.full(len(found), np.nan),
            term_coverage(encoder.encode_query(t).indices, [encoder.terms(h.text) for h in found]),
            np.full(len(found), np.nan),
        )
        for t, found in zip(texts, hits, strict=True)
    ]
    assert np.array_equal(read, probe_confidence(terms, hits, reader=expected))
    held = [ReaderScores(r.sentence, np.ones_like(r.coverage), r.token) for r in expected]
    imputed = probe_confidence(terms, hits, reader=held)
    assert (read <= imputed).all()
    assert (read < imputed).any()
    artifact = await probe_calibrate(index, EMBEDDER, terms, PROBES, collection="docs")
    assert artifact.features == terms.features


def _probe_file(tmp_path: Path, n: int = 240) -> Path:
    topics = make_topics(n // 8, 8, seed=5, prefix="Probe")
    path = tmp_path / "probes.jsonl"
    rows = [{"text": q, "group": t} for t, pairs in topics.items() for _, q in pairs]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _fit_half_1(tmp_path: Path) -> tuple[list[str], Path]:
    """The small labelled set's options, and an artifact fit on its half 1."""
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    data = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    artifact = tmp_path / "half1.json"
    fit = CliRunner().invoke(app, ["calibrate", *data, "--half", "1", "--out", str(artifact)])
    assert fit.exit_code == 0, fit.output
    return data, artifact


def test_eval_recertifies_on_the_corpus_and_never_scores_a_probe(tmp_path: Path) -> None:
    data, artifact = _fit_half_1(tmp_path)
    labelled, outside = Path(data[1]), Path(data[3])
    runner = CliRunner()
    assert json.loads(artifact.read_text())["conformal"]["in_scope"]["confidence"]
    per_query = tmp_path / "rows.jsonl"
    probes = _probe_file(tmp_path)
    args = [*data, "--half", "2", "--artifact", str(artifact), "--per-query", str(per_query)]
    result = runner.invoke(app, ["eval", *args, "--probes", str(probes), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    half2 = select_half(load_squad(labelled, outside), 2)
    assert summary["evaluated_queries"] == len(half2.queries)
    assert summary["counts"] == half2.counts()
    assert summary["probes"]["n"] == 240
    fitted = json.loads(artifact.read_text())["conformal"]
    assert summary["probes"]["threshold_before"] == (
        fitted["threshold"] if fitted["feasible"] else None
    )
    assert "re-certified on this corpus with 240 probes" in summary["calibration"]
    # The header counts the set's own questions; the probes are named apart.
    own = half2.counts()
    assert (
        f"{own['out_of_scope']} out-of-scope questions, and 240 probes (searched, not scored)"
        in " ".join(result.stderr.split())
    )
    assert (
        summary["calibration_version"]
        != CalibrationArtifact.from_json(artifact.read_text()).version
    )
    ids = [json.loads(line)["query_id"] for line in per_query.read_text().splitlines()]
    assert ids == [q.query_id for q in half2.queries]


def test_a_stray_probe_among_the_evaluated_questions_is_left_out_not_the_bank(
    tmp_path: Path,
) -> None:
    """Stock questions asked of several articles land in a bank and in an evaluated set
    alike (a few of the bundled bank do): those are left out, and the rest probe."""
    data, artifact = _fit_half_1(tmp_path)
    half2 = select_half(load_squad(Path(data[1]), Path(data[3])), 2)
    probes = _probe_file(tmp_path)
    asked = [{"text": q.text, "group": "stock"} for q in half2.queries[:2]]
    with probes.open("a") as out:
        out.write("\n".join(json.dumps(r) for r in asked) + "\n")
    args = [*data, "--half", "2", "--artifact", str(artifact), "--probes", str(probes)]
    result = CliRunner().invoke(app, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.output
    assert "2 that are among the evaluated questions left out" in " ".join(result.output.split())
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["probes"]["n"] == 240


def test_eval_probes_need_an_artifact_and_a_readable_file(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    runner = CliRunner()
    alone = runner.invoke(app, ["eval", "--labelled", str(labelled), "--probes", "bundled"])
    assert alone.exit_code == 2
    assert "--probes needs --artifact" in alone.output
    shipped = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8-384")
    missing = runner.invoke(
        app,
        ["eval", "--labelled", str(labelled), "--artifact", str(shipped), "--probes", "nope.txt"],
    )
    assert missing.exit_code == 2
    assert "cannot read probe questions" in missing.output


def test_cli_calibrate_collection_checks_its_method_options(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["calibrate", "--collection", "docs", "--data-dir", str(tmp_path)]
    bogus = runner.invoke(app, [*base, "--method", "magic"])
    assert bogus.exit_code == 2
    assert "--method must be probes or pseudo-queries" in bogus.output
    held = runner.invoke(app, [*base, "--held-out", str(tmp_path / "h.jsonl")])
    assert held.exit_code == 2
    assert "--held-out needs --method pseudo-queries" in held.output
    unreadable = runner.invoke(app, [*base, "--probes", str(tmp_path / "none.jsonl")])
    assert unreadable.exit_code == 2
    assert "cannot read probe questions" in unreadable.output


def test_cli_calibrate_collection_stores_a_probe_certified_calibration(tmp_path: Path) -> None:
    """The default method end to end: ingest, calibrate, and the store holds the result."""
    from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore

    corpus = write_corpus(tmp_path / "corpus", documents(30))
    data = tmp_path / "data"
    runner = CliRunner()
    env = {"RAGSIFT_EMBEDDER_KIND": "hashing"}
    ingest = ["ingest", str(corpus), "--tenant", "acme", "--collection", "docs"]
    done = runner.invoke(app, [*ingest, "--data-dir", str(data)], env=env)
    assert done.exit_code == 0, done.output
    # the ingest's own re-probe says it too
    assert "not covered by the probes: of the questions" in " ".join(done.output.split())
    result = runner.invoke(
        app, ["calibrate", "--collection", "docs", "--data-dir", str(data)], env=env
    )
    assert result.exit_code == 0, result.output
    bank = len(bundled_probes())
    said = " ".join(result.output.split())
    assert f"calibrated docs on {bank} probe questions (bundled)" in said
    # what the probes do not cover, estimated and said (docs/confidence.md, section 12)
    assert "not covered by the probes: of the questions on this collection's subjects" in said
    assert "over 30 of its passages, each searched with its own document left out" in said
    stored = DirectoryCalibrationStore(data / "calibrations").get(CalibrationScope("docs", None))
    assert stored is not None
    assert stored.provenance is not None
    assert stored.provenance.method.startswith("probes")
    assert stored.provenance.negatives == bank
    assert stored.version in result.output


def test_too_few_probes_is_one_clear_error_in_eval(tmp_path: Path) -> None:
    data, artifact = _fit_half_1(tmp_path)
    runner = CliRunner()
    few = tmp_path / "few.txt"
    few.write_text("\n".join(f"Who built tower {i}?" for i in range(12)) + "\n")
    evaluated = runner.invoke(
        app, ["eval", *data, "--half", "2", "--artifact", str(artifact), "--probes", str(few)]
    )
    assert evaluated.exit_code == 2
    assert f"at least {MIN_PROBES} probe questions" in " ".join(evaluated.output.split())


def test_cli_calibrate_collection_marks_a_scope_it_cannot_certify(tmp_path: Path) -> None:
    """Probes that the collection answers certify no bar: as after an ingest's re-probe,
    the calibration in force is kept and marked, so the scope's results say so (before,
    nothing was stored and they said nothing). Not with --out, nor at another alpha,
    where the bar in force is certified at its own."""
    from ragsift.confidence.artifact import UNCERTIFIED_ADVICE_CODE
    from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore

    docs = documents(30)
    corpus = write_corpus(tmp_path / "corpus", docs)
    own = tmp_path / "own.jsonl"  # its own sentences, each its own group
    rows = [
        {"text": sentence, "group": f"g{i}"}
        for i, sentence in enumerate(
            s for doc in docs for s in doc.text.split(". ") for _ in (1, 2)
        )
    ]
    own.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = tmp_path / "data"
    runner = CliRunner()
    env = {"RAGSIFT_EMBEDDER_KIND": "hashing"}
    ingest = ["ingest", str(corpus), "--tenant", "acme", "--collection", "docs", "--no-probe"]
    assert runner.invoke(app, [*ingest, "--data-dir", str(data)], env=env).exit_code == 0
    calibrate = ["calibrate", "--collection", "docs", "--data-dir", str(data), "--probes", str(own)]
    store = DirectoryCalibrationStore(data / "calibrations")

    elsewhere = runner.invoke(app, [*calibrate, "--alpha", "0.05"], env=env)
    written = runner.invoke(app, [*calibrate, "--out", str(tmp_path / "c.json")], env=env)
    for refused in (elsewhere, written):
        assert refused.exit_code == 1, refused.output
        assert "nothing stored" in " ".join(refused.output.split())
    assert store.get(CalibrationScope("docs")) is None
    assert not (tmp_path / "c.json").exists()

    result = runner.invoke(app, calibrate, env=env)
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert f"`{UNCERTIFIED_ADVICE_CODE}` advice" in said
    marked = store.get(CalibrationScope("docs"))
    assert marked is not None
    assert marked.provenance is not None
    assert marked.provenance.uncertified is not None
    assert "no answer threshold keeps risk <= 0.1" in marked.provenance.uncertified
    assert marked.provenance.method.startswith("probes")
    assert marked.version in said


def _with_keyword(base: CalibrationArtifact, *, sample: bool) -> CalibrationArtifact:
    """``base`` with a keyword model (ADR 029), with or without its in-scope sample."""
    conformal = base.conformal.model_dump() | {"in_scope": None}
    if sample:
        conformal["in_scope"] = _sample().model_dump()
    part = {
        "features": ["top_score"],
        "coefficients": [6.0],
        "intercept": -3.0,
        "similarity_threshold": 0.05,
        "conformal": conformal,
    }
    return CalibrationArtifact.model_validate(base.model_dump() | {"version": "", "keyword": part})


async def test_the_probes_searched_keyword_only_recertify_the_keyword_model(
    index: EdgeIndex,
) -> None:
    base = _with_keyword(BASE, sample=True)
    artifact = await probe_calibrate(index, EMBEDDER, base, PROBES, collection="docs")
    assert artifact.conformal.feasible
    part, before = artifact.keyword, base.keyword
    assert part is not None
    assert before is not None
    assert part.conformal != before.conformal
    assert part.conformal.method.endswith("on the collection's probes")
    assert part.conformal.feasible
    assert part.conformal.threshold >= before.conformal.threshold  # never under the fit's
    assert (part.features, part.coefficients) == (before.features, before.coefficients)
    assert artifact.provenance is not None
    assert "keyword" not in artifact.provenance.method
    # `calibrate --collection --alpha` certifies both models at that alpha.
    other = await probe_calibrate(index, EMBEDDER, base, PROBES, collection="docs", alpha=0.2)
    assert other.keyword is not None
    assert (other.conformal.alpha, other.keyword.conformal.alpha) == (0.2, 0.2)
    # Without an in-scope sample the part stays as it is, and the provenance says why.
    bare = _with_keyword(BASE, sample=False)
    kept = await probe_calibrate(index, EMBEDDER, bare, PROBES, collection="docs")
    assert kept.keyword == bare.keyword
    assert kept.provenance is not None
    assert "keyword-only queries keep the shipped keyword bar" in kept.provenance.method
    assert "keeps no in-scope sample" in kept.provenance.method
