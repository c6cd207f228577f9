"""The audit sink's metrics, registered on the worker's registry next to the others."""

from __future__ import annotations

import errno

from prometheus_client import Counter, Gauge

from ragsift.observability.metrics import Metrics

__all__ = ["AuditMetrics"]


class AuditMetrics:
    """Rows written, duplicates dropped, disk failures and whether the sink is stalled.

    Registered on the worker's :class:`Metrics` registry, so ``/metrics`` shows
    them; duplicates go to the shared ``ragsift_duplicates_dropped_total``.
    """

    def __init__(self, metrics: Metrics | None = None):
        metrics = metrics if metrics is not None else Metrics()
        r = metrics.registry
        self.registry = r
        self.rows = Counter(
            "ragsift_audit_rows_written_total",
            "Evidence rows written to the audit file.",
            registry=r,
        )
        self.duplicates = metrics.duplicates.labels("audit")
        self.write_failures = Counter(
            "ragsift_audit_write_failures_total",
            "Failed audit writes, each retried after a backoff, by errno name.",
            ["error"],
            registry=r,
        )
        self.stalled = Gauge(
            "ragsift_audit_sink_stalled",
            "1 while the audit sink waits for its disk (consumption paused), else 0.",
            registry=r,
        )
        self.conflicts = Counter(
            "ragsift_audit_conflicts_total",
            "Evidence dropped as a duplicate of its id whose data differs from the row"
            " written first: a forgery that got in first, or a query rescored since.",
            registry=r,
        )
        self.torn_tails = Counter(
            "ragsift_audit_torn_tails_repaired_total",
            "Torn last lines cut off at start-up (bytes kept in a side file).",
            registry=r,
        )

    def failed(self, exc: OSError) -> None:
        """Count one failed write; the label is the errno's name (a bounded set)."""
        name = errno.errorcode.get(exc.errno, "other") if exc.errno is not None else "other"
        self.write_failures.labels(name).inc()
