"""Corrective retrieval's (B10) cost per query: the embedded pipeline with it off and on.

On one seeded corpus (bench/corpus.py) the same distinct queries (vectors
precomputed, cache off, batches of 64) run three times: corrective off; on with
the deployment defaults (a retry for refused or channel-split results); and on
with every query triggered (``trigger_confidence`` 1), the cost of a retry
itself. Per setting: queries/s, the share of queries retried and the share the
retry won, and the extra milliseconds per query over "off". Progress on
stderr; one JSON object on the last line of stdout; never asserts on time.

    python bench/corrective.py [--chunks 5000] [--queries 1000] [--batch 64]
                               [--strategy expand|wider|keyword]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from corpus import make_corpus, make_queries, query_events
from quick import parse_args

from ragsift.embedded import EmbeddedRuntime
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.schemas import QueryEvent
from ragsift.settings import CacheSettings, CorrectiveSettings, EmbedderSettings, Settings

TENANT = "bench"
WARM = 64  # queries run once before timing (engines built, shard pages cached)
# Settings compared, by name: None is corrective off.
VARIANTS: dict[str, float | None] = {"off": None, "on": -1.0, "on_every_query": 1.0}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _timed(
    pipeline: RetrievalPipeline, events: list[QueryEvent], batch: int
) -> tuple[float, int, int]:
    """Seconds for ``events``, and how many were retried and won by the retry."""
    retried = won = 0
    start = time.perf_counter()
    for i in range(0, len(events), batch):
        for out in await pipeline.process(events[i : i + batch]):
            if isinstance(out, PipelineOutput) and out.result.corrective is not None:
                retried += 1
                won += out.result.corrective.won != "first"
    return time.perf_counter() - start, retried, won


async def run(chunks: int, n_queries: int, batch: int, strategy: str) -> dict[str, object]:
    """The figures of one run (module docstring)."""
    figures: dict[str, object] = {
        "benchmark": "corrective",
        "chunks": chunks,
        "queries": n_queries,
        "batch": batch,
        "strategy": strategy,
    }
    with tempfile.TemporaryDirectory() as tmp:
        base = Settings.from_env(
            data_dir=Path(tmp),
            embedder=EmbedderSettings(kind="hashing"),
            cache=CacheSettings(enabled=False),
        )
        runtime = EmbeddedRuntime(base)
        corpus = make_corpus(chunks)
        _log(f"indexing {chunks} chunks…")
        await runtime.ingest(TENANT, corpus)
        texts = make_queries(corpus, n_queries + WARM)
        vectors = await runtime.embedder.embed(texts)
        events = query_events(texts, vectors, runtime.embedder.embedder_id, "c", TENANT)
        warm, timed = events[:WARM], events[WARM:]
        figures["embedder"] = runtime.embedder.embedder_id
        off_s = 0.0
        for name, bar in VARIANTS.items():
            corrective = CorrectiveSettings(
                enabled=bar is not None,
                strategy=strategy,  # type: ignore[arg-type]  # argparse choices
                trigger_confidence=bar if bar is not None and bar >= 0 else None,
            )
            settings = base.model_copy(update={"corrective": corrective})
            pipeline = RetrievalPipeline(
                index=runtime.index,
                embedder=runtime.embedder,
                engines=runtime.pipeline.engines,
                settings=settings,
                metrics=runtime.metrics,
            )
            _log(f"{name}: {len(timed)} queries…")
            await pipeline.process(warm)
            seconds, retried, won = await _timed(pipeline, timed, batch)
            if bar is None:
                off_s = seconds
            figures[name] = {
                "queries_per_s": round(len(timed) / seconds, 1),
                "retried_share": round(retried / len(timed), 4),
                "retry_won_share": round(won / len(timed), 4),
                "extra_ms_per_query": round((seconds - off_s) * 1000 / len(timed), 3),
                "extra_ms_per_retried_query": round((seconds - off_s) * 1000 / retried, 3)
                if retried
                else None,
            }
        await runtime.close()
    return figures


def main() -> None:
    """Parse the arguments, run, print the JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--strategy", choices=["expand", "wider", "keyword"], default="expand")
    args = parse_args(parser, {"chunks": 1000, "queries": 200})
    print(json.dumps(asyncio.run(run(args.chunks, args.queries, args.batch, args.strategy))))


if __name__ == "__main__":
    main()
