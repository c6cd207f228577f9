"""The feedback re-fit: a tenant's labels move its probability map and conformal threshold."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime

import numpy as np
import pytest

from ragsift.confidence.artifact import CalibrationArtifact, load_calibration
from ragsift.confidence.conformal import conformal_threshold
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.features import feature_matrix
from ragsift.confidence.mix import fit_mix_table
from ragsift.confidence.refit import (
    MIN_REFIT_LABELS,
    LabelledResult,
    describe_refit,
    labels_show_wrong_answers,
    refit_calibration,
    refit_kind,
    withheld_because,
)
from ragsift.confidence.signals import SIGNAL_NAMES
from ragsift.retrieval.engines import packaged_calibration_path

AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def base() -> CalibrationArtifact:
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    return load_calibration(path)


def labelled(n: int, *, relevant_share: float, seed: int = 0) -> list[LabelledResult]:
    """Results whose scores are high, but of which only ``relevant_share`` were relevant.

    Relevance still rises with the score, so there is something to re-map on.
    """
    rng = random.Random(seed)
    out = []
    for i in range(n):
        top = rng.uniform(0.3, 0.9)
        # P(relevant) rises with top, scaled to the tenant's (lower) share.
        relevant = rng.random() < relevant_share * 2 * (top - 0.3) / 0.6
        signals = {"top_score": top, "support": top * 0.8, "consensus": 0.5, "agreement": top}
        out.append(LabelledResult(f"q-{seed}-{i}", signals, True, relevant))
    return out


def probabilities(artifact: CalibrationArtifact, labels: list[LabelledResult]) -> np.ndarray:
    rows = np.array([[r.signals.get(s, np.nan) for s in SIGNAL_NAMES] for r in labels])
    x = feature_matrix(rows, artifact.features)
    return 1 / (1 + np.exp(-(x @ artifact.coef_array + artifact.intercept)))


def test_overconfident_base_is_mapped_down_to_the_tenants_rate(
    base: CalibrationArtifact,
) -> None:
    labels = labelled(400, relevant_share=0.3)
    new = refit_calibration(base, labels, scope="acme/docs", fitted_at=AT)
    observed = np.mean([r.relevant for r in labels])
    assert abs(probabilities(new, labels).mean() - observed) < 0.05
    assert probabilities(base, labels).mean() > observed + 0.2  # what the re-fit corrected
    assert new.version != base.version


def test_refit_keeps_the_base_model_and_records_provenance(base: CalibrationArtifact) -> None:
    new = refit_calibration(
        base, labelled(200, relevant_share=0.5), scope="acme/docs", fitted_at=AT
    )
    assert new.features == base.features
    ratio = [n / b for n, b in zip(new.coefficients, base.coefficients, strict=True) if b]
    assert max(ratio) - min(ratio) < 1e-9  # one temperature for every coefficient
    assert new.similarity_threshold == base.similarity_threshold
    assert new.data.source == "feedback:acme/docs"
    assert new.data.n_examples == 200
    assert new.data.n_fit == new.data.n_conformal == 200  # every label does both (ADR 022)
    assert base.version in new.data.notes
    assert AT.isoformat() in new.data.notes
    assert new.conformal.method.startswith("feedback-remap+")
    assert CalibrationArtifact.from_json(new.to_json()) == new  # a valid, self-consistent file


def test_conformal_threshold_moves_with_the_tenants_labels(base: CalibrationArtifact) -> None:
    good = refit_calibration(base, labelled(400, relevant_share=0.9), scope="a/c", fitted_at=AT)
    poor = refit_calibration(base, labelled(400, relevant_share=0.3), scope="a/c", fitted_at=AT)
    assert (good.conformal.threshold, good.conformal.feasible) != (
        poor.conformal.threshold,
        poor.conformal.feasible,
    )
    assert good.conformal.n_calibration == poor.conformal.n_calibration == 400


def reported(artifact: CalibrationArtifact, labels: list[LabelledResult]) -> np.ndarray:
    """Confidences as the engine reports them (rounded to four decimals)."""
    return np.round(probabilities(artifact, labels), 4)


@pytest.mark.parametrize("share", [0.3, 0.6, 0.9])
def test_the_carried_threshold_answers_what_the_base_certified(
    base: CalibrationArtifact, share: float
) -> None:
    labels = labelled(600, relevant_share=share, seed=3)
    new = refit_calibration(base, labels, scope="a/c", fitted_at=AT)
    y = np.array([r.relevant for r in labels], dtype=float)
    logits = np.log(probabilities(base, labels)) - np.log1p(-probabilities(base, labels))
    # The walk reads each query's rank: the share of queries with a logit at most its own.
    walked = (logits[None, :] <= logits[:, None]).mean(axis=1)
    walk = conformal_threshold(walked, y)
    assert new.conformal.feasible == walk.feasible
    assert new.conformal.n_calibration == 600
    conf = reported(new, labels)

    def same_answers(base_bar: float, bar: float) -> None:
        differ = (walked >= base_bar) != (conf >= bar)
        # Only a tie at the reported fourth decimal may add a query, at the bar itself.
        assert (conf[differ] == bar).all()
        assert (conf[walked >= base_bar] >= bar).all()  # never one fewer

    if walk.feasible:
        same_answers(walk.threshold, new.conformal.threshold)
        assert new.conformal.coverage == walk.coverage
    # Each mix bar too: the same queries as the base's bar at that share.
    assert new.conformal.mix is not None
    base_mix = fit_mix_table(walked, y, alpha=0.1, delta=0.1)
    assert base_mix is not None
    for base_bar, bar in zip(base_mix.thresholds, new.conformal.mix.thresholds, strict=True):
        if base_bar >= 1.0:
            assert bar == 1.0  # none certified at that share
        else:
            same_answers(base_bar, bar)


def test_a_flat_remap_certifies_all_or_nothing(base: CalibrationArtifact) -> None:
    """Relevance falling with the score: the re-map's slope is clipped to 0, so every
    query gets one confidence, and the threshold answers all of them or none."""
    rng = random.Random(5)
    labels = []
    for i in range(400):
        top = rng.uniform(0.3, 0.9)
        relevant = rng.random() < 0.99 - 0.05 * (top - 0.3)
        signals = {"top_score": top, "support": top * 0.8, "consensus": 0.5, "agreement": top}
        labels.append(LabelledResult(f"q-{i}", signals, True, relevant))
    new = refit_calibration(base, labels, scope="a/c", fitted_at=AT)
    conf = reported(new, labels)
    assert conf.min() == conf.max()
    answered = conf >= new.conformal.threshold
    assert answered.all() if new.conformal.feasible else not answered.any()


def on_answers(labels: list[LabelledResult]) -> list[LabelledResult]:
    """The same labels, each on a result that was answered."""
    return [dataclasses.replace(r, answered=True) for r in labels]


@pytest.mark.parametrize("right", ["all", "above 0.4", "some"])
def test_labels_on_answers_only_keep_the_map_and_only_raise_the_bar(
    base: CalibrationArtifact, right: str
) -> None:
    labels = on_answers(labelled(400, relevant_share=0.3, seed=4))
    if right != "some":  # every answer right, or those above a top score of 0.4
        labels = [
            dataclasses.replace(r, relevant=right == "all" or r.signals["top_score"] > 0.4)
            for r in labels
        ]
    new = refit_calibration(base, labels, scope="a/c", fitted_at=AT)
    assert new.coefficients == base.coefficients  # the base's map: no re-map on the top
    assert new.intercept == base.intercept
    assert new.remap == base.remap
    assert new.conformal.method.startswith("feedback-raise+")
    assert new.data.n_fit == 0
    assert new.data.n_conformal == 400
    y = np.array([r.relevant for r in labels], dtype=float)
    walk = conformal_threshold(reported(base, labels), y)
    assert new.conformal.feasible == walk.feasible == (right != "some")
    if walk.feasible:
        assert new.conformal.threshold == max(walk.threshold, base.conformal.threshold)
        assert new.conformal.mix is not None
        assert min(new.conformal.mix.thresholds) >= new.conformal.threshold
        # The near-miss table reads the same confidences: kept, floored at the new bar.
        near, was = new.conformal.near_miss, base.conformal.near_miss
        assert near is not None
        assert was is not None
        assert near.near_miss == was.near_miss
        assert near.near_miss_share == was.near_miss_share
        # ... on the base's scale, so a scope's reading carries over (ADR 040).
        assert (near.binned_on, near.edges, was.binned_on) == (base.version, None, None)
        assert near.scales(new.version) == (base.version, None)
        floored = [[max(t, new.conformal.threshold) for t in row] for row in was.thresholds]
        assert [list(row) for row in near.thresholds] == floored
    if right == "all":  # nothing to raise it for
        assert new.conformal.threshold == base.conformal.threshold
        # ... and what is said of the kept bar is what the labels say there.
        answered = reported(base, labels) >= base.conformal.threshold
        assert new.conformal.coverage == pytest.approx(answered.mean())
        assert new.conformal.risk_upper_bound < 0.1  # no wrong answer among them
    if right == "above 0.4":  # wrong answers above the base's bar: raised past them
        assert new.conformal.threshold > base.conformal.threshold


def test_one_refused_or_unknown_result_among_the_labels_is_a_full_refit(
    base: CalibrationArtifact,
) -> None:
    answers = on_answers(labelled(300, relevant_share=0.6, seed=2))
    for odd in (False, None):
        labels = [*answers[:-1], dataclasses.replace(answers[-1], answered=odd)]
        new = refit_calibration(base, labels, scope="a/c", fitted_at=AT)
        assert new.conformal.method.startswith("feedback-remap+")
        assert new.data.n_fit == 300


@pytest.mark.parametrize("share", [0.3, 0.9])
def test_a_full_refit_carries_the_near_miss_table_onto_its_scale(
    base: CalibrationArtifact, share: float
) -> None:
    """The re-map moves the confidence; the base's near-miss table moves with it, so
    the scope's bar still rises where near misses show (ADR 039)."""
    labels = labelled(400, relevant_share=share, seed=5)
    new = refit_calibration(base, labels, scope="a/c", fitted_at=AT)
    was, near = base.conformal.near_miss, new.conformal.near_miss
    assert was is not None
    if not new.conformal.feasible:  # refuses everything: nothing to raise
        assert near is None
        return
    assert near is not None
    assert near.thresholds != was.thresholds  # on the re-fit's scale, not the base's
    assert min(min(row) for row in near.thresholds) >= new.conformal.threshold
    assert 0.01 <= near.near_miss_share <= 0.6  # what the labelled traffic held
    assert (near.n_answerable, near.n_near_miss) == (was.n_answerable, was.n_near_miss)
    # Served on its own scale, read on the base's bins (ADR 040).
    assert near.scales(new.version) == (new.version, base.version)
    # Each carried bar answers what the base's answered: a base bar of p is the base
    # logit logit(p), which the re-fit serves as sigmoid(t * logit(p) + a).
    assert base.remap is None
    k = next(i for i, c in enumerate(base.coefficients) if c)
    t = new.coefficients[k] / base.coefficients[k]
    a = new.intercept - t * base.intercept
    for row_was, row_now in zip(was.thresholds, near.thresholds, strict=True):
        for p, now in zip(row_was, row_now, strict=True):
            if p >= 1.0 or p <= 0.0:
                continue
            exact = 1 / (1 + np.exp(-(t * np.log(p / (1 - p)) + a)))
            assert now == max(np.ceil(exact * 100 - 1e-4) / 100, new.conformal.threshold)
    assert CalibrationArtifact.from_json(new.to_json()) == new


