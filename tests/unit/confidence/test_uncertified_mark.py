"""A calibration marked as not holding on its collection (ADR 015, re-probing)."""

from __future__ import annotations

import pytest

from ragsift.confidence import CalibrationArtifact, ConfidenceError, load_default_calibration
from ragsift.confidence.artifact import ConformalSpec, DataSummary, Provenance
from ragsift.confidence.selfcal import mark_uncertified

BASE = load_default_calibration()
PROVENANCE = Provenance(method="probes (bundled)", base_version=BASE.version, collection="docs")


def test_a_mark_is_a_version_of_its_own_that_keeps_everything_else() -> None:
    marked = mark_uncertified(BASE, PROVENANCE, "off-topic questions score high here")
    assert marked.version != BASE.version
    assert marked.provenance is not None
    assert marked.provenance.uncertified == "off-topic questions score high here"
    kept = marked.model_dump(exclude={"version", "provenance"})
    assert kept == BASE.model_dump(exclude={"version", "provenance"})
    assert CalibrationArtifact.from_json(marked.to_json()) == marked


def test_an_unmarked_provenance_keeps_the_json_and_version_it_had() -> None:
    """Calibrations stored before the field existed must still load: their version is
    a hash of their JSON (pinned: the version this artifact had before the field)."""
    plain = CalibrationArtifact(
        embedder_id="e",
        metric="cosine",
        features=("top_score",),
        coefficients=(1.0,),
        intercept=-1.0,
        conformal=ConformalSpec(
            alpha=0.1, delta=0.1, threshold=0.3, feasible=True, method="test", n_calibration=0
        ),
        data=DataSummary(source="test", n_examples=0),
        provenance=Provenance(
            method="probes (bundled)", base_version="cal-0", collection="docs", chunks=40
        ),
    )
    assert plain.version == "cal-6b7b79048135"
    assert "uncertified" not in plain.to_json()
    assert CalibrationArtifact.from_json(plain.to_json()) == plain


@pytest.mark.parametrize("why", ["", "x" * 1001])
def test_a_hostile_mark_is_refused_naming_the_field(why: str) -> None:
    marked = mark_uncertified(BASE, PROVENANCE, "ok")
    text = marked.to_json().replace('"uncertified": "ok"', f'"uncertified": "{why}"')
    with pytest.raises(ConfidenceError, match="uncertified"):
        CalibrationArtifact.from_json(text)
