"""Re-probing after an ingest: a scope is re-certified on the bundled probes when it
has no calibration of its own or moved by more than the fraction, and only then."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import CalibrationArtifact, Provenance
from ragsift.confidence.artifact import UNCERTIFIED_ADVICE_CODE
from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore
from ragsift.evaluation import reprobe as reprobe_module
from ragsift.evaluation import sweep as sweep_module
from ragsift.evaluation.holes import MissingAnswers
from ragsift.evaluation.probes import Probe, bundled_probes, method_of
from ragsift.evaluation.reprobe import (
    in_force,
    mark_scope_uncertified,
    reprobe_after_ingest,
    reprobe_due,
)
from ragsift.evaluation.sweep import Reprober
from ragsift.ingest.indexer import Indexer
from ragsift.retrieval.edge import EdgeIndex
from ragsift.schemas import DocumentEvent
from ragsift.workers.indexer import IndexerHandler
from tests.factories import made_on_base, write_corpus
from tests.unit.evaluation.test_probes_eval import BASE, EMBEDDER, _fit_half_1
from tests.unit.evaluation.test_selfcal_collection import BASE as NO_SAMPLE
from tests.unit.evaluation.test_selfcal_collection import documents
from tests.unit.evaluation.test_squad_eval import TOPICS, write_squad


def _made_by(method: str, chunks: int, source: str = "squad") -> CalibrationArtifact:
    provenance = Provenance(method=method, base_version="b", collection="docs", chunks=chunks)
    data = BASE.data.model_copy(update={"source": source})
    return CalibrationArtifact.model_validate(
        BASE.model_dump()
        | {"version": "", "provenance": provenance.model_dump(), "data": data.model_dump()}
    )


@pytest.mark.parametrize(
    ("current", "chunks", "due"),
    [
        (None, 10, "due"),
        (BASE, 10, "kept"),  # fit on labels: no provenance
        (_made_by("feedback re-fit", 100), 500, "kept"),
        # A feedback re-fit of a probed base (older ones kept the base's provenance).
        (_made_by(method_of("bundled") + ": ...", 100, "feedback:acme/docs"), 500, "kept"),
        (_made_by(method_of("/my/bank.txt") + ": ...", 100), 500, "kept"),
        (_made_by(method_of("bundled") + ": ...", 100), 120, "not_due"),
        (_made_by(method_of("bundled") + ": ...", 100), 80, "not_due"),
        (_made_by(method_of("bundled") + ": ...", 100), 121, "due"),
        (_made_by(method_of("bundled") + ": ...", 100), 79, "due"),
        (_made_by(method_of("bundled") + ": ...", 0), 12, "due"),
    ],
)
def test_a_scope_is_due_when_it_has_none_or_moved_past_the_fraction(
    current: CalibrationArtifact | None, chunks: int, due: str
) -> None:
    assert reprobe_due(current, chunks, 0.2)[0] == due


def test_a_probe_calibration_made_on_another_shipped_calibration_is_due() -> None:
    """After an upgrade refits the shipped calibration, a scope's probe calibration
    (and an uncertified mark) derived from the old one must not outlive it."""
    current = _made_by(method_of("bundled") + ": ...", 100)  # made on base "b"
    assert reprobe_due(current, 100, 0.2, base_version="b")[0] == "not_due"
    due, why = reprobe_due(current, 100, 0.2, base_version="c")
    assert due == "due"
    assert "b" in why
    assert "c" in why
    # Calibrations fit on labels or the user's own probes are still kept.
    feedback = _made_by("feedback re-fit", 100)
    assert reprobe_due(feedback, 100, 0.2, base_version="c")[0] == "kept"
    own_bank = _made_by(method_of("/my/bank.txt") + ": ...", 100)
    assert reprobe_due(own_bank, 100, 0.2, base_version="c")[0] == "kept"


async def test_an_upgrade_of_the_shipped_calibration_re_probes_an_unchanged_scope(
    index: EdgeIndex, tmp_path: Path
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    scope = CalibrationScope("docs", "alpha")
    first = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="alpha"
    )
    assert first.outcome == "stored", first.message
    stored = store.get(scope)
    assert stored is not None
    assert stored.provenance is not None
    # The same scope, as an older ragsift left it: made on another shipped calibration.
    store.put(scope, made_on_base(stored, "cal-000000000000"))
    again = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="alpha"
    )
    assert again.outcome == "stored", again.message
    assert "cal-000000000000" in again.message
    renewed = store.get(scope)
    assert renewed is not None
    assert renewed.provenance is not None
    assert renewed.provenance.base_version == BASE.version


async def test_reprobing_stores_once_then_waits_for_the_collection_to_move(
    index: EdgeIndex, tmp_path: Path
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    args = (index, EMBEDDER, BASE, store)
    first = await reprobe_after_ingest(*args, collection="docs", tenant="alpha")
    assert first.outcome == "stored", first.message
    stored = store.get(CalibrationScope("docs", "alpha"))
    assert stored is not None
    assert stored.version == first.version
    assert stored.provenance is not None
    assert stored.provenance.method.startswith(method_of("bundled"))
    assert (stored.provenance.chunks, stored.provenance.tenant) == (first.chunks, "alpha")
    assert first.threshold is not None
    assert first.threshold >= BASE.conformal.threshold
    again = await reprobe_after_ingest(*args, collection="docs", tenant="alpha")
    assert again.outcome == "not_due"
    # Half as many chunks again: past the fraction, so probed once more.
    await Indexer(index, EMBEDDER).ingest("alpha", "docs", documents(60))
    moved = await reprobe_after_ingest(*args, collection="docs", tenant="alpha")
    assert moved.outcome == "stored", moved.message
    assert moved.chunks > first.chunks


async def test_a_scope_of_a_few_chunks_is_probed_not_left_on_the_fit_corpus_scale(
    index: EdgeIndex, tmp_path: Path
) -> None:
    """ADR 047: beta's 3 chunks were "too small" and kept the shipped calibration, read
    on SQuAD's scale, which refused most of a tiny collection's answers."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    small = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="beta"
    )
    assert small.outcome in ("stored", "infeasible"), small.message
    assert small.chunks == 3
    assert store.scopes() == [CalibrationScope("docs", "beta")]
    stored = store.get(CalibrationScope("docs", "beta"))
    assert stored is not None
    assert stored.provenance is not None
    assert stored.provenance.method.startswith(method_of("bundled"))
    assert stored.provenance.chunks == 3


