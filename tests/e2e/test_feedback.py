"""Feedback re-fit on the real broker: 200 labels move a tenant's calibration, the next
results carry its new version; a replay changes nothing."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator

import pytest

from ragsift.confidence.artifact import load_calibration
from ragsift.confidence.registry import CalibrationRegistry, CalibrationScope
from ragsift.ingest.sample import DEMO_QUERIES
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.redis_calibration import RedisCalibrationStore
from ragsift.schemas import DeadLetter, FeedbackEvent, QueryEvent, RetrievalResult
from ragsift.settings import RedisSettings
from tests.e2e.harness import (
    TENANT,
    Stack,
    TopicReader,
    WorkerProcess,
    hashing_worker,
    produce,
    wait_for,
)

N_LABELS = 200
#: Queries whose results make a backlog for a calibration worker that starts later, and
#: labels on the last of them.
BACKLOG, LATE_LABELS = 2_000, 50
# Greetings and scope questions among the demo queries are not scored (nothing to
# label): ask more than N_LABELS to have N_LABELS scored results.
N_QUERIES = 300
SCOPE = CalibrationScope("default", TENANT)
# How often the worker's calibration registry asks Redis for changes (default 5 s),
# and how long the test waits past it before asking: the next resolve then re-reads.
REFRESH_S = 1.0
REFRESH_MARGIN_S = 1.0


@pytest.fixture(scope="module")
def feedback_stack(stack: Stack) -> Stack:
    """The module's stack, with the hashing embedder and the Redis calibration store."""
    stack.extra_env.update(
        {
            "RAGSIFT_EMBEDDER_KIND": "hashing",
            "RAGSIFT_CALIBRATION_STORE": "redis",
            "RAGSIFT_FEEDBACK_MIN_LABELS": str(N_LABELS),
            "RAGSIFT_FEEDBACK_REFIT_INTERVAL_S": "0",
            "RAGSIFT_CALIBRATION_REFRESH_S": str(REFRESH_S),
        }
    )
    return stack


