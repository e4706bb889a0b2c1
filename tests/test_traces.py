"""Traces end to end: `make run`'s server with a collector (OTEL_EXPORTER_OTLP_ENDPOINT), the
scripted model server, a real MCP server, and the clients users have. Each turn and response
reads back as a trace (`GET .../trace`) and reaches the collector as OpenTelemetry GenAI
spans with the same ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from llama_stack_client import LlamaStackClient

from .local_server import ROOT, running_server
from .peers.mcp_server import McpPeer
from .peers.otlp_collector import OtlpCollector, attributes
from .turn_support import WEATHER_TOOL


@pytest.fixture(scope="module")
def collector() -> Iterator[OtlpCollector]:
    with OtlpCollector() as server:
        yield server


@pytest.fixture(scope="module")
def peer() -> Iterator[McpPeer]:
    with McpPeer() as server:
        yield server


@pytest.fixture(scope="module")
def base(model, collector):
    env = {"OPENAI_BASE_URL": model.url, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
    with running_server(env) as (url, _):
        yield url


@pytest.fixture
def http(base, model, collector) -> Iterator[httpx.Client]:
    model.reset()
    collector.status = 200
    with httpx.Client(base_url=base, timeout=30) as client:
        yield client


def exported(collector: OtlpCollector, trace_id: str, count: int) -> list[dict]:
    """The collector's spans of `trace_id`, once `count` have come (the export follows the
    stream's last event); a bounded wait."""
    for _ in range(100):
        spans = [s for s in collector.spans() if s["traceId"] == trace_id]
        if len(spans) >= count:
            return spans
        time.sleep(0.05)
    return [s for s in collector.spans() if s["traceId"] == trace_id]


def new_session(http: httpx.Client, **config) -> tuple[str, str]:
    agent = http.post(
        "/v1/agents", json={"agent_config": {"model": "m", "instructions": "Hi", **config}}
    )
    agent_id = agent.json()["agent_id"]
    session = http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "traced"})
    return agent_id, session.json()["session_id"]