def test_same_labels_in_any_order_give_the_same_version(base: CalibrationArtifact) -> None:
    labels = labelled(200, relevant_share=0.5)
    shuffled = list(labels)
    random.Random(7).shuffle(shuffled)
    a = refit_calibration(base, labels, scope="a/c", fitted_at=AT)
    b = refit_calibration(base, shuffled, scope="a/c", fitted_at=AT)
    assert a.version == b.version


def test_too_few_duplicated_or_one_sided_labels_are_refused(base: CalibrationArtifact) -> None:
    with pytest.raises(ConfidenceError, match=f"at least {MIN_REFIT_LABELS}"):
        refit_calibration(
            base, labelled(MIN_REFIT_LABELS - 1, relevant_share=0.5), scope="a/c", fitted_at=AT
        )
    twice = labelled(30, relevant_share=0.5) * 2
    with pytest.raises(ConfidenceError, match="one entry per query id"):
        refit_calibration(base, twice, scope="a/c", fitted_at=AT)
    all_bad = [
        LabelledResult(r.query_id, r.signals, r.kept, False)
        for r in labelled(60, relevant_share=0.5)
    ]
    with pytest.raises(ConfidenceError, match="all relevant or all not relevant"):
        refit_calibration(base, all_bad, scope="a/c", fitted_at=AT)


