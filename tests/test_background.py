"""Background responses end to end, as users run them: `make run`'s server (its background queue
polled in-process by the worker the Lambda function runs), the scripted model server, a real MCP
server, and the openai SDK: create and poll, stream while it runs, rejoin the stream, cancel,
a worker killed mid-run, a run carried across invocations."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from moto.server import ThreadedMotoServer

from .conftest import error_message
from .local_server import running_server, started_server
from .peers.mcp_server import McpPeer


@pytest.fixture(scope="module")
def peer() -> Iterator[McpPeer]:
    with McpPeer() as server:
        yield server


@pytest.fixture(scope="module")
def base(model):
    with running_server({"OPENAI_BASE_URL": model.url, "MCP_LIST_CACHE_SECONDS": "0"}) as (
        url,
        _,
    ):
        yield url


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


@pytest.fixture
def oai(base, model) -> openai.OpenAI:
    model.reset()
    return client(base)


def until(read, done, timeout: float = 20.0) -> Any:
    """Poll `read()` until `done(value)`; the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def finished(response: Any) -> bool:
    return response.status not in ("queued", "in_progress")


def mcp(peer: McpPeer) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "peer",
        "server_url": peer.url,
        "require_approval": "never",
    }


def shape(output: list[Any]) -> list[tuple[Any, ...]]:
    """Output items without the ids every run draws anew."""
    return [
        (
            item.type,
            getattr(item, "name", None),
            getattr(item, "arguments", None),
            getattr(item, "output", None),
            item.content[0].text if item.type == "message" else None,
        )
        for item in output
    ]


def listed(base: str) -> list[str]:
    return [r["id"] for r in httpx.get(f"{base}/v1/responses", params={"limit": 50}).json()["data"]]


def test_a_background_response_answers_queued_at_once_and_is_polled_to_its_end(base, oai, model):
    model.reply(text="Done in the background.", delay=0.5)
    created = oai.responses.create(model="m", input="Work on it", background=True)
    assert (created.status, created.background, created.output) == ("queued", True, [])
    final = until(lambda: oai.responses.retrieve(created.id), finished)
    assert final.status == "completed"
    assert final.output_text == "Done in the background."
    assert oai.responses.input_items.list(created.id).data[0].content[0].text == "Work on it"
    assert created.id in listed(base)


def test_a_background_response_streamed_while_it_runs_sends_every_event_once_in_order(oai, model):
    model.reply(text="Streamed from the worker.", chunks=5)
    stream = oai.responses.create(model="m", input="Go", background=True, stream=True)
    events = list(stream)
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Streamed from the worker."


def test_a_dropped_background_stream_is_rejoined_after_its_last_event_and_misses_nothing(
    base, oai, model
):
    model.reply(text="one two three four five six", chunks=6, delay=0.2)
    seen = []
    with oai.responses.create(model="m", input="Go", background=True, stream=True) as stream:
        for event in stream:
            seen.append(event)
            if len(seen) == 4:
                break  # the client goes away; the run goes on
    response_id = seen[0].response.id
    rest = list(oai.responses.retrieve(response_id, stream=True, starting_after=3))
    numbers = [e.sequence_number for e in seen + rest]
    assert numbers == list(range(len(numbers)))
    assert rest[-1].type == "response.completed"
    text = "".join(e.delta for e in seen + rest if e.type == "response.output_text.delta")
    assert text == "one two three four five six"


def test_cancelling_a_queued_response_means_it_never_runs(oai, model):
    model.reply(text="first", delay=2.0)  # the worker is busy with this one...
    busy = oai.responses.create(model="m", input="first", background=True)
    until(lambda: oai.responses.retrieve(busy.id), lambda r: r.status == "in_progress")
    waiting = oai.responses.create(model="m", input="second", background=True)
    cancelled = oai.responses.cancel(waiting.id)
    assert cancelled.status == "cancelled"
    assert oai.responses.cancel(waiting.id).status == "cancelled"  # again: the same answer
    assert until(lambda: oai.responses.retrieve(busy.id), finished).status == "completed"
    time.sleep(0.5)  # the worker has seen the second message by now
    assert oai.responses.retrieve(waiting.id).status == "cancelled"
    assert [m["messages"][-1]["content"] for m in model.requests] == ["first"]


def test_cancelling_a_running_response_stops_it_and_keeps_what_it_produced(oai, model, peer):
    peer.tool_calls.clear()
    model.reply(tool_calls=[("hang", '{"seconds": 1.5}')])
    model.reply(text="never said")
    created = oai.responses.create(model="m", input="Wait", background=True, tools=[mcp(peer)])
    until(lambda: peer.tool_calls["hang"], lambda calls: calls >= 1, timeout=10)
    assert oai.responses.cancel(created.id).status == "cancelled"  # while the tool runs
    final = until(
        lambda: oai.responses.retrieve(created.id),
        lambda r: any(i.type == "mcp_call" and i.status != "in_progress" for i in r.output),
    )
    assert final.status == "cancelled"
    assert [i.type for i in final.output][:2] == ["mcp_list_tools", "mcp_call"]
    assert len(model.requests) == 1  # the second model call never happened
    events = list(oai.responses.retrieve(created.id, stream=True))
    assert events[-1].type == "response.cancelled"


