"""A run's spans from the agent loop's events (`RunTrace`), for both faces: the run, each model
call (time to its first chunk, tokens), each tool call (name, arguments, result) and each
shield check, named and attributed after OpenTelemetry's GenAI conventions.

    trace = RunTrace(turn.turn_id, request.model)
    async for event in loop.run():
        trace.observe(event)
    kept = trace.end("ok")  # stored with the turn or response; exported when configured
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from ..inference.types import ChatToolCall
from ..telemetry.spans import RUN_SPAN, RunSpans, Span, trace_id
from . import loop as L

#: How much of a tool call's arguments or result a span keeps.
TEXT_LIMIT = 1024

#: Spans a run keeps besides its root; the loop's limits keep runs below it in practice.
MAX_SPANS = 256

#: Providers whose OpenTelemetry name differs from ours.
_PROVIDER_NAMES = {"bedrock": "aws.bedrock"}


class SpanExporter(Protocol):
    """Where ended runs go besides the store (OTLP); bounded, and never raising."""

    async def export(self, trace_id: str, run_index: int, run: RunSpans) -> None: ...


class RunTrace:
    """Spans of one run, built as its events pass. `kind_of` names a server tool's span kind
    (`mcp_call`, `web_search_call`, ...; `tool_execution` when it says None). `earlier`: the
    runs of the same turn before this one (a paused turn's), kept ahead of it."""

    def __init__(
        self,
        run_id: str,
        model: str,
        *,
        kind_of: Callable[[str], str | None] | None = None,
        earlier: list[dict[str, Any]] | None = None,
        attributes: dict[str, Any] | None = None,
        provider: str | None = None,
    ) -> None:
        self.trace_id = trace_id(run_id)
        self.ended = False
        self.model = model
        self.kind_of = kind_of or (lambda name: None)
        self.earlier = list(earlier or [])
        #: `gen_ai.provider.name`: the inference provider's name as OpenTelemetry spells it.
        self.provider = _PROVIDER_NAMES.get(provider or "", provider)
        root_attributes = {"gen_ai.operation.name": RUN_SPAN, "gen_ai.request.model": model}
        now = L.now()
        self.run = RunSpans(
            Span("run", RUN_SPAN, now, now, "ok", root_attributes | (attributes or {}))
        )
        self._model_call: tuple[datetime, datetime | None] | None = None  # (started, first chunk)
        self._tools_started: datetime | None = None
        self._told: set[str] = set()  # calls whose span is in (ToolFinished before ToolsRan)

    @property
    def index(self) -> int:
        """This run's place among the turn's runs."""
        return len(self.earlier)

    def observe(self, event: L.LoopEvent) -> None:
        match event:
            case L.ModelCallStarted(started_at=started):
                self._model_call = (started, None)
            case L.TextDelta() | L.ReasoningDelta() | L.ToolCallDelta():
                if self._model_call is not None and self._model_call[1] is None:
                    self._model_call = (self._model_call[0], L.now())
            case L.ModelReplied():
                self._model_replied(event)
            case L.ToolsStarted(started_at=started):
                self._tools_started = started
            case L.ToolFinished(result=result):
                self.tool(result.call, self._tools_started or L.now(), L.now(), result)
                self._told.add(result.call.id)
            case L.ToolsRan(started_at=started, completed_at=completed, results=results):
                for result in results:
                    if result.call.id not in self._told:
                        self.tool(result.call, started, completed, result)
                self._told.clear()
            case L.ShieldChecked():
                self._shield_checked(event)
            case L.Failed(error=error):
                self.run.root.status = "error"
                self.run.root.attributes["error.type"] = type(error).__name__

    def tool(
        self,
        call: ChatToolCall,
        started: datetime,
        completed: datetime,
        result: L.ToolResult | None,
        kind: str | None = None,
    ) -> None:
        """A tool call's span; `kind` when the caller knows it better than `kind_of`."""
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.call.arguments": call.arguments[:TEXT_LIMIT],
        }
        if result is not None:
            attributes["gen_ai.tool.call.result"] = result.content[:TEXT_LIMIT]
        failed = result is not None and result.is_error
        if failed:
            attributes["error.type"] = "tool_error"
        kind = kind or self.kind_of(call.name) or "tool_execution"
        self._add(
            Span(
                kind,
                f"execute_tool {call.name}",
                started,
                completed,
                "error" if failed else "ok",
                attributes,
            )
        )

    def end(self, status: str | None = None) -> list[dict[str, Any]]:
        """Close the run span: the turn's or response's runs so far, as stored."""
        self.run.root.completed_at = L.now()
        self.ended = True
        if status is not None:
            self.run.root.status = status
        return [*self.earlier, self.run.stored()]

    async def export(self, exporter: SpanExporter | None) -> None:
        """The ended run to `exporter`, when there is one (a run that never ended sends none)."""
        if exporter is not None and self.ended:
            await exporter.export(self.trace_id, self.index, self.run)

    def so_far(self) -> list[dict[str, Any]]:
        """The runs so far, this one as it stands (ended or not) once it did something: a
        checkpoint's copy, which a continuation takes as its `earlier` runs (a queued
        response's first state has no run of its own yet)."""
        if not (self.ended or self.run.children):
            return list(self.earlier)
        if not self.ended:
            self.run.root.completed_at = L.now()
        return [*self.earlier, self.run.stored()]

    def _model_replied(self, event: L.ModelReplied) -> None:
        first = self._model_call[1] if self._model_call is not None else None
        self._model_call = None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.model,
            "gen_ai.response.finish_reasons": [event.finish],
        }
        if self.provider:
            attributes["gen_ai.provider.name"] = self.provider
        if event.usage is not None:
            attributes["gen_ai.usage.input_tokens"] = event.usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = event.usage.output_tokens
        if first is not None:
            waited = (first - event.started_at).total_seconds() * 1000
            attributes["gen_ai.response.time_to_first_chunk_ms"] = round(waited, 3)
        if event.tool_calls:
            attributes["gen_ai.response.tool_calls"] = [c.name for c in event.tool_calls]
        self._add(
            Span(
                "inference",
                f"chat {self.model}",
                event.started_at,
                event.completed_at,
                "ok",
                attributes,
            )
        )

    def _shield_checked(self, event: L.ShieldChecked) -> None:
        attributes: dict[str, Any] = {"shield.source": event.source}
        violation = event.violation
        if violation is not None:
            attributes["shield.violation"] = (
                getattr(violation, "user_message", None) or str(violation)
            )[:TEXT_LIMIT]
            level = getattr(violation, "violation_level", None)
            if level is not None:
                attributes["shield.violation_level"] = str(getattr(level, "value", level))
        self._add(
            Span(
                "shield_call",
                f"shield {event.source}",
                event.started_at,
                event.completed_at,
                "ok",
                attributes,
            )
        )

    def _add(self, span: Span) -> None:
        if len(self.run.children) < MAX_SPANS:
            self.run.children.append(span)
        else:
            self.run.dropped += 1
