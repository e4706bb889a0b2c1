"""What the engine needs from storage: the port it owns. Domain types in, domain types out;
implementations (DynamoDB in `store.engine_storage`, memory in the engine tests) keep their
blocking work from stalling the event loop themselves.

Every method that changes state is all-or-nothing: a method that raises changed nothing, except
`end_turn` raising Conflict (the turn lost its session: nothing of it was written either).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..domain import ConversationAppend, PausedTurn, SessionLock, TurnState

if TYPE_CHECKING:  # names only: turns functions load no Responses models, responses no Agents ones
    from ..api.agents import Agent, Step, Turn
    from ..api.prompts import Prompt
    from ..api.responses import OpenAIResponseObjectWithInput

#: A chat message as stored in a history (`ChatMessage.to_dict()`).
StoredMessage = dict[str, Any]


class TurnStorage(Protocol):
    #: How long a running turn holds its session without renewing the lease.
    lease_seconds: int

    async def agent(self, tenant: str, agent_id: str) -> Agent:
        """The agent (NotFound). May be a recent copy: agents never change once created."""
        ...

    def remembered_agent(self, tenant: str, agent_id: str) -> Agent | None:
        """The agent if `agent` would give it with no read (a warm container's copy), else
        None: a run then reads nothing beside its first request."""
        ...

    async def lock_session(self, tenant: str, agent_id: str, turn: Turn) -> SessionLock:
        """Take the turn's session for it: free, or held by a turn whose lease ran out (which is
        recorded failed). NotFound for a missing session, Conflict for a busy one."""
        ...

    async def turn_started(self, lock: SessionLock, turn: Turn) -> None:
        """The turn runs now: make it readable (it may already be, with the lock)."""
        ...

    async def history(
        self, tenant: str, session_id: str, last_turn: str | None
    ) -> list[StoredMessage]:
        """The messages of the session's finished turns up to `last_turn`, oldest first."""
        ...

    async def save_step(self, lock: SessionLock, step: Step) -> None: ...

    async def end_turn(
        self,
        lock: SessionLock,
        turn: Turn,
        state: TurnState,
        history: list[StoredMessage] | None = None,
        steps: tuple[Step, ...] = (),
    ) -> None:
        """Store the turn as paused, completed or failed, and free (or park) its session, at
        once. `history`: what a completed turn adds to the session's conversation; `steps`: its
        steps not saved yet. Conflict: the turn lost its session, and nothing was stored."""
        ...

    async def extend_lease(self, lock: SessionLock) -> bool:
        """Renew the running turn's lease; False when it no longer holds its session."""
        ...

    async def release(self, lock: SessionLock) -> None:
        """Free the session of a turn that never started."""
        ...

    async def read_paused(
        self, tenant: str, agent_id: str, session_id: str, turn_id: str
    ) -> PausedTurn:
        """A turn with its state, as read for its resume (NotFound)."""
        ...

    async def lock_for_resume(
        self, paused: PausedTurn, agent_id: str, step: Step | None
    ) -> SessionLock:
        """Take the session back for a paused turn and store `step` (the tool results; none for
        a turn parked for time), at once. Conflict when the turn is no longer awaiting input."""
        ...

    async def revert(
        self, lock: SessionLock, turn: Turn, state: TurnState, step_ids: list[str]
    ) -> None:
        """Put a resumed turn back as it was paused: its new steps go, it awaits input again."""
        ...

    async def turn(self, tenant: str, agent_id: str, session_id: str, turn_id: str) -> Turn: ...


class ResponseStorage(Protocol):
    async def begin(
        self, tenant: str, response: OpenAIResponseObjectWithInput, lease_until: float
    ) -> None:
        """Make a starting response readable (`in_progress`) until its end is saved; past
        `lease_until` without an end it reads failed (its process ended). Takes the response as
        it is now; the write may still be under way when this returns (`save` and `abandon`
        wait for it)."""
        ...

    async def abandon(self, tenant: str, response_id: str, error: Any) -> None:
        """A started response whose end could not be stored reads failed with `error`."""
        ...

    async def context(self, tenant: str, response_id: str) -> list[StoredMessage]:
        """The conversation through a stored response (NotFound)."""
        ...

    async def save(
        self,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        context: list[StoredMessage],
        conversation: ConversationAppend | None = None,
        trace: list[dict[str, Any]] | None = None,
        stream_end: Any = None,
    ) -> None:
        """Store the response, with `trace` (its runs' spans, stored form) when given; with
        `conversation`, append its items to that conversation in the same write: Conflict when
        the conversation changed since its context was read, NotFound when it is gone, TooLarge
        for more items than one write takes. Nothing is stored then. `stream_end`: what
        `ResponseRun.events(end_with=...)` was handed for the end event (a recorded stream's
        last write), made in the same write and marked `landed` when it is; a storage that
        cannot leaves it unmarked, and its recorder writes it."""
        ...

    async def conversation_context(
        self, tenant: str, conversation_id: str
    ) -> tuple[list[Any], int]:
        """A conversation's items (Responses API items, in order) and its version, the one an
        append of what the response adds must name (NotFound)."""
        ...

    async def prompt(self, tenant: str, prompt_id: str, version: int | None) -> Prompt:
        """A stored prompt template at `version`, or at its default (NotFound)."""
        ...
