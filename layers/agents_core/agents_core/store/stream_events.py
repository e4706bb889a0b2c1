"""The stored log of a streamed response's or turn's SSE events, so a client can rejoin it.

A stream lives in the partition of what it belongs to (a response's, or its turn's session's),
under sort keys `EVENT#...` (see `keys.event_sk`): deleting the response or the session deletes
its events, and no response, session or turn read reaches them. Each item is one write of the
recorder (a response's last may be a Put in its end's transaction: `StreamEnd`), holding the
frames from its first sequence number on (`frames`: each frame told by what differs from the
one before, as JSON compressed with zlib, see `_pack`; `last_seq`, the highest). A frame too
large for an item is stored as binary parts `{event_sk}#{n:04d}`, each naming the count
(`parts`); the end of the stream is `final` on the last item written, or an item of its own at
`{prefix}~`. Every item expires (`expires_at`) with the stream's retention.
"""

from __future__ import annotations

import json
import time
import zlib
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from ..domain import RUNNING
from . import keys
from .items import deflate
from .schema import TTL_ATTRIBUTE
from .table import Table, expired, key

#: Bytes of frame payload in one item (DynamoDB's limit is 400 KB, names and numbers included).
ITEM_PAYLOAD_BYTES = 350 * 1024
#: Per frame, besides its data and event name: the list wrapping, the sequence number and the
#: escapes of its data in the packed JSON (bounded by the compression that follows).
_FRAME_OVERHEAD = 24


@dataclass(slots=True)
class Frame:
    """One SSE event as sent: `id: {seq}`, `event: {event}` when not None, `data: {data}`. Not
    frozen, though nothing changes one: a frozen dataclass sets each field through
    object.__setattr__, and a long answer makes a frame a delta (2-4 us of 4-7, cold)."""

    seq: int
    event: str | None
    data: str


@dataclass(frozen=True)
class Where:
    """A stream's place in the table: its partition and its sort-key prefix."""

    pk: str
    prefix: str


@dataclass
class StreamEnd:
    """A recorded stream's last write, made in the same transaction as its run's end (a
    response's records): one request and one round trip fewer than a write after it, and the
    end stored and logged at once. `landed` is set when that transaction is made; until then
    the recorder keeps the frames, and writes them itself if it never is."""

    items: list[dict[str, Any]]
    landed: bool = False

    def actions(self, table_name: str) -> list[dict[str, Any]]:
        """The items as a transaction's puts."""
        return [{"Put": {"TableName": table_name, "Item": item}} for item in self.items]


@dataclass
class Page:
    """What a read found after a cursor: whole frames in order, whether the end mark was among
    them, and the cursor to read on from (the low bound of the next read)."""

    frames: list[Frame]
    final: bool
    cursor: str


def frame_size(frame: Frame) -> int:
    return len(frame.data.encode()) + len((frame.event or "").encode()) + _FRAME_OVERHEAD