async def test_reprobing_leaves_what_it_cannot_or_should_not_replace(
    index: EdgeIndex, tmp_path: Path
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    nothing = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="nobody"
    )
    assert nothing.outcome == "too_small"
    assert nothing.message == "0 chunks; probing needs at least 1"
    unsupported = await reprobe_after_ingest(
        index, EMBEDDER, NO_SAMPLE, store, collection="docs", tenant="alpha"
    )
    assert unsupported.outcome == "unsupported"
    labelled = _made_by("feedback-remap", 40)
    store.put(CalibrationScope("docs", "alpha"), labelled)
    kept = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="alpha"
    )
    assert kept.outcome == "kept"
    assert store.get(CalibrationScope("docs", "alpha")) == labelled
    assert store.scopes() == [CalibrationScope("docs", "alpha")]


def _its_own_sentences() -> list[Probe]:
    """Probes the collection does answer: no bar can be certified with them."""
    return [
        Probe(sentence, doc.doc_id)
        for doc in documents(40)
        for sentence in doc.text.split(". ")
        for _ in range(2)
    ]


async def test_an_uncertifiable_collection_keeps_its_bar_marked_as_not_holding(
    index: EdgeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing certified: answers do not change, but the scope's results must say that
    its bar is known not to hold (before, nothing was stored and they said nothing)."""
    monkeypatch.setattr(reprobe_module, "bundled_probes", _its_own_sentences)
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    done = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="alpha"
    )
    assert done.outcome == "infeasible", done.message
    assert UNCERTIFIED_ADVICE_CODE in done.message
    marked = store.get(CalibrationScope("docs", "alpha"))
    assert marked is not None
    assert done.version == marked.version != BASE.version
    assert marked.provenance is not None
    assert marked.provenance.uncertified is not None
    assert "no answer threshold is certified at 40 chunks" in marked.provenance.uncertified
    # The bar, the model and the mix table in force are kept as they were.
    assert marked.conformal == BASE.conformal
    assert (marked.coefficients, marked.intercept) == (BASE.coefficients, BASE.intercept)
    # The mark survives the store's JSON, and the scope is not re-probed until it moves.
    reloaded = DirectoryCalibrationStore(tmp_path / "calibrations").get(
        CalibrationScope("docs", "alpha")
    )
    assert reloaded == marked
    assert reprobe_due(marked, 40, 0.2)[0] == "not_due"
    assert reprobe_due(marked, 60, 0.2)[0] == "due"


@pytest.mark.parametrize("made_on", ["base", "older"])
async def test_an_uncertifiable_rescan_keeps_the_higher_bar_of_the_last_probes(
    index: EdgeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made_on: str
) -> None:
    """The scope's own probe calibration stays in force when its re-probe certifies
    nothing: falling back to the shipped bar would lower it. Not one made on an older
    shipped calibration: the mark would pass it off as made on this one."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    scope = CalibrationScope("docs", "alpha")
    earlier = BASE.model_copy(
        update={
            "provenance": Provenance(
                method=method_of("bundled"),
                base_version=BASE.version if made_on == "base" else "cal-000000000000",
                collection="docs",
                tenant="alpha",
                chunks=10,
            ),
            "conformal": BASE.conformal.model_copy(update={"threshold": 0.9}),
        }
    )
    earlier = CalibrationArtifact.model_validate({**earlier.model_dump(), "version": ""})
    store.put(scope, earlier)
    monkeypatch.setattr(reprobe_module, "bundled_probes", _its_own_sentences)
    done = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="alpha"
    )
    assert done.outcome == "infeasible", done.message
    marked = store.get(scope)
    assert marked is not None
    assert marked.provenance is not None
    assert marked.provenance.uncertified is not None
    assert marked.provenance.base_version == BASE.version
    if made_on == "base":
        assert marked.conformal.threshold == 0.9
        assert "0.90" in marked.provenance.uncertified
    else:
        assert marked.conformal == BASE.conformal


