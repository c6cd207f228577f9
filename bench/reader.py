"""Benchmark of the reader signals: milliseconds per query for term coverage, sentence
match and token match (cold: every chunk tokenized, every sentence embedded, every top
hit run through the model; warm: chunk terms, sentences and top hits' token states from
the reader's caches), next to the query's own embedding, on the ONNX MiniLM embedder.
Token match reads each query's token states from its embedding pass (the embedder keeps
them), cold and warm.

Workload: SQuAD 2.0 dev questions, each with three hits (its own paragraph and the
next two), in batches as the pipeline sees them. No two queries share a hit, so
the cold pass embeds every sentence (the worst case: no cache, no overlap).
Prints human-readable lines, then one JSON object on the last line. Never
asserts on time.

    python bench/reader.py [--queries 256] [--batch 32] [--top-n 3] [--embedder onnx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from quick import parse_args

from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.embedders import Embedder, HashingEmbedder
from ragsift.retrieval.reader import Reader, ReaderItem, split_sentences

REPO = Path(__file__).resolve().parent.parent
SQUAD = Path(os.environ.get("RAGSIFT_SQUAD2_DIR", REPO.parent / "shared" / "data" / "squad2"))


def _workload(n: int, top_n: int) -> list[tuple[str, list[str]]]:
    """(question, hit texts): each query gets top_n paragraphs no other query gets."""
    data = json.loads((SQUAD / "dev-v2.0.json").read_text(encoding="utf-8"))["data"]
    paragraphs = [p for article in data for p in article["paragraphs"] if p["qas"]]
    out = []
    for i in range(min(n, len(paragraphs) // top_n)):
        own = paragraphs[i * top_n : (i + 1) * top_n]
        out.append((own[0]["qas"][0]["question"], [p["context"] for p in own]))
    return out


def _embedder(kind: str) -> Embedder:
    if kind == "onnx":
        from ragsift.retrieval.embedders.onnx import OnnxMiniLMEmbedder

        return OnnxMiniLMEmbedder()
    return HashingEmbedder()


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = _embedder(args.embedder)
    work = _workload(args.queries, args.top_n)
    batches = [work[i : i + args.batch] for i in range(0, len(work), args.batch)]
    await embedder.embed(["warm up the session"])
    timings: dict[str, list[float]] = {
        "query_embed": [],
        "coverage": [],
        "coverage_warm": [],
        "cold": [],
        "warm": [],
        "tokens_cold": [],
        "tokens_warm": [],
    }
    coverage = Reader(embedder, encoder=Bm25Encoder(), sentences=False, top_n=args.top_n)
    sentences = Reader(embedder, top_n=args.top_n)
    tokens = Reader(embedder, sentences=False, tokens=True) if args.embedder == "onnx" else None
    for batch in batches:
        t0 = time.perf_counter()
        vectors = await embedder.embed([q for q, _ in batch])
        t1 = time.perf_counter()
        items = [ReaderItem(q, v, hits) for (q, hits), v in zip(batch, vectors, strict=True)]
        await coverage.score(items)  # every chunk tokenized
        t2 = time.perf_counter()
        await coverage.score(items)  # the same batch again: every chunk's terms cached
        t2w = time.perf_counter()
        await sentences.score(items)  # nothing cached: every sentence embedded
        t3 = time.perf_counter()
        await sentences.score(items)  # the same batch again: every sentence cached
        t4 = time.perf_counter()
        if tokens is not None:
            await tokens.score(items)  # every top hit through the model
            t5 = time.perf_counter()
            await tokens.score(items)  # the top hits' states kept too
            timings["tokens_cold"].append((t5 - t4) * 1000.0 / len(batch))
            timings["tokens_warm"].append((time.perf_counter() - t5) * 1000.0 / len(batch))
        per = 1000.0 / len(batch)
        timings["query_embed"].append((t1 - t0) * per)
        timings["coverage"].append((t2 - t1) * per)
        timings["coverage_warm"].append((t2w - t2) * per)
        timings["cold"].append((t3 - t2w) * per)
        timings["warm"].append((t4 - t3) * per)
    sentences_per_query = statistics.mean(
        sum(len(split_sentences(h)) for h in hits) for _, hits in work
    )
    return {
        "embedder": embedder.embedder_id,
        "queries": len(work),
        "batch": args.batch,
        "top_n": args.top_n,
        "sentences_per_query": round(sentences_per_query, 2),
        "ms_per_query": {
            k: round(statistics.median(v), 3) if v else None for k, v in timings.items()
        },
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def main() -> None:
    """Parse arguments, run, print lines and a JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--top-n", type=int, default=3)
    parser.add_argument("--embedder", choices=("onnx", "hashing"), default="onnx")
    args = parse_args(parser, {"queries": 64})
    result = asyncio.run(_run(args))
    ms = result["ms_per_query"]
    print(f"{result['embedder']}: {result['queries']} queries, batches of {result['batch']},")
    print(f"  top {result['top_n']} hits, {result['sentences_per_query']} sentences per query")
    print(f"  query embedding        {ms['query_embed']:8.3f} ms/query (for comparison)")
    print(f"  term coverage, cold    {ms['coverage']:8.3f} ms/query")
    print(f"  term coverage, warm    {ms['coverage_warm']:8.3f} ms/query")
    print(f"  sentence match, cold   {ms['cold']:8.3f} ms/query")
    print(f"  sentence match, warm   {ms['warm']:8.3f} ms/query")
    if ms["tokens_cold"] is not None:
        print(f"  token match, cold      {ms['tokens_cold']:8.3f} ms/query")
        print(f"  token match, warm      {ms['tokens_warm']:8.3f} ms/query")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
