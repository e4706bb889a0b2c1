"""The responses function's app fed the API Gateway events in events/responses (through Mangum,
standing in for the Lambda Web Adapter), plus tenancy and storage limits."""

from __future__ import annotations

import json

from agents_core.store.items import item_size
from botocore.exceptions import ClientError
from mangum import Mangum

from .conftest import TABLE
from .lambda_support import LambdaContext, load_event, load_function, record_dynamodb_actions
from .test_template import table_actions
from .turn_support import sse_events

EVENT_RESPONSE = "{{response_id}}"


def call(app, event, principal: str | None = None):
    if principal:
        event["requestContext"]["authorizer"] = {"principalId": principal}
    resp = Mangum(app, lifespan="off")(event, LambdaContext())
    return resp["statusCode"], resp["body"]


def test_every_responses_event_and_tenant_isolation(dynamodb):
    function = load_function("responses")
    calls = record_dynamodb_actions(function)
    app = function.app
    status, body = call(app, load_event("responses/create_response.json"), "alice")
    created = json.loads(body)
    assert status == 200 and created["output"][0]["content"][0]["text"] == "You said: Hello!"
    ids = {EVENT_RESPONSE: created["id"]}

    status, body = call(app, load_event("responses/create_response_stream.json"), "alice")
    events = sse_events(body)
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert "event: response.created" in body

    status, body = call(app, load_event("responses/list_responses.json"), "alice")
    assert [r["id"] for r in json.loads(body)["data"]][1] == created["id"]
    status, body = call(app, load_event("responses/get_response.json", ids), "alice")
    assert status == 200 and json.loads(body)["instructions"] == "Be brief."
    status, body = call(app, load_event("responses/list_input_items.json", ids), "alice")
    assert json.loads(body)["data"][0]["content"][0]["text"] == "Hello!"

    # Another tenant sees none of it and cannot delete it.
    for name in ("get_response.json", "list_input_items.json", "delete_response.json"):
        status, _ = call(app, load_event(f"responses/{name}", ids), "mallory")
        assert status == 404, name
    status, body = call(app, load_event("responses/list_responses.json"), "mallory")
    assert json.loads(body)["data"] == []

    status, body = call(app, load_event("responses/delete_response.json", ids), "alice")
    assert json.loads(body)["deleted"] is True
    status, _ = call(app, load_event("responses/get_response.json", ids), "alice")
    assert status == 404
    missing = calls - table_actions("ResponsesFunction")
    assert not missing, f"ResponsesFunction calls {sorted(missing)} without the permission"
    assert {"dynamodb:PutItem", "dynamodb:Query", "dynamodb:BatchWriteItem"} <= calls


def test_a_large_input_is_stored_under_the_item_limit(dynamodb):
    app = load_function("responses").app
    event = load_event("responses/create_response.json")
    big = "y" * 700_000
    event["body"] = json.dumps(
        {
            "model": "offline",
            "input": [{"role": "user", "content": big}, {"role": "user", "content": "short"}],
        }
    )
    status, body = call(app, event)
    response_id = json.loads(body)["id"]
    assert status == 200
    pages = dynamodb.get_paginator("scan").paginate(TableName=TABLE)
    items = [item for page in pages for item in page["Items"]]
    assert max(item_size(i) for i in items) < 400 * 1024
    event = load_event("responses/list_input_items.json", {EVENT_RESPONSE: response_id})
    status, body = call(app, event)
    assert [i["content"] for i in json.loads(body)["data"]] == [big, "short"]
    status, body = call(app, load_event("responses/list_responses.json"))
    listed = json.loads(body)["data"]
    assert listed[0]["id"] == response_id and listed[0]["input"][0]["content"] == big


def test_dynamodb_unavailable_fails_the_response_with_503_and_stores_nothing(dynamodb):
    function = load_function("responses")
    failures: list[str] = []

    def throttled(**_):
        failures.append("TransactWriteItems")
        error = {"Code": "ThrottlingException", "Message": "slow down"}
        raise ClientError({"Error": error, "ResponseMetadata": {}}, "TransactWriteItems")

    function.services.dynamodb.meta.events.register(
        "before-call.dynamodb.TransactWriteItems", throttled
    )
    status, body = call(function.app, load_event("responses/create_response.json"))
    assert failures and status == 503 and "not stored" in json.loads(body)["detail"]
    status, body = call(function.app, load_event("responses/create_response_stream.json"))
    events = sse_events(body)
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "server_error"
    # Only the stream's log is left, expiring with its retention (a rejoin replays the failure).
    items = dynamodb.scan(TableName=TABLE)["Items"]
    assert items and all(i["SK"]["S"].startswith("EVENT#") and "expires_at" in i for i in items)