def test_cli_ingest_probes_the_scope_it_wrote_unless_told_not_to(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", documents(30))
    runner = CliRunner()
    env = {"RAGSIFT_EMBEDDER_KIND": "hashing"}
    ingest = ["ingest", str(corpus), "--tenant", "acme", "--collection", "docs"]
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")

    done = runner.invoke(app, [*ingest, "--data-dir", str(data)], env=env)
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())
    assert "calibration for acme/docs: re-certified on the bundled probes" in said
    stored = store.get(CalibrationScope("docs", "acme"))
    assert stored is not None
    assert stored.version in said
    again = runner.invoke(app, [*ingest, "--data-dir", str(data)], env=env)
    assert again.exit_code == 0, again.output
    assert "not re-probed: 30 chunks, 0% off the 30 its probes saw" in " ".join(
        again.output.split()
    )
    assert store.get(CalibrationScope("docs", "acme")) == stored

    for how, extra_env in (
        (["--no-probe"], {}),
        ([], {"RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST": "false"}),
    ):
        fresh = tmp_path / f"fresh{len(how)}"
        quiet = runner.invoke(app, [*ingest, *how, "--data-dir", str(fresh)], env=env | extra_env)
        assert quiet.exit_code == 0, quiet.output
        assert "calibration for" not in quiet.output
        assert DirectoryCalibrationStore(fresh / "calibrations").scopes() == []


