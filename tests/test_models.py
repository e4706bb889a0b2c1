"""The API models parse the contract's bodies and write them back in the same shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agents_core.api.agents import (
    Agent,
    AgentConfig,
    AgentTurnResponseStreamChunk,
    CreateAgentRequest,
    CreateAgentSessionRequest,
    Session,
    Turn,
)
from agents_core.api.common import PaginatedResponse, ToolConfig
from agents_core.api.responses import (
    CreateOpenaiResponseRequest,
    OpenAIResponseObject,
    OpenAIResponseObjectStream,
)
from pydantic import TypeAdapter, ValidationError

SEEDS = Path(__file__).parent / "fixtures" / "seeds"


def load(name: str):
    return json.loads((SEEDS / name).read_text())


def roundtrip(model, body):
    return model.model_validate(body).model_dump(mode="json", exclude_unset=True)


def test_seed_create_agent_request_roundtrips():
    body = load("create_agent_request.json")
    assert roundtrip(CreateAgentRequest, body) == body


def test_seed_get_agent_response_roundtrips():
    body = load("get_agent_response.json")
    assert roundtrip(Agent, body) == body


def test_seed_list_agents_response_roundtrips():
    body = load("list_agents_response.json")
    page = {**body, "has_more": False}
    parsed = PaginatedResponse.model_validate(page)
    assert [
        Agent.model_validate(a).model_dump(mode="json", exclude_unset=True) for a in parsed.data
    ] == body["data"]


def test_seed_sessions_roundtrip():
    for session in load("list_sessions_response.json"):
        assert roundtrip(Session, session) == session
    body = load("create_session_request.json")
    assert roundtrip(CreateAgentSessionRequest, body) == body


def test_deprecated_tool_fields_fold_into_tool_config():
    config = AgentConfig(
        model="m", instructions="i", tool_choice="required", tool_prompt_format="json"
    )
    assert config.tool_config == ToolConfig(tool_choice="required", tool_prompt_format="json")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"tool_choice": "auto", "tool_config": {"tool_choice": "required"}},
            "tool_choice is deprecated. Use tool_choice in tool_config instead.",
        ),
        (
            {"tool_prompt_format": "json", "tool_config": {"tool_prompt_format": "python_list"}},
            "tool_prompt_format is deprecated. Use tool_prompt_format in tool_config instead.",
        ),
    ],
)
def test_contradicting_deprecated_fields_are_rejected(overrides, message):
    with pytest.raises(ValidationError) as err:
        AgentConfig(model="m", instructions="i", **overrides)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "body",
    [
        {"instructions": "no model"},
        {"model": "m"},
        {"model": "m", "instructions": "i", "unknown_field": 1},
        {"model": "m", "instructions": "i", "sampling_params": {"strategy": {"type": "beam"}}},
        {"model": "m", "instructions": "i", "tool_config": {"system_message_behavior": "merge"}},
        {"model": "m", "instructions": "i", "response_format": {"type": "xml"}},
        {"model": "m", "instructions": "i", "max_infer_iters": 0},
    ],
)
def test_invalid_agent_configs_are_rejected(body):
    with pytest.raises(ValidationError):
        AgentConfig.model_validate(body)


TURN = {
    "turn_id": "t1",
    "session_id": "s1",
    "input_messages": [{"role": "user", "content": "What is 2+2?"}],
    "steps": [
        {
            "turn_id": "t1",
            "step_id": "p1",
            "step_type": "inference",
            "model_response": {
                "role": "assistant",
                "content": "",
                "stop_reason": "end_of_message",
                "tool_calls": [
                    {"call_id": "c1", "tool_name": "add", "arguments": {"a": 2, "b": 2}}
                ],
            },
        },
        {
            "turn_id": "t1",
            "step_id": "p2",
            "step_type": "tool_execution",
            "tool_calls": [{"call_id": "c1", "tool_name": "add", "arguments": {"a": 2, "b": 2}}],
            "tool_responses": [{"call_id": "c1", "tool_name": "add", "content": "4"}],
        },
        {"turn_id": "t1", "step_id": "p3", "step_type": "shield_call", "violation": None},
        {
            "turn_id": "t1",
            "step_id": "p4",
            "step_type": "memory_retrieval",
            "vector_db_ids": "db",
            "inserted_context": [{"type": "text", "text": "ctx"}],
        },
    ],
    "output_message": {
        "role": "assistant",
        "content": "4",
        "stop_reason": "end_of_turn",
        "tool_calls": [],
    },
    "output_attachments": [],
    "started_at": "2025-03-12T17:19:17.784328Z",
    "completed_at": "2025-03-12T17:19:18.123456Z",
}


def test_turn_with_all_four_step_kinds_roundtrips():
    assert roundtrip(Turn, TURN) == TURN


@pytest.mark.parametrize(
    "payload",
    [
        {"event_type": "turn_start", "turn_id": "t1"},
        {"event_type": "step_start", "step_type": "inference", "step_id": "p1", "metadata": {}},
        {
            "event_type": "step_progress",
            "step_type": "inference",
            "step_id": "p1",
            "delta": {"type": "text", "text": "4"},
        },
        {
            "event_type": "step_progress",
            "step_type": "inference",
            "step_id": "p1",
            "delta": {"type": "tool_call", "tool_call": '{"a": 2', "parse_status": "in_progress"},
        },
        {
            "event_type": "step_complete",
            "step_type": "inference",
            "step_id": "p1",
            "step_details": TURN["steps"][0],
        },
        {"event_type": "turn_complete", "turn": TURN},
        {"event_type": "turn_awaiting_input", "turn": TURN},
    ],
)
def test_turn_stream_chunks_roundtrip(payload):
    chunk = {"event": {"payload": payload}}
    assert roundtrip(AgentTurnResponseStreamChunk, chunk) == chunk


def test_openai_response_objects_parse():
    response = {
        "created_at": 1732200000,
        "id": "resp_1",
        "model": "m",
        "object": "response",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            },
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "f",
                "arguments": "{}",
                "id": "fc_1",
                "status": "completed",
            },
        ],
        "parallel_tool_calls": False,
        "status": "completed",
        "text": {"format": {"type": "text"}},
    }
    assert roundtrip(OpenAIResponseObject, response) == response
    event = TypeAdapter(OpenAIResponseObjectStream).validate_python(
        {
            "type": "response.output_text.delta",
            "sequence_number": 3,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "h",
        }
    )
    assert event.delta == "h"


def test_openai_input_accepts_typeless_messages_and_rejects_unknown_items():
    request = CreateOpenaiResponseRequest.model_validate(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call_output", "call_id": "c", "output": "4"},
            ],
        }
    )
    assert request.input[0].type == "message"
    with pytest.raises(ValidationError):
        CreateOpenaiResponseRequest.model_validate({"model": "m", "input": [{"type": "telepathy"}]})
    with pytest.raises(ValidationError):
        CreateOpenaiResponseRequest.model_validate(
            {"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}}
        )


def test_an_approval_request_keeps_the_models_call_id_whatever_its_characters():
    """Its id is the model's call id (the approval names it back), so it is bounded for the
    index key only; item ids the service or a client chooses follow the item path's pattern."""
    from agents_core.api.responses import (
        OpenAIResponseMCPApprovalRequest,
        OpenAIResponseOutputMessageFunctionToolCall,
    )

    request = OpenAIResponseMCPApprovalRequest(
        id="toolu.01:ab", name="f", arguments="{}", server_label="s"
    )
    assert request.id == "toolu.01:ab"
    for bad in ("", "x" * 257):
        with pytest.raises(ValidationError):
            OpenAIResponseMCPApprovalRequest(id=bad, name="f", arguments="{}", server_label="s")
    with pytest.raises(ValidationError):
        OpenAIResponseOutputMessageFunctionToolCall(id="fc.1", call_id="c", name="f", arguments="")
