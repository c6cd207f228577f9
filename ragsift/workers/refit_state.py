"""What the feedback loop remembers about a scope between its labels, bounded.

Three things, each kept only while it can still change what a later label does:

* **due**: the scope's labels changed since its last re-fit, but the re-fit interval
  held that re-fit back (or it could not be stored), so any label of the scope checks
  again, a replayed one too. Settled once its labels are checked past the interval;
  found too few to fit then, the scope is forgotten whole (a changed label checks
  anyway, and only a changed one brings it back to the minimum).
* **postponed**: the digest of labels no re-fit could be made of (e.g. every one
  "relevant"), so replays of them are not fit again. Stale once the labels changed
  into a re-fit that was put or withheld.
* **withheld**: why the scope's last attempt at a re-fit was withheld (ADR 031), for
  ``ragsift feedback`` to say. Gone once a re-fit is put in force, or a later attempt
  is postponed: the reason (its counts) is of labels the scope no longer has.

A scope with none of them holds no entry. Tenant ids come from feedback events, so
at most :data:`MAX_SCOPES` scopes are held, the least recently touched dropped first
and counted (``ragsift_scope_state_evictions_total{monitor="refit"}``). A dropped
scope loses little: postponed labels are tried (and postponed) once more, a due
scope waits for its next changed label instead of any label, and a withheld reason
is no longer printed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ragsift.confidence.registry import CalibrationScope
from ragsift.lru import Recent

__all__ = ["MAX_SCOPES", "RefitStates"]

#: The same bound as the query path's per-scope monitors (drift, mix): far more
#: (tenant, collection) pairs than one deployment labels, a few MB at most.
MAX_SCOPES: Final = 10_000


@dataclass
class _State:
    due: bool = False
    postponed: str | None = None
    postponed_why: str | None = None
    withheld: str | None = None

    def empty(self) -> bool:
        return not self.due and self.postponed is None and self.withheld is None


class RefitStates:
    """Per-scope re-fit state (see the module docstring), least recently touched dropped
    first past ``max_scopes`` (default :data:`MAX_SCOPES`); ``on_evict`` is told of
    each scope dropped so. Thread-safe (labels are applied on worker threads).
    """

    def __init__(self, max_scopes: int | None = None, on_evict: Callable[[], None] | None = None):
        if max_scopes is None:
            max_scopes = MAX_SCOPES
        if max_scopes < 1:
            raise ValueError(f"max_scopes must be >= 1, got {max_scopes}")
        self.max_scopes = max_scopes
        self.on_evict = on_evict
        #: least recently touched first
        self._scopes: Recent[CalibrationScope, _State] = Recent(max_scopes)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._scopes)

    def __contains__(self, scope: object) -> bool:
        return scope in self._scopes

    def is_due(self, scope: CalibrationScope) -> bool:
        """Whether any label of ``scope`` (a replay too) should check for a re-fit."""
        state = self._scopes.peek(scope)
        return state is not None and state.due

    def postponed(self, scope: CalibrationScope) -> str | None:
        """The digest of the labels of ``scope`` no re-fit could be made of, if any."""
        state = self._scopes.peek(scope)
        return None if state is None else state.postponed

    def postponed_why(self, scope: CalibrationScope) -> str | None:
        """Why no re-fit could be made of the labels :meth:`postponed` names, if so."""
        state = self._scopes.peek(scope)
        return None if state is None else state.postponed_why

    def withheld(self, scope: CalibrationScope) -> str | None:
        """Why the last attempt at a re-fit of ``scope`` was withheld, if it was (ADR 031)."""
        state = self._scopes.peek(scope)
        return None if state is None else state.withheld

    def mark_due(self, scope: CalibrationScope) -> None:
        """Its labels changed and no re-fit has read them yet."""
        self._update(scope, due=True)

    def settle(self, scope: CalibrationScope) -> None:
        """Its labels were checked: not due (nothing else changes)."""
        with self._lock:
            state = self._scopes.peek(scope)
            if state is not None:
                state.due = False
                if state.empty():
                    self._scopes.pop(scope)

    def postpone(self, scope: CalibrationScope, digest: str, why: str | None = None) -> None:
        """No re-fit can be made of the labels ``digest`` names (``why``); not due, and an
        earlier attempt's withheld reason, of other labels, is stale."""
        self._update(scope, due=False, postponed=digest, postponed_why=why, withheld=None)

    def withhold(self, scope: CalibrationScope, why: str) -> None:
        """A re-fit of changed labels was made and withheld; not due, nothing postponed."""
        self._update(scope, due=False, postponed=None, postponed_why=None, withheld=why)

    def put(self, scope: CalibrationScope) -> None:
        """A re-fit is in force: nothing is left to remember of the scope."""
        self.forget(scope)

    def forget(self, scope: CalibrationScope) -> None:
        """Nothing of the scope is worth remembering: a re-fit is in force, or its labels
        are too few to fit (not due: the label that brings them to the minimum is a
        changed one, which checks anyway; postponed and withheld were of other labels)."""
        with self._lock:
            self._scopes.pop(scope)

    def _update(self, scope: CalibrationScope, **fields: bool | str | None) -> None:
        """Set ``fields`` of the scope's state, made (and the oldest dropped) if new."""
        evicted = False
        with self._lock:
            state = self._scopes.get(scope)  # touched: the last to be dropped
            if state is None:
                state = _State()
                evicted = self._scopes.put(scope, state)
            for name, value in fields.items():
                setattr(state, name, value)
        if evicted and self.on_evict is not None:
            self.on_evict()
