"""Re-certifying the answer threshold on a collection's own out-of-scope scores (probes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragsift.confidence import CalibrationArtifact, ConfidenceError, Provenance
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.confidence.conformal import ConformalResult, conformal_threshold
from ragsift.confidence.mix import fit_mix_table
from ragsift.confidence.probes import (
    MIN_PROBES,
    InScopeSample,
    certify_with_probes,
    in_scope_sample,
)
from ragsift.confidence.reweight import certify_at_share
from ragsift.confidence.selfcal import with_probes

ALPHA = DELTA = 0.1


def _in_scope(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Answerable questions: mostly confident and right; a few missed their context."""
    relevant = rng.random(n) < 0.9
    conf = np.where(relevant, rng.beta(6, 2, n), rng.beta(2, 4, n))
    return conf, relevant.astype(np.int64)


def _out_of_scope(rng: np.random.Generator, n: int, shift: float) -> np.ndarray:
    """Unanswerable questions; ``shift`` > 0 is a collection where they score higher."""
    return np.clip(rng.beta(1.2, 8, n) + shift * rng.random(n), 0.0, 1.0)


def _sample(
    rng: np.random.Generator, n_in: int = 700, n_out: int = 1400
) -> tuple[InScopeSample, np.ndarray]:
    conf_in, rel = _in_scope(rng, n_in)
    conf_out = _out_of_scope(rng, n_out, 0.0)
    conf = np.concatenate([conf_in, conf_out])
    labels = np.concatenate([rel, np.zeros(n_out, dtype=np.int64)])
    in_scope = np.arange(conf.size) < n_in
    groups = np.concatenate([np.arange(n_in) % 14, 100 + np.arange(n_out) % 10])
    sample = in_scope_sample(conf, labels, in_scope, groups)
    assert sample is not None
    return sample, conf_out


def _own_certificate(sample: InScopeSample, conf_out: np.ndarray) -> ConformalResult:
    """The calibration's own certificate: its in-scope rows and its out-of-scope ones."""
    return certify_at_share(
        np.concatenate([sample.confidence, conf_out]),
        np.concatenate([np.asarray(sample.relevant, dtype=np.int64), np.zeros(conf_out.size)]),
        share=sample.unanswerable_share,
        alpha=ALPHA,
        delta=DELTA,
    )


def _risk(
    t: float, conf_in: np.ndarray, rel: np.ndarray, conf_out: np.ndarray, share: float
) -> float:
    """The true selective risk at ``t`` in a large sample at ``share`` unanswerable."""
    tpr = ((conf_in >= t) & (rel == 1)).mean()
    miss = ((conf_in >= t) & (rel == 0)).mean()
    fpr = (conf_out >= t).mean()
    wrong = (1 - share) * miss + share * fpr
    answered = wrong + (1 - share) * tpr
    return float(wrong / answered) if answered > 0 else 0.0


def test_the_sample_keeps_only_in_scope_rows_numbered_by_group() -> None:
    sample = in_scope_sample(
        [0.91234567, 0.2, 0.8, 0.1],
        [1, 0, 0, 0],
        [True, False, True, False],
        ["b", "oos", "a", "oos"],
    )
    assert sample is not None
    assert sample.confidence == (0.9123, 0.8)
    assert sample.relevant == (True, False)
    assert sample.groups == (1, 0)  # "a" < "b"
    assert sample.n_out_of_scope == 2
    assert sample.unanswerable_share == pytest.approx(3 / 4)
    assert in_scope_sample([0.5], [0], [False], None) is None
    with pytest.raises(ConfidenceError, match="every row"):
        in_scope_sample([0.5, 0.4], [1, 0], [True], None)


def test_probes_that_score_like_the_calibration_leave_the_threshold_where_it_was() -> None:
    rng = np.random.default_rng(3)
    sample, conf_out = _sample(rng)
    own = _own_certificate(sample, conf_out)
    probes = _out_of_scope(rng, 2000, 0.0)
    result, table = certify_with_probes(
        sample, probes, [f"a{i % 10}" for i in range(probes.size)], alpha=ALPHA, delta=DELTA
    )
    assert result.feasible
    assert own.feasible
    assert abs(result.threshold - own.threshold) <= 0.05
    assert table is not None
    assert table.unanswerable_share == pytest.approx(sample.unanswerable_share, abs=1e-4)


