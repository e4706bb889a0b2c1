"""Server-Sent Events: a run's frames as they are produced (and recorded, so a client can
rejoin), or a stored stream followed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from .. import lifecycle
from ..services.streams import Frame, StreamRecorder, encode_frame

_running: set[asyncio.Task] = set()

_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

#: The OpenAPI entry of a route's stream (`responses={200: STREAM_DOC}`).
STREAM_DOC: dict[str, Any] = {
    "description": (
        "Server-Sent Events: each event's `id:` is its sequence number; send it back as"
        " `starting_after` or `Last-Event-ID` to rejoin after it"
    ),
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


def sse_response(
    frames: AsyncIterator[Frame],
    recorder: StreamRecorder | None = None,
    *,
    ended: Callable[[], bool] = lambda: True,
) -> StreamingResponse:
    """The frames as `text/event-stream`, each with its `id:`. They are produced in their own
    task: a client that goes away does not stop the work, which finishes, is stored, and goes
    on being recorded (`recorder`, None for a stream nobody can rejoin). `ended()`, asked when
    the frames stop: whether the stream is over (False: it goes on later, as a paused turn's)."""
    return _LiveStream(
        _live(frames, recorder, ended), media_type="text/event-stream", headers=_HEADERS
    )


class _LiveStream(StreamingResponse):
    """A run's stream, sent without StreamingResponse's watch for the client going away (an
    anyio task group and a second task per request, under uvicorn's ASGI 2.3): the run goes on
    in its own task whether anyone reads or not, and the server drops what is sent after a
    disconnect, so the answer simply ends with the run."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        async for chunk, last in self.body_iterator:  # (bytes, whether the stream ends there)
            await send({"type": "http.response.body", "body": chunk, "more_body": not last})


def follow_response(frames: AsyncIterator[Frame]) -> StreamingResponse:
    """A followed stream: it ends when the client goes (nothing runs on its behalf)."""
    return StreamingResponse(
        (encode_frame(frame).encode() async for frame in frames),
        media_type="text/event-stream",
        headers=_HEADERS,
    )


async def _live(
    frames: AsyncIterator[Frame], recorder: StreamRecorder | None, ended: Callable[[], bool]
) -> AsyncIterator[tuple[bytes, bool]]:
    """The frames' SSE text as they come, each piece with whether the stream ends with it (the
    last frames and the end of the body go out in one send)."""
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    async def pump() -> None:
        # The run's lifecycle event goes out right after the log's last write.
        held = lifecycle.hold() if recorder is not None else []
        try:
            async for frame in frames:
                if recorder is not None:
                    recorder.add(frame)
                queue.put_nowait(frame)  # unbounded: put would never wait either
        finally:
            # The end is written (and the event sent) before the client's stream ends: a
            # Lambda may be frozen once its answer is complete.
            if recorder is not None:
                await recorder.close(final=ended(), then=held)
            queue.put_nowait(done)

    task = asyncio.create_task(pump())
    _running.add(task)
    task.add_done_callback(_running.discard)
    ending = False
    while not ending:
        # The frames produced since the last send go out together: a model that answers at
        # once yields several per wakeup, and each send is a pass through the ASGI stack and
        # a system call.
        frames = [await queue.get()]
        while not queue.empty():
            frames.append(queue.get_nowait())
        ending = frames[-1] is done
        text = "".join(encode_frame(f) for f in frames if f is not done)
        if text or ending:
            yield text.encode(), ending
