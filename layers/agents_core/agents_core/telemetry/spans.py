"""A run's spans as they are kept and shown.

A run (a turn's start or resume, a response, a background run's invocation) is a root span
with a child per model call, tool call and shield check. The trace id follows from the run's
id (a turn's runs share its trace) and each span id from its place in the trace, so neither is
stored: a kept run is its times, names, statuses and attributes, a few hundred bytes that
compress well.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

#: The root span's name and operation (OpenTelemetry's GenAI agent spans).
RUN_SPAN = "invoke_agent"


@dataclass
class Span:
    kind: str  # api.traces.SpanKind
    name: str
    started_at: datetime
    completed_at: datetime
    status: str = "ok"  # or "error"
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunSpans:
    """One run: its root span and, in order, the spans of what it did."""

    root: Span
    children: list[Span] = field(default_factory=list)
    dropped: int = 0  # spans not kept past the run's bound

    def stored(self) -> dict[str, Any]:
        """The run as JSON data: times in microseconds since the epoch."""
        return {
            "root": _stored(self.root),
            "spans": [_stored(span) for span in self.children],
            **({"dropped": self.dropped} if self.dropped else {}),
        }

    def identified(self, trace: str, run: int) -> list[tuple[Span, str, str | None]]:
        """(span, its id, its parent's id) for the root, then its children: run `run` of
        `trace`."""
        root = span_id(trace, run, 0)
        return [(self.root, root, None)] + [
            (span, span_id(trace, run, index), root) for index, span in enumerate(self.children, 1)
        ]

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> RunSpans:
        return cls(_span(data["root"]), [_span(s) for s in data["spans"]], data.get("dropped", 0))


def trace_id(run_id: str) -> str:
    """The trace of a turn or response: 16 bytes, hex, from its id."""
    return hashlib.blake2b(run_id.encode(), digest_size=16).hexdigest()


def span_id(trace: str, run: int, index: int) -> str:
    """Span `index` of run `run` in `trace` (0: the run's root): 8 bytes, hex."""
    return hashlib.blake2b(f"{trace}/{run}/{index}".encode(), digest_size=8).hexdigest()


def trace_view(run_id: str, runs: list[RunSpans], *, complete: bool) -> dict[str, Any]:
    """The trace as the API shows it: each run's root, then its children, with their ids."""
    trace = trace_id(run_id)
    spans = [
        _shown(*identified)
        for number, run in enumerate(runs)
        for identified in run.identified(trace, number)
    ]
    return {
        "object": "trace",
        "trace_id": trace,
        "run_id": run_id,
        "complete": complete,
        "spans": spans,
    }


def _shown(span: Span, span_id: str, parent: str | None) -> dict[str, Any]:
    return {
        "span_id": span_id,
        "parent_span_id": parent,
        "name": span.name,
        "kind": span.kind,
        "started_at": span.started_at.isoformat(),
        "completed_at": span.completed_at.isoformat(),
        "duration_ms": round((span.completed_at - span.started_at).total_seconds() * 1000, 3),
        "status": span.status,
        "attributes": span.attributes,
    }


def _stored(span: Span) -> list[Any]:
    return [
        span.kind,
        span.name,
        _micros(span.started_at),
        _micros(span.completed_at),
        span.status,
        span.attributes,
    ]


def _span(data: list[Any]) -> Span:
    kind, name, started, completed, status, attributes = data
    return Span(kind, name, _time(started), _time(completed), status, attributes)


def _micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def _time(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1_000_000, UTC)