def test_a_turn_trace_has_a_span_per_shield_check_model_call_and_tool_call(
    http, model, peer, collector
):
    LlamaStackClient(base_url=str(http.base_url)).toolgroups.register(
        toolgroup_id="mcp::traced",
        provider_id="model-context-protocol",
        mcp_endpoint={"uri": peer.url},
    )
    model.reply(tool_calls=[("add", '{"a": 2, "b": 3}')])
    model.reply(text="It is 5.")
    agent_id, session_id = new_session(http, toolgroups=["mcp::traced"], input_shields=["offline"])
    body = {"messages": [{"role": "user", "content": "2+3?"}], "stream": True}
    streamed = http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body).text
    turn_id = json.loads(streamed.split("data: ")[1].split("\n")[0])["event"]["payload"]["turn_id"]

    trace = http.get(f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}/trace").json()
    assert trace["complete"] is True and len(trace["trace_id"]) == 32
    kinds = [(s["kind"], s["name"]) for s in trace["spans"]]
    assert kinds == [
        ("run", "invoke_agent"),
        ("shield_call", "shield input"),
        ("inference", "chat m"),
        ("tool_execution", "execute_tool add"),
        ("inference", "chat m"),
    ]
    root, shield, first, tool, answer = trace["spans"]
    assert root["parent_span_id"] is None
    assert {s["parent_span_id"] for s in trace["spans"][1:]} == {root["span_id"]}
    assert first["attributes"]["gen_ai.operation.name"] == "chat"
    assert first["attributes"]["gen_ai.request.model"] == "m"
    assert first["attributes"]["gen_ai.provider.name"] == "openai"
    assert (
        first["attributes"]["gen_ai.usage.input_tokens"],
        first["attributes"]["gen_ai.usage.output_tokens"],
    ) == (11, 7)
    assert first["attributes"]["gen_ai.response.time_to_first_chunk_ms"] >= 0
    assert tool["attributes"]["gen_ai.tool.name"] == "add"
    assert json.loads(tool["attributes"]["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert tool["attributes"]["gen_ai.tool.call.result"] == "5"
    assert (
        shield["attributes"]["shield.source"] == "input"
        and "shield.violation" not in shield["attributes"]
    )
    assert all(
        s["started_at"] <= s["completed_at"] and s["duration_ms"] >= 0 for s in trace["spans"]
    )

    spans = exported(collector, trace["trace_id"], 5)
    by_id = {s["spanId"]: s for s in spans}
    assert set(by_id) == {s["span_id"] for s in trace["spans"]}
    sent_root = by_id[root["span_id"]]
    assert (
        "parentSpanId" not in sent_root
        and sent_root["resource"]["service.name"] == "serverless-agents"
    )
    assert attributes(sent_root)["gen_ai.agent.id"] == agent_id
    chat = attributes(by_id[first["span_id"]])
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.usage.output_tokens"] == 7
    assert by_id[first["span_id"]]["parentSpanId"] == root["span_id"]
    executed = attributes(by_id[tool["span_id"]])
    assert (executed["gen_ai.operation.name"], executed["gen_ai.tool.name"]) == (
        "execute_tool",
        "add",
    )
    assert int(by_id[tool["span_id"]]["endTimeUnixNano"]) >= int(
        by_id[tool["span_id"]]["startTimeUnixNano"]
    )


def test_a_paused_turn_and_its_resume_are_two_runs_of_one_trace(http, model, collector):
    model.reply(tool_calls=[("get_weather", '{"city": "Rome"}')])
    model.reply(text="Rome is warm.")
    agent_id, session_id = new_session(http, client_tools=[WEATHER_TOOL])
    turns = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    paused = http.post(turns, json={"messages": [{"role": "user", "content": "Rome?"}]}).json()
    (call,) = paused["output_message"]["tool_calls"]
    first = http.get(f"{turns}/{paused['turn_id']}/trace").json()
    assert [s["kind"] for s in first["spans"]] == ["run", "inference"]

    answer = [{"call_id": call["call_id"], "tool_name": "get_weather", "content": "25C"}]
    http.post(f"{turns}/{paused['turn_id']}/resume", json={"tool_responses": answer})
    both = http.get(f"{turns}/{paused['turn_id']}/trace").json()
    assert both["trace_id"] == first["trace_id"]
    assert [s["kind"] for s in both["spans"]] == [
        "run",
        "inference",
        "run",
        "tool_execution",
        "inference",
    ]
    assert both["spans"][:2] == first["spans"]
    client_call = both["spans"][3]
    assert client_call["attributes"]["gen_ai.tool.name"] == "get_weather"
    assert client_call["attributes"]["gen_ai.tool.call.result"] == "25C"
    assert client_call["parent_span_id"] == both["spans"][2]["span_id"]
    assert len(exported(collector, both["trace_id"], 5)) == 5


def test_a_response_trace_shows_its_mcp_listing_calls_and_approved_call(
    http, model, peer, collector
):
    oai = openai.OpenAI(
        base_url=str(http.base_url).rstrip("/") + "/v1", api_key="unused", max_retries=0
    )
    model.reply(tool_calls=[("add", '{"a": 20, "b": 22}')])
    model.reply(text="42.")
    tool = {"type": "mcp", "server_label": "peer", "server_url": peer.url}
    waiting = oai.responses.create(model="m", input="20+22?", tools=[tool])
    request = waiting.output[-1]
    answer = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    done = oai.responses.create(
        model="m", previous_response_id=waiting.id, input=[answer], tools=[tool]
    )
    assert done.output_text == "42."

    trace = http.get(f"/v1/responses/{done.id}/trace").json()
    assert trace["run_id"] == done.id and trace["complete"] is True
    kinds = [(s["kind"], s["name"]) for s in trace["spans"]]
    assert kinds == [
        ("run", "invoke_agent"),
        ("mcp_call", "execute_tool mcp_list_tools peer"),
        ("mcp_call", "execute_tool add"),
        ("inference", "chat m"),
    ]
    assert trace["spans"][2]["attributes"]["gen_ai.tool.call.result"] == "42"
    waited = http.get(f"/v1/responses/{waiting.id}/trace").json()
    assert [s["kind"] for s in waited["spans"]] == ["run", "mcp_call", "inference"]
    assert waited["trace_id"] != trace["trace_id"]
    assert {s["spanId"] for s in exported(collector, trace["trace_id"], 4)} == {
        s["span_id"] for s in trace["spans"]
    }


def test_a_streamed_response_with_web_search_has_a_web_search_span(http, model):
    model.reply(tool_calls=[("web_search", '{"query": "llamas"}')])
    model.reply(text="Llamas are camelids.")
    oai = openai.OpenAI(
        base_url=str(http.base_url).rstrip("/") + "/v1", api_key="unused", max_retries=0
    )
    with oai.responses.stream(model="m", input="Llamas?", tools=[{"type": "web_search"}]) as stream:
        response = stream.get_final_response()
    trace = http.get(f"/v1/openai/v1/responses/{response.id}/trace").json()
    assert [s["kind"] for s in trace["spans"]] == [
        "run",
        "inference",
        "web_search_call",
        "inference",
    ]
    assert trace["spans"][2]["attributes"]["gen_ai.tool.name"] == "web_search"


def test_a_background_response_keeps_its_trace_and_reads_incomplete_while_it_runs(http, model):
    model.reply(text="Done in the background.", delay=1.0)
    oai = openai.OpenAI(
        base_url=str(http.base_url).rstrip("/") + "/v1", api_key="unused", max_retries=0
    )
    created = oai.responses.create(model="m", input="Work", background=True)
    running = http.get(f"/v1/responses/{created.id}/trace").json()
    assert running["complete"] is False and running["spans"] == []
    for _ in range(200):  # a bounded poll: the worker answers after the model's second
        trace = http.get(f"/v1/responses/{created.id}/trace").json()
        if trace["complete"]:
            break
        time.sleep(0.05)
    assert oai.responses.retrieve(created.id).status == "completed"
    assert [s["kind"] for s in trace["spans"]] == ["run", "inference"]
    assert trace["spans"][1]["duration_ms"] >= 0


def test_a_response_not_stored_keeps_no_trace_but_its_spans_are_exported(http, model, collector):
    from agents_core.telemetry.spans import trace_id

    model.reply(text="Gone after this.")
    oai = openai.OpenAI(
        base_url=str(http.base_url).rstrip("/") + "/v1", api_key="unused", max_retries=0
    )
    response = oai.responses.create(model="m", input="Hi", store=False)
    assert http.get(f"/v1/responses/{response.id}/trace").status_code == 404
    spans = exported(collector, trace_id(response.id), 2)
    assert sorted(s["name"] for s in spans) == ["chat m", "invoke_agent"]


def test_a_failed_model_call_marks_the_run_span_as_an_error(http, model):
    model.reply(error="status", status=500)
    agent_id, session_id = new_session(http)
    turns = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    http.post(turns, json={"messages": [{"role": "user", "content": "Hi"}], "stream": True})
    (turn,) = http.get(f"/v1/agents/{agent_id}/session/{session_id}").json()["turns"]
    trace = http.get(f"{turns}/{turn['turn_id']}/trace").json()
    (root,) = trace["spans"]
    assert root["status"] == "error" and root["attributes"]["error.type"] == "UpstreamFailed"


def test_a_collector_that_fails_leaves_the_turn_and_its_trace_whole(http, model, collector):
    collector.status = 500
    model.reply(text="Still here.")
    agent_id, session_id = new_session(http)
    turns = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    turn = http.post(turns, json={"messages": [{"role": "user", "content": "Hi"}]}).json()
    assert turn["output_message"]["content"] == "Still here."
    trace = http.get(f"{turns}/{turn['turn_id']}/trace").json()
    assert [s["kind"] for s in trace["spans"]] == ["run", "inference"]
    assert not [s for s in collector.spans() if s["traceId"] == trace["trace_id"]]


def test_an_unknown_response_or_turn_has_no_trace(http):
    assert http.get("/v1/responses/resp_missing/trace").status_code == 404
    agent_id, session_id = new_session(http)
    missing = http.get(f"/v1/agents/{agent_id}/session/{session_id}/turn/nope/trace")
    assert missing.status_code == 404


def test_without_an_endpoint_nothing_exports_and_the_exporter_is_not_imported():
    code = (
        "import sys\n"
        "from agents_core.services import build_services\n"
        "from agents_core.settings import Settings\n"
        "svc = build_services(Settings.from_env())\n"
        "engines = (svc.engine, svc.responses_engine)\n"
        "print(svc.span_exporter is None, 'agents_core.telemetry.otlp' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": str(ROOT / "layers/agents_core")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["True", "False"], out.stderr


def test_an_export_to_cloudwatch_is_signed_for_xray_in_the_endpoints_region(monkeypatch):
    from agents_core.telemetry.otlp import OtlpExporter

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token")
    exporter = OtlpExporter("https://xray.eu-west-1.amazonaws.com", service_name="s")
    assert exporter.url == "https://xray.eu-west-1.amazonaws.com/v1/traces"
    headers = exporter._signed(b'{"resourceSpans": []}')
    assert "Credential=AKIDEXAMPLE/" in headers["Authorization"]
    assert "/eu-west-1/xray/aws4_request" in headers["Authorization"]
    assert headers["X-Amz-Security-Token"] == "token" and headers["X-Amz-Date"]
    assert OtlpExporter("http://127.0.0.1:4318", service_name="s").aws_region is None
