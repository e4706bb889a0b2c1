"""A response's life in the table (moto): readable while it runs, failed when its process died,
and a background response's run: its token, who owns it until when, its state, cancel."""

from __future__ import annotations

import asyncio
import time

import pytest
from agents_core.api.responses import OpenAIResponseObjectWithInput
from agents_core.errors import InvalidRequest, NotFound
from agents_core.services.background import StoredRunControl
from agents_core.store import keys
from agents_core.store.responses import CancelledMeanwhile, RunBusy, RunGone

from .conftest import TABLE

TENANT = "acme"


def response(response_id: str = "resp_1", **fields) -> OpenAIResponseObjectWithInput:
    return OpenAIResponseObjectWithInput.model_validate(
        {
            "id": response_id,
            "created_at": int(time.time()),
            "model": "m",
            "status": "in_progress",
            "output": [],
            "input": [{"role": "user", "content": "Hi", "type": "message"}],
            **fields,
        }
    )


def items_under(dynamodb, response_id: str, prefix: str) -> list[str]:
    found = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :sk)",
        ExpressionAttributeValues={
            ":pk": {"S": keys.response_pk(TENANT, response_id)},
            ":sk": {"S": prefix},
        },
    )["Items"]
    return [item["SK"]["S"] for item in found]


def test_a_running_response_reads_in_progress_and_failed_once_its_lease_passed(services):
    store = services.responses

    def listed() -> list[str]:
        found, _ = store.list(TENANT, after=None, limit=10, model=None, descending=True)
        return [r.id for r in found]

    store.begin(TENANT, response("resp_live"), time.time() + 60)
    store.begin(TENANT, response("resp_dead"), time.time() - 1)
    assert store.get(TENANT, "resp_live").status == "in_progress"
    dead = store.get(TENANT, "resp_dead")
    assert dead.status == "failed" and "process ended" in dead.error.message
    assert listed() == []  # listed once ended: a running head in the indexes costs 3 WRU, not 1
    ended = response("resp_live", status="completed")
    store.save(TENANT, ended, [{"role": "user", "content": "Hi"}])
    assert store.get(TENANT, "resp_live").status == "completed"
    assert listed() == ["resp_live"]


def queued(responses, response_id: str = "resp_bg", state: dict | None = None, **fields):
    body = response(response_id, status="queued", background=True, **fields)
    responses.queue(TENANT, body, state or {"step": 0}, "token-1")
    return body


def test_a_queued_run_is_taken_by_one_invocation_at_a_time_with_its_token(services):
    store = services.responses
    queued(store)
    run = store.run(TENANT, "resp_bg")
    assert (run.token, run.status, run.state) == ("token-1", "queued", {"step": 0})
    with pytest.raises(RunBusy):
        store.take(TENANT, "resp_bg", "wrong-token", "a", time.time() + 60)
    store.take(TENANT, "resp_bg", "token-1", "a", time.time() + 60)
    assert store.get(TENANT, "resp_bg").status == "in_progress"
    with pytest.raises(RunBusy):  # a's lease holds
        store.take(TENANT, "resp_bg", "token-1", "b", time.time() + 60, "in_progress")
    assert store.run(TENANT, "resp_bg").owner == "a"


def test_a_run_whose_invocation_died_is_taken_over_and_the_old_owner_can_write_nothing(
    services, dynamodb
):
    store = services.responses
    queued(store)
    store.take(TENANT, "resp_bg", "token-1", "a", time.time() - 1)  # a's invocation is over
    store.take(TENANT, "resp_bg", "token-1", "b", time.time() + 60, "in_progress")
    store.checkpoint(TENANT, "resp_bg", "b", 1, {"step": 1})
    with pytest.raises(RunGone):
        store.checkpoint(TENANT, "resp_bg", "a", 1, {"step": 99})
    run = store.run(TENANT, "resp_bg")
    assert (run.owner, run.state) == ("b", {"step": 1})
    assert items_under(dynamodb, "resp_bg", keys.RUN_STATE_PREFIX) == [
        f"{keys.RUN_STATE_PREFIX}b#000001"
    ]
    with pytest.raises(RunGone):
        store.save(TENANT, response("resp_bg", status="completed", background=True), [], "a")
    assert store.get(TENANT, "resp_bg").status == "in_progress"


def test_a_large_state_is_stored_in_parts_and_each_checkpoint_replaces_the_last(services, dynamodb):
    store = services.responses
    queued(store)
    store.take(TENANT, "resp_bg", "token-1", "a", time.time() + 60)
    big = {"messages": ["x" * 300_000, "y" * 300_000]}
    store.checkpoint(TENANT, "resp_bg", "a", 1, big)
    assert store.run(TENANT, "resp_bg").state == big
    store.checkpoint(TENANT, "resp_bg", "a", 2, {"small": True})
    assert store.run(TENANT, "resp_bg").state == {"small": True}
    assert items_under(dynamodb, "resp_bg", keys.RUN_STATE_PREFIX) == [
        f"{keys.RUN_STATE_PREFIX}a#000002"
    ]