def test_where_off_topic_questions_score_higher_the_probe_bar_holds_and_the_old_does_not() -> None:
    """The failure this fixes: a threshold certified on one corpus, served on another
    whose out-of-scope questions score higher (short chunks), lets too much through."""
    rng = np.random.default_rng(11)
    sample, conf_out = _sample(rng)
    conf = np.concatenate([sample.confidence, conf_out])
    labels = np.concatenate([np.asarray(sample.relevant, dtype=np.int64), np.zeros(conf_out.size)])
    shipped = conformal_threshold(conf, labels, alpha=ALPHA, delta=DELTA)
    # The collection: same answerable behaviour, out-of-scope questions shifted up.
    truth_in, truth_rel = _in_scope(np.random.default_rng(99), 200_000)
    truth_out = _out_of_scope(np.random.default_rng(98), 200_000, 0.45)
    share = sample.unanswerable_share
    assert _risk(shipped.threshold, truth_in, truth_rel, truth_out, share) > ALPHA + 0.03
    probes = _out_of_scope(rng, 2000, 0.45)
    result, _ = certify_with_probes(
        sample, probes, [f"a{i % 10}" for i in range(probes.size)], alpha=ALPHA, delta=DELTA
    )
    assert result.feasible
    assert result.threshold > shipped.threshold
    assert _risk(result.threshold, truth_in, truth_rel, truth_out, share) <= ALPHA


def test_too_few_probes_or_mismatched_groups_are_clear_errors() -> None:
    sample, _ = _sample(np.random.default_rng(1))
    few = np.full(MIN_PROBES - 1, 0.1)
    with pytest.raises(ConfidenceError, match=f"at least {MIN_PROBES} probe"):
        certify_with_probes(sample, few, ["g"] * few.size, alpha=ALPHA, delta=DELTA)
    with pytest.raises(ConfidenceError, match="equal length"):
        certify_with_probes(sample, np.full(300, 0.1), ["g"] * 299, alpha=ALPHA, delta=DELTA)


def test_a_probe_with_no_hits_counts_as_refused_not_as_an_error() -> None:
    sample, _ = _sample(np.random.default_rng(2))
    probes = np.full(400, np.nan)
    result, _ = certify_with_probes(sample, probes, ["g"] * 400, alpha=ALPHA, delta=DELTA)
    assert result.feasible


def _artifact(sample: InScopeSample | None) -> CalibrationArtifact:
    return CalibrationArtifact(
        embedder_id="e",
        metric="cosine",
        features=("top_score",),
        coefficients=(5.0,),
        intercept=-2.0,
        similarity_threshold=0.3,
        conformal=ConformalSpec(
            alpha=ALPHA,
            delta=DELTA,
            threshold=0.5,
            feasible=True,
            method="test",
            n_calibration=100,
            in_scope=sample,
        ),
        data=DataSummary(source="test", n_examples=100),
    )


PROVENANCE = Provenance(method="probes", base_version="cal-x", collection="docs")


def test_with_probes_keeps_the_model_and_records_the_probes() -> None:
    rng = np.random.default_rng(5)
    sample, _ = _sample(rng)
    base = _artifact(sample)
    probes = _out_of_scope(rng, 500, 0.3)
    derived = with_probes(base, probes, ["g"] * 500, provenance=PROVENANCE)
    assert (derived.coefficients, derived.intercept) == (base.coefficients, base.intercept)
    assert derived.similarity_threshold == base.similarity_threshold
    assert derived.conformal.in_scope == sample
    assert derived.conformal.method.endswith("on the collection's probes")
    assert derived.provenance is not None
    assert (derived.provenance.positives, derived.provenance.negatives) == (700, 500)
    assert derived.version != base.version
    assert CalibrationArtifact.from_json(derived.to_json()) == derived


