"""What a turn is besides its API object: its status, what a paused turn needs to continue, and
the session lock it runs under. Shared by the engine, which decides these, and the store, which
keeps them; plain values only, nothing of DynamoDB.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .api.common import ToolCall

if TYPE_CHECKING:  # a responses function, which imports this module, has no Agents API models
    from .api.agents import Turn

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
    #: SHA-256 of the resume token issued at the turn's last pause (the queue's proof of origin).
    resume_token_hash: str | None = None
    #: The spans of the turn's runs so far (telemetry.spans.RunSpans, stored form).
    trace: list[dict[str, Any]] = field(default_factory=list)
    #: Events of the turn's stream so far, across its runs: a resumed run numbers its events on
    #: from here. None for a turn paused before this was kept: its stored stream is asked.
    events: int | None = 0

    def resume_token_matches(self, token: str | None) -> bool:
        """Whether `token` is the one issued when this turn last paused."""
        if not token or self.resume_token_hash is None:
            return False
        return hmac.compare_digest(resume_token_hash(token), self.resume_token_hash)


def resume_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


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
    #: How many of the turn's last steps its stored item keeps inside (a reply that paused
    #: at once): its resume stores them as items of their own, ahead of the steps it adds.
    steps_in_item: int = 0


@dataclass
class ConversationAppend:
    """What a response adds to its conversation when it ends: its input and output items,
    appended only if the conversation is still at `version`, the one its context was read at
    (else Conflict, and nothing of the response is stored)."""

    conversation_id: str
    version: int
    items: list[Any] = field(default_factory=list)  # Responses API items, each with an id
