"""The legacy table's files, and what a client sees of stored objects (views), shared by the
generator (`tests/fixtures/make_legacy_table.py`) and the test (`tests/test_legacy_table.py`).

The generator wrote these views of every object as the code of its commit read them back (into
`legacy_table_expect.json`); the test builds the same views from what the code under test reads
from the dumped table, and compares. Views take API JSON only (what the routes return), never
stored items, so they survive any rewrite of the store. The dump is plain DynamoDB JSON, loaded
with a plain BatchWriteItem: no store code is involved in writing it back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DUMP = FIXTURES / "legacy_table.json"
EXPECT = FIXTURES / "legacy_table_expect.json"

DEFAULT_TENANT = "default"  # the tenant of a request with no API Gateway request context


def tenant_headers(tenant: str) -> dict[str, str]:
    """The request context the Lambda Web Adapter passes (trusted when the app's settings say
    so): the authorizer's principal is the tenant. None for the local default tenant."""
    if tenant == DEFAULT_TENANT:
        return {}
    context = {"requestId": "legacy", "authorizer": {"principalId": tenant}, "identity": {}}
    return {"x-amzn-request-context": json.dumps(context)}


# --- the dump: DynamoDB JSON, binary values base64-encoded under their "B" type ----------------


def _to_json(value: dict[str, Any]) -> dict[str, Any]:
    ((kind, raw),) = value.items()
    if kind == "B":
        return {"B": base64.b64encode(bytes(raw)).decode()}
    if kind == "BS":
        return {"BS": [base64.b64encode(bytes(b)).decode() for b in raw]}
    if kind == "M":
        return {"M": {k: _to_json(v) for k, v in raw.items()}}
    if kind == "L":
        return {"L": [_to_json(v) for v in raw]}
    return {kind: raw}


def _from_json(value: dict[str, Any]) -> dict[str, Any]:
    ((kind, raw),) = value.items()
    if kind == "B":
        return {"B": base64.b64decode(raw)}
    if kind == "BS":
        return {"BS": [base64.b64decode(b) for b in raw]}
    if kind == "M":
        return {"M": {k: _from_json(v) for k, v in raw.items()}}
    if kind == "L":
        return {"L": [_from_json(v) for v in raw]}
    return {kind: raw}


def write_dump(items: list[dict[str, Any]], path: Path = DUMP) -> None:
    """One item a line, sorted by key, so a diff of the file reads item by item."""
    rows = sorted(
        ({name: _to_json(v) for name, v in item.items()} for item in items),
        key=lambda i: (i["PK"]["S"], i["SK"]["S"]),
    )
    path.write_text("[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]\n")


def read_dump(path: Path = DUMP) -> list[dict[str, Any]]:
    """The items as boto3's DynamoDB client takes them (binary values as bytes)."""
    return [
        {name: _from_json(v) for name, v in row.items()} for row in json.loads(path.read_text())
    ]


def put_items(
    client: Any,
    table: str,
    items: list[dict[str, Any]],
    adjust: Callable[[dict[str, Any]], dict[str, Any]] = lambda item: item,
) -> None:
    """Write `items` (each through `adjust`) with BatchWriteItem, until DynamoDB took them all."""
    requests = [{"PutRequest": {"Item": adjust(dict(item))}} for item in items]
    for start in range(0, len(requests), 25):
        pending = {table: requests[start : start + 25]}
        for attempt in range(8):
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                break
            time.sleep(0.05 * 2**attempt)
        assert not pending, "DynamoDB left items unwritten"


# --- views ---------------------------------------------------------------------------------

#: Longer strings are compared by length and SHA-256, so the expectations file stays small.
LONG = 1000


def digest(value: Any) -> Any:
    if isinstance(value, str) and len(value) > LONG:
        return {"length": len(value), "sha256": hashlib.sha256(value.encode()).hexdigest()}
    if isinstance(value, list):
        return [digest(v) for v in value]
    if isinstance(value, dict):
        return {k: digest(v) for k, v in value.items()}
    return value


def text_of(content: Any) -> Any:
    """The text of an Agents API message content (a string or a list of content items)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return content


def agent_view(agent: dict[str, Any]) -> dict[str, Any]:
    config = agent["agent_config"]
    return {
        "agent_id": agent["agent_id"],
        "created_at": agent["created_at"],
        "model": config["model"],
        "instructions": config["instructions"],
        "enable_session_persistence": config.get("enable_session_persistence"),
        "client_tools": [t["name"] for t in config.get("client_tools") or []],
        "max_infer_iters": config.get("max_infer_iters"),
    }


def _calls(calls: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [
        {"call_id": c["call_id"], "tool_name": c["tool_name"], "arguments": c["arguments"]}
        for c in calls or []
    ]


def message_view(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": text_of(message["content"]),
        "stop_reason": message.get("stop_reason"),
        "tool_calls": _calls(message.get("tool_calls")),
    }


def step_view(step: dict[str, Any]) -> dict[str, Any]:
    view = {
        "step_id": step["step_id"],
        "step_type": step["step_type"],
        "turn_id": step["turn_id"],
        "started_at": step.get("started_at"),
        "completed_at": step.get("completed_at"),
    }
    if step["step_type"] == "inference":
        view["model_response"] = message_view(step["model_response"])
    elif step["step_type"] == "tool_execution":
        view["tool_calls"] = _calls(step["tool_calls"])
        view["tool_responses"] = [
            {"call_id": r["call_id"], "tool_name": r["tool_name"], "content": text_of(r["content"])}
            for r in step["tool_responses"]
        ]
    return digest(view)


def turn_view(turn: dict[str, Any]) -> dict[str, Any]:
    return digest(
        {
            "turn_id": turn["turn_id"],
            "session_id": turn["session_id"],
            "input": [[m["role"], text_of(m["content"])] for m in turn["input_messages"]],
            "output": message_view(turn["output_message"]),
            "steps": [step_view(s) for s in turn["steps"]],
            "started_at": turn["started_at"],
            "completed_at": turn.get("completed_at"),
        }
    )


def session_view(session: dict[str, Any]) -> dict[str, Any]:
    return {
        "session_id": session["session_id"],
        "session_name": session["session_name"],
        "started_at": session["started_at"],
        "turns": [turn_view(t) for t in session["turns"]],
    }


def item_view(item: dict[str, Any]) -> dict[str, Any]:
    """A Responses API input or output item."""
    kind = item.get("type", "message")
    view: dict[str, Any] = {"type": kind, "id": item.get("id")}
    if kind == "message":
        content = item["content"]
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        view |= {"role": item["role"], "text": content}
    elif kind == "function_call":
        view |= {"call_id": item["call_id"], "name": item["name"], "arguments": item["arguments"]}
    elif kind == "function_call_output":
        view |= {"call_id": item["call_id"], "output": item["output"]}
    return digest(view)


def response_view(response: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": response["id"],
        "status": response["status"],
        "model": response["model"],
        "created_at": response["created_at"],
        "previous_response_id": response.get("previous_response_id"),
        "instructions": response.get("instructions"),
        "error": response.get("error"),
        "output": [item_view(i) for i in response["output"]],
    }


def model_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages a chat completions request sent the model."""
    return digest(request["messages"])
