"""Every benchmark in one run, printed as one JSON document (``make bench``).

On one seeded corpus (bench/corpus.py, 10,000 chunks by default) it measures:

- the confidence engine's cost per query (bench/confidence.py);
- the bare Qdrant Edge engine: batches of hybrid queries (dense + BM25
  channels in one ``query_batch``, fused client-side, payload of the winners)
  straight on the shard the pipeline uses, with query vectors and BM25
  encodings computed beforehand: the ceiling the pipeline is measured against;
- the embedded pipeline on that shard: batched queries/s on cache misses, then
  the same queries again as cache hits (the cache-hit speed-up);
- Kafka end to end with 1 and 2 worker processes (bench/streaming.py, same
  corpus and queries): queries/s, p50/p99 from produce to result;
- the ratios: pipeline and end-to-end throughput over the bare engine's.

Needs Kafka and Redis for the streaming part (``make bench`` starts them).
Progress on stderr; the JSON document alone on stdout. Never asserts on time.

    python bench/suite.py [--chunks 10000] [--queries 2000] [--stream-queries 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe
from corpus import make_corpus, make_queries

from ragsift.embedded import EmbeddedRuntime
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.pipeline import prefetch_limit
from ragsift.schemas import QueryEvent
from ragsift.settings import Settings

BENCH = Path(__file__).resolve().parent
TENANT = "bench"
BATCH = 64
K = 8  # the pipeline's default_k
RRF_K = 2  # Qdrant's RRF constant, as the pipeline fuses


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _script(name: str, *args: str) -> dict[str, Any]:
    """Run bench/NAME.py; its last stdout line is its JSON figures."""
    _log(f"== bench/{name}.py {' '.join(args)}")
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *args],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _bare_engine_qps(shard_dir: Path, texts: Sequence[str], vectors: np.ndarray) -> float:
    """Hybrid batch queries/s of Qdrant Edge alone on the pipeline's shard."""
    bm25 = Bm25Encoder()
    tenant = qe.Filter(must=[qe.FieldCondition(key="tenant_id", match=qe.MatchValue(TENANT))])
    prefetch = prefetch_limit(K)
    requests = []
    for text, vector in zip(texts, vectors.tolist(), strict=True):
        sparse = bm25.encode_query(text)
        requests.append(
            (
                qe.QueryRequest(
                    limit=prefetch,
                    query=qe.Query.Nearest(vector, using="dense"),
                    filter=tenant,
                    with_payload=False,
                ),
                qe.QueryRequest(
                    limit=prefetch,
                    query=qe.Query.Nearest(
                        qe.SparseVector(list(sparse.indices), list(sparse.values)), using="bm25"
                    ),
                    filter=tenant,
                    with_payload=False,
                ),
            )
        )
    shard = qe.EdgeShard.load(str(shard_dir))
    try:

        def run(batch: Sequence[tuple[qe.QueryRequest, qe.QueryRequest]]) -> None:
            answers = shard.query_batch(qe.QueryBatchRequest([r for pair in batch for r in pair]))
            winners: list[Any] = []
            for j in range(len(batch)):
                fused: dict[Any, float] = {}
                for channel in answers[2 * j : 2 * j + 2]:
                    for rank, point in enumerate(channel):
                        fused[point.id] = fused.get(point.id, 0.0) + 1.0 / (RRF_K + rank + 1)
                winners.extend(sorted(fused, key=fused.__getitem__, reverse=True)[:K])
            shard.retrieve(list(dict.fromkeys(winners)), True, False)

        run(requests[:BATCH])  # warm-up
        start = time.perf_counter()
        for i in range(0, len(requests), BATCH):
            run(requests[i : i + BATCH])
        return len(requests) / (time.perf_counter() - start)
    finally:
        shard.close()


async def _pipeline_qps(runtime: EmbeddedRuntime, events: Sequence[QueryEvent]) -> float:
    start = time.perf_counter()
    for i in range(0, len(events), BATCH):
        await runtime.pipeline.process(events[i : i + BATCH])
    return len(events) / (time.perf_counter() - start)


async def _embedded(chunks: int, n_queries: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        corpus = make_corpus(chunks)
        runtime = EmbeddedRuntime(Settings.from_env(data_dir=data_dir))
        _log(f"indexing {chunks} chunks…")
        await runtime.ingest(TENANT, corpus)
        texts = make_queries(corpus, n_queries + BATCH)
        vectors = await runtime.embedder.embed(texts)
        embedder_id = runtime.embedder.embedder_id
        await runtime.close()

        _log(f"bare Qdrant Edge: {n_queries} hybrid queries in batches of {BATCH}…")
        engine_qps = _bare_engine_qps(data_dir / "qdrant" / "default", texts, vectors)

        events = [
            QueryEvent(
                query_id=f"b-{i}",
                tenant_id=TENANT,
                query=text,
                vector=vector.tolist(),
                embedder_id=embedder_id,
            )
            for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))
        ]
        warm, timed = events[:BATCH], events[BATCH:]
        runtime = EmbeddedRuntime(Settings.from_env(data_dir=data_dir))
        try:
            await runtime.pipeline.process(warm)
            _log(f"embedded pipeline: {len(timed)} queries, cache misses then hits…")
            miss_qps = await _pipeline_qps(runtime, timed)
            hits = [e.model_copy(update={"query_id": f"h-{e.query_id}"}) for e in timed]
            hit_qps = await _pipeline_qps(runtime, hits)
        finally:
            await runtime.close()
    return {
        "bare_engine_batch_qps": round(engine_qps, 1),
        "pipeline_qps": round(miss_qps, 1),
        "pipeline_cache_hit_qps": round(hit_qps, 1),
        "cache_hit_speedup": round(hit_qps / miss_qps, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000, help="embedded and bare engine")
    parser.add_argument("--stream-queries", type=int, default=5_000, help="per worker count")
    args = parser.parse_args()
    started = time.perf_counter()
    confidence = _script("confidence")
    embedded = asyncio.run(_embedded(args.chunks, args.queries))
    streaming = _script(
        "streaming", "--chunks", str(args.chunks), "--queries", str(args.stream_queries)
    )
    engine = embedded["bare_engine_batch_qps"]
    one, two = streaming["workers_1"], streaming["workers_2"]
    document = {
        "benchmark": "ragsift",
        "chunks": args.chunks,
        "confidence_us_per_query": confidence["batch_us_per_query"],
        "confidence_single_us_per_query": confidence["single_us_per_query"],
        **embedded,
        "e2e_1_worker": one,
        "e2e_2_workers": two,
        "pipeline_over_engine": round(embedded["pipeline_qps"] / engine, 3),
        "e2e_1_worker_over_engine": round(one["queries_per_s"] / engine, 3),
        "targets": {
            "e2e_1_worker_qps_min": 1000,
            "pipeline_over_engine_min": 0.7,
        },
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