@pytest.fixture(scope="module")
def worker(
    feedback_stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    proc = hashing_worker(feedback_stack, ["retrieval", "calibration"], tmp_path_factory, "cal")
    yield proc
    proc.stop()


async def test_200_labels_move_the_tenants_threshold_and_a_replay_changes_nothing(
    feedback_stack: Stack, worker: WorkerProcess
) -> None:
    stack = feedback_stack
    texts = [q.text for q in DEMO_QUERIES]
    sent = [
        QueryEvent(query_id=f"fb-{i}", tenant_id=TENANT, query=texts[i % len(texts)])
        for i in range(N_QUERIES)
    ]
    async with TopicReader(stack, "retrievals") as reader:
        await produce(stack, "queries", sent)
        await reader.until(
            lambda ev: len({e.query_id for e in ev if isinstance(e, RetrievalResult)}) >= N_QUERIES
        )
    every = {e.query_id: e for e in reader.events if isinstance(e, RetrievalResult)}
    scored = [q.query_id for q in sent if every[q.query_id].outcome == "ok"][:N_LABELS]
    assert len(scored) == N_LABELS
    results = {qid: every[qid] for qid in scored}
    # The calibration agent has joined every result before any label is sent.
    wait_for(
        lambda: (
            worker.metric("ragsift_events_total", {"worker": "calibration-results", "result": "ok"})
            >= N_QUERIES
        ),
        "the calibration worker to remember the results",
    )
    # This tenant's users say only the best-scored third of the answers were right:
    # the shipped calibration is too confident for them.
    tops = sorted(r.breakdown.signals.get("top_score", 0.0) for r in results.values())
    cut = tops[int(len(tops) * 2 / 3)]
    labels = [
        FeedbackEvent(
            event_id=f"label-{qid}",
            query_id=qid,
            tenant_id=TENANT,
            relevant=result.breakdown.signals.get("top_score", 0.0) > cut,
        )
        for qid, result in results.items()
    ]
    store = RedisCalibrationStore(RedisSettings(url=stack.redis_url, key_prefix=stack.prefix))
    assert store.get(SCOPE) is None
    await produce(stack, "feedback", labels, key="tenant_id")
    wait_for(lambda: store.get(SCOPE) is not None, "the re-fit calibration in Redis")
    tuned = store.get(SCOPE)
    assert tuned is not None
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    shipped = load_calibration(path)
    assert tuned.data.source == f"feedback:{SCOPE}"
    assert tuned.data.n_examples == N_LABELS
    assert (tuned.conformal.threshold, tuned.conformal.feasible) != (
        shipped.conformal.threshold,
        shipped.conformal.feasible,
    )
    # What every worker's registry resolves for this tenant now (the query path scores
    # with `registry.resolve`): the new version; another tenant keeps the shipped one.
    registry = CalibrationRegistry(shipped, store, refresh_s=0)
    assert registry.resolve(TENANT, "default").version == tuned.version
    assert registry.resolve("someone-else", "default").version == shipped.version
    # ... and the retrieval worker answers with it: the results before the re-fit carry
    # the shipped version, the next result for the same question the new one (the cache
    # key holds the version, so the old answer is not served again).
    assert {r.breakdown.calibration_version for r in results.values()} == {shipped.version}
    asked = {q.query_id: q.query for q in sent}
    await asyncio.sleep(REFRESH_S + REFRESH_MARGIN_S)
    after = QueryEvent(query_id="fb-after-refit", tenant_id=TENANT, query=asked[scored[0]])
    async with TopicReader(stack, "retrievals") as reader:
        await produce(stack, "queries", [after])
        await reader.until(
            lambda ev: any(
                isinstance(e, RetrievalResult) and e.query_id == after.query_id for e in ev
            )
        )
    answer = next(
        e for e in reader.events if isinstance(e, RetrievalResult) and e.query_id == after.query_id
    )
    assert answer.outcome == "ok"
    assert not answer.cache.hit
    assert answer.breakdown.calibration_version == tuned.version
    assert answer.breakdown.calibration_version != results[scored[0]].breakdown.calibration_version
    generation = store.generation()
    assert worker.metric("ragsift_calibration_refits_total") == 1

    # A replay of the same feedback (and one label for a query nobody asked).
    stray = FeedbackEvent(event_id="stray", query_id="never-asked", tenant_id=TENANT, relevant=True)
    async with TopicReader(stack, "deadletter") as dead:
        await produce(stack, "feedback", [*labels, stray], key="tenant_id")
        await dead.until(
            lambda ev: any(isinstance(e, DeadLetter) and e.query_id == "never-asked" for e in ev)
        )
    wait_for(
        lambda: worker.metric("ragsift_feedback_total", {"result": "unchanged"}) >= N_LABELS,
        "the replayed labels",
    )
    letter = next(
        e for e in dead.events if isinstance(e, DeadLetter) and e.query_id == "never-asked"
    )
    assert letter.stage == "feedback"
    assert store.generation() == generation
    again = store.get(SCOPE)
    assert again is not None
    assert again.version == tuned.version
    assert worker.metric("ragsift_calibration_refits_total") == 1
    assert worker.metric("ragsift_feedback_total", {"result": "labelled"}) == N_LABELS
    assert worker.metric("ragsift_feedback_total", {"result": "unknown_query"}) == 1

    # Thumbs-downs users chose to give, on results nobody labelled yet, sent as
    # reported: kept and counted, never fit on (ADR 023), so nothing is re-fit.
    rest = [q.query_id for q in sent if every[q.query_id].outcome == "ok"][N_LABELS:]
    assert rest
    reports = [
        FeedbackEvent(
            event_id=f"report-{qid}", query_id=qid, tenant_id=TENANT, relevant=False, sampled=False
        )
        for qid in rest
    ]
    await produce(stack, "feedback", reports, key="tenant_id")
    wait_for(
        lambda: worker.metric("ragsift_feedback_total", {"result": "reported"}) >= len(rest),
        "the reported labels",
    )
    assert store.generation() == generation
    assert worker.metric("ragsift_calibration_refits_total") == 1
    store.close()


def test_a_calibration_worker_started_on_the_backlog_joins_every_label(
    feedback_stack: Stack,
    worker: WorkerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The topics the test above filled, read from the start by a new calibration worker
    (its own group and store): before, it read labels before their results and refused
    them as unknown queries (101 of 101 on a real broker)."""
    stack = feedback_stack
    # A backlog of results, and labels on its last ones: read in no order, they came
    # long before their results.
    texts = [q.text for q in DEMO_QUERIES]
    backlog = [
        QueryEvent(query_id=f"bl-{i}", tenant_id=TENANT, query=texts[i % len(texts)])
        for i in range(BACKLOG)
    ]
    with_results = len(backlog) + worker.metric(
        "ragsift_events_total", {"worker": "calibration-results", "result": "ok"}
    )
    asyncio.run(produce(stack, "queries", backlog))
    wait_for(
        lambda: (
            worker.metric("ragsift_events_total", {"worker": "calibration-results", "result": "ok"})
            >= with_results
        ),
        "the backlog's results",
    )
    before = worker.metric("ragsift_feedback_total")
    last = [
        FeedbackEvent(event_id=f"late-{q.query_id}", query_id=q.query_id, tenant_id=TENANT,
                      relevant=i % 2 == 0, sampled=False)
        for i, q in enumerate(backlog[-LATE_LABELS:])
    ]  # fmt: skip
    asyncio.run(produce(stack, "feedback", last, key="tenant_id"))
    wait_for(
        lambda: worker.metric("ragsift_feedback_total") >= before + len(last),
        "the first worker to read the late labels",
    )
    seen = {
        result: worker.metric("ragsift_feedback_total", {"result": result})
        for result in ("labelled", "unchanged", "reported", "unknown_query")
    }
    # Read live, the first worker refused only what no worker can join: the stray
    # label, and the late labels on queries answered without scoring (greetings).
    assert seen["unknown_query"] < 1 + LATE_LABELS / 2
    # Each runtime holds the labels back (Faust did not until 2026-12-02: it refused
    # 554 of a backlog's 600 labels).
    for runtime in ("plain", "faust"):
        late = dataclasses.replace(
            stack,
            extra_env={
                **stack.extra_env,
                "RAGSIFT_KAFKA_APP_ID": f"{stack.prefix}-late-{runtime}",
                "RAGSIFT_REDIS_KEY_PREFIX": f"{stack.prefix}-late-{runtime}",
                "RAGSIFT_WORKER_RUNTIME": runtime,
            },
        )
        fresh = hashing_worker(late, ["calibration"], tmp_path_factory, f"cal-late-{runtime}")
        try:
            wait_for(
                lambda fresh=fresh: fresh.metric("ragsift_feedback_total") >= sum(seen.values()),
                f"the new {runtime} worker to read every label",
            )
            for result, count in seen.items():
                got = fresh.metric("ragsift_feedback_total", {"result": result})
                assert got == count, (runtime, result)
        finally:
            fresh.stop()
