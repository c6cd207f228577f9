"""Faults injected into a running stream: nothing lost, nothing silent (issue #8).

Each test runs real ``ragsift worker`` processes against the real broker and
redis-server on loopback and injects one fault while queries are flowing.
``RAGSIFT_FAULT_QUERIES`` sets the queries per test (2,000 in every CI run;
``make e2e-faults`` runs 10,000) and ``RAGSIFT_SOAK_SECONDS`` the soak's
length; only when it is set does the soak judge lag against the rate (by
default it checks that the backlog drains). Every loop is bounded in count and time.

Downstream consumers deduplicate by id: a result's id is derived from its
query id and an evidence event's from its query id and kind, so a replay after
a crash repeats an id instead of adding an answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import statistics
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from ragsift.ingest.sample import DEMO_QUERIES
from ragsift.schemas import DeadLetter, EvidenceEvent, QueryEvent, RetrievalResult
from ragsift.schemas.deadletter import DEFAULT_MAX_ORIGINAL_BYTES
from ragsift.settings import EmbedderSettings
from ragsift.wiring import build_embedder
from tests.e2e.harness import (
    TENANT,
    Pacer,
    Stack,
    TopicReader,
    WorkerProcess,
    audit_rows,
    free_port,
    prepare_index,
    produce,
    services,
    until_cache_hit,
)

QUERIES = int(os.environ.get("RAGSIFT_FAULT_QUERIES", "2000"))
SOAK_S = float(os.environ.get("RAGSIFT_SOAK_SECONDS", "40"))
# Lag against a rate measures the machine as much as the worker: a busy CI host
# failed it (lag 1,676 vs 748 allowed). Only a chosen soak (make e2e-faults sets
# RAGSIFT_SOAK_SECONDS) judges it; every run checks loss, memory and the drain.
JUDGE_LAG_AGAINST_RATE = "RAGSIFT_SOAK_SECONDS" in os.environ
# After pacing stops the backlog must drain to nothing within this bound, however
# loaded the machine: a stuck or leaking consumer never does.
DRAIN_TIMEOUT_S = 120.0
# The fault suite tests plumbing (loss, duplicates, dead letters, recovery) with
# 2,000-10,000 queries per fault: it pins the hashing embedder, whose vectors
# cost microseconds, where the default onnx model embeds ~100-250 texts/s on two
# cores and would spend most of the run embedding. The index and the workers
# must agree on it (a mismatch is refused), so both are built with it.
EMBEDDER = EmbedderSettings(kind="hashing")
# Worst case a stream is allowed: 20 queries/s plus two minutes for the faults.
STREAM_TIMEOUT_S = 120 + QUERIES / 20

pytestmark = [pytest.mark.faults, pytest.mark.timeout(int(STREAM_TIMEOUT_S + SOAK_S + 600))]

Action = Callable[[], Awaitable[None]]


#: The faults that test the runtime itself (its commits, its rebalances, its loop
#: going on, two handlers in one process) run under both; the others test
#: handlers, which both share, and run under the default runtime
#: (RAGSIFT_WORKER_RUNTIME, else the settings' default).
BOTH_RUNTIMES = pytest.mark.parametrize("fault_stack", ["plain", "faust"], indirect=True)
#: The same, with the Faust run of a slow fault (a minute of paced stream each) left to
#: ``make e2e-faults``: every CI run deselects ``full_faults`` to stay well under 15 min,
#: and still runs Faust's kill -9, poison and duplicate faults.
BOTH_RUNTIMES_FAUST_IN_FULL = pytest.mark.parametrize(
    "fault_stack",
    ["plain", pytest.param("faust", marks=pytest.mark.full_faults)],
    indirect=True,
)


@pytest.fixture
def fault_stack(
    kafka_bootstrap: str,
    redis_settings: object,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Stack:
    """Fresh topics, group and keys per test; a crashed member is noticed in 8 s.

    Parametrized indirectly (``BOTH_RUNTIMES``), the param is the workers' runtime.
    """
    env = {"RAGSIFT_KAFKA_SESSION_TIMEOUT_S": "8", "RAGSIFT_EMBEDDER_KIND": EMBEDDER.kind}
    runtime = getattr(request, "param", None)
    if runtime is not None:
        env["RAGSIFT_WORKER_RUNTIME"] = runtime
    return Stack(
        bootstrap=kafka_bootstrap,
        redis_url=redis_settings.url,  # type: ignore[attr-defined]  # RedisSettings
        prefix=f"fault-{uuid.uuid4().hex[:8]}",
        base_dir=tmp_path,
        extra_env=env,
    )


@pytest.fixture(scope="module")
def template_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample handbook indexed with the fault suite's pinned embedder."""
    path = tmp_path_factory.mktemp("template")
    asyncio.run(prepare_index(path, EMBEDDER))
    return path


