"""A turn's or response's trace (an extension of both APIs): its runs' spans as the store
keeps them, named after OpenTelemetry's GenAI conventions. The ids are those the OTLP export
uses, so a trace found here is the one a collector shows."""

from typing import Any, Literal

from .common import ApiModel

SpanKind = Literal[
    "run",
    "inference",
    "tool_execution",
    "shield_call",
    "mcp_call",
    "web_search_call",
    "file_search_call",
]


class TraceSpan(ApiModel):
    span_id: str
    parent_span_id: str | None = None
    name: str
    kind: SpanKind
    started_at: str
    completed_at: str
    duration_ms: float
    status: Literal["ok", "error"]
    attributes: dict[str, Any]


class Trace(ApiModel):
    object: Literal["trace"] = "trace"
    trace_id: str
    run_id: str
    #: False while the run goes on: the spans are stored as it pauses or ends.
    complete: bool
    spans: list[TraceSpan]
