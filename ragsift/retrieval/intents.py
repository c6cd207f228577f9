"""Queries that should not be retrieved for (D7): greetings and scope questions.

A greeting gets a greeting back, not a search over policy documents; "what
documents do you have?" is answered from the index's own metadata instead of
from whatever chunks happen to match the words "documents" and "have".
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["Intent", "classify_intent"]

Intent = Literal["greeting", "scope", "search"]

_GREETING = re.compile(
    r"^\s*(hi|hello|hey|hiya|howdy|good\s+(morning|afternoon|evening)|greetings|yo|"
    r"thanks|thank\s+you|cheers)(\s+(there|all|everyone|team|again))?\s*[!.?]*\s*$",
    re.IGNORECASE,
)
# Whole-question patterns only (anchored both ends): a question that goes on to name
# a subject ("what topics can you help with regarding shipping?") is searched.
_KIND = r"(?:(?:kinds?|sorts?|types?)\s+of\s+)?"
_CORPUS = r"(?:documents|docs|files|sources|topics|subjects|information|data|questions|things)"
_HELP = r"(?:have|know|cover|contain|index|answer|help(?:\s+me)?\s+with)"
_SCOPE = re.compile(
    rf"^\s*(what|which)\s+{_KIND}{_CORPUS}\s+(do|can|did|could)\s+you\s+{_HELP}"
    r"(\s+access\s+to|\s+about)?\s*\??\s*$"
    r"|^\s*what\s+(can|do|could)\s+you\s+(answer|know|help|do)(\s+me)?(\s+(about|with))?\s*\??\s*$"
    r"|^\s*what\s+are\s+you\s+able\s+to\s+(answer|help(\s+me)?\s+with)\s*\??\s*$"
    rf"|^\s*(list|show)(\s+me)?\s+(your|the)\s+{_CORPUS}\s*[.?!]*\s*$",
    re.IGNORECASE,
)


def classify_intent(query: str) -> Intent:
    """``greeting``, ``scope`` (a question about the corpus itself) or ``search``."""
    if _GREETING.match(query):
        return "greeting"
    if _SCOPE.match(query):
        return "scope"
    return "search"
