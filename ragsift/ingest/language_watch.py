"""Whether most of what is ingested into a collection looks non-English, and the
warning that says what that means for its confidences.

ragsift's embedders, BM25 tokenizer and calibrations read English
(:mod:`ragsift.retrieval.language`): a French or German corpus is indexed and
searched, but its confidences do not mean what they say. ``ragsift ingest`` warns
about one ingest's documents; the streaming indexer, which sees one document at a
time, keeps a tally per scope (:class:`LanguageWatch`) and warns once per scope.
A warning only: the documents are indexed all the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from ragsift.lru import Recent
from ragsift.retrieval.language import LANGUAGE_NAMES, LanguageShares, language_shares

__all__ = ["MAJORITY", "LanguageWatch", "language_warning"]

#: More than this share of the text (by characters) looking non-English is "most".
MAJORITY = 0.5
#: The streaming indexer judges a scope once it has seen this many characters (a few
#: pages): its first document alone does not decide what the collection is.
MIN_CHARS = 5_000
#: Scopes the streaming indexer keeps a tally of; past it, the least recently
#: ingested is forgotten (at worst, it is warned about once more).
MAX_SCOPES = 1_024


def language_warning(shares: LanguageShares, tenant: str, collection: str) -> str | None:
    """The warning for a body of text ingested into ``collection``, or None when most
    of it does not look non-English."""
    top = shares.top()
    if top is None or shares.foreign_share <= MAJORITY:
        return None
    code, share = top
    name = LANGUAGE_NAMES[code]
    mostly = name if code != "other" else "text in a non-Latin script"
    return (
        f"{shares.foreign_share:.0%} of the text ingested for tenant {tenant!r} into"
        f" collection {collection!r} looks non-English (mostly {mostly}, {share:.0%}):"
        " ragsift's embedder, keyword index and confidence calibration read English, so"
        " confidences on this collection do not mean what they say, and an answer or a"
        " refusal made on them says little about what its documents hold. The documents"
        " are indexed; see docs/confidence.md, section 13."
    )


class LanguageWatch:
    """Per (tenant, collection): the characters ingested, and those that look
    non-English by language; :meth:`observe` returns the warning once per scope."""

    def __init__(self, max_scopes: int = MAX_SCOPES, min_chars: int = MIN_CHARS) -> None:
        if min_chars < 0:
            raise ValueError(f"min_chars must be >= 0, got {min_chars}")
        self.min_chars = min_chars
        # scope -> (characters, foreign characters by language, warned already)
        self._scopes: Recent[tuple[str, str], tuple[int, dict[str, int], bool]] = Recent(max_scopes)

    def observe(self, tenant: str, collection: str, texts: Iterable[str]) -> str | None:
        """Add ``texts`` to the scope's tally; the warning the first time most of the
        scope's text (at least ``min_chars`` of it) looks non-English, else None."""
        seen = language_shares(texts)
        scope = (tenant, collection)
        total, foreign, warned = self._scopes.get(scope) or (0, {}, False)
        total += seen.total
        foreign = dict(foreign)
        for code, chars in seen.foreign.items():
            foreign[code] = foreign.get(code, 0) + chars
        message = None
        if not warned and total >= self.min_chars:
            message = language_warning(LanguageShares(total, foreign), tenant, collection)
        self._scopes.put(scope, (total, foreign, warned or message is not None))
        return message
