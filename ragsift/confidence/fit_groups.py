"""Which groups (articles) a calibration was fit on, as short keys (ADR 026).

A fit from labelled questions records its groups in ``data.fit_groups``, so
``ragsift eval --artifact`` can count the questions it scores that the fit saw:
those figures are in sample. The keys are SHA-256 prefixes, not names: an
artifact travels, and a user's titles need not travel with it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final

__all__ = ["MAX_FIT_GROUPS", "fit_group_keys", "group_key"]

#: Groups a fit records: articles, not questions. Beyond this (a set with a group
#: per question, as a BEIR set's) the record is left out.
MAX_FIT_GROUPS: Final = 10_000


def group_key(group: str) -> str:
    """The 12 hex digits that stand for one group in ``data.fit_groups``."""
    return hashlib.sha256(group.encode("utf-8")).hexdigest()[:12]


def fit_group_keys(groups: Iterable[str]) -> list[str] | None:
    """``data.fit_groups`` for a fit on these groups' questions, sorted; None past
    :data:`MAX_FIT_GROUPS`."""
    keys = sorted({group_key(g) for g in groups})
    return keys if len(keys) <= MAX_FIT_GROUPS else None


def in_sample_count(fit_groups: Iterable[str] | None, groups: Iterable[str]) -> int | None:
    """How many of ``groups`` (one per scored question) are among ``fit_groups``;
    None when the artifact recorded none."""
    if fit_groups is None:
        return None
    seen = set(fit_groups)
    return sum(group_key(g) in seen for g in groups)
