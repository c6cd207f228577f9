"""A Faust worker whose audit sink's disk is full for its first writes.

Run as ``python tests/integration/apps/audit_full_disk.py worker --web-port N``;
AUDIT_PREFIX (topic prefix), AUDIT_APP_ID, AUDIT_DIR and AUDIT_FAILURES (how
many writes fail with ENOSPC, each after writing half its batch) come from the
environment. The agent is the production one (``attach_handler``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ragsift.audit import AuditFileSink, AuditMetrics
from ragsift.observability.metrics import Metrics
from ragsift.settings import KafkaSettings
from ragsift.streams.agents import attach_handler
from ragsift.streams.app import create_app
from ragsift.workers.audit import AuditSinkHandler, Backoff
from tests.unit.audit.fakes import FailingWriter

metrics = Metrics()
app = create_app(KafkaSettings(), app_id=os.environ["AUDIT_APP_ID"])
sink = AuditFileSink(
    Path(os.environ["AUDIT_DIR"]), writer=FailingWriter(int(os.environ["AUDIT_FAILURES"]))
)
handler = AuditSinkHandler(sink, metrics=AuditMetrics(metrics), backoff=Backoff(0.05, 0.2))
attach_handler(
    app,
    handler,
    prefix=os.environ["AUDIT_PREFIX"],
    metrics=metrics,
    batch_size=16,
    within_s=0.05,
    # Far shorter than the failing disk holds a batch: only the sink's own
    # deadline_s = None keeps the runtime from dead-lettering the evidence.
    deadline_s=0.1,
)

if __name__ == "__main__":
    app.main()
