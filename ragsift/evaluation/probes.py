"""Probes: questions a collection is assumed not to answer, searched in it to certify on it.

``ragsift calibrate --collection C`` (the default method) searches the probes in
the collection as the pipeline searches, scores them with the shipped
calibration, and re-certifies its answer threshold with them as the
out-of-scope class (:mod:`ragsift.confidence.probes` has the method and what it
assumes). ``ragsift eval --probes`` does the same on the evaluated corpus.

The bundled bank (``data/probe_questions.jsonl``, CC BY-SA 4.0, see
``data/NOTICE.md``) holds 3,480 SQuAD 2.0 questions about eighteen Wikipedia
articles (ADR 017). Articles the collection answers are left out
(:func:`ragsift.confidence.selfcal.covered_groups`); a collection about most of
those subjects must bring its own probes (``--probes FILE``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from ragsift.confidence import (
    CalibrationArtifact,
    ConfidenceEngine,
    HitBatch,
    Provenance,
)
from ragsift.confidence.alignment import ProbeLevels, align, probe_levels
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.probes import MIN_PROBES, covered_groups
from ragsift.confidence.selfcal import unprobed_because, with_probes
from ragsift.errors import InvalidEventError
from ragsift.evaluation.dataset import EvalQuery, LabelledSet
from ragsift.evaluation.probe_vectors import with_bank_vectors
from ragsift.evaluation.reads import read_embedded
from ragsift.evaluation.scoring import served_config
from ragsift.evaluation.selfcal import chunks_per_tenant, search_as_pipeline
from ragsift.ingest.loaders import json_line
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.hit_scores import hit_scores
from ragsift.retrieval.index import SearchHit, VectorIndex
from ragsift.retrieval.reader import ChunkTerms, ReaderScores

__all__ = [
    "BUNDLED",
    "MIN_PROBED_CHUNKS",
    "Probe",
    "aligned_on_probes",
    "alignment_on",
    "bundled_probes",
    "load_probes",
    "method_of",
    "probe_calibrate",
    "probe_confidence",
    "probe_levels_of",
    "with_levels",
    "with_probe_queries",
]

#: ``--probes`` value naming the bundled bank.
BUNDLED: Final = "bundled"
_BANK = "probe_questions.jsonl"
#: Characters of one probe question past which the line is not a question.
MAX_PROBE_CHARS: Final = 2_000
#: Chunks a scope needs to be probed. The probes are the bank's questions, none cut from
#: the collection (as pseudo-queries are, which need MIN_CHUNKS): one chunk is something
#: to align on and certify against, and a scope left unprobed is read on the fit
#: corpus's scale, which refused most of a two-file collection's answers (ADR 047).
MIN_PROBED_CHUNKS: Final = 1


@dataclass(frozen=True, slots=True)
class Probe:
    """A question the collection is assumed not to answer, and the group it was drawn in."""

    text: str
    group: str


def bundled_probes() -> list[Probe]:
    """The bundled bank: SQuAD 2.0 questions about eighteen Wikipedia articles."""
    text = resources.files("ragsift.evaluation").joinpath("data", _BANK).read_text("utf-8")
    return _parse(text, _BANK, jsonl=True)


def load_probes(source: str | Path) -> list[Probe]:
    """Probes from ``source``: :data:`BUNDLED`, a JSONL file or a text file.

    A JSONL line is ``{"text": ..., "group": ...}`` (``group``, e.g. the article,
    is optional: a line without one is its own group); a ``.txt`` file holds one
    question per line (``#`` starts a comment), each its own group.

    Raises:
        InvalidEventError: the file cannot be read, or a line is not a probe.
    """
    if str(source) == BUNDLED:
        return bundled_probes()
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8-sig")  # with a BOM or without
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidEventError(f"{path}: cannot read probe questions ({exc})") from exc
    return _parse(text, str(path), jsonl=path.suffix != ".txt")


def _parse(text: str, name: str, *, jsonl: bool) -> list[Probe]:
    probes: list[Probe] = []
    # JSON Lines end at "\n" only: a JSON string may hold U+2028 or U+0085 as it is,
    # which splitlines() would cut the line at
    lines = text.split("\n") if jsonl else text.splitlines()
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or (not jsonl and line.startswith("#")):
            continue
        group = f"{name}:{lineno}"
        if jsonl:
            row = json_line(line, group)
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise InvalidEventError(f'{name}:{lineno}: needs {{"text": "...", "group": ...}}')
            line = row["text"].strip()
            if row.get("group") is not None:
                group = str(row["group"])
        if not line:
            raise InvalidEventError(f"{name}:{lineno}: empty question")
        if len(line) > MAX_PROBE_CHARS:
            raise InvalidEventError(
                f"{name}:{lineno}: {len(line)} characters; a probe question has at most"
                f" {MAX_PROBE_CHARS}"
            )
        probes.append(Probe(line, group))
    if not probes:
        raise InvalidEventError(f"{name}: no probe questions")
    return probes


def read_probes(
    base: CalibrationArtifact,
    hits: Sequence[Sequence[SearchHit]],
    reader: Sequence[ReaderScores] | None,
    queries: Sequence[str] | None,
) -> Sequence[ReaderScores] | None:
    """``reader``, or the term coverage ``base`` needs read from the ``queries``' texts.

    Raises:
        ConfidenceError: ``base`` uses term coverage and neither is given.
    """
    if reader is not None or "term_coverage" not in base.features:
        return reader
    if queries is None or len(queries) != len(hits):
        raise ConfidenceError("term coverage needs each searched query's text")
    terms = ChunkTerms(Bm25Encoder())
    return [terms.read(q, found) for q, found in zip(queries, hits, strict=True)]


def probe_confidence(
    base: CalibrationArtifact,
    hits: Sequence[Sequence[SearchHit]],
    *,
    mode: str = "hybrid",
    reader: Sequence[ReaderScores] | None = None,
    queries: Sequence[str] | None = None,
) -> npt.NDArray[np.float64]:
    """Each query's calibrated confidence under ``base``, as the pipeline scores it.

    ``reader``: the hits' reader scores. Without them, a ``base`` that uses term
    coverage reads it here from the ``queries``' texts, as the pipeline would.

    Raises:
        ConfidenceError: ``base`` uses term coverage and neither is given.
    """
    reader = read_probes(base, hits, reader, queries)
    scores = [
        hit_scores(list(found), mode, (), reader[i] if reader is not None else None)
        for i, found in enumerate(hits)
    ]
    assessed = ConfidenceEngine(served_config(base), calibration=base).assess_batch(
        HitBatch.from_hits(scores)
    )
    return np.nan_to_num(np.asarray(assessed.confidence, dtype=np.float64), nan=0.0)


def alignment_on() -> bool:
    """Whether probing aligns a collection's scores (``RAGSIFT_CONFIDENCE_ALIGNMENT``)."""
    from ragsift.settings import ConfidenceSettings

    return ConfidenceSettings().alignment == "auto"


def probe_levels_of(hits: Sequence[Sequence[SearchHit]]) -> ProbeLevels:
    """Where these probes scored: the medians of each one's best cosine and BM25."""
    return probe_levels(
        [
            max((h.dense_score for h in found if h.dense_score is not None), default=None)
            for found in hits
        ],
        [
            max((h.sparse_score for h in found if h.sparse_score is not None), default=None)
            for found in hits
        ],
    )


def _off_topic(
    artifact: CalibrationArtifact,
    hits: Sequence[Sequence[SearchHit]],
    groups: Sequence[str],
    confidence: npt.NDArray[np.float64],
) -> list[Sequence[SearchHit]]:
    """The probes' hits outside the groups the corpus answers (judged as
    :func:`with_probes` judges them, at ``artifact``'s bar)."""
    own = artifact.conformal
    covered = set(covered_groups(confidence, groups, own.threshold if own.feasible else 1.0))
    return [found for found, g in zip(hits, groups, strict=True) if str(g) not in covered]


def aligned_on_probes(
    base: CalibrationArtifact,
    hits: Sequence[Sequence[SearchHit]],
    groups: Sequence[str],
    *,
    mode: str = "hybrid",
    reader: Sequence[ReaderScores] | None = None,
    queries: Sequence[str] | None = None,
    enabled: bool = True,
) -> tuple[CalibrationArtifact, npt.NDArray[np.float64]]:
    """``base`` with the collection's score alignment (ADR 024), and the probes'
    confidence under it: :func:`with_probes` then re-maps and re-certifies on those.

    The collection's levels are read from the probes outside the groups it answers
    (judged with ``base`` as it is, as :func:`with_probes` judges them). ``base``
    unchanged when it measured no levels of its own, when ``enabled`` is False,
    when fewer than MIN_PROBES probes are left, or when the collection's levels are
    inside the dead zones (nothing would move).
    """
    reader = read_probes(base, hits, reader, queries)  # once, for both scorings
    confidence = probe_confidence(base, hits, mode=mode, reader=reader, queries=queries)
    if not enabled or base.probe_levels is None:
        return base, confidence
    kept = _off_topic(base, hits, groups, confidence)
    if len(kept) < MIN_PROBES:
        return base, confidence
    alignment = align(base.probe_levels, probe_levels_of(kept))
    if alignment.dense_offset == 0.0 and alignment.bm25_scale == 1.0:
        return base, confidence  # inside the dead zones: nothing moves, nothing stored
    aligned = CalibrationArtifact.model_validate(
        {**base.model_dump(mode="json"), "version": "", "alignment": alignment.model_dump()}
    )
    return aligned, probe_confidence(aligned, hits, mode=mode, reader=reader, queries=queries)


def with_levels(
    artifact: CalibrationArtifact,
    hits: Sequence[Sequence[SearchHit]],
    groups: Sequence[str],
    *,
    mode: str = "hybrid",
    reader: Sequence[ReaderScores] | None = None,
    queries: Sequence[str] | None = None,
) -> CalibrationArtifact:
    """A freshly fit ``artifact`` with the probe levels of its own corpus (ADR 024),
    the zero a collection's scores are aligned to; as it is with too few probes left
    outside the groups its corpus answers."""
    confidence = probe_confidence(artifact, hits, mode=mode, reader=reader, queries=queries)
    kept = _off_topic(artifact, hits, groups, confidence)
    if len(kept) < MIN_PROBES:
        return artifact
    return CalibrationArtifact.model_validate(
        {
            **artifact.model_dump(mode="json"),
            "version": "",
            "probe_levels": probe_levels_of(kept).model_dump(),
        }
    )


def method_of(source: str) -> str:
    """The provenance method of a calibration re-certified on the probes of ``source``."""
    return f"probes ({source})"


async def probe_calibrate(
    index: VectorIndex,
    embedder: Embedder,
    base: CalibrationArtifact,
    probes: Sequence[Probe],
    *,
    collection: str,
    tenant: str | None = None,
    k: int = 8,
    alpha: float | None = None,
    source: str = BUNDLED,
    progress: Callable[[str, int, int], None] | None = None,
    align_scores: bool | None = None,
) -> CalibrationArtifact:
    """``base`` re-certified on ``collection``'s (or one tenant's) scores for ``probes``.

    Each probe is searched as one of the collection's tenants (spread over them)
    and scored with ``base``, after the collection's score alignment (ADR 024;
    ``align_scores`` None: as ``RAGSIFT_CONFIDENCE_ALIGNMENT`` says). The
    certificate is at ``alpha`` (``base``'s when None). The result's
    ``conformal.feasible`` is False when no threshold is certified on this collection.
    Where it is, the probes are searched keyword-only too and re-certify ``base``'s
    keyword model (ADR 029); where they certify none, it stays as shipped and the
    provenance says why.

    Raises:
        InvalidEventError: the collection (or tenant) has no chunk (MIN_PROBED_CHUNKS).
        CollectionNotFoundError: no such collection.
        ConfidenceError: ``base`` reads reader signals or keeps no in-scope sample;
            too few probes.
    """
    why = unprobed_because(base)  # before the searches, which it would waste
    if why is not None:
        raise ConfidenceError(why)
    info, counts = await chunks_per_tenant(index, collection, tenant, minimum=MIN_PROBED_CHUNKS)
    total = sum(counts.values())
    owners = sorted(counts)
    asker = with_bank_vectors(embedder)  # the bundled bank's vectors are embedded once
    await asker.keep([p.text for p in probes])
    owned = [(owners[i % len(owners)], p.text, None) for i, p in enumerate(probes)]
    hits = await search_as_pipeline(index, asker, collection, owned, k, progress=progress)
    groups = [p.group for p in probes]
    texts = [p.text for p in probes]
    aligned, confidence = aligned_on_probes(
        base,
        hits,
        groups,
        reader=await read_embedded(base, asker, texts, hits),
        queries=texts,
        enabled=alignment_on() if align_scores is None else align_scores,
    )
    probed = with_probes(
        aligned,
        confidence,
        groups,
        alpha=alpha,
        provenance=Provenance(
            method=(
                f"{method_of(source)}: the answer threshold re-certified with the collection's"
                f" scores for {len(probes)} questions it is assumed not to answer as the"
                " out-of-scope class"
            ),
            base_version=base.version,
            collection=collection,
            tenant=tenant,
            index_version=f"{info.points_count} points",
            chunks=total,
        ),
    )
    if not probed.conformal.feasible or probed.keyword is None:
        return probed
    # The same probes searched keyword-only re-certify the keyword model (ADR 029).
    from ragsift.evaluation.keyword_probes import with_keyword_probes

    found = await search_as_pipeline(index, asker, collection, owned, k, mode="keyword")
    keyword, why = with_keyword_probes(
        probed, found, groups, queries=[p.text for p in probes], alpha=alpha
    )
    if why is None:
        return keyword
    made = probed.provenance
    assert made is not None  # set above
    note = f"{made.method}; keyword-only queries keep the shipped keyword bar: {why}"
    data = {**probed.model_dump(mode="json"), "version": ""}
    data["provenance"] = {**made.model_dump(mode="json"), "method": note}
    return CalibrationArtifact.model_validate(data)


#: Group prefix of a probe appended to a labelled set (``ragsift eval --probes``).
PROBE_GROUP: Final = "probe:"


def with_probe_queries(dataset: LabelledSet, probes: Sequence[Probe]) -> LabelledSet:
    """``dataset`` with the probes appended as out-of-scope questions (searched, not scored).

    They come last, in order, so a run's last ``len(probes)`` rows are the probes.
    """
    extra = [
        EvalQuery(
            query_id=f"probe-{i}",
            text=p.text,
            kind="out_of_scope",
            relevant=frozenset(),
            group=f"{PROBE_GROUP}{p.group}",
        )
        for i, p in enumerate(probes)
    ]
    return dataclasses.replace(dataset, queries=[*dataset.queries, *extra])
