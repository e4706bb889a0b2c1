"""The agent loop: what a turn or a response does next, for both APIs.

Call the model (streamed or not), collect its tool calls, and route each: a client tool pauses
the run until the client sends its result; a server-side tool runs here; an unknown tool gets an
error result the model can read. Repeat within the iteration budget, then end. The loop stores
nothing and knows neither API: it emits neutral events, and each API face (`turns`,
`responses`) maps them to its own wire events and stored shape.

    loop = AgentLoop(provider, request, Tools(client=frozenset({"get_weather"})), max_iterations=10)
    async for event in loop.run():
        ...  # ModelCallStarted, TextDelta, ToolCallDelta, ModelReplied, ToolsStarted,
             # ToolFinished, ToolsRan, then one of Paused, Finished, Suspended, Failed

A run can stop at a step boundary and go on elsewhere: its state is `request.messages` and the
two counters. A loop built on messages whose last reply has server-side calls without results
runs those first (a run that stopped, or crashed, between a reply and its tools' results).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypeVar

from ..errors import UpstreamTimeout
from ..ids import new_id
from ..inference import types as model
from ..inference.types import ChatMessage, ChatRequest, ChatToolCall, Provider, Usage

T = TypeVar("T")


def now() -> datetime:
    return datetime.now(UTC)


# --- neutral events ---------------------------------------------------------------------------


@dataclass
class TurnStarted:
    """Not the loop's: a turn run's first chunk (turn_start) as `TurnRun.events(plain_text=True)`
    yields it, here with the loop's events it yields so, which an SSE writer reads without the
    Agents API models (a responses function loads none)."""

    turn_id: str


@dataclass
class ModelCallStarted:
    step_id: str
    started_at: datetime


@dataclass
class TextDelta:
    step_id: str
    text: str


@dataclass
class ReasoningDelta:
    step_id: str
    text: str


@dataclass
class ToolCallDelta:
    """A piece of the call at `index` in this model reply; `call_id` and `name` are known from
    the call's first piece on."""

    step_id: str
    index: int
    call_id: str
    name: str
    arguments: str


@dataclass
class ModelReplied:
    step_id: str
    started_at: datetime
    completed_at: datetime
    text: str
    tool_calls: list[ChatToolCall]
    finish: Literal["stop", "tool_calls", "length"]
    usage: Usage | None


@dataclass
class ToolResult:
    call: ChatToolCall
    content: str
    is_error: bool = False


@dataclass
class ToolsStarted:
    """The calls about to run here, all at once; their results come in the ToolsRan with the
    same step id."""

    step_id: str
    started_at: datetime
    calls: list[ChatToolCall]


@dataclass
class ToolFinished:
    """One call of a ToolsStarted answered, as soon as it is: its result is already in the
    request's messages, so a run stored now never runs it again."""

    step_id: str
    result: ToolResult


@dataclass
class ToolsRan:
    """Calls answered here (server-side tools, unknown tools), with their results."""

    step_id: str
    started_at: datetime
    completed_at: datetime
    results: list[ToolResult]


@dataclass
class ShieldChecked:
    """The run's shields looked at its input (before the first model call) or at an answer;
    `violation` (a SafetyViolation) when one blocked it."""

    step_id: str
    started_at: datetime
    completed_at: datetime
    source: Literal["input", "output"]
    violation: Any | None


@dataclass
class Paused:
    """The run waits for the client's results of `calls`."""

    calls: list[ChatToolCall]


@dataclass
class Finished:
    """`answered`: the model's last reply has no tool calls; `max_iterations` or
    `max_tool_calls`: that limit ended the run while the model still called tools; `blocked`:
    a shield refused the input or the answer (`violation` says why)."""

    reason: Literal["answered", "max_iterations", "max_tool_calls", "blocked"]
    violation: Any | None = None


