"""Label-free self-calibration of one collection (``ragsift calibrate --collection``).

The collection labels itself: a sentence cut out of one of its chunks, reduced to
its longer words with some dropped (inverse-cloze style, so it is not a verbatim
substring of the chunk), is a query the collection can answer, and that chunk is
the relevant one; a bundled bank of general questions is what it cannot answer.
Both are searched as the pipeline searches and scored with the shipped
calibration; :func:`ragsift.confidence.selfcal.recalibrate` then re-maps its
probabilities and re-certifies its answer threshold on them.

Only the :class:`~ragsift.retrieval.index.VectorIndex` protocol is used: chunks
are sampled by searching the tenant's chunks with random directions, so any
index (Qdrant Edge or server) works.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Final, Literal

import numpy as np

from ragsift.confidence import (
    CalibrationArtifact,
    ConfidenceConfig,
    ConfidenceEngine,
    HitBatch,
    Provenance,
)
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.selfcal import recalibrate
from ragsift.errors import InvalidEventError
from ragsift.evaluation.reads import read_embedded
from ragsift.evaluation.scoring import answer_in_kept
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.hit_scores import hit_scores, prefetch_limit
from ragsift.retrieval.index import (
    DOC_FIELD,
    CollectionInfo,
    SearchHit,
    SearchRequest,
    VectorIndex,
)
from ragsift.retrieval.reader import ChunkTerms, ReaderScores, split_sentences

__all__ = [
    "MIN_CHUNKS",
    "PseudoQuery",
    "SelfCalibration",
    "chunks_per_tenant",
    "out_of_domain_questions",
    "pseudo_query",
    "sample_chunks",
    "search_as_pipeline",
    "self_calibrate",
]

# Below this many chunks a collection gives too few distinct pseudo-queries for a
# re-map and a certificate (MIN_POSITIVES answerable ones, at most MAX_PER_CHUNK each).
MIN_CHUNKS: Final = 10
# Pseudo-queries made per sampled chunk (different sentences / dropouts): at least
# MIN_PER_CHUNK, more (up to MAX_PER_CHUNK) when a small collection needs them to
# reach the sample size the certificate needs.
MIN_PER_CHUNK: Final = 4
MAX_PER_CHUNK: Final = 16
# Answerable pseudo-queries wanted in all; as many out-of-domain questions are
# scored, so the fit assumes an even in-scope / out-of-scope mix (docs/confidence.md).
DEFAULT_SAMPLE: Final = 600
# Share of pseudo-queries held out of the fit (for `ragsift eval --pseudo-queries`).
HOLDOUT_FRACTION: Final = 0.25
# Words of three letters or fewer are mostly function words ("the", "was", "and");
# dropping them, and a share of the rest, keeps a pseudo-query from being a
# verbatim substring of its chunk, as a real question is not.
MIN_WORD_CHARS: Final = 4
WORD_DROPOUT: Final = 0.25
MIN_QUERY_WORDS: Final = 3
MAX_QUERY_WORDS: Final = 10
# Chunks per tenant the sampler tries to reach: the pool near-domain negatives are
# searched in (a larger collection is represented by this many of its chunks).
POOL_MAX: Final = 5000
# Chunks returned per random probe while sampling, and probes per wanted chunk.
_PROBE_LIMIT: Final = 32
_PROBE_ROUNDS: Final = 4
_QUERY_BATCH: Final = 128
_KMEANS_ROUNDS: Final = 10
_WORD = re.compile(r"[^\W_][\w'-]*", re.UNICODE)
_BANK = "out_of_domain_questions.txt"


@dataclass(frozen=True, slots=True)
class PseudoQuery:
    """A query made from a chunk; that chunk is its relevant context."""

    text: str
    tenant_id: str
    chunk_id: str
    doc_id: str


@dataclass(frozen=True, slots=True)
class SelfCalibration:
    """The collection's own artifact and the pseudo-queries held out of its fit."""

    artifact: CalibrationArtifact
    held_out: list[PseudoQuery]
    chunks: int