@pytest.fixture
def spawn(template_index: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Starts worker processes (ready to consume); kills whatever is left at the end."""
    started: list[WorkerProcess] = []

    def start(stack: Stack, names: Sequence[str], label: str) -> WorkerProcess:
        worker = WorkerProcess(stack, names, template_index, label)
        started.append(worker)
        return worker.start().wait_ready()

    yield start
    for worker in started:
        worker.kill()


def make_queries(tag: str, n: int, variants: int = 250) -> list[QueryEvent]:
    """Handbook questions in ``variants`` variants each: mostly cache misses, some repeats."""
    texts = [q.text for q in DEMO_QUERIES]
    return [
        QueryEvent(
            query_id=f"{tag}-{i}",
            tenant_id=TENANT,
            query=f"{texts[i % len(texts)]} ({tag} {i % variants})",
        )
        for i in range(n)
    ]


class Watch:
    """Result ids per query id as they arrive, with one-shot actions at progress marks."""

    def __init__(self, reader: TopicReader, wanted: set[str]):
        self.reader = reader
        self.wanted = wanted
        self.result_ids: dict[str, set[str]] = defaultdict(set)
        self.results: dict[str, RetrievalResult] = {}
        self.deliveries = 0
        self._read = 0

    @property
    def done(self) -> int:
        return len(self.result_ids.keys() & self.wanted)

    async def poll(self) -> None:
        await self.reader.poll()
        for event in self.reader.events[self._read :]:
            if isinstance(event, RetrievalResult) and event.query_id in self.wanted:
                self.result_ids[event.query_id].add(event.result_id)
                self.results[event.query_id] = event
                self.deliveries += 1
        self._read = len(self.reader.events)

    async def run(
        self,
        marks: Sequence[tuple[float, Action]] = (),
        *,
        deliveries: int = 0,
        timeout_s: float = STREAM_TIMEOUT_S,
    ) -> None:
        """Read until every wanted id has a result (and ``deliveries`` arrived)."""
        pending = sorted(marks, key=lambda mark: mark[0])
        deadline = time.monotonic() + timeout_s
        while True:
            await self.poll()
            while pending and self.done >= pending[0][0] * len(self.wanted):
                await pending.pop(0)[1]()
            if self.done == len(self.wanted) and not pending and self.deliveries >= deliveries:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"after {timeout_s:.0f}s {self.done}/{len(self.wanted)} query ids have a"
                    f" result, {self.deliveries} deliveries, {len(pending)} faults not injected"
                )

    def assert_one_result_id_each(self) -> None:
        missing = self.wanted - self.result_ids.keys()
        assert not missing, f"{len(missing)} queries without a result, e.g. {sorted(missing)[:5]}"
        split = {q: ids for q, ids in self.result_ids.items() if len(ids) != 1}
        assert not split, f"queries with several result ids: {list(split.items())[:5]}"


async def stream(
    stack: Stack,
    sent: list[QueryEvent],
    marks: Sequence[tuple[float, Action]] = (),
) -> Watch:
    """Produce ``sent`` and read results until each query id has one, injecting faults."""
    async with TopicReader(stack, "retrievals") as reader:
        watch = Watch(reader, {q.query_id for q in sent})
        await produce(stack, "queries", sent)
        await watch.run(marks)
    return watch


def blocking(fn: Callable[[], object]) -> Action:
    async def run() -> None:
        await asyncio.to_thread(fn)

    return run


@BOTH_RUNTIMES
async def test_kill_nine_three_times_every_query_keeps_one_result_id(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn(fault_stack, ["retrieval"], "w1")
    sent = make_queries("kill", QUERIES)

    def crash_and_restart() -> None:
        worker.kill()
        worker.start().wait_ready()

    crash = blocking(crash_and_restart)
    watch = await stream(fault_stack, sent, [(0.15, crash), (0.45, crash), (0.75, crash)])
    watch.assert_one_result_id_each()
    assert worker.log.read_text().count("Worker]: Ready") == 4  # started once, restarted 3x
    print(f"kill -9 x3: {watch.deliveries - len(sent)} replayed results deduplicated by id")


@BOTH_RUNTIMES_FAUST_IN_FULL
async def test_broker_restart_mid_stream_loses_nothing(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn(fault_stack, ["retrieval"], "w1")
    sent = make_queries("broker", QUERIES)
    watch = await stream(fault_stack, sent, [(0.3, blocking(lambda: services("restart", "kafka")))])
    watch.assert_one_result_id_each()
    assert worker.proc is not None
    assert worker.proc.poll() is None, "the worker died"
    assert all(r.outcome == "ok" for r in watch.results.values())


async def test_redis_down_then_up_loses_nothing_and_caching_resumes(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn(fault_stack, ["retrieval"], "w1")
    errors_before = worker.metric("ragsift_cache_requests_total", {"result": "error"})
    sent = make_queries("redis", QUERIES)
    try:
        watch = await stream(
            fault_stack,
            sent,
            [
                (0.2, blocking(lambda: services("stop", "redis"))),
                (0.5, blocking(lambda: services("start", "redis"))),
            ],
        )
    finally:
        services("start", "redis")  # whatever happened, later tests need it
    watch.assert_one_result_id_each()
    assert all(r.outcome == "ok" for r in watch.results.values())
    assert worker.metric("ragsift_cache_requests_total", {"result": "error"}) > errors_before
    await until_cache_hit(fault_stack, "What is the API rate limit per key per minute?")


async def test_failing_index_gives_error_results_with_evidence_never_silence(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    # The server adapter pointed at a port nothing listens on: every search fails.
    failing = replace(
        fault_stack,
        extra_env={
            **fault_stack.extra_env,
            "RAGSIFT_QDRANT_MODE": "server",
            "RAGSIFT_QDRANT_URL": f"http://127.0.0.1:{free_port()}",
            "RAGSIFT_QDRANT_MAX_RETRIES": "1",
            "RAGSIFT_QDRANT_TIMEOUT_S": "1",
        },
    )
    worker = spawn(failing, ["retrieval"], "w1")
    sent = make_queries("index", QUERIES)
    async with TopicReader(failing, "audit") as audit:
        watch = await stream(failing, sent)
        watch.assert_one_result_id_each()
        assert {r.outcome for r in watch.results.values()} == {"error"}
        assert all(r.hits == [] and r.error for r in watch.results.values())
        await audit.until(
            lambda ev: watch.wanted <= failed_subjects(ev),
            timeout_s=STREAM_TIMEOUT_S,
        )
    assert worker.metric("ragsift_retrieval_errors_total") >= 1


def failed_subjects(events: Sequence[object]) -> set[str | None]:
    return {
        e.subject
        for e in events
        if isinstance(e, EvidenceEvent) and e.type.value == "RAG_RETRIEVAL_FAILED"
    }


def poison(i: int) -> bytes:
    """Six kinds of bad input, each unique so its dead letter can be matched."""
    qid = f"poison-{i}"
    kinds = [
        f'{{"query_id": "{qid}", "tenant_id": "demo", "query": '.encode(),  # cut short
        f"not json {qid}".encode(),
        json.dumps({"query_id": qid, "query": "no tenant"}).encode(),
        json.dumps({"query_id": qid, "tenant_id": "no such tenant!", "query": "x"}).encode(),
        # within the contract's 2,000 characters, past this deployment's limit (below)
        json.dumps({"query_id": qid, "tenant_id": TENANT, "query": "why " * 400}).encode(),
        json.dumps([qid]).encode(),
    ]
    return kinds[i % len(kinds)]


async def test_one_percent_poison_all_dead_lettered_with_reasons_rest_processed(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    # a deployment limit under the contract's: the 1,600-character poison fails `validate`
    fault_stack.extra_env["RAGSIFT_LIMITS_MAX_QUERY_CHARS"] = "1000"
    worker = spawn(fault_stack, ["retrieval"], "w1")
    good = make_queries("mixed", QUERIES - QUERIES // 100)
    bad = [poison(i) for i in range(QUERIES // 100)]
    mixed: list[QueryEvent | bytes] = list(good)
    for n, item in enumerate(bad):
        mixed.insert((n * 100 + 50) % len(mixed), item)
    async with (
        TopicReader(fault_stack, "deadletter") as dead,
        TopicReader(fault_stack, "retrievals") as reader,
    ):
        watch = Watch(reader, {q.query_id for q in good})
        await produce(fault_stack, "queries", mixed)
        await watch.run()
        await dead.until(
            lambda ev: len({e.dead_letter_id for e in ev}) >= len(bad),
            timeout_s=STREAM_TIMEOUT_S,
        )
    watch.assert_one_result_id_each()
    letters = {e.dead_letter_id: e for e in dead.events if isinstance(e, DeadLetter)}
    assert sorted(e.original for e in letters.values()) == sorted(bad)
    assert all(e.stage in ("decode", "validate") and e.error for e in letters.values())
    assert Counter(e.stage for e in letters.values()).keys() == {"decode", "validate"}
    results = [e for e in reader.events if isinstance(e, RetrievalResult)]
    assert not any(r.query_id.startswith("poison-") for r in results)
    assert worker.metric("ragsift_dead_letters_total") >= len(bad)


def poison_pill(i: int) -> bytes:
    """Issue 12's poison pills, each unique (by query id or padding) so its letter matches."""
    qid = f"pill-{i}"
    kinds = [
        # 10 KB of nested brackets: RecursionError in the parser crashed the agent for good.
        b"[" * (5000 + i) + b"]" * (5000 + i),
        # A 5,000-digit integer: ValueError past the codec's mapping, same crash.
        f'{{"query_id": "{qid}", "tenant_id": "{TENANT}", "query": "x", "k": '.encode()
        + b"9" * 5000
        + b"}",
        # ~950 KB: passes the broker, but its whole-original letter (1.27 MB) did not.
        json.dumps({"query_id": qid, "tenant_id": TENANT, "query": "y" * 950_000}).encode(),
        # Passed validation: re.match with "$" accepts a trailing newline.
        json.dumps(
            {"query_id": qid, "tenant_id": TENANT, "query": "x", "collection": "default\n"}
        ).encode(),
        # Passed validation: the finiteness check's sum overflowed and found no culprit.
        json.dumps(
            {"query_id": qid, "tenant_id": TENANT, "query": "x", "vector": [1e308] * 384}
        ).encode(),
        # Passed validation and failed the handler's whole batch (float32 inf in the engine).
        json.dumps(
            {
                "query_id": qid,
                "tenant_id": TENANT,
                "query": "x",
                "vector": [1e150] * 384,
                "embedder_id": build_embedder(EMBEDDER).embedder_id,
            }
        ).encode(),
    ]
    return kinds[i % len(kinds)]


@BOTH_RUNTIMES
async def test_poison_pills_are_dead_lettered_whole_or_bounded_and_the_worker_goes_on(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn(fault_stack, ["retrieval"], "w1")
    good = make_queries("pills", QUERIES - max(12, QUERIES // 100))
    pills = [poison_pill(i) for i in range(max(12, QUERIES // 100))]
    mixed: list[QueryEvent | bytes] = list(good)
    for n, item in enumerate(pills):
        mixed.insert((n * len(good)) // len(pills) + 1, item)
    after = make_queries("after-pills", 50)
    async with (
        TopicReader(fault_stack, "deadletter") as dead,
        TopicReader(fault_stack, "retrievals") as reader,
    ):
        watch = Watch(reader, {q.query_id for q in good})
        await produce(fault_stack, "queries", mixed)
        await watch.run()
        await dead.until(
            lambda ev: len({e.dead_letter_id for e in ev}) >= len(pills),
            timeout_s=STREAM_TIMEOUT_S,
        )
        # The same worker, not a restarted one, still consumes after every pill.
        after_watch = Watch(reader, {q.query_id for q in after})
        await produce(fault_stack, "queries", after)
        await after_watch.run()
    watch.assert_one_result_id_each()
    after_watch.assert_one_result_id_each()
    letters = {e.original_sha256: e for e in dead.events if isinstance(e, DeadLetter)}
    for pill in pills:
        letter = letters[hashlib.sha256(pill).hexdigest()]
        assert letter.stage == "decode", letter.error
        assert letter.error
        assert letter.original_length == len(pill)
        assert letter.original == pill[:DEFAULT_MAX_ORIGINAL_BYTES]
        assert letter.original_truncated == (len(pill) > DEFAULT_MAX_ORIGINAL_BYTES)
    reasons = " ".join(letter.error for letter in letters.values())
    for reason in ("nests too deeply", "not usable JSON", "collection must match", "within"):
        assert reason in reasons
    results = [e for e in reader.events if isinstance(e, RetrievalResult)]
    assert not any(r.query_id.startswith("pill-") for r in results)
    assert worker.metric("ragsift_dead_letters_total") == len(pills)
    assert worker.metric("ragsift_dead_letters_dropped_total") == 0
    assert worker.proc is not None
    assert worker.proc.poll() is None, "the worker died"
    assert worker.readyz() == 200
    log = worker.log.read_text(errors="replace")
    assert "Crashed" not in log  # Faust's word for an agent that left its loop
    assert "batch failed" not in log  # the plain runtime's for a batch that failed whole


@BOTH_RUNTIMES
async def test_duplicate_query_events_give_one_result_id_and_one_audit_row(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn(fault_stack, ["retrieval", "audit"], "w1")
    distinct = make_queries("dup", QUERIES // 2)
    again = distinct[:]
    random.Random(8).shuffle(again)
    async with (
        TopicReader(fault_stack, "audit") as audit,
        TopicReader(fault_stack, "retrievals") as reader,
    ):
        watch = Watch(reader, {q.query_id for q in distinct})
        await produce(fault_stack, "queries", distinct + again)
        await watch.run(deliveries=len(distinct) * 2)
        watch.assert_one_result_id_each()
        # Both copies of a query publish the same evidence, under the same ids.
        await audit.until(
            lambda ev: bool(ev) and min(Counter(e.id for e in ev).values()) >= 2,
            timeout_s=STREAM_TIMEOUT_S,
        )
    ids = {e.id for e in audit.events if isinstance(e, EvidenceEvent)}
    deadline = time.monotonic() + 60
    while not ids <= {r["id"] for r in audit_rows(worker.dir)}:
        assert time.monotonic() < deadline, "the audit sink did not write every evidence event"
        await asyncio.sleep(0.5)
    rows = audit_rows(worker.dir)
    assert len(rows) == len({r["id"] for r in rows}), "the sink wrote an id twice"
    per_kind = Counter((r["subject"], r["type"]) for r in rows)
    assert set(per_kind.values()) == {1}


@BOTH_RUNTIMES_FAUST_IN_FULL
async def test_scale_one_two_one_workers_under_load_loses_nothing(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    first = spawn(fault_stack, ["retrieval"], "w1")
    sent = make_queries("scale", QUERIES)
    rate = max(50.0, QUERIES / 40)  # paced so both scale steps land mid-stream
    second: list[WorkerProcess] = []

    async def scale_up() -> None:
        second.append(await asyncio.to_thread(spawn, fault_stack, ["retrieval"], "w2"))

    async def scale_down() -> None:
        deadline = time.monotonic() + 60
        while second[0].metric("ragsift_queries_total") == 0:
            assert time.monotonic() < deadline, "the second worker never got partitions"
            await asyncio.sleep(0.5)
        await asyncio.to_thread(second[0].stop)

    async with TopicReader(fault_stack, "retrievals") as reader:
        watch = Watch(reader, {q.query_id for q in sent})
        async with Pacer(fault_stack, "queries", sent, rate) as pacer:
            await watch.run([(0.2, scale_up), (0.6, scale_down)])
        assert pacer.sent == len(sent)
    watch.assert_one_result_id_each()
    assert second[0].proc is not None
    assert second[0].proc.returncode == 0, "w2 did not stop cleanly"
    assert first.proc is not None
    assert first.proc.poll() is None


async def test_soak_at_eighty_percent_of_max_rate_memory_and_lag_stay_flat(
    fault_stack: Stack, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn(fault_stack, ["retrieval"], "w1")
    # Every query distinct in both phases: the same work per query, no cache hits.
    burst = make_queries("burst", min(QUERIES, 3000), variants=10**9)
    started = time.monotonic()
    await stream(fault_stack, burst)
    max_rate = len(burst) / (time.monotonic() - started)
    rate = 0.8 * max_rate
    soak = make_queries("soak", int(rate * SOAK_S), variants=10**9)
    samples: list[tuple[float, int, int]] = []  # (seconds, lag, rss bytes)
    async with TopicReader(fault_stack, "retrievals") as reader:
        watch = Watch(reader, {q.query_id for q in soak})
        async with Pacer(fault_stack, "queries", soak, rate) as pacer:
            t0 = time.monotonic()
            while not pacer.finished:  # bounded: the pacer ends after SOAK_S seconds
                await watch.poll()
                now = time.monotonic() - t0
                if not samples or now - samples[-1][0] >= 1.0:
                    samples.append((now, pacer.sent - watch.done, worker.rss_bytes()))
                assert now < SOAK_S * 3, "the pacer did not finish"
        await watch.run(timeout_s=DRAIN_TIMEOUT_S)  # the backlog drains to 0
    watch.assert_one_result_id_each()
    third = max(1, len(samples) // 3)
    early_lag = statistics.median(s[1] for s in samples[:third])
    late_lag = statistics.median(s[1] for s in samples[-third:])
    # Memory after the first third: bounded caches (the embedder's feature memo,
    # ~20 MB) fill while warming up; a leak keeps growing after that.
    rss_start, rss_end = samples[third][2], samples[-1][2]
    print(
        f"soak: max {max_rate:.0f} q/s, paced {rate:.0f} q/s for {SOAK_S:.0f}s;"
        f" lag median early {early_lag:.0f} late {late_lag:.0f};"
        f" rss {samples[0][2] / 2**20:.1f}, warm {rss_start / 2**20:.1f}"
        f" -> end {rss_end / 2**20:.1f} MiB"
    )
    assert rss_end < rss_start * 1.10, (rss_start, rss_end)
    if JUDGE_LAG_AGAINST_RATE:
        # Not growing: the late backlog stays within a second's worth of the early one.
        lags = " ".join(f"{t:.0f}s:{lag}" for t, lag, _ in samples)
        assert late_lag <= early_lag + rate, lags
