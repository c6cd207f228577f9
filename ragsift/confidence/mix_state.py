"""The mix monitor's histograms across restarts: saved state and where it is kept.

A scope's estimate of its unanswerable share (ADR 013) needs ~30 queries before
it reads anything, and each process used to start every scope from nothing: a
restarted worker, a new replica, and every ``ragsift ask`` (a process of its
own) decided their first queries at the certified bar whatever the traffic had
shown. :class:`~.mix_monitor.MixMonitor` exports each scope's decayed histogram
as a :class:`ScopeState`; a store keeps them beside the scoped calibrations
(``_mix.json`` in the calibrations folder, or a Redis hash every replica shares:
``ragsift.wiring.build_mix_state``), and the next process restores them. A state of another
calibration version is ignored when its scope's first query comes, but for a
histogram on a scale that version reads (ADR 040), which carries over; one older
than :data:`MAX_AGE_S` is not restored; an unreadable one is skipped and
counted, never fatal: the scope starts from nothing, as before.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Annotated, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "MAX_AGE_S",
    "FileMixState",
    "MixStateStore",
    "ScopeState",
    "decode_states",
    "encode_states",
    "fresh",
    "parse_state",
]

log = logging.getLogger(__name__)

#: A saved histogram older than this is not restored: the traffic it describes is
#: a day old, and a cold start is the honest one.
MAX_AGE_S: Final = 86_400.0
#: Bins of a saved histogram (``ragsift.confidence.mix.HISTOGRAM_BINS``).
_BINS: Final = 20
#: A saved file past this is not read (10,000 scopes take ~4 MB).
_MAX_BYTES: Final = 16 * 2**20

_Weight = Annotated[float, Field(ge=0.0, le=1e6, allow_inf_nan=False)]
_Name = Annotated[str, Field(min_length=1, max_length=4096)]


class ScopeState(BaseModel):
    """One scope's decayed confidence histogram (its newest query at weight 1), and
    its near-miss histogram where its calibration's near-miss table has bins of its
    own (``near_counts``, ADR 039; left out of the JSON when None).

    ``scale`` and ``near_scale`` name the calibration version whose served confidence
    each histogram is binned on (ADR 040; None: ``version``'s own, and unknown for the
    near-miss one), so that a process restarted after a feedback re-fit carries them
    over as a running one does (:meth:`~.mix_monitor.MixMonitor.restore`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: _Name
    collection: _Name
    version: _Name
    counts: tuple[_Weight, ...] = Field(min_length=_BINS, max_length=_BINS)
    near_counts: tuple[_Weight, ...] | None = Field(None, min_length=_BINS, max_length=_BINS)
    scale: _Name | None = None
    near_scale: _Name | None = None
    saved_at: float = Field(default_factory=time.time, allow_inf_nan=False)


class MixStateStore(Protocol):
    """Where the mix monitor's histograms outlive a process."""

    def load(self) -> list[ScopeState]:
        """The saved states, fresh enough to restore (none: an empty list)."""
        ...

    def save(self, states: list[ScopeState]) -> None:
        """Keep ``states``, replacing what was saved for the same scopes."""
        ...


def encode_states(states: list[ScopeState]) -> str:
    """One JSON document of ``states``."""
    return json.dumps({"scopes": [s.model_dump(mode="json", exclude_none=True) for s in states]})


def decode_states(text: str | bytes, *, now: float | None = None) -> tuple[list[ScopeState], int]:
    """The restorable states in a JSON document, and how many were skipped (malformed
    or stale). A document that is not one at all is all skipped (count 1)."""
    try:
        raw = json.loads(text)
        items = raw["scopes"] if isinstance(raw, dict) else None
    except (ValueError, KeyError, RecursionError):  # RecursionError: nesting past the parser
        return [], 1
    if not isinstance(items, list):
        return [], 1
    states, skipped = fresh([parse_state(item) for item in items], now=now)
    return states, skipped


def fresh(
    states: list[ScopeState | None], *, now: float | None = None
) -> tuple[list[ScopeState], int]:
    """The states saved within :data:`MAX_AGE_S` of ``now``; how many others (or Nones)."""
    cutoff = (time.time() if now is None else now) - MAX_AGE_S
    kept = [s for s in states if s is not None and s.saved_at >= cutoff]
    return kept, len(states) - len(kept)


def parse_state(item: object) -> ScopeState | None:
    """One saved state, or None when it is not one."""
    try:
        return ScopeState.model_validate(item)
    except ValidationError:
        return None


class FileMixState:
    """States in one JSON file (the embedded runtime's ``calibrations/_mix.json``).

    A save merges with what the file holds (another process's scopes stay) and
    replaces the file atomically; a missing or unreadable file loads as nothing.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self) -> list[ScopeState]:
        """The file's fresh states (see :class:`MixStateStore`)."""
        try:
            if self.path.stat().st_size > _MAX_BYTES:
                log.warning("mix state %s is over %d bytes: not read", self.path, _MAX_BYTES)
                return []
            text = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("mix state %s unreadable: %s", self.path, exc)
            return []
        states, skipped = decode_states(text)
        if skipped:
            log.warning(
                "mix state %s: %d saved scopes skipped (stale or malformed)", self.path, skipped
            )
        return states

    def save(self, states: list[ScopeState]) -> None:
        """Merge ``states`` into the file, atomically (see :class:`MixStateStore`)."""
        merged = {(s.tenant, s.collection): s for s in self.load()}
        merged.update({(s.tenant, s.collection): s for s in states})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-mix-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(encode_states(list(merged.values())))
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
