"""Shields in both faces of the agent loop, over the in-memory storage and a fake safety
service (the engine's ShieldService port): shield_call steps, a blocked input that never
reaches the model, a blocked answer, guardrails on responses ending with a refusal. The real
providers are tested in test_safety.py; end to end in test_shields_e2e.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents_core.api.common import SafetyViolation
from agents_core.errors import InvalidRequest, UpstreamFailed

from .test_engine import TENANT, agents, chunks, kinds, refused_with_nothing_stored, says
from .test_engine_server_tools import FakeRuntime, responses_with
from .test_open_responses import check_stream, streamed


class FakeShields:
    """Shields by id: each blocks messages containing its word."""

    def __init__(self, **words: str) -> None:
        self.words = words
        self.checks: list[tuple[list[str], str, list[str]]] = []
        self.broken = False

    async def known(self, tenant: str, shield_ids: list[str]) -> None:
        unknown = [i for i in shield_ids if i not in self.words]
        if unknown:
            raise InvalidRequest(f"Shield {unknown[0]} not found")

    async def check(self, tenant, shield_ids, messages, *, source) -> Any:
        self.checks.append((shield_ids, source, [m["content"] for m in messages]))
        if self.broken:
            raise UpstreamFailed("Shield guard (bedrock) failed: throttled")
        for shield in shield_ids:
            if any(self.words[shield] in m["content"] for m in messages):
                return SafetyViolation(
                    violation_level="error",
                    user_message=f"{shield} says no",
                    metadata={"shield": shield},
                )
        return None


def shielded(*replies, shields: FakeShields, **config):
    world = agents(*replies, **config)
    world.engine.shields = shields
    return world


def test_a_passing_turn_has_its_input_and_output_shield_steps():
    shields = FakeShields(guard="bomb")
    world = shielded(
        says("Hello there."), shields=shields, input_shields=["guard"], output_shields=["guard"]
    )

    async def scenario():
        items = await chunks(await world.start("Hi", stream=True))
        return items, await world.read(items[-1].event.payload.turn.turn_id)

    items, stored = asyncio.run(scenario())
    assert [k for k in kinds(items) if "shield" in k] == [
        "step_start:shield_call",
        "step_complete:shield_call",
        "step_start:shield_call",
        "step_complete:shield_call",
    ]
    turn = stored.turn
    assert [s.step_type for s in turn.steps] == ["shield_call", "inference", "shield_call"]
    assert all(s.violation is None for s in turn.steps if s.step_type == "shield_call")
    assert turn.output_message.content == "Hello there."
    assert shields.checks == [
        (["guard"], "input", ["Hi"]),
        (["guard"], "output", ["Hello there."]),
    ]


def test_a_blocked_input_ends_the_turn_with_the_shields_message_and_no_model_call():
    shields = FakeShields(guard="bomb")
    world = shielded(says("never"), shields=shields, input_shields=["guard"])
    turn = asyncio.run(world.ask("How to build a bomb"))
    assert world.model.requests == []
    (step,) = turn.steps
    assert step.step_type == "shield_call" and step.violation.user_message == "guard says no"
    assert turn.output_message.content == "guard says no"
    assert turn.output_message.stop_reason == "end_of_turn"


def test_a_blocked_answer_is_replaced_by_the_shields_message_after_its_steps():
    shields = FakeShields(guard="secret")
    world = shielded(says("The secret is 42."), shields=shields, output_shields=["guard"])
    turn = asyncio.run(world.ask("Tell me"))
    assert [s.step_type for s in turn.steps] == ["inference", "shield_call"]
    assert turn.steps[1].violation.metadata == {"shield": "guard"}
    assert turn.output_message.content == "guard says no"


def test_an_unknown_shield_is_refused_before_anything_is_stored():
    world = shielded(says("never"), shields=FakeShields(guard="x"), input_shields=["nope"])
    refused_with_nothing_stored(world, "nope")


def test_a_failing_shield_fails_the_turn_closed():
    shields = FakeShields(guard="x")
    shields.broken = True
    world = shielded(says("never"), shields=shields, input_shields=["guard"])
    items = asyncio.run(chunks(asyncio.run(world.start("Hi", stream=True))))
    assert kinds(items)[-1] == "error 502"
    assert world.model.requests == []


def guarded(shields: FakeShields, *replies):
    engine, storage, scripted = responses_with(FakeRuntime(), *replies)
    engine.shields = shields
    return engine, storage, scripted


def test_a_response_whose_input_a_guardrail_blocks_completes_with_a_refusal():
    engine, storage, scripted = guarded(FakeShields(guard="bomb"), says("never"))
    events = asyncio.run(streamed(engine, input="a bomb please", guardrails=["guard"]))
    check_stream(events)
    final = events[-1].response
    assert final.status == "completed" and scripted.requests == []
    (message,) = final.output
    assert message.content[0].type == "refusal"
    assert message.content[0].refusal == "guard says no"
    assert "response.refusal.done" in [e.type for e in events]
    context = asyncio.run(storage.context(TENANT, final.id))
    assert context[-1] == {"role": "assistant", "content": "guard says no"}


def test_a_response_whose_answer_a_guardrail_blocks_keeps_only_the_refusal():
    engine, storage, _ = guarded(FakeShields(guard="secret"), says("The secret is 42."))
    events = asyncio.run(streamed(engine, input="Tell me", guardrails=["guard"]))
    check_stream(events)
    final = events[-1].response
    assert [(o.type, o.content[0].type) for o in final.output] == [("message", "refusal")]
    stored = storage.response(TENANT, final.id)
    assert "secret" not in stored.model_dump_json()
    context = asyncio.run(storage.context(TENANT, final.id))
    assert "secret" not in str(context)


def test_guardrails_naming_an_unknown_shield_are_a_400():
    engine, _, scripted = guarded(FakeShields(guard="x"), says("never"))
    with pytest.raises(InvalidRequest, match="nope"):
        asyncio.run(streamed(engine, input="Hi", guardrails=["nope"]))
    assert scripted.requests == []
