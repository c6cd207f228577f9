"""Metric labels that come from events stay bounded, whatever the events say."""

from __future__ import annotations

from prometheus_client import generate_latest

from ragsift.observability.metrics import BoundedLabeler, Metrics


def series(metrics: Metrics, name: str) -> list[str]:
    text = generate_latest(metrics.registry).decode()
    return [line for line in text.splitlines() if line.startswith(name + "{")]


def test_five_thousand_collections_make_a_bounded_number_of_series() -> None:
    # Before: 5,000 greetings to distinct collections made 20,000 series.
    metrics = Metrics(max_collections=10)
    for i in range(5000):
        metrics.decisions.labels(f"col-{i}", "false").inc()
        metrics.reports.labels(f"col-{i}", "bypass").inc()
        metrics.reviews.labels(f"col-{i}", "low_confidence").inc()
    for name in ("ragsift_decisions_total", "ragsift_reports_total", "ragsift_review_items_total"):
        lines = series(metrics, name)
        assert len(lines) == 11, name  # ten collections and "(other)"
        assert any('collection="(other)"' in line for line in lines)
    total = metrics.registry.get_sample_value(
        "ragsift_decisions_total", {"collection": "(other)", "use_context": "false"}
    )
    assert total == 4990  # nothing is lost, only pooled


def test_tenants_are_bounded_the_same_way() -> None:
    metrics = Metrics(max_tenants=2)
    for i in range(100):
        metrics.observe_result(f"t{i}", "high_confidence", 0.9, "ok", {})
    assert len(series(metrics, "ragsift_queries_total")) == 3


def test_a_labeler_keeps_the_first_values_it_sees() -> None:
    labeler = BoundedLabeler(2)
    assert [labeler(v) for v in ("a", "b", "c", "a", "d")] == ["a", "b", "(other)", "a", "(other)"]


def test_a_tenant_called_other_keeps_its_own_series() -> None:
    # The overflow bucket was named "other": a real tenant of that name shared it.
    labeler = BoundedLabeler(1)
    assert [labeler(v) for v in ("other", "newcorp", "other")] == ["other", "(other)", "other"]


def test_a_hundred_thousand_tenant_ids_keep_the_series_bounded_and_are_counted() -> None:
    """Tenant ids from events, 100,000 distinct ones: the series stay at the bound, and
    every observation folded into ``(other)`` is counted, so an operator can tell the
    bound is reached (and by how much) without a series per value."""
    metrics = Metrics(max_tenants=50)
    for i in range(100_000):
        metrics.observe_result(f"t{i}", "no_relevant_context", 0.0, "ok", {"floor": 1})
    for name in ("ragsift_queries_total", "ragsift_no_context_queries_total"):
        assert len(series(metrics, name)) == 51, name  # fifty tenants and "(other)"
    assert len(series(metrics, "ragsift_confidence_status")) == 51
    folded = metrics.registry.get_sample_value(
        "ragsift_metric_label_values_folded_total", {"label": "tenant"}
    )
    assert folded == 100_000 - 50
    for i in range(10):
        metrics.decisions.labels(f"col-{i}", "false").inc()
    assert (
        metrics.registry.get_sample_value(
            "ragsift_metric_label_values_folded_total", {"label": "collection"}
        )
        == 0
    )
    small = Metrics(max_collections=3)
    for i in range(10):
        small.reports.labels(f"col-{i}", "bypass").inc()
    assert (
        small.registry.get_sample_value(
            "ragsift_metric_label_values_folded_total", {"label": "collection"}
        )
        == 7
    )
