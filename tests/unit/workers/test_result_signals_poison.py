"""A result with a non-finite signal cannot stop its feedback from being applied.

Before: the calibration worker remembered a result with a NaN or infinite signal
(stored as null), and every later label for that query failed to load it: the
label, a valid event, was dead-lettered with pydantic's multi-line ValidationError
at stage ``handler``. Results come from a topic, so their signals are not trusted
(``reported_signal_matrix`` reads a non-finite one as missing): the worker keeps
the result without that signal, and the label is applied.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsift.confidence.registry import CalibrationScope
from ragsift.schemas import FeedbackEvent
from ragsift.streams.codec import EventCodec
from tests.unit.workers.hostile_rig import TENANT, build_rig


@pytest.mark.parametrize("signal", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_a_label_for_a_result_with_a_non_finite_signal_is_applied(
    tmp_path: Path, signal: str
) -> None:
    rig = await build_rig(tmp_path)
    try:
        valid, query_id = rig.valid("calibration-results")
        data = json.loads(valid)
        data["breakdown"]["signals"]["top_score"] = "__signal__"
        poison = json.dumps(data).replace('"__signal__"', signal).encode()
        assert (await rig.feed("calibration-results", [(poison, b"k")])).letters[0] == []
        label = FeedbackEvent(event_id="f-1", query_id=query_id, tenant_id=TENANT, relevant=True)
        value = EventCodec(FeedbackEvent).encode(label)
        assert (await rig.feed("calibration", [(value, b"k")])).letters[0] == []
        [stored] = rig.feedback.store.labels(CalibrationScope(rig.result.collection, TENANT))
        assert stored.record.query_id == query_id
        assert "top_score" not in stored.record.signals  # missing, as the re-fit reads it
        assert stored.record.signals.keys() == rig.result.breakdown.signals.keys() - {"top_score"}
    finally:
        await rig.close()
