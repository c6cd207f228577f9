"""What every handler shares: the Emit record and the Handler protocol.

A handler takes a batch of decoded events and returns, per event, either the
events to emit or the exception that event raised. Both runtimes (Faust agents
and the in-process bus) drive handlers the same way and own the failure path:
an exception becomes a dead letter with the original bytes; the batch's other
events go on. Handlers never import Faust.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

__all__ = ["MAX_DEADLINE_S", "Emit", "Handler", "Outcome"]

#: A handler call's deadline grown with its events (``deadline_for``) never goes past
#: this, well within the 1,000 s a consumer may go between polls (the plain runtime's
#: and Faust's).
MAX_DEADLINE_S = 600.0

In = TypeVar("In", bound=BaseModel)
In_contra = TypeVar("In_contra", bound=BaseModel, contravariant=True)


@dataclass(frozen=True, slots=True)
class Emit:
    """One event to publish: logical topic (``retrievals``, ``audit``...), key, event."""

    topic: str
    key: str
    event: BaseModel


Outcome = list[Emit] | Exception
"""Per input event: what to emit, or why it failed (dead-lettered by the runtime)."""


class Handler(Protocol, Generic[In_contra]):
    """A processing step that both runtimes drive."""

    #: worker name used in metrics and dead letters (``retrieval``, ``audit``...)
    name: str
    #: logical topic the handler consumes
    source: str

    @property
    def model(self) -> type[BaseModel]:
        """The input event model the runtime decodes into."""
        ...

    async def handle_batch(self, events: Sequence[In_contra]) -> list[Outcome]:
        """One outcome per input event, in order."""
        ...

    async def close(self) -> None:
        """Release what the handler holds."""
        ...
