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
from ragsift.confidence.probes import InScopeSample, ProbeRemap, fit_probe_remap, in_scope_sample
from ragsift.confidence.refit import LabelledResult, refit_calibration
from ragsift.confidence.scorers import CalibratedScorer
from ragsift.confidence.selfcal import with_probes

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


def _artifact(sample: InScopeSample) -> CalibrationArtifact:
    conf = np.asarray(sample.confidence)
    own = conformal_threshold(
        np.concatenate([conf, np.zeros(sample.n_out_of_scope)]),
        np.concatenate(
            [np.asarray(sample.relevant, dtype=np.int64), np.zeros(sample.n_out_of_scope)]
        ),
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
        data=DataSummary(source="test", n_examples=sample.n_out_of_scope + len(conf)),
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
    artifact = _artifact(World(3).sample(400))
    data = json.loads(artifact.to_json())
    data["remap"] = knots
    data["version"] = ""
    text = json.dumps(data).replace('"NaN"', "NaN")
    with pytest.raises(ConfidenceError, match="remap"):
        CalibrationArtifact.from_json(text)


def test_the_scorer_serves_the_remapped_probability() -> None:
    world = World(4)
    base = _artifact(world.sample(600))
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
    base = _artifact(sample)
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
