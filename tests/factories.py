"""Settings shared by tests in several tiers."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.ingest.loaders import SourceDocument
from ragsift.retrieval.records import SearchHit
from ragsift.settings import ConfidenceSettings, EmbedderSettings, LimitSettings, Settings

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` imported as a module (the scripts folder is not a package).

    Registered in ``sys.modules`` first, as an import would: dataclasses and
    pickling look their module up there.
    """
    if str(SCRIPTS) not in sys.path:  # a script imports its siblings, as run from there
        sys.path.append(str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def low_bar_confidence() -> ConfidenceSettings:
    """Bars low enough that the hashing embedder's small cosines keep hits.

    For tests of plumbing and isolation, not of the calibrated confidence.
    """
    return ConfidenceSettings(
        scorer="weighted",
        similarity_threshold=0.05,
        high_threshold=0.30,
        medium_threshold=0.20,
        low_threshold=0.10,
    )


#: the embedded tests' query limit: low, so a hostile long query is cheap to build
EMBEDDED_MAX_QUERY_CHARS = 500


def embedded_settings(data_dir: Path, **confidence: Any) -> Settings:
    """Embedded-runtime settings for plumbing tests: hashing embedder, low bars.

    The weighted scorer with low bars keeps these tests independent of the fitted
    calibration (tested on its own): the hashing embedder's cosines are small, and
    the plumbing is what is checked. Hashing is pinned (not the default onnx) for
    that reason and for speed. ``confidence`` overrides ConfidenceSettings fields.
    """
    return Settings(
        data_dir=data_dir,
        confidence=ConfidenceSettings(**{**low_bar_confidence().model_dump(), **confidence}),
        limits=LimitSettings(max_query_chars=EMBEDDED_MAX_QUERY_CHARS),
        embedder=EmbedderSettings(kind="hashing"),
    )


def write_corpus(folder: Path, docs: Iterable[SourceDocument]) -> Path:
    """``docs`` as one Markdown file each in ``folder`` (created), for `ragsift ingest`."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        (folder / f"{doc.doc_id}.md").write_text(doc.text, encoding="utf-8")
    return folder


def made_on_base(
    artifact: CalibrationArtifact, base_version: str, **provenance: Any
) -> CalibrationArtifact:
    """``artifact`` (a probe calibration) as if made on the shipped calibration
    ``base_version`` (and with other ``provenance`` fields): what an upgrade that
    refits the shipped one leaves in a store."""
    assert artifact.provenance is not None
    older = artifact.provenance.model_copy(update={"base_version": base_version, **provenance})
    return CalibrationArtifact.model_validate(
        artifact.model_dump() | {"version": "", "provenance": older.model_dump()}
    )


def top_score_artifact(conformal: ConformalSpec) -> CalibrationArtifact:
    """A calibration on ``top_score`` alone (coefficient 1, intercept 0) with this
    certificate: for tests of what the certificate carries."""
    return CalibrationArtifact(
        embedder_id="e",
        metric="cosine",
        features=("top_score",),
        coefficients=(1.0,),
        intercept=0.0,
        conformal=conformal,
        data=DataSummary(source="test", n_examples=conformal.n_calibration),
    )


def search_hit(
    rank: int, dense: float | None, sparse: float | None, text: str = "text"
) -> SearchHit:
    """A hybrid hit at ``rank`` with these channel scores (RRF from the rank)."""
    return SearchHit(
        chunk_id=f"c{rank}",
        doc_id=f"d{rank}",
        tenant_id="t",
        text=text,
        source="s",
        source_type="doc",
        score=1.0 / rank,
        rank=rank,
        dense_score=dense,
        sparse_score=sparse,
        fused_score=1.0 / rank,
    )
