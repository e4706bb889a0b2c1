"""Resuming turns from the SQS queue, and lifecycle events on EventBridge, all on moto."""

from __future__ import annotations

import asyncio
import json
import zlib

import boto3
import pytest
from agents_core.api.agents import AgentConfig, CreateAgentTurnRequest
from agents_core.domain import AWAITING_INPUT
from agents_core.errors import RunFailed
from agents_core.lifecycle import ensure_event_bus
from agents_core.services import build_services
from agents_core.services.resume_queue import (
    ResumeQueueWorker,
    ensure_resume_queue,
    lambda_sqs_event,
    poll_forever,
)
from agents_core.settings import Settings
from agents_core.store.stream_events import _unpack

from .conftest import TABLE
from .lambda_support import load_event
from .turn_support import WEATHER_TOOL

BUS = "turns-test"
EVENT_AGENT = "{{agent_id}}"
EVENT_SESSION = "{{session_id}}"
EVENT_TURN = "{{turn_id}}"
EVENT_CALL = "{{call_id}}"
EVENT_TOKEN = "{{resume_token}}"
TENANT = "tenant-key-a"  # the tenant attribute of events/resume/sqs_resume_batch.json


@pytest.fixture
def aws(dynamodb):
    """SQS and EventBridge beside the table, and a capture queue subscribed to the bus."""
    sqs = boto3.client("sqs", region_name="us-east-1")
    events = boto3.client("events", region_name="us-east-1")
    ensure_event_bus(events, BUS)
    capture_url = sqs.create_queue(QueueName="turn-events")["QueueUrl"]
    capture_arn = sqs.get_queue_attributes(QueueUrl=capture_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    events.put_rule(
        Name="all-turn-events",
        EventBusName=BUS,
        EventPattern=json.dumps({"source": ["serverless-agents"]}),
    )
    events.put_targets(
        Rule="all-turn-events", EventBusName=BUS, Targets=[{"Id": "capture", "Arn": capture_arn}]
    )
    # A tool worker's own subscription: where the tests learn each pause's resume token.
    tokens_url = sqs.create_queue(QueueName="awaiting-events")["QueueUrl"]
    tokens_arn = sqs.get_queue_attributes(QueueUrl=tokens_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    events.put_rule(
        Name="awaiting-turns",
        EventBusName=BUS,
        EventPattern=json.dumps({"detail-type": ["Turn Awaiting Input"]}),
    )
    events.put_targets(
        Rule="awaiting-turns", EventBusName=BUS, Targets=[{"Id": "tokens", "Arn": tokens_arn}]
    )
    return {
        "sqs": sqs,
        "events": events,
        "capture": capture_url,
        "tokens": tokens_url,
        "dynamodb": dynamodb,
    }


@pytest.fixture
def services(aws, model):
    model.reset()
    settings = Settings(
        table_name=TABLE, openai_base_url=model.url, inference_timeout_seconds=2, event_bus_name=BUS
    )
    services = build_services(settings, aws["dynamodb"], aws["events"])
    services.aws = aws  # where paused_turn reads the resume tokens
    return services


def captured(aws, queue: str = "capture") -> list[dict]:
    messages = []
    while True:
        resp = aws["sqs"].receive_message(QueueUrl=aws[queue], MaxNumberOfMessages=10)
        if not resp.get("Messages"):
            return messages
        for m in resp["Messages"]:
            messages.append(json.loads(m["Body"]))
            aws["sqs"].delete_message(QueueUrl=aws[queue], ReceiptHandle=m["ReceiptHandle"])


_tokens: dict[str, str] = {}  # turn id -> the resume token of its last pause


def resume_token(aws, turn_id: str) -> str:
    """The token the turn's latest `Turn Awaiting Input` event carried."""
    for event in captured(aws, "tokens"):
        _tokens[event["detail"]["turn_id"]] = event["detail"]["resume_token"]
    return _tokens[turn_id]


async def paused_turn(services, model, tenant=TENANT):
    agent = services.agents.create_agent(
        tenant, AgentConfig(model="m", instructions="Use tools.", client_tools=[WEATHER_TOOL])
    )
    session = services.agents.create_session(tenant, agent.agent_id, "queue")
    model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
    body = CreateAgentTurnRequest(messages=[{"role": "user", "content": "Weather in Paris?"}])
    run = await services.engine.start_turn(tenant, agent.agent_id, session.session_id, body)
    turn = await run.result()
    ids = {
        EVENT_AGENT: agent.agent_id,
        EVENT_SESSION: session.session_id,
        EVENT_TURN: turn.turn_id,
        EVENT_CALL: turn.output_message.tool_calls[0].call_id,
        EVENT_TOKEN: await asyncio.to_thread(resume_token, services.aws, turn.turn_id),
    }
    return ids, turn


def batch(*records: dict) -> dict:
    return {"Records": list(records)}


def record(ids: dict, message_id: str = "m-1", body: str | None = None) -> dict:
    event = load_event("resume/sqs_resume_batch.json", ids)
    rec = event["Records"][0]
    rec["messageId"] = message_id
    if body is not None:
        rec["body"] = body
    return rec


def test_a_message_resumes_the_turn_to_completion(services, model):
    async def scenario():
        ids, paused = await paused_turn(services, model)
        model.reply(text="Sunny, 18C.")
        result = await ResumeQueueWorker(services).handle(
            load_event("resume/sqs_resume_batch.json", ids)
        )
        return ids, paused, result

    ids, paused, result = asyncio.run(scenario())
    assert result == {"batchItemFailures": []}
    turn = services.turns.get_turn(TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id)
    assert turn.output_message.content == "Sunny, 18C."
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution", "inference"]
    assert turn.steps[1].tool_responses[0].content == "18C and sunny"


def test_a_duplicate_message_continues_the_turn_once(services, model):
    async def scenario():
        ids, paused = await paused_turn(services, model)
        model.reply(text="once")
        worker = ResumeQueueWorker(services)
        first = await worker.handle(batch(record(ids, "m-1")))
        again = await worker.handle(batch(record(ids, "m-2")))  # a client retry: a new message id
        return ids, paused, first, again

    ids, paused, first, again = asyncio.run(scenario())
    assert first == again == {"batchItemFailures": []}
    turn = services.turns.get_turn(TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id)
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution", "inference"]
    assert len(model.requests) == 2  # the pause and one continuation


def forged(rec: dict, tenant: str | None = None, token: str | None = "keep") -> dict:
    """`rec` with its tenant or resume token changed (token None: the attribute removed)."""
    attributes = rec["messageAttributes"]
    if tenant is not None:
        attributes["tenant"]["stringValue"] = tenant
    if token is None:
        del attributes["resume_token"]
    elif token != "keep":
        attributes["resume_token"]["stringValue"] = token
    return rec


@pytest.mark.parametrize("forgery", ["no token", "wrong token", "another turn's token"])
def test_a_message_without_its_turns_token_is_dropped_and_changes_nothing(services, model, forgery):
    async def scenario():
        ids, paused = await paused_turn(services, model)
        other_ids, _ = await paused_turn(services, model)  # a pause of the same tenant
        token = {
            "no token": None,
            "wrong token": ("y" if ids[EVENT_TOKEN][0] == "x" else "x") + ids[EVENT_TOKEN][1:],
            "another turn's token": other_ids[EVENT_TOKEN],
        }[forgery]
        model.reply(text="must not run")
        result = await ResumeQueueWorker(services).handle(
            batch(forged(record(ids, "forged"), token=token))
        )
        return ids, paused, result

    ids, paused, result = asyncio.run(scenario())
    assert result == {"batchItemFailures": []}  # handled: dropped, never retried
    turn, state = services.turns.get_turn_state(
        TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id
    )
    assert state.status == AWAITING_INPUT
    assert turn.steps == paused.steps
    assert len(model.requests) == 2  # the two pauses; no continuation ran


def test_a_message_cannot_resume_another_tenants_turn(services, model):
    """Tenant B names tenant A's paused turn: with its own (B's) token, or with A's tenant but
    B's token. Neither resumes A's turn; A's own message still does afterwards."""

    async def scenario():
        ids, paused = await paused_turn(services, model, tenant=TENANT)
        theirs, _ = await paused_turn(services, model, tenant="tenant-b")
        worker = ResumeQueueWorker(services)
        as_b = await worker.handle(
            batch(forged(record(ids, "as-b"), tenant="tenant-b", token=theirs[EVENT_TOKEN]))
        )
        as_a = await worker.handle(batch(forged(record(ids, "as-a"), token=theirs[EVENT_TOKEN])))
        state = services.turns.get_turn_state(
            TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id
        )[1]
        model.reply(text="resumed by its owner")
        own = await worker.handle(batch(record(ids, "own")))
        return ids, paused, as_b, as_a, state, own

    ids, paused, as_b, as_a, state_between, own = asyncio.run(scenario())
    # Under tenant B the turn does not exist: reported like any unknown turn (then the DLQ).
    assert as_b == {"batchItemFailures": [{"itemIdentifier": "as-b"}]}
    assert as_a == {"batchItemFailures": []}  # the token does not match: dropped
    assert state_between.status == AWAITING_INPUT
    assert own == {"batchItemFailures": []}
    turn = services.turns.get_turn(TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id)
    assert turn.output_message.content == "resumed by its owner"


def stored_text(value) -> str:
    """A binary attribute's text: a stream's packed frames, or a compressed JSON attribute."""
    data = bytes(value)
    if data[:1] == b"\x01":
        return json.dumps([frame.data for frame in _unpack(data)])
    return zlib.decompress(data).decode()


def test_each_pause_issues_a_new_token_stored_only_as_its_hash(services, model, aws):
    async def scenario():
        ids, paused = await paused_turn(services, model)
        model.reply(tool_calls=[("get_weather", '{"city": "Oslo"}')])  # pauses again
        await ResumeQueueWorker(services).handle(batch(record(ids, "first")))
        second = await asyncio.to_thread(resume_token, aws, paused.turn_id)
        return ids, paused, second

    ids, paused, second = asyncio.run(scenario())
    first = ids[EVENT_TOKEN]
    assert second != first and len(second) >= 32
    items = aws["dynamodb"].scan(TableName=TABLE)["Items"]
    stored = json.dumps(items, default=stored_text)  # compressed attributes read back
    assert first not in stored and second not in stored
    state = services.turns.get_turn_state(
        TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id
    )[1]
    assert state.status == AWAITING_INPUT
    assert state.resume_token_matches(second) and not state.resume_token_matches(first)


@pytest.mark.parametrize("poison", ["bad json", "unknown turn", "wrong call ids", "not awaiting"])
def test_a_poison_record_fails_alone(services, model, poison):
    async def scenario():
        ids, _ = await paused_turn(services, model)
        other_ids, _ = await paused_turn(services, model)
        bad = dict(other_ids)
        body = None
        if poison == "bad json":
            body = "{not json"
        elif poison == "unknown turn":
            bad[EVENT_TURN] = "01937a2e-0000-7000-8000-00000000dead"
        elif poison == "wrong call ids":
            bad[EVENT_CALL] = "call_that_was_never_made"
        elif poison == "not awaiting":
            model.reply(text="done")
            await ResumeQueueWorker(services).handle(batch(record(other_ids, "m-0")))
            bad[EVENT_CALL] = "call_that_was_never_made"
        model.reply(text="good one finished")
        result = await ResumeQueueWorker(services).handle(
            batch(record(ids, "good"), record(bad, "poison", body))
        )
        return ids, result

    ids, result = asyncio.run(scenario())
    assert result == {"batchItemFailures": [{"itemIdentifier": "poison"}]}
    turn = services.turns.get_turn(TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], ids[EVENT_TURN])
    assert turn.output_message.content == "good one finished"


def test_a_model_failure_leaves_the_turn_resumable(services, model):
    async def scenario():
        ids, paused = await paused_turn(services, model)
        model.reply(error="status", status=503)
        worker = ResumeQueueWorker(services)
        failed = await worker.handle(batch(record(ids, "m-1")))
        state_after_failure = services.turns.get_turn_state(
            TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id
        )
        # Put back as it was stored: the reply inside the turn's item, for a resume's one read.
        kept = services.turns.read_paused(
            TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id
        ).steps_in_item
        model.reply(text="back online")
        retried = await worker.handle(batch(record(ids, "m-1")))  # SQS redelivers the same message
        return ids, paused, failed, state_after_failure, kept, retried

    ids, paused, failed, (turn_after, state_after), kept, retried = asyncio.run(scenario())
    assert failed == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert kept == 1
    assert state_after.status == AWAITING_INPUT
    assert turn_after.steps == paused.steps  # nothing of the failed attempt was kept
    assert retried == {"batchItemFailures": []}
    turn = services.turns.get_turn(TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], paused.turn_id)
    assert turn.output_message.content == "back online"
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution", "inference"]


