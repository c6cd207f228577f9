"""A calibration marked as not holding on its collection (ADR 015, re-probing)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragsift.confidence import CalibrationArtifact, ConfidenceError, load_default_calibration
from ragsift.confidence.artifact import ConformalSpec, DataSummary, Provenance
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    DirectoryCalibrationStore,
)
from ragsift.confidence.selfcal import mark_uncertified
from ragsift.retrieval.results import uncertified_advice

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


_DEEP = "[" * 300 + "]" * 300


@pytest.mark.parametrize(
    "raw",
    [
        '""',  # empty
        json.dumps("x" * 1001),  # oversized
        _DEEP,  # deep nesting: the parser stops first ("recursion limit exceeded")
        '{"a": {"b": {"c": "d"}}}',  # an object
        "1e400",  # a huge number
        "true",
    ],
)
def test_a_hostile_mark_is_refused_naming_the_field(raw: str, tmp_path: Path) -> None:
    """A store anyone can write to (a file, a Redis hash): the artifact is refused with
    one error naming the field, and the registry then skips it for a broader one."""
    marked = mark_uncertified(BASE, PROVENANCE, "ok")
    text = marked.to_json().replace('"uncertified": "ok"', f'"uncertified": {raw}')
    with pytest.raises(ConfidenceError, match=r"uncertified|recursion limit"):
        CalibrationArtifact.from_json(text)
    store = DirectoryCalibrationStore(tmp_path)
    store.put(CalibrationScope("docs", "beta"), marked)  # a neighbour, intact
    # as another process (or a hand) would leave it, where the store reads the scope
    store._path(CalibrationScope("docs", "acme")).write_text(text, encoding="utf-8")
    registry = CalibrationRegistry(BASE, store, refresh_s=0)
    assert registry.resolve("acme", "docs").version == BASE.version
    assert registry.rejected == 1
    assert registry.resolve("beta", "docs").version == marked.version


def test_a_mark_in_any_script_or_with_control_characters_is_carried_as_text() -> None:
    why = "Ωμέγα 漢字 \x00\x1b[31m [/x] \u202e"
    marked = mark_uncertified(BASE, PROVENANCE, why)
    again = CalibrationArtifact.from_json(marked.to_json())
    assert again.provenance is not None
    assert again.provenance.uncertified == why
    advice = uncertified_advice(SimpleNamespace(calibration_version=again.version), again)  # type: ignore[arg-type]
    assert advice is not None
    assert why in json.loads(advice.model_dump_json())["message"]  # escaped on the wire
