"""`ragsift calibrations list|remove`: every scoped calibration, and whether queries use it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.artifact import MissingAnswerEstimate, Provenance
from ragsift.confidence.refit import LabelledResult, refit_calibration
from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore
from ragsift.confidence.selfcal import mark_uncertified
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.engines import packaged_calibration_path

ENV = {"RAGSIFT_EMBEDDER_KIND": "hashing"}
DEFAULT = CalibrationArtifact.from_json(
    packaged_calibration_path(HashingEmbedder().embedder_id).read_text(encoding="utf-8")
)


def made_on(base_version: str, method: str = "probes (bundled)") -> CalibrationArtifact:
    data = DEFAULT.model_dump(mode="json", exclude={"version"})
    data["intercept"] = DEFAULT.intercept + 0.5
    data["provenance"] = Provenance(
        method=method, base_version=base_version, collection="docs"
    ).model_dump(mode="json")
    return CalibrationArtifact.model_validate(data)


def listed(runner: CliRunner, data: Path) -> dict[str, Any]:
    result = runner.invoke(
        app, ["calibrations", "list", "--data-dir", str(data), "--json"], env=ENV
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_fresh_data_dir_has_only_the_default_and_is_not_created(tmp_path: Path) -> None:
    data = tmp_path / "data"
    runner = CliRunner()
    shown = listed(runner, data)
    assert shown == {
        "default": {
            "version": DEFAULT.version,
            "made_by": f"fit on {DEFAULT.data.source}",
            "answer_threshold": DEFAULT.conformal.threshold,
            "keyword_answer_threshold": DEFAULT.keyword.conformal.threshold,
        },
        "scopes": [],
    }
    table = runner.invoke(app, ["calibrations", "list", "--data-dir", str(data)], env=ENV)
    assert table.exit_code == 0, table.output
    assert "every query uses the default" in " ".join(table.output.split())
    # Keyword-only queries are held to their own model's bar (ADR 029): shown beside it.
    wide = runner.invoke(
        app, ["calibrations", "list", "--data-dir", str(data)], env={**ENV, "COLUMNS": "200"}
    )
    assert f"(keyword-only {DEFAULT.keyword.conformal.threshold:.2f})" in wide.output
    # 80 columns: every header and cell whole, folded onto more lines, none cut ("thresho…").
    narrow = runner.invoke(
        app, ["calibrations", "list", "--data-dir", str(data)], env={**ENV, "COLUMNS": "80"}
    )
    assert narrow.exit_code == 0, narrow.output
    assert "…" not in narrow.output
    assert max(len(line) for line in narrow.output.splitlines()) <= 80
    assert "threshold" in narrow.output.split()
    assert not data.exists()


def test_each_scope_says_whether_its_queries_use_it_and_why_not(tmp_path: Path) -> None:
    """In use; in use with a bar the probes could not certify; made on another shipped
    calibration (after an upgrade); unreadable. The last two are what a query skips."""
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")
    current, stale = made_on(DEFAULT.version), made_on("cal-000000000000", "probes (mine.jsonl)")
    marked = mark_uncertified(DEFAULT, current.provenance, "off-topic questions score high")
    store.put(CalibrationScope("docs", "acme"), current)
    store.put(CalibrationScope("docs", "beta"), stale)
    store.put(CalibrationScope("docs"), marked)
    store.put(CalibrationScope("docs", "gamma"), current)
    (gamma,) = [p for p in (data / "calibrations").rglob("*.json") if "gamma" in p.name]
    gamma.write_text("{not json", encoding="utf-8")

    rows = {row["tenant"]: row for row in listed(CliRunner(), data)["scopes"]}

    assert set(rows) == {None, "acme", "beta", "gamma"}
    acme, beta, gamma_row, docs = rows["acme"], rows["beta"], rows["gamma"], rows[None]
    assert (acme["used"], acme["version"], acme["state"]) == (True, current.version, "in use")
    assert acme["made_by"] == "probes (bundled)"
    assert (docs["used"], docs["uncertified"]) == (True, "off-topic questions score high")
    assert docs["state"].startswith("in use, bar not certified here")
    assert (beta["used"], beta["ignored_reason"], beta["version"]) == (False, "base", stale.version)
    assert "cal-000000000000" in beta["state"]
    assert "ragsift calibrate --collection" in beta["state"]
    assert (gamma_row["used"], gamma_row["ignored_reason"]) == (False, "invalid")
    assert gamma_row["version"] is None


def test_list_shows_what_a_scope_answers_of_questions_it_cannot_answer(tmp_path: Path) -> None:
    """The estimate stored with a probed calibration (docs/confidence.md, section 12)."""
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")
    plain = made_on(DEFAULT.version)
    assert plain.provenance is not None
    estimated = plain.model_copy(
        update={
            "provenance": plain.provenance.model_copy(
                update={"missing_answers": MissingAnswerEstimate(asked=200, answered=83)}
            )
        }
    )
    store.put(CalibrationScope("docs", "acme"), estimated)
    store.put(CalibrationScope("docs", "beta"), plain)
    runner = CliRunner()
    rows = {row["tenant"]: row for row in listed(runner, data)["scopes"]}
    assert (rows["acme"]["missing_answer_share"], rows["acme"]["missing_answer_asked"]) == (
        0.415,
        200,
    )
    assert rows["beta"]["missing_answer_share"] is None
    table = runner.invoke(app, ["calibrations", "list", "--data-dir", str(data)], env=ENV)
    assert table.exit_code == 0, table.output
    assert "~42%" in table.output


@pytest.mark.parametrize(
    "hostile",
    [
        {"asked": 10, "answered": 11},
        {"asked": 0, "answered": 0},
        {"asked": -5, "answered": 0},
        {"asked": "many", "answered": 1},
        {"asked": 10, "answered": 1, "extra": {"deep": [[[[1]]]]}},
        [[[[[[[[[[]]]]]]]]]],
    ],
)
def test_a_stored_estimate_that_cannot_be_true_makes_only_its_scope_unusable(
    tmp_path: Path, hostile: object
) -> None:
    """A store is files or Redis: an estimate edited to nonsense is refused with the
    rest of its calibration (the scope falls back, and says so); others are untouched."""
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")
    good = made_on(DEFAULT.version)
    store.put(CalibrationScope("docs", "acme"), good)
    store.put(CalibrationScope("docs", "beta"), good)
    (beta,) = [p for p in (data / "calibrations").rglob("*.json") if "beta" in p.name]
    doc = json.loads(beta.read_text(encoding="utf-8"))
    doc["provenance"]["missing_answers"] = hostile
    beta.write_text(json.dumps(doc), encoding="utf-8")
    rows = {row["tenant"]: row for row in listed(CliRunner(), data)["scopes"]}
    assert (rows["beta"]["used"], rows["beta"]["ignored_reason"]) == (False, "invalid")
    assert (rows["acme"]["used"], rows["acme"]["version"]) == (True, good.version)


def test_a_huge_but_possible_estimate_is_shown_as_a_share(tmp_path: Path) -> None:
    data = tmp_path / "data"
    plain = made_on(DEFAULT.version)
    assert plain.provenance is not None
    huge = MissingAnswerEstimate(asked=10**30, answered=10**29)
    stored = plain.model_copy(
        update={"provenance": plain.provenance.model_copy(update={"missing_answers": huge})}
    )
    DirectoryCalibrationStore(data / "calibrations").put(CalibrationScope("docs", "acme"), stored)
    (row,) = listed(CliRunner(), data)["scopes"]
    assert row["missing_answer_share"] == 0.1


def test_remove_leaves_the_scope_to_the_next_broader_calibration(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")
    shared, own = made_on(DEFAULT.version), made_on("cal-000000000000")
    store.put(CalibrationScope("docs"), shared)
    store.put(CalibrationScope("docs", "beta"), own)
    runner = CliRunner()
    remove = ["calibrations", "remove", "--collection", "docs", "--data-dir", str(data)]

    done = runner.invoke(app, [*remove, "--tenant", "beta"], env=ENV)
    assert done.exit_code == 0, done.output
    assert f"removed the calibration of beta/docs; its queries now use {shared.version}" in (
        " ".join(done.output.split())
    )
    assert [row["tenant"] for row in listed(runner, data)["scopes"]] == [None]

    again = runner.invoke(app, [*remove, "--tenant", "beta"], env=ENV)
    assert again.exit_code == 2  # a scope with nothing stored: bad input
    assert "no calibration is stored for beta/docs" in again.output
    collection = runner.invoke(app, remove, env=ENV)
    assert collection.exit_code == 0, collection.output
    assert f"now use {DEFAULT.version}" in " ".join(collection.output.split())


def test_remove_refuses_an_empty_tenant_with_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["calibrations", "remove", "--tenant", "", "--data-dir", str(tmp_path / "data")],
        env=ENV,
    )
    assert result.exit_code == 2, result.output
    assert "--tenant must name a tenant" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--collection", "x" * 5000),
        ("--collection", "文書"),
        ("--collection", "docs/../../etc"),
        ("--tenant", "テナント\x01\x1b[31m"),
        ("--tenant", "acme\x1fdocs"),
    ],
)
def test_remove_refuses_names_no_query_could_carry(tmp_path: Path, option: str, value: str) -> None:
    """The events' own rule for names: one line naming the option, nothing echoed,
    nothing removed (another scope's calibration stays)."""
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")
    kept = made_on(DEFAULT.version)
    store.put(CalibrationScope("docs", "acme"), kept)
    args = ["calibrations", "remove", "--data-dir", str(data), "--collection", "docs"]
    result = CliRunner().invoke(app, [*args, "--tenant", "acme", option, value], env=ENV)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {option}: ")
    assert value not in result.output
    assert "Traceback" not in result.output
    assert store.get(CalibrationScope("docs", "acme")) == kept


def test_list_escapes_control_characters_in_stored_names(tmp_path: Path) -> None:
    """A store written by something else may hold any name: the table shows it and
    does not pass terminal control sequences through; JSON keeps it as it is."""
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")
    store.put(CalibrationScope("docs", "テナント\x1b[31m"), made_on(DEFAULT.version))
    runner = CliRunner()
    table = runner.invoke(
        app, ["calibrations", "list", "--data-dir", str(data)], env={**ENV, "COLUMNS": "200"}
    )
    assert table.exit_code == 0, table.output
    assert "\x1b" not in table.output
    assert "テナント\\x1b[31m/docs" in table.output
    assert [row["tenant"] for row in listed(runner, data)["scopes"]] == ["テナント\x1b[31m"]


def test_reprobe_renews_what_an_upgrade_left_stale_and_says_what_it_kept(
    tmp_path: Path,
) -> None:
    """After an upgrade queries skip probe calibrations made on the old shipped one;
    `calibrations reprobe` probes each again without an ingest, and fails (exit 1) on a
    scope it could not renew."""
    from tests.factories import made_on_base, write_corpus
    from tests.unit.evaluation.test_selfcal_collection import documents

    corpus = write_corpus(tmp_path / "corpus", documents(30))
    data = tmp_path / "data"
    runner = CliRunner()
    ingest = ["ingest", str(corpus), "--collection", "docs", "--data-dir", str(data)]
    for tenant in ("acme", "beta"):
        done = runner.invoke(app, [*ingest, "--tenant", tenant], env=ENV)
        assert done.exit_code == 0, done.output
    store = DirectoryCalibrationStore(data / "calibrations")
    for tenant in ("acme", "beta"):
        scope = CalibrationScope("docs", tenant)
        probed = store.get(scope)
        assert probed is not None
        assert probed.provenance is not None
        store.put(scope, made_on_base(probed, "cal-000000000000"))
    assert [row["used"] for row in listed(runner, data)["scopes"]] == [False, False]
    table = runner.invoke(app, ["calibrations", "list", "--data-dir", str(data)], env=ENV)
    assert "2 made on another shipped calibration (an upgrade refit it):" in " ".join(
        table.output.split()
    )
    reprobe = ["calibrations", "reprobe", "--data-dir", str(data)]

    one = runner.invoke(app, [*reprobe, "--tenant", "acme"], env=ENV)

    assert one.exit_code == 0, one.output
    said = " ".join(one.output.split())
    assert "acme/docs: stored: its probes re-certified calibration cal-000000000000" in said
    assert "1 of 1 scopes probed again and stored" in said
    assert [row["used"] for row in listed(runner, data)["scopes"]] == [True, False]

    every = runner.invoke(app, [*reprobe, "--json"], env=ENV)

    assert every.exit_code == 0, every.output
    shown = json.loads(every.stdout)
    assert shown["base"] == DEFAULT.version
    assert [(r["tenant"], r["outcome"]) for r in shown["scopes"]] == [
        ("acme", "not_due"),
        ("beta", "stored"),
    ]
    assert shown["scopes"][1]["version"] == store.get(CalibrationScope("docs", "beta")).version
    assert [row["used"] for row in listed(runner, data)["scopes"]] == [True, True]
    table = runner.invoke(app, ["calibrations", "list", "--data-dir", str(data)], env=ENV)
    assert "made on another shipped calibration" not in " ".join(table.output.split())

    # A scope whose collection is gone is kept, and the run says so with exit 1.
    store.put(CalibrationScope("gone", "acme"), made_on("cal-000000000000"))
    failed = runner.invoke(app, [*reprobe, "--collection", "gone"], env=ENV)
    assert failed.exit_code == 1, failed.output
    assert "the index has no collection 'gone'" in " ".join(failed.output.split())
    none = runner.invoke(app, [*reprobe, "--collection", "other"], env=ENV)
    assert none.exit_code == 2, none.output  # named, nothing stored, no such collection
    assert "collection 'other' does not exist" in " ".join(none.output.split())
    # A scope never probed (ingested with --no-probe) is probed when named.
    assert runner.invoke(app, [*ingest, "--tenant", "gamma", "--no-probe"], env=ENV).exit_code == 0
    assert store.get(CalibrationScope("docs", "gamma")) is None
    # A tenant alone names no scope: refused as a named scope with nothing stored is.
    alone = runner.invoke(app, [*reprobe, "--tenant", "gamma"], env=ENV)
    assert alone.exit_code == 2, alone.output
    said = " ".join(alone.output.split())
    assert "no calibration is stored for tenant 'gamma': nothing to probe" in said
    assert "(--collection C --tenant gamma)" in said
    assert store.get(CalibrationScope("docs", "gamma")) is None  # nothing probed
    named = runner.invoke(app, [*reprobe, "--collection", "docs", "--tenant", "gamma"], env=ENV)
    assert named.exit_code == 0, named.output
    assert "gamma/docs: stored: no calibration of its own yet" in " ".join(named.output.split())
    assert store.get(CalibrationScope("docs", "gamma")) is not None
    store.delete(CalibrationScope("docs", "gamma"))
    empty = runner.invoke(app, ["calibrations", "reprobe", "--data-dir", str(data)], env=ENV)
    assert empty.exit_code == 1  # the stale "gone" scope is still there
    store.delete(CalibrationScope("gone", "acme"))
    for scope in store.scopes():
        store.delete(scope)
    nothing = runner.invoke(app, ["calibrations", "reprobe", "--data-dir", str(data)], env=ENV)
    assert nothing.exit_code == 0, nothing.output
    assert "no calibration is stored per collection or tenant: nothing to probe" in " ".join(
        nothing.output.split()
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tenant", " "], "--tenant must name a tenant"),
        (["--collection", "a\x1b[2Jb"], "--collection"),
    ],
)
def test_reprobe_refuses_names_no_query_could_carry(
    tmp_path: Path, args: list[str], message: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    result = CliRunner().invoke(
        app, ["calibrations", "reprobe", "--data-dir", str(data), *args], env=ENV
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "\x1b" not in result.output


def test_reprobe_refuses_a_data_dir_nothing_was_ingested_into(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["calibrations", "reprobe", "--data-dir", str(tmp_path / "none")], env=ENV
    )
    assert result.exit_code == 2, result.output
    assert "nothing has been indexed there" in " ".join(result.output.split())


def test_list_says_what_a_feedback_refit_is_and_when_it_refuses_everything(
    tmp_path: Path,
) -> None:
    """ADR 022: a re-fit on a tenant's labels, one on answered results only, and one
    that certified no answer threshold (its scope refuses every query)."""

    def labels(relevant: Any, answered: bool | None) -> list[LabelledResult]:
        return [
            LabelledResult(f"q{i}", {"top_score": i / 300}, True, relevant(i), answered)
            for i in range(300)
        ]

    at = datetime(2026, 11, 25, tzinfo=UTC)
    remapped = refit_calibration(
        DEFAULT, labels(lambda i: i > 150, None), scope="docs/acme", fitted_at=at
    )
    raised = refit_calibration(
        DEFAULT, labels(lambda i: True, True), scope="docs/beta", fitted_at=at
    )
    refused = refit_calibration(
        DEFAULT, labels(lambda i: False, True), scope="docs/gamma", fitted_at=at
    )
    assert remapped.conformal.feasible
    assert raised.conformal.feasible
    assert not refused.conformal.feasible
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")
    for tenant, artifact in (("acme", remapped), ("beta", raised), ("gamma", refused)):
        store.put(CalibrationScope("docs", tenant), artifact)
    rows = {row["tenant"]: row for row in listed(CliRunner(), data)["scopes"]}
    assert rows["acme"]["made_by"] == "feedback: 300 labels (re-mapped and re-certified)"
    assert rows["acme"]["state"] == "in use"
    assert rows["beta"]["made_by"] == (
        "feedback: 300 labels, all on answered results (the bar only raised)"
    )
    assert rows["gamma"]["state"] == "in use, no answer threshold certified: every query is refused"
    assert rows["gamma"]["answer_threshold"] is None
