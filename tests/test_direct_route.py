"""A run's POSTs (create a turn, resume one, create a response) are DirectRoutes: a valid
request skips FastAPI's per-request solving of its parameters, and the app's middleware stack
and router, and every other request is answered exactly as FastAPI's own route answers it."""

from __future__ import annotations

import gzip
import json

import fastapi.routing
import pytest
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web import responses, turns
from agents_core.web.agents import router as agents_router
from agents_core.web.app import create_app
from agents_core.web.direct_route import DirectRoute
from agents_core.web.encoding import DecompressBodies
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.middleware.gzip import GZipMiddleware

from .conftest import TABLE
from .turn_support import WEATHER_TOOL, new_session, turn_url, user

RUNS = [
    ("/v1/agents/{agent_id}/session/{session_id}/turn", turns.create_turn),
    ("/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}/resume", turns.resume_turn),
    ("/v1/openai/v1/responses", responses.create_response),
]


def plain_routes() -> APIRouter:
    """The same endpoints on FastAPI's own APIRoute."""
    router = APIRouter()
    for path, endpoint in RUNS:
        router.add_api_route(path, endpoint, methods=["POST"])
    return router


@pytest.fixture
def apps(dynamodb, model):
    """(the app as the functions build it, the same endpoints on plain routes), one services."""
    model.reset()
    settings = Settings(table_name=TABLE, openai_base_url=model.url, inference_timeout_seconds=2)
    services = build_services(settings, dynamodb)
    direct = create_app(
        agents_router, turns.turns_router, turns.resume_router, responses.router, services=services
    )
    plain = create_app(agents_router, plain_routes(), services=services)
    with (
        TestClient(direct, raise_server_exceptions=False) as one,
        TestClient(plain, raise_server_exceptions=False) as other,
    ):
        yield one, other


