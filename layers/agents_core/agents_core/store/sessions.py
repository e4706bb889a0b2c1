"""Reading session items: whether a session is there for a caller, the running turn it may carry,
a turn item as a Turn, and a session read a page of turns at a time. Shared by the agent store
and the turn store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from ..api.agents import InferenceStep, Session, Step, Turn
from ..api.common import CompletionMessage, StopReason, deferred_adapter
from ..domain import AWAITING_INPUT, FINISHED, RUNNING
from ..errors import NotFound
from . import keys
from .history_cache import History, HistoryCache
from .items import PACKED, decode, parse_body
from .table import Table, expired, in_parallel

#: Head attribute of a turn item whose `output_message` is its last step's `model_response`
#: (the answer): the body then stores the answer once, in the step, and a placeholder here.
OUTPUT_IS_ANSWER = "output_is_answer"
_PLACEHOLDER_OUTPUT = CompletionMessage(content="", stop_reason=StopReason.end_of_turn)

#: What a session read asks of a turn item: not its `state` or `history` (the model's view).
#: Fewer attributes are less for DynamoDB to send and botocore to parse.
_TURN_PROJECTION = (
    f"SK, body, {PACKED}, turn_status, steps_apart, ended_at, {OUTPUT_IS_ANSWER}, parts,"
    " shared_texts, chunk"
)


@deferred_adapter
def step_adapter() -> TypeAdapter:
    return TypeAdapter(Step)


def read_session_head(table: Table, tenant: str, agent_id: str, session_id: str) -> dict[str, Any]:
    """The session item, if it exists, belongs to `agent_id` and has not expired."""
    item = table.get(keys.session_pk(tenant, session_id), keys.SESSION)
    if session_gone(item, agent_id):
        raise NotFound(f"Session {session_id} not found")
    return item


def session_gone(session: dict[str, Any] | None, agent_id: str) -> bool:
    """Missing, another agent's, expired, or being deleted: not found, to every caller."""
    return (
        session is None
        or session["agent_id"]["S"] != agent_id
        or expired(session)
        or "deleting" in session
    )


def session_expiry(session: dict[str, Any]) -> int | None:
    return int(session["expires_at"]["N"]) if "expires_at" in session else None


def running_on_session(session: dict[str, Any]) -> Turn | None:
    """The running turn recorded on the session item, if any (see `TurnStore.lock_session`)."""
    if "active_body" not in session:
        return None
    return Turn.model_validate_json(session["active_body"]["S"])


def as_ended(turn: Turn, head: dict[str, Any]) -> Turn:
    """A turn whose Lambda died while it ran (or ran again, resumed), as the turn that took its
    session recorded it (`ended_at`): ended then, with no answer, like any failed turn. Its
    item may still hold the paused turn's calls, which nobody can answer any more."""
    if "ended_at" in head and turn.completed_at is None:
        turn.completed_at = datetime.fromtimestamp(int(head["ended_at"]["N"]), UTC)
        turn.output_message = CompletionMessage(content="", stop_reason=StopReason.end_of_message)
    return turn


def stored_turn_parts(turn: Turn, inside: list[Step]) -> tuple[Turn, dict[str, Any]]:
    """The turn as its item's body keeps it (with the steps `inside` it), and the head
    attributes that say how to read it back: an answer is stored once, in its step."""
    last = inside[-1] if inside else None
    if isinstance(last, InferenceStep) and last.model_response == turn.output_message:
        body = turn.model_copy(update={"steps": inside, "output_message": _PLACEHOLDER_OUTPUT})
        return body, {OUTPUT_IS_ANSWER: {"BOOL": True}}
    return turn.model_copy(update={"steps": inside}), {}


def turn_of_item(head: dict[str, Any], attrs: dict[str, str]) -> Turn:
    """A turn item as the Turn it stores (with the steps kept inside it), as readers see it."""
    turn = Turn.model_validate_json(attrs["body"])
    if OUTPUT_IS_ANSWER in head and turn.steps:
        turn.output_message = turn.steps[-1].model_response
    return as_ended(turn, head)


@dataclass
class SessionPage:
    """A session with some of its turns, oldest first; `has_more`: later turns were left out
    (read them with `starting_after` = the last turn here)."""

    session: Session
    has_more: bool = False


