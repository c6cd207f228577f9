"""``RecentTexts``: what was computed for the texts read most recently (an LRU).

The reader keeps chunk term sets, sentence vectors and top hits' token states this
way: chunks recur across queries, and recomputing them costs far more than a lookup.
"""

from __future__ import annotations

from typing import TypeVar

from ragsift.lru import Recent

__all__ = ["RecentTexts"]

V = TypeVar("V")


class RecentTexts(Recent[str, V]):
    """What was computed for the ``max_size`` texts read most recently (an LRU): the
    reader's chunk term sets, sentence vectors and top hits' token states. A
    :class:`~ragsift.lru.Recent` keyed by the text."""
