"""Streams that can be rejoined (issue 13, item 3): the stored event log, its recorder and its
follower on moto; then, against the local server, clients that drop a stream mid-way and rejoin
it with the openai SDK and with raw HTTP."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time

import httpx
import openai
import pytest
from agents_core.errors import NotFound
from agents_core.services import Services, build_services
from agents_core.services.streams import (
    Frame,
    StreamKey,
    StreamLog,
    encode_frame,
    response_frame,
)
from agents_core.settings import Settings
from agents_core.store import keys
from agents_core.store.items import item_size
from agents_core.store.schema import TTL_ATTRIBUTE
from agents_core.store.stream_events import StreamEventStore, _pack, _unpack
from agents_core.store.table import Table, key
from botocore.exceptions import ClientError

from .conftest import TABLE, agent_config, error_message
from .lambda_support import ROOT
from .local_server import running_server

TENANT = "acme"

FAST = dict(
    stream_flush_seconds=0.05,
    stream_poll_seconds=0.02,
    stream_alive_check_seconds=0.1,
    stream_follow_max_seconds=20.0,
)


def log_of(dynamodb, **settings) -> StreamLog:
    s = Settings(table_name=TABLE, **{**FAST, **settings})
    return build_services(s, dynamodb).streams


def frames(first: int, count: int, size: int = 20) -> list[Frame]:
    return [
        Frame(seq, "response.output_text.delta", f'{{"n":{seq},"x":"{"a" * size}"}}')
        for seq in range(first, first + count)
    ]


def event_items(dynamodb, pk: str) -> list[dict]:
    return Table(dynamodb, TABLE).query_all(
        {
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :e)",
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":e": {"S": keys.EVENT_PREFIX}},
            "ConsistentRead": True,
        }
    )


async def collect(log: StreamLog, stream: StreamKey, after: int = -1, alive=None) -> list[Frame]:
    async def always() -> bool:
        return True

    return [f async for f in log.follow(TENANT, stream, after, alive=alive or always)]


# --- the log, the recorder, the follower ----------------------------------------------------


def test_two_hundred_frames_added_at_once_take_a_few_writes_not_one_each(dynamodb):
    log = log_of(dynamodb, stream_flush_seconds=0.25)
    stream = StreamKey.response("resp_1")

    async def produce() -> int:
        recorder = log.recorder(TENANT, stream)
        for frame in frames(0, 200):
            recorder.add(frame)
            await asyncio.sleep(0)
        await recorder.close()
        return recorder.writes

    writes = asyncio.run(produce())
    stored = event_items(dynamodb, keys.response_pk(TENANT, "resp_1"))
    assert writes == len(stored) == 1  # all at the close, with the end mark
    assert [f.seq for f in asyncio.run(collect(log, stream))] == list(range(200))


def test_a_paced_stream_is_written_once_per_flush_interval_at_most(dynamodb):
    log = log_of(dynamodb, stream_flush_seconds=0.1)
    stream = StreamKey.response("resp_paced")

    async def produce() -> tuple[int, float]:
        recorder = log.recorder(TENANT, stream)
        began = time.monotonic()
        for frame in frames(0, 60):
            recorder.add(frame)
            await asyncio.sleep(0.01)
        await recorder.close()
        return recorder.writes, time.monotonic() - began

    writes, took = asyncio.run(produce())
    assert 2 <= writes <= took / 0.1 + 1  # one per interval, and the close
    assert writes < 60 / 4


def test_a_follower_gets_every_frame_once_in_order_across_flushes_and_ends_at_the_mark(dynamodb):
    log = log_of(dynamodb)
    stream = StreamKey.response("resp_live")

    async def run() -> list[Frame]:
        recorder = log.recorder(TENANT, stream)

        async def produce() -> None:
            for frame in frames(0, 40):
                recorder.add(frame)
                await asyncio.sleep(0.01)
            await recorder.close()

        producing = asyncio.create_task(produce())
        await asyncio.sleep(0.05)  # the follower joins mid-stream
        followed = await collect(log, stream)
        await producing
        return followed

    followed = asyncio.run(run())
    assert [f.seq for f in followed] == list(range(40))
    assert followed == frames(0, 40)


def test_a_follower_starts_after_the_frame_it_names_even_inside_a_stored_batch(dynamodb):
    log = log_of(dynamodb, stream_flush_seconds=5)
    stream = StreamKey.turn("sess", "turn-1")

    async def produce() -> None:
        recorder = log.recorder(TENANT, stream)
        for frame in frames(0, 30):
            recorder.add(frame)
        await recorder.close()

    asyncio.run(produce())
    assert len(event_items(dynamodb, keys.session_pk(TENANT, "sess"))) == 1  # 0..29 together
    asked = []

    async def alive() -> bool:
        asked.append(1)
        return True

    for after in (-1, 0, 1, 17, 28, 29, 40):
        seqs = [f.seq for f in asyncio.run(collect(log, stream, after, alive))]
        assert seqs == list(range(after + 1, 30)), after
    assert asked == []  # each follower ended at the end mark, never waiting for more


def test_a_follower_asking_past_what_is_stored_gets_the_batch_written_later_that_holds_it(dynamodb):
    """Stored: frame 0. A follower asks for frames after 5; frames 1..10 come in one write."""
    log = log_of(dynamodb)
    where = StreamKey.response("resp_late").where(TENANT)
    log.store.write(log.store.items(where, frames(0, 1), final=False))

    async def run() -> list[Frame]:
        following = asyncio.create_task(collect(log, StreamKey.response("resp_late"), 5))
        await asyncio.sleep(0.1)
        log.store.write(log.store.items(where, frames(1, 10), final=True))
        return await following

    assert [f.seq for f in asyncio.run(run())] == list(range(6, 11))


def test_a_frame_stored_twice_is_yielded_once(dynamodb):
    """A crashed producer's successor numbers after the highest stored frame, so seqs never
    repeat; the follower does not rely on it."""
    log = log_of(dynamodb)
    where = StreamKey.response("resp_dup").where(TENANT)
    store = log.store
    store.write(store.items(where, frames(0, 5), final=False))
    store.write(store.items(where, frames(3, 5), final=True))  # 3 and 4 again
    seqs = [f.seq for f in asyncio.run(collect(log, StreamKey.response("resp_dup")))]
    assert seqs == list(range(8))


def test_a_follower_of_a_run_that_is_over_without_an_end_mark_stops_when_alive_says_so(dynamodb):
    log = log_of(dynamodb)
    stream = StreamKey.response("resp_dead")
    asked = []

    async def dead() -> bool:
        asked.append(1)
        return False

    async def run() -> list[Frame]:
        recorder = log.recorder(TENANT, stream)
        for frame in frames(0, 3):
            recorder.add(frame)
        await recorder.close(final=False)  # the producer died (no end mark)
        return await collect(log, stream, alive=dead)

    assert [f.seq for f in asyncio.run(run())] == [0, 1, 2]
    assert len(asked) == 1


def test_a_follower_keeps_following_while_alive_says_the_run_goes_on(dynamodb):
    log = log_of(dynamodb, stream_follow_max_seconds=0.6)
    stream = StreamKey.response("resp_quiet")
    asked = []

    async def running() -> bool:
        asked.append(1)
        return True

    async def run() -> list[Frame]:
        recorder = log.recorder(TENANT, stream)
        recorder.add(frames(0, 1)[0])
        await recorder.close(final=False)
        return await collect(log, stream, alive=running)

    assert [f.seq for f in asyncio.run(run())] == [0]
    assert len(asked) >= 2  # asked again and again, until the overall bound


def test_a_frame_larger_than_an_item_is_stored_in_parts_and_followed_whole(dynamodb):
    log = log_of(dynamodb)
    stream = StreamKey.response("resp_big")
    big = Frame(
        1, "response.output_text.done", json.dumps({"text": "é" * 600_000}, ensure_ascii=False)
    )

    async def produce() -> None:
        recorder = log.recorder(TENANT, stream)
        recorder.add(frames(0, 1)[0])
        recorder.add(big)
        recorder.add(frames(2, 1)[0])
        await recorder.close()

    asyncio.run(produce())
    items = event_items(dynamodb, keys.response_pk(TENANT, "resp_big"))
    assert len(items) >= 4  # 4 parts of 1.2 MB, the small frames beside them
    assert all(item_size(item) < 400 * 1024 for item in items)
    followed = asyncio.run(collect(log, stream))
    assert [f.seq for f in followed] == [0, 1, 2]
    assert followed[1] == big


def test_a_recorder_closed_unfinished_is_continued_by_another_and_followed_to_its_end(dynamodb):
    log = log_of(dynamodb)
    stream = StreamKey.turn("sess", "turn-2")

    async def run() -> tuple[int, int, list[Frame]]:
        first = log.recorder(TENANT, stream)
        for frame in frames(0, 10):
            first.add(frame)
        await first.close(final=False)
        last = await log.last_sequence(TENANT, stream)
        second = log.recorder(TENANT, stream)
        for frame in frames(last + 1, 10):
            second.add(frame)
        await second.close()
        return last, await log.last_sequence(TENANT, stream), await collect(log, stream)

    last, end, followed = asyncio.run(run())
    assert (last, end) == (9, 19)
    assert [f.seq for f in followed] == list(range(20))


def test_nothing_stored_is_a_last_sequence_of_minus_one_and_other_tenants_see_nothing(dynamodb):
    log = log_of(dynamodb)
    stream = StreamKey.response("resp_mine")

    async def run() -> tuple[int, int]:
        recorder = log.recorder(TENANT, stream)
        recorder.add(frames(0, 1)[0])
        await recorder.close()
        return await log.last_sequence(TENANT, stream), await log.last_sequence("other", stream)

    assert asyncio.run(run()) == (0, -1)


def test_every_event_item_expires_after_the_retention(dynamodb):
    log = log_of(dynamodb, stream_retention_seconds=3600)
    stream = StreamKey.response("resp_ttl")

    async def produce() -> None:
        recorder = log.recorder(TENANT, stream)
        for frame in frames(0, 5):
            recorder.add(frame)
        await recorder.close()

    asyncio.run(produce())
    items = event_items(dynamodb, keys.response_pk(TENANT, "resp_ttl"))
    assert items
    for item in items:
        assert abs(int(item[TTL_ATTRIBUTE]["N"]) - (time.time() + 3600)) < 60


def test_a_failed_write_leaves_the_live_stream_going_and_skips_those_frames(dynamodb):
    log = log_of(dynamodb, stream_flush_seconds=0.02)

    class Failing(StreamEventStore):
        calls = 0

        def write(self, items):
            Failing.calls += 1
            if Failing.calls == 1:
                raise RuntimeError("DynamoDB is away")
            return super().write(items)

    log.store = Failing(dynamodb, TABLE, retention_seconds=60)
    stream = StreamKey.response("resp_fail")

    async def produce() -> None:
        recorder = log.recorder(TENANT, stream)
        for frame in frames(0, 4):
            recorder.add(frame)  # never raises
            await asyncio.sleep(0.05)  # each frame is written alone, after the interval
        await recorder.close()  # nor does this

    asyncio.run(produce())
    assert [f.seq for f in asyncio.run(collect(log, stream))] == [1, 2, 3]  # 0's write failed


@pytest.mark.parametrize(("final", "count"), [(True, 3), (True, 0), (False, 3), (False, 0)])
def test_a_held_lifecycle_event_goes_out_after_the_last_write_on_the_loops_thread(
    dynamodb, final, count
):
    """A streamed run's event waits for the log's last write and goes out after it, also when
    nothing is left to write; outside `hold` it goes out at once. Both run on the event loop's
    thread under `blocking.run` (no worker thread), where their AWS calls are awaited."""
    import threading

    from agents_core import blocking, lifecycle

    log = log_of(dynamodb, stream_flush_seconds=5)
    stream = StreamKey.response(f"resp_held_{final}_{count}")
    sent: list[tuple[str, bool, int]] = []

    class Bus:
        def put_events(self, Entries):
            stored = len(event_items(dynamodb, keys.response_pk(TENANT, stream.owner)))
            on_loop = threading.current_thread() is loop_thread and blocking.bridged()
            sent.append((Entries[0]["DetailType"], on_loop, stored))
            return {"FailedEntryCount": 0}

    publisher = lifecycle.TurnEventPublisher(Bus(), "bus")

    async def run() -> None:
        nonlocal loop_thread
        loop_thread = threading.current_thread()
        await publisher.publish_response("completed", {"response_id": "r0"})  # not held
        recorder = log.recorder(TENANT, stream)
        held = lifecycle.hold()
        for frame in frames(0, count):
            recorder.add(frame)
        await publisher.publish_response("completed", {"response_id": "r1"})
        assert len(sent) == 1 and len(held) == 1
        await recorder.close(final=final, then=held)

    loop_thread = None
    asyncio.run(run())
    written = 1 if (final or count) else 0
    assert sent == [("Response Completed", True, 0), ("Response Completed", True, written)]


def test_a_turn_runs_for_its_followers_while_the_lock_names_it_running_within_its_lease(dynamodb):
    store = log_of(dynamodb).store
    session = {**key(keys.session_pk(TENANT, "s1"), keys.SESSION), "agent_id": {"S": "a1"}}

    def running(**lock) -> bool:
        dynamodb.put_item(TableName=TABLE, Item={**session, **lock})
        return store.turn_running(TENANT, "a1", "s1", "t1")

    later, earlier = str(int(time.time()) + 60), str(int(time.time()) - 1)
    run = {"active_turn": {"S": "t1"}, "active_state": {"S": "running"}}
    assert running(**run, lease_until={"N": later})
    assert not running(**run, lease_until={"N": earlier})  # its Lambda died
    assert not running(active_turn={"S": "t1"}, active_state={"S": "awaiting_input"})
    assert not running(**{**run, "active_turn": {"S": "t2"}}, lease_until={"N": later})
    assert not running()  # ended
    with pytest.raises(NotFound):
        store.turn_running(TENANT, "another-agent", "s1", "t1")


def test_frames_are_sent_with_their_sequence_number_as_the_sse_id():
    assert encode_frame(Frame(7, "response.created", '{"a":1}')) == (
        'id: 7\nevent: response.created\ndata: {"a":1}\n\n'
    )
    assert encode_frame(Frame(0, None, "{}")) == "id: 0\ndata: {}\n\n"
    # Data of several lines: a data line each, as SSE joins them again.
    assert encode_frame(Frame(2, None, "a\nb\n")) == "id: 2\ndata: a\ndata: b\ndata: \n\n"

    class Event:
        sequence_number, type = 3, "response.completed"

        def model_dump_json(self) -> str:
            return "{}"

    assert response_frame(Event()) == Frame(3, "response.completed", "{}")


# --- where the events live: deleted with their response or session ------------------------


@pytest.fixture
def app(dynamodb):
    from agents_core.web.agents import router as agents_router
    from agents_core.web.app import create_app
    from agents_core.web.responses import router as responses_router
    from agents_core.web.turns import resume_router, turns_router
    from fastapi.testclient import TestClient

    services = Services(Settings(table_name=TABLE, **FAST), dynamodb=dynamodb)
    routers = (agents_router, turns_router, resume_router, responses_router)
    return TestClient(create_app(*routers, services=services), raise_server_exceptions=False)


def test_a_streamed_turn_is_recorded_apart_from_the_session_read_and_deleted_with_it(app, dynamodb):
    agent = app.post("/v1/agents", json={"agent_config": agent_config(model="offline")}).json()
    agent_id = agent["agent_id"]
    session_id = app.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}).json()[
        "session_id"
    ]
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    body = {"messages": [{"role": "user", "content": "hello there"}], "stream": True}
    with app.stream("POST", url, json=body) as resp:
        lines = [line for line in resp.iter_lines() if line]
    ids = [int(line[4:]) for line in lines if line.startswith("id: ")]
    chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert ids == list(range(len(chunks))) and len(chunks) >= 3
    turn_id = chunks[-1]["event"]["payload"]["turn"]["turn_id"]
    pk = keys.session_pk("default", session_id)
    assert event_items(dynamodb, pk)
    session = app.get(f"/v1/agents/{agent_id}/session/{session_id}").json()
    assert [t["turn_id"] for t in session["turns"]] == [turn_id]

    with app.stream("GET", f"{url}/{turn_id}/stream?starting_after=1") as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        replay = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: ")]
    assert replay == chunks[2:]

    assert app.delete(f"/v1/agents/{agent_id}/session/{session_id}").status_code == 204
    assert event_items(dynamodb, pk) == []


@pytest.mark.parametrize("stored_by", ["this version", "a version that did not count events"])
def test_a_paused_turn_and_its_resume_are_one_stream_numbered_on(
    dynamodb, model, stored_by, monkeypatch
):
    """The resume numbers its events on from the count the paused turn's state keeps, without
    reading the stored stream; a turn paused by an earlier version has no count, and its
    stored stream's last event is read instead."""
    from agents_core.web.agents import router as agents_router
    from agents_core.web.app import create_app
    from agents_core.web.turns import resume_router, turns_router
    from fastapi.testclient import TestClient

    from .turn_support import WEATHER_TOOL, new_session, turn_url

    model.reset()
    if stored_by != "this version":
        from agents_core.store import turn_items

        counted = turn_items.state_json

        def uncounted(state):
            return json.dumps(
                {k: v for k, v in json.loads(counted(state)).items() if k != "events"}
            )

        monkeypatch.setattr(turn_items, "state_json", uncounted)
    settings = Settings(table_name=TABLE, openai_base_url=model.url, **FAST)
    services = Services(settings, dynamodb=dynamodb)
    api = TestClient(create_app(agents_router, turns_router, resume_router, services=services))
    agent_id, session_id = new_session(api, client_tools=[WEATHER_TOOL])
    model.reply(tool_calls=[("get_weather", '{"city": "Rome"}')])
    model.reply(text="Rome is warm.")
    url = turn_url(agent_id, session_id)
    body = {"messages": [{"role": "user", "content": "Weather?"}], "stream": True}
    with api.stream("POST", url, json=body) as resp:
        paused = sse_events(resp.iter_lines())
    last = json.loads(paused[-1]["data"])["event"]["payload"]
    assert last["event_type"] == "turn_awaiting_input"
    turn = last["turn"]
    call = turn["output_message"]["tool_calls"][0]
    tool = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "25C"}
    resume = {"tool_responses": [tool], "stream": True}
    log_reads = []

    def read(params, **_):
        values = json.dumps(params.get("ExpressionAttributeValues", {}))
        if keys.EVENT_PREFIX in values:
            log_reads.append(params)

    dynamodb.meta.events.register("before-parameter-build.dynamodb.Query", read)
    with api.stream("POST", f"{url}/{turn['turn_id']}/resume", json=resume) as resp:
        resumed = sse_events(resp.iter_lines())
    dynamodb.meta.events.unregister("before-parameter-build.dynamodb.Query", read)
    assert len(log_reads) == (0 if stored_by == "this version" else 1)
    both = paused + resumed
    assert [int(e["id"]) for e in both] == list(range(len(both)))
    with api.stream("GET", f"{url}/{turn['turn_id']}/stream") as resp:
        assert sse_events(resp.iter_lines()) == both  # through the pause, to the end


