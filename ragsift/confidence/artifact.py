"""The calibration artifact: a versioned JSON file that makes confidence a probability.

It names the embedder and score metric it was fit for (workers refuse any
other), the features and logistic parameters of the calibrated scorer, the
level thresholds it was evaluated at, a conformal threshold for a target risk,
and a summary of its training data. ``version`` is a content hash, so a cache
key that includes it changes whenever the calibration does.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragsift.confidence.alignment import ProbeLevels, ScoreAlignment, aligned_params
from ragsift.confidence.conformal_spec import ConformalSpec
from ragsift.confidence.dense_only import DenseOnlyFit
from ragsift.confidence.errors import CalibrationMismatchError, ConfidenceError
from ragsift.confidence.features import check_model
from ragsift.confidence.fit_groups import MAX_FIT_GROUPS
from ragsift.confidence.keyword import KeywordFit
from ragsift.confidence.missing_answers import MissingAnswerEstimate
from ragsift.confidence.normalize import Metric, NormalizationParams
from ragsift.confidence.probes import ProbeRemap
from ragsift.errors import describe_validation_error

__all__ = [
    "ARTIFACT_KIND",
    "ARTIFACT_SCHEMA_VERSION",
    "MAX_ARTIFACT_BYTES",
    "CalibrationArtifact",
    "ConformalSpec",
    "DataSummary",
    "LevelSpec",
    "MissingAnswerEstimate",
    "Provenance",
    "load_calibration",
    "load_default_calibration",
    "save_calibration",
]

ARTIFACT_KIND: Final = "ragsift.confidence.calibration"
"""The ``kind`` every artifact carries."""
ARTIFACT_SCHEMA_VERSION: Final = 1
"""The artifact layout version this code reads and writes."""
_DEFAULT_RESOURCE = "default.json"
MAX_ARTIFACT_BYTES: Final = 8 * 1024 * 1024
"""A shipped artifact is ~140 KB; past this a file is refused before it is parsed."""
#: Conformal fields added after artifacts were first shipped: left out of the
#: identity (and of the JSON) when unset, so older artifacts keep their version.
_OPTIONAL_CONFORMAL = ("n_groups", "design_effect", "mix", "in_scope", "near_miss")
#: The advice code on every result of a scope whose calibration is marked
#: ``provenance.uncertified`` (ADR 015).
UNCERTIFIED_ADVICE_CODE: Final = "uncertified_threshold"


class LevelSpec(BaseModel):
    """Level thresholds (A4/B3) the artifact was evaluated at."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    high: float = Field(0.85, ge=0, le=1)
    medium: float = Field(0.70, ge=0, le=1)
    low: float = Field(0.50, ge=0, le=1)


