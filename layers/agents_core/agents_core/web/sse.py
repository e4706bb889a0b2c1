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
    produced = _Produced()

    async def pump() -> None:
        # The run's lifecycle event goes out right after the log's last write.
        held = lifecycle.hold() if recorder is not None else []
        try:
            async for frame in frames:
                if recorder is not None:
                    recorder.add(frame)
                produced.put(frame)
        finally:
            # The end is written (and the event sent) before the client's stream ends: a
            # Lambda may be frozen once its answer is complete.
            if recorder is not None:
                await recorder.close(final=ended(), then=held)
            produced.end()

    task = asyncio.create_task(pump())
    _running.add(task)
    task.add_done_callback(_running.discard)
    ending = False
    while not ending:
        # The frames produced since the last send go out together: a model that answers at
        # once yields several per wakeup, and each send is a pass through the ASGI stack and
        # a system call.
        batch, ending = await produced.taken()
        text = "".join([encode_frame(frame) for frame in batch])
        if text or ending:
            yield text.encode(), ending


class _Produced:
    """The frames a run's task has produced and the answer not yet sent, and whether the run
    ended: one task puts, one takes. An asyncio.Queue did the same with a dozen calls a frame
    (its getters' queue, its checks of being full and empty)."""

    def __init__(self) -> None:
        self._frames: list[Frame] = []
        self._ended = False
        self._waiter: asyncio.Future | None = None

    def put(self, frame: Frame) -> None:
        self._frames.append(frame)
        self._wake()

    def end(self) -> None:
        self._ended = True
        self._wake()

    async def taken(self) -> tuple[list[Frame], bool]:
        """What was produced since the last call (waiting until something was), and whether
        the run has ended."""
        if not (self._frames or self._ended):
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frames, self._frames = self._frames, []
        return frames, self._ended

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