def test_a_streamed_response_is_recorded_and_deleted_with_it_and_an_unstored_one_is_not(
    app, dynamodb
):
    body = {"model": "offline", "input": "hi", "stream": True}
    with app.stream("POST", "/v1/openai/v1/responses", json=body) as resp:
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    response_id = json.loads(lines[0][6:])["response"]["id"]
    pk = keys.response_pk("default", response_id)
    assert event_items(dynamodb, pk)
    assert app.get(f"/v1/openai/v1/responses/{response_id}").json()["id"] == response_id
    assert app.delete(f"/v1/openai/v1/responses/{response_id}").status_code == 200
    assert event_items(dynamodb, pk) == []

    with app.stream("POST", "/v1/openai/v1/responses", json={**body, "store": False}) as resp:
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    unstored = json.loads(lines[0][6:])["response"]["id"]
    assert event_items(dynamodb, keys.response_pk("default", unstored)) == []
    rejoin = app.get(f"/v1/openai/v1/responses/{unstored}?stream=true")
    assert rejoin.status_code == 404


class Watched:
    """A DynamoDB client that keeps each request's operation and parameters; `fail_transaction`
    makes its next TransactWriteItems raise that error instead."""

    def __init__(self, client) -> None:
        self.client, self.calls, self.fail_transaction = client, [], None

    def __getattr__(self, name: str):
        method = getattr(self.client, name)

        def call(**params):
            self.calls.append((name, params))
            if name == "transact_write_items" and self.fail_transaction is not None:
                error, self.fail_transaction = self.fail_transaction, None
                raise error
            return method(**params)

        return call

    def event_writes(self) -> list[tuple[str, dict]]:
        """(operation, item) of each write of a stream log's item."""
        found = []
        for name, params in self.calls:
            if name == "put_item":
                found.append((name, params["Item"]))
            for action in params.get("TransactItems", []):
                if "Put" in action:
                    found.append((name, action["Put"]["Item"]))
        return [(name, item) for name, item in found if item["SK"]["S"].startswith("EVENT#")]