def test_the_end_of_a_background_run_removes_its_run_record(services, dynamodb):
    store = services.responses
    queued(store)
    store.take(TENANT, "resp_bg", "token-1", "a", time.time() + 60)
    store.save(TENANT, response("resp_bg", status="completed", background=True), [], "a")
    assert store.get(TENANT, "resp_bg").status == "completed"
    assert store.run(TENANT, "resp_bg") is None
    assert keys.RUN not in items_under(dynamodb, "resp_bg", keys.RUN)


def test_cancel_stops_a_queued_response_for_good_and_marks_a_running_one(services):
    store = services.responses
    queued(store, "resp_q")
    assert store.cancel(TENANT, "resp_q").status == "cancelled"
    assert store.run(TENANT, "resp_q") is None  # its message finds nothing to run
    queued(store, "resp_r")
    store.take(TENANT, "resp_r", "token-1", "a", time.time() + 60)
    assert store.cancel(TENANT, "resp_r").status == "cancelled"
    assert store.status(TENANT, "resp_r") == "cancelled"
    assert store.run(TENANT, "resp_r").owner == "a"  # its worker writes what it produced
    assert store.cancel(TENANT, "resp_r").status == "cancelled"  # again: nothing changes


def test_cancel_answers_a_finished_response_as_it_is_and_refuses_a_foreground_one(services):
    store = services.responses
    queued(store, "resp_done")
    store.take(TENANT, "resp_done", "token-1", "a", time.time() + 60)
    store.save(TENANT, response("resp_done", status="completed", background=True), [], "a")
    assert store.cancel(TENANT, "resp_done").status == "completed"
    store.save(TENANT, response("resp_fg", status="completed"), [])
    with pytest.raises(InvalidRequest, match="background"):
        store.cancel(TENANT, "resp_fg")
    with pytest.raises(NotFound):
        store.cancel("other-tenant", "resp_done")


def test_a_background_response_with_store_false_is_readable_for_a_while_and_never_listed(
    services, dynamodb
):
    store = services.responses
    queued(store, "resp_unstored", store=False)
    store.take(TENANT, "resp_unstored", "token-1", "a", time.time() + 60)
    ended = response("resp_unstored", status="completed", background=True, store=False)
    store.save(TENANT, ended, [{"role": "user", "content": "Hi"}], "a")
    assert store.get(TENANT, "resp_unstored").status == "completed"
    assert store.list(TENANT, after=None, limit=10, model=None, descending=True)[0] == []
    assert items_under(dynamodb, "resp_unstored", keys.CONTEXT) == []
    head = dynamodb.get_item(
        TableName=TABLE,
        Key={"PK": {"S": keys.response_pk(TENANT, "resp_unstored")}, "SK": {"S": keys.RESPONSE}},
    )["Item"]
    assert int(head["expires_at"]["N"]) > time.time()
    with pytest.raises(NotFound):
        store.context(TENANT, "resp_unstored")


def test_a_runs_end_does_not_pass_a_cancel_that_landed_after_its_last_look(services):
    store = services.responses
    queued(store, "resp_c")
    store.take(TENANT, "resp_c", "token-1", "a", time.time() + 60)
    assert store.cancel(TENANT, "resp_c").status == "cancelled"  # what the canceller was told
    with pytest.raises(CancelledMeanwhile):
        store.save(TENANT, response("resp_c", status="completed", background=True), [], "a")
    assert store.get(TENANT, "resp_c").status == "cancelled"
    assert store.run(TENANT, "resp_c").owner == "a"  # nothing of that end was written
    store.save(TENANT, response("resp_c", status="cancelled", background=True), [], "a")
    assert store.get(TENANT, "resp_c").status == "cancelled"
    assert store.run(TENANT, "resp_c") is None


class CancelRightAfterLook:
    """The response store, with a cancel landing just after each status read that missed one:
    between a run's last look and the write of its end."""

    def __init__(self, store) -> None:
        self.store = store

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def status(self, tenant: str, response_id: str) -> str | None:
        seen = self.store.status(tenant, response_id)
        if seen != "cancelled":
            self.store.cancel(tenant, response_id)
        return seen


def test_cancel_racing_a_runs_completion_leaves_the_answer_the_canceller_got(services):
    store = services.responses
    queued(store, "resp_race")
    store.take(TENANT, "resp_race", "token-1", "a", time.time() + 60)
    control = StoredRunControl(services, TENANT, "resp_race", "a", time.time() + 60)
    control.store = CancelRightAfterLook(store)
    ended = response("resp_race", status="completed", background=True)
    asyncio.run(control.save(ended, [], None))
    assert ended.status == "cancelled"  # what the run's stream ends with
    assert store.get(TENANT, "resp_race").status == "cancelled"
    assert store.run(TENANT, "resp_race") is None
