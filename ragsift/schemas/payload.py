"""What a document's metadata may hold to be stored with its chunks: JSON the index can keep.

The index stores a document's metadata in every chunk's payload. Qdrant Edge writes
that payload to its write-ahead log and cannot read an entry nested past ~125 levels
back: the whole shard then fails to open, every tenant's searches with it. NaN,
infinities and lone surrogates (``"\\ud800"`` decodes to one) are refused by the
payload encoder only after the document's old chunks were deleted; an integer past
64 bits it stores as a float, its last digits lost without a word. And every chunk
keeps a copy: 2.9 MB of metadata on one event wrote 3 GB to a shard. So metadata is
checked before anything is written, by the event contract, the file loader and the
index record alike.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ragsift.errors import shown_value

__all__ = [
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "RepeatsNoted",
    "lone_surrogate",
    "metadata_problem",
    "not_utf8",
]

#: Deepest nesting of a metadata value (a key's value is level 1). Qdrant Edge's WAL
#: cannot read back ~125; real metadata (tags, authors, a section path) is 1-3 deep,
#: and the API's bodies stop at 32 (``ragsift.api.body.MAX_JSON_DEPTH``).
MAX_METADATA_DEPTH = 32
#: Largest metadata, as compact UTF-8 JSON: each chunk's payload holds a copy. Tags,
#: authors and a section path take well under a kilobyte.
MAX_METADATA_BYTES = 16 * 1024
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_TYPES = (str, int, float, bool, type(None), list, tuple, dict)
#: The integers a payload keeps exactly: Qdrant's JSON (serde_json, Edge and server
#: alike) holds each as a signed or an unsigned 64-bit integer. One past them becomes a
#: float, 2**64 + 1 read back as 1.8446744073709552e+19 (or fails, past a float's range).
_SMALLEST_INT = -(2**63)
_LARGEST_INT = 2**64 - 1


def lone_surrogate(value: Any) -> str | None:
    """The first string (or key) in a JSON value that holds a lone surrogate, shown; else None.

    ``json.loads`` turns an escape such as ``"\\ud800"`` into one: valid JSON, but no
    Unicode text, so it cannot be encoded to embed, store or print.
    """
    for _, node in _nodes(value):
        if isinstance(node, str) and _SURROGATE.search(node):
            return shown_value(node)
    return None


def metadata_problem(metadata: Mapping[str, Any]) -> str | None:
    """Why ``metadata`` cannot be stored with a chunk, or None when it can."""
    for depth, node in _nodes(metadata):
        if depth > MAX_METADATA_DEPTH:
            return f"nests deeper than {MAX_METADATA_DEPTH} levels"
        if isinstance(node, float) and not math.isfinite(node):
            return f"holds {node}, which is no JSON number"
        if isinstance(node, int) and not _SMALLEST_INT <= node <= _LARGEST_INT:
            return (
                f"holds the integer {shown_value(node)}, past the 64 bits the index keeps"
                " exactly (it would be stored as a float): send it as a string"
            )
        if isinstance(node, str) and _SURROGATE.search(node):
            return f"holds {shown_value(node)}, a lone surrogate: not Unicode text"
        if not isinstance(node, _JSON_TYPES):
            return f"holds a {type(node).__name__}, which is no JSON value"
    size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_METADATA_BYTES:
        return f"takes {size} bytes as JSON, past the {MAX_METADATA_BYTES} each chunk can copy"
    return None


def _nodes(value: Any) -> Iterator[tuple[int, Any]]:
    """Every value and key in ``value`` with its depth (``value`` itself at 0), without
    recursion: a value nested past the interpreter's stack is walked too."""
    stack: list[tuple[int, Any]] = [(0, value)]
    while stack:
        depth, node = stack.pop()
        yield depth, node
        if isinstance(node, dict):
            for key, item in node.items():
                yield depth + 1, key
                stack.append((depth + 1, item))
        elif isinstance(node, list | tuple):
            stack.extend((depth + 1, item) for item in node)


class RepeatsNoted(dict[str, Any]):
    """A JSON object as ``json.loads(..., object_pairs_hook=RepeatsNoted)`` builds it:
    the last of a repeated name kept, as without the hook, and the names given more
    than once in :attr:`repeated`. Parsers disagree on which one counts (many keep the
    first), so where the name says whose data it is, the stream and the API refuse it.
    """

    def __init__(self, pairs: list[tuple[str, Any]]):
        super().__init__(pairs)
        self.repeated: set[str] = set()
        if len(self) < len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    self.repeated.add(key)
                seen.add(key)


#: the characters a JSON text can start with (after white space)
_JSON_STARTS = frozenset('{["-0123456789tfn')


def not_utf8(payload: bytes) -> str | None:
    """The encoding ``payload`` is in when it is JSON but not UTF-8, else None.

    RFC 8259 (section 8.1) has JSON between systems in UTF-8 (a byte order mark may be
    ignored). ``json.loads`` on bytes also reads UTF-16 and UTF-32, which a gateway or
    an audit consumer that reads UTF-8 sees as something else; and a byte search for a
    name such as ``"tenant_id"`` (the repeated-name guard's first step) misses it in
    a UTF-16 payload. So the stream and the API take UTF-8 only.
    """
    encoding = json.detect_encoding(payload)
    if encoding in ("utf-8", "utf-8-sig"):
        return None
    # detect_encoding reads only the NUL bytes among the first four: b"\x00\x01junk{"
    # is "utf-16-be" to it. Name an encoding only where the payload reads as JSON text
    # in it; anything else is reported as what it is, not JSON. (Decoded as json.loads
    # decodes, lone surrogates passed, else such a payload would slip by this check.)
    try:
        text = payload.decode(encoding, "surrogatepass")
    except UnicodeDecodeError:
        return None
    return encoding if text.lstrip("\ufeff \t\r\n")[:1] in _JSON_STARTS else None