@pytest.fixture
def watched(dynamodb):
    """(a TestClient of the responses routes over a Watched client, that client)."""
    from agents_core.web.app import create_app
    from agents_core.web.conversations import router as conversations
    from agents_core.web.responses import router
    from fastapi.testclient import TestClient

    client = Watched(dynamodb)
    services = Services(Settings(table_name=TABLE, **FAST), dynamodb=client)
    app = create_app(router, conversations, services=services)
    return TestClient(app, raise_server_exceptions=False), client


def streamed_and_rejoined(app, **fields) -> tuple[list[dict], list[dict]]:
    """A streamed response's events as sent, and as a client rejoining it from the start reads
    them from the log."""
    body = {"model": "offline", "input": "hi", "stream": True, **fields}
    with app.stream("POST", "/v1/openai/v1/responses", json=body) as resp:
        live = sse_events(resp.iter_lines())
    response_id = json.loads(live[0]["data"])["response"]["id"]
    with app.stream("GET", f"/v1/openai/v1/responses/{response_id}?stream=true") as resp:
        return live, sse_events(resp.iter_lines())


def test_a_responses_last_events_are_stored_in_the_same_transaction_as_its_end(watched):
    """A short stream's log is one item, written with the response's end: no write of its own,
    and a client that rejoins reads every event as it was sent, the end included."""
    app, client = watched
    live, rejoined = streamed_and_rejoined(app)
    assert live[-1]["event"] == "response.completed"
    assert rejoined == live
    writes = client.event_writes()
    assert [name for name, _ in writes] == ["transact_write_items"]
    ((_, item),) = writes
    assert item["final"] == {"BOOL": True}
    (end,) = [p for name, p in client.calls if name == "transact_write_items"]
    heads = [a["Put"]["Item"]["SK"]["S"] for a in end["TransactItems"]]
    assert heads[:2] == [keys.RESPONSE, keys.CONTEXT]


