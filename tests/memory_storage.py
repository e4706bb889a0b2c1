"""The engine's storage ports (`engine.storage`) in plain dicts: a second implementation beside the
DynamoDB one (`store.engine_storage`), so engine tests run in milliseconds without moto.

Same semantics as the DynamoDB store: every state change is conditional and all-or-nothing
(a busy session is Conflict, a missing one NotFound; a turn that lost its session stores nothing
at its end), a dead turn's lease running out lets the next turn take its session (and records
it failed), and what is stored is a copy (JSON), never the engine's live objects.

    storage = MemoryTurnStorage()
    agent = storage.add_agent("t", AgentConfig(model="m", instructions="be brief"))
    session_id = storage.add_session("t", agent.agent_id)
    engine = TurnEngine(storage, models)
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from agents_core.api.agents import Agent, AgentConfig, Step, Turn
from agents_core.api.responses import OpenAIResponseInput, OpenAIResponseObjectWithInput
from agents_core.domain import (
    AWAITING_INPUT,
    COMPLETED,
    FAILED,
    FINISHED,
    RUNNING,
    ConversationAppend,
    PausedTurn,
    SessionLock,
    TurnState,
)
from agents_core.errors import Conflict, InvalidRequest, NotFound
from agents_core.ids import new_id
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError

_STEP = TypeAdapter(Step)
_ITEM: TypeAdapter[Any] = TypeAdapter(OpenAIResponseInput)


@dataclass
class _Session:
    agent_id: str
    expires_at: int | None = None
    deleting: bool = False
    last_turn: str | None = None  # the last finished turn
    active_turn: str | None = None  # the lock: held by this turn ...
    active_state: str | None = None  # ... running or awaiting input
    lease_until: float = 0.0  # while running


@dataclass
class _TurnRecord:
    body: str  # the Turn as JSON, with the steps kept inside it (the others are step records)
    state: TurnState
    history: list[dict[str, Any]] | None = None  # what a completed turn adds to the session
    apart: int | None = None  # how many step records it had at its end (None: running)


@dataclass
class MemoryTurnStorage:
    lease_seconds: int = 60
    clock: Callable[[], float] = time.time  # tests move time on to let a lease run out
    agents: dict[tuple[str, str], str] = field(default_factory=dict)
    sessions: dict[tuple[str, str], _Session] = field(default_factory=dict)
    turns: dict[tuple[str, str], dict[str, _TurnRecord]] = field(default_factory=dict)
    steps: dict[tuple[str, str, str], dict[str, str]] = field(default_factory=dict)
    remembered: dict[tuple[str, str], Agent] = field(default_factory=dict)
    agent_reads: int = 0
    #: A resume's count of the paused turn's kept steps it stored apart, until its run ends.
    kept: dict[tuple[str, str, str], int] = field(default_factory=dict)

    # --- set-up, for tests ------------------------------------------------------------------

    def add_agent(self, tenant: str, config: AgentConfig) -> Agent:
        agent = Agent(agent_id=new_id(), agent_config=config, created_at=datetime.now(UTC))
        self.agents[(tenant, agent.agent_id)] = _json(agent)
        return agent

    def add_session(self, tenant: str, agent_id: str, expires_at: int | None = None) -> str:
        session_id = new_id()
        self.sessions[(tenant, session_id)] = _Session(agent_id, expires_at)
        self.turns[(tenant, session_id)] = {}
        return session_id

    # --- the port -----------------------------------------------------------------------------

    async def agent(self, tenant: str, agent_id: str) -> Agent:
        self.agent_reads += 1
        body = self.agents.get((tenant, agent_id))
        if body is None:
            raise NotFound(f"Agent {agent_id} not found")
        agent = self.remembered[(tenant, agent_id)] = Agent.model_validate_json(body)
        return agent

    def remembered_agent(self, tenant: str, agent_id: str) -> Agent | None:
        """As a warm container's store: an agent once read is at hand (agents never change)."""
        return self.remembered.get((tenant, agent_id))

    async def lock_session(self, tenant: str, agent_id: str, turn: Turn) -> SessionLock:
        _json(turn)  # text that cannot be stored is refused before any change
        session = self._session(tenant, agent_id, turn.session_id)
        if session.active_turn is not None:
            if session.active_state == AWAITING_INPUT:
                raise Conflict(
                    f"Session {turn.session_id} has turn {session.active_turn} awaiting tool"
                    " responses; resume it first"
                )
            if session.lease_until >= self.clock():
                raise Conflict(f"Session {turn.session_id} is busy with turn {session.active_turn}")
            # The turn holding it died: it ends failed, and this turn takes over.
            dead = self.turns[(tenant, turn.session_id)].get(session.active_turn)
            if dead is not None and dead.state.status == RUNNING:
                dead.state = replace(dead.state, status=FAILED)
                dead.state.error = dead.state.error or "the turn stopped before it ended"
        session.active_turn, session.active_state = turn.turn_id, RUNNING
        session.lease_until = self.clock() + self.lease_seconds
        return SessionLock(
            tenant,
            turn.session_id,
            turn.turn_id,
            previous_turn=session.last_turn,
            expires_at=session.expires_at,
        )

    async def turn_started(self, lock: SessionLock, turn: Turn) -> None:
        self._turns(lock).setdefault(
            turn.turn_id, _TurnRecord(_turn_json(turn, steps=[]), TurnState(RUNNING))
        )

    async def history(
        self, tenant: str, session_id: str, last_turn: str | None
    ) -> list[dict[str, Any]]:
        if last_turn is None:
            return []
        messages: list[dict[str, Any]] = []
        for turn_id, record in sorted(self.turns[(tenant, session_id)].items()):
            if record.state.status not in FINISHED:
                break  # the turn being run now
            if record.state.status == COMPLETED:
                messages += copy.deepcopy(record.history or [])
            if turn_id == last_turn:
                break
        return messages

    async def save_step(self, lock: SessionLock, step: Step) -> None:
        self._steps(lock, step.turn_id)[step.step_id] = _json(step)

    async def end_turn(
        self,
        lock: SessionLock,
        turn: Turn,
        state: TurnState,
        history: list[dict[str, Any]] | None = None,
        steps: tuple[Step, ...] = (),
    ) -> None:
        session = self.sessions.get((lock.tenant, lock.session_id))
        if session is None or session.active_turn != lock.turn_id:
            raise Conflict(
                f"Turn {lock.turn_id} lost its session (its lease ran out and another turn took"
                " it); its result was not stored"
            )
        self._turns(lock)[turn.turn_id] = _TurnRecord(
            _turn_json(turn, steps=list(steps)),
            copy.deepcopy(state),
            copy.deepcopy(history),
            apart=len(turn.steps) - len(steps),
        )
        if state.status == AWAITING_INPUT:
            session.active_state = AWAITING_INPUT
        else:
            session.last_turn = lock.turn_id
            session.active_turn = session.active_state = None

    async def extend_lease(self, lock: SessionLock) -> bool:
        session = self.sessions.get((lock.tenant, lock.session_id))
        if session is None or (session.active_turn, session.active_state) != (
            lock.turn_id,
            RUNNING,
        ):
            return False
        session.lease_until = self.clock() + self.lease_seconds
        return True

    async def release(self, lock: SessionLock) -> None:
        session = self.sessions.get((lock.tenant, lock.session_id))
        if session is not None and session.active_turn == lock.turn_id:
            session.active_turn = session.active_state = None

    async def read_paused(
        self, tenant: str, agent_id: str, session_id: str, turn_id: str
    ) -> PausedTurn:
        session = self._session(tenant, agent_id, session_id)
        turn, state = self._turn_state(tenant, session_id, turn_id)
        kept = len(Turn.model_validate_json(self.turns[(tenant, session_id)][turn_id].body).steps)
        return PausedTurn(
            tenant,
            turn,
            state,
            last_turn=session.last_turn,
            expires_at=session.expires_at,
            steps_in_item=kept,
        )

    async def lock_for_resume(
        self, paused: PausedTurn, agent_id: str, step: Step | None
    ) -> SessionLock:
        tenant, session_id, turn_id = paused.tenant, paused.turn.session_id, paused.turn.turn_id
        session = self.sessions.get((tenant, session_id))
        if session is None or session.agent_id != agent_id or session.deleting:
            raise NotFound(f"Session {session_id} not found")
        record = self.turns[(tenant, session_id)].get(turn_id)
        parked = (session.active_turn, session.active_state) == (turn_id, AWAITING_INPUT)
        if not parked or record is None or record.state.status != AWAITING_INPUT:
            raise Conflict(f"Turn {turn_id} is not awaiting input")
        session.active_state = RUNNING
        session.lease_until = self.clock() + self.lease_seconds
        record.state = replace(record.state, status=RUNNING)
        lock = SessionLock(
            tenant,
            session_id,
            turn_id,
            previous_turn=paused.last_turn,
            expires_at=paused.expires_at,
        )
        # As the table's store: the steps kept with the paused turn become records of their
        # own, ahead of the tool results (the turn's record keeps its copy until its next end).
        kept = paused.turn.steps[len(paused.turn.steps) - paused.steps_in_item :]
        for stored in [*kept, *([step] if step is not None else [])]:
            await self.save_step(lock, stored)
        self.kept[(tenant, session_id, turn_id)] = len(kept)
        return lock

    async def revert(
        self, lock: SessionLock, turn: Turn, state: TurnState, step_ids: list[str]
    ) -> None:
        session = self.sessions.get((lock.tenant, lock.session_id))
        if session is None or session.active_turn != lock.turn_id:
            raise Conflict(f"Turn {lock.turn_id} lost its session; it was not put back")
        steps = self._steps(lock, turn.turn_id)
        count = self.kept.pop((lock.tenant, lock.session_id, lock.turn_id), 0)
        kept = tuple(turn.steps[len(turn.steps) - count :])
        for step_id in step_ids:  # the kept steps' records stay, as the table's store leaves them
            steps.pop(step_id, None)
        await self.end_turn(lock, turn, state, steps=kept)

    async def turn(self, tenant: str, agent_id: str, session_id: str, turn_id: str) -> Turn:
        self._session(tenant, agent_id, session_id)
        return self._turn_state(tenant, session_id, turn_id)[0]

    # --- inside ---------------------------------------------------------------------------------

    def _session(self, tenant: str, agent_id: str, session_id: str) -> _Session:
        """The session, if it is there for `agent_id`: else NotFound, as DynamoDB's store says."""
        session = self.sessions.get((tenant, session_id))
        if (
            session is None
            or session.agent_id != agent_id
            or session.deleting
            or (session.expires_at is not None and session.expires_at <= self.clock())
        ):
            raise NotFound(f"Session {session_id} not found")
        return session

    def _turns(self, lock: SessionLock) -> dict[str, _TurnRecord]:
        return self.turns[(lock.tenant, lock.session_id)]

    def _steps(self, lock: SessionLock, turn_id: str) -> dict[str, str]:
        return self.steps.setdefault((lock.tenant, lock.session_id, turn_id), {})

    def _turn_state(self, tenant: str, session_id: str, turn_id: str) -> tuple[Turn, TurnState]:
        """A turn with its steps: the step records (in id order), then those kept inside it."""
        record = self.turns[(tenant, session_id)].get(turn_id)
        if record is None:
            raise NotFound(f"Turn {turn_id} not found")
        turn = Turn.model_validate_json(record.body)
        records = self.steps.get((tenant, session_id, turn_id), {})
        apart = [_STEP.validate_json(records[i]) for i in sorted(records)]
        if record.state.status == AWAITING_INPUT:  # a racing resume's records are not its own
            apart = apart[: record.apart]
        ids = {step.step_id for step in apart}
        turn.steps = apart + [step for step in turn.steps if step.step_id not in ids]
        return turn, copy.deepcopy(record.state)


