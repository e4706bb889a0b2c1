"""Turns and steps, and the session lock that keeps one turn at a time per session.

The session item carries the lock: `active_turn`, `active_state` (running | awaiting_input) and,
while running, `lease_until` (and `active_body`, the running turn itself when it is small: a
turn then starts with a single write). Every state change is a conditional write, and each end
of a turn (pause, completion, failure) writes the turn and releases or hands over the lock in
one transaction, so a reader never sees a finished turn on a busy session or the reverse.

A running turn renews its lease while it runs (`extend_lease`); a turn whose Lambda died holds
its session only until the lease runs out, and the next turn marks it failed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from botocore.exceptions import ClientError
from pydantic import TypeAdapter

from ..api.agents import Step, Turn
from ..api.common import ToolCall
from ..domain import (
    AWAITING_INPUT,
    COMPLETED,
    FAILED,
    FINISHED,
    RUNNING,
    PausedTurn,
    SessionLock,
    TurnState,
)
from ..errors import Conflict, NotFound
from . import keys
from .history_cache import History, HistoryCache
from .items import decode, encode, json_body
from .sessions import (
    read_session_head,
    running_on_session,
    session_expiry,
    session_gone,
    step_adapter,
    steps_apart,
    stored_turn_parts,
    turn_of_item,
)
from .table import Table, condition_failed, in_parallel, key

#: A running turn up to this size is recorded on the session item, with the lock, instead of
#: by a write of its own: one request fewer per turn, for about the same write units (billed
#: per kilobyte of the item written).
RUNNING_ON_SESSION_BYTES = 2048

#: Items a revert deletes in the transaction that ends the turn (DynamoDB takes 100 actions).
MAX_REMOVED_WITH_END = 98


@cache
def _calls_adapter() -> TypeAdapter:
    """Built on first use, not at import (cold starts import this module)."""
    return TypeAdapter(list[ToolCall])


def state_json(state: TurnState) -> str:
    """The turn item's `state` attribute; `status` is stored apart, as `turn_status`, which
    conditions read."""
    return json.dumps(
        {
            "iterations": state.iterations,
            "tool_calls": state.tool_calls,
            "pending_calls": _calls_adapter().dump_python(state.pending_calls, mode="json"),
            "error": state.error,
            "resume_token_hash": state.resume_token_hash,
        }
    )


def state_from_json(status: str, text: str) -> TurnState:
    data = json.loads(text)
    return TurnState(
        status=status,
        iterations=data["iterations"],
        tool_calls=data.get("tool_calls", 0),  # not in turns stored before it was counted
        pending_calls=_calls_adapter().validate_python(data["pending_calls"]),
        error=data.get("error"),
        resume_token_hash=data.get("resume_token_hash"),
    )


@dataclass
class RunningRecord:
    """A running turn's items. In parts (an input over DynamoDB's item limit), it must land
    before the turn's end is written, whose parts have the same keys."""

    items: list[dict[str, Any]]

    @property
    def in_parts(self) -> bool:
        return len(self.items) > 1


@dataclass
class HeldSession(SessionLock):
    """The lock as the store keeps it. `recorded`: the running turn travels on the session item;
    else `running_write` (the engine storage's task writing its own item) may still be under way."""

    recorded: bool = False
    running_write: Any = None
    running_in_parts: bool = False

    @property
    def pk(self) -> str:
        return keys.session_pk(self.tenant, self.session_id)

    def extra(self) -> dict[str, Any]:
        """The session's TTL, copied onto every item of the turn."""
        return {"expires_at": {"N": str(self.expires_at)}} if self.expires_at else {}