def test_a_response_in_a_conversation_logs_its_end_in_the_conversations_transaction(watched):
    app, client = watched
    conversation = app.post("/v1/conversations", json={}).json()["id"]
    live, rejoined = streamed_and_rejoined(app, conversation=conversation)
    assert live[-1]["event"] == "response.completed" and rejoined == live
    assert [name for name, _ in client.event_writes()] == ["transact_write_items"]
    items = app.get(f"/v1/conversations/{conversation}/items").json()["data"]
    assert len(items) == 2  # its input and its answer, appended in that transaction


@pytest.mark.parametrize(
    "error",
    [
        ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "Transact"),
        RuntimeError("the store broke"),
    ],
    ids=["storage unavailable", "unexpected"],
)
def test_an_end_that_could_not_be_stored_is_logged_as_the_failure_it_became(watched, error):
    """When the end's transaction fails, its stream's end fails with it: the log is written
    after, and holds the response.failed the client was sent, numbered on without a gap."""
    app, client = watched
    client.fail_transaction = error
    live, rejoined = streamed_and_rejoined(app)
    assert live[-1]["event"] == "response.failed"
    assert [int(e["id"]) for e in live] == list(range(len(live)))
    assert rejoined == live
    assert "put_item" in [name for name, _ in client.event_writes()]