def test_a_base_without_a_sample_says_how_to_get_one() -> None:
    with pytest.raises(ConfidenceError, match="refit it with `ragsift calibrate"):
        with_probes(_artifact(None), np.zeros(300), ["g"] * 300, provenance=PROVENANCE)


def test_an_artifact_without_a_sample_keeps_its_identity() -> None:
    bare = _artifact(None)
    assert "in_scope" not in json.loads(bare.to_json())["conformal"]
    assert CalibrationArtifact.from_json(bare.to_json()).version == bare.version


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("confidence", [float("nan"), 0.5], "confidence"),
        ("confidence", [1.5, 0.5], "confidence"),
        ("relevant", [True], "one entry per row"),
        ("groups", [0, -1], "groups"),
        ("n_out_of_scope", -3, "n_out_of_scope"),
        ("confidence", [], "1 to"),
    ],
)
def test_a_hostile_in_scope_sample_in_an_artifact_file_is_one_clear_error(
    field: str, value: object, needle: str
) -> None:
    sample = InScopeSample(
        confidence=(0.9, 0.5), relevant=(True, False), groups=(0, 1), n_out_of_scope=4
    )
    data = json.loads(_artifact(sample).to_json())
    data["conformal"]["in_scope"][field] = value
    text = json.dumps(data)
    with pytest.raises(ConfidenceError, match="invalid calibration artifact") as info:
        CalibrationArtifact.from_json(text)
    assert "in_scope" in str(info.value)
    assert needle in str(info.value)


def test_probes_from_far_off_subjects_never_lower_the_bar() -> None:
    """Probes about other subjects score near zero on a specialised collection; they say
    nothing about questions near its own subject, so the calibration's bar stays."""
    rng = np.random.default_rng(8)
    sample, conf_out = _sample(rng)
    far = np.clip(rng.beta(1, 40, 1000), 0, 1)
    groups = [f"a{i % 10}" for i in range(far.size)]
    free, _ = certify_with_probes(sample, far, groups, alpha=ALPHA, delta=DELTA)
    own = _own_certificate(sample, conf_out)
    assert free.threshold < own.threshold  # what the probes alone would allow
    floored, _ = certify_with_probes(
        sample, far, groups, alpha=ALPHA, delta=DELTA, floor=own.threshold
    )
    assert floored.threshold == own.threshold
    assert floored.risk_upper_bound <= ALPHA
    assert floored.coverage <= free.coverage


def test_with_probes_keeps_the_base_bar_and_table_as_floors() -> None:
    rng = np.random.default_rng(9)
    sample, conf_out = _sample(rng)
    conf = np.concatenate([sample.confidence, conf_out])
    labels = np.concatenate([np.asarray(sample.relevant, dtype=np.int64), np.zeros(conf_out.size)])
    own = conformal_threshold(conf, labels, alpha=ALPHA, delta=DELTA)
    table = fit_mix_table(conf, labels, alpha=ALPHA, delta=DELTA)
    base = _artifact(sample).model_copy(
        update={
            "conformal": ConformalSpec.certified(own, mix=table, in_scope=sample),
            "version": "",
        }
    )
    far = np.clip(rng.beta(1, 40, 1000), 0, 1)
    derived = with_probes(base, far, ["g"] * far.size, provenance=PROVENANCE)
    assert table is not None
    assert derived.conformal.mix is not None
    assert derived.remap is not None
    # Whatever the re-map, no confidence the base refused is answered: at its own
    # share, and share by share of the mix table.
    raw = np.linspace(0.0, 1.0, 2001)
    mapped = derived.remap.apply(raw)
    pairs = [
        (derived.conformal.threshold, own.threshold),
        *zip(derived.conformal.mix.thresholds, table.thresholds, strict=True),
    ]
    for new_bar, old_bar in pairs:
        assert not np.any((mapped >= new_bar) & (raw < old_bar - 1e-9)), (new_bar, old_bar)
    looser = with_probes(base, far, ["g"] * far.size, provenance=PROVENANCE, alpha=0.3)
    assert looser.conformal.threshold < own.threshold  # another alpha: no floor
