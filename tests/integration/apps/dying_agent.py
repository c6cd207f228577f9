"""A Faust worker whose agent leaves its loop by a BaseException that is not an Exception.

Run as ``python tests/integration/apps/dying_agent.py worker --web-port N``;
DYING_PREFIX (topic prefix) and DYING_APP_ID come from the environment. The agent is the
production one (``attach_handler``). With DYING_ARMED=1, a batch holding a query whose
text is ``die`` makes the handler's ``settle`` raise :class:`Died` (what Faust neither
restarts an agent on nor lets stop the event loop); unarmed, every batch works.
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


class Died(BaseException):
    """Not an Exception, not a cancellation, not SystemExit or KeyboardInterrupt."""


class DiesOnce:
    """Echoes each query as feedback; armed, a batch with ``die`` fails to settle."""

    name = "dying"
    source = "queries"

    def __init__(self, armed: bool) -> None:
        self.armed = armed
        self.dies = False

    @property
    def model(self) -> type[BaseModel]:
        return QueryEvent

    async def handle_batch(self, events: Sequence[QueryEvent]) -> list[Outcome]:
        self.dies = self.armed and any(e.query == "die" for e in events)
        return [[Emit("feedback", e.query_id, feedback(e))] for e in events]

    async def settle(self) -> None:
        if self.dies:
            raise Died("agent left its loop")

    async def close(self) -> None:
        return None


metrics = Metrics()
app = create_app(KafkaSettings(), app_id=os.environ["DYING_APP_ID"], web_enabled=False)
attach_handler(
    app,
    DiesOnce(armed=os.environ.get("DYING_ARMED") == "1"),
    prefix=os.environ["DYING_PREFIX"],
    metrics=metrics,
    batch_size=16,
    within_s=0.05,
    deadline_s=5.0,
)

if __name__ == "__main__":
    app.main()
