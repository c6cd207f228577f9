"""Recent results and reports the API keeps for waiting and polling callers, bounded by bytes.

Entries are keyed by (tenant, query id): one tenant's id never finds another
tenant's result. Each entry is kept as the encoded event (the bytes read from
Kafka), so its size is its encoded length and the bound is on real memory, not
on a count of entries whose size varies a hundredfold with ``k``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

__all__ = ["RecentEvents", "StoreKey"]

#: (kind, tenant, query id); kind is "result" or "report"
StoreKey = tuple[str, str, str]
#: dict slot, key tuple and bytes header: what an entry costs beyond its payload
ENTRY_OVERHEAD_BYTES = 200


class RecentEvents:
    """An LRU of encoded events, at most ``max_bytes`` in total."""

    def __init__(self, max_bytes: int, on_evict: Callable[[], None] | None = None):
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._on_evict = on_evict
        self._entries: OrderedDict[StoreKey, bytes] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: StoreKey) -> bool:
        return key in self._entries

    def get(self, key: StoreKey) -> bytes | None:
        """The encoded event, or None."""
        return self._entries.get(key)

    def put(self, key: StoreKey, value: bytes) -> None:
        """Keep ``value`` (replacing any older one), evicting the oldest past the bound."""
        cost = len(value) + ENTRY_OVERHEAD_BYTES
        if cost > self.max_bytes:
            # larger than the whole store: keeping it would evict everything else
            if self._on_evict is not None:
                self._on_evict()
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= len(old) + ENTRY_OVERHEAD_BYTES
        self._entries[key] = value
        self.bytes += cost
        while self.bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.bytes -= len(evicted) + ENTRY_OVERHEAD_BYTES
            if self._on_evict is not None:
                self._on_evict()
