"""``Recent``: a map that keeps the ``max_size`` keys used most recently (an LRU).

One implementation for every bounded memory of ragsift's that forgets the least
recently used first: the confidence monitors' per-scope state, the calibration
registry's reads, the reader's and embedder's per-text results, the in-memory result
cache. A neutral module, below every layer, so that ``confidence/`` may use it too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["Recent"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``max_size`` values by key; past it, the least recently used goes.

    :meth:`put` and :meth:`get` make a key the most recently used; :meth:`peek`,
    ``in`` and ``recent[key]`` look without doing so. :meth:`put` says whether it
    evicted a key, for an owner that counts what it forgets. Not thread-safe: an owner
    shared across threads holds its own lock around each use (most do more under it).

    Raises:
        TypeError: ``max_size`` is not an int.
        ValueError: ``max_size`` < 1 (a memory that keeps nothing is no memory: an
            owner that can be turned off keeps no ``Recent`` then).
    """

    def __init__(self, max_size: int) -> None:
        if not isinstance(max_size, int) or isinstance(max_size, bool):
            raise TypeError(f"max_size must be an int, got {type(max_size).__name__}")
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        self.max_size = max_size
        #: least recently used first
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first."""
        return iter(self._items)

    def __getitem__(self, key: K) -> V:
        """The value of ``key``, its recency left alone; KeyError when not kept."""
        return self._items[key]

    def values(self) -> Iterator[V]:
        """The values, least recently used first."""
        return iter(self._items.values())

    def items(self) -> Iterator[tuple[K, V]]:
        """``(key, value)`` pairs, least recently used first."""
        return iter(self._items.items())

    def get(self, key: K) -> V | None:
        """The value of ``key``, now the most recently used; None when not kept."""
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def peek(self, key: K) -> V | None:
        """The value of ``key`` without making it more recent; None when not kept."""
        return self._items.get(key)

    def put(self, key: K, value: V) -> bool:
        """Keep ``value`` for ``key`` as the most recently used (replacing any value it
        had); True when the least recently used key was evicted to make room."""
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) <= self.max_size:
            return False
        self._items.popitem(last=False)
        return True

    def pop(self, key: K) -> V | None:
        """Forget ``key`` (not an eviction); its value, or None when not kept."""
        return self._items.pop(key, None)

    def clear(self) -> None:
        """Forget every key."""
        self._items.clear()