def test_a_stream_end_waits_for_a_write_under_way_and_none_starts_after(dynamodb):
    """`end_with` stops the background writer after the write it is making (awaited, as an AWS
    request is); once the end landed, `close` writes nothing more, and a follower reads every
    frame once, in order."""
    from agents_core import blocking

    log = log_of(dynamodb, stream_flush_seconds=0.01)
    stream = StreamKey.response("resp_tail")
    landed: list[int] = []

    class Slow(StreamEventStore):
        def write(self, items):
            blocking.wait(asyncio.sleep(0.05))  # the request's round trip
            landed.append(len(items))
            return super().write(items)

    log.store = Slow(dynamodb, TABLE, retention_seconds=60)

    async def run() -> None:
        recorder = log.recorder(TENANT, stream)
        for frame in frames(0, 5):
            recorder.add(frame)
        await asyncio.sleep(0.03)  # the background writer is writing these
        assert landed == []
        for frame in frames(5, 3):
            recorder.add(frame)
        end = frames(8, 1)[0]
        tail = await recorder.end_with(end)
        assert landed == [1] and tail is not None and len(tail.items) == 1
        recorder.add(frames(9, 1)[0])  # no write starts after
        await asyncio.sleep(0.05)
        assert landed == [1]
        Table(dynamodb, TABLE).client.put_item(TableName=TABLE, Item=tail.items[0])
        tail.landed = True
        recorder.add(end)  # sent after it is stored, as the run's end is
        await recorder.close()
        assert landed == [1]

    asyncio.run(run())
    assert [f.seq for f in asyncio.run(collect(log, stream))] == list(range(9))


def test_a_stream_end_that_never_landed_is_written_by_close_with_what_came_after(dynamodb):
    log = log_of(dynamodb, stream_flush_seconds=5)
    stream = StreamKey.response("resp_tail_lost")

    async def run() -> None:
        recorder = log.recorder(TENANT, stream)
        for frame in frames(0, 3):
            recorder.add(frame)
        assert await recorder.end_with(frames(3, 1)[0]) is not None
        recorder.add(frames(3, 1, size=5)[0])  # the end it came to instead
        await recorder.close()

    asyncio.run(run())
    followed = asyncio.run(collect(log, stream))
    assert [f.seq for f in followed] == [0, 1, 2, 3] and followed[-1] == frames(3, 1, size=5)[0]


def test_rejoining_a_response_that_was_not_streamed_or_with_a_bad_last_event_id_is_a_400(app):
    created = app.post("/v1/openai/v1/responses", json={"model": "offline", "input": "hi"}).json()
    url = f"/v1/openai/v1/responses/{created['id']}"
    resp = app.get(f"{url}?stream=true")
    assert resp.status_code == 400 and "not streamed" in error_message(resp)
    resp = app.get(f"{url}?stream=true", headers={"Last-Event-ID": "abc"})
    assert resp.status_code == 400
    assert app.get(url).json()["id"] == created["id"]  # without stream: the object


