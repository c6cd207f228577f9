"""The probe re-map (ADR 015): a collection whose unanswerable questions score higher
than the calibration's gets its confidence lowered to match; nothing is ever raised."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from ragsift.confidence import CalibrationArtifact, ConfidenceError, Provenance
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.confidence.conformal import conformal_threshold
from ragsift.confidence.metrics import expected_calibration_error
from ragsift.confidence.probes import (
    InScopeSample,
    ProbeRemap,
    covered_groups,
    fit_probe_remap,
    in_scope_sample,
)
from ragsift.confidence.refit import LabelledResult, refit_calibration
from ragsift.confidence.scorers import CalibratedScorer
from ragsift.confidence.selfcal import left_out_of, with_probes

SHARE = 2 / 3  # unanswerable share of the calibration sample, as on SQuAD
PROVENANCE = Provenance(method="probes (bundled): test", base_version="b", collection="c")


class World:
    """Raw scores of answerable (kept or missed) and unanswerable questions, and the
    calibrated probability of the corpus the shipped model was fit on."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        scores, labels, _ = self.draw(200_000, shift=0.0)
        self.iso = IsotonicRegression(out_of_bounds="clip").fit(scores, labels)

    def draw(
        self, n: int, *, shift: float, share: float = SHARE
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``n`` questions' scores, labels and which are unanswerable; those score
        ``shift`` higher on average."""
        rng = self.rng
        out = rng.random(n) < share
        kept = rng.random(n) < 0.9
        answerable = np.where(kept, rng.beta(6, 2, n), rng.beta(2, 4, n))
        unanswerable = np.clip(rng.beta(1.2, 8, n) + shift * rng.random(n), 0.0, 1.0)
        scores = np.where(out, unanswerable, answerable)
        return scores, (~out & kept).astype(np.float64), out

    def confidence(self, scores: np.ndarray) -> np.ndarray:
        return np.asarray(self.iso.predict(scores), dtype=np.float64)

    def probes(self, n: int, shift: float) -> np.ndarray:
        return self.confidence(self.draw(n, shift=shift, share=1.0)[0])

    def sample(self, n: int = 2_100) -> InScopeSample:
        """A calibration's conformal sample, as an artifact keeps it."""
        scores, labels, out = self.draw(n, shift=0.0)
        sample = in_scope_sample(self.confidence(scores), labels, ~out, np.arange(n) % 20)
        assert sample is not None
        return sample


def _artifact(world: World, sample: InScopeSample) -> CalibrationArtifact:
    """A calibration certified on ``sample`` and its own out-of-scope questions."""
    out = world.probes(sample.n_out_of_scope, 0.0)
    own = conformal_threshold(
        np.concatenate([np.asarray(sample.confidence), out]),
        np.concatenate([np.asarray(sample.relevant, dtype=np.int64), np.zeros(out.size)]),
        alpha=0.1,
        delta=0.1,
    )
    return CalibrationArtifact(
        embedder_id="hashing-test",
        metric="cosine",
        features=("top_score",),
        coefficients=(6.0,),
        intercept=-3.0,
        conformal=ConformalSpec.certified(own, in_scope=sample),
        data=DataSummary(source="test", n_examples=sample.n_out_of_scope + len(sample.relevant)),
    )


@pytest.mark.parametrize("shift", [0.3, 0.5])
def test_where_unanswerable_questions_score_higher_the_remap_restores_calibration(
    shift: float,
) -> None:
    world = World(1)
    sample = world.sample()
    probes = world.probes(6_000, shift)
    remap = fit_probe_remap(sample, probes)
    scores, labels, _ = world.draw(20_000, shift=shift)
    before = world.confidence(scores)
    after = remap.apply(before)
    assert np.all(after <= before)
    assert expected_calibration_error(after, labels) < 0.6 * expected_calibration_error(
        before, labels
    )
    assert expected_calibration_error(after, labels) < 0.05


def test_where_they_score_as_calibrated_the_remap_barely_moves() -> None:
    world = World(2)
    sample = world.sample()
    probes = world.probes(6_000, 0.0)
    remap = fit_probe_remap(sample, probes)
    scores, labels, _ = world.draw(20_000, shift=0.0)
    before = world.confidence(scores)
    after = remap.apply(before)
    assert np.all(after <= before)
    assert np.mean(before - after) < 0.02
    assert expected_calibration_error(after, labels) < 0.03


def test_the_remap_is_monotone_never_raises_and_keeps_nan() -> None:
    remap = ProbeRemap(x=(0.1, 0.5, 0.9), y=(0.0, 0.2, 0.95))
    p = np.array([0.0, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0, np.nan])
    out = remap.apply(p)
    assert np.isnan(out[-1])
    assert np.all(out[:-1] <= p[:-1])
    assert np.all(np.diff(out[:-1]) >= 0)
    assert out[4] == pytest.approx(0.2)
    assert out[7] == pytest.approx(0.95)


@pytest.mark.parametrize(
    "knots",
    [
        {"x": [0.5, 0.4], "y": [0.1, 0.2]},  # x not increasing
        {"x": [0.4, 0.5], "y": [0.3, 0.2]},  # y falls
        {"x": [0.4, 0.5], "y": [0.3]},  # lengths differ
        {"x": [], "y": []},
        {"x": [0.4, 1.5], "y": [0.1, 0.2]},  # out of [0, 1]
        {"x": [0.4, "NaN"], "y": [0.1, 0.2]},
        {"x": [0.4, 0.5], "y": [0.1, -0.2]},
        {"x": [i / 20_000 for i in range(20_000)], "y": [0.5] * 20_000},  # too many
    ],
)
def test_a_hostile_remap_is_one_clear_error_naming_it(knots: dict[str, list[object]]) -> None:
    world = World(3)
    artifact = _artifact(world, world.sample(400))
    data = json.loads(artifact.to_json())
    data["remap"] = knots
    data["version"] = ""
    text = json.dumps(data).replace('"NaN"', "NaN")
    with pytest.raises(ConfidenceError, match="remap"):
        CalibrationArtifact.from_json(text)


def test_the_scorer_serves_the_remapped_probability() -> None:
    world = World(4)
    base = _artifact(world, world.sample(600))
    remap = ProbeRemap(x=(0.2, 0.8), y=(0.05, 0.4))
    remapped = CalibrationArtifact.model_validate(
        base.model_dump() | {"version": "", "remap": remap.model_dump()}
    )
    assert remapped.version != base.version
    assert CalibrationArtifact.from_json(remapped.to_json()) == remapped
    assert "remap" not in json.loads(base.to_json())
    z = np.linspace(-2.0, 2.0, 9)
    plain = 1 / (1 + np.exp(-(6.0 * (z / 6.0 + 0.5) - 3.0)))
    got = CalibratedScorer(remapped)._remap
    assert got is not None
    np.testing.assert_allclose(
        got.apply(plain), np.minimum(plain, np.interp(plain, remap.x, remap.y))
    )


def test_a_remapped_calibration_is_not_probed_again_nor_kept_by_a_feedback_refit() -> None:
    world = World(5)
    sample = world.sample()
    base = _artifact(world, sample)
    probes = world.probes(1_000, 0.4)
    probed = with_probes(base, probes, ["g"] * probes.size, provenance=PROVENANCE)
    assert probed.remap is not None
    with pytest.raises(ConfidenceError, match="re-certified on probes already"):
        with_probes(probed, probes, ["g"] * probes.size, provenance=PROVENANCE)
    rng = np.random.default_rng(0)
    labels = []
    for i in range(300):
        top = float(rng.random())
        labels.append(LabelledResult(f"q{i}", {"top_score": top}, True, rng.random() < top))
    refit = refit_calibration(
        probed, labels, scope="t/c", fitted_at=datetime(2026, 11, 24, tzinfo=UTC)
    )
    assert refit.remap is None
    assert refit.provenance is None


def test_probe_groups_the_collection_answers_are_left_out() -> None:
    conf = np.array([0.9] * 8 + [0.1] * 4 + [0.95] * 9 + [0.2] * 30 + [0.99] * 3)
    groups = ["covered"] * 12 + ["small"] * 9 + ["off"] * 30 + ["single-1", "single-2", "single-3"]
    # 8 of 12 clear the bar: covered. 9 of 9 clear it, but too few to judge; the
    # one-question groups of a text file are never judged either.
    assert covered_groups(conf, groups, 0.5) == ["covered"]
    assert covered_groups(conf, groups, 0.95) == []  # 0 of 12 clear a higher bar
    half = np.array([0.9] * 6 + [0.1] * 6)
    assert covered_groups(half, ["g"] * 12, 0.5) == []  # exactly half: not more than half


def test_a_bank_about_the_collections_own_subject_is_left_out_and_said() -> None:
    world = World(6)
    sample = world.sample()
    base = _artifact(world, sample)
    bank = world.probes(1_000, 0.4)
    bank_groups = [f"off{i % 10}" for i in range(bank.size)]
    alone = with_probes(base, bank, bank_groups, provenance=PROVENANCE)
    # A group the collection answers: its questions score like answerable ones.
    answered = np.asarray(sample.confidence)[np.asarray(sample.relevant)][:120]
    mixed = with_probes(
        base,
        np.concatenate([bank, answered]),
        bank_groups + ["Oxygen"] * answered.size,
        provenance=PROVENANCE,
    )
    assert left_out_of(alone) is None
    assert left_out_of(mixed) == "left out, as the collection answers them: Oxygen"
    assert mixed.conformal.threshold == alone.conformal.threshold
    assert mixed.remap == alone.remap
    assert mixed.provenance is not None
    assert mixed.provenance.negatives == bank.size
    with pytest.raises(ConfidenceError, match="answers the probes about Oxygen"):
        with_probes(base, answered[:100].repeat(3), ["Oxygen"] * 300, provenance=PROVENANCE)
