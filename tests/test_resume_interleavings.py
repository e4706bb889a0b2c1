"""Racing resumes on the in-memory storage port, with the engine's storage calls interleaved in
random (seeded) orders: each call is atomic, as a DynamoDB request is, and between any two of
one racer's calls any other racer's may land. Whatever the order, one resume wins, the others
are refused with nothing changed, and the turn stores exactly one tool step."""

from __future__ import annotations

import asyncio
import inspect
import random
from typing import Any

import pytest
from agents_core.domain import COMPLETED
from agents_core.errors import Conflict, Unauthenticated

from .memory_storage import MemoryTurnStorage
from .test_engine import PARIS, TENANT, agents, calls, says

SEEDS = range(150)
RACERS = 6


class Interleaved:
    """The storage port, handing the event loop on a random number of times before and after
    each call, so that other racers' calls come in between."""

    def __init__(self, storage: MemoryTurnStorage, rng: random.Random) -> None:
        self._storage, self._rng = storage, rng

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._storage, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            await self._others()
            result = await attr(*args, **kwargs)
            await self._others()
            return result

        return call

    async def _others(self) -> None:
        for _ in range(self._rng.randrange(4)):
            await asyncio.sleep(0)


async def _race(world, turn_id: str, queued: list[bool]) -> list[str]:
    """Each racer's outcome: `won`, or the error that refused it."""

    async def racer(is_queued: bool) -> str:
        try:
            run = await world.resume(turn_id, "sunny", stream=not is_queued, queued=is_queued)
        except (Conflict, Unauthenticated) as err:
            return type(err).__name__
        await run.result()
        return "won"

    return await asyncio.gather(*(racer(q) for q in queued))


@pytest.mark.parametrize("seed", SEEDS)
def test_interleaved_resumes_have_one_winner_and_store_one_tool_step(seed):
    rng = random.Random(seed)
    storage = Interleaved(MemoryTurnStorage(), rng)
    replies = [says("Sunny.") for _ in range(RACERS)]  # enough for every racer that could win
    world = agents(calls(("call-1", "get_weather", PARIS)), *replies, storage=storage)
    queued = [rng.random() < 0.3 for _ in range(RACERS)]  # some are the queue's resumes

    async def scenario():
        paused = await world.ask("Weather in Paris?")
        outcomes = await _race(world, paused.turn_id, queued)
        return paused.turn_id, outcomes, await world.read(paused.turn_id)

    turn_id, outcomes, stored = asyncio.run(scenario())
    assert outcomes.count("won") == 1, outcomes
    for outcome, is_queued in zip(outcomes, queued, strict=True):
        # A direct loser is a 409; a queued one may also find its pause's token spent.
        refusals = {"won", "Conflict"} | ({"Unauthenticated"} if is_queued else set())
        assert outcome in refusals, outcomes
    assert stored.state.status == COMPLETED
    kinds = [step.step_type for step in stored.turn.steps]
    assert kinds == ["inference", "tool_execution", "inference"], kinds
    tool_steps = [
        body
        for (tenant, _, turn), steps in storage.steps.items()
        if (tenant, turn) == (TENANT, turn_id)
        for body in steps.values()
        if '"tool_execution"' in body
    ]
    assert len(tool_steps) <= 1  # none left behind by a loser either
    assert len(world.model.requests) == 2  # the pause and one continuation
