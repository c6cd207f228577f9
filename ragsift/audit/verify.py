"""Walk an audit chain and name the first row that breaks it (``ragsift audit verify``).

What a break means is in ``docs/audit.md``: an intact chain shows the files
were not edited, reordered or cut in the middle since they were written; only
with an HMAC key does it show the rows came from a holder of the key, and only
with an anchor (a head hash kept elsewhere) does it show the end was not cut.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragsift.audit.chain import GENESIS, HASH, MAC, PREV, SEQ, row_hash, row_mac

__all__ = ["Break", "BreakKind", "ChainReport", "describe", "verify_chain"]

BreakKind = Literal[
    "edited",
    "deleted",
    "reordered",
    "inserted",
    "bad_hmac",
    "unreadable",
    "torn",
    "truncated",
    "unchained",
]


_UNCHAINED = "no chain fields (stripped, or written before the chain began)"


@dataclass(frozen=True, slots=True)
class Break:
    """The first row where the chain does not hold."""

    file: Path
    line: int
    kind: BreakKind
    detail: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.kind}: {self.detail}"


@dataclass(slots=True)
class ChainReport:
    """What a walk found: counts, the span it covers, and the first break if any."""

    rows: int = 0
    #: rows without chain fields before the first chained one (written before chaining)
    unchained: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    head: str | None = None
    #: ``auditprev`` of the first chained row: GENESIS unless earlier files are missing
    starts_after: str | None = None
    first_time: str | None = None
    last_time: str | None = None
    macs_checked: bool = False
    macs_present: bool = False
    anchor_found: bool | None = None
    problem: Break | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        """No break found."""
        return self.problem is None


@dataclass(slots=True)
class _Walk:
    report: ChainReport
    key: bytes | None
    anchor: str | None
    #: rows without chain fields before the chain are a break, not "not covered"
    all_chained: bool = False
    last: str | None = None
    before_last: str | None = None
    last_line: tuple[Path, int] | None = None

    def check(self, file: Path, line_no: int, raw: bytes, last_of_all: bool) -> Break | None:
        report = self.report
        if not raw.strip():
            return Break(file, line_no, "inserted", "blank line inside the chain")
        try:
            row = json.loads(raw)
        except (ValueError, RecursionError):  # bad JSON or UTF-8, huge ints; deep nesting
            row = None
        if not isinstance(row, dict):
            if last_of_all and not raw.endswith(b"\n"):
                return Break(file, line_no, "torn", "incomplete last line (a crash mid-write)")
            return Break(file, line_no, "unreadable", "not a JSON object (edited or damaged)")
        report.rows += 1
        if HASH not in row:
            if self.last is None:
                if self.all_chained:
                    return Break(file, line_no, "unchained", _UNCHAINED)
                report.unchained += 1
                return None
            return Break(file, line_no, "inserted", "row carries no chain fields")
        seq, prev, own = row.get(SEQ), row.get(PREV), row.get(HASH)
        if not (isinstance(seq, int) and isinstance(prev, str) and isinstance(own, str)):
            return Break(file, line_no, "edited", "chain fields are malformed")
        try:
            problem = self._seal(file, line_no, row, own)
        except (ValueError, RecursionError):  # NaN or nesting no writer of ours produces
            problem = Break(file, line_no, "edited", "row cannot be encoded canonically")
        if problem is not None:
            return problem
        problem = self._link(file, line_no, seq, prev)
        if problem is not None:
            return problem
        self.before_last, self.last, self.last_line = self.last, own, (file, line_no)
        report.last_seq, report.head = seq, own
        if report.first_seq is None:
            report.first_seq, report.starts_after = seq, prev
        time = row.get("time")
        if isinstance(time, str):
            report.first_time = report.first_time or time
            report.last_time = time
        if self.anchor is not None and own == self.anchor:
            report.anchor_found = True
        return None

    def _seal(self, file: Path, line_no: int, row: dict[str, Any], own: str) -> Break | None:
        if row_hash(row) != own:
            return Break(file, line_no, "edited", "row content does not match its hash")
        mac = row.get(MAC)
        self.report.macs_present |= mac is not None
        if self.key is None:
            return None
        if not isinstance(mac, str):
            return Break(
                file, line_no, "bad_hmac", "row has no HMAC (chain rebuilt without the key?)"
            )
        if not hmac.compare_digest(mac, row_mac(row, self.key)):
            return Break(file, line_no, "bad_hmac", "HMAC does not match (wrong key or forged)")
        return None

    def _link(self, file: Path, line_no: int, seq: int, prev: str) -> Break | None:
        last_seq = self.report.last_seq
        if self.last is None or last_seq is None:
            if prev == GENESIS and seq != 0:
                return Break(file, line_no, "edited", f"first row has sequence {seq}, not 0")
            return None
        if prev == self.last:
            if seq != last_seq + 1:
                return Break(file, line_no, "edited", f"sequence {seq} after {last_seq}")
            return None
        if prev == self.before_last and self.last_line is not None:
            where, at = self.last_line
            return Break(where, at, "inserted", "this row is not part of the chain")
        if seq > last_seq + 1:
            missing = seq - last_seq - 1
            return Break(
                file, line_no, "deleted", f"{missing} row(s) missing before here (deleted or moved)"
            )
        return Break(file, line_no, "reordered", "an earlier row again, or rows out of order")


def verify_chain(
    files: Sequence[Path],
    *,
    key: bytes | None = None,
    anchor: str | None = None,
    from_genesis: bool = False,
) -> ChainReport:
    """Walk ``files`` (oldest first, as one chain) and report the first break.

    Args:
        files: audit files in chain order (rotated ones, then ``audit.jsonl``).
        key: the HMAC key; when given every chained row must carry a matching HMAC.
        anchor: a head hash recorded elsewhere; the chain must contain it, else
            rows were cut from the end (or the chain was rewritten).
        from_genesis: the first chained row must be the chain's first (seq 0);
            without it a walk may start mid-chain (older files shipped away).

    Rows without chain fields before the first chained one (written before chaining)
    are counted as not covered, unless a key or ``from_genesis`` is given: then every
    row must be chained. Rows of which none is chained are a break either way.
    """
    report = ChainReport(files=list(files), macs_checked=key is not None)
    walk = _Walk(report, key, anchor, all_chained=key is not None or from_genesis)
    if anchor is not None:
        report.anchor_found = False
    for index, file in enumerate(files):
        lines = file.read_bytes().splitlines(keepends=True)
        for line_no, raw in enumerate(lines, start=1):
            last_of_all = index == len(files) - 1 and line_no == len(lines)
            problem = walk.check(file, line_no, raw, last_of_all)
            if problem is None and from_genesis and report.starts_after not in (None, GENESIS):
                problem = Break(
                    file, line_no, "deleted", "the chain does not start here: earlier rows missing"
                )
            if problem is not None:
                report.problem = problem
                return report
    if report.rows and report.head is None:
        # Rows, none of them chained: the chain vouches for nothing here. Reported as
        # intact, a trail whose chain fields were stripped (and rows then edited) passed.
        report.problem = Break(
            files[0], 1, "unchained", f"none of the {report.rows} rows: {_UNCHAINED}"
        )
        return report
    if anchor is not None and not report.anchor_found:
        where = files[-1] if files else Path("-")
        report.problem = Break(
            where, 0, "truncated", f"anchor {anchor} is not in the chain (end cut or rewritten)"
        )
    return report


def describe(report: ChainReport) -> dict[str, Any]:
    """The report as plain data (for ``--json`` output)."""
    return {
        "intact": report.intact,
        "rows": report.rows,
        "unchained_rows": report.unchained,
        "first_seq": report.first_seq,
        "last_seq": report.last_seq,
        "head": report.head,
        "starts_after": report.starts_after,
        "first_time": report.first_time,
        "last_time": report.last_time,
        "hmac_checked": report.macs_checked,
        "hmac_present": report.macs_present,
        "anchor_found": report.anchor_found,
        "break": None
        if report.problem is None
        else {
            "file": str(report.problem.file),
            "line": report.problem.line,
            "kind": report.problem.kind,
            "detail": report.problem.detail,
        },
        "files": [str(f) for f in report.files],
    }