@dataclass
class _Page:
    """Turns read for a page: (turn, its stored size) pairs, and whether more were left."""

    turns: list[tuple[Turn, int]]
    has_more: bool
    #: Finished turns read in order from where the memory of the session ended (or from its
    #: start): what the memory may be extended with.
    finished: list[tuple[Turn, int]]


def read_session(
    table: Table,
    tenant: str,
    agent_id: str,
    session_id: str,
    *,
    turn_ids: list[str] | None = None,
    starting_after: str | None = None,
    limit: int | None = None,
    max_bytes: int | None = None,
    memory: HistoryCache | None = None,
) -> SessionPage:
    """The session and its turns after `starting_after`, oldest first: at most `limit` of them,
    and no more than `max_bytes` of stored turn bodies beyond the first (the caller trims the
    answer to its exact size; this bounds what is read).

    One round trip reads the session item and the turn items (DynamoDB pages are read only
    until the page is full); a second reads the step items of the turns that have steps of
    their own, if any do. A finished turn never changes, so `memory` (a warm container's)
    keeps the session's finished turns, up to one of them: the query then asks only for
    later turns."""
    pk = keys.session_pk(tenant, session_id)
    start = keys.turn_sk(starting_after) if starting_after else ""
    wanted = set(turn_ids) if turn_ids else None
    known = memory.get(pk) if memory is not None else None
    remembered: list[tuple[Turn, int]] = []
    if known is not None and start <= known.after:
        remembered = [r for r in known.messages if keys.turn_sk(r[0].turn_id) > start]
        remembered = [r for r in remembered if wanted is None or r[0].turn_id in wanted]
        low = keys.after_turn(known.after)
    else:
        known = None
        low = keys.after_turn(start) if start else keys.TURN_PREFIX
    count = _fit([size for _, size in remembered], limit, max_bytes, 1)
    if count < len(remembered):  # the page ends among the remembered turns
        head = table.get(pk, keys.SESSION)
        page = _Page(remembered[:count], True, [])
    else:
        used = sum(size for _, size in remembered)
        head, page = in_parallel(
            lambda: table.get(pk, keys.SESSION),
            lambda: _read_turns(
                table,
                pk,
                low,
                wanted,
                None if limit is None else limit - count,
                None if max_bytes is None else max_bytes - used,
                first=count == 0,
            ),
        )
        if memory is not None and wanted is None and page.finished:
            before = known.messages if known is not None else []
            if known is not None or not start:  # the memory stays a prefix of the session
                _remember(memory, pk, [*before, *page.finished])
        page.turns = remembered + page.turns
    if session_gone(head, agent_id):
        raise NotFound(f"Session {session_id} not found")
    session = parse_body(Session, head)
    turns = [turn for turn, _ in page.turns]
    has_more = page.has_more
    running = running_on_session(head)  # the newest turn, if it runs on the session item
    if (
        running is not None
        and not has_more
        and (wanted is None or running.turn_id in wanted)
        and (starting_after is None or running.turn_id > starting_after)
    ):
        if limit is not None and len(turns) >= limit:
            has_more = True
        else:
            running.steps = _steps_between(table, pk, running.turn_id, running.turn_id).get(
                running.turn_id, []
            )
            turns.append(running)
    session.turns = turns
    return SessionPage(session, has_more)


def _remember(memory: HistoryCache, pk: str, finished: list[tuple[Turn, int]]) -> None:
    last = finished[-1][0].turn_id
    memory.put(pk, History(keys.turn_sk(last), finished, sum(size for _, size in finished)))