def test_eval_probes_by_default_as_the_service_does(tmp_path: Path) -> None:
    data, artifact = _fit_half_1(tmp_path)
    runner = CliRunner()
    args = ["eval", *data, "--half", "2", "--artifact", str(artifact), "--json"]
    auto = runner.invoke(app, args)
    assert auto.exit_code == 0, auto.output
    summary = json.loads(auto.stdout.strip().splitlines()[-1])
    assert summary["probes"]["source"] == "bundled"
    bank = len(bundled_probes())
    assert summary["probes"]["n"] == bank
    assert summary["probes"]["applied"] is True
    assert f"re-certified on this corpus with {bank} probes" in summary["calibration"]

    plain = runner.invoke(app, [*args, "--probes", "none"])
    assert plain.exit_code == 0, plain.output
    as_is = json.loads(plain.stdout.strip().splitlines()[-1])
    assert "probes" not in as_is
    assert (
        as_is["calibration_version"] == CalibrationArtifact.from_json(artifact.read_text()).version
    )

    # An artifact without an in-scope sample is served as it is, so evaluated as it is.
    bare = json.loads(artifact.read_text())
    del bare["conformal"]["in_scope"]
    bare["version"] = ""
    old = tmp_path / "old.json"
    old.write_text(CalibrationArtifact.model_validate(bare).to_json(), encoding="utf-8")
    unprobed = runner.invoke(app, ["eval", *data, "--half", "2", "--artifact", str(old), "--json"])
    assert unprobed.exit_code == 0, unprobed.output
    assert "probes: none" in unprobed.output
    assert "probes" not in json.loads(unprobed.stdout.strip().splitlines()[-1])


async def _settled(reprober: Reprober, n: int) -> None:
    for _ in range(400):
        if len(reprober.done) >= n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{n} re-probes did not finish: {reprober.done}")