@pytest.mark.filterwarnings("error")
def test_hostile_signals_do_not_break_the_fit(base: CalibrationArtifact) -> None:
    labels = labelled(100, relevant_share=0.5)
    odd = [
        LabelledResult("q-huge", {"top_score": 1e308, "agreement": -1e308}, True, True),
        LabelledResult("q-empty", {}, False, False),
        LabelledResult("q-名前\x00", {"top_score": 0.5, "unknown_signal": 3.0}, True, False),
    ]
    new = refit_calibration(base, labels + odd, scope="a/c", fitted_at=AT)
    assert all(np.isfinite(new.coefficients))
    assert np.isfinite(new.intercept)


def test_a_refit_says_what_it_did_to_the_bar(base: CalibrationArtifact) -> None:
    full = refit_calibration(base, labelled(400, relevant_share=0.9), scope="a/c", fitted_at=AT)
    assert full.conformal.feasible
    assert describe_refit(base, full) == (
        f"answer threshold {base.conformal.threshold:.2f} ->"
        f" {full.conformal.threshold:.2f} on 400 labels"
    )
    right = [
        dataclasses.replace(r, relevant=True) for r in on_answers(labelled(200, relevant_share=1))
    ]
    kept = refit_calibration(base, right, scope="a/c", fitted_at=AT)
    assert describe_refit(base, kept).endswith(
        "on 200 labels (every label on an answered result: the bar can only rise)"
    )
    assert (refit_kind(full), refit_kind(kept), refit_kind(base)) == (
        "feedback-remap",
        "feedback-raise",
        None,
    )
    wrong = on_answers(labelled(200, relevant_share=0.3))
    none = refit_calibration(base, wrong, scope="a/c", fitted_at=AT)
    assert describe_refit(base, none).startswith("no answer threshold is certified on 200 labels")
    assert "refused until more labels" in describe_refit(base, none)