def _read_turns(
    table: Table,
    pk: str,
    low: str,
    wanted: set[str] | None,
    limit: int | None,
    max_bytes: int | None,
    *,
    first: bool,
) -> _Page:
    """The turns from the sort key `low` on that fit the page, with their step items."""
    kwargs: dict[str, Any] = {
        "TableName": table.name,
        "KeyConditionExpression": "PK = :pk AND SK BETWEEN :low AND :high",
        "ExpressionAttributeValues": {
            ":pk": {"S": pk},
            ":low": {"S": low},
            ":high": {"S": keys.TURN_PREFIX + "~"},
        },
        "ProjectionExpression": _TURN_PROJECTION,
        "ConsistentRead": True,
    }
    raw: list[dict[str, Any]] = []
    while True:
        resp = table.client.query(**kwargs)
        raw.extend(resp.get("Items", []))
        records = list(decode(_whole(raw)))
        chosen = [r for r in records if wanted is None or _turn_id(r[0]) in wanted]
        count = _fit([len(attrs["body"]) for _, attrs in chosen], limit, max_bytes, int(first))
        if count < len(chosen) or "LastEvaluatedKey" not in resp:
            break
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
    kept = chosen[:count]
    turns = [(turn_of_item(h, attrs), len(attrs["body"])) for h, attrs in kept]
    apart = [t.turn_id for (t, _), (h, _) in zip(turns, kept, strict=True) if steps_apart(h)]
    if apart:
        steps = _steps_between(table, pk, apart[0], apart[-1])
        for (turn, _), (head, _) in zip(turns, kept, strict=True):
            turn.steps = stored_steps(head, steps.get(turn.turn_id, []), turn.steps)
    finished = []
    for (turn, size), (h, _) in zip(turns, kept, strict=True):
        if h.get("turn_status", {}).get("S") not in FINISHED:
            break
        finished.append((turn, size))
    return _Page(turns, count < len(chosen), finished)


def _fit(sizes: list[int], limit: int | None, max_bytes: int | None, at_least: int) -> int:
    """How many of the records (of these sizes, in order) a page takes: up to `limit`, and up
    to `max_bytes` in all, but `at_least` whatever their size."""
    total = 0
    for index, size in enumerate(sizes):
        if limit is not None and index >= limit:
            return index
        total += size
        if max_bytes is not None and total > max_bytes and index >= at_least:
            return index
    return len(sizes)


def _whole(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`items` without a last record whose parts the page cut off (the next page has them)."""
    for index in range(len(items) - 1, -1, -1):
        head = items[index]
        if keys.is_part(head["SK"]["S"]):
            continue
        count = int(head["parts"]["N"]) if "parts" in head else 0
        return items if len(items) - index - 1 >= count else items[:index]
    return items


def _turn_id(head: dict[str, Any]) -> str:
    return head["SK"]["S"].removeprefix(keys.TURN_PREFIX)


def steps_apart(turn_head: dict[str, Any]) -> bool:
    """Whether some of a turn's steps are items of their own: always while it runs (a running
    turn's item has no `steps_apart`; nor has a turn stored before it was counted)."""
    if turn_head.get("turn_status", {}).get("S") == RUNNING or "steps_apart" not in turn_head:
        return True
    return int(turn_head["steps_apart"]["N"]) > 0


def stored_steps(head: dict[str, Any], apart: list[Step], inside: list[Step]) -> list[Step]:
    """A turn's steps: its step items (`apart`, in order), then the steps its own item keeps
    (`inside`) that are not items too: a resume stores its paused turn's kept steps as items,
    and the item keeps its copy until the turn's next end rewrites it. A paused turn's are the
    first `steps_apart` items: any later one is a racing resume's, not (yet) the turn's."""
    if head.get("turn_status", {}).get("S") == AWAITING_INPUT and "steps_apart" in head:
        apart = apart[: int(head["steps_apart"]["N"])]
    if not apart or not inside:
        return apart + inside
    stored = {step.step_id for step in apart}
    return apart + [step for step in inside if step.step_id not in stored]


def _steps_between(table: Table, pk: str, first: str, last: str) -> dict[str, list[Step]]:
    """The step items of turns `first` to `last`, by turn id, in order."""
    items = table.query_all(
        {
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :low AND :high",
            "ExpressionAttributeValues": {
                ":pk": {"S": pk},
                ":low": {"S": keys.steps_prefix(first)},
                ":high": {"S": keys.steps_prefix(last) + "~"},
            },
            "ProjectionExpression": "SK, body, parts, shared_texts, chunk",
            "ConsistentRead": True,
        }
    )
    steps: dict[str, list[Step]] = {}
    for head, attrs in decode(items):
        step = step_adapter().validate_json(attrs["body"])
        steps.setdefault(keys.turn_id_of_step(head["SK"]["S"]), []).append(step)
    return steps
