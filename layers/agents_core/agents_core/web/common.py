"""Pieces every router shares: path ids and JSON responses."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Header, Path, Query, Response
from pydantic import BaseModel

from ..errors import InvalidRequest

#: Ids are ours (UUIDs) or a migrated client's; '#' and other separators never reach a key.
ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"

AgentId = Annotated[str, Path(pattern=ID_PATTERN)]
SessionId = Annotated[str, Path(pattern=ID_PATTERN)]
TurnId = Annotated[str, Path(pattern=ID_PATTERN)]
StepId = Annotated[str, Path(pattern=ID_PATTERN)]

#: Routes also served under a second prefix, where other clients call them: the OpenAI routes
#: under both `/v1/` (`OpenAI(base_url=".../v1")`) and `/v1/openai/v1/` (Llama Stack's
#: OpenAI-compatible prefix), the Agents routes under `/v1alpha/` (llama-stack-client 0.3+).
ALIASES = (
    ("/v1/openai/v1/responses", "/v1/responses"),
    ("/v1/conversations", "/v1/openai/v1/conversations"),
    ("/v1/agents", "/v1alpha/agents"),
    ("/v1/files", "/v1/openai/v1/files"),
    ("/v1/vector_stores", "/v1/openai/v1/vector_stores"),
)


def alias_prefix(path: str) -> tuple[str, str] | None:
    """(the alias, the prefix it stands for) where `path` is under an alias prefix."""
    for prefix, alias, under in _BY_ALIAS:
        if path.startswith(under) or path == alias:
            return alias, prefix
    return None


def aliased(path: str) -> str | None:
    """Where a route defined at `path` is also served, if anywhere."""
    for prefix, alias, _ in _BY_ALIAS:
        if path == prefix or path.startswith(prefix + "/"):
            return alias + path[len(prefix) :]
    return None


_BY_ALIAS = tuple((prefix, alias, alias + "/") for prefix, alias in ALIASES)


#: The query parameter and header of a rejoined stream, as the routes declare them.
StartingAfter = Annotated[
    int | None,
    Query(
        ge=-1,
        description=(
            "Replay the stream's events after this sequence number (an event's SSE `id`);"
            " omitted: from the start"
        ),
    ),
]
LastEventId = Annotated[
    str | None,
    Header(
        max_length=20,
        description="The id of the last event received (EventSource sends it); wins over"
        " `starting_after`",
    ),
]


def rejoin_point(starting_after: int | None, last_event_id: str | None) -> int:
    """The sequence number a rejoined stream starts after (-1: from its start). `Last-Event-ID`
    wins over `starting_after`: a browser's EventSource reconnects to the URL it first opened,
    `starting_after` and all, with the id of the last event it received."""
    if last_event_id is not None and last_event_id.strip():
        try:
            after = int(last_event_id.strip())
        except ValueError:
            raise InvalidRequest("Last-Event-ID must be an event's id (an integer)") from None
        if after < -1:
            raise InvalidRequest("Last-Event-ID must be -1 or more")
        return after
    return -1 if starting_after is None else starting_after


def trace_response(run_id: str, stored: list[dict[str, Any]], *, complete: bool) -> Response:
    """A turn's or response's trace from its stored runs."""
    from ..api.traces import Trace
    from ..telemetry.spans import RunSpans, trace_view

    runs = [RunSpans.from_stored(run) for run in stored]
    return json_response(Trace.model_validate(trace_view(run_id, runs, complete=complete)))


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Serialize once with pydantic; each route names its model under `responses` for the docs."""
    return Response(
        content=model.model_dump_json(), media_type="application/json", status_code=status_code
    )
