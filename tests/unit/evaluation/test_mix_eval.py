"""The evaluation answers as the service would: each question at its scope's mix bar on arrival,
and reports its confidence as the service does (at the mix that moved its bar)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.artifact import ConformalSpec
from ragsift.confidence.conformal import conformal_threshold
from ragsift.confidence.mix import fit_mix_table
from ragsift.confidence.near_miss import fit_near_miss_table
from ragsift.evaluation.mix import ARRIVAL_SEED, OrderSpread, as_served, over_orders
from tests.factories import top_score_artifact

FloatArray = npt.NDArray[np.float64]


def _draw(rng: np.random.Generator, n_in: int, n_out: int) -> tuple[FloatArray, FloatArray]:
    conf = np.concatenate([rng.beta(6.0, 1.5, n_in), rng.beta(1.2, 6.0, n_out)])
    return np.round(conf, 4), np.concatenate([np.ones(n_in), np.zeros(n_out)])


def _artifact(rng: np.random.Generator) -> CalibrationArtifact:
    conf, labels = _draw(rng, 1_000, 2_000)
    certified = conformal_threshold(conf, labels)
    return top_score_artifact(
        ConformalSpec.certified(certified, mix=fit_mix_table(conf, labels, alpha=0.1, delta=0.1))
    )


def test_a_twenty_to_one_stream_is_answered_at_the_bar_of_its_mix() -> None:
    rng = np.random.default_rng(1)
    artifact = _artifact(rng)
    conf, labels = _draw(rng, 200, 4_000)
    docs = np.ones(conf.size, dtype=bool)
    certified = conf >= artifact.conformal.threshold
    served = as_served(conf, docs, artifact, "auto")
    assert served.estimated_share is not None
    assert abs(served.estimated_share - 0.952) < 0.03
    assert served.bar > artifact.conformal.threshold
    assert not (served.answered & ~certified).any()  # auto only ever refuses more
    risk_certified = 1.0 - labels[certified].mean()
    risk_served = 1.0 - labels[served.answered].mean()
    # The first 200 arrivals are decided at the certified bar, and the bar at the
    # mix holds alpha with probability 1 - delta per calibration sample, so the
    # served risk is judged against the certified one (measured 0.16 vs 0.49).
    assert risk_certified > 0.3
    assert risk_served < risk_certified / 2
    # Arrival order is seeded: the same evaluation gives the same answers.
    assert (as_served(conf, docs, artifact, "auto").answered == served.answered).all()
    # The first 29 questions of the stream are decided at the certified bar.
    assert served.raised <= conf.size - 29
    # Where the bar moved, the confidence is the one reported at the estimated mix:
    # lower (more unanswerable than the sample); elsewhere the calibrated one.
    assert (served.confidence <= conf).all()
    lowered = int((served.confidence < conf).sum())
    assert served.raised - 10 <= lowered <= served.raised  # 0 and 1 stay where they are


def test_off_is_the_certified_threshold_and_documents_still_count() -> None:
    rng = np.random.default_rng(2)
    artifact = _artifact(rng)
    conf, _ = _draw(rng, 200, 4_000)
    docs = rng.random(conf.size) < 0.9
    served = as_served(conf, docs, artifact, "off")
    assert (served.answered == (docs & (conf >= artifact.conformal.threshold))).all()
    assert served.raised == 0
    assert served.estimated_share is None
    assert (served.confidence == conf).all()
    declared = as_served(conf, docs, artifact, 0.2)  # an answerable-heavy declared mix
    assert declared.bar < artifact.conformal.threshold
    assert declared.raised == conf.size
    assert (declared.confidence >= conf).all()
    assert (declared.confidence > conf).sum() > conf.size * 0.9


def test_near_misses_in_the_stream_raise_the_bar_and_the_switch_turns_that_off() -> None:
    rng = np.random.default_rng(7)
    n = (800, 120, 1_600)  # answerable, near miss (on topic, mid scores), out of scope
    conf = np.round(
        np.concatenate(
            [rng.beta(8.0, 1.5, n[0]), rng.beta(5.0, 3.0, n[1]), rng.beta(1.2, 8.0, n[2])]
        ),
        4,
    )
    labels = np.concatenate([np.ones(n[0]), np.zeros(n[1] + n[2])])
    inside = np.arange(conf.size) < n[0] + n[1]
    certified = conformal_threshold(conf, labels)
    artifact = top_score_artifact(
        ConformalSpec.certified(
            certified,
            mix=fit_mix_table(conf, labels, alpha=0.1, delta=0.1),
            near_miss=fit_near_miss_table(conf, labels, inside, alpha=0.1, delta=0.1),
        )
    )
    # A third of the stream near misses: the certified bar lets many through.
    stream = np.concatenate(
        [rng.beta(8.0, 1.5, 800), rng.beta(5.0, 3.0, 800), rng.beta(1.2, 8.0, 800)]
    )
    docs = np.ones(stream.size, dtype=bool)
    read = as_served(stream, docs, artifact, "auto")
    assert read.near_miss_share is not None
    assert read.near_miss_share > 0.2
    assert read.raised > 0
    assert read.bar > certified.threshold
    assert read.answered.sum() < (stream >= certified.threshold).sum()
    # The confidence is reported as scored: only the out-of-scope mix re-maps it.
    np.testing.assert_array_equal(read.confidence, stream)
    off = as_served(stream, docs, artifact, "auto", near_miss=False)
    assert off.near_miss_share is None
    assert off.bar == certified.threshold
    assert read.to_dict()["estimated_near_miss_share"] == read.near_miss_share


def test_arrival_orders_replay_the_stream_and_the_first_is_the_figures_order() -> None:
    """``eval --arrival-orders``: each order is the stream served in another seeded
    order; where the bar moves with the order, so do answers and risk."""
    rng = np.random.default_rng(1)
    artifact = _artifact(rng)
    conf, labels = _draw(rng, 200, 4_000)
    docs = np.ones(conf.size, dtype=bool)
    scored = np.ones(conf.size, dtype=bool)
    spread = over_orders(5, labels, scored, conf, docs, artifact, "auto")
    assert spread.answer_rate.size == spread.risk.size == 5
    first = as_served(conf, docs, artifact, "auto").answered
    assert spread.answer_rate[0] == first.mean()
    assert spread.risk[0] == 1.0 - labels[first].mean()
    again = as_served(conf, docs, artifact, "auto", seed=ARRIVAL_SEED + 3).answered
    assert spread.answer_rate[3] == again.mean()
    assert len(set(spread.answer_rate.tolist())) > 1  # the order moves the early bars
    summary = spread.to_dict()
    assert summary["orders"] == 5
    assert summary["answer_rate"]["p10"] <= summary["answer_rate"]["p50"]
    assert summary["risk"]["p100"] == round(float(spread.risk.max()), 4)
    assert summary["risk_over_alpha"] == float(np.mean(spread.risk > artifact.conformal.alpha))
    # Scored questions only: the risk of the in-scope ones alone is 0.
    inside = labels == 1
    assert np.nanmax(over_orders(2, labels, inside, conf, docs, artifact, "auto").risk) == 0.0
    with pytest.raises(ValueError, match="at least 1"):
        over_orders(0, labels, scored, conf, docs, artifact, "auto")


def test_orders_that_answer_nothing_have_no_risk() -> None:
    spread = OrderSpread(np.zeros(3), np.full(3, np.nan), alpha=0.1)
    summary = spread.to_dict()
    assert summary["risk"] is None
    assert summary["risk_over_alpha"] == summary["risk_over_target"] == 0.0