# --- end to end: clients that drop a stream and rejoin it, against the local server ---------

TEXT = " ".join(f"word{n}" for n in range(40))


def _key(port: int, tenant: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "api_keys.py"),
            "--local",
            str(port),
            "create",
            tenant,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["key"]


@pytest.fixture(scope="module")
def server(model):
    """The local server with Bearer keys (two tenants), the scripted model behind it."""
    with running_server({"LOCAL_AUTH": "keys", "OPENAI_BASE_URL": model.url}) as (base, _):
        port = int(base.rsplit(":", 1)[1])
        yield base, _key(port, "acme"), _key(port, "globex")


@pytest.fixture
def sdk(server, model):
    model.reset()
    base, key, _ = server
    return openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key=key, max_retries=0)


def sse_events(lines) -> list[dict]:
    """SSE events (id, event, data) from a stream's lines, as an EventSource reads them."""
    events, current = [], {}
    for line in lines:
        if not line:
            if current:
                events.append(current)
            current = {}
            continue
        field, _, value = line.partition(": ")
        current[field] = value
    return events


def first_events(response: httpx.Response, count: int) -> list[dict]:
    """The first `count` events of a stream, then the connection dropped."""
    events, current = [], {}
    for line in response.iter_lines():
        if not line:
            events.append(current)
            current = {}
            if len(events) == count:
                break
            continue
        field, _, value = line.partition(": ")
        current[field] = value
    response.close()
    return events


def summary(events) -> list[tuple[str, str]]:
    """What a stream says, without the ids and times that differ between two runs."""
    return [(e.type, getattr(e, "delta", "") or "") for e in events]


def test_a_response_dropped_mid_stream_is_rejoined_with_the_sdk_and_the_rest_comes_once(sdk, model):
    model.reply(text=TEXT, chunks=40, pace=0.05)
    stream = sdk.responses.create(model="m", input="count", stream=True)
    head = []
    for event in stream:
        head.append(event)
        if event.type == "response.output_text.delta" and len(head) >= 8:
            break
    stream.close()  # the client goes away mid-answer
    response_id = head[0].response.id
    rest = list(
        sdk.responses.retrieve(response_id, stream=True, starting_after=head[-1].sequence_number)
    )
    assert any(e.type == "response.output_text.delta" for e in rest)  # dropped mid-way indeed
    union = head + rest
    assert [e.sequence_number for e in union] == list(range(len(union)))
    assert union[-1].type == "response.completed"
    assert union[-1].response.output_text == TEXT

    model.reply(text=TEXT, chunks=40)
    whole = list(sdk.responses.create(model="m", input="count", stream=True))
    assert summary(union) == summary(whole)
    assert summary(sdk.responses.retrieve(response_id, stream=True)) == summary(whole)


def test_last_event_id_rejoins_a_response_with_raw_http_and_wins_over_starting_after(server, model):
    base, key, _ = server
    model.reset()
    model.reply(text=TEXT, chunks=40, pace=0.05)
    auth = {"Authorization": f"Bearer {key}"}
    body = {"model": "m", "input": "count", "stream": True}
    with httpx.Client(base_url=base, headers=auth, timeout=30) as http:
        with http.stream("POST", "/v1/responses", json=body) as resp:
            head = first_events(resp, 10)
        response_id = json.loads(head[0]["data"])["response"]["id"]
        last = head[-1]["id"]
        url = f"/v1/responses/{response_id}?stream=true&starting_after=0"
        with http.stream("GET", url, headers={"Last-Event-ID": last}) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            rest = sse_events(resp.iter_lines())
    union = head + rest
    assert [int(e["id"]) for e in union] == list(range(len(union)))
    assert [json.loads(e["data"])["sequence_number"] for e in union] == list(range(len(union)))
    assert union[-1]["event"] == "response.completed"
    deltas = [json.loads(e["data"])["delta"] for e in union if e["event"].endswith("text.delta")]
    assert "".join(deltas) == TEXT


def test_a_turn_dropped_mid_stream_is_rejoined_with_raw_http(server, model):
    base, key, _ = server
    model.reset()
    model.reply(text=TEXT, chunks=40, pace=0.05)
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=auth, timeout=30) as http:
        config = {"agent_config": {"model": "m", "instructions": "Be brief."}}
        agent_id = http.post("/v1/agents", json=config).json()["agent_id"]
        session = http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
        url = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
        body = {"messages": [{"role": "user", "content": "count"}], "stream": True}
        with http.stream("POST", url, json=body) as resp:
            head = first_events(resp, 8)
        chunks = [json.loads(e["data"]) for e in head]
        turn_id = chunks[0]["event"]["payload"]["turn_id"]
        after = head[-1]["id"]
        with http.stream("GET", f"{url}/{turn_id}/stream?starting_after={after}") as resp:
            rest = sse_events(resp.iter_lines())
        alpha = f"{url}/{turn_id}/stream".replace("/v1/agents", "/v1alpha/agents")
        with http.stream("GET", alpha, headers={"Last-Event-ID": "-1"}) as resp:
            everything = sse_events(resp.iter_lines())
    union = head + rest
    assert [int(e["id"]) for e in union] == list(range(len(union)))
    assert everything == union
    payloads = [json.loads(e["data"])["event"]["payload"] for e in union]
    assert payloads[-1]["event_type"] == "turn_complete"
    assert any(p["event_type"] == "step_progress" for p in payloads[8:])  # dropped mid-way
    text = "".join(p["delta"]["text"] for p in payloads if p["event_type"] == "step_progress")
    assert text == TEXT


