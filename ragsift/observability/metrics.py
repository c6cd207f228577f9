"""One typed container for every metric ragsift exports (prometheus-client).

Names follow Prometheus conventions: ``ragsift_`` prefix, base units, counters
ending in ``_total``. The tenant label is bounded: the first
``max_tenants`` tenants seen get their own series, later ones share ``other``.
Query text is never a label.
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["CONFIDENCE_BUCKETS", "Metrics", "TenantLabeler"]

CONFIDENCE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0)
# Per-stage latencies run from tens of µs (scoring) to seconds (a cold LLM call).
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
STATUS_CODES = {
    "no_relevant_context": 0,
    "low_confidence": 1,
    "medium_confidence": 2,
    "high_confidence": 3,
}


class TenantLabeler:
    """Maps tenant ids to a bounded label set (A9: per tenant where cardinality allows)."""

    OTHER = "other"

    def __init__(self, max_tenants: int = 50):
        if max_tenants < 0:
            raise ValueError(f"max_tenants must be >= 0, got {max_tenants}")
        self.max_tenants = max_tenants
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, tenant_id: str) -> str:
        if tenant_id in self._seen:
            return tenant_id
        with self._lock:
            if len(self._seen) < self.max_tenants:
                self._seen.add(tenant_id)
                return tenant_id
        return self.OTHER


class Metrics:
    """Every ragsift metric, registered on the registry passed in."""

    def __init__(self, registry: CollectorRegistry | None = None, max_tenants: int = 50):
        self.registry = registry if registry is not None else CollectorRegistry()
        self.tenant = TenantLabeler(max_tenants)
        r = self.registry
        self.confidence = Histogram(
            "ragsift_confidence",
            "Retrieval confidence by status (A9).",
            ["tenant", "status"],
            buckets=CONFIDENCE_BUCKETS,
            registry=r,
        )
        self.status = Gauge(
            "ragsift_confidence_status",
            "Status of the tenant's latest result: 3 high, 2 medium, 1 low, 0 no context.",
            ["tenant"],
            registry=r,
        )
        self.queries = Counter(
            "ragsift_queries_total",
            "Queries processed, by outcome.",
            ["tenant", "outcome"],
            registry=r,
        )
        self.filtered = Counter(
            "ragsift_filtered_results_total",
            "Hits dropped by the confidence filters.",
            ["tenant", "rule"],
            registry=r,
        )
        self.no_context = Counter(
            "ragsift_no_context_queries_total",
            "Queries with no relevant context.",
            ["tenant"],
            registry=r,
        )
        self.stage_seconds = Histogram(
            "ragsift_stage_duration_seconds",
            "Time spent per pipeline stage.",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.cache = Counter(
            "ragsift_cache_requests_total",
            "Cache look-ups by result (hit, miss, error).",
            ["backend", "result"],
            registry=r,
        )
        self.cache_writes = Counter(
            "ragsift_cache_writes_total",
            "Results written to the cache, by status.",
            ["backend", "status"],
            registry=r,
        )
        self.evidence = Counter(
            "ragsift_evidence_events_total",
            "Evidence events emitted, by type.",
            ["type"],
            registry=r,
        )
        self.dead_letters = Counter(
            "ragsift_dead_letters_total",
            "Events dead-lettered, by worker and stage.",
            ["worker", "stage"],
            registry=r,
        )
        self.retrieval_errors = Counter(
            "ragsift_retrieval_errors_total",
            "Retrievals that failed after retries.",
            ["stage"],
            registry=r,
        )
        self.batch_size = Histogram(
            "ragsift_batch_size",
            "Events per processed batch.",
            ["worker"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.events = Counter(
            "ragsift_events_total",
            "Events consumed by a worker, by result.",
            ["worker", "result"],
            registry=r,
        )
        # D9 analytics: per collection (collections are few and operator-defined).
        self.decisions = Counter(
            "ragsift_decisions_total",
            "Decisions by collection and whether context was used.",
            ["collection", "use_context"],
            registry=r,
        )
        self.reviews = Counter(
            "ragsift_review_items_total",
            "Results routed to human review, by queue.",
            ["collection", "queue"],
            registry=r,
        )
        self.reports = Counter(
            "ragsift_reports_total",
            "Reports by collection and kind (answer, refusal, bypass).",
            ["collection", "kind"],
            registry=r,
        )
        # Reports answered extractively because the LLM failed: reason is
        # "unavailable" (errors after retries) or "deadline" (total deadline passed).
        self.llm_fallbacks = Counter(
            "ragsift_report_llm_fallbacks_total",
            "Reports answered extractively because the LLM call failed, by reason.",
            ["reason"],
            registry=r,
        )
        self.duplicates = Counter(
            "ragsift_duplicates_dropped_total",
            "Events dropped as duplicates (same id).",
            ["worker"],
            registry=r,
        )

    def observe_result(
        self,
        tenant_id: str,
        status: str,
        confidence: float,
        outcome: str,
        dropped_by_rule: dict[str, int],
    ) -> None:
        """Record one retrieval result's A9 metrics."""
        tenant = self.tenant(tenant_id)
        self.queries.labels(tenant, outcome).inc()
        if outcome != "ok":
            return
        self.confidence.labels(tenant, status).observe(confidence)
        self.status.labels(tenant).set(STATUS_CODES.get(status, 0))
        if status == "no_relevant_context":
            self.no_context.labels(tenant).inc()
        for rule, count in dropped_by_rule.items():
            if count:
                self.filtered.labels(tenant, rule).inc(count)
