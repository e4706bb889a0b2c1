"""The turns and resume functions' apps fed the API Gateway events in events/.

In AWS the Lambda Web Adapter turns each event into an HTTP request to uvicorn; here Mangum does
the same translation in-process, so the events, routes and app wiring are checked together.
"""

from __future__ import annotations

import json

from mangum import Mangum

from .lambda_support import LambdaContext, load_event, load_function, record_dynamodb_actions
from .test_template import table_actions
from .turn_support import sse_events

AGENT = "{{agent_id}}"
SESSION = "{{session_id}}"
TURN = "{{turn_id}}"
CALL = "{{call_id}}"


def invoke(app, event):
    return Mangum(app, lifespan="off")(event, LambdaContext())


def test_turn_and_resume_events_drive_the_function_apps(dynamodb):
    """...and every DynamoDB call each function makes on the way is one its policy in
    template.yaml allows (a call the policy lacks fails only once deployed)."""
    functions = {name: load_function(name) for name in ("agents", "turns", "resume")}
    calls = {name: record_dynamodb_actions(module) for name, module in functions.items()}
    agents, turns, resume = functions["agents"], functions["turns"].app, functions["resume"].app
    config = {
        "model": "offline",
        "instructions": "Be brief.",
        "client_tools": [
            {
                "name": "get_weather",
                "description": "Weather",
                "parameters": [
                    {
                        "name": "city",
                        "parameter_type": "string",
                        "description": "City",
                        "required": True,
                    }
                ],
            }
        ],
    }
    event = load_event("agents/create_agent.json")
    event["body"] = json.dumps({"agent_config": config})
    agent_id = json.loads(agents.handler(event, LambdaContext())["body"])["agent_id"]
    ids = {AGENT: agent_id}
    created = agents.handler(load_event("agents/create_session.json", ids), LambdaContext())
    ids[SESSION] = json.loads(created["body"])["session_id"]

    plain = invoke(turns, load_event("turns/create_turn.json", ids))
    assert plain["statusCode"] == 200
    assert json.loads(plain["body"])["output_message"]["content"] == "You said: Hello!"

    streamed = invoke(turns, load_event("turns/create_turn_stream.json", ids))
    assert streamed["headers"]["content-type"].startswith("text/event-stream")
    events = sse_events(streamed["body"])
    paused = events[-1]["event"]["payload"]
    assert paused["event_type"] == "turn_awaiting_input"
    call = paused["turn"]["output_message"]["tool_calls"][0]
    assert call["arguments"] == {"city": "Paris"}

    ids.update({TURN: paused["turn"]["turn_id"], CALL: call["call_id"]})
    resumed = invoke(resume, load_event("resume/resume_turn.json", ids))
    final = sse_events(resumed["body"])[-1]["event"]["payload"]
    assert final["event_type"] == "turn_complete"
    assert final["turn"]["output_message"]["content"] == "Tool result: 18C and sunny"

    ids["{{step_id}}"] = final["turn"]["steps"][-1]["step_id"]
    read = invoke(turns, load_event("agents/get_turn.json", ids))  # streamed: may pass 6 MB
    assert read["statusCode"] == 200 and json.loads(read["body"])["turn_id"] == ids[TURN]
    step = invoke(turns, load_event("agents/get_step.json", ids))
    assert json.loads(step["body"])["step"]["step_id"] == ids["{{step_id}}"], step
    for name in ("get_session", "delete_session", "delete_agent"):
        reply = agents.handler(load_event(f"agents/{name}.json", ids), LambdaContext())
        assert reply["statusCode"] in (200, 204), (name, reply)

    policies = {"agents": "AgentsFunction", "turns": "TurnsFunction", "resume": "ResumeFunction"}
    for name, logical_id in policies.items():
        missing = calls[name] - table_actions(logical_id)
        assert not missing, f"{logical_id} calls {sorted(missing)} without the permission"
    assert "dynamodb:BatchGetItem" in calls["resume"] and "dynamodb:UpdateItem" in calls["turns"]


def test_streaming_functions_read_the_tenant_from_the_web_adapter_header(services):
    """Under the Lambda Web Adapter the request context arrives in `x-amzn-request-context`;
    it decides the tenant inside Lambda, and is ignored outside (where anyone could send it)."""
    from dataclasses import replace

    from agents_core.api.agents import AgentConfig
    from agents_core.web.app import create_app
    from agents_core.web.turns import turns_router
    from fastapi.testclient import TestClient

    agent = services.agents.create_agent(
        "user-alice", AgentConfig(model="offline", instructions="x")
    )
    session = services.agents.create_session("user-alice", agent.agent_id, "s")
    url = f"/v1/agents/{agent.agent_id}/session/{session.session_id}/turn"
    body = {"messages": [{"role": "user", "content": "hi"}]}

    def header(principal: str) -> dict:
        context = {"requestId": "req-1", "authorizer": {"principalId": principal}, "identity": {}}
        return {"x-amzn-request-context": json.dumps(context)}

    services.settings = replace(services.settings, trust_request_context_header=True)
    with TestClient(create_app(turns_router, services=services)) as client:
        assert client.post(url, json=body, headers=header("user-alice")).status_code == 200
        assert client.post(url, json=body, headers=header("user-bob")).status_code == 404
    services.settings = replace(services.settings, trust_request_context_header=False)
    with TestClient(create_app(turns_router, services=services)) as client:
        assert client.post(url, json=body, headers=header("user-alice")).status_code == 404


def test_a_function_s_init_ends_with_what_it_built_kept_out_of_the_collector_s_way(dynamodb):
    """Each entry point's last init step freezes what init built (`container.init_done`): the
    app of a fresh import of the turns function is tracked by the collector but in none of
    the generations it walks."""
    import gc

    app = load_function("turns").app
    walked = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
    assert gc.is_tracked(app)
    assert id(app) not in walked
    assert id(app.router) not in walked
