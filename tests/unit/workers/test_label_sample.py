"""The label sample (``RAGSIFT_FEEDBACK_SAMPLE_SHARE``): results routed to the
``label_sample`` review queue at random by query, the same ones on every replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragsift.embedded import EmbeddedRuntime
from ragsift.errors import ConfigurationError
from ragsift.ingest.sample import sample_documents
from ragsift.observability.metrics import Metrics
from ragsift.schemas import Decision, QueryEvent, RetrievalResult, ReviewItem
from ragsift.settings import FeedbackSettings, GuardrailSettings, Settings
from ragsift.streams.assembly import assemble
from ragsift.workers.decision import LABEL_SAMPLE_FLAG, DecisionHandler, sampled_for_labels

ANSWERED = "How many days do I have to return the Orbit thermostat for a full refund?"
OFF_TOPIC = "Who won the football world cup in 2014?"


@pytest.fixture
async def results(tmp_path: Path) -> list[RetrievalResult]:
    runtime = EmbeddedRuntime(Settings(data_dir=tmp_path))
    await runtime.ingest("acme", sample_documents())
    out = await runtime.ask(
        [
            QueryEvent(query_id="answered", tenant_id="acme", query=ANSWERED),
            QueryEvent(query_id="refused", tenant_id="acme", query=OFF_TOPIC),
            QueryEvent(query_id="greeting", tenant_id="acme", query="Hello!"),
        ]
    )
    await runtime.close()
    return [r for r in out if isinstance(r, RetrievalResult)]


def test_the_share_chosen_is_the_share_asked() -> None:
    ids = [f"q-{i}" for i in range(20_000)]
    assert not any(sampled_for_labels("acme", q, 0.0) for q in ids)
    assert all(sampled_for_labels("acme", q, 1.0) for q in ids)
    for share in (0.01, 0.1, 0.5):
        chosen = sum(sampled_for_labels("acme", q, share) for q in ids)
        # deterministic (a hash); the bounds are 5 binomial deviations either side
        spread = 5 * (len(ids) * share * (1 - share)) ** 0.5
        assert abs(chosen - len(ids) * share) < spread
    # nested: a larger share keeps every result a smaller one chose
    small = {q for q in ids if sampled_for_labels("acme", q, 0.05)}
    assert small <= {q for q in ids if sampled_for_labels("acme", q, 0.2)}


def test_the_choice_is_by_tenant_and_query_alone() -> None:
    ids = [f"q-{i}" for i in range(2_000)]
    acme = [sampled_for_labels("acme", q, 0.5) for q in ids]
    assert acme == [sampled_for_labels("acme", q, 0.5) for q in ids]  # replayed: the same
    other = [sampled_for_labels("globex", q, 0.5) for q in ids]
    assert acme != other  # tenant-qualified, as every derived id is
    # no two (tenant, id) splits of one string share a key: "ab" + "c" is not "a" + "bc"
    split = [sampled_for_labels("ab", f"c{i}", 0.5) for i in range(64)]
    assert split != [sampled_for_labels("a", f"bc{i}", 0.5) for i in range(64)]


def _copies(results: list[RetrievalResult], n: int) -> list[RetrievalResult]:
    return [
        r.model_copy(update={"query_id": f"{r.query_id}-{i}"}) for i in range(n) for r in results
    ]


async def test_the_decision_worker_routes_the_sample_whatever_the_result(
    results: list[RetrievalResult],
) -> None:
    metrics = Metrics()
    handler = DecisionHandler(GuardrailSettings(), metrics, label_share=0.3)
    assert sorted(r.outcome for r in results) == ["greeting", "ok", "ok"]
    batch = _copies(results, 150)
    outcomes = await handler.handle_batch(batch)
    chosen: dict[str, list[bool]] = {"answered": [], "refused": [], "greeting": []}
    label_items = []
    for result, outcome in zip(batch, outcomes, strict=True):
        events = [e.event for e in outcome]  # type: ignore[union-attr]
        decision = next(e for e in events if isinstance(e, Decision))
        items = [e for e in events if isinstance(e, ReviewItem) and e.queue == "label_sample"]
        scored = result.outcome == "ok"  # a greeting has no retrieval to label
        expected = scored and sampled_for_labels(result.tenant_id, result.query_id, 0.3)
        assert (LABEL_SAMPLE_FLAG in decision.flags) is expected
        assert len(items) == int(expected)
        chosen[result.query_id.split("-")[0]].append(expected)
        for item in items:
            assert item.query_id == result.query_id
            assert item.confidence == result.confidence
            assert "chosen at random (30.0% of results)" in item.reason
            # its own id: an expert-review item of the same result is another event
            others = [e for e in events if isinstance(e, ReviewItem) and e is not item]
            assert all(o.review_id != item.review_id for o in others)
        label_items.extend(items)
    # answered and refused results are sampled alike (one hash, whatever they say)
    assert 20 < sum(chosen["answered"]) < 70
    assert 20 < sum(chosen["refused"]) < 70
    assert not any(chosen["greeting"])
    counted = metrics.registry.get_sample_value(
        "ragsift_review_items_total", {"collection": "default", "queue": "label_sample"}
    )
    assert counted == len(label_items)
    again = await handler.handle_batch(batch)
    replayed = [
        e.event.review_id  # type: ignore[union-attr]
        for o in again
        for e in o  # type: ignore[union-attr]
        if isinstance(e.event, ReviewItem) and e.event.queue == "label_sample"
    ]
    assert replayed == [i.review_id for i in label_items]  # a replay emits the same events


async def test_no_share_routes_nothing(results: list[RetrievalResult]) -> None:
    handler = DecisionHandler(GuardrailSettings(), Metrics())
    outcomes = await handler.handle_batch(_copies(results, 50))
    events = [e.event for o in outcomes for e in o]  # type: ignore[union-attr]
    assert not [e for e in events if isinstance(e, ReviewItem) and e.queue == "label_sample"]
    assert not [e for e in events if isinstance(e, Decision) and LABEL_SAMPLE_FLAG in e.flags]
    with pytest.raises(ValueError, match="label_share"):
        DecisionHandler(GuardrailSettings(), Metrics(), label_share=1.5)


async def test_the_embedded_runtime_wires_the_share(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, feedback=FeedbackSettings(sample_share=1.0))
    runtime = EmbeddedRuntime(settings)
    seen: list[tuple[str, Any]] = []
    runtime.bus.subscribe(lambda topic, event: seen.append((topic, event)))
    await runtime.ingest("acme", sample_documents())
    await runtime.ask([QueryEvent(query_id="one", tenant_id="acme", query=ANSWERED)])
    await runtime.close()
    items = [e for _, e in seen if isinstance(e, ReviewItem) and e.queue == "label_sample"]
    assert [i.query_id for i in items] == ["one"]


@pytest.mark.parametrize(
    "value", ["1.5", "-0.01", "nan", "inf", "1e309", "9" * 5_000, "０.５", "half", ""]
)
def test_a_bad_share_is_one_configuration_error(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("RAGSIFT_FEEDBACK_SAMPLE_SHARE", value)
    with pytest.raises(ConfigurationError, match="sample_share"):
        Settings.from_env()


def test_the_share_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_FEEDBACK_SAMPLE_SHARE", "0.02")
    assert Settings.from_env().feedback.sample_share == 0.02


async def test_a_streaming_decision_worker_gets_the_share(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, feedback=FeedbackSettings(sample_share=0.25))
    parts = assemble(["decision"], settings)
    try:
        [handler] = parts.handlers
        assert isinstance(handler, DecisionHandler)
        assert handler.label_share == 0.25
    finally:
        await parts.close()