def test_cancelling_a_finished_response_answers_it_unchanged_and_a_foreground_one_is_a_400(
    oai, model
):
    model.reply(text="quick")
    created = oai.responses.create(model="m", input="Hi", background=True)
    final = until(lambda: oai.responses.retrieve(created.id), finished)
    assert oai.responses.cancel(created.id).status == final.status == "completed"
    foreground = oai.responses.create(model="m", input="Hi")
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.cancel(foreground.id)
    assert "background" in error_message(refused.value.response)
    with pytest.raises(openai.NotFoundError):
        oai.responses.cancel("resp_doesnotexist")


def test_a_background_response_with_store_false_can_be_polled_but_is_not_listed(base, oai, model):
    model.reply(text="kept a while")
    created = oai.responses.create(model="m", input="Hi", background=True, store=False)
    final = until(lambda: oai.responses.retrieve(created.id), finished)
    assert (final.status, final.output_text, final.store) == ("completed", "kept a while", False)
    assert created.id not in listed(base)
    with pytest.raises(openai.NotFoundError):  # nothing to chain from
        oai.responses.create(model="m", input="More", previous_response_id=created.id)


def test_bad_background_requests_are_refused_before_anything_is_queued(oai, base):
    with pytest.raises(openai.BadRequestError):
        oai.responses.create(
            model="m", input="Hi", background=True, tools=[{"type": "nope", "name": "x"}]
        )
    before = httpx.get(f"{base}/v1/responses", params={"limit": 100}).json()["data"]
    resp = httpx.post(
        f"{base}/v1/responses",
        json={"model": "m", "input": "Hi", "background": True, "temperature": 9},
    )
    assert resp.status_code == 400
    assert httpx.get(f"{base}/v1/responses", params={"limit": 100}).json()["data"] == before


# --- a worker that dies, a run longer than its invocation ----------------------------------------


@pytest.fixture
def shared_aws() -> Iterator[str]:
    """A moto server outside the local servers, so one can die and another carry on."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def aws_env(url: str, **extra: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
        **extra,
    }


def test_a_worker_killed_mid_run_is_carried_on_by_the_redelivery_without_repeating_a_call(
    shared_aws, model, peer
):
    """The worker dies (SIGKILL) while its second model call is in flight, after the first call
    and its tool ran. The queue redelivers the message once the invocation's time (and lease)
    is over; the next worker goes on from the stored state: the first model call and the tool
    call are never made again. The call in flight when the worker died is made again (nothing
    of it was recorded), which the peer shows: it never answered the first attempt."""
    model.reset()
    peer.tool_calls.clear()
    model.reply(tool_calls=[("echo", '{"text": "from the tool"}')])
    model.reply(text="lost with the worker", delay=60)  # held until the worker is killed
    model.reply(text="The tool said: from the tool")
    env = aws_env(
        shared_aws,
        OPENAI_BASE_URL=model.url,
        QUEUE_INVOCATION_SECONDS="8",
        RUN_SUSPEND_MARGIN_SECONDS="0.5",
        MCP_LIST_CACHE_SECONDS="0",
    )
    with started_server(env) as first:
        oai = client(first.base)
        created = oai.responses.create(
            model="m", input="Use the tool", background=True, tools=[mcp(peer)]
        )
        until(lambda: len(model.requests), lambda n: n >= 2, timeout=20)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=10)
    with started_server(env) as second:
        oai = client(second.base)
        final = until(lambda: oai.responses.retrieve(created.id), finished, timeout=60)
    assert final.status == "completed", final
    assert final.output_text == "The tool said: from the tool"
    assert peer.tool_calls["echo"] == 1
    first_calls = [r for r in model.requests if not any(m["role"] == "tool" for m in r["messages"])]
    assert len(first_calls) == 1
    assert len(model.requests) == 3  # the call in flight at the kill, then its retry
    assert [i.type for i in final.output] == ["mcp_list_tools", "mcp_call", "message"]


def test_a_run_forced_across_invocations_ends_as_an_uninterrupted_one(model, peer):
    """With a budget that leaves no time for a second model call in any invocation, a run of
    three model calls takes three invocations and ends with the same output as in one."""
    replies = [
        {"tool_calls": [("add", '{"a": 1, "b": 2}')]},
        {"tool_calls": [("add", '{"a": 3, "b": 4}')]},
        {"text": "3 and 7."},
    ]
    outputs = {}
    for margin in ("0", "100000"):
        model.reset()
        for reply in replies:
            model.reply(**reply)
        env = {
            "OPENAI_BASE_URL": model.url,
            "RUN_SUSPEND_MARGIN_SECONDS": margin,
            "MCP_LIST_CACHE_SECONDS": "0",
        }
        with started_server(env) as server:
            oai = client(server.base)
            created = oai.responses.create(
                model="m", input="Add", background=True, tools=[mcp(peer)], stream=True
            )
            events = list(created)
            final = oai.responses.retrieve(events[0].response.id)
            log = server.stop()
        outputs[margin] = (final, events, log.count("continues in a new invocation"))
    (plain, plain_events, plain_hops), (split, split_events, hops) = outputs.values()
    assert (plain_hops, hops) == (0, 2)  # three invocations
    assert split.status == plain.status == "completed"
    assert shape(split.output) == shape(plain.output)
    assert [e.type for e in split_events] == [e.type for e in plain_events]
    assert [e.sequence_number for e in split_events] == list(range(len(split_events)))
