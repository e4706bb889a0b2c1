"""Server-Sent Events from an engine's event stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse

_running: set[asyncio.Task] = set()


def sse_response(events: AsyncIterator[Any], encode: Callable[[Any], str]) -> StreamingResponse:
    """`encode(event)` per event, as `text/event-stream`. The events are produced in their own
    task: a client that goes away does not stop the work, which finishes and is stored."""
    return StreamingResponse(
        _frames(events, encode),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _frames(events: AsyncIterator[Any], encode: Callable[[Any], str]) -> AsyncIterator[bytes]:
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        finally:
            await queue.put(done)

    task = asyncio.create_task(pump())
    _running.add(task)
    task.add_done_callback(_running.discard)
    while (event := await queue.get()) is not done:
        yield encode(event).encode()