def test_another_tenants_response_or_turn_stream_is_a_404(server, model):
    base, key, other = server
    model.reset()
    mine = {"Authorization": f"Bearer {key}"}
    theirs = {"Authorization": f"Bearer {other}"}
    with httpx.Client(base_url=base, timeout=30) as http:
        body = {"model": "m", "input": "hi", "stream": True}
        with http.stream("POST", "/v1/responses", json=body, headers=mine) as resp:
            events = sse_events(resp.iter_lines())
        response_id = json.loads(events[0]["data"])["response"]["id"]
        url = f"/v1/openai/v1/responses/{response_id}?stream=true"
        assert http.get(url, headers=mine).status_code == 200
        assert http.get(url, headers=theirs).status_code == 404
        config = {"agent_config": {"model": "m", "instructions": "Be brief."}}
        agent_id = http.post("/v1/agents", json=config, headers=mine).json()["agent_id"]
        session = http.post(
            f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=mine
        )
        turn = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
        with http.stream("POST", turn, json=body, headers=mine) as resp:
            events = sse_events(resp.iter_lines())
        turn_id = json.loads(events[0]["data"])["event"]["payload"]["turn_id"]
        assert http.get(f"{turn}/{turn_id}/stream", headers=mine).status_code == 200
        assert http.get(f"{turn}/{turn_id}/stream", headers=theirs).status_code == 404


