"""``RecentTexts``: what was computed for the texts read most recently (an LRU).

The reader keeps chunk term sets, sentence vectors and top hits' token states this
way: chunks recur across queries, and recomputing them costs far more than a lookup.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["RecentTexts"]

V = TypeVar("V")


class RecentTexts(Generic[V]):
    """What was computed for the ``size`` texts read most recently (an LRU): the
    reader's chunk term sets, sentence vectors and top hits' token states."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, text: object) -> bool:
        return text in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def values(self) -> Iterator[V]:
        """The kept values, oldest first."""
        return iter(self._items.values())

    def get(self, text: str) -> V | None:
        """The value kept for ``text`` (now the most recent), or None."""
        value = self._items.get(text)
        if value is not None:
            self._items.move_to_end(text)  # recently used: evicted last
        return value

    def put(self, text: str, value: V) -> None:
        """Keep ``value`` for ``text``, forgetting the oldest past ``size``."""
        self._items[text] = value
        self._items.move_to_end(text)
        if len(self._items) > self.size:
            self._items.popitem(last=False)
