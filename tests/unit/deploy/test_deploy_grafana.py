"""The Grafana dashboard and its provisioning (A10)."""

from __future__ import annotations

import json
from typing import Any

from deploy_support import REPO, load_yaml

GRAFANA = REPO / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "ragsift.json"

# Panel -> a metric its expressions must use (the list of panels).
REQUIRED_PANELS = {
    "confidence by level": "ragsift_confidence_count",
    "confidence histogram": "ragsift_confidence_bucket",
    "filtered": "ragsift_filtered_results_total",
    "no-context": "ragsift_no_context_queries_total",
    "throughput": "ragsift_queries_total",
    "p50 / p99": "ragsift_stage_duration_seconds_bucket",
    "lag": "kafka_consumergroup_lag",
    "dead letters": "ragsift_dead_letters_total",
    "lost": "ragsift_dead_letters_dropped_total",
    "run event by event": "ragsift_poison_isolations_total",
    "withdrawn": "ragsift_documents_withdrawn_total",
    "llm fallbacks": "ragsift_report_llm_fallbacks_total",
    "reranker failures": "ragsift_reranker_failures_total",
    "cache hit ratio": "ragsift_cache_requests_total",
    # Issue 14: whether each scope's confidence still means what it says.
    "drift psi": "ragsift_calibration_drift_psi",
    "unanswerable share": "ragsift_unanswerable_share",
    "the raise reads": "ragsift_unanswerable_share_raise",
    "near misses": "ragsift_near_miss_share",
    "answer threshold": "ragsift_answer_threshold",
    "re-probes": "ragsift_calibration_reprobes_total",
    "fallbacks": "ragsift_calibration_fallbacks_total",
    "answer is missing": "ragsift_calibration_missing_answer_share",
    "feedback labels": "ragsift_feedback_total",
    "unreadable": "ragsift_feedback_rows_unreadable_total",
    # The HTTP API: its answers, what its sites refuse before a route runs, and the
    # records its Kafka reader skips (each a waiting caller's 504).
    "api answers by status": "ragsift_api_requests_total",
    "http refusals": "ragsift_http_refused_total",
    "records the api skipped": "ragsift_api_dropped_events_total",
    # State dropped to stay within a bound, label values folded into (other), console
    # messages a slow page missed, and refusals no retry fixes: none is an alert, but
    # each says a bound or a neighbour needs a look.
    "scope evictions": "ragsift_scope_state_evictions_total",
    "api store evictions": "ragsift_api_store_evictions_total",
    "label values folded": "ragsift_metric_label_values_folded_total",
    "console messages": "ragsift_console_dropped_messages_total",
    "redis refusals": "ragsift_redis_refused_total",
    "audit write failures": "ragsift_audit_write_failures_total",
    # docs/confidence.md section 13: the share of a tenant's answers told its question
    # was not English
    "non-english questions by tenant": "ragsift_query_language_advice_total",
}


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _panels() -> list[dict[str, Any]]:
    return [p for p in _dashboard()["panels"] if p["type"] != "row"]


def test_required_panels_are_present() -> None:
    panels = _panels()
    for words, metric in REQUIRED_PANELS.items():
        matching = [
            p for p in panels if words in (p["title"] + " " + p.get("description", "")).lower()
        ]
        assert matching, f"no panel about {words!r}"
        exprs = " ".join(t["expr"] for p in matching for t in p["targets"])
        assert metric in exprs, f"panel about {words!r} should use {metric}"


def test_latency_panel_shows_p50_and_p99() -> None:
    exprs = " ".join(t["expr"] for p in _panels() for t in p["targets"])
    assert "histogram_quantile(0.5," in exprs
    assert "histogram_quantile(0.99," in exprs


def test_panels_have_unique_ids_and_use_the_provisioned_datasource() -> None:
    datasources = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")
    uids = {ds["uid"] for ds in datasources["datasources"]}
    ids = [p["id"] for p in _dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    for panel in _panels():
        assert panel["datasource"]["uid"] in uids, panel["title"]
        assert all(t["datasource"]["uid"] in uids for t in panel["targets"])


def test_dashboard_provider_points_at_the_compose_mount() -> None:
    provider = load_yaml(GRAFANA / "provisioning" / "dashboards" / "ragsift.yml")["providers"][0]
    compose = load_yaml(REPO / "docker-compose.yml")
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./deploy/grafana/dashboards:{provider['options']['path']}:ro" in mounts
    assert _dashboard()["uid"] == "ragsift-overview"
