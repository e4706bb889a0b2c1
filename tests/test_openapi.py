"""`/openapi.json` describes what the service answers: the statuses each route returns, and
message fields a request must send."""

from __future__ import annotations

import pytest

from .conftest import agent_config
from .turn_support import new_session, turn_url


@pytest.fixture
def document(api) -> dict:
    return api.get("/openapi.json").json()


def operations(document: dict):
    for path, ops in document["paths"].items():
        for method, operation in ops.items():
            yield path, method, operation


def test_no_operation_lists_422_and_every_one_lists_the_400_it_answers(document):
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for path, method, operation in operations(document):
        assert "422" not in operation["responses"], (method, path)
        assert "400" in operation["responses"], (method, path)
        if "{" in path:
            assert "404" in operation["responses"], (method, path)
        if "requestBody" in operation:
            assert "415" in operation["responses"], (method, path)


def test_the_statuses_listed_are_the_ones_the_routes_answer(api, document):
    paths = document["paths"]
    unknown = "01937a2e-5f00-7000-8000-0000000000a1"
    assert api.get(f"/v1/agents/{unknown}").status_code == 404
    assert "404" in paths["/v1/agents/{agent_id}"]["get"]["responses"]
    form = api.post("/v1/agents", content=b"{}", headers={"content-type": "text/plain"})
    assert form.status_code == 415 and "415" in paths["/v1/agents"]["post"]["responses"]
    huge = api.post("/v1/agents", json={"agent_config": agent_config(instructions="x" * 500_000)})
    assert huge.status_code == 413 and "413" in paths["/v1/agents"]["post"]["responses"]
    turn = "/v1/agents/{agent_id}/session/{session_id}/turn"
    assert {"409", "502", "504"} <= set(paths[turn]["post"]["responses"])


def test_files_and_vector_stores_document_their_sizes_missing_files_and_raw_content():
    from agents_core.services import Services
    from agents_core.settings import Settings
    from agents_core.web.app import create_app
    from agents_core.web.files import files_router, vector_stores_router

    app = create_app(files_router, vector_stores_router, services=Services(Settings()))
    paths = app.openapi()["paths"]
    for prefix in ("/v1", "/v1/openai/v1"):
        assert "413" in paths[f"{prefix}/files/uploads"]["post"]["responses"]
        assert "413" in paths[f"{prefix}/files"]["post"]["responses"]
        assert "404" in paths[f"{prefix}/vector_stores"]["post"]["responses"]
        assert "409" in paths[f"{prefix}/vector_stores/{{vector_store_id}}"]["post"]["responses"]
        content = paths[f"{prefix}/files/{{file_id}}/content"]["get"]["responses"]["200"]
        assert list(content["content"]) == ["application/octet-stream"]
    from fastapi.testclient import TestClient

    # A route of its own is not also one of its sibling's `{file_id}`s.
    refused = TestClient(app).request("OPTIONS", "/v1/files/uploads")
    assert refused.status_code == 405 and refused.headers["allow"] == "POST"


def test_a_method_a_path_does_not_take_is_405_naming_every_method_it_does(api):
    resp = api.request("TRACE", "/v1/agents")
    assert resp.status_code == 405 and resp.json()["detail"] == "Method Not Allowed"
    assert resp.headers["allow"] == "GET, HEAD, POST"
    one = api.request("PUT", "/v1/agents/0193a2e0-0000-7000-8000-000000000001")
    assert one.status_code == 405 and one.headers["allow"] == "DELETE, GET, HEAD"


def test_a_session_read_documents_its_has_more_extension(document):
    session = document["paths"]["/v1/agents/{agent_id}/session/{session_id}"]["get"]
    ref = session["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schema = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert "has_more" in schema["properties"] and "has_more" not in schema.get("required", [])


def test_a_message_role_is_required_in_the_document_as_by_the_service(api, document):
    schemas = document["components"]["schemas"]
    for name in ("UserMessage", "ToolResponseMessage"):
        assert "role" in schemas[name]["required"], name
    agent_id, session_id = new_session(api)
    resp = api.post(turn_url(agent_id, session_id), json={"messages": [{"content": "hi"}]})
    assert resp.status_code == 400


def test_both_stream_rejoin_routes_are_documented_as_event_streams_with_their_parameters():
    from agents_core.services import Services
    from agents_core.settings import Settings
    from agents_core.web.app import create_app
    from agents_core.web.responses import router as responses_router
    from agents_core.web.turns import turns_router

    paths = create_app(responses_router, turns_router, services=Services(Settings())).openapi()[
        "paths"
    ]
    turn = "/agents/{agent_id}/session/{session_id}/turn/{turn_id}/stream"
    response = "/responses/{response_id}"
    for path in (f"/v1{turn}", f"/v1alpha{turn}", f"/v1/openai/v1{response}", f"/v1{response}"):
        operation = paths[path]["get"]
        assert "text/event-stream" in operation["responses"]["200"]["content"], path
        params = {(p["name"], p["in"]) for p in operation["parameters"]}
        assert {("starting_after", "query"), ("last-event-id", "header")} <= params, path
        assert {"400", "404"} <= set(operation["responses"]), path
    assert ("stream", "query") in {
        (p["name"], p["in"]) for p in paths[f"/v1{response}"]["get"]["parameters"]
    }
    assert "application/json" in paths[f"/v1{response}"]["get"]["responses"]["200"]["content"]


def test_a_route_under_an_alias_prefix_answers_as_the_route_itself(api):
    """`/v1alpha/agents` is `/v1/agents` (web/common.py ALIASES), methods and all; a path that
    only begins like an alias is not."""
    made = api.post("/v1alpha/agents", json={"agent_config": agent_config()})
    assert made.status_code == 200
    agent_id = made.json()["agent_id"]
    assert api.get(f"/v1alpha/agents/{agent_id}").json() == api.get(f"/v1/agents/{agent_id}").json()
    refused = api.request("TRACE", "/v1alpha/agents")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD, POST"
    assert api.get("/v1alphaagents").status_code == 404


def test_the_document_lists_each_alias_beside_its_route_with_operation_ids_of_its_own(document):
    from agents_core.web.common import aliased

    paths = document["paths"]
    ids = [operation["operationId"] for each in paths.values() for operation in each.values()]
    assert len(ids) == len(set(ids))
    routes = [path for path in paths if aliased(path)]
    assert routes
    for path in routes:
        alias = paths[aliased(path)]
        assert alias.keys() == paths[path].keys()
        for method, operation in alias.items():
            assert operation["responses"].keys() == paths[path][method]["responses"].keys()
