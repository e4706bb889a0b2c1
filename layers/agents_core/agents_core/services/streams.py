"""Streams that can be rejoined: every SSE frame a streamed response or turn sends is recorded
in the table as it is sent, and a client that lost its connection follows the stored log from
the last event it had, on to the live run's end.

The producer records through a `StreamRecorder`: `add` only buffers (the stream is never slowed
by a write); a background task writes the buffer once it is `STREAM_FLUSH_SECONDS` old, or
sooner when it nears an item's size, so a stream costs a few writes a second, not one per
delta, and a run shorter than the interval one write in all (with its end mark). A follower
that comes before the first write waits for it, as for any later frame. A follower (`follow`)
in any Lambda polls the table every `STREAM_POLL_SECONDS` for frames after the last it yielded
until it reads the end mark; while nothing new comes it asks the caller's `alive()` every
`STREAM_ALIVE_CHECK_SECONDS`, and it stops after `STREAM_FOLLOW_MAX_SECONDS` in any case.

    recorder = services.streams.recorder(tenant, StreamKey.response(response_id))
    frame = ResponseFrames()                 # a response's; a turn's: turn_frame(seq, item)
    recorder.add(frame(event))               # per event, as it is sent
    await recorder.close()                   # flush; marks the end

    async for frame in services.streams.follow(tenant, key, after=41, alive=still_running):
        yield encode_frame(frame)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from json.encoder import encode_basestring as _json_string
from typing import Any

from .. import blocking, metrics
from ..api.common import TextDelta
from ..engine.loop import ModelCallStarted, TurnStarted
from ..engine.loop import TextDelta as PlainTextDelta
from ..errors import RunFailed
from ..log import logger
from ..settings import Settings
from ..store import keys
from ..store.stream_events import (
    ITEM_PAYLOAD_BYTES,
    Frame,
    StreamEnd,
    StreamEventStore,
    Where,
)

__all__ = [
    "Frame",
    "ResponseFrames",
    "StreamKey",
    "StreamLog",
    "StreamRecorder",
    "encode_frame",
    "response_frame",
    "turn_frame",
]

#: Characters buffered that make the recorder write at once (a flush then fits an item or two).
_FLUSH_CHARS = ITEM_PAYLOAD_BYTES // 2


@dataclass(frozen=True)
class StreamKey:
    """Which stream: a response's, or a turn's (one stream across the turn's pauses)."""

    kind: str
    owner: str  # the response id, or the turn's session id
    turn_id: str = ""

    @classmethod
    def response(cls, response_id: str) -> StreamKey:
        return cls("response", response_id)

    @classmethod
    def turn(cls, session_id: str, turn_id: str) -> StreamKey:
        return cls("turn", session_id, turn_id)

    def where(self, tenant: str) -> Where:
        if self.kind == "response":
            return Where(keys.response_pk(tenant, self.owner), keys.response_events_prefix())
        return Where(keys.session_pk(tenant, self.owner), keys.turn_events_prefix(self.turn_id))


def response_frame(event: Any) -> Frame:
    """An engine Responses stream event as the frame sent for it."""
    seq = event.sequence_number
    if event.type == "response.output_text.delta" and not event.logprobs:
        # A text delta, the event a long answer is made of, written as pydantic writes it
        # (told by its type, so a turns function needs no Responses models).
        item_id, delta = _json_string(event.item_id), _json_string(event.delta)
        return Frame(
            seq,
            event.type,
            f'{{"sequence_number":{seq},"type":"response.output_text.delta","item_id":{item_id},'
            f'"output_index":{event.output_index},"content_index":{event.content_index},'
            f'"delta":{delta},"logprobs":[]}}',
        )
    return Frame(seq=seq, event=event.type, data=event.model_dump_json())


class ResponseFrames:
    """One response stream's events as frames (`response_frame`). `response.created` and
    `response.in_progress` carry the same snapshot of the response, whose JSON, most of either
    frame, is written once for both."""

    def __init__(self) -> None:
        self._snapshot: tuple[Any, str] | None = None  # (the response, its JSON)

    def __call__(self, event: Any) -> Frame:
        kind = event.type
        if kind != "response.created" and kind != "response.in_progress":
            return response_frame(event)
        response, seq = event.response, event.sequence_number
        if self._snapshot is None or self._snapshot[0] is not response:
            self._snapshot = (response, response.model_dump_json())
        data = self._snapshot[1]
        if kind == "response.in_progress":  # the pair is written: nothing kept
            self._snapshot = None
        return Frame(seq, kind, f'{{"sequence_number":{seq},"type":"{kind}","response":{data}}}')


def turn_frame(seq: int, item: Any) -> Frame:
    """A turn's stream item as the frame sent for it: `data: <chunk>`, or at the end Llama
    Stack's `data: {"error": ...}` for a RunFailed; its id is the event's index in the turn's
    stream."""
    kind = type(item)
    # What TurnRun.events(plain_text=True) yields for its most frequent chunks.
    if kind is PlainTextDelta:
        return _text_progress(seq, "inference", item.step_id, item.text)
    if kind is TurnStarted:
        return _turn_start(seq, item.turn_id)
    if kind is ModelCallStarted:
        return _step_start(seq, "inference", item.step_id)
    if isinstance(item, RunFailed):
        error = {"message": item.message, "status": item.status, **item.ids}
        return Frame(seq, None, json.dumps({"error": error}))
    payload = item.event.payload
    event_type = payload.event_type
    if event_type == "turn_start":
        return _turn_start(seq, payload.turn_id)
    if event_type == "step_start" and not payload.metadata:
        return _step_start(seq, payload.step_type, payload.step_id)
    if event_type == "step_progress" and type(payload.delta) is TextDelta:
        return _text_progress(seq, payload.step_type, payload.step_id, payload.delta.text)
    return Frame(seq, None, item.model_dump_json())


def _turn_start(seq: int, turn_id: str) -> Frame:
    """Every run's first chunk, as pydantic writes it."""
    turn_id = _json_string(turn_id)
    return Frame(
        seq, None, f'{{"event":{{"payload":{{"event_type":"turn_start","turn_id":{turn_id}}}}}}}'
    )


def _step_start(seq: int, step_type: str, step_id: str) -> Frame:
    """A step's start without metadata, as pydantic writes it."""
    step_type, step_id = _json_string(step_type), _json_string(step_id)
    return Frame(
        seq,
        None,
        f'{{"event":{{"payload":{{"event_type":"step_start","step_type":{step_type},'
        f'"step_id":{step_id},"metadata":{{}}}}}}}}',
    )


def _text_progress(seq: int, step_type: str, step_id: str, text: str) -> Frame:
    """A text delta's chunk, the chunk a long answer is made of, written as pydantic writes it
    (its strings escaped the same way), in a sixth of the time. Told by its event type, so a
    responses function needs no Agents API models."""
    step_type, step_id, text = map(_json_string, (step_type, step_id, text))
    return Frame(
        seq,
        None,
        f'{{"event":{{"payload":{{"event_type":"step_progress","step_type":{step_type},'
        f'"step_id":{step_id},"delta":{{"type":"text","text":{text}}}}}}}}}',
    )


def encode_frame(frame: Frame) -> str:
    """The SSE text of a frame; its `id:` is the sequence number a client rejoins after."""
    head = f"id: {frame.seq}\n" + (f"event: {frame.event}\n" if frame.event is not None else "")
    if "\n" not in frame.data:  # JSON as the serializers write it: one line
        return f"{head}data: {frame.data}\n\n"
    data = "".join(f"data: {line}\n" for line in frame.data.split("\n"))
    return f"{head}{data}\n"


class StreamLog:
    """Recorders and followers of the stored streams."""

    def __init__(self, store: StreamEventStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    def recorder(self, tenant: str, stream: StreamKey) -> StreamRecorder:
        return StreamRecorder(self.store, stream.where(tenant), self.settings.stream_flush_seconds)

    async def last_sequence(self, tenant: str, stream: StreamKey) -> int:
        """The highest sequence number stored; -1 when nothing is."""
        return await blocking.run(self.store.last_sequence, stream.where(tenant))

    async def continues_at(
        self, tenant: str, stream: StreamKey, counted: int | None, log: dict[str, Any]
    ) -> int | None:
        """The number of the next event of a stream that goes on in a new run: `counted`, the
        events its owner counted so far, when known (a paused turn's state keeps them); else
        the one after the last stored. None when that cannot be read: the run goes on and
        streams all the same, unrecorded."""
        if counted is not None:
            return counted
        try:
            return await self.last_sequence(tenant, stream) + 1
        except Exception:
            logger.exception("stream's last event not read", extra=log)
            return None

    async def follow(
        self,
        tenant: str,
        stream: StreamKey,
        after: int,
        *,
        alive: Callable[[], Awaitable[bool]],
    ) -> AsyncIterator[Frame]:
        """Each stored frame with seq > `after`, once and in order, then the live run's frames
        as they are stored, until the end mark; or until `alive()` says the run is over and a
        last grace period brought no end mark; or until the overall bound."""
        s = self.settings
        where = stream.where(tenant)
        now = time.monotonic()
        deadline = now + s.stream_follow_max_seconds
        cursor = await blocking.run(self.store.start, where, after)
        last = after
        asked = now  # when alive() was last asked, or something new last came
        gone_at: float | None = None  # when alive() said the run is over
        while True:
            page = await blocking.run(self.store.read, where, cursor)
            cursor = page.cursor
            for frame in page.frames:
                if frame.seq > last:
                    last = frame.seq
                    yield frame
            if page.final:
                return
            now = time.monotonic()
            if page.frames:
                asked = now
            elif gone_at is not None:
                # The run ended: its last flush (with the end mark) lands within moments.
                if now - gone_at >= s.stream_flush_seconds * 2 + 1:
                    return
            elif now - asked >= s.stream_alive_check_seconds:
                asked = now
                if not await alive():
                    gone_at = now
            if now >= deadline:
                logger.info("stream follower reached its bound", extra={"after": last})
                return
            await asyncio.sleep(s.stream_poll_seconds)


class StreamRecorder:
    """Buffers a stream's frames and writes them in the background, a write per flush. A write
    that fails is logged and counted (`StreamEventsNotStored`) and its frames are skipped: the
    live stream goes on, and a follower sees a gap in the sequence numbers there.

    The writer task starts only once a flush is due (the first frame a flush interval old, or
    the buffer full): most runs end sooner, and their frames are written once, by `close`."""

    def __init__(self, store: StreamEventStore, where: Where, flush_seconds: float) -> None:
        self._store = store
        self._where = where
        self._flush_seconds = flush_seconds
        self._buffer: list[Frame] = []
        self._chars = 0
        self._oldest = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._due: asyncio.TimerHandle | None = None  # starts the task when a flush is due
        self._closing = False
        self._final = True
        self._then: list[Callable[[], None]] = []
        self._end: StreamEnd | None = None  # the last write, handed to the run's end
        self._end_seq = -1  # the end's frame
        self.writes = 0  # requests made (for the benchmark and tests)

    def add(self, frame: Frame) -> None:
        """Buffer `frame` (called inside the event loop; never waits)."""
        if self._closing:
            logger.warning("frame added to a closed stream recorder", extra={"seq": frame.seq})
            return
        if not self._buffer:
            self._oldest = time.monotonic()
            self._wake.set()
        self._buffer.append(frame)
        self._chars += len(frame.data)
        if self._chars >= _FLUSH_CHARS:
            self._wake.set()
            self._oldest = -self._flush_seconds  # due now
            self._start()
        elif self._task is None and self._due is None and self._end is None:
            self._due = asyncio.get_running_loop().call_later(self._flush_seconds, self._start)

    def _start(self) -> None:
        self._due = None
        if self._task is None and not self._closing and self._end is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def end_with(self, frame: Frame) -> StreamEnd | None:
        """The stream's last write, ending with `frame` (the run's end event, about to be
        stored), for the run's end to make in its own transaction: one request fewer, and a
        round trip less before the client's stream ends. None when it would take more than one
        item (`close` writes as usual). A write under way lands first (a reader must never see
        an item before those sorting ahead of it); none starts after. Once the end `landed`,
        `close` writes nothing (the frame, added as it is sent, is in it); else it writes the
        frames as it would have."""
        if self._closing or self._end is not None:
            return None
        if self._due is not None:
            self._due.cancel()
            self._due = None
        self._end = StreamEnd([])
        if self._task is not None:  # stopped after any write under way, with no last flush
            self._wake.set()
            await self._task
            self._task = None
        try:
            items = self._store.items(self._where, [*self._buffer, frame], final=True)
        except Exception:
            logger.exception("stream's end not packed", extra={"seq": frame.seq})
            return None
        if len(items) != 1:
            return None
        self._end.items, self._end_seq = items, frame.seq
        return self._end

    async def close(self, *, final: bool = True, then: list[Callable[[], None]] = ()) -> None:
        """Write what is left; `final` marks the stream ended (False: a run continued in
        another invocation, whose recorder appends after `StreamLog.last_sequence`). `then`:
        blocking calls that never raise (held lifecycle events), made right after that write,
        so the event never announces an end the log does not hold yet."""
        if self._closing:
            return
        self._closing, self._final, self._then = True, final, list(then)
        if self._due is not None:
            self._due.cancel()
            self._due = None
        if self._end is not None and self._end.landed:  # written with the run's end
            after = [frame for frame in self._buffer if frame.seq > self._end_seq]
            if after:
                logger.warning("frames after a stream's end", extra={"seq": after[0].seq})
            self._buffer, self._chars = [], 0
            await self._flush(final=False)  # `then` only
            return
        if self._task is None:
            await self._flush(final=final)
            return
        self._wake.set()
        await self._task

    async def _run(self) -> None:
        while not self._closing:
            if self._end is not None:  # the last write goes with the run's end
                return
            await self._wake.wait()
            self._wake.clear()
            while self._buffer and not self._closing and self._end is None:
                delay = self._oldest + self._flush_seconds - time.monotonic()
                if delay <= 0:
                    break
                try:
                    async with asyncio.timeout(delay):  # no task of its own, as wait_for's
                        await self._wake.wait()
                    self._wake.clear()
                except TimeoutError:
                    break
            if self._buffer and not self._closing and self._end is None:
                await self._flush(final=False)
        await self._flush(final=self._final)

    async def _flush(self, *, final: bool) -> None:
        frames, self._buffer, self._chars = self._buffer, [], 0
        then, self._then = (self._then, []) if self._closing else ([], self._then)
        if not frames and not final and not then:
            return
        try:
            self.writes += await blocking.run(self._write, frames, final, then)
        except Exception:  # the live stream goes on; the log has a gap
            logger.exception(
                "stream events not stored",
                extra={"first": frames[0].seq if frames else None, "frames": len(frames)},
            )
            metrics.count("StreamEventsNotStored")

    def _write(self, frames: list[Frame], final: bool, then: list[Callable[[], None]]) -> int:
        """Under `blocking.run`: packing the items (compression) and the requests; then
        `then`."""
        try:
            if not frames and not final:
                return 0
            return self._store.write(self._store.items(self._where, frames, final=final))
        finally:
            for call in then:
                call()
