"""How a turn lies in the table: its item (the turn with its last steps, its state, and its
history once it ends), its steps' items, and the lock a running turn holds on its session item.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from .. import json_text
from ..api.agents import Step, Turn
from ..api.common import ToolCall, deferred_adapter
from ..domain import SessionLock, TurnState
from . import keys
from .items import encode, json_body
from .sessions import stored_turn_parts
from .table import key

#: A running turn up to this size is recorded on the session item, with the lock, instead of
#: by a write of its own: one request fewer per turn, for about the same write units (billed
#: per kilobyte of the item written).
RUNNING_ON_SESSION_BYTES = 2048

#: Items a revert deletes in the transaction that ends the turn (DynamoDB takes 100 actions).
MAX_REMOVED_WITH_END = 98


@deferred_adapter
def _calls_adapter() -> TypeAdapter:
    return TypeAdapter(list[ToolCall])


def state_json(state: TurnState) -> str:
    """The turn item's `state` attribute; `status` is stored apart, as `turn_status`, which
    conditions read."""
    return json_text.dumps_str(
        {
            "iterations": state.iterations,
            "tool_calls": state.tool_calls,
            "pending_calls": _calls_adapter().dump_python(state.pending_calls, mode="json"),
            "error": state.error,
            "resume_token_hash": state.resume_token_hash,
            "events": state.events,
        }
    )


def state_from_json(status: str, text: str, trace: str | None = None) -> TurnState:
    """The state from the turn item's `state` attribute and its `trace`, when it has one."""
    data = json_text.loads(text)
    return TurnState(
        status=status,
        iterations=data["iterations"],
        tool_calls=data.get("tool_calls", 0),  # not in turns stored before it was counted
        pending_calls=_calls_adapter().validate_python(data["pending_calls"]),
        error=data.get("error"),
        resume_token_hash=data.get("resume_token_hash"),
        events=data.get("events"),  # None: stored before it was counted
        trace=json_text.loads(trace) if trace else [],
    )


@dataclass
class RunningRecord:
    """A running turn's items. In parts (an input over DynamoDB's item limit), it must land
    before the turn's end is written, whose parts have the same keys."""

    items: list[dict[str, Any]]

    @property
    def in_parts(self) -> bool:
        return len(self.items) > 1


@dataclass
class HeldSession(SessionLock):
    """The lock as the store keeps it. `recorded`: the running turn travels on the session item;
    else `running_write` (the engine storage's task writing its own item) may still be under way."""

    recorded: bool = False
    running_write: Any = None
    running_in_parts: bool = False
    #: A resume's: how many of the paused turn's last steps its item kept, which the resume
    #: stored apart (a revert puts them back inside).
    kept_steps: int = 0

    @property
    def pk(self) -> str:
        return keys.session_pk(self.tenant, self.session_id)

    def extra(self) -> dict[str, Any]:
        """The session's TTL, copied onto every item of the turn."""
        return {"expires_at": {"N": str(self.expires_at)}} if self.expires_at else {}


def turn_items(
    lock: HeldSession,
    turn: Turn,
    state: TurnState,
    history: str | None,
    steps: tuple[Step, ...] | None = None,
) -> list[dict[str, Any]]:
    """`steps`: those kept inside the turn item, the others being items of their own; None
    for a running turn, whose steps are all items of their own as they complete."""
    inside = list(steps or ())
    stored, how = stored_turn_parts(turn, inside)
    attrs = {"body": json_body(stored), "state": state_json(state)}
    if history is not None:
        attrs["history"] = history
    if state.trace:
        attrs["trace"] = json_text.dumps_str(state.trace)
    extra = {"turn_status": {"S": state.status}, **how, **lock.extra()}
    if steps is not None:
        extra["steps_apart"] = {"N": str(len(turn.steps) - len(inside))}
    return encode(key(lock.pk, keys.turn_sk(turn.turn_id)), attrs, extra)


def step_items(lock: HeldSession, step: Step) -> list[dict[str, Any]]:
    sk = keys.step_sk(step.turn_id, step.step_id)
    return encode(key(lock.pk, sk), {"body": json_body(step)}, lock.extra())