def test_packed_frames_read_back_exactly_whatever_their_text_and_numbers():
    rnd = random.Random(7)
    alphabet = 'ab"\\\u00e9\U0001f600 x\n{}:,0123456789'

    def text(n: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    for _ in range(500):
        seq, frames = rnd.randint(0, 5), []
        for _ in range(rnd.randint(1, 30)):
            seq += rnd.choice([1, 1, 2])
            number = seq if rnd.random() < 0.8 else seq + 1  # its own, or another's
            data = rnd.choice(
                [
                    json.dumps({"type": "d", "sequence_number": number, "delta": text(4)}),
                    text(rnd.randint(0, 20)),
                    f'"sequence_number":{seq} "sequence_number":{seq}{text(3)}',
                    "",
                ]
            )
            frames.append(Frame(seq, rnd.choice([None, "a", "b", ""]), data))
        assert _unpack(_pack(frames)) == frames


def test_the_text_two_frames_share_at_either_end_is_found_exactly():
    from agents_core.store.stream_events import _shared_prefix, _shared_suffix

    def by_character(a: str, b: str, limit: int, step: int) -> int:
        n, i = 0, 0 if step == 1 else -1
        while n < limit and a[i] == b[i]:
            n, i = n + 1, i + step
        return n

    rng = random.Random(7)
    for _ in range(5_000):
        common = "".join(rng.choice("ab\u00e9") for _ in range(rng.randint(0, 40)))
        a = common + "".join(rng.choice("ab") for _ in range(rng.randint(0, 9)))
        b = common + "".join(rng.choice("ab") for _ in range(rng.randint(0, 9)))
        if rng.random() < 0.5:
            a, b = a[::-1], b[::-1]
        limit = min(len(a), len(b))
        prefix = by_character(a, b, limit, 1)
        suffix = by_character(a, b, limit - prefix, -1)

        # Any guess, right or wrong (the share of the frames before), gives the same count:
        # exact, a few or many characters short of it or past it, anywhere.
        def guesses(exact: int, limit: int = limit) -> tuple[int, ...]:
            return (
                0,
                exact,
                exact - rng.randint(1, 30),
                exact + rng.randint(1, 3),
                rng.randint(0, limit + 2),
            )

        for guess in guesses(prefix):
            assert _shared_prefix(a, b, limit, max(guess, 0)) == prefix, (a, b, guess)
        for guess in guesses(suffix):
            assert _shared_suffix(a, b, limit - prefix, max(guess, 0)) == suffix, (a, b, guess)


def test_a_streamed_answers_deltas_pack_into_a_fraction_of_a_write_unit():
    words = " ".join(random.Random(2).choice(["agents", "run", "on", "lambda"]) for _ in range(250))
    deltas = [words[i : i + 4] for i in range(0, 1000, 4)]
    compact = {"separators": (",", ":")}  # as pydantic writes them
    turn = [
        Frame(n, None, json.dumps({"event": {"payload": {"step_id": "s-1", "text": d}}}, **compact))
        for n, d in enumerate(deltas)
    ]
    response = [
        Frame(n, "response.delta", json.dumps({"sequence_number": n, "delta": d}, **compact))
        for n, d in enumerate(deltas)
    ]
    for frames in (turn, response):
        raw = sum(len(f.data) for f in frames)
        assert len(_pack(frames)) < min(1024, raw / 10)


def test_a_text_deltas_frame_is_its_chunk_as_pydantic_writes_it():
    """turn_frame writes a text delta's chunk itself (the chunk a long answer is made of): the
    same text, byte for byte, as the chunk's model_dump_json, whatever the text holds."""
    from agents_core.engine.loop import TextDelta
    from agents_core.engine.turn_run import _progress
    from agents_core.services.streams import turn_frame

    rng = random.Random(11)
    alphabet = [chr(c) for c in range(0x80)] + ["é", "😀", "\u2028", "\ufeff", "\u0085", "\x7f"]
    for n in range(3_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        step_type = rng.choice(["inference", "tool_execution"])
        chunk = _progress(f'step-{n}"', {"type": "text", "text": text}, step_type)
        assert turn_frame(n, chunk).data == chunk.model_dump_json(), text
        # A streamed turn's own delta (TurnRun.events(plain_text=True)): an inference step's.
        inference = _progress(f'step-{n}"', {"type": "text", "text": text})
        plain = TextDelta(f'step-{n}"', text)
        assert turn_frame(n, plain) == turn_frame(n, inference), text
        assert turn_frame(n, plain).data == inference.model_dump_json(), text
    call = _progress("s", {"type": "tool_call", "tool_call": "{}", "parse_status": "in_progress"})
    assert turn_frame(1, call).data == call.model_dump_json()


def test_a_runs_start_and_step_start_frames_are_their_chunks_as_pydantic_writes_them():
    """turn_frame writes turn_start and step_start chunks itself too: byte for byte the
    chunk's model_dump_json, whatever the ids hold, from the chunk or from what a streamed
    turn yields for it (TurnRun.events(plain_text=True)); a step start with metadata is
    pydantic's."""
    from datetime import UTC, datetime

    from agents_core.api.agents import AgentTurnResponseTurnStartPayload
    from agents_core.engine.loop import ModelCallStarted, TurnStarted
    from agents_core.engine.turn_run import _chunk, _step_start
    from agents_core.services.streams import turn_frame

    rng = random.Random(12)
    alphabet = [chr(c) for c in range(0x80)] + ["é", "😀", "\u2028", "\ufeff", "\u0085"]
    for n in range(1_000):
        some_id = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        start = _chunk(AgentTurnResponseTurnStartPayload(turn_id=some_id))
        assert turn_frame(n, start).data == start.model_dump_json(), some_id
        assert turn_frame(n, TurnStarted(some_id)) == turn_frame(n, start), some_id
        step = _step_start(rng.choice(["inference", "tool_execution", "shield_call"]), some_id)
        assert turn_frame(n, step).data == step.model_dump_json(), some_id
        called = ModelCallStarted(some_id, datetime.now(UTC))
        assert turn_frame(n, called) == turn_frame(n, _step_start("inference", some_id))
    step.event.payload.metadata = {"note": 'a "b"'}
    assert turn_frame(1, step).data == step.model_dump_json()


def test_a_responses_text_deltas_frame_is_its_event_as_pydantic_writes_it():
    from agents_core.api.responses.events import OutputTextDelta
    from agents_core.engine.responses.output import PlainTextDelta
    from agents_core.services.streams import response_frame

    rng = random.Random(12)
    alphabet = [chr(c) for c in range(0x80)] + ["é", "😀", "\u2028", "\ufeff", "\u0085"]
    for n in range(3_000):
        delta = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        event = OutputTextDelta(
            sequence_number=n,
            item_id=f"msg_{n}\\",
            output_index=rng.randint(0, 3),
            content_index=rng.randint(0, 1),
            delta=delta,
        )
        frame = response_frame(event)
        assert (frame.seq, frame.event) == (n, "response.output_text.delta")
        assert frame.data == event.model_dump_json(), delta
        # A streamed response's own delta (ResponseRun.events(plain_text=True)).
        plain = PlainTextDelta(**event.model_dump(exclude={"type", "logprobs"}))
        assert response_frame(plain) == frame, delta
    with_logprobs = event.model_copy(update={"logprobs": [{"token": "a", "logprob": -0.5}]})
    assert response_frame(with_logprobs).data == with_logprobs.model_dump_json()


def test_a_long_answers_deltas_are_stored_as_what_differs_between_them():
    """250 deltas as a turn streams them, between the frames of other kinds around them: each
    delta stored as what it adds to the one before (about 400 bytes in all; 1,200 if each
    were compressed whole), and read back as they were."""
    step = '{"event":{"payload":{"event_type":"step_progress","step_type":"inference",'
    step += '"step_id":"01a21a73-843f-7000-a1fa-400c52733f89","delta":{"type":"text","text":%s}}}}'
    start = (
        '{"event":{"payload":{"event_type":"step_start","step_type":"inference","step_id":"s"}}}'
    )
    end = '{"event":{"payload":{"event_type":"turn_complete","turn":{"turn_id":"t"}}}}'
    frames = [Frame(0, None, start)]
    frames += [Frame(1 + n, None, step % json.dumps(f"word{n} ")) for n in range(250)]
    frames.append(Frame(251, None, end))
    packed = _pack(frames)
    assert _unpack(packed) == frames
    assert len(packed) < 600


def test_a_responses_created_and_in_progress_frames_are_their_events_as_pydantic_writes_them():
    """The two share their snapshot's JSON, written once; a later pair with another snapshot
    (a response with a quote in its instructions) is written anew."""
    from agents_core.api.responses import OpenAIResponseObject, ResponseCreated, ResponseInProgress
    from agents_core.services.streams import ResponseFrames

    frames = ResponseFrames()
    for n, instructions in enumerate(["Be brief.", 'Say "é\\u2028"']):
        snapshot = OpenAIResponseObject(
            created_at=1,
            id=f"resp_{n}",
            model="m",
            output=[],
            status="in_progress",
            instructions=instructions,
            metadata={"k": "v"},
        )
        created = ResponseCreated(sequence_number=2 * n, response=snapshot)
        started = ResponseInProgress(sequence_number=2 * n + 1, response=snapshot)
        for event in (created, started):
            frame = frames(event)
            assert (frame.seq, frame.event) == (event.sequence_number, event.type)
            assert frame.data == event.model_dump_json()
