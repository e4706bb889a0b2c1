"""A session's turns and steps, over one table: the session lock that keeps one turn at a
time (`SessionLocks`, session_lock.py), the writes of a running turn (here), and the reads
(`TurnReads`, turn_reads.py). How a turn lies in items: turn_items.py.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .. import json_text
from ..api.agents import Step, Turn
from ..domain import AWAITING_INPUT, FINISHED, TurnState
from ..errors import Conflict
from . import keys
from .history_cache import HistoryCache
from .session_lock import SessionLocks
from .table import Table, key
from .turn_items import (
    MAX_REMOVED_WITH_END,
    HeldSession,
    RunningRecord,
    step_items,
    turn_items,
)
from .turn_reads import TurnReads

__all__ = ["HeldSession", "RunningRecord", "TurnStore"]


class TurnStore(SessionLocks, TurnReads):
    """Turns and steps of every session: each end of a turn (pause, completion, failure)
    writes the turn and releases or hands over the lock in one transaction, so a reader never
    sees a finished turn on a busy session or the reverse."""

    def __init__(self, client: Any, table_name: str, *, lease_seconds: int = 60) -> None:
        self._t = Table(client, table_name)
        self.lease_seconds = lease_seconds
        self._histories = HistoryCache()

    def running_record(self, lock: HeldSession, turn: Turn, state: TurnState) -> RunningRecord:
        """The turn as it starts, encoded now: text that cannot be stored is refused before
        anything runs."""
        return RunningRecord(turn_items(lock, turn, state, history=None))

    def put_running(self, record: RunningRecord) -> None:
        """Record the running turn, so a client that lost the stream can fetch it. The head is
        written only if the turn's end is not there yet, so the end need not wait for it."""
        head, *parts = record.items
        if parts:
            self._t.put_all(parts)
        self._t.put_if(head, "attribute_not_exists(turn_status)")

    def save_step(self, lock: HeldSession, step: Step) -> None:
        self._t.put_all(step_items(lock, step))

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
        history_json = json_text.dumps_str(history) if history is not None else None
        head, *parts = turn_items(lock, turn, state, history_json, steps)
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
            self.remember_finished(lock, history, len(history_json or ""))

    def revert(self, lock: HeldSession, turn: Turn, state: TurnState, step_ids: list[str]) -> None:
        """Put a resumed turn back as it was when paused: remove the steps written since, then
        write the paused turn, the steps its item kept inside it again, and park the lock
        (awaiting input) again. The items the resume made of the kept steps stay: a racing
        resume may be writing the same ones (their parts first), and a paused turn's reads
        take only its first `steps_apart` step items."""
        prefix = keys.steps_prefix(turn.turn_id)
        kept = tuple(turn.steps[len(turn.steps) - lock.kept_steps :])
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
        self.end_turn(lock, turn, state, steps=kept, removing=doomed)
