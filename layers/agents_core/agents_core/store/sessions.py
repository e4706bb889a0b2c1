"""Reading session items: whether a session is there for a caller, the running turn it may carry,
and a session partition assembled into turns. Shared by the agent store and the turn store."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from ..api.agents import Step, Turn
from ..api.common import CompletionMessage, StopReason
from ..errors import NotFound
from . import keys
from .items import decode
from .table import Table, expired


@cache
def step_adapter() -> TypeAdapter:
    """Built on first use, not at import (cold starts import this module)."""
    return TypeAdapter(Step)


def read_session_head(table: Table, tenant: str, agent_id: str, session_id: str) -> dict[str, Any]:
    """The session item, if it exists, belongs to `agent_id` and has not expired."""
    item = table.get(keys.session_pk(tenant, session_id), keys.SESSION)
    if session_gone(item, agent_id):
        raise NotFound(f"Session {session_id} not found")
    return item


def session_gone(session: dict[str, Any] | None, agent_id: str) -> bool:
    """Missing, another agent's, expired, or being deleted: not found, to every caller."""
    return (
        session is None
        or session["agent_id"]["S"] != agent_id
        or expired(session)
        or "deleting" in session
    )


def session_expiry(session: dict[str, Any]) -> int | None:
    return int(session["expires_at"]["N"]) if "expires_at" in session else None


def running_on_session(session: dict[str, Any]) -> Turn | None:
    """The running turn recorded on the session item, if any (see `TurnStore.lock_session`)."""
    if "active_body" not in session:
        return None
    return Turn.model_validate_json(session["active_body"]["S"])


def as_ended(turn: Turn, head: dict[str, Any]) -> Turn:
    """A turn whose Lambda died while it ran (or ran again, resumed), as the turn that took its
    session recorded it (`ended_at`): ended then, with no answer, like any failed turn. Its
    item may still hold the paused turn's calls, which nobody can answer any more."""
    if "ended_at" in head and turn.completed_at is None:
        turn.completed_at = datetime.fromtimestamp(int(head["ended_at"]["N"]), UTC)
        turn.output_message = CompletionMessage(content="", stop_reason=StopReason.end_of_message)
    return turn


def assemble_turns(items: list[dict[str, Any]]) -> list[Turn]:
    """A session partition's items (the session, steps, then turns, as a query returns them)
    into Turns, the running one last."""
    session, *items = items
    steps: dict[str, list[Step]] = {}
    turns: list[Turn] = []
    for head, attrs in decode(items):
        sk = head["SK"]["S"]
        if sk.startswith(keys.STEP_PREFIX):
            step = step_adapter().validate_json(attrs["body"])
            steps.setdefault(keys.turn_id_of_step(sk), []).append(step)
        elif sk.startswith(keys.TURN_PREFIX):
            turns.append(as_ended(Turn.model_validate_json(attrs["body"]), head))
    running = running_on_session(session)
    if running is not None:
        turns.append(running)
    for turn in turns:
        turn.steps = steps.get(turn.turn_id, []) + turn.steps
    return turns
