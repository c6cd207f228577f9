"""Bare Qdrant Edge throughput: 10,000 chunks x 384-d, tenant-filtered, after optimize().

Measures what the embedded runtime's vector engine can do on its own, without
embedding or scoring: time to index (upsert + optimize), then dense and hybrid
queries per second, one query per call and in ``query_batch`` calls. Hybrid is
measured the way :class:`ragsift.retrieval.edge.EdgeIndex` runs it by default
(dense + BM25 channels in one batch, fused client-side, payload of the
winners) and as Qdrant's own prefetch + ``Fusion.Rrf`` query. Vectors and texts
are synthetic and seeded. Prints progress on stderr and one JSON object as the
last line of stdout; never asserts on time.

    python bench/engine.py [--points 10000] [--queries 500]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import qdrant_edge as qe
from quick import parse_args

from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.index import RRF_K, PointKey, RawPoint, rrf_fuse

SEED = 20240611
DIM = 384
TENANTS = 10  # each query filters to one tenant: 10% of the points
VOCABULARY = 5000
WORDS_PER_CHUNK = 60
WORDS_PER_QUERY = 6
LIMIT = 10
PREFETCH = 50
BATCH = 32
UPSERT_BATCH = 256


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _rate(fn: Callable[[int], Any], n: int, per_call: int = 1) -> float:
    fn(0)  # warm-up
    start = time.perf_counter()
    calls = max(1, n // per_call)
    for i in range(calls):
        fn(i)
    return calls * per_call / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=500)
    args = parse_args(parser, {"points": 2000, "queries": 200})
    rng = np.random.default_rng(SEED)
    bm25 = Bm25Encoder()
    # Zipf-distributed synthetic words so BM25 sees realistic document frequencies.
    vocab = np.array([f"term{i}" for i in range(VOCABULARY)])
    zipf = 1.0 / np.arange(1, VOCABULARY + 1)
    zipf /= zipf.sum()
    centers = rng.standard_normal((TENANTS * 4, DIM)).astype(np.float32)
    n = args.points
    labels = rng.integers(0, len(centers), n)
    vectors = centers[labels] + 0.8 * rng.standard_normal((n, DIM)).astype(np.float32)
    texts = [" ".join(rng.choice(vocab, WORDS_PER_CHUNK, p=zipf)) for _ in range(n)]

    root = tempfile.TemporaryDirectory()
    config = qe.EdgeConfig(
        vectors={"dense": qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)},
        sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
    )
    shard = qe.EdgeShard.create(f"{root.name}/bench", config)
    shard.update(
        qe.UpdateOperation.create_field_index("tenant_id", qe.KeywordIndexParams(is_tenant=True))
    )
    _log(f"indexing {n} points ...")
    start = time.perf_counter()
    for lo in range(0, n, UPSERT_BATCH):
        points = []
        for i in range(lo, min(n, lo + UPSERT_BATCH)):
            doc = bm25.encode_document(texts[i])
            points.append(
                qe.Point(
                    id=str(uuid.UUID(int=i)),
                    vector={
                        "dense": vectors[i].tolist(),
                        "bm25": qe.SparseVector(list(doc.indices), list(doc.values)),
                    },
                    payload={"tenant_id": f"t{i % TENANTS}", "chunk_id": f"c{i}", "text": texts[i]},
                )
            )
        shard.update(qe.UpdateOperation.upsert_points(points))
    upsert_s = time.perf_counter() - start
    start = time.perf_counter()
    shard.optimize()
    optimize_s = time.perf_counter() - start
    _log(f"upsert {upsert_s:.1f}s, optimize {optimize_s:.1f}s")

    q = args.queries
    qvec = (
        (centers[rng.integers(0, len(centers), q)] + 0.8 * rng.standard_normal((q, DIM)))
        .astype(np.float32)
        .tolist()
    )
    qsparse = []
    for _ in range(q):
        enc = bm25.encode_query(" ".join(rng.choice(vocab[:1000], WORDS_PER_QUERY)))
        qsparse.append(qe.SparseVector(list(enc.indices), list(enc.values)))
    filters = [
        qe.Filter(must=[qe.FieldCondition(key="tenant_id", match=qe.MatchValue(f"t{i % TENANTS}"))])
        for i in range(q)
    ]

    def dense(i: int, limit: int = LIMIT, payload: bool = True) -> qe.QueryRequest:
        return qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(qvec[i % q], using="dense"),
            filter=filters[i % q],
            with_payload=payload,
        )

    def sparse(i: int) -> qe.QueryRequest:
        return qe.QueryRequest(
            limit=PREFETCH,
            query=qe.Query.Nearest(qsparse[i % q], using="bm25"),
            filter=filters[i % q],
            with_payload=False,
        )

    def fused(i: int) -> qe.QueryRequest:
        return qe.QueryRequest(
            limit=LIMIT,
            prefetches=[
                qe.Prefetch(limit=PREFETCH, query=qe.Query.Nearest(qvec[i % q], using="dense")),
                qe.Prefetch(limit=PREFETCH, query=qe.Query.Nearest(qsparse[i % q], using="bm25")),
            ],
            query=qe.Fusion.Rrf(k=RRF_K),  # type: ignore[arg-type]  # stub types it as Fusion
            filter=filters[i % q],
            with_payload=True,
        )

    def client_hybrid_many(indices: list[int]) -> None:
        reqs = [r for i in indices for r in (dense(i, PREFETCH, False), sparse(i))]
        answers = shard.query_batch(qe.QueryBatchRequest(reqs))
        winners: list[PointKey] = []
        for j in range(len(indices)):
            channels = [
                [RawPoint(p.id.int, p.score) for p in a] for a in answers[2 * j : 2 * j + 2]
            ]
            winners.extend(pid for pid, _ in rrf_fuse(channels, k=RRF_K)[:LIMIT])
        shard.retrieve([uuid.UUID(int=int(k)) for k in dict.fromkeys(winners)], True, False)

    def qdrant_hybrid_many(indices: list[int]) -> None:
        reqs = [r for i in indices for r in (dense(i, PREFETCH, False), sparse(i), fused(i))]
        shard.query_batch(qe.QueryBatchRequest(reqs))

    def batch(make: Callable[[int], qe.QueryRequest]) -> Callable[[int], Any]:
        return lambda b: shard.query_batch(
            qe.QueryBatchRequest([make(b * BATCH + j) for j in range(BATCH)])
        )

    _log("querying ...")
    result = {
        "bench": "qdrant_edge_engine",
        "qdrant_edge_version": "0.9.0",
        "points": n,
        "dim": DIM,
        "tenants": TENANTS,
        "limit": LIMIT,
        "prefetch_limit": PREFETCH,
        "batch_size": BATCH,
        "index_seconds": round(upsert_s + optimize_s, 2),
        "upsert_seconds": round(upsert_s, 2),
        "optimize_seconds": round(optimize_s, 2),
        "segments": shard.info().segments_count,
        "dense_qps": round(_rate(lambda i: shard.query(dense(i)), q)),
        "dense_batch_qps": round(_rate(batch(dense), q, BATCH)),
        "hybrid_qps": round(_rate(lambda i: client_hybrid_many([i]), q)),
        "hybrid_batch_qps": round(
            _rate(lambda b: client_hybrid_many(list(range(b * BATCH, (b + 1) * BATCH))), q, BATCH)
        ),
        "hybrid_qdrant_fusion_qps": round(_rate(lambda i: qdrant_hybrid_many([i]), q)),
        "hybrid_qdrant_fusion_batch_qps": round(
            _rate(lambda b: qdrant_hybrid_many(list(range(b * BATCH, (b + 1) * BATCH))), q, BATCH)
        ),
        "hybrid_fused_only_qps": round(_rate(lambda i: shard.query(fused(i)), q)),
    }
    shard.close()
    root.cleanup()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