@pytest.fixture
def solved(monkeypatch) -> list[str]:
    """The paths of the requests FastAPI solved the parameters of."""
    paths: list[str] = []
    real = fastapi.routing.solve_dependencies

    async def counted(*, request, **kwargs):
        paths.append(request.url.path)
        return await real(request=request, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    return paths


@pytest.fixture
def stacked(monkeypatch) -> list[str]:
    """The paths of the requests that went through the app's middleware stack."""
    paths: list[str] = []
    real = DecompressBodies.__call__

    async def counted(self, scope, receive, send):
        if scope["type"] == "http":
            paths.append(scope["path"])
        await real(self, scope, receive, send)

    monkeypatch.setattr(DecompressBodies, "__call__", counted)
    return paths


def test_each_runs_post_is_a_direct_route_and_nothing_else_is():
    routers = (turns.turns_router, turns.resume_router, responses.router)
    routes = [r for router in routers for r in router.routes if isinstance(r, APIRoute)]
    direct = {(r.path, r.endpoint) for r in routes if isinstance(r, DirectRoute)}
    assert direct == {(path, endpoint) for path, endpoint in RUNS}


def test_a_valid_turn_and_response_are_run_without_fastapis_solving(apps, model, solved):
    direct, _ = apps
    agent_id, session_id = new_session(direct)
    solved.clear()
    model.reply(text="Hi there", chunks=2)
    turn = direct.post(turn_url(agent_id, session_id), json={"messages": [user("hello")]})
    assert turn.status_code == 200 and turn.json()["output_message"]["content"] == "Hi there"
    model.reply(text="Hello", chunks=1)
    made = direct.post("/v1/openai/v1/responses", json={"model": "m", "input": "hi"})
    assert made.status_code == 200 and made.json()["output"][0]["content"][0]["text"] == "Hello"
    model.reply(text="Hello", chunks=1)
    aliased = direct.post("/v1/responses", json={"model": "m", "input": "hi"})  # Codex CLI's
    assert aliased.status_code == 200 and aliased.json()["status"] == "completed"
    assert solved == []
    model.reply(text="Hi again", chunks=1)
    again = direct.post(
        turn_url(agent_id, session_id),
        json={"messages": [user("hello")]},
        headers={"X-LlamaStack-Provider-Data": "{}"},  # a header a dependency reads
    )
    assert again.status_code == 200 and solved == [turn_url(agent_id, session_id)]


BAD_BODIES = [
    ("invalid JSON", b"{not json", {"content-type": "application/json"}),
    ("no messages", b'{"stream": true}', {"content-type": "application/json"}),
    ("messages of the wrong type", b'{"messages": "hi"}', {"content-type": "application/json"}),
    ("an unknown role", b'{"messages": [{"role": "x", "content": "a"}]}', {}),
    ("no content type", b'{"messages": [{"role": "user", "content": "hi"}]}', None),
    ("text", b'{"messages": [{"role": "user", "content": "hi"}]}', {"content-type": "text/plain"}),
    ("an empty body", b"", {"content-type": "application/json"}),
    ("bad provider data", b'{"messages": []}', {"X-LlamaStack-Provider-Data": "{nope"}),
]


@pytest.mark.parametrize(("why", "body", "headers"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_a_refused_turn_is_answered_as_fastapis_route_answers_it(apps, why, body, headers):
    direct, plain = apps
    agent_id, session_id = new_session(direct)
    for path in (turn_url(agent_id, session_id), turn_url("bad id", session_id)):
        answers = [
            client.post(path, content=body, headers=headers or {}) for client in (direct, plain)
        ]
        assert answers[0].status_code in (400, 415, 422), why
        assert answers[0].status_code == answers[1].status_code, why
        assert answers[0].json() == answers[1].json(), why


@pytest.mark.parametrize("agent_id", ["bad id", "a" * 129, "ok/..", "ok%00"])
def test_a_valid_turn_at_an_invalid_id_is_answered_as_fastapis_route_answers_it(apps, agent_id):
    direct, plain = apps
    body = {"messages": [user("hi")]}
    answers = [client.post(turn_url(agent_id, "s1"), json=body) for client in (direct, plain)]
    assert answers[0].status_code in (400, 404, 405)
    assert answers[0].status_code == answers[1].status_code
    assert answers[0].json() == answers[1].json()


@pytest.mark.parametrize(
    "body", [{}, {"model": 1, "input": "x"}, {"model": "m", "input": 3}, {"model": "m"}]
)
def test_a_refused_response_is_answered_as_fastapis_route_answers_it(apps, body):
    direct, plain = apps
    answers = [client.post("/v1/openai/v1/responses", json=body) for client in (direct, plain)]
    assert answers[0].status_code == answers[1].status_code and answers[0].status_code >= 400
    assert answers[0].json() == answers[1].json()


def test_an_endpoint_direct_route_cannot_serve_is_refused_when_the_app_is_built():
    async def listed(agent_id: str, limit: int = 10) -> None:  # a query parameter
        return None

    router = APIRouter()
    with pytest.raises(ValueError, match="query"):
        router.add_api_route("/v1/agents/{agent_id}/x", listed, route_class_override=DirectRoute)
        FastAPI().include_router(router)


def test_a_valid_runs_post_passes_by_the_middleware_stack_and_any_other_goes_through_it(
    apps, model, stacked
):
    direct, _ = apps
    agent_id, session_id = new_session(direct, client_tools=[WEATHER_TOOL])
    url = turn_url(agent_id, session_id)
    assert stacked == [  # not runs: through the stack
        "/v1/agents",
        f"/v1/agents/{agent_id}/session",
    ]
    stacked.clear()
    model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
    paused = direct.post(url, json={"messages": [user("weather?")], "stream": True})
    assert paused.status_code == 200 and "turn_awaiting_input" in paused.text
    waiting = direct.get(f"/v1/agents/{agent_id}/session/{session_id}").json()["turns"][0]
    stacked.clear()  # the session's read went through it
    call_id = waiting["output_message"]["tool_calls"][0]["call_id"]
    model.reply(text="Sunny.")
    answer = {"tool_responses": [{"call_id": call_id, "tool_name": "get_weather", "content": "x"}]}
    resumed = direct.post(f"{url}/{waiting['turn_id']}/resume", json={**answer, "stream": True})
    assert resumed.status_code == 200 and "turn_complete" in resumed.text
    model.reply(text="Hello", chunks=1)
    aliased = direct.post("/v1/responses", json={"model": "m", "input": "hi"})
    assert aliased.status_code == 200 and aliased.json()["status"] == "completed"
    assert stacked == []

    refused = direct.post(url, json={"messages": "hi"})
    assert refused.status_code == 400 and stacked == [url]
    model.reply(text="Zipped", chunks=1)
    body = gzip.compress(json.dumps({"messages": [user("hello")]}).encode())
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    zipped = direct.post(url, content=body, headers=headers)
    assert zipped.status_code == 200 and zipped.json()["output_message"]["content"] == "Zipped"
    assert stacked == [url, url]


def test_an_error_a_run_raises_is_answered_as_fastapis_route_answers_it(apps, monkeypatch):
    direct, plain = apps
    body = {"messages": [user("hi")]}
    unknown = [client.post(turn_url("nobody", "s1"), json=body) for client in (direct, plain)]
    assert unknown[0].status_code == 404 and unknown[0].json() == unknown[1].json()

    async def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    engine = direct.app.state.services.engine
    monkeypatch.setattr(engine, "start_turn", broken)
    agent_id, session_id = new_session(direct)
    failed = [client.post(turn_url(agent_id, session_id), json=body) for client in (direct, plain)]
    assert failed[0].status_code == 500 and failed[0].json() == failed[1].json()


def test_an_app_whose_runs_would_pass_by_other_middleware_refuses_to_start(dynamodb):
    services = build_services(Settings(table_name=TABLE), dynamodb)
    app = create_app(turns.turns_router, services=services)
    app.add_middleware(GZipMiddleware)
    with pytest.raises(ValueError, match="pass by middleware"), TestClient(app):
        pass