def test_a_refit_keeps_the_scopes_score_alignment(base: CalibrationArtifact) -> None:
    from ragsift.confidence.alignment import ProbeLevels, ScoreAlignment

    levels = ProbeLevels(dense=0.1, bm25=2.5, probes=3480)
    aligned = CalibrationArtifact.model_validate(
        {
            **base.model_dump(mode="json"),
            "version": "",
            "alignment": ScoreAlignment(
                dense_offset=0.15, bm25_scale=3.0, levels=levels
            ).model_dump(),
        }
    )
    new = refit_calibration(aligned, labelled(400, relevant_share=0.5), scope="a/c", fitted_at=AT)
    # the labels' signals were read on the aligned scale: the re-fit reads on it too
    assert new.alignment == aligned.alignment
    assert new.probe_moves().startswith("scores aligned on the probes: cosine +0.150")


def test_dense_only_labels_are_refit_as_they_were_scored(base: CalibrationArtifact) -> None:
    """ADR 028: a label on a dense-only result has no agreement; the re-fit imputes it as
    the base's dense-only fit did when the result was scored, and keeps that fit."""
    fit = {"intercept": 0.0, "slope": 0.5, "n_examples": 1, "risk_upper_bound": 0.1, "coverage": 0}
    with_fit = CalibrationArtifact.model_validate(
        {**base.model_dump(mode="json"), "version": "", "dense_only": fit}
    )

    def dense(labels: list[LabelledResult]) -> list[LabelledResult]:
        return [
            dataclasses.replace(
                r, signals={k: v for k, v in r.signals.items() if k != "agreement"}, dense_only=True
            )
            for r in labels
        ]

    labels = dense(labelled(400, relevant_share=0.5))
    new = refit_calibration(with_fit, labels, scope="a/c", fitted_at=AT)
    assert new.dense_only == with_fit.dense_only
    # The same labels as the plain imputation reads them (agreement = top score) are
    # another fit: the dense-only rows were not read as hybrid ones.
    plain = [dataclasses.replace(r, dense_only=False) for r in labels]
    other = refit_calibration(with_fit, plain, scope="a/c", fitted_at=AT)
    assert other.coefficients != new.coefficients
    # ... and with half the agreement they had, the re-fit read them as scored.
    halved = [
        dataclasses.replace(
            r, signals={**r.signals, "agreement": 0.5 * r.top_score}, dense_only=False
        )
        for r in labels
    ]
    same = refit_calibration(with_fit, halved, scope="a/c", fitted_at=AT)
    assert same.coefficients == pytest.approx(new.coefficients)


