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
_SCOPE = re.compile(
    r"^\s*(what|which)\s+(documents|docs|files|sources|topics|information|data)\s+"
    r"(do|can|did)\s+you\s+(have|know|cover|contain|index)(\s+access\s+to)?\s*\??\s*$"
    r"|^\s*what\s+(can|do)\s+you\s+(answer|know|help)(\s+(about|with))?\s*\??\s*$"
    r"|^\s*(list|show)\s+(your|the)\s+(documents|sources|files)\s*[.?!]*\s*$",
    re.IGNORECASE,
)


def classify_intent(query: str) -> Intent:
    """``greeting``, ``scope`` (a question about the corpus itself) or ``search``."""
    if _GREETING.match(query):
        return "greeting"
    if _SCOPE.match(query):
        return "scope"
    return "search"
