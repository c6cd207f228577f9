"""A Faust worker for the integration tests: decode queries, echo them, dead-letter the rest.

Run as ``python tests/integration/apps/echo.py worker --web-port N``; topic names
and the app id come from ECHO_* environment variables so tests never collide.
"""

from __future__ import annotations

import os
from typing import Any

from ragsift.errors import DecodeError
from ragsift.schemas import DeadLetter, QueryEvent
from ragsift.settings import KafkaSettings
from ragsift.streams.app import create_app
from ragsift.streams.codec import EventCodec

app = create_app(KafkaSettings(), app_id=os.environ.get("ECHO_APP_ID", "ragsift-echo"))
source = app.topic(
    os.environ.get("ECHO_IN", "echo-in"), value_type=bytes, value_serializer="raw", partitions=2
)
echoed = app.topic(os.environ.get("ECHO_OUT", "echo-out"), value_serializer="raw")
dead = app.topic(os.environ.get("ECHO_DLQ", "echo-dlq"), value_serializer="raw")
codec = EventCodec(QueryEvent)


@app.agent(source)
async def echo(stream: Any) -> None:
    """Echo valid QueryEvents; dead-letter undecodable ones with their bytes and position."""
    async for event in stream.events():
        raw: bytes = event.value
        try:
            query = codec.decode(raw)
        except DecodeError as exc:
            letter = DeadLetter.build(
                original=raw,
                stage=exc.stage,
                error_type=type(exc).__name__,
                error=exc.message,
                worker="echo",
                topic=event.message.topic,
                partition=event.message.partition,
                offset=event.message.offset,
            )
            await dead.send(value=letter.model_dump_json().encode())
            continue
        await echoed.send(key=query.query_id.encode(), value=codec.encode(query))


if __name__ == "__main__":
    app.main()
