"""Run ragsift's command line logging each batch's times to a file (bench/pace.py).

Either runtime (ADR 018): the hooks wrap the Faust agents' producer and the
plain runtime's sender alike.

    python bench/paced.py LOG worker retrieval ...

One line per batch, appended to LOG: when the router started on it, when it
finished, when the flush after it returned (all ``perf_counter``
seconds), how many messages it held, the process's CPU seconds during the
router's work, and the seconds of that work spent handing outputs to the
producer (``send``: it can wait for room in the producer's buffer). What happens between one batch's
flush and the next batch's start is the agent waiting for (and acknowledging)
the next batch. A line is a few microseconds of a batch's tens of milliseconds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faust.transport.drivers.aiokafka import Producer

import ragsift.streams.agents as agents
from ragsift.cli import main
from ragsift.streams import plain
from ragsift.streams.agents import _ProducerSender
from ragsift.streams.routing import BatchRouter, Received

LOG = Path(sys.argv[1])
_log = LOG.open("a", buffering=1)  # line-buffered: each batch's line is on disk at once
_process = BatchRouter.process
_flush = Producer.flush
# The agents' flush (sends lingering outputs at once); absent in a checkout from
# before it, whose agents call the producer's flush.
_flush_now = getattr(agents, "flush_now", None)
_send = _ProducerSender.send
_plain_send = plain._Sender.send
_plain_flush = plain._Sender.flush
_batch: list[float] = []
_sending = [0.0]


async def _timed_process(self: BatchRouter, batch: Sequence[Received]) -> None:
    _sending[0] = 0.0
    cpu = time.process_time()
    _batch[:] = [time.perf_counter()]
    await _process(self, batch)
    _batch.extend((time.perf_counter(), float(len(batch)), time.process_time() - cpu))


async def _timed_send(self: _ProducerSender, topic: str, key: bytes, value: bytes) -> None:
    start = time.perf_counter()
    await _send(self, topic, key, value)
    _sending[0] += time.perf_counter() - start


async def _timed_plain_send(self: plain._Sender, topic: str, key: bytes, value: bytes) -> None:
    start = time.perf_counter()
    await _plain_send(self, topic, key, value)
    _sending[0] += time.perf_counter() - start


async def _timed_plain_flush(self: plain._Sender, *, partial: bool) -> None:
    await _plain_flush(self, partial=partial)
    _flushed()


def _flushed() -> None:
    if len(_batch) == 4:  # a flush after a batch (not one of Faust's own at shutdown)
        start, processed, size, cpu = _batch
        line = f"{start} {processed} {time.perf_counter()} {int(size)} {cpu} {_sending[0]}"
        _log.write(line + "\n")
        _batch.clear()


async def _timed_flush(self: Producer) -> Any:
    done = await _flush(self)
    _flushed()
    return done


async def _timed_flush_now(producer: Any) -> None:
    assert _flush_now is not None
    await _flush_now(producer)
    _flushed()


BatchRouter.process = _timed_process  # type: ignore[method-assign]  # bench-only hooks
Producer.flush = _timed_flush  # type: ignore[method-assign]
if _flush_now is not None:
    agents.flush_now = _timed_flush_now
_ProducerSender.send = _timed_send  # type: ignore[method-assign]
plain._Sender.send = _timed_plain_send  # type: ignore[method-assign]
plain._Sender.flush = _timed_plain_flush  # type: ignore[method-assign]
sys.argv = ["ragsift", *sys.argv[2:]]
main()
