"""The label sample on the real broker: a retrieval and a decision worker with
``RAGSIFT_FEEDBACK_SAMPLE_SHARE``; the review topic carries exactly the results the
hash chose, answered and refused alike, each once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragsift.schemas import Decision, QueryEvent, ReviewItem
from ragsift.workers.decision import LABEL_SAMPLE_FLAG, sampled_for_labels
from tests.e2e.harness import TENANT, Stack, TopicReader, WorkerProcess, hashing_worker, produce

SHARE = 0.3
QUESTIONS = (
    "How many days do I have to return the Orbit thermostat for a full refund?",
    "What are the API rate limits per key?",
    "Who won the football world cup in 2014?",
    "What is the boiling point of ethanol?",
)


@pytest.fixture(scope="module")
def worker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    stack.extra_env.update(
        {"RAGSIFT_EMBEDDER_KIND": "hashing", "RAGSIFT_FEEDBACK_SAMPLE_SHARE": str(SHARE)}
    )
    proc = hashing_worker(stack, ["retrieval", "decision"], tmp_path_factory, "label-sample")
    yield proc
    proc.stop()


async def test_the_review_topic_carries_the_sample(stack: Stack, worker: WorkerProcess) -> None:
    sent = [
        QueryEvent(query_id=f"ls-{i}", tenant_id=TENANT, query=QUESTIONS[i % len(QUESTIONS)])
        for i in range(80)
    ]
    ids = {q.query_id for q in sent}
    expected = {q for q in ids if sampled_for_labels(TENANT, q, SHARE)}
    assert 8 < len(expected) < 40  # the hash's share of these 80 ids
    async with (
        TopicReader(stack, "decisions") as decisions,
        TopicReader(stack, "review") as review,
    ):
        await produce(stack, "queries", sent)
        await decisions.until(lambda ev: ids <= {e.query_id for e in ev if isinstance(e, Decision)})
        await review.until(
            lambda ev: (
                expected
                <= {
                    e.query_id
                    for e in ev
                    if isinstance(e, ReviewItem) and e.queue == "label_sample"
                }
            )
        )
    flagged = {
        e.query_id
        for e in decisions.events
        if isinstance(e, Decision) and LABEL_SAMPLE_FLAG in e.flags
    }
    assert flagged == expected
    items = [e for e in review.events if isinstance(e, ReviewItem) and e.queue == "label_sample"]
    assert sorted(i.query_id for i in items) == sorted(expected)  # each once
    decided = {e.query_id: e for e in decisions.events if isinstance(e, Decision)}
    kinds = {decided[q].use_context for q in expected}
    assert kinds == {True, False}  # answered and refused results both in the sample
    counted = worker.metric("ragsift_review_items_total", {"queue": "label_sample"})
    assert counted == len(expected)
