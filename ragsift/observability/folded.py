"""A gauge's ``(other)`` series: the highest value of the scopes folded into it.

Tenant and collection labels are bounded (``BoundedLabeler`` in :mod:`.metrics`):
past the bound, every later scope shares one ``(other)`` series. A counter adds up
there; a gauge set by each scope in turn reads whichever wrote last, so one drifting
tenant among calm ones showed PSI 0.0 between its own queries and its alert never
fired. :class:`FoldedHighest` keeps the ``(other)`` series at the highest value
written to it, held by the scope that wrote it: that scope may lower it again (its
value is the scope's own), any other only raise it.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from prometheus_client import Gauge

__all__ = ["FoldedHighest"]


class FoldedHighest:
    """Sets a gauge per scope; a series shared by folded scopes reads their highest value.

    ``other`` is the label value the folded scopes share. State is one (scope, value)
    per shared series, and those are bounded with the labels.
    """

    def __init__(self, gauge: Gauge, other: str):
        self.gauge = gauge
        self.other = other
        self._holders: dict[tuple[str, ...], tuple[Hashable, float]] = {}
        self._lock = threading.Lock()

    def set(self, labels: tuple[str, ...], scope: Hashable, value: float) -> None:
        """Set the series of ``labels`` to ``scope``'s ``value`` (module docstring)."""
        if self.other not in labels:
            self.gauge.labels(*labels).set(value)
            return
        with self._lock:
            holder = self._holders.get(labels)
            if holder is not None and holder[0] != scope and value < holder[1]:
                return  # a higher value of another folded scope stands
            self._holders[labels] = (scope, value)
            self.gauge.labels(*labels).set(value)
