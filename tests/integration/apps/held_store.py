"""A Faust worker whose handler holds a batch for a store that never answers.

Run as ``python tests/integration/apps/held_store.py worker --web-port N``;
HELD_PREFIX (topic prefix) and HELD_APP_ID come from the environment. The agent
is the production one (``attach_handler``); the handler waits out its store with
:func:`ragsift.workers.held.until_available`, as the indexer waits out Redis. A
query whose text is ``hold`` meets the store down for good; ``slow`` takes
SLOW_S and answers (a batch that is only slow).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.schemas import QueryEvent
from ragsift.settings import KafkaSettings
from ragsift.streams.agents import attach_handler
from ragsift.streams.app import create_app
from ragsift.workers.base import Emit, Outcome
from ragsift.workers.held import Hold, Holds, until_available
from tests.unit.streams.scripted import feedback

#: Long enough for the test to stop the worker while the batch runs.
SLOW_S = 4.0

log = logging.getLogger("held_store")


class HeldHandler(Holds):
    """Echoes each query as feedback once its store took it: ``hold`` never is."""

    name = "held"
    source = "queries"
    deadline_s = None  # a hold is back-pressure, never a dead letter

    def __init__(self) -> None:
        self.hold = Hold()

    @property
    def model(self) -> type[BaseModel]:
        return QueryEvent

    async def handle_batch(self, events: Sequence[QueryEvent]) -> list[Outcome]:
        texts = {e.query for e in events}
        if "slow" in texts:
            log.warning("slow batch started")
            await asyncio.sleep(SLOW_S)
        if "hold" in texts:
            await until_available(self._store_down, what="held store", hold=self.hold)
        return [[Emit("feedback", e.query_id, feedback(e))] for e in events]

    async def _store_down(self) -> None:
        raise ServiceUnavailableError("the store does not answer", service="redis")

    async def close(self) -> None:
        return None


metrics = Metrics()
app = create_app(KafkaSettings(), app_id=os.environ["HELD_APP_ID"], web_enabled=False)
attach_handler(
    app,
    HeldHandler(),
    prefix=os.environ["HELD_PREFIX"],
    metrics=metrics,
    batch_size=16,
    within_s=0.05,
    deadline_s=1.0,
)

if __name__ == "__main__":
    app.main()