def mostly_unanswerable(n: int, answered: int, wrong: int) -> list[LabelledResult]:
    """``n`` labels of a scope whose traffic is mostly unanswerable: the ``answered``
    best-scoring results were served as answers, ``wrong`` of them without the answer;
    of the refused rest, one in ten held it."""
    out = []
    for i in range(n):
        top = 0.9 - 0.6 * i / n
        served = i < answered
        relevant = (i >= wrong) if served else i % 10 == 0
        signals = {"top_score": top, "support": top * 0.8, "consensus": 0.5, "agreement": top}
        out.append(LabelledResult(f"q-{i}", signals, True, relevant, served))
    return out


def test_a_refit_too_few_labels_certify_is_withheld_not_a_refusal(
    base: CalibrationArtifact,
) -> None:
    # ADR 031: 200 labels hold 20 answers, one of them wrong: no bar certifies at
    # alpha = 0.1 on 20 answers, but nothing says the served answers fail it.
    labels = mostly_unanswerable(200, answered=20, wrong=1)
    new = refit_calibration(base, labels, scope="acme/docs", fitted_at=AT)
    assert not new.conformal.feasible
    why = withheld_because(new, labels)
    assert why is not None
    assert "wrong 1 of 20 times, within it" in why
    assert "stays" in why
    # No answer among the labels: nothing to judge, nothing refused on it either.
    blind = [dataclasses.replace(r, answered=None) for r in labels]
    assert withheld_because(refit_calibration(base, blind, scope="s", fitted_at=AT), blind)


def test_a_refit_whose_labels_show_wrong_answers_is_put_in_force(
    base: CalibrationArtifact,
) -> None:
    # 5 of 30 served answers wrong (0.17 > alpha): refusing is the honest answer.
    labels = mostly_unanswerable(200, answered=30, wrong=5)
    new = refit_calibration(base, labels, scope="acme/docs", fitted_at=AT)
    assert not new.conformal.feasible
    assert withheld_because(new, labels) is None
    assert "wrong more often than alpha" in describe_refit(base, new)
    # ADR 035: 1 of 2 answers wrong is over alpha too, but two answers show nothing
    # (refusing on them switched scopes serving risk 0.03 off in 1 draw in 10) ...
    few = mostly_unanswerable(200, answered=2, wrong=1)
    unsure = refit_calibration(base, few, scope="acme/docs", fitted_at=AT)
    assert not unsure.conformal.feasible
    assert "1 of the 2 answered results among them were wrong, too few answers" in (
        withheld_because(unsure, few) or ""
    )
    # ... while 8 of 12 do, with the certificate's confidence.
    bad = mostly_unanswerable(200, answered=12, wrong=8)
    refused = refit_calibration(base, bad, scope="acme/docs", fitted_at=AT)
    assert not refused.conformal.feasible
    assert withheld_because(refused, bad) is None
    # A certified re-fit is always put in force.
    good = labelled(400, relevant_share=0.9)
    certified = refit_calibration(base, good, scope="acme/docs", fitted_at=AT)
    assert certified.conformal.feasible
    assert withheld_because(certified, good) is None


@pytest.mark.parametrize(
    ("wrong", "answered", "shown"),
    [
        (0, 0, False),  # nothing answered, nothing shown
        (1, 1, False),  # its 90% lower bound is 0.10: not over alpha
        (1, 2, False),
        (2, 5, True),  # lower bound 0.11
        (4, 20, False),  # 0.20 observed, lower bound 0.086, too few to judge on the rate
        (5, 20, True),  # lower bound 0.12
        (2, 25, False),  # 0.08: within alpha
        (3, 25, True),  # 0.12 on 25 >= 22 answers: judged on the rate
        (14, 105, True),  # a quarter of SQuAD's paragraphs left out, 500 labels (ADR 031)
    ],
)
def test_labels_show_wrong_answers_on_enough_answers_or_with_confidence(
    wrong: int, answered: int, shown: bool
) -> None:
    assert labels_show_wrong_answers(wrong, answered, alpha=0.1, delta=0.1) is shown