@dataclass
class Suspended:
    """The run stopped at a step boundary because `should_suspend` said so (its invocation is
    running out of time); it continues from `request.messages` and the counters elsewhere."""


@dataclass
class Failed:
    """The model or a tool failed; `errors.status_of(error)` says what it means."""

    error: Exception


LoopEvent = (
    ModelCallStarted
    | TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | ModelReplied
    | ToolsStarted
    | ToolFinished
    | ToolsRan
    | ShieldChecked
    | Paused
    | Finished
    | Suspended
    | Failed
)


# --- limits -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """The server's bounds on a run, whatever the request asks (Settings: MAX_ITERATIONS,
    MAX_TOOL_CALLS, MODEL_CALL_TIMEOUT_SECONDS, RUN_TIMEOUT_SECONDS, CONTEXT_WINDOW_TOKENS)."""

    max_iterations: int = 25
    max_tool_calls: int = 100
    call_seconds: float = 300.0  # one model call, first byte to last
    run_seconds: float = 840.0  # the run, in this invocation
    context_tokens: int = 200_000  # what a response's conversation must fit


# --- tools ------------------------------------------------------------------------------------


class ServerTool(Protocol):
    """A tool the server runs (the tool runtime's MCP and built-in tools)."""

    async def call(self, arguments: str) -> str:
        """The result as text; an exception is reported to the model as an error result."""
        ...


@dataclass
class Tools:
    """Who runs which call. `client=None`: every call not run here goes to the client (the
    Responses API shows the client whatever function the model called)."""

    client: frozenset[str] | None = frozenset()
    server: Mapping[str, ServerTool] = field(default_factory=dict)

    def runs_here(self, name: str) -> bool:
        return name in self.server or (self.client is not None and name not in self.client)


# --- shields ----------------------------------------------------------------------------------


class ShieldCheck(Protocol):
    """The run's shields, bound to its tenant and shield ids by the face: the first blocking
    violation for these messages, or None; raises when a shield fails (fail closed)."""

    async def __call__(
        self, messages: list[dict[str, Any]], source: Literal["input", "output"]
    ) -> Any | None: ...


@dataclass
class Shields:
    """What the loop checks: `input` (the run's new messages) before its first model call, and
    every answer when `output`."""

    check: ShieldCheck
    input: list[dict[str, Any]] = field(default_factory=list)
    output: bool = False


# --- the loop ---------------------------------------------------------------------------------


class AgentLoop:
    def __init__(
        self,
        provider: Provider,
        request: ChatRequest,
        tools: Tools,
        *,
        max_iterations: int,
        iterations: int = 0,
        tool_calls: int = 0,
        limits: Limits = Limits(),
        stream: bool = True,
        new_call_id: Callable[[], str] = new_id,
        shields: Shields | None = None,
        should_suspend: Callable[[], bool] | None = None,
    ) -> None:
        self.provider = provider
        self.request = request  # grows by each reply and tool result
        self.tools = tools
        self.max_iterations = min(max_iterations, limits.max_iterations)
        self.iterations = iterations  # model calls made, including before a pause
        self.tool_calls = tool_calls  # likewise, calls the model made
        self.limits = limits
        self.stream = stream
        self._new_call_id = new_call_id
        self.shields = shields
        self.should_suspend = should_suspend  # asked before each model call but the first

    async def run(self) -> AsyncIterator[LoopEvent]:
        run_deadline = asyncio.get_running_loop().time() + self.limits.run_seconds
        try:
            if self.shields is not None and self.shields.input:
                checked = await self._shield(self.shields.input, "input")
                yield checked
                if checked.violation is not None:
                    yield Finished("blocked", checked.violation)
                    return
            last = self.request.messages[-1] if self.request.messages else None
            if self.iterations and last and last.role == "assistant" and not last.tool_calls:
                async for event in self._answered(last.content):  # stopped right after it
                    yield event
                return
            unanswered = self._unanswered_here()
            if unanswered:
                async for event in self._run_tools(ToolsStarted(new_id(), now(), unanswered)):
                    yield event
            called = False
            while True:
                if self.iterations >= self.max_iterations:
                    yield Finished("max_iterations")
                    return
                if called and self.should_suspend is not None and self.should_suspend():
                    yield Suspended()
                    return
                called = True
                self.iterations += 1
                reply: ModelReplied | None = None
                async for event in self._call_model(run_deadline):
                    yield event
                    if isinstance(event, ModelReplied):
                        reply = event
                assert reply is not None
                if not reply.tool_calls:
                    async for event in self._answered(reply.text):
                        yield event
                    return
                if self.request.tool_choice != "none":
                    # A forced choice (`required`, a tool) holds for one reply, else every
                    # later reply would call a tool again until the budget ran out.
                    self.request.tool_choice = "auto"
                self.tool_calls += len(reply.tool_calls)
                if self.tool_calls > self.limits.max_tool_calls:
                    yield Finished("max_tool_calls")
                    return
                here = [c for c in reply.tool_calls if self.tools.runs_here(c.name)]
                if here:
                    async for event in self._run_tools(ToolsStarted(new_id(), now(), here)):
                        yield event
                pending = [c for c in reply.tool_calls if not self.tools.runs_here(c.name)]
                if pending:
                    yield Paused(pending)
                    return
        except Exception as err:  # the model, a tool, or a bug: the face ends the run
            yield Failed(err)

    async def _answered(self, text: str) -> AsyncIterator[LoopEvent]:
        """The end of a run whose last reply called no tool: its answer through the output
        shields, then Finished."""
        if self.shields is not None and self.shields.output and text:
            checked = await self._shield([{"role": "assistant", "content": text}], "output")
            yield checked
            if checked.violation is not None:
                yield Finished("blocked", checked.violation)
                return
        yield Finished("answered")

    async def _call_model(self, run_deadline: float) -> AsyncIterator[LoopEvent]:
        step_id, started = new_id(), now()
        yield ModelCallStarted(step_id, started)
        text: list[str] = []
        calls: dict[int, ChatToolCall] = {}
        finish = model.Finish("stop")
        events = model.model_events(self.provider, self.request, self.stream)
        async for event in self._within_deadlines(events, run_deadline):
            if isinstance(event, model.TextDelta):
                text.append(event.text)
                yield TextDelta(step_id, event.text)
            elif isinstance(event, model.ReasoningDelta):
                yield ReasoningDelta(step_id, event.text)
            elif isinstance(event, model.ToolCallDelta):
                call = calls.get(event.index)
                if call is None:
                    call = ChatToolCall(event.id or self._new_call_id(), event.name or "", "")
                    calls[event.index] = call
                call.name = call.name or event.name or ""
                call.arguments += event.arguments
                yield ToolCallDelta(step_id, event.index, call.id, call.name, event.arguments)
            elif isinstance(event, model.Finish):
                finish = event
        tool_calls = [call for _, call in sorted(calls.items())]
        self.request.messages.append(ChatMessage("assistant", "".join(text), tool_calls=tool_calls))
        yield ModelReplied(
            step_id, started, now(), "".join(text), tool_calls, finish.reason, finish.usage
        )

    async def _within_deadlines(
        self, events: AsyncIterator[model.ChatEvent], run_deadline: float
    ) -> AsyncIterator[model.ChatEvent]:
        """The model's events, each awaited no longer than the call's and the run's deadlines
        allow: a model that keeps a call alive without finishing it (keep-alive comments, a
        trickle of deltas) cannot hold a turn and its session past them."""
        call_deadline = asyncio.get_running_loop().time() + self.limits.call_seconds
        bound = _Bound(min(call_deadline, run_deadline))
        try:
            while True:
                try:
                    event = await bound.wait(anext(events))
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    which = (
                        f"a model call may take {self.limits.call_seconds:g} s"
                        if call_deadline <= run_deadline
                        else f"a run may take {self.limits.run_seconds:g} s"
                    )
                    raise UpstreamTimeout(
                        f"model {self.request.model} ran out of time ({which})"
                    ) from None
                yield event
        finally:
            bound.close()
            await events.aclose()

    async def _shield(
        self, messages: list[dict[str, Any]], source: Literal["input", "output"]
    ) -> ShieldChecked:
        assert self.shields is not None
        step_id, started = new_id(), now()
        violation = await self.shields.check(messages, source)
        return ShieldChecked(step_id, started, now(), source, violation)

    async def _run_tools(self, started: ToolsStarted) -> AsyncIterator[LoopEvent]:
        """The calls at once; each result joins the messages as it comes (a ToolFinished), so
        what is stored after it never runs that call again. ToolsRan lists them in call order."""
        yield started
        tasks = [asyncio.ensure_future(self._run_tool(call)) for call in started.calls]
        try:
            for next_done in asyncio.as_completed(tasks):
                result = await next_done
                self.request.messages.append(
                    ChatMessage("tool", result.content, tool_call_id=result.call.id)
                )
                yield ToolFinished(started.step_id, result)
        finally:
            for task in tasks:
                task.cancel()
        results = [task.result() for task in tasks]
        yield ToolsRan(started.step_id, started.started_at, now(), results)

    async def _run_tool(self, call: ChatToolCall) -> ToolResult:
        return await run_tool(self.tools.server.get(call.name), call)

    def _unanswered_here(self) -> list[ChatToolCall]:
        """Server-side calls of the last reply that have no result in the messages."""
        for index in range(len(self.request.messages) - 1, -1, -1):
            message = self.request.messages[index]
            if message.role == "assistant":
                answered = {m.tool_call_id for m in self.request.messages[index + 1 :]}
                return [
                    call
                    for call in message.tool_calls
                    if call.id not in answered and self.tools.runs_here(call.name)
                ]
            if message.role != "tool":
                return []
        return []


async def run_tool(tool: ServerTool | None, call: ChatToolCall) -> ToolResult:
    """A server-side call's result; a missing or failing tool is an error result the model
    reads, never a failed run."""
    if tool is None:
        return ToolResult(call, f"Unknown tool `{call.name}` was called.", is_error=True)
    try:
        return ToolResult(call, await tool.call(call.arguments))
    except Exception as err:
        return ToolResult(call, f"Tool `{call.name}` failed: {err}", is_error=True)


class _Bound:
    """A deadline over a model call's awaits, with one timer for the call: what asyncio.timeout
    does for one await, made and cancelled for every event (about 2% of a turn's
    instructions). When the timer fires during `wait`, it cancels the task there (and only
    there: between awaits the consumer has the event, and the next `wait` raises at once)."""

    def __init__(self, deadline: float) -> None:
        self._task: asyncio.Task | None = None
        self._waiting = False
        self._expired = False
        self._cancelled = False  # the task holds a cancel request of ours
        self._timer = asyncio.get_running_loop().call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._expired = True
        if self._waiting and self._task is not None:
            self._cancelled = True
            self._task.cancel()

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """`awaitable`'s result, or TimeoutError once the deadline has passed."""
        if self._expired:
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()  # never awaited
            raise TimeoutError
        self._task, self._waiting = asyncio.current_task(), True
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if self._cancelled and self._withdraw():
                raise TimeoutError from None
            raise  # cancelled from elsewhere too
        finally:
            self._waiting = False
        if self._cancelled:  # what it awaited took our cancel and answered all the same
            self._withdraw()
        return result

    def _withdraw(self) -> bool:
        """Withdraw our cancel request; whether the task holds no other."""
        assert self._task is not None
        self._cancelled = False
        return self._task.uncancel() == 0

    def close(self) -> None:
        self._timer.cancel()
