"""A result whose signals are not finite is refused where it arrives, not at its feedback.

Before: the calibration worker remembered a result with a NaN or infinite signal
(stored as null), and every later label for that query failed to load it: the
label, a valid event, was dead-lettered with pydantic's multi-line ValidationError
at stage ``handler``, while the bad result had gone through unremarked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsift.schemas import FeedbackEvent
from ragsift.streams.codec import EventCodec
from tests.unit.workers.hostile_rig import TENANT, build_rig


@pytest.mark.parametrize("signal", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_non_finite_signals_are_a_decode_error_and_the_label_is_refused_for_what_it_is(
    tmp_path: Path, signal: str
) -> None:
    rig = await build_rig(tmp_path)
    try:
        valid, query_id = rig.valid("calibration-results")
        data = json.loads(valid)
        data["breakdown"]["signals"]["top_score"] = "__signal__"
        poison = json.dumps(data).replace('"__signal__"', signal).encode()
        for worker in ("calibration-results", "decision", "report"):
            [letter] = (await rig.feed(worker, [(poison, b"k")])).letters[0]
            assert letter.stage == "decode"
            assert "breakdown.signals.top_score: Input should be a finite number" in letter.error
        label = FeedbackEvent(event_id="f-1", query_id=query_id, tenant_id=TENANT, relevant=True)
        value = EventCodec(FeedbackEvent).encode(label)
        [letter] = (await rig.feed("calibration", [(value, b"k")])).letters[0]
        assert letter.stage == "feedback"
        assert "no scored result within the join window" in letter.error
    finally:
        await rig.close()
