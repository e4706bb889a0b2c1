"""Routes of the responses function: the OpenAI Responses API under /v1/openai/v1/responses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from ..api.common import Order
from ..api.responses import (
    MAX_MODEL_ID_LENGTH,
    CompactedResponse,
    CompactResponseRequest,
    CountInputTokensRequest,
    CreateOpenaiResponseRequest,
    InputTokenCount,
    ListOpenAIResponseInputItem,
    ListOpenAIResponseObject,
    OpenAIDeleteResponseObject,
    OpenAIResponseObject,
)
from ..api.traces import Trace
from ..errors import InvalidRequest, NotFound
from ..services.streams import Frame, ResponseFrames, StreamKey, StreamRecorder
from .common import (
    ID_PATTERN,
    LastEventId,
    StartingAfter,
    json_response,
    rejoin_point,
    trace_response,
)
from .deps import Svc, Tenant
from .direct_route import DirectRoute
from .sse import STREAM_DOC, follow_response, sse_response

ResponseId = Annotated[str, Path(pattern=ID_PATTERN)]

router = APIRouter(prefix="/v1/openai/v1/responses", tags=["Responses"])


async def create_response(body: CreateOpenaiResponseRequest, tenant: Tenant, svc: Svc) -> Response:
    if body.background:  # answered at once, `queued`; the background worker runs it
        queued = await svc.background.submit(tenant, body)
        if body.stream:  # its events as the worker stores them
            key = StreamKey.response(queued.id)
            alive = _alive(svc, tenant, queued.id)
            return follow_response(svc.streams.follow(tenant, key, -1, alive=alive))
        return json_response(queued)
    run = await svc.responses_engine.start(tenant, body)
    if run.stream:
        if not run.store:  # a response not stored (`store: false`) keeps nothing, its events too
            return sse_response(_frames(run.events(plain_text=True)))
        recorded = _Recorded(svc.streams.recorder(tenant, StreamKey.response(run.response.id)))
        events = run.events(plain_text=True, end_with=recorded.end_with)
        return sse_response(recorded.frames(events), recorded.recorder)
    return json_response(await run.result())  # RunFailed: the error handler answers


# A run's POST skips FastAPI's per-request solving of its parameters (DirectRoute).
router.add_api_route(
    "",
    create_response,
    methods=["POST"],
    responses={200: {"model": OpenAIResponseObject}},
    route_class_override=DirectRoute,
)


@router.post("/input_tokens", response_model=InputTokenCount)
async def count_input_tokens(
    body: CountInputTokensRequest, tenant: Tenant, svc: Svc
) -> InputTokenCount:
    """The input tokens a response with this input, context and tools would start with: the
    model's own count where its provider has one (Bedrock), else the context window's estimate
    (4 characters a token). Nothing runs or is stored."""
    count = await svc.responses_engine.input_tokens(tenant, body)
    return InputTokenCount(input_tokens=count)


@router.post("/compact", response_model=CompactedResponse)
async def compact_response(
    body: CompactResponseRequest, tenant: Tenant, svc: Svc
) -> CompactedResponse:
    """The conversation's user messages and one compaction item, an opaque blob holding the
    model's summary of the rest; sent back as input, the item stands for what it compacted.
    Nothing is stored."""
    return await svc.responses_engine.compact(tenant, body)


async def _frames(events: AsyncIterator[Any]) -> AsyncIterator[Frame]:
    frame = ResponseFrames()
    async for event in events:
        yield frame(event)


class _Recorded:
    """A recorded response's frames, its stream's last write made with the response's end
    (`StreamRecorder.end_with`): the end event's frame is made once, for that write and for
    the client."""

    def __init__(self, recorder: StreamRecorder) -> None:
        self.recorder = recorder
        self._end: tuple[Any, Frame] | None = None
        self._frame = ResponseFrames()

    async def end_with(self, event: Any) -> Any:
        frame = self._frame(event)
        self._end = (event, frame)
        return await self.recorder.end_with(frame)

    async def frames(self, events: AsyncIterator[Any]) -> AsyncIterator[Frame]:
        async for event in events:
            end = self._end
            yield end[1] if end is not None and end[0] is event else self._frame(event)


@router.get("", responses={200: {"model": ListOpenAIResponseObject}})
def list_responses(
    tenant: Tenant,
    svc: Svc,
    after: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    model: Annotated[str | None, Query(max_length=MAX_MODEL_ID_LENGTH)] = None,
    order: Order = Order.desc,
) -> Response:
    data, has_more = svc.responses.list(
        tenant, after=after, limit=limit, model=model, descending=order == Order.desc
    )
    return json_response(
        ListOpenAIResponseObject(
            data=data,
            has_more=has_more,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
        )
    )


#: A response still running: its stream may grow.
_RUNNING = ("queued", "in_progress")


@router.get(
    "/{response_id}",
    responses={
        200: {
            "model": OpenAIResponseObject,
            **STREAM_DOC,
            "description": (
                "The response; with `stream=true`, its events after `starting_after` (or"
                " `Last-Event-ID`) as Server-Sent Events, replayed from the store and followed"
                " to the run's end"
            ),
        }
    },
)
async def get_response(
    response_id: ResponseId,
    tenant: Tenant,
    svc: Svc,
    stream: Annotated[
        bool, Query(description="Stream the response's events (SSE) instead of the object")
    ] = False,
    starting_after: StartingAfter = None,
    include: Annotated[list[str] | None, Query(max_length=32)] = None,
    include_obfuscation: bool | None = None,
    last_event_id: LastEventId = None,
) -> Response:
    """The response object; with `stream=true`, its stream rejoined: the stored events after
    `starting_after` (or `Last-Event-ID`), then the live run's until it ends. `include` and
    `include_obfuscation` are accepted (the openai SDK may send them) and change nothing:
    events are replayed as they were sent."""
    if not stream:
        stored = await asyncio.to_thread(svc.responses.get, tenant, response_id)
        public = stored.model_dump(exclude={"input"})
        return json_response(OpenAIResponseObject.model_validate(public))
    after = rejoin_point(starting_after, last_event_id)
    key = StreamKey.response(response_id)

    now, last = await asyncio.gather(
        _status(svc, tenant, response_id), svc.streams.last_sequence(tenant, key)
    )
    if last < 0:
        if now is None:
            raise NotFound(f"Response {response_id} not found")
        if now not in _RUNNING:
            raise InvalidRequest(
                f"Response {response_id} has no stored events (it was not streamed, or they are"
                " past their retention): GET it without stream"
            )
    alive = _alive(svc, tenant, response_id)
    return follow_response(svc.streams.follow(tenant, key, after, alive=alive))


async def _status(svc: Any, tenant: str, response_id: str) -> str | None:
    try:
        return (await asyncio.to_thread(svc.responses.get, tenant, response_id)).status
    except NotFound:  # gone, or (a response whose start could not be written) never stored
        return None


def _alive(svc: Any, tenant: str, response_id: str) -> Callable[[], Awaitable[bool]]:
    """Whether the response still runs: its stream may grow."""

    async def alive() -> bool:
        now = await _status(svc, tenant, response_id)
        if now is None:  # not stored (its start's write lost), unless deleted with its events
            return await svc.streams.last_sequence(tenant, StreamKey.response(response_id)) >= 0
        return now in _RUNNING

    return alive


@router.post("/{response_id}/cancel", responses={200: {"model": OpenAIResponseObject}})
def cancel_response(response_id: ResponseId, tenant: Tenant, svc: Svc) -> Response:
    """Cancel a background response: queued, it never runs; running, it stops at its next
    event boundary and keeps what it produced. A finished one is answered as it is; a
    response not created with `background: true` is a 400."""
    cancelled = svc.responses.cancel(tenant, response_id)
    return json_response(
        OpenAIResponseObject.model_validate(cancelled.model_dump(exclude={"input"}))
    )


@router.get("/{response_id}/input_items", responses={200: {"model": ListOpenAIResponseInputItem}})
def list_input_items(
    response_id: ResponseId,
    tenant: Tenant,
    svc: Svc,
    after: str | None = None,
    before: str | None = None,
    include: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Order = Order.desc,
) -> Response:
    """Items in `order`; `after` / `before` name item ids bounding the page (exclusive)."""
    items = list(svc.responses.get(tenant, response_id).input)
    if order == Order.desc:
        items.reverse()
    ids = [item.id for item in items]
    start, end = 0, len(items)
    if after is not None:
        start = ids.index(after) + 1 if after in ids else len(items)
    if before is not None:
        end = ids.index(before) if before in ids else 0
    page = items[start:end]
    data = page[:limit]
    return json_response(
        ListOpenAIResponseInputItem(
            data=data,
            has_more=len(page) > limit,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
        )
    )


@router.get("/{response_id}/trace", responses={200: {"model": Trace}})
def get_response_trace(response_id: ResponseId, tenant: Tenant, svc: Svc) -> Response:
    """The response's trace (an extension): a span per run (a background response may take
    several invocations), with a child per model call, tool call, MCP listing and shield check.
    Stored with the response's end: `complete` is false while it runs."""
    status, stored = svc.responses.trace(tenant, response_id)
    return trace_response(response_id, stored, complete=status not in ("queued", "in_progress"))


@router.delete("/{response_id}", responses={200: {"model": OpenAIDeleteResponseObject}})
def delete_response(response_id: ResponseId, tenant: Tenant, svc: Svc) -> Response:
    svc.responses.delete(tenant, response_id)
    return json_response(OpenAIDeleteResponseObject(id=response_id))
