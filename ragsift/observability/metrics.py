"""One typed container for every metric ragsift exports (prometheus-client).

Names follow Prometheus conventions: ``ragsift_`` prefix, base units, counters
ending in ``_total``. Tenant and collection labels are bounded (:mod:`.labels`):
the tenants (collections) named to it and the first ``max_tenants``
(``max_collections``) others seen get their own series, later ones share
``(other)``. Query text is never a label.

**Why one module.** STYLE 8: every metric lives in one typed container, so a
reader finds each name, label and help text in one place.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ragsift.observability.folded import FoldedGauge, Keep
from ragsift.observability.labels import (
    DEFAULT_MAX_LABEL_VALUES,
    BoundedCounter,
    BoundedLabeler,
    TenantLabeler,
)
from ragsift.unknown_variables import UNKNOWN_VARIABLES

__all__ = [
    "CONFIDENCE_BUCKETS",
    "DEFAULT_MAX_LABEL_VALUES",
    "WHOLE_COLLECTION",
    "BoundedCounter",
    "BoundedLabeler",
    "Metrics",
    "TenantLabeler",
]

#: The tenant label of a scope that is a whole collection (a calibration of all its
#: tenants, re-probed by the indexer): one fixed value, so it takes no tenant's slot.
WHOLE_COLLECTION = ""

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


class Metrics:
    """Every ragsift metric, registered on the registry passed in."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        max_tenants: int = DEFAULT_MAX_LABEL_VALUES,
        max_collections: int = DEFAULT_MAX_LABEL_VALUES,
        *,
        tenants: Iterable[str] = (),
        collections: Iterable[str] = (),
    ):
        """``tenants`` and ``collections``: values with their own series whatever else
        is seen, not counted against ``max_tenants`` / ``max_collections``."""
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # Counted per look-up, not per distinct value: a set of the values folded
        # would be the unbounded state the bound is there to avoid.
        self.labels_folded = Counter(
            "ragsift_metric_label_values_folded_total",
            "Label look-ups answered (other) because the label's bound of distinct"
            " values (RAGSIFT_WORKER_METRICS_MAX_TENANTS/_COLLECTIONS) was reached, by label.",
            ["label"],
            registry=r,
        )
        # No label: the warning at start-up names each variable (a name is the operator's).
        self.unknown_settings = Gauge(
            "ragsift_settings_unknown_variables",
            "RAGSIFT_* variables in the process environment that no setting reads, each named"
            " in a warning at start-up (a misspelt setting runs on its default).",
            registry=r,
        )
        self.unknown_settings.set_function(lambda: len(UNKNOWN_VARIABLES.found))
        self.tenant = BoundedLabeler(
            max_tenants, self.labels_folded.labels("tenant").inc, (WHOLE_COLLECTION, *tenants)
        )
        self.collection = BoundedLabeler(
            max_collections, self.labels_folded.labels("collection").inc, collections
        )
        self.confidence = Histogram(
            "ragsift_confidence",
            "Retrieval confidence by status (A9).",
            ["tenant", "status"],
            buckets=CONFIDENCE_BUCKETS,
            registry=r,
        )
        # A gauge per scope goes through FoldedGauge: past the label bound, "(other)"
        # reads the folded scopes' worst value, the one an alert on it looks for.
        self.status = self._scope_gauge(
            "ragsift_confidence_status",
            "Status of the tenant's latest result: 3 high, 2 medium, 1 low, 0 no context"
            " ((other): the lowest of the tenants past the label bound).",
            ["tenant"],
            "lowest",
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
        self.index_version_skips = Counter(
            "ragsift_index_version_bumps_skipped_total",
            "Document changes that left the tenant's index version (and so its cached"
            " results) alone because nothing indexed changed, by reason: unchanged (an"
            " upsert identical to what is indexed: a redelivery, a replay) or absent (a"
            " delete of a document the tenant does not have). Skipped only where no other"
            " indexer's pending mark is left on the scope (a write of one that stopped"
            " before its bump, or of a replica writing it now): those are bumped.",
            ["reason"],
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
        self.tenant_thresholds_reloads = Counter(
            "ragsift_tenant_thresholds_reloads_total",
            "Reloads of the per-tenant thresholds file (A13), by result (ok, error).",
            ["result"],
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
        # D9 analytics, per collection: collections are named by events, so bounded.
        self.decisions = BoundedCounter(
            Counter(
                "ragsift_decisions_total",
                "Decisions by collection and whether context was used.",
                ["collection", "use_context"],
                registry=r,
            ),
            self.collection,
        )
        self.reviews = BoundedCounter(
            Counter(
                "ragsift_review_items_total",
                "Results routed to human review, by queue.",
                ["collection", "queue"],
                registry=r,
            ),
            self.collection,
        )
        self.reports = BoundedCounter(
            Counter(
                "ragsift_reports_total",
                "Reports by collection and kind (answer, refusal, bypass).",
                ["collection", "kind"],
                registry=r,
            ),
            self.collection,
        )
        self.dead_letters_dropped = Counter(
            "ragsift_dead_letters_dropped_total",
            "Dead letters that could not be published, even without the original.",
            ["worker"],
            registry=r,
        )
        self.dead_letter_send_failures = Counter(
            "ragsift_dead_letter_send_failures_total",
            "Failed attempts to publish a dead letter, by letter (full, minimal).",
            ["worker", "letter"],
            registry=r,
        )
        # A refused documents-topic record withdraws the document its key names (the
        # record itself is a dead letter, counted as such).
        self.documents_withdrawn = Counter(
            "ragsift_documents_withdrawn_total",
            "Documents withdrawn because the last record of their key was refused.",
            ["worker"],
            registry=r,
        )
        self.batch_retries = Counter(
            "ragsift_batch_retries_total",
            "Handler batch calls retried event by event, by reason (error, deadline).",
            ["worker", "reason"],
            registry=r,
        )
        # A batch that failed as a whole RAGSIFT_WORKER_POISON_AFTER_FAILURES times in a
        # row, run event by event (ragsift.streams.poison): outcome "dead_lettered" (some
        # failed alone), "none" (none did) or "held" (all did: not one event's fault).
        self.poison_isolations = Counter(
            "ragsift_poison_isolations_total",
            "Batches that kept failing as a whole, run event by event, by outcome.",
            ["outcome"],
            registry=r,
        )
        # Reports answered extractively because the LLM failed: reason is
        # "unavailable" (errors after retries) or "deadline" (total deadline passed).
        # Counted by the report handler with ragsift_reports_total, when the report is
        # emitted: at most once per report, however often a batch cut off by its
        # deadline was built again, and not for a report that was dead-lettered.
        self.llm_fallbacks = Counter(
            "ragsift_report_llm_fallbacks_total",
            "Emitted reports answered without the LLM because its call failed, by reason.",
            ["reason"],
            registry=r,
        )
        # Queries scored without the reranker because it failed them: reason is
        # "unavailable" (errors after retries, deadline), "response" (4xx, malformed) or "error".
        self.reranker_failures = Counter(
            "ragsift_reranker_failures_total",
            "Queries scored without reranker scores because the reranker failed, by reason.",
            ["reason"],
            registry=r,
        )
        self.duplicates = Counter(
            "ragsift_duplicates_dropped_total",
            "Events dropped as duplicates (same id).",
            ["worker"],
            registry=r,
        )
        # Issue 14: the feedback loop and the drift alarm. Tenant/collection labels
        # go through the bounded labelers.
        self.feedback = Counter(
            "ragsift_feedback_total",
            "Feedback events by result: labelled, reported (a user's own label: kept, never"
            " re-fits), unchanged (duplicate/replay), kept_sampled (a report did not replace"
            " a sampled label), or why refused.",
            ["result"],
            registry=r,
        )
        # ragsift.retrieval.redis_replies: a key of the wrong type, a script's or an
        # argument's error. key is the kind of key (labels, owners, ...), a fixed name.
        self.redis_refused = Counter(
            "ragsift_redis_refused_total",
            "Commands Redis refused for good (not an outage: no retry fixes them), by store"
            " and kind of key (feedback: the event dead-lettered; cache: bypassed; mix: read"
            " as missing).",
            ["store", "key"],
            registry=r,
        )
        self.feedback_rows_unreadable = Counter(
            "ragsift_feedback_rows_unreadable_total",
            "Rows of the feedback store passed over because they cannot be read (damaged,"
            " or written by a newer release), by kind: result, label or refit (a re-fit record).",
            ["kind"],
            registry=r,
        )
        self.calibration_refits = Counter(
            "ragsift_calibration_refits_total",
            "Calibrations re-fit from feedback, by outcome: certified or uncertified"
            " (published; uncertified: the labels' answers were wrong more often than alpha,"
            " the scope refuses its queries), or withheld (no threshold certified on too"
            " few labels: not published, the calibration in force stays), or postponed (no"
            " re-fit can be made of these labels, e.g. all of one kind: until new ones).",
            ["outcome"],
            registry=r,
        )
        self.calibration_reprobes = Counter(
            "ragsift_calibration_reprobes_total",
            "Scopes re-probed after the indexer changed them or its start-up sweep found"
            " them stale, by outcome (stored, not_due, kept, too_small, unsupported,"
            " infeasible, no_collection, error).",
            ["outcome"],
            registry=r,
        )
        self.calibration_fallbacks = Counter(
            "ragsift_calibration_fallbacks_total",
            "Queries scored with a broader calibration because the one stored for their"
            " scope is not usable, by reason: mismatch (another embedder or metric), base"
            " (made on another shipped calibration: an upgrade), invalid, unreadable,"
            " reader_signals (it reads reader signals this pipeline does not).",
            ["reason"],
            registry=r,
        )
        self.missing_answer_share = self._scope_gauge(
            "ragsift_calibration_missing_answer_share",
            "Estimated share of questions on a scope's own subjects whose answer it lacks"
            " that its calibration answers (set when the indexer re-probes the scope;"
            " docs/confidence.md, section 12)"
            " ((other): the highest of the scopes past the label bound).",
            ["tenant", "collection"],
            "highest",
        )
        self.drift_psi = self._scope_gauge(
            "ragsift_calibration_drift_psi",
            "PSI of the recent top-hit scores against the calibration's reference"
            " ((other): the highest of the scopes past the label bound).",
            ["tenant", "collection"],
            "highest",
        )
        self.unanswerable_share = self._scope_gauge(
            "ragsift_unanswerable_share",
            "Estimated share of recent queries the collection cannot answer (its mix)"
            " ((other): the highest of the scopes past the label bound).",
            ["tenant", "collection"],
            "highest",
        )
        self.raise_share = self._scope_gauge(
            "ragsift_unanswerable_share_raise",
            "The share the mix raise reads: unanswerable queries among those at"
            " confidence 0.05 or over, as the share of all queries they are worth"
            " (ADR 045: questions far off the collection's subjects raise no bar)"
            " ((other): the highest of the scopes past the label bound).",
            ["tenant", "collection"],
            "highest",
        )
        self.near_miss_share = self._scope_gauge(
            "ragsift_near_miss_share",
            "Estimated share of recent queries on the collection's subjects that its"
            " documents do not answer (near misses, ADR 021)"
            " ((other): the highest of the scopes past the label bound).",
            ["tenant", "collection"],
            "highest",
        )
        self.answer_threshold = self._scope_gauge(
            "ragsift_answer_threshold",
            "The answer threshold a scope's recent queries were held to, in its"
            " calibration's terms: the certified one, raised by the scope's mix or near"
            " misses (ADR 013, 021) or lowered where its traffic is clearly more"
            " answerable (ADR 030)"
            " ((other): the strictest of the scopes past the label bound).",
            ["tenant", "collection"],
            "highest",
        )
        # Per-scope state (drift sketches, mix histograms, the feedback loop's re-fit
        # state) is kept for a bounded number of scopes, least recently seen dropped
        # first: tenant ids come from events.
        self.scope_evictions = Counter(
            "ragsift_scope_state_evictions_total",
            "Scopes whose state was dropped to keep a monitor within its bound, by monitor.",
            ["monitor"],
            registry=r,
        )
        self.calibration_shifts = Counter(
            "ragsift_calibration_shift_total",
            "Times a scope's drift PSI crossed the threshold (once per trip).",
            ["tenant", "collection"],
            registry=r,
        )
        self.corrective_retries = Counter(
            "ragsift_corrective_retries_total",
            "Corrective retries (B10), by trigger, strategy and the path kept (first or retry).",
            ["trigger", "strategy", "won"],
            registry=r,
        )
        # language: one of a fixed handful (ragsift.retrieval.language.LANGUAGE_NAMES);
        # by tenant, as its share of the tenant's answers is what an operator acts on.
        self.query_language_advice = BoundedCounter(
            Counter(
                "ragsift_query_language_advice_total",
                "Results served with the query_language advice (the query looked"
                " non-English), by tenant and language guessed: fr, es, de, it, pt, nl or"
                " other (a non-Latin script).",
                ["tenant", "language"],
                registry=r,
            ),
            self.tenant,
        )

    def _scope_gauge(self, name: str, doc: str, labels: list[str], keep: Keep) -> FoldedGauge:
        """A gauge labelled by tenant and/or collection, through their bounded labelers."""
        labelers = {"tenant": self.tenant, "collection": self.collection}
        gauge = Gauge(name, doc, labels, registry=self.registry)
        return FoldedGauge(gauge, [labelers[label] for label in labels], keep, BoundedLabeler.OTHER)

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
        self.status.set_labelled((tenant,), tenant_id, STATUS_CODES.get(status, 0))
        if status == "no_relevant_context":
            self.no_context.labels(tenant).inc()
        for rule, count in dropped_by_rule.items():
            if count:
                self.filtered.labels(tenant, rule).inc(count)
