"""The hash chain that makes audit rows tamper-evident.

Each row carries ``auditseq`` (its position in the sink's chain, counting across
rotated files), ``auditprev`` (the previous row's hash, :data:`GENESIS` for the
first), ``audithash`` (sha256 over the row's canonical encoding without
``audithash``/``auditmac``) and, when a key is configured, ``auditmac``
(HMAC-SHA256 with that key over the same bytes). The names are CloudEvents
extension attributes (lowercase letters only), so a row is still a valid event.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHAIN_FIELDS",
    "GENESIS",
    "ChainHead",
    "canonical",
    "row_hash",
    "row_mac",
    "seal",
]

#: ``auditprev`` of the very first row of a chain.
GENESIS = "0" * 64
SEQ, PREV, HASH, MAC = "auditseq", "auditprev", "audithash", "auditmac"
CHAIN_FIELDS = (SEQ, PREV, HASH, MAC)


@dataclass(frozen=True, slots=True)
class ChainHead:
    """Where the chain stands: the last row's hash and sequence number."""

    hash: str = GENESIS
    seq: int = -1

    def next(self, row_hash: str) -> ChainHead:
        """The head after one more row."""
        return ChainHead(row_hash, self.seq + 1)


def canonical(row: dict[str, Any]) -> bytes:
    """The bytes a row's hash and HMAC cover: sorted keys, no spaces, UTF-8.

    ``audithash`` and ``auditmac`` are left out (they are computed over the rest).
    Floats are written by ``json`` as the shortest repr that round-trips, so
    re-encoding a parsed row gives the same bytes.
    """
    body = {k: v for k, v in row.items() if k not in (HASH, MAC)}
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def row_hash(row: dict[str, Any]) -> str:
    """sha256 of the row's canonical encoding, hex."""
    return hashlib.sha256(canonical(row)).hexdigest()


def row_mac(row: dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 of the row's canonical encoding with ``key``, hex."""
    return hmac.new(key, canonical(row), hashlib.sha256).hexdigest()


def seal(event: dict[str, Any], head: ChainHead, key: bytes | None) -> dict[str, Any]:
    """The event's row linked after ``head``: its fields plus the chain fields."""
    row = {k: v for k, v in event.items() if k not in CHAIN_FIELDS}
    row[SEQ] = head.seq + 1
    row[PREV] = head.hash
    row[HASH] = row_hash(row)
    if key is not None:
        row[MAC] = row_mac(row, key)
    return row
