"""The session lock: one turn at a time per session.

The session item carries the lock: `active_turn`, `active_state` (running | awaiting_input) and,
while running, `lease_until` (and `active_body`, the running turn itself when it is small: a
turn then starts with a single write). Every state change is a conditional write, and each end
of a turn (pause, completion, failure) writes the turn and releases or hands over the lock in
one transaction, so a reader never sees a finished turn on a busy session or the reverse.

A running turn renews its lease while it runs (`extend_lease`); a turn whose Lambda died holds
its session only until the lease runs out, and the next turn marks it failed.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ..api.agents import Step, Turn
from ..domain import AWAITING_INPUT, FAILED, RUNNING, PausedTurn, TurnState
from ..errors import Conflict, NotFound
from . import keys
from .items import json_body
from .sessions import session_expiry, session_gone
from .table import Table, condition_failed, key
from .turn_items import RUNNING_ON_SESSION_BYTES, HeldSession, step_items, turn_items


class SessionLocks:
    """Taking, renewing and releasing a session for a turn (part of TurnStore)."""

    _t: Table
    lease_seconds: int

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

    def lock_for_resume(self, paused: PausedTurn, agent_id: str, step: Step | None) -> HeldSession:
        """Take the session back for a turn awaiting input, in one transaction: the session and
        the turn move to running, and `step` (the tool results; none for a turn parked for
        time) is written, after the steps the paused turn's item kept: the resumed run's
        steps are items of their own, and so must be every step before them."""
        now = int(time.time())
        turn_id = paused.turn.turn_id
        lock = HeldSession(
            paused.tenant,
            paused.turn.session_id,
            turn_id,
            previous_turn=paused.last_turn,
            expires_at=paused.expires_at,
            kept_steps=paused.steps_in_item,
        )
        turn = paused.turn
        kept = turn.steps[len(turn.steps) - paused.steps_in_item :]
        written = [step_items(lock, one) for one in [*kept, *([step] if step is not None else [])]]
        heads = [items[0] for items in written]
        parts = [part for items in written for part in items[1:]]
        # A kept step's parts are the same whichever resume writes them; only the parts of
        # this resume's own step would be left over if the session is not taken back.
        own_parts = written[-1][1:] if step is not None else []
        if parts:
            self._t.put_all(parts)
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
                            # Counted apart: a turn whose Lambda dies now reads its steps.
                            "UpdateExpression": "SET turn_status = :run, steps_apart = :n",
                            "ConditionExpression": "turn_status = :wait",
                            "ExpressionAttributeValues": {
                                ":run": {"S": RUNNING},
                                ":wait": {"S": AWAITING_INPUT},
                                ":n": {"N": str(len(turn.steps) + (step is not None))},
                            },
                        }
                    },
                    *({"Put": {"TableName": self._t.name, "Item": head}} for head in heads),
                ]
            )
        except ClientError as err:
            if own_parts:  # parts of a step that was never written
                self._t.delete_all([key(lock.pk, part["SK"]["S"]) for part in own_parts])
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
            head = turn_items(lock, turn, state, None)[0]
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