def test_lifecycle_events_reach_a_rule_target(services, model, aws):
    async def scenario():
        ids, paused = await paused_turn(services, model)
        model.reply(text="All done.")
        await ResumeQueueWorker(services).handle(batch(record(ids)))
        agent = services.agents.create_agent(TENANT, AgentConfig(model="m", instructions="x"))
        session = services.agents.create_session(TENANT, agent.agent_id, "fails")
        model.reply(error="status", status=500)
        body = CreateAgentTurnRequest(messages=[{"role": "user", "content": "boom"}])
        run = await services.engine.start_turn(TENANT, agent.agent_id, session.session_id, body)
        with pytest.raises(RunFailed):  # not streamed: the failure is raised, and announced
            await run.result()
        return ids, paused, None

    ids, paused, _ = asyncio.run(scenario())
    got = captured(aws)
    assert [e["detail-type"] for e in got] == [
        "Turn Awaiting Input",
        "Turn Completed",
        "Turn Failed",
    ]
    assert all(e["source"] == "serverless-agents" for e in got)
    waiting, done, failed = (e["detail"] for e in got)
    assert waiting["turn_id"] == done["turn_id"] == paused.turn_id
    assert waiting["agent_id"] == ids[EVENT_AGENT] and waiting["session_id"] == ids[EVENT_SESSION]
    assert waiting["pending_tool_calls"][0]["call_id"] == ids[EVENT_CALL]
    assert waiting["pending_tool_calls"][0]["arguments"] == {"city": "Paris"}
    assert done["output_message"]["content"] == "All done."
    assert "500" in failed["error"] and failed["status"] == "failed"
    for name in ("turn_awaiting_input", "turn_completed", "turn_failed"):
        example = load_event(f"lifecycle/{name}.json")
        kind = next(e for e in got if e["detail-type"] == example["detail-type"])
        assert set(example["detail"]) == set(kind["detail"]), name


