"""A Faust worker whose handler fails a batch as a whole, once, outside event handling.

Run as ``python tests/integration/apps/failing_batch.py worker --web-port N``;
FAILING_PREFIX (topic prefix) and FAILING_APP_ID come from the environment. The
agent is the production one (``attach_handler``). The first batch holding a query
whose text is ``boom`` makes the handler's ``settle`` raise a RuntimeError (a bug,
not anything one event did: it escapes the router); every batch after that works.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.observability.metrics import Metrics
from ragsift.schemas import QueryEvent
from ragsift.settings import KafkaSettings
from ragsift.streams.agents import attach_handler
from ragsift.streams.app import create_app
from ragsift.workers.base import Emit, Outcome
from tests.unit.streams.scripted import feedback


class FailsOnce:
    """Echoes each query as feedback; the first batch with ``boom`` fails to settle."""

    name = "failing"
    source = "queries"

    def __init__(self) -> None:
        self.armed = False
        self.failed = False

    @property
    def model(self) -> type[BaseModel]:
        return QueryEvent

    async def handle_batch(self, events: Sequence[QueryEvent]) -> list[Outcome]:
        self.armed = not self.failed and any(e.query == "boom" for e in events)
        return [[Emit("feedback", e.query_id, feedback(e))] for e in events]

    async def settle(self) -> None:
        if self.armed:
            self.armed, self.failed = False, True
            raise RuntimeError("bug outside event handling")

    async def close(self) -> None:
        return None


metrics = Metrics()
app = create_app(KafkaSettings(), app_id=os.environ["FAILING_APP_ID"], web_enabled=False)
attach_handler(
    app,
    FailsOnce(),
    prefix=os.environ["FAILING_PREFIX"],
    metrics=metrics,
    batch_size=16,
    within_s=0.05,
    deadline_s=5.0,
)

if __name__ == "__main__":
    app.main()
