"""The engine's storage ports (`engine.storage`) on the DynamoDB stores. The stores are blocking
code; here each call runs under `blocking.run`, its DynamoDB requests awaited on the engine's
event loop, which keeps streaming meanwhile.

    storage = DynamoTurnStorage(agent_store, turn_store)
    lock = await storage.lock_session(tenant, agent_id, turn)
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .. import blocking
from ..domain import RUNNING, PausedTurn, TurnState
from ..log import logger

if TYPE_CHECKING:
    from ..api.agents import Agent, Step, Turn
    from ..api.prompts import Prompt
    from ..api.responses import OpenAIResponseObjectWithInput
    from ..domain import ConversationAppend
    from .agents import AgentStore
    from .conversations import ConversationStore
    from .prompts import PromptStore
    from .responses import ResponseStore
    from .stream_events import StreamEnd
    from .turns import HeldSession, TurnStore


class DynamoTurnStorage:
    def __init__(self, agents: AgentStore, turns: TurnStore) -> None:
        self._agents = agents
        self._turns = turns
        self.lease_seconds = turns.lease_seconds

    async def agent(self, tenant: str, agent_id: str) -> Agent:
        remembered = self._agents.remembered_agent(tenant, agent_id)  # no read for a hit
        if remembered is not None:
            return remembered
        return await blocking.run(self._agents.agent_for_turn, tenant, agent_id)

    def remembered_agent(self, tenant: str, agent_id: str) -> Agent | None:
        return self._agents.remembered_agent(tenant, agent_id)

    async def lock_session(self, tenant: str, agent_id: str, turn: Turn) -> HeldSession:
        return await blocking.run(self._turns.lock_session, tenant, agent_id, turn)

    async def turn_started(self, lock: HeldSession, turn: Turn) -> None:
        """A turn too large to travel with its lock gets an item of its own, written while the
        model works (the turn's end waits for it only when it is in parts)."""
        if lock.recorded:
            return
        record = self._turns.running_record(lock, turn, TurnState(RUNNING))
        lock.running_in_parts = record.in_parts
        lock.running_write = asyncio.create_task(blocking.run(self._turns.put_running, record))

    async def history(self, tenant: str, session_id: str, last_turn: str | None) -> list[Any]:
        remembered = self._turns.remembered_history(tenant, session_id, last_turn)
        if remembered is not None:
            return remembered
        return await blocking.run(self._turns.history, tenant, session_id, last_turn)

    async def save_step(self, lock: HeldSession, step: Step) -> None:
        await blocking.run(self._turns.save_step, lock, step)

    async def end_turn(
        self,
        lock: HeldSession,
        turn: Turn,
        state: TurnState,
        history: list[Any] | None = None,
        steps: tuple[Step, ...] = (),
    ) -> None:
        if lock.running_in_parts:  # its parts share keys with the end's parts
            await _landed(lock)
        try:
            await blocking.run(self._turns.end_turn, lock, turn, state, history, steps)
        finally:
            await _landed(lock)

    async def extend_lease(self, lock: HeldSession) -> bool:
        return await blocking.run(self._turns.extend_lease, lock)

    async def release(self, lock: HeldSession) -> None:
        await blocking.run(self._turns.release, lock)

    async def read_paused(
        self, tenant: str, agent_id: str, session_id: str, turn_id: str
    ) -> PausedTurn:
        return await blocking.run(self._turns.read_paused, tenant, agent_id, session_id, turn_id)

    async def lock_for_resume(
        self, paused: PausedTurn, agent_id: str, step: Step | None
    ) -> HeldSession:
        return await blocking.run(self._turns.lock_for_resume, paused, agent_id, step)

    async def revert(
        self, lock: HeldSession, turn: Turn, state: TurnState, step_ids: list[str]
    ) -> None:
        await blocking.run(self._turns.revert, lock, turn, state, step_ids)

    async def turn(self, tenant: str, agent_id: str, session_id: str, turn_id: str) -> Turn:
        return await blocking.run(self._turns.get_turn, tenant, agent_id, session_id, turn_id)


async def _landed(lock: HeldSession) -> None:
    """Wait for the running turn's own item. Its loss only hides a running turn from readers:
    the turn's end is written whole either way."""
    task, lock.running_write = lock.running_write, None
    if task is None:
        return
    try:
        await task
    except Exception:
        logger.exception("could not record running turn", extra={"turn_id": lock.turn_id})


class DynamoResponseStorage:
    def __init__(
        self, responses: ResponseStore, conversations: ConversationStore, prompts: PromptStore
    ) -> None:
        self._responses = responses
        self._conversations = conversations
        self._prompts = prompts
        #: Writes of running responses under way; a response's end waits for its own.
        self._starting: dict[tuple[str, str], asyncio.Task] = {}

    async def begin(
        self, tenant: str, response: OpenAIResponseObjectWithInput, lease_until: float
    ) -> None:
        """The item is made now (the response changes as it runs) and written while the model
        works; the end waits for that write (it must not land last)."""
        write = self._responses.begin_writes(tenant, response, lease_until)
        task = asyncio.create_task(blocking.run(write))
        self._starting[(tenant, response.id)] = task
        task.add_done_callback(lambda done: self._started(tenant, response.id, done))

    def _started(self, tenant: str, response_id: str, task: asyncio.Task) -> None:
        self._starting.pop((tenant, response_id), None)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("could not record running response", exc_info=task.exception())

    async def abandon(self, tenant: str, response_id: str, error: Any) -> None:
        await self._started_first(tenant, response_id)
        await blocking.run(self._responses.abandon, tenant, response_id, error)

    async def _started_first(self, tenant: str, response_id: str) -> None:
        """The running response's write is done (or failed) before anything else is written."""
        starting = self._starting.get((tenant, response_id))
        if starting is not None:
            await asyncio.wait([starting])

    async def context(self, tenant: str, response_id: str) -> list[Any]:
        return await blocking.run(self._responses.context, tenant, response_id)

    async def save(
        self,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        context: list[Any],
        conversation: ConversationAppend | None = None,
        trace: list[dict[str, Any]] | None = None,
        stream_end: StreamEnd | None = None,
    ) -> None:
        await self._started_first(tenant, response.id)
        if conversation is None:
            await blocking.run(
                self._responses.save, tenant, response, context, trace=trace, stream_end=stream_end
            )
            return
        writes = self._responses.writes(
            tenant, response, context, trace=trace, stream_end=stream_end
        )
        await blocking.run(self._conversations.append, tenant, conversation, writes)
        if stream_end is not None:
            stream_end.landed = True

    async def conversation_context(
        self, tenant: str, conversation_id: str
    ) -> tuple[list[Any], int]:
        return await blocking.run(self._conversations.context, tenant, conversation_id)

    async def prompt(self, tenant: str, prompt_id: str, version: int | None) -> Prompt:
        return await blocking.run(self._prompts.get, tenant, prompt_id, version)
