"""A session's turns and steps as read back: one turn with its steps, a paused turn for its
resume, and the history of the finished turns (remembered by a warm container)."""

from __future__ import annotations

from typing import Any

from .. import json_text
from ..api.agents import Step, Turn
from ..domain import AWAITING_INPUT, COMPLETED, FINISHED, RUNNING, PausedTurn, TurnState
from ..errors import NotFound
from . import keys
from .history_cache import History, HistoryCache
from .items import PACKED, decode
from .sessions import (
    read_session_head,
    running_on_session,
    session_expiry,
    session_gone,
    step_adapter,
    steps_apart,
    stored_steps,
    turn_of_item,
)
from .table import Table
from .turn_items import HeldSession, state_from_json


class TurnReads:
    """Reads of turns, steps and history (part of TurnStore)."""

    _t: Table
    _histories: HistoryCache

    def read_paused(self, tenant: str, agent_id: str, session_id: str, turn_id: str) -> PausedTurn:
        """A turn as read for its resume: its session and the turn in one request, and the
        turn's step items in a second only when it has some (a turn that paused on its first
        reply keeps that reply in its own item)."""
        pk = keys.session_pk(tenant, session_id)
        session, stored = self._session_and_turn(tenant, agent_id, session_id, turn_id)
        turn, state, in_item = self._turn_state(pk, session, turn_id, stored)
        return PausedTurn(
            tenant,
            turn,
            state,
            last_turn=session.get("last_turn", {}).get("S"),
            expires_at=session_expiry(session),
            steps_in_item=in_item if state.status == AWAITING_INPUT else 0,
        )

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
                "ProjectionExpression": (
                    f"SK, turn_status, history, {PACKED}, parts, shared_texts, chunk"
                ),
                "ConsistentRead": True,
            }
        )
        for head, attrs in decode(items):
            status = head.get("turn_status", {}).get("S")
            if status not in FINISHED:
                break  # the turn being run now
            if status == COMPLETED and "history" in attrs:
                messages.extend(json_text.loads(attrs["history"]))
                size += len(attrs["history"])
            after = head["SK"]["S"]
        if after:
            self._histories.put(pk, History(after, messages, size))
        return list(messages)

    def remember_finished(
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
        pk = keys.session_pk(tenant, session_id)
        return self._turn_state(pk, session, turn_id, stored)[:2]

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
    ) -> tuple[Turn, TurnState, int]:
        """The turn from what was read of it: its item (None while it runs on the session
        item), with its step items, read when it has some; and how many of its steps its item
        keeps inside."""
        running = running_on_session(session)
        if running is not None and running.turn_id == turn_id:
            running.steps = self._steps(pk, turn_id)
            return running, TurnState(RUNNING), 0
        if stored is None:
            raise NotFound(f"Turn {turn_id} not found")
        head, attrs = stored
        turn = turn_of_item(head, attrs)
        inside = len(turn.steps)
        if steps_apart(head):
            turn.steps = stored_steps(head, self._steps(pk, turn_id), turn.steps)
        state = state_from_json(head["turn_status"]["S"], attrs["state"], attrs.get("trace"))
        return turn, state, inside

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