async def test_the_reprober_probes_a_scope_once_it_settles_and_counts_each_outcome(
    index: EdgeIndex, tmp_path: Path
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    counted: list[str] = []
    reprober = Reprober(index, EMBEDDER, BASE, store, quiet_s=0.3, count=counted.append)
    for _ in range(5):  # a bulk load: one probe when it settles, not one per batch
        reprober.touched("alpha", "docs")
        await asyncio.sleep(0.05)
    reprober.touched("nobody", "docs")
    await _settled(reprober, 2)
    await asyncio.sleep(0.5)  # nothing else is pending
    assert sorted(d.outcome for d in reprober.done) == ["stored", "too_small"]
    assert sorted(counted) == ["stored", "too_small"]
    assert store.scopes() == [CalibrationScope("docs", "alpha")]
    await reprober.close()


async def test_a_failed_reprobe_is_counted_and_the_next_change_tries_again(
    index: EdgeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    async def flaky(*args: object, **kwargs: object) -> object:
        calls.append(str(kwargs["tenant"]))
        if len(calls) == 1:
            raise OSError("disk full")
        return await reprobe_after_ingest(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sweep_module, "reprobe_after_ingest", flaky)
    counted: list[str] = []
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    reprober = Reprober(index, EMBEDDER, BASE, store, quiet_s=0.0, count=counted.append)
    reprober.touched("alpha", "docs")
    for _ in range(100):
        if counted:
            break
        await asyncio.sleep(0.05)
    assert counted == ["error"]
    reprober.touched("alpha", "docs")
    for _ in range(400):
        if len(counted) == 2:
            break
        await asyncio.sleep(0.05)
    assert counted == ["error", "stored"]
    await reprober.close()


async def test_the_indexer_hands_each_scope_it_changed_to_the_reprober(
    index: EdgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str]] = []

    class Recorder:
        def touched(self, tenant: str, collection: str) -> None:
            seen.append((tenant, collection))

        async def close(self) -> None:
            seen.append(("closed", ""))

    indexer = Indexer(index, EMBEDDER)
    handler = IndexerHandler(indexer, Recorder())  # type: ignore[arg-type]
    good = DocumentEvent(event_id="e1", tenant_id="acme", doc_id="a", text="Kalo mi ren.")
    other = DocumentEvent(
        event_id="e2", tenant_id="zeta", collection="docs", doc_id="b", text="Tu vos zel."
    )
    bad = DocumentEvent(event_id="e3", tenant_id="acme", doc_id="c", text="Pra dun fio.")
    real_apply = indexer.apply

    async def apply(event: DocumentEvent) -> object:
        if event.doc_id == "c":
            raise RuntimeError("index down")
        return await real_apply(event)

    monkeypatch.setattr(indexer, "apply", apply)
    outcomes = await handler.handle_batch([good, other, bad])
    assert isinstance(outcomes[2], RuntimeError)
    assert seen == [("acme", "default"), ("zeta", "docs")]
    await handler.close()
    assert seen[-1] == ("closed", "")


def test_eval_never_certifies_on_questions_it_scores(tmp_path: Path) -> None:
    """Probes among the evaluated questions would flatter the result: past a stray few,
    auto leaves the bank out and says why; a bank given by name is refused."""
    data, artifact = _fit_half_1(tmp_path)
    whole = len(bundled_probes())
    bank = bundled_probes()[: whole // 50]  # 2% of the bank: over the 1% left out
    outside = write_squad(
        tmp_path / "bank.json",
        {
            "Bank": [
                (f"Paragraph {i} of nothing in particular.", p.text) for i, p in enumerate(bank)
            ]
        },
        answers=False,
    )
    labelled = data[1]
    args = ["eval", "--labelled", labelled, "--out-of-scope", str(outside)]
    args += ["--artifact", str(artifact), "--json"]
    runner = CliRunner()
    auto = runner.invoke(app, args)
    assert auto.exit_code == 0, auto.output
    said = " ".join(auto.output.split())
    among = f"probes: none ({len(bank)} of the {whole} probe questions (bundled) are among the"
    assert f"{among} evaluated" in said
    assert "probes" not in json.loads(auto.stdout.strip().splitlines()[-1])
    named = runner.invoke(app, [*args, "--probes", "bundled"])
    assert named.exit_code == 2
    assert "are among the evaluated questions" in named.output
    own = tmp_path / "own.txt"
    questions = [q for pairs in TOPICS.values() for _, q in pairs]
    own.write_text("\n".join(questions * 4) + "\n", encoding="utf-8")
    mine = runner.invoke(app, [*args, "--probes", str(own)])
    assert mine.exit_code == 2
    assert f"{len(questions) * 4} of the {len(questions) * 4} probe questions" in " ".join(
        mine.output.split()
    )


def _corrupt_scope(tmp_path: Path) -> tuple[DirectoryCalibrationStore, CalibrationScope]:
    """A store whose calibration for docs/alpha is a file that cannot be read."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    scope = CalibrationScope("docs", "alpha")
    store.put(scope, BASE)
    (written,) = list((tmp_path / "calibrations").rglob("*.json"))
    written.write_text("{not json", encoding="utf-8")
    return store, scope


def test_a_mark_replaces_a_corrupt_scope_calibration(tmp_path: Path) -> None:
    """The scope's stored file cannot be read: the mark is made on the shipped
    calibration and replaces it, instead of the marking failing on it."""
    store, scope = _corrupt_scope(tmp_path)
    provenance = Provenance(method="probes (bundled)", base_version=BASE.version, collection="docs")

    kept = in_force(store, scope, BASE)
    marked = mark_scope_uncertified(store, scope, kept, provenance, "nothing certified here")

    assert store.get(scope) == marked
    assert marked.conformal == BASE.conformal
    assert marked.provenance is not None
    assert marked.provenance.uncertified == "nothing certified here"


async def test_an_unreadable_scope_calibration_is_probed_again(
    index: EdgeIndex, tmp_path: Path
) -> None:
    """A corrupt stored calibration does not stop the ingest's re-probe: the probes'
    calibration replaces it, and the message says why it ran."""
    store, scope = _corrupt_scope(tmp_path)

    done = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="alpha"
    )

    assert done.outcome == "stored", done.message
    assert "cannot be read" in done.message
    stored = store.get(scope)
    assert stored is not None
    assert stored.version == done.version


async def test_a_stored_reprobe_hands_on_its_left_out_answer_estimate(
    index: EdgeIndex, tmp_path: Path
) -> None:
    """The streaming indexer's re-probe estimates what the new calibration answers of
    questions whose answer the scope lacks (docs/confidence.md, section 12)."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    seen: list[tuple[CalibrationScope, MissingAnswers]] = []
    reprober = Reprober(
        index, EMBEDDER, BASE, store, quiet_s=0.0, holes=lambda s, e: seen.append((s, e))
    )
    reprober.touched("alpha", "docs")
    reprober.touched("nobody", "docs")  # no chunk: not probed, nothing estimated
    await _settled(reprober, 2)
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.05)
    assert [scope for scope, _ in seen] == [CalibrationScope("docs", "alpha")]
    estimate = seen[0][1]
    assert estimate.asked >= 30
    stored = store.get(CalibrationScope("docs", "alpha"))
    assert stored is not None
    assert estimate.threshold == stored.conformal.threshold
    # Stored with the calibration, so every process reading the store can show it.
    assert stored.provenance is not None
    recorded = stored.provenance.missing_answers
    assert recorded is not None
    assert (recorded.asked, recorded.answered) == (estimate.asked, estimate.answered)
    await reprober.close()


async def test_a_failed_estimate_leaves_the_stored_calibration_and_the_indexer_alone(
    index: EdgeIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(*args: object, **kwargs: object) -> object:
        raise OSError("index went away")

    monkeypatch.setattr(reprobe_module, "missing_answer_rate", broken)
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    counted: list[str] = []
    seen: list[object] = []
    reprober = Reprober(
        index,
        EMBEDDER,
        BASE,
        store,
        quiet_s=0.0,
        count=counted.append,
        holes=lambda *a: seen.append(a),
    )
    reprober.touched("alpha", "docs")
    await _settled(reprober, 1)
    await asyncio.sleep(0.2)
    assert counted == ["stored"]
    assert store.scopes() == [CalibrationScope("docs", "alpha")]
    assert seen == []
    assert "estimating what" in caplog.text
    await reprober.close()


async def test_an_estimate_that_asked_nothing_is_logged_not_handed_on(
    index: EdgeIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A gauge of 0 would read "nothing answered"; with nothing asked there is no figure."""

    async def empty(*args: object, **kwargs: object) -> MissingAnswers:
        return MissingAnswers(asked=0, answered=0, threshold=0.5)

    monkeypatch.setattr(reprobe_module, "missing_answer_rate", empty)
    caplog.set_level("INFO", logger=reprobe_module.log.name)
    seen: list[object] = []
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    reprober = Reprober(index, EMBEDDER, BASE, store, quiet_s=0.0, holes=lambda *a: seen.append(a))
    reprober.touched("alpha", "docs")
    await _settled(reprober, 1)
    for _ in range(40):
        if "could not be estimated" in caplog.text:
            break
        await asyncio.sleep(0.05)
    assert reprober.done[0].outcome == "stored"
    assert "could not be estimated" in caplog.text
    assert seen == []
    await reprober.close()


@pytest.mark.parametrize("certifies", [True, False])
async def test_a_label_fit_stored_while_probing_is_not_overwritten(
    index: EdgeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, certifies: bool
) -> None:
    """The probes take a while; a feedback re-fit the calibration worker stored for the
    scope meanwhile was replaced by the probes' calibration (or the mark), and its
    labels, marked re-fit, were not fit again until one of them changed."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    scope = CalibrationScope("docs", "alpha")
    labelled = _made_by("feedback-remap", 40)
    if not certifies:
        monkeypatch.setattr(reprobe_module, "bundled_probes", _its_own_sentences)
    probe = reprobe_module.probe_calibrate

    async def meanwhile(*args: object, **kwargs: object) -> CalibrationArtifact:
        store.put(scope, labelled)  # the calibration worker, while the probes run
        return await probe(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reprobe_module, "probe_calibrate", meanwhile)
    done = await reprobe_after_ingest(
        index, EMBEDDER, BASE, store, collection="docs", tenant="alpha"
    )
    assert done.outcome == "kept", done.message
    assert "while" in done.message
    assert store.get(scope) == labelled
