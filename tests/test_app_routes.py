"""The app serves each router's routes as their modules built them. FastAPI builds a route's
parameters and response fields when it is declared, at import; its `include_router` would
build them all once more at the first request, which in Lambda is the Web Adapter's readiness
check, within init."""

from __future__ import annotations

import fastapi.routing
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web import responses
from agents_core.web.app import create_app
from agents_core.web.conversations import router as conversations_router
from agents_core.web.discovery import router as discovery_router
from fastapi.testclient import TestClient

from .conftest import TABLE


def test_a_first_request_builds_no_route_again_and_every_route_is_served(dynamodb, monkeypatch):
    built: list[str] = []
    real = fastapi.routing._populate_api_route_state

    def counted(route, *args, **kwargs):
        built.append(getattr(route, "path", "?"))
        return real(route, *args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "_populate_api_route_state", counted)
    routers = (responses.router, conversations_router, discovery_router)
    services = build_services(Settings(table_name=TABLE), dynamodb)
    app = create_app(*routers, services=services)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/").status_code == 404  # the readiness check
        assert client.get("/v1/health").json() == {"status": "OK"}
        missing = client.get("/v1/conversations/conv_missing")
        assert missing.status_code == 404 and "conv_missing" in missing.text
        assert client.get("/v1/openai/v1/responses/resp_missing").status_code == 404
    assert built == []
    served = {id(route) for route in app.routes}
    assert all(id(route) in served for router in routers for route in router.routes)
