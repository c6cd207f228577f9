"""A per-scope gauge whose ``(other)`` series reads the worst value of the scopes in it.

Tenant and collection labels are bounded (``BoundedLabeler`` in :mod:`.labels`):
past the bound, every later scope shares one ``(other)`` series. A counter adds up
there; a gauge set by each scope in turn read whichever wrote last, so one drifting
tenant among calm ones showed PSI 0.0 between its own queries and its alert never
fired (and a raised answer bar, an unanswerable mix, a no-context status the same).
:class:`FoldedGauge` keeps the ``(other)`` series at the worst value written to it
(the highest, or the lowest where low is the alarm), held by the scope that wrote
it: that scope may move it back (its value is the scope's own), any other only make
it worse. When the holder moves back past another folded scope's value, the series
reads the holder's until that scope writes again: holding one scope, not every
folded scope's value, keeps the state bounded with the labels.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Literal

from prometheus_client import Gauge

__all__ = ["FoldedGauge", "Keep"]

#: Which value of the folded scopes the shared series reads: the alarming one.
Keep = Literal["highest", "lowest"]


class FoldedGauge:
    """A gauge labelled by bounded labels only; a series shared by folded scopes reads
    their worst value (module docstring).

    ``labelers`` map each label's value to its series' (``(other)`` past the bound);
    ``keep`` says which value is worst. State is one (scope, value) per shared
    series, and those are bounded with the labels.
    """

    def __init__(
        self, gauge: Gauge, labelers: Sequence[Callable[[str], str]], keep: Keep, other: str
    ):
        if keep not in ("highest", "lowest"):
            raise ValueError(f"keep must be 'highest' or 'lowest', got {keep!r}")
        self.gauge = gauge
        self.labelers = tuple(labelers)
        self.keep = keep
        self.other = other
        self._holders: dict[tuple[str, ...], tuple[Hashable, float]] = {}
        # Each series' child, looked up once: ``Gauge.labels`` checks and converts its
        # values and takes a lock on every call (~6 sets a query). The labels are
        # bounded, so this is too, and ragsift never removes a series.
        self._series: dict[tuple[str, ...], Gauge] = {}
        self._lock = threading.Lock()

    def set(self, values: tuple[str, ...], value: float) -> None:
        """Set the series of the scope ``values`` (tenant id, collection: raw, not yet
        labels) to ``value``."""
        labels = tuple(label(v) for label, v in zip(self.labelers, values, strict=True))
        self.set_labelled(labels, values, value)

    def set_labelled(self, labels: tuple[str, ...], scope: Hashable, value: float) -> None:
        """As :meth:`set`, for a caller that looked the labels up already (each look-up
        past the bound is counted): ``scope`` names the scope they are of."""
        if self.other not in labels:
            self._child(labels).set(value)
            return
        with self._lock:
            holder = self._holders.get(labels)
            if (
                holder is not None
                and holder[0] != scope
                and not self._at_least_as_bad(value, holder[1])
            ):
                return  # a worse value of another folded scope stands
            self._holders[labels] = (scope, value)
            self._child(labels).set(value)

    def _child(self, labels: tuple[str, ...]) -> Gauge:
        child = self._series.get(labels)
        if child is None:
            child = self._series[labels] = self.gauge.labels(*labels)
        return child

    def _at_least_as_bad(self, value: float, held: float) -> bool:
        return value >= held if self.keep == "highest" else value <= held