class StreamEventStore:
    def __init__(self, client: Any, table_name: str, *, retention_seconds: int) -> None:
        self._t = Table(client, table_name)
        self.retention_seconds = retention_seconds

    # --- writes ----------------------------------------------------------------------------

    def items(self, where: Where, frames: list[Frame], *, final: bool) -> list[dict[str, Any]]:
        """The items of one flush: frames packed in order into items under the size limit, a
        frame too large for one item in parts; `final` on the last (or an end mark alone)."""
        expires = {TTL_ATTRIBUTE: {"N": str(int(time.time()) + self.retention_seconds)}}
        out: list[dict[str, Any]] = []
        batch: list[Frame] = []
        size = 0

        def add_batch(frames: list[Frame]) -> None:
            blob = _pack(frames)
            if len(blob) > ITEM_PAYLOAD_BYTES:  # text that escapes and compresses badly
                if len(frames) == 1:
                    out.extend(self._parts(where, frames[0], expires))
                    return
                add_batch(frames[: len(frames) // 2])
                add_batch(frames[len(frames) // 2 :])
                return
            out.append(
                {
                    **key(where.pk, keys.event_sk(where.prefix, frames[0].seq)),
                    "frames": {"B": blob},
                    "last_seq": {"N": str(frames[-1].seq)},
                    **expires,
                }
            )

        def close_batch() -> None:
            nonlocal batch, size
            if batch:
                add_batch(batch)
            batch, size = [], 0

        for frame in frames:
            fsize = frame_size(frame)
            if fsize > ITEM_PAYLOAD_BYTES:
                close_batch()
                out.extend(self._parts(where, frame, expires))
                continue
            if size + fsize > ITEM_PAYLOAD_BYTES:
                close_batch()
            batch.append(frame)
            size += fsize
        close_batch()
        if final:
            if out:
                out[-1]["final"] = {"BOOL": True}
            else:
                out.append(
                    {**key(where.pk, keys.events_end_sk(where.prefix)), "final": {"BOOL": True}}
                    | expires
                )
        return out

    @staticmethod
    def _parts(where: Where, frame: Frame, expires: dict[str, Any]) -> list[dict[str, Any]]:
        data = frame.data.encode()
        step = ITEM_PAYLOAD_BYTES - 1024
        pieces = [data[i : i + step] for i in range(0, len(data), step)]
        out = []
        for n, piece in enumerate(pieces):
            item = {
                **key(where.pk, keys.event_part_sk(where.prefix, frame.seq, n)),
                "piece": {"B": piece},
                "parts": {"N": str(len(pieces))},
                "last_seq": {"N": str(frame.seq)},
                **expires,
            }
            if frame.event is not None:
                item["event"] = {"S": frame.event}
            out.append(item)
        return out

    def write(self, items: list[dict[str, Any]]) -> int:
        """Write a flush's items, one after the other: a reader must never see an item before
        the ones sorting ahead of it (a follower reads on from the last item it saw). A flush
        is one item unless it passes an item's size. The number of requests made."""
        for item in items:
            self._t.client.put_item(TableName=self._t.name, Item=item)
        return len(items)

    # --- reads -----------------------------------------------------------------------------

    def last_sequence(self, where: Where) -> int:
        """The highest sequence number stored, -1 for none (the end mark sorts last and carries
        none, so two items are read)."""
        resp = self._t.client.query(
            TableName=self._t.name,
            KeyConditionExpression="PK = :pk AND SK BETWEEN :low AND :high",
            ExpressionAttributeValues={
                ":pk": {"S": where.pk},
                ":low": {"S": where.prefix},
                ":high": {"S": keys.events_end_sk(where.prefix)},
            },
            ProjectionExpression="last_seq",
            ScanIndexForward=False,
            Limit=2,
            ConsistentRead=True,
        )
        seqs = [int(i["last_seq"]["N"]) for i in resp.get("Items", []) if "last_seq" in i]
        return max(seqs, default=-1)

    def start(self, where: Where, after: int) -> str:
        """The cursor of a read of the frames after `after` (-1: from the first): the item that
        holds `after + 1`, which may be a batch starting at or before `after`; else just past
        the last item stored before it (the batch holding `after + 1` may not be written yet,
        and will sort there: items are written in order, each starting after the last)."""
        if after < 0:
            return where.prefix
        resp = self._t.client.query(
            TableName=self._t.name,
            KeyConditionExpression="PK = :pk AND SK BETWEEN :low AND :high",
            ExpressionAttributeValues={
                ":pk": {"S": where.pk},
                ":low": {"S": where.prefix},
                ":high": {"S": keys.event_sk(where.prefix, after)},
            },
            ProjectionExpression="SK, last_seq, #final",
            ExpressionAttributeNames={"#final": "final"},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        found = resp.get("Items", [])
        if not found:
            return where.prefix
        sk, last = found[0]["SK"]["S"], int(found[0]["last_seq"]["N"])
        final = found[0].get("final", {}).get("BOOL", False)  # read it again, to end there
        if keys.is_event_part(sk):  # the frame's first part, or past every part
            return keys.event_sk(where.prefix, last) + ("" if final else "~")
        return sk if last > after or final else sk + "~"

    def read(self, where: Where, cursor: str) -> Page:
        """Whole frames from `cursor` on, in order. A large frame whose parts are not all
        written yet stops the page before it (the next read takes it whole)."""
        items = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND SK BETWEEN :low AND :high",
                "ExpressionAttributeValues": {
                    ":pk": {"S": where.pk},
                    ":low": {"S": cursor},
                    ":high": {"S": keys.events_end_sk(where.prefix)},
                },
                "ConsistentRead": True,
            }
        )
        frames: list[Frame] = []
        final = False
        index = 0
        while index < len(items):
            item = items[index]
            if expired(item):
                break  # retention passed: what is left is going
            if "parts" in item:
                count = int(item["parts"]["N"])
                group = items[index : index + count]
                seq = int(item["last_seq"]["N"])
                wanted = [keys.event_part_sk(where.prefix, seq, n) for n in range(count)]
                if [p["SK"]["S"] for p in group] != wanted:
                    break  # not all written yet
                data = b"".join(p["piece"]["B"] for p in group).decode()
                event = item["event"]["S"] if "event" in item else None
                frames.append(Frame(seq, event, data))
                index += count
                last = group[-1]
            else:
                if "frames" in item:
                    frames.extend(_unpack(item["frames"]["B"]))
                index += 1
                last = item
            cursor = last["SK"]["S"] + "~"
            if last.get("final", {}).get("BOOL"):
                final = True
                break
        return Page(frames, final, cursor)

    def turn_running(self, tenant: str, agent_id: str, session_id: str, turn_id: str) -> bool:
        """Whether the turn runs now: its session's lock names it, running, lease not passed
        (a turn whose Lambda died is not running once its lease has passed)."""
        from .sessions import read_session_head  # with the Agents API models: turns' streams only

        head = read_session_head(self._t, tenant, agent_id, session_id)
        return (
            head.get("active_turn", {}).get("S") == turn_id
            and head.get("active_state", {}).get("S") == RUNNING
            and int(head.get("lease_until", {}).get("N", "0")) >= time.time()
        )


#: zlib's preset dictionary for packed frames (first byte `_DICTIONARY_V1`): the envelopes the
#: Responses API's and the Agents API's events repeat, so that a short run's single item, whose
#: first event zlib would otherwise spell out in full, stays within one write unit. Never edit
#: it: stored items are read with it; a new dictionary takes a new first byte.
_ENVELOPES = (
    '{"event":{"payload":{"event_type":"turn_complete","turn":{"turn_id":"","session_id":"",'
    '"input_messages":[{"role":"user","content":"","context":null}],"steps":[{"turn_id":"",'
    '"step_id":"","started_at":"","completed_at":"","step_type":"inference","model_response":'
    '{"role":"assistant","content":"","stop_reason":"end_of_turn","tool_calls":[]}}],'
    '"output_message":{"role":"assistant","content":"","stop_reason":"end_of_turn",'
    '"tool_calls":[]},"output_attachments":[],"started_at":"","completed_at":""}}}}'
    '{"event":{"payload":{"event_type":"step_complete","step_type":"inference","step_id":"",'
    '"step_details":{"turn_id":"","step_id":"","started_at":"","completed_at":"",'
    '"step_type":"inference","model_response":{"role":"assistant","content":"",'
    '"stop_reason":"end_of_turn","tool_calls":[]}}}}}'
    '{"event":{"payload":{"event_type":"turn_start","turn_id":""}}}'
    '{"event":{"payload":{"event_type":"step_start","step_type":"inference","step_id":"",'
    '"metadata":{}}}}'
    '{"event":{"payload":{"event_type":"step_progress","step_type":"inference","step_id":"",'
    '"delta":{"type":"text","text":""}}}}'
    '{"sequence_number":\x00,"type":"response.created","response":{"created_at":,'
    '"completed_at":null,"error":null,"id":"resp_","model":"","object":"response","output":[],'
    '"parallel_tool_calls":true,"previous_response_id":null,"status":"in_progress",'
    '"temperature":1.0,"text":{"format":{"type":"text","name":null,"schema":null,'
    '"description":null,"strict":null}},"top_p":1.0,"presence_penalty":0.0,'
    '"frequency_penalty":0.0,"top_logprobs":0,"truncation":"disabled","user":null,'
    '"instructions":null,"incomplete_details":null,"usage":{"input_tokens":,"output_tokens":,'
    '"total_tokens":,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},'
    '"output_tokens_details":{"reasoning_tokens":0}},"tools":[],"tool_choice":"auto",'
    '"reasoning":null,"max_output_tokens":null,"max_tool_calls":null,"store":true,'
    '"background":false,"service_tier":"default","metadata":{},"safety_identifier":null,'
    '"prompt_cache_key":null,"conversation":null}}'
    '{"sequence_number":\x00,"type":"response.output_item.added","response_id":"resp_",'
    '"item":{"content":[],"role":"assistant","type":"message","id":"msg_",'
    '"status":"in_progress"},"output_index":0}'
    '{"sequence_number":\x00,"type":"response.content_part.added","item_id":"msg_",'
    '"output_index":0,"content_index":0,"part":{"text":"","type":"output_text",'
    '"annotations":[],"logprobs":[]}}'
    '{"sequence_number":\x00,"type":"response.output_text.delta","item_id":"msg_",'
    '"output_index":0,"content_index":0,"delta":"","logprobs":[]}'
)
#: As the envelopes appear in the packed JSON: inside its strings, escaped.
_DICTIONARY = json.dumps(_ENVELOPES)[1:-1].encode()
_DICTIONARY_V1 = b"\x01"

#: In a packed frame's data, where its own sequence number stood (a raw NUL never occurs in
#: JSON text, which must escape control characters).
_SEQ_MARK = "\x00"
#: How the Responses API's events repeat their frame's sequence number.
_SEQ_FIELD = '"sequence_number":'


#: How many characters past the frame before's share are compared one by one before halving.
_STEPS = 8
#: Frames whose data differ in their first characters are of different kinds (a turn's chunks:
#: `{"event":{"payload":{"event_type":"step_progress"`), told apart here.
_ENVELOPE = 48


def _shared_prefix(a: str, b: str, limit: int, guess: int = 0) -> int:
    """How many first characters (at most `limit`) `a` and `b` share. `guess`, what the frame
    before shared, is tried first: a delta's share moves by a character or two from its
    neighbour's, so past it the count goes on a character at a time, and below it (or when
    that does not settle it) it halves the span with slices compared in C, not character by
    character (a Responses frame holds the whole response, a kilobyte or more)."""
    low, high = 0, limit
    if 0 < guess <= limit:
        if a[:guess] != b[:guess]:
            high = guess - 1
        else:
            low = guess
            while low < limit and low - guess < _STEPS and a[low] == b[low]:
                low += 1
            if low == limit or a[low] != b[low]:
                return low
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _shared_suffix(a: str, b: str, limit: int, guess: int = 0) -> int:
    """How many last characters (at most `limit`) `a` and `b` share (`guess`: as above)."""
    la, lb = len(a), len(b)
    low, high = 0, limit
    if 0 < guess <= limit:
        if a[la - guess :] != b[lb - guess :]:
            high = guess - 1
        else:
            low = guess
            while low < limit and low - guess < _STEPS and a[la - low - 1] == b[lb - low - 1]:
                low += 1
            if low == limit or a[la - low - 1] != b[lb - low - 1]:
                return low
    while low < high:
        middle = (low + high + 1) // 2
        if a[la - middle : la - low] == b[lb - middle : lb - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _pack(frames: list[Frame]) -> bytes:
    """Frames as one compressed attribute, each told by what differs from the frame before it:
    a delta repeats its envelope and differs in a few characters of text (DynamoDB bills writes
    by the kilobyte). Each frame is [seq step, event (0: the one before's), length of the prefix
    and of the suffix it shares with the one before's data, the rest, marked]; a Responses
    event's `sequence_number`, its frame's seq, is marked so it does not break the shared
    prefix. Only a frame of the same kind as the one before is told by its difference (the
    same event, and for a turn's the same `event_type`: others share little at their ends).
    Plain string work, cheap beside the live stream it runs next to."""
    packed: list[list[Any]] = []
    seq, event, before = -1, None, ""
    prefix = suffix = 0
    for frame in frames:
        data = frame.data
        number = f"{_SEQ_FIELD}{frame.seq}"
        marked = _SEQ_MARK not in data and number in data
        if marked:
            data = data.replace(number, _SEQ_FIELD + _SEQ_MARK, 1)
        if frame.event == event and data[:_ENVELOPE] == before[:_ENVELOPE]:
            shorter = min(len(data), len(before))
            prefix = _shared_prefix(data, before, shorter, prefix)
            suffix = _shared_suffix(data, before, shorter - prefix, suffix)
            head, tail = prefix, suffix
        else:  # another kind of event: its ends differ, and zlib finds what repeats anyway
            head = tail = 0
        named = 0 if frame.event == event and packed else frame.event
        rest = data[head : len(data) - tail]
        packed.append([frame.seq - seq, named, head, tail, rest, int(marked)])
        seq, event, before = frame.seq, frame.event, data
    # pydantic-core's JSON writer: what json.dumps(ensure_ascii=False) writes, in a third of
    # the time, as bytes.
    text = to_json({"v": 2, "frames": packed})
    return _DICTIONARY_V1 + deflate(text, _DICTIONARY)


def _unpack(blob: bytes) -> list[Frame]:
    if blob[:1] == _DICTIONARY_V1:
        decompressor = zlib.decompressobj(zdict=_DICTIONARY)
        packed = json.loads(decompressor.decompress(blob[1:]) + decompressor.flush())
    else:  # written before the dictionary (a zlib stream's first byte is 0x78)
        packed = json.loads(zlib.decompress(blob))
    if isinstance(packed, list):  # written before frames were told by their differences
        return [Frame(seq, event, data) for seq, event, data in packed]
    frames = []
    seq, event, before = -1, None, ""
    for step, named, prefix, suffix, rest, marked in packed["frames"]:
        seq += step
        event = event if named == 0 else named
        data = before[:prefix] + rest + (before[len(before) - suffix :] if suffix else "")
        before = data
        frames.append(Frame(seq, event, data.replace(_SEQ_MARK, str(seq), 1) if marked else data))
    return frames
