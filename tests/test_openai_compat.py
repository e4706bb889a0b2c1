"""The OpenAI-compatible provider when the model cannot be reached: the caller and the log say so."""

from __future__ import annotations

import logging
import socket

from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.agents import router as agents_router
from agents_core.web.app import create_app
from agents_core.web.turns import turns_router
from fastapi.testclient import TestClient

from .conftest import TABLE
from .turn_support import new_session, turn_url, user


def closed_port() -> int:
    """A local port nothing listens on (it was just free)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_connection_says_the_model_could_not_be_reached_and_logs_it(dynamodb, caplog):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    settings = Settings(table_name=TABLE, openai_base_url=url, inference_timeout_seconds=2)
    app = create_app(agents_router, turns_router, services=build_services(settings, dynamodb))
    caplog.set_level(logging.WARNING)
    with TestClient(app, raise_server_exceptions=False) as api:
        agent_id, session_id = new_session(api)
        resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("hi")]})
    assert resp.status_code == 502
    assert resp.json()["detail"] == f"could not reach the model at {url}: connection refused"
    warnings = [r for r in caplog.records if r.getMessage() == "could not reach the model"]
    assert [(w.levelname, w.url, w.reason) for w in warnings] == [
        ("WARNING", url, "connection refused")
    ]


def test_model_calls_reuse_one_kept_alive_connection_per_event_loop(model):
    """The stream is read to its end after `[DONE]`, so its connection serves the next call:
    no new TCP (and, against a real server, TLS) handshake per model call."""
    import asyncio

    from agents_core.inference.openai_compat import OpenAICompatProvider
    from agents_core.inference.types import ChatMessage, ChatRequest, TextDelta

    model.reset()
    provider = OpenAICompatProvider(model.url, None, timeout=5)

    async def calls() -> list[str]:
        texts = []
        for n in range(3):
            model.reply(text=f"answer {n}")
            request = ChatRequest(model="m", messages=[ChatMessage("user", "hi")])
            events = [e async for e in provider.stream(request)]
            texts.append("".join(e.text for e in events if isinstance(e, TextDelta)))
        return texts

    assert asyncio.run(calls()) == ["answer 0", "answer 1", "answer 2"]
    assert model.connections == 1
    # A new event loop (a function may run each invocation in one) gets its own connection:
    # the kept one belongs to the loop that is gone.
    assert asyncio.run(calls()) == ["answer 0", "answer 1", "answer 2"]
    assert model.connections == 2