def test_a_publishing_failure_does_not_fail_the_turn(services, model, aws):
    aws["events"].delete_event_bus(Name=BUS)

    async def scenario():
        agent = services.agents.create_agent(TENANT, AgentConfig(model="m", instructions="x"))
        session = services.agents.create_session(TENANT, agent.agent_id, "s")
        model.reply(text="still fine")
        body = CreateAgentTurnRequest(messages=[{"role": "user", "content": "hi"}])
        run = await services.engine.start_turn(TENANT, agent.agent_id, session.session_id, body)
        return await run.result()

    assert asyncio.run(scenario()).output_message.content == "still fine"


def test_the_whole_asynchronous_loop(services, model, aws):
    """Turn pauses -> awaiting-input event -> a worker runs the tool -> resume message ->
    the queue poller (as make run does) resumes -> completed event with the final answer."""
    sqs = aws["sqs"]
    queue_url = ensure_resume_queue(sqs, "resume-test")

    def tool_worker(event: dict) -> None:
        detail = event["detail"]
        call = detail["pending_tool_calls"][0]
        result = f"{call['arguments']['city']}: 21C"
        body = {
            "agent_id": detail["agent_id"],
            "session_id": detail["session_id"],
            "turn_id": detail["turn_id"],
            "tool_responses": [
                {"call_id": call["call_id"], "tool_name": call["tool_name"], "content": result}
            ],
        }
        sqs.send_message(
            QueueUrl=queue_url,
            MessageBody=json.dumps(body),
            MessageAttributes={
                "tenant": {"DataType": "String", "StringValue": detail["tenant"]},
                "resume_token": {"DataType": "String", "StringValue": detail["resume_token"]},
            },
        )

    async def scenario():
        poller = asyncio.create_task(poll_forever(sqs, queue_url, ResumeQueueWorker(services)))
        try:
            ids, paused = await paused_turn(services, model)
            (awaiting,) = await asyncio.to_thread(captured, aws)
            tool_worker(awaiting)
            model.reply(text="It is 21C in Paris.")
            for _ in range(100):
                await asyncio.sleep(0.1)
                completed = await asyncio.to_thread(captured, aws)
                if completed:
                    return paused, completed
            raise AssertionError("no completed event")
        finally:
            poller.cancel()

    paused, completed = asyncio.run(scenario())
    assert completed[0]["detail-type"] == "Turn Completed"
    assert completed[0]["detail"]["turn_id"] == paused.turn_id
    assert completed[0]["detail"]["output_message"]["content"] == "It is 21C in Paris."
    assert "Paris: 21C" in model.requests[-1]["messages"][-1]["content"]