class DataSummary(BaseModel):
    """What the artifact was fit on."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    source: str
    n_examples: int = Field(ge=0)
    positive_rate: float | None = None
    n_fit: int = Field(0, ge=0)
    n_conformal: int = Field(0, ge=0)
    notes: str = ""
    fit_groups: list[Annotated[str, Field(pattern=r"^[0-9a-f]{12}$")]] | None = Field(
        None, max_length=MAX_FIT_GROUPS
    )
    """The fit's groups (articles) as keys (:mod:`ragsift.confidence.fit_groups`, ADR
    026); None for fits made before the record, or with too many groups."""


class Provenance(BaseModel):
    """Where a derived calibration came from (recorded in the artifact, part of its version
    but for ``missing_answers``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    method: str
    base_version: str
    collection: str
    tenant: str | None = None
    index_version: str | None = None
    chunks: int = Field(0, ge=0)
    positives: int = Field(0, ge=0)
    negatives: int = Field(0, ge=0)
    temperature: float | None = None
    intercept_shift: float | None = None
    #: Why the collection's probes certified no answer threshold (ADR 015): the
    #: artifact keeps the threshold it had, known not to hold here, and every result
    #: of the scope says so. None: certified (left out of the JSON and the version).
    uncertified: str | None = Field(default=None, min_length=1, max_length=1000)
    #: What it answered of questions whose answer the scope lacks, when that was
    #: estimated (probed scopes). None: not estimated (left out of the JSON).
    missing_answers: MissingAnswerEstimate | None = None


#: Parts left out of the JSON and the version when unset (artifacts written before them).
_OPTIONAL_PARTS: Final = ("remap", "probe_levels", "alignment", "dense_only", "keyword")
#: Provenance fields left out of the JSON when unset (artifacts written before them).
_OPTIONAL_PROVENANCE: Final = ("uncertified", "missing_answers")


class CalibrationArtifact(BaseModel):
    """A fitted (or prior) calibrated scorer: p = sigmoid(intercept + coefficients . features),
    then the collection's ``remap`` when it has one."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["ragsift.confidence.calibration"] = "ragsift.confidence.calibration"
    schema_version: Literal[1] = 1
    version: str = ""
    embedder_id: str = Field(min_length=1)
    metric: Metric
    model: Literal["logistic"] = "logistic"
    features: tuple[str, ...]
    coefficients: tuple[float, ...]
    intercept: float
    levels: LevelSpec = LevelSpec()
    #: The A1 hit threshold on the normalized primary score, fit for this embedder
    #: (cosines of different models live on different scales); None: use the config's.
    similarity_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    conformal: ConformalSpec
    data: DataSummary
    #: How a derived artifact was made (self-calibration, feedback re-fit); None for
    #: artifacts fit from labels by ``ragsift calibrate``.
    provenance: Provenance | None = None
    #: A collection's re-map of the probability, from its probes (ADR 015); applied
    #: after the logistic model. None: the model's probability as it is.
    remap: ProbeRemap | None = None
    #: Where the bundled probes score on the corpus this artifact was fit on (ADR
    #: 024): the zero a collection's scores are aligned to. None: not measured.
    probe_levels: ProbeLevels | None = None
    #: A collection's move of its scores onto the fit corpus's scale, from its
    #: probes (ADR 024); applied before any score is read. None: scores as found.
    alignment: ScoreAlignment | None = None
    #: The agreement a dense-only query (no BM25 channel) is imputed (ADR 028); None:
    #: the top score, as for any missing agreement.
    dense_only: DenseOnlyFit | None = None
    #: The model of keyword-only queries, which rank by BM25 (ADR 029); None: they are
    #: scored by the uncalibrated ``weighted`` rule.
    keyword: KeywordFit | None = None

    @model_validator(mode="after")
    def _check(self) -> CalibrationArtifact:
        check_model(self.features, self.coefficients)
        if not self.version:
            object.__setattr__(self, "version", self.content_hash())
        return self

    def content_hash(self) -> str:
        """A short hash of everything but ``version``: the artifact's identity."""
        # Unset later fields are left out, so artifacts written before them keep their identity.
        skip = {"version"}
        if self.similarity_threshold is None:
            skip.add("similarity_threshold")
        if self.provenance is None:
            skip.add("provenance")
        for optional in _OPTIONAL_PARTS:
            if getattr(self, optional) is None:
                skip.add(optional)
        payload = self.model_dump(mode="json", exclude=skip)
        # ... and unset group counts of the conformal bound (every per-question one).
        for key in _OPTIONAL_CONFORMAL:
            if payload["conformal"].get(key) is None:
                payload["conformal"].pop(key, None)
        if self.data.fit_groups is None:  # fits made before the record existed
            payload["data"].pop("fit_groups", None)
        if self.provenance is not None:
            if self.provenance.uncertified is None:
                payload["provenance"].pop("uncertified", None)
            payload["provenance"].pop("missing_answers", None)  # an observation, never a part
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return f"cal-{digest[:12]}"

    def probe_moves(self) -> str:
        """What a collection's probes did to its scores and confidence, in words
        ("" when they did nothing: the calibration as it was fit)."""
        parts = [p.describe() for p in (self.alignment, self.remap) if p is not None]
        return "; ".join(parts)

    def keyword_model(self) -> CalibrationArtifact | None:
        """This artifact as keyword-only queries are scored with it (ADR 029), or None
        without a keyword part.

        The keyword part's model, hit bar, conformal threshold and (probed) re-map,
        on the BM25 metric; the embedder, version, provenance and the collection's
        score alignment stay (a result names the artifact it was scored with). The
        artifact's own re-map is of the hybrid model's probability and is left out.
        """
        part = self.keyword
        if part is None:
            return None
        return self.model_copy(
            update={
                "metric": "bm25",
                "features": part.features,
                "coefficients": part.coefficients,
                "intercept": part.intercept,
                "similarity_threshold": part.similarity_threshold,
                "conformal": part.conformal,
                "remap": part.remap,
                "probe_levels": None,
                "dense_only": None,
                "keyword": None,
            }
        )

    def normalization(self, params: NormalizationParams) -> NormalizationParams:
        """``params`` as this artifact reads scores: with its collection's alignment."""
        return aligned_params(params, self.alignment)

    @property
    def coef_array(self) -> npt.NDArray[np.float64]:
        """Coefficients as a float array (in feature order)."""
        return np.asarray(self.coefficients, dtype=np.float64)

    def check_compatible(self, embedder_id: str, metric: str) -> None:
        """Raise :class:`CalibrationMismatchError` unless fit for this embedder and metric."""
        if embedder_id != self.embedder_id or metric != self.metric:
            raise CalibrationMismatchError(
                expected_embedder=embedder_id,
                actual_embedder=self.embedder_id,
                expected_metric=metric,
                actual_metric=self.metric,
            )

    def to_json(self) -> str:
        """The artifact as pretty JSON text (an unset provenance is left out, as it was)."""
        skip: dict[str, Any] = {}
        if self.provenance is None:
            skip["provenance"] = True
        else:
            unset = {k for k in _OPTIONAL_PROVENANCE if getattr(self.provenance, k) is None}
            if unset:
                skip["provenance"] = unset
        for optional in _OPTIONAL_PARTS:
            if getattr(self, optional) is None:
                skip[optional] = True
        unset = {k for k in _OPTIONAL_CONFORMAL if getattr(self.conformal, k) is None}
        if unset:
            skip["conformal"] = unset
        if self.data.fit_groups is None:
            skip["data"] = {"fit_groups"}
        return self.model_dump_json(indent=2, exclude=skip or None) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> CalibrationArtifact:
        """Parse and validate an artifact.

        Raises:
            ConfidenceError: not a valid calibration artifact (the message says why).
        """
        if len(text) > MAX_ARTIFACT_BYTES:
            raise ConfidenceError(
                f"invalid calibration artifact: over {MAX_ARTIFACT_BYTES:,} bytes"
                " (a fit is ~140 KB)"
            )
        try:
            artifact = cls.model_validate_json(text)
        except ValidationError as exc:
            raise ConfidenceError(
                f"invalid calibration artifact: {describe_validation_error(exc, whole='the file')}"
            ) from exc
        if artifact.version != artifact.content_hash():
            raise ConfidenceError(
                f"calibration artifact version {artifact.version!r} does not match its "
                f"content ({artifact.content_hash()!r}); it was edited after fitting"
            )
        return artifact


def load_calibration(
    path: str | Path,
    *,
    embedder_id: str | None = None,
    metric: str | None = None,
) -> CalibrationArtifact:
    """Read an artifact from ``path``; if an embedder/metric is given, check it matches.

    Raises:
        ConfidenceError: the file is not a valid artifact.
        CalibrationMismatchError: it was fit for another embedder or metric.
    """
    artifact = CalibrationArtifact.from_json(read_bounded(Path(path)))
    if embedder_id is not None or metric is not None:
        artifact.check_compatible(
            embedder_id if embedder_id is not None else artifact.embedder_id,
            metric if metric is not None else artifact.metric,
        )
    return artifact


def read_bounded(path: Path) -> bytes:
    """At most one byte past :data:`MAX_ARTIFACT_BYTES` of ``path`` (enough to refuse it)."""
    with path.open("rb") as handle:
        return handle.read(MAX_ARTIFACT_BYTES + 1)


def save_calibration(artifact: CalibrationArtifact, path: str | Path) -> Path:
    """Write ``artifact`` as JSON to ``path``; return the path."""
    target = Path(path)
    target.write_text(artifact.to_json(), encoding="utf-8")
    return target


def load_default_calibration() -> CalibrationArtifact:
    """The artifact shipped inside the package (``artifacts/default.json``)."""
    text = resources.files("ragsift.confidence").joinpath("artifacts", _DEFAULT_RESOURCE)
    return CalibrationArtifact.from_json(text.read_bytes())