class TurnStore:
    def __init__(self, client: Any, table_name: str, *, lease_seconds: int = 60) -> None:
        self._t = Table(client, table_name)
        self.lease_seconds = lease_seconds
        self._histories = HistoryCache()

    # --- the lock --------------------------------------------------------------------------

    def lock_session(self, tenant: str, agent_id: str, turn: Turn) -> HeldSession:
        """Take the session for a new turn: free, or held by a turn whose lease ran out.

        `turn`, the turn as it starts, travels with the lock when it is small (the common case):
        the running turn is then recorded on the session item, with no write of its own
        (`HeldSession.recorded`). A larger one is left to `put_running`."""
        session_id, turn_id = turn.session_id, turn.turn_id
        now = int(time.time())
        body = json_body(turn)  # text that cannot be stored is refused before any write
        recorded = len(body) <= RUNNING_ON_SESSION_BYTES
        values = {
            ":t": {"S": turn_id},
            ":a": {"S": agent_id},
            ":run": {"S": RUNNING},
            ":now": {"N": str(now)},
            ":lease": {"N": str(now + self.lease_seconds)},
        }
        update = "SET active_turn = :t, active_state = :run, lease_until = :lease"
        if recorded:
            update += ", active_body = :body"
            values[":body"] = {"S": body}
        else:  # a dead turn's, if any
            update += " REMOVE active_body"
        try:
            resp = self._t.client.update_item(
                TableName=self._t.name,
                Key=key(keys.session_pk(tenant, session_id), keys.SESSION),
                UpdateExpression=update,
                ConditionExpression=(
                    "agent_id = :a AND attribute_not_exists(deleting) AND "
                    "(attribute_not_exists(expires_at) OR expires_at > :now) AND "
                    "(attribute_not_exists(active_turn) OR "
                    "(active_state = :run AND lease_until < :now))"
                ),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            self._refuse(err.response.get("Item"), agent_id, session_id)
        old = resp.get("Attributes", {})
        lock = HeldSession(
            tenant,
            session_id,
            turn_id,
            previous_turn=old.get("last_turn", {}).get("S"),
            expires_at=session_expiry(old),
            recorded=recorded,
        )
        if "active_turn" in old:  # took over from a turn whose Lambda died
            self._mark_abandoned(lock, old)
        return lock

    def read_paused(self, tenant: str, agent_id: str, session_id: str, turn_id: str) -> PausedTurn:
        """A turn as read for its resume: its session, the turn and its steps, in one round
        trip (a paused turn always has steps of its own)."""
        pk = keys.session_pk(tenant, session_id)
        (session, stored), steps = in_parallel(
            lambda: self._session_and_turn(tenant, agent_id, session_id, turn_id),
            lambda: self._steps(pk, turn_id),
        )
        turn, state = self._turn_state(pk, session, turn_id, stored, steps)
        return PausedTurn(
            tenant,
            turn,
            state,
            last_turn=session.get("last_turn", {}).get("S"),
            expires_at=session_expiry(session),
        )

    def lock_for_resume(self, paused: PausedTurn, agent_id: str, step: Step | None) -> HeldSession:
        """Take the session back for a turn awaiting input, in one transaction: the session and
        the turn move to running, and `step` (the tool results; none for a turn parked for
        time) is written."""
        now = int(time.time())
        turn_id = paused.turn.turn_id
        lock = HeldSession(
            paused.tenant,
            paused.turn.session_id,
            turn_id,
            previous_turn=paused.last_turn,
            expires_at=paused.expires_at,
        )
        step_head, *step_parts = self._step_items(lock, step) if step is not None else [None]
        if step_parts:
            self._t.put_all(step_parts)
        try:
            self._t.transact(
                [
                    {
                        "Update": {
                            "TableName": self._t.name,
                            "Key": key(lock.pk, keys.SESSION),
                            "UpdateExpression": "SET active_state = :run, lease_until = :lease",
                            "ConditionExpression": (
                                "agent_id = :a AND active_turn = :t AND active_state = :wait"
                                " AND attribute_not_exists(deleting)"
                            ),
                            "ExpressionAttributeValues": {
                                ":a": {"S": agent_id},
                                ":t": {"S": turn_id},
                                ":run": {"S": RUNNING},
                                ":wait": {"S": AWAITING_INPUT},
                                ":lease": {"N": str(now + self.lease_seconds)},
                            },
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self._t.name,
                            "Key": key(lock.pk, keys.turn_sk(turn_id)),
                            "UpdateExpression": "SET turn_status = :run",
                            "ConditionExpression": "turn_status = :wait",
                            "ExpressionAttributeValues": {
                                ":run": {"S": RUNNING},
                                ":wait": {"S": AWAITING_INPUT},
                            },
                        }
                    },
                ]
                + ([{"Put": {"TableName": self._t.name, "Item": step_head}}] if step_head else [])
            )
        except ClientError as err:
            if step_parts:  # parts of a step that was never written
                self._t.delete_all([key(lock.pk, part["SK"]["S"]) for part in step_parts])
            if err.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            # Only a judged condition says the session is gone; a transaction still meeting
            # another in flight (a racing resume) is a 409, never a 404.
            session = (err.response.get("CancellationReasons") or [{}])[0]
            judged = session.get("Code") == "ConditionalCheckFailed"
            if judged and session_gone(session.get("Item"), agent_id):
                raise NotFound(f"Session {lock.session_id} not found") from err
            raise Conflict(f"Turn {turn_id} is not awaiting input") from err
        return lock

    def extend_lease(self, lock: HeldSession) -> bool:
        """Renew a running turn's lease; False when the turn no longer holds its session."""
        return self._t.update_if(
            key(lock.pk, keys.SESSION),
            "SET lease_until = :lease",
            "active_turn = :t AND active_state = :run",
            {
                ":t": {"S": lock.turn_id},
                ":run": {"S": RUNNING},
                ":lease": {"N": str(int(time.time()) + self.lease_seconds)},
            },
        )

    def release(self, lock: HeldSession) -> None:
        """Free the session of a turn that could not start (nothing of it was written)."""
        self._t.update_if(
            key(lock.pk, keys.SESSION),
            "REMOVE active_turn, active_state, lease_until, active_body",
            "active_turn = :t",
            {":t": {"S": lock.turn_id}},
        )

    def _refuse(self, session: dict[str, Any] | None, agent_id: str, session_id: str) -> None:
        if session_gone(session, agent_id):
            raise NotFound(f"Session {session_id} not found")
        turn = session.get("active_turn", {}).get("S")
        if session.get("active_state", {}).get("S") == AWAITING_INPUT:
            raise Conflict(
                f"Session {session_id} has turn {turn} awaiting tool responses; resume it first"
            )
        raise Conflict(f"Session {session_id} is busy with turn {turn}")

    def _mark_abandoned(self, lock: HeldSession, old_session: dict[str, Any]) -> None:
        """Record a turn whose Lambda died as failed: from the session item, if it ran there."""
        if "active_body" in old_session:
            turn = Turn.model_validate_json(old_session["active_body"]["S"])
            turn.completed_at = datetime.now(UTC)
            state = TurnState(FAILED, error="the turn stopped before it ended")
            head = self._turn_items(lock, turn, state, None)[0]
            self._t.put_if(head, "attribute_not_exists(SK)")
        else:
            self._t.update_if(
                key(lock.pk, keys.turn_sk(old_session["active_turn"]["S"])),
                "SET turn_status = :failed, ended_at = :now",
                "turn_status = :run",
                {
                    ":failed": {"S": FAILED},
                    ":run": {"S": RUNNING},
                    ":now": {"N": str(int(time.time()))},
                },
            )

    # --- writes during a turn ----------------------------------------------------------------

    def running_record(self, lock: HeldSession, turn: Turn, state: TurnState) -> RunningRecord:
        """The turn as it starts, encoded now: text that cannot be stored is refused before
        anything runs."""
        return RunningRecord(self._turn_items(lock, turn, state, history=None))

    def put_running(self, record: RunningRecord) -> None:
        """Record the running turn, so a client that lost the stream can fetch it. The head is
        written only if the turn's end is not there yet, so the end need not wait for it."""
        head, *parts = record.items
        if parts:
            self._t.put_all(parts)
        self._t.put_if(head, "attribute_not_exists(turn_status)")

    def save_step(self, lock: HeldSession, step: Step) -> None:
        self._t.put_all(self._step_items(lock, step))

    def _step_items(self, lock: HeldSession, step: Step) -> list[dict[str, Any]]:
        sk = keys.step_sk(step.turn_id, step.step_id)
        return encode(key(lock.pk, sk), {"body": json_body(step)}, lock.extra())

    def end_turn(
        self,
        lock: HeldSession,
        turn: Turn,
        state: TurnState,
        history: list[dict[str, Any]] | None = None,
        steps: tuple[Step, ...] = (),
        removing: list[dict[str, Any]] | None = None,
    ) -> None:
        """Write the turn's final (or paused) state and release (or park) the lock, in one
        transaction (parts of an oversized turn go first). `steps`, the last of the turn's steps
        and not yet written, are kept inside the turn item: a simple turn is one item.
        `removing`: keys of items deleted in the same transaction (a revert's steps)."""
        history_json = json.dumps(history) if history is not None else None
        head, *parts = self._turn_items(lock, turn, state, history_json, steps)
        if parts:
            self._t.put_all(parts)
        if state.status == AWAITING_INPUT:
            session_update = {
                "UpdateExpression": "SET active_state = :wait REMOVE lease_until, active_body",
                "ExpressionAttributeValues": {
                    ":t": {"S": lock.turn_id},
                    ":wait": {"S": AWAITING_INPUT},
                },
            }
        else:
            session_update = {
                "UpdateExpression": (
                    "SET last_turn = :t REMOVE active_turn, active_state, lease_until, active_body"
                ),
                "ExpressionAttributeValues": {":t": {"S": lock.turn_id}},
            }
        try:
            self._t.transact(
                [
                    {"Put": {"TableName": self._t.name, "Item": head}},
                    {
                        "Update": {
                            "TableName": self._t.name,
                            "Key": key(lock.pk, keys.SESSION),
                            "ConditionExpression": "active_turn = :t",
                            **session_update,
                        }
                    },
                    *({"Delete": {"TableName": self._t.name, "Key": k}} for k in removing or ()),
                ]
            )
        except ClientError as err:
            if err.response["Error"]["Code"] == "TransactionCanceledException":
                raise Conflict(
                    f"Turn {lock.turn_id} lost its session (its lease ran out and another turn"
                    " took it); its result was not stored"
                ) from err
            raise
        if state.status in FINISHED:
            self._remember_finished(lock, history, len(history_json or ""))

    def revert(self, lock: HeldSession, turn: Turn, state: TurnState, step_ids: list[str]) -> None:
        """Put a resumed turn back as it was when paused: remove the steps written since, then
        write the paused turn and park the lock (awaiting input) again."""
        prefix = keys.steps_prefix(turn.turn_id)
        written = {keys.step_sk(turn.turn_id, step_id) for step_id in step_ids}
        steps = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
                "ExpressionAttributeValues": {":pk": {"S": lock.pk}, ":s": {"S": prefix}},
                "ProjectionExpression": "SK",
            }
        )
        doomed = [
            key(lock.pk, i["SK"]["S"])
            for i in steps
            if keys.record_of_part(i["SK"]["S"]) in written
        ]
        # The deletes go with the turn's end, so a refused end (the turn lost its session)
        # removes nothing; beyond what one transaction takes, the oldest go first.
        overflow = len(doomed) - MAX_REMOVED_WITH_END
        if overflow > 0:
            self._t.delete_all(doomed[:overflow])
            doomed = doomed[overflow:]
        self.end_turn(lock, turn, state, removing=doomed)

    def _turn_items(
        self,
        lock: HeldSession,
        turn: Turn,
        state: TurnState,
        history: str | None,
        steps: tuple[Step, ...] | None = None,
    ) -> list[dict[str, Any]]:
        """`steps`: those kept inside the turn item, the others being items of their own; None
        for a running turn, whose steps are all items of their own as they complete."""
        inside = list(steps or ())
        stored, how = stored_turn_parts(turn, inside)
        attrs = {"body": json_body(stored), "state": state_json(state)}
        if history is not None:
            attrs["history"] = history
        extra = {"turn_status": {"S": state.status}, **how, **lock.extra()}
        if steps is not None:
            extra["steps_apart"] = {"N": str(len(turn.steps) - len(inside))}
        return encode(key(lock.pk, keys.turn_sk(turn.turn_id)), attrs, extra)

    # --- reads -------------------------------------------------------------------------------

    def remembered_history(
        self, tenant: str, session_id: str, last_turn: str | None
    ) -> list[dict[str, Any]] | None:
        """`history` when it needs no read (a session with no finished turn, or one this
        container remembers up to `last_turn`), else None."""
        if last_turn is None:
            return []
        remembered = self._histories.get(keys.session_pk(tenant, session_id))
        if remembered is None or remembered.after != keys.turn_sk(last_turn):
            return None
        return list(remembered.messages)

    def history(self, tenant: str, session_id: str, last_turn: str | None) -> list[dict[str, Any]]:
        """The messages of the session's completed turns, oldest first. `last_turn` is the
        session's last finished turn as its lock saw it: None means there is none, and nothing
        is read. Read under the lock, so no turn finishes meanwhile.

        One query over turn items, stopping at the first unfinished one (the turn being run). A
        warm container remembers what it read or wrote of a session (`HistoryCache`): it asks
        only for later turns, and for none when its memory reaches `last_turn`."""
        remembered = self.remembered_history(tenant, session_id, last_turn)
        if remembered is not None:
            return remembered
        pk = keys.session_pk(tenant, session_id)
        known = self._histories.get(pk) or History("", [], 0)
        after, messages, size = known.after, list(known.messages), known.size
        if after:
            condition = "PK = :pk AND SK > :t"
            start = keys.after_turn(after)
        else:
            condition, start = "PK = :pk AND begins_with(SK, :t)", keys.TURN_PREFIX
        items = self._t.query_all(
            {
                "KeyConditionExpression": condition,
                "ExpressionAttributeValues": {":pk": {"S": pk}, ":t": {"S": start}},
                "ProjectionExpression": "SK, turn_status, history, parts, shared_texts, chunk",
                "ConsistentRead": True,
            }
        )
        for head, attrs in decode(items):
            status = head.get("turn_status", {}).get("S")
            if status not in FINISHED:
                break  # the turn being run now
            if status == COMPLETED and "history" in attrs:
                messages.extend(json.loads(attrs["history"]))
                size += len(attrs["history"])
            after = head["SK"]["S"]
        if after:
            self._histories.put(pk, History(after, messages, size))
        return list(messages)

    def _remember_finished(
        self, lock: HeldSession, history: list[dict[str, Any]] | None, size: int
    ) -> None:
        """Extend the remembered history with a turn this container just finished (a failed
        one adds no messages), when what it remembered was current as the turn took the lock:
        no other turn can have finished since."""
        known = self._histories.get(lock.pk)
        if lock.previous_turn is None:
            known = History("", [], 0)
        elif known is None or known.after != keys.turn_sk(lock.previous_turn):
            return
        self._histories.put(
            lock.pk,
            History(
                keys.turn_sk(lock.turn_id), known.messages + (history or []), known.size + size
            ),
        )

    def get_turn_state(
        self, tenant: str, agent_id: str, session_id: str, turn_id: str
    ) -> tuple[Turn, TurnState]:
        session, stored = self._session_and_turn(tenant, agent_id, session_id, turn_id)
        return self._turn_state(keys.session_pk(tenant, session_id), session, turn_id, stored)

    def _session_and_turn(
        self, tenant: str, agent_id: str, session_id: str, turn_id: str
    ) -> tuple[dict[str, Any], tuple[dict[str, Any], dict[str, str]] | None]:
        """The session item (checked: 404 if gone) and the turn item, in one request."""
        pk = keys.session_pk(tenant, session_id)
        session, head = self._t.get_many((pk, keys.SESSION), (pk, keys.turn_sk(turn_id)))
        if session_gone(session, agent_id):
            raise NotFound(f"Session {session_id} not found")
        return session, self._read_turn(pk, turn_id, head) if head is not None else None

    def _turn_state(
        self,
        pk: str,
        session: dict[str, Any],
        turn_id: str,
        stored: tuple[dict[str, Any], dict[str, str]] | None,
        steps: list[Step] | None = None,
    ) -> tuple[Turn, TurnState]:
        """The turn from what was read of it: its item (None while it runs on the session
        item), and its step items if they were read already."""
        running = running_on_session(session)
        if running is not None and running.turn_id == turn_id:
            running.steps = steps if steps is not None else self._steps(pk, turn_id)
            return running, TurnState(RUNNING)
        if stored is None:
            raise NotFound(f"Turn {turn_id} not found")
        head, attrs = stored
        turn = turn_of_item(head, attrs)
        if steps_apart(head):
            turn.steps = (steps if steps is not None else self._steps(pk, turn_id)) + turn.steps
        return turn, state_from_json(head["turn_status"]["S"], attrs["state"])

    def get_turn(self, tenant: str, agent_id: str, session_id: str, turn_id: str) -> Turn:
        return self.get_turn_state(tenant, agent_id, session_id, turn_id)[0]

    def get_step(
        self, tenant: str, agent_id: str, session_id: str, turn_id: str, step_id: str
    ) -> Step:
        self.session_head(tenant, agent_id, session_id)
        pk = keys.session_pk(tenant, session_id)
        attrs = self._t.record(pk, keys.step_sk(turn_id, step_id))
        if attrs is not None:
            return step_adapter().validate_json(attrs["body"])
        stored = self._read_turn(pk, turn_id)  # the turn's last step lives inside the turn item
        if stored is not None:
            for step in turn_of_item(*stored).steps:
                if step.step_id == step_id:
                    return step
        raise NotFound(f"Step {step_id} not found in turn {turn_id}")

    def session_head(self, tenant: str, agent_id: str, session_id: str) -> dict[str, Any]:
        return read_session_head(self._t, tenant, agent_id, session_id)

    def _read_turn(
        self, pk: str, turn_id: str, head: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, str]] | None:
        """The turn item (head, JSON attributes), or None; `head` if it was read already."""
        sk = keys.turn_sk(turn_id)
        head = head or self._t.get(pk, sk)
        if head is None:
            return None
        if "parts" not in head:
            return next(decode([head]))
        items = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
                "ExpressionAttributeValues": {":pk": {"S": pk}, ":s": {"S": keys.parts_prefix(sk)}},
                "ConsistentRead": True,
            }
        )
        return next(decode([head, *items]))

    def _steps(self, pk: str, turn_id: str) -> list[Step]:
        items = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": pk},
                    ":s": {"S": keys.steps_prefix(turn_id)},
                },
                "ConsistentRead": True,
            }
        )
        return [step_adapter().validate_json(attrs["body"]) for _, attrs in decode(items)]