def _json(model: BaseModel) -> str:
    """As the DynamoDB store writes bodies: no nulls, and 400 for text that cannot be stored."""
    try:
        return model.model_dump_json(exclude_none=True)
    except PydanticSerializationError as err:
        raise InvalidRequest(f"Request contains text that cannot be stored: {err}") from err


def _turn_json(turn: Turn, steps: list[Step]) -> str:
    return _json(turn.model_copy(update={"steps": steps}))


@dataclass
class _Conversation:
    version: int = 0  # as the table's: items appended at v take v..v+n-1; a delete adds 1
    items: list[str] = field(default_factory=list)  # each item as JSON, in order


@dataclass
class MemoryResponseStorage:
    #: (tenant, response id) -> (the response as JSON, its conversation)
    records: dict[tuple[str, str], tuple[str, list[dict[str, Any]]]] = field(default_factory=dict)
    #: (tenant, conversation id) -> its items and version
    conversations: dict[tuple[str, str], _Conversation] = field(default_factory=dict)
    #: (tenant, response id) -> the response as it started (JSON), until it ends
    started: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (tenant, response id) -> the spans stored with its end
    traces: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

    async def begin(
        self, tenant: str, response: OpenAIResponseObjectWithInput, lease_until: float
    ) -> None:
        self.started[(tenant, response.id)] = _json(response)

    async def abandon(self, tenant: str, response_id: str, error: Any) -> None:
        self.started.pop((tenant, response_id), None)

    async def context(self, tenant: str, response_id: str) -> list[dict[str, Any]]:
        record = self.records.get((tenant, response_id))
        if record is None:
            raise NotFound(f"Response {response_id} not found")
        return copy.deepcopy(record[1])

    async def save(
        self,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        context: list[dict[str, Any]],
        conversation: ConversationAppend | None = None,
        trace: list[dict[str, Any]] | None = None,
        stream_end: Any = None,  # a DynamoDB stream log's write: not landed here
    ) -> None:
        body = _json(response)
        self.traces[(tenant, response.id)] = copy.deepcopy(trace or [])
        if conversation is not None:
            found = self._conversation(tenant, conversation.conversation_id)
            if found.version != conversation.version:
                raise Conflict(f"Conversation {conversation.conversation_id} changed")
            found.items += [_json(item) for item in conversation.items]
            found.version += len(conversation.items)
        self.records[(tenant, response.id)] = (body, copy.deepcopy(context))

    async def conversation_context(
        self, tenant: str, conversation_id: str
    ) -> tuple[list[Any], int]:
        found = self._conversation(tenant, conversation_id)
        return [_ITEM.validate_json(item) for item in found.items], found.version

    async def prompt(self, tenant: str, prompt_id: str, version: int | None) -> Any:
        raise NotFound(f"Prompt {prompt_id} not found")  # the engine tests store none

    # --- for tests ------------------------------------------------------------------------------

    def add_conversation(self, tenant: str, items: list[Any] = ()) -> str:
        conversation_id = f"conv_{new_id().replace('-', '')}"
        self.conversations[(tenant, conversation_id)] = _Conversation(
            len(items), [_json(item) for item in items]
        )
        return conversation_id

    def conversation_items(self, tenant: str, conversation_id: str) -> list[Any]:
        return [_ITEM.validate_json(i) for i in self._conversation(tenant, conversation_id).items]

    def response(self, tenant: str, response_id: str) -> OpenAIResponseObjectWithInput:
        """A stored response, for tests."""
        return OpenAIResponseObjectWithInput.model_validate_json(
            self.records[(tenant, response_id)][0]
        )

    def _conversation(self, tenant: str, conversation_id: str) -> _Conversation:
        found = self.conversations.get((tenant, conversation_id))
        if found is None:
            raise NotFound(f"Conversation {conversation_id} not found")
        return found
