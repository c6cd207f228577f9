"""A Faust worker whose handler's batch step fails, every run, on one event.

Run as ``python tests/integration/apps/poison_batch.py worker --web-port N``;
POISON_PREFIX (topic prefix) and POISON_APP_ID come from the environment. The
agent is the production one (``attach_handler``). Any batch holding a query whose
text is ``poison`` makes the handler's ``settle`` raise a RuntimeError, outside the
router's per-event guard, so the batch fails as a whole every time it runs.
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


class PoisonedSettle:
    """Echoes each query as feedback; a batch with ``poison`` in it fails to settle."""

    name = "poisoned"
    source = "queries"

    def __init__(self) -> None:
        self.poisoned = False

    @property
    def model(self) -> type[BaseModel]:
        return QueryEvent

    async def handle_batch(self, events: Sequence[QueryEvent]) -> list[Outcome]:
        self.poisoned = any(e.query == "poison" for e in events)
        return [[Emit("feedback", e.query_id, feedback(e))] for e in events]

    async def settle(self) -> None:
        if self.poisoned:
            raise RuntimeError("batch step crashes on one event")

    async def close(self) -> None:
        return None


metrics = Metrics()
app = create_app(KafkaSettings(), app_id=os.environ["POISON_APP_ID"], web_enabled=False)
attach_handler(
    app,
    PoisonedSettle(),
    prefix=os.environ["POISON_PREFIX"],
    metrics=metrics,
    batch_size=16,
    within_s=0.05,
    deadline_s=5.0,
    poison_after=2,
)

if __name__ == "__main__":
    app.main()
