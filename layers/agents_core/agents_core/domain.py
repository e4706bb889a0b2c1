"""What a turn is besides its API object: its status, what a paused turn needs to continue, and
the session lock it runs under. Shared by the engine, which decides these, and the store, which
keeps them; plain values only, nothing of DynamoDB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .api.agents import Turn
from .api.common import ToolCall

RUNNING = "running"
AWAITING_INPUT = "awaiting_input"
COMPLETED = "completed"
FAILED = "failed"
FINISHED = (COMPLETED, FAILED)


@dataclass
class TurnState:
    """What the engine needs besides the Turn to continue it."""

    status: str
    iterations: int = 0  # model calls made so far, across pauses
    tool_calls: int = 0  # calls the model made so far, across pauses
    pending_calls: list[ToolCall] = field(default_factory=list)  # awaiting the client
    error: str | None = None


@dataclass
class SessionLock:
    """The session a turn holds while it runs or waits for tool results. Storage may hand back
    a subclass carrying its own bookkeeping; the engine only passes it back."""

    tenant: str
    session_id: str
    turn_id: str
    #: The session's last finished turn when the lock was taken (None: the session has none).
    previous_turn: str | None = None
    #: When the session expires (epoch seconds; sessions of non-persistent agents), if ever.
    expires_at: int | None = None


@dataclass
class PausedTurn:
    """A turn awaiting input, as read for its resume."""

    tenant: str
    turn: Turn
    state: TurnState
    last_turn: str | None = None  # the session's last finished turn: stable while paused
    expires_at: int | None = None


@dataclass
class ConversationAppend:
    """What a response adds to its conversation when it ends: its input and output items,
    appended only if the conversation is still at `version`, the one its context was read at
    (else Conflict, and nothing of the response is stored)."""

    conversation_id: str
    version: int
    items: list[Any] = field(default_factory=list)  # Responses API items, each with an id