def test_poison_messages_reach_the_dead_letter_queue(services, model, aws):
    sqs = aws["sqs"]
    queue_url = ensure_resume_queue(sqs, "resume-dlq-test", max_receive_count=2)
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "0"})
    dlq_url = sqs.get_queue_url(QueueName="resume-dlq-test-dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=queue_url, MessageBody="definitely not a resume request")

    async def scenario():
        poller = asyncio.create_task(poll_forever(sqs, queue_url, ResumeQueueWorker(services)))
        try:
            for _ in range(60):
                await asyncio.sleep(0.1)
                got = await asyncio.to_thread(sqs.receive_message, QueueUrl=dlq_url)
                if got.get("Messages"):
                    return got["Messages"][0]["Body"]
            raise AssertionError("poison message never reached the DLQ")
        finally:
            poller.cancel()

    assert asyncio.run(scenario()) == "definitely not a resume request"


def test_lambda_sqs_event_matches_the_checked_in_event_shape():
    example = load_event("resume/sqs_resume_batch.json")["Records"][0]
    built = lambda_sqs_event(
        [
            {
                "MessageId": "x",
                "ReceiptHandle": "r",
                "Body": "{}",
                "Attributes": {},
                "MessageAttributes": {"tenant": {"DataType": "String", "StringValue": "t"}},
            }
        ],
        example["eventSourceARN"],
        "us-east-1",
    )["Records"][0]
    assert set(built) == set(example)
    assert set(built["messageAttributes"]["tenant"]) == set(example["messageAttributes"]["tenant"])


def test_the_resume_function_takes_sqs_batches_at_the_web_adapter_path(
    services, model, aws, monkeypatch
):
    """In AWS the Web Adapter POSTs each SQS batch to /events; the app answers the failures."""
    from fastapi.testclient import TestClient

    from .lambda_support import load_function

    monkeypatch.setenv("EVENT_BUS_NAME", BUS)
    app = load_function("resume").app
    with TestClient(app) as client:
        agent = client.app.state.services.agents
        created = agent.create_agent(
            TENANT, AgentConfig(model="offline", instructions="x", client_tools=[WEATHER_TOOL])
        )
        session = agent.create_session(TENANT, created.agent_id, "s")
    ids = {EVENT_AGENT: created.agent_id, EVENT_SESSION: session.session_id}

    async def pause():
        engine = app.state.services.engine
        body = CreateAgentTurnRequest(
            messages=[{"role": "user", "content": "use get_weather city=Rome"}]
        )
        run = await engine.start_turn(TENANT, created.agent_id, session.session_id, body)
        return await run.result()

    paused = asyncio.run(pause())
    ids.update(
        {
            EVENT_TURN: paused.turn_id,
            EVENT_CALL: paused.output_message.tool_calls[0].call_id,
            EVENT_TOKEN: resume_token(aws, paused.turn_id),
        }
    )
    event = load_event("resume/sqs_resume_batch.json", ids)
    event["Records"].append(record(ids, "poison", "nope"))
    with TestClient(app) as client:
        resp = client.post("/events", json=event)
    assert resp.json() == {"batchItemFailures": [{"itemIdentifier": "poison"}]}
    turn = app.state.services.turns.get_turn(
        TENANT, created.agent_id, session.session_id, paused.turn_id
    )
    assert turn.output_message.content == "Tool result: 18C and sunny"


def test_outcomes_are_counted_as_embedded_metrics(services, model, capsys):
    async def scenario():
        ids, _ = await paused_turn(services, model)
        model.reply(text="done")
        await ResumeQueueWorker(services).handle(
            batch(
                record(ids, "ok"),
                record(ids, "dup"),
                record(ids, "bad", "{"),
                forged(record(ids, "forged"), token="not-the-token"),
            )
        )

    asyncio.run(scenario())
    metrics = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if '"CloudWatchMetrics"' in line
    ]
    names = [m["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] for m in metrics]
    assert all(
        m["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "serverless-agents" for m in metrics
    )
    for name in (
        "TurnsAwaitingInput",
        "TurnsCompleted",
        "ResumeMessagesApplied",
        "ResumeMessagesDuplicate",
        "ResumeMessagesPoison",
        "ResumeMessagesRejected",
    ):
        assert names.count(name) == 1, (name, names)


def test_a_count_is_the_line_powertools_single_metric_prints(monkeypatch, capsys):
    from agents_core import metrics
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    metrics.count("TurnsCompleted")
    with single_metric(
        name="TurnsCompleted", unit=MetricUnit.Count, value=1, namespace=metrics.NAMESPACE
    ) as metric:
        metric.add_dimension(name="service", value=metrics.NAMESPACE)
    ours, theirs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert abs(ours["_aws"].pop("Timestamp") - theirs["_aws"].pop("Timestamp")) < 60_000
    assert ours == theirs


@pytest.mark.parametrize("disabled", [None, "true", "false", "1", "0", "TRUE", "off"])
@pytest.mark.parametrize("dev", [None, "true", "false"])
def test_counts_are_switched_off_as_powertools_switches_its_metrics(monkeypatch, disabled, dev):
    from agents_core import metrics
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    for name, value in (("POWERTOOLS_METRICS_DISABLED", disabled), ("POWERTOOLS_DEV", dev)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert metrics._disabled() == is_metrics_disabled()


def test_response_lifecycle_events_reach_a_rule_target(services, model, aws):
    from agents_core.api.responses import CreateOpenaiResponseRequest

    async def respond(**fields):
        body = CreateOpenaiResponseRequest.model_validate({"model": "m", "input": "Hi", **fields})
        run = await services.responses_engine.start(TENANT, body)
        try:
            return await run.result()
        except RunFailed:
            return None

    async def scenario():
        model.reply(text="Sunny.")
        done = await respond(metadata={"order": "42"})
        model.reply(text="Once upon", finish_reason="length")
        await respond()
        model.reply(error="status", status=500)
        await respond()
        model.reply(text="Not kept.")
        await respond(store=False)
        return done

    done = asyncio.run(scenario())
    got = [e for e in captured(aws) if e["detail-type"].startswith("Response")]
    assert [e["detail-type"] for e in got] == [
        "Response Completed",
        "Response Incomplete",
        "Response Failed",
        "Response Completed",
    ]
    completed, incomplete, failed, unstored = (e["detail"] for e in got)
    assert (completed["response_id"], completed["output_text"]) == (done.id, "Sunny.")
    assert completed["tenant"] == TENANT and completed["metadata"] == {"order": "42"}
    assert incomplete["incomplete_details"] == {"reason": "max_output_tokens"}
    assert failed["error"]["code"] == "model_error"
    assert unstored["stored"] is False and "output_text" not in unstored
    example = load_event("lifecycle/response_completed.json")
    assert set(example["detail"]) == set(completed)


def resume_queue_for(services, name: str, **settings) -> str:
    """A resume queue of the test's own, where the worker sends continuations."""
    from dataclasses import replace

    sqs = services.aws["sqs"]
    queue_url = ensure_resume_queue(sqs, name)
    services.settings = replace(services.settings, resume_queue_url=queue_url, **settings)
    services.sqs_client = sqs
    return queue_url


async def paused_plan(services, model):
    """A turn of an agent with a client tool and web search, paused on the client tool:
    (agent id, session id, the paused turn)."""
    agent = services.agents.create_agent(
        TENANT,
        AgentConfig(
            model="m",
            instructions="Use tools.",
            client_tools=[WEATHER_TOOL],
            toolgroups=["builtin::websearch"],
        ),
    )
    session = services.agents.create_session(TENANT, agent.agent_id, "plan")
    model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
    body = CreateAgentTurnRequest(messages=[{"role": "user", "content": "Plan my day"}])
    run = await services.engine.start_turn(TENANT, agent.agent_id, session.session_id, body)
    return agent.agent_id, session.session_id, await run.result()


def test_a_model_failure_after_steps_of_its_own_parks_the_turn_and_a_later_message_goes_on(
    services, model, aws
):
    """The resumed turn ran a server tool, then its model failed: the turn is parked after the
    tool's step (not reverted, which would run the tool again), the message is acknowledged
    and a delayed continuation sent; it finishes the turn, the tool having run once."""
    sqs = aws["sqs"]
    queue_url = resume_queue_for(services, "resume-retry-test", resume_retry_delay_seconds=0)

    async def scenario():
        agent_id, session_id, paused = await paused_plan(services, model)
        ids = {
            EVENT_AGENT: agent_id,
            EVENT_SESSION: session_id,
            EVENT_TURN: paused.turn_id,
            EVENT_CALL: paused.output_message.tool_calls[0].call_id,
            EVENT_TOKEN: await asyncio.to_thread(resume_token, services.aws, paused.turn_id),
        }
        model.reply(tool_calls=[("web_search", '{"query": "museums"}')])
        model.reply(error="status", status=503)
        worker = ResumeQueueWorker(services)
        first = await worker.handle(batch(record(ids, "m-1")))
        parked = services.turns.get_turn_state(TENANT, agent_id, session_id, paused.turn_id)
        sent = sqs.receive_message(
            QueueUrl=queue_url, MessageAttributeNames=["All"], MaxNumberOfMessages=10
        ).get("Messages", [])
        model.reply(text="Museums it is.")
        token = sent[0]["MessageAttributes"]["resume_token"]["StringValue"]
        again = record({**ids, EVENT_TOKEN: token}, "m-2", body=sent[0]["Body"])
        second = await worker.handle(batch(again))
        return ids, first, parked, sent, second

    ids, first, (parked_turn, parked_state), sent, second = asyncio.run(scenario())
    assert first == {"batchItemFailures": []}  # acknowledged: the continuation carries it on
    assert parked_state.status == AWAITING_INPUT and parked_state.pending_calls == []
    kinds = ["inference", "tool_execution", "inference", "tool_execution"]
    assert [s.step_type for s in parked_turn.steps] == kinds  # the search's step is kept
    assert len(sent) == 1 and json.loads(sent[0]["Body"])["tool_responses"] == []
    assert second == {"batchItemFailures": []}
    turn = services.turns.get_turn(TENANT, ids[EVENT_AGENT], ids[EVENT_SESSION], ids[EVENT_TURN])
    assert turn.output_message.content == "Museums it is."
    assert [s.step_type for s in turn.steps] == [*kinds, "inference"]
    searches = [
        call
        for step in turn.steps
        if step.step_type == "tool_execution"
        for call in step.tool_calls
        if call.tool_name == "web_search"
    ]
    assert len(searches) == 1
    assert len(model.requests) == 4  # the first call, the search's, the failed one, the last


def test_a_resumed_turn_out_of_time_is_parked_and_continued_by_the_queue_to_its_end(
    services, model, aws
):
    """A queued resume whose invocation leaves no time for a second model call stops at each
    step boundary, parks the turn (awaiting no call, nothing announced) and sends its own
    continuation; the queue carries it on to the same end as in one invocation, each model
    call and each tool call made once."""
    sqs = aws["sqs"]
    queue_url = resume_queue_for(services, "resume-continue-test", run_suspend_margin_seconds=10**6)
    continuations = []

    def sent(params, **_):
        if not json.loads(params["MessageBody"])["tool_responses"]:
            continuations.append(params["MessageAttributes"]["resume_token"]["StringValue"])

    sqs.meta.events.register("provide-client-params.sqs.SendMessage", sent)

    async def scenario():
        agent_id, session_id, paused = await paused_plan(services, model)
        call = paused.output_message.tool_calls[0]
        token = await asyncio.to_thread(resume_token, services.aws, paused.turn_id)
        await asyncio.to_thread(captured, aws)  # the pause's own event
        model.reply(tool_calls=[("web_search", '{"query": "museums"}')])
        model.reply(tool_calls=[("web_search", '{"query": "parks"}')])
        model.reply(text="Museum, then a park.")
        sqs.send_message(
            QueueUrl=queue_url,
            MessageBody=json.dumps(
                {
                    "agent_id": agent_id,
                    "session_id": session_id,
                    "turn_id": paused.turn_id,
                    "tool_responses": [
                        {"call_id": call.call_id, "tool_name": "get_weather", "content": "sun"}
                    ],
                }
            ),
            MessageAttributes={
                "tenant": {"DataType": "String", "StringValue": TENANT},
                "resume_token": {"DataType": "String", "StringValue": token},
            },
        )
        poller = asyncio.create_task(poll_forever(sqs, queue_url, ResumeQueueWorker(services)))
        try:
            for _ in range(150):
                await asyncio.sleep(0.1)
                events = await asyncio.to_thread(captured, aws)
                if events:
                    return paused, events, session_id, agent_id
            raise AssertionError("the turn never completed")
        finally:
            poller.cancel()

    paused, events, session_id, agent_id = asyncio.run(scenario())
    assert [e["detail-type"] for e in events] == ["Turn Completed"]  # no pause announced
    assert len(set(continuations)) == 2  # three invocations, each continuation its own token
    assert events[0]["detail"]["output_message"]["content"] == "Museum, then a park."
    assert len(model.requests) == 4  # the first call, then three, each once
    turn = services.turns.get_turn(TENANT, agent_id, session_id, paused.turn_id)
    assert [s.step_type for s in turn.steps] == [
        "inference",
        "tool_execution",  # the client's weather
        "inference",
        "tool_execution",  # museums
        "inference",
        "tool_execution",  # parks
        "inference",
    ]
    queries = [
        json.loads(r["messages"][-2]["tool_calls"][0]["function"]["arguments"])
        for r in model.requests[2:]
    ]
    # The queue's part of the turn was recorded: a follower of the turn's stream sees it all.
    from agents_core.services.streams import StreamKey

    async def follow():
        frames = services.streams.follow(
            TENANT, StreamKey.turn(session_id, paused.turn_id), -1, alive=_never_alive
        )
        return [frame async for frame in frames]

    frames = asyncio.run(follow())
    # Numbered by the turn's events, on from its first run's (not streamed, so not recorded).
    seqs = [f.seq for f in frames]
    assert seqs[0] > 0 and seqs == list(range(seqs[0], seqs[0] + len(frames)))
    kinds = [json.loads(f.data)["event"]["payload"]["event_type"] for f in frames]
    assert kinds.count("turn_start") == 3 and kinds[-1] == "turn_complete"
    assert kinds.count("turn_awaiting_input") == 2  # each park
    assert queries == [{"query": "museums"}, {"query": "parks"}]


def test_the_invocation_deadline_is_read_from_the_web_adapters_lambda_context():
    from agents_core.web.turns import invocation_deadline

    assert invocation_deadline('{"request_id": "r", "deadline": 1795000000123}') == 1795000000.123
    assert invocation_deadline('{"deadline_ms": 1795000000000}') == 1795000000.0
    assert invocation_deadline(None) is None
    assert invocation_deadline("not json") is None
    assert invocation_deadline('{"deadline": "soon"}') is None


async def _never_alive() -> bool:
    return False