def out_of_domain_questions() -> list[str]:
    """The bundled bank of general questions a document collection cannot answer."""
    text = resources.files("ragsift.evaluation").joinpath("data", _BANK).read_text("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def pseudo_query(text: str, rng: np.random.Generator) -> str | None:
    """An inverse-cloze query from a chunk: one sentence's longer words, some dropped.

    None when the chunk has no sentence with enough words.
    """
    sentences = [
        words
        for s in split_sentences(text, max_sentences=10_000)
        if len(words := [w for w in _WORD.findall(s) if len(w) >= MIN_WORD_CHARS])
        >= MIN_QUERY_WORDS + 1
    ]
    if not sentences:
        return None
    words = sentences[int(rng.integers(len(sentences)))]
    kept = [w for w in words if rng.random() >= WORD_DROPOUT]
    if len(kept) < MIN_QUERY_WORDS:
        kept = words[:MIN_QUERY_WORDS]
    if len(kept) > MAX_QUERY_WORDS:
        start = int(rng.integers(len(kept) - MAX_QUERY_WORDS + 1))
        kept = kept[start : start + MAX_QUERY_WORDS]
    return " ".join(kept)


async def sample_chunks(
    index: VectorIndex, collection: str, tenant: str, dim: int, want: int, rng: np.random.Generator
) -> list[SearchHit]:
    """Up to ``want`` distinct chunks of a tenant, found by searching random directions."""
    found: dict[str, SearchHit] = {}
    for _ in range(_PROBE_ROUNDS):
        missing = want - len(found)
        if missing <= 0:
            break
        probes = rng.standard_normal((max(1, -(-missing // 4)), dim))
        requests = [
            SearchRequest(
                tenant_id=tenant,
                dense_vector=(v / np.linalg.norm(v)).tolist(),
                mode="dense",
                limit=_PROBE_LIMIT,
                prefetch_limit=_PROBE_LIMIT,
            )
            for v in probes
        ]
        before = len(found)
        for hits in await index.search_batch(collection, requests):
            for hit in hits:
                found.setdefault(hit.chunk_id, hit)
        if len(found) == before:
            break  # every chunk reachable has been seen
    chunks = sorted(found.values(), key=lambda h: h.chunk_id)
    order = rng.permutation(len(chunks))[:want]
    return [chunks[i] for i in order]


async def _topics(
    embedder: Embedder, chunks: Sequence[SearchHit], rng: np.random.Generator
) -> list[int]:
    """A topic per chunk: spherical k-means on chunk embeddings, about sqrt(n) topics."""
    vectors = np.asarray(await embedder.embed([h.text for h in chunks]), dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-12)
    k = max(2, round(len(chunks) ** 0.5))
    centres = vectors[rng.choice(len(chunks), size=min(k, len(chunks)), replace=False)]
    assign = np.zeros(len(chunks), dtype=np.int64)
    for _ in range(_KMEANS_ROUNDS):
        assign = np.argmax(vectors @ centres.T, axis=1)
        for c in range(len(centres)):
            members = vectors[assign == c]
            if len(members):
                centre = members.sum(axis=0)
                centres[c] = centre / max(float(np.linalg.norm(centre)), 1e-12)
    return [int(a) for a in assign]


async def search_as_pipeline(
    index: VectorIndex,
    embedder: Embedder,
    collection: str,
    items: Sequence[tuple[str, str, list[str] | None]],
    k: int,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    mode: Literal["hybrid", "keyword"] = "hybrid",
) -> list[list[SearchHit]]:
    """Hybrid (or keyword-only) top-k hits of (tenant, text, doc pool) queries, searched
    as the pipeline does.

    A pool (doc ids) restricts the search to those documents; None: all of the tenant's.
    ``progress("search", done, total)`` follows the batches. A keyword-only search
    embeds nothing, as the pipeline does not.
    """
    out: list[list[SearchHit]] = []
    for start in range(0, len(items), _QUERY_BATCH):
        part = items[start : start + _QUERY_BATCH]
        vectors: list[list[float] | None] = (
            [None] * len(part)
            if mode == "keyword"
            else [v.tolist() for v in await embedder.embed([text for _, text, _ in part])]
        )
        requests = [
            SearchRequest(
                tenant_id=tenant,
                query=text,
                dense_vector=v,
                mode=mode,
                limit=k,
                prefetch_limit=prefetch_limit(k),
                embedder_id=embedder.embedder_id,
                filter=None if pool is None else {DOC_FIELD: pool},
            )
            for (tenant, text, pool), v in zip(part, vectors, strict=True)
        ]
        out.extend(await index.search_batch(collection, requests))
        if progress:
            progress("search", len(out), len(items))
        await asyncio.sleep(0)  # Edge searches in this thread: Ctrl-C waited out the loop
    return out


async def chunks_per_tenant(
    index: VectorIndex, collection: str, tenant: str | None, *, minimum: int = MIN_CHUNKS
) -> tuple[CollectionInfo, dict[str, int]]:
    """The collection's info and its chunks per tenant (only ``tenant``'s, when given).

    Raises:
        InvalidEventError: fewer than ``minimum`` chunks in all.
        CollectionNotFoundError: no such collection.
    """
    info = await index.collection_info(collection)
    counts = dict(info.tenants or {})
    if tenant is not None:
        counts = {tenant: counts.get(tenant, 0)}
    total = sum(counts.values())
    if total < minimum:
        who = f"tenant {tenant!r} in " if tenant else ""
        raise InvalidEventError(
            f"{who}collection {collection!r} has {total} chunks; calibrating it needs at"
            f" least {minimum} (ingest more documents, or keep the shipped calibration)"
        )
    return info, counts


async def self_calibrate(
    index: VectorIndex,
    embedder: Embedder,
    base: CalibrationArtifact,
    *,
    collection: str,
    tenant: str | None = None,
    sample: int = DEFAULT_SAMPLE,
    k: int = 8,
    seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
) -> SelfCalibration:
    """Fit ``collection``'s (or one tenant's) own calibration from its chunks.

    ``progress(stage, done, total)`` reports the ``sample`` and ``score`` stages.

    Raises:
        InvalidEventError: the collection (or tenant) has fewer than MIN_CHUNKS chunks.
        CollectionNotFoundError: no such collection.
        ConfidenceError: too few usable pseudo-queries.
    """
    if base.similarity_threshold is None:
        raise ConfidenceError(f"base calibration {base.version} has no fitted hit threshold")
    info, counts = await chunks_per_tenant(index, collection, tenant)
    total = sum(counts.values())
    rng = np.random.default_rng(seed)
    per_chunk = min(MAX_PER_CHUNK, max(MIN_PER_CHUNK, -(-sample // total)))
    # Every chunk the probes reach (up to POOL_MAX per tenant): the pool the near-domain
    # negatives are searched in; the pseudo-queries' sources are a sample of it.
    known: dict[str, list[SearchHit]] = {}
    chunks: list[SearchHit] = []
    for i, (owner, n) in enumerate(sorted(counts.items())):
        known[owner] = await sample_chunks(
            index, collection, owner, embedder.dim, min(n, POOL_MAX), rng
        )
        want = max(1, round(n / total * -(-sample // per_chunk)))
        chunks.extend(known[owner][:want])
        if progress:
            progress("sample", i + 1, len(counts))
    pseudo: list[PseudoQuery] = []
    for _ in range(per_chunk):
        for hit in chunks:
            text = pseudo_query(hit.text, rng)
            if text is not None and len(pseudo) < sample:
                pseudo.append(PseudoQuery(text, hit.tenant_id, hit.chunk_id, hit.doc_id))
    order = rng.permutation(len(pseudo))
    n_held = round(len(pseudo) * HOLDOUT_FRACTION)
    held_out = [pseudo[i] for i in order[:n_held]]
    fit = [pseudo[i] for i in order[n_held:]]
    # Near-domain negatives: the fit queries of half the collection's topics are
    # searched in the other half, their topics' documents removed. They read like the
    # collection's questions, yet it cannot answer them: as questions about another
    # corpus of the same kind would be (the bank's general questions alone are too
    # far off to place the boundary; removing single documents leaves their
    # siblings, which almost answer them: docs/adr/008-label-free-self-calibration.md).
    pool = [h for hits in known.values() for h in hits]
    topics = await _topics(embedder, pool, rng)
    removed_topics = set(rng.permutation(sorted(set(topics)))[: max(1, len(set(topics)) // 2)])
    removed = {h.doc_id for h, t in zip(pool, topics, strict=True) if t in removed_topics}
    pools = {owner: sorted({h.doc_id for h in hits} - removed) for owner, hits in known.items()}
    answerable = [p for p in fit if p.doc_id not in removed]
    unanswerable = [p for p in fit if p.doc_id in removed and pools[p.tenant_id]]
    owners = sorted(counts)
    bank = [(owners[i % len(owners)], q) for i, q in enumerate(out_of_domain_questions())]
    hits = await search_as_pipeline(
        index,
        embedder,
        collection,
        [(p.tenant_id, p.text, None) for p in answerable]
        + [(p.tenant_id, p.text, pools[p.tenant_id]) for p in unanswerable]
        + [(owner, q, None) for owner, q in bank],
        k,
    )
    if progress:
        progress("score", len(hits), len(hits))
    texts = [p.text for p in answerable] + [p.text for p in unanswerable] + [q for _, q in bank]
    reader = await read_embedded(base, embedder, texts, hits)
    sources = [p.chunk_id for p in answerable]
    signals, labels = score_pseudo_labels(base, hits, sources, queries=texts, reader=reader)
    artifact = recalibrate(
        base,
        signals,
        labels,
        seed=seed,
        # A document's pseudo-queries are correlated draws; each bank question is its own.
        groups=[p.doc_id for p in answerable]
        + [p.doc_id for p in unanswerable]
        + [f"bank:{i}" for i in range(len(bank))],
        provenance=Provenance(
            method="self-calibration: pseudo-queries (own, and with their documents removed)"
            " + out-of-domain bank; probability re-map + conformal threshold",
            base_version=base.version,
            collection=collection,
            tenant=tenant,
            index_version=f"{info.points_count} points",
            chunks=total,
        ),
    )
    return SelfCalibration(artifact, held_out, total)


def score_pseudo_labels(
    base: CalibrationArtifact,
    hits: Sequence[Sequence[SearchHit]],
    sources: Sequence[str],
    *,
    queries: Sequence[str] | None = None,
    reader: Sequence[ReaderScores] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Signals of every query under ``base``, and its pseudo-label.

    The first ``len(sources)`` hit lists are pseudo-queries (label 1 when their
    source chunk is kept); the rest are out-of-domain questions (label 0). Reader
    signals come from ``reader`` (:func:`~.reads.read_embedded`), else term coverage
    from ``queries`` (each hit list's text) as the pipeline reads it, else imputed.
    """
    config = dataclasses.replace(
        ConfidenceConfig(scorer="weighted", embedder_id=base.embedder_id),
        similarity_threshold=base.similarity_threshold or 0.0,
        min_documents=1,
    )
    reads: Sequence[ReaderScores | None] = reader or [None] * len(hits)
    if reader is None and queries is not None:
        terms = ChunkTerms(Bm25Encoder())
        reads = [terms.read(q, found) for q, found in zip(queries, hits, strict=True)]
    batch = HitBatch.from_hits(
        [
            hit_scores(list(found), "hybrid", (), read)
            for found, read in zip(hits, reads, strict=True)
        ]
    )
    assessed = ConfidenceEngine(config).assess_batch(batch)
    width = max((len(h) for h in hits), default=1) or 1
    relevant = np.zeros((len(hits), width), dtype=bool)
    for row, (found, source) in enumerate(zip(hits, sources, strict=False)):
        for col, hit in enumerate(found):
            relevant[row, col] = hit.chunk_id == source
    labels = answer_in_kept(assessed, relevant)
    return assessed.signals, labels
