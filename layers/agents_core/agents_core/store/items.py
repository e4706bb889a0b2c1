"""Item encoding shared by the stores: API objects as JSON bodies, and DynamoDB's size rule.

An item whose JSON attributes would pass DynamoDB's 400 KB limit is written in parts: the head
item (its own key, `parts` = N) and N items `{sk}#PART#{i}` holding the attributes' JSON as
binary chunks. Parts sort right after their head, so a query returns them together.

A JSON attribute of at least `PACK_CHARS` characters is stored compressed (zlib), as a binary
value of the same name, when that is smaller and the item as text would take more than one
write unit (1 KB): DynamoDB bills writes per kilobyte, and a turn's body and history, or a
response's context, are JSON that compresses 3 to 10 times. A record of several JSON attributes
has them compressed together, in one binary attribute `packed`: a turn's body and history hold
the same messages, its trace the same ids, which one stream stores once. Readers go through
`decode`, which gives back the texts either way.

A record in parts keeps each long text once (`shared_texts` on its head): a turn's `body` and its
`history` (the model's view of the same messages) hold the same user message and answer, and a
5 MB message would otherwise be stored twice.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from ..errors import InvalidRequest
from . import keys

#: DynamoDB's item limit is 400 KB; keep a margin for the attributes added on update.
MAX_ITEM_BYTES = 400 * 1024 - 2048
PART_BYTES = 350 * 1024
#: Texts at least this long are stored once per record in parts, however often they occur.
SHARED_TEXT_CHARS = 16 * 1024
#: JSON attributes at least this long (together) are stored compressed when that is smaller.
PACK_CHARS = 256
#: DynamoDB bills a write per kilobyte begun: an item this small costs one compressed or not.
WRITE_UNIT_BYTES = 1024
#: The attribute holding a record's JSON attributes compressed together.
PACKED = "packed"
#: zlib matches no farther back than its window less this much (MIN_LOOKAHEAD).
_LOOKAHEAD = 262
_SHARED, _LITERAL = "$shared", "$literal"  # markers in the parts' JSON (escaped in content)

M = TypeVar("M", bound=BaseModel)


def json_body(model: BaseModel) -> str:
    """The item body; runs before any write, so text that cannot be stored changes nothing."""
    try:
        return model.model_dump_json(exclude_none=True)
    except PydanticSerializationError as err:  # e.g. an unpaired surrogate from a JSON escape
        raise InvalidRequest(f"Request contains text that cannot be stored: {err}") from err


def parse_body(model: type[M], item: dict[str, Any]) -> M:
    body = item["body"]
    return model.model_validate_json(body["S"] if "S" in body else zlib.decompress(body["B"]))


def item_size(item: dict[str, Any]) -> int:
    """Bytes an item counts against the limit: attribute names plus values (strings in UTF-8)."""
    return sum([len(name.encode()) + _value_size(value) for name, value in item.items()])


def _value_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind in ("S", "N"):
        return len(raw.encode())
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in raw.items())
    return sum(len(str(v).encode()) for v in raw)


def encode(
    key: dict[str, Any], attrs: dict[str, str], extra: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Items for one record: `attrs` (JSON strings) inline when they fit, else in parts. An
    item that takes one write unit as text is not compressed: that would cost a zlib pass (some
    20 us) and save nothing billed."""
    head = {**key, **(extra or {})}
    if sum(map(len, attrs.values())) < WRITE_UNIT_BYTES:
        plain = {**head, **{name: {"S": value} for name, value in attrs.items()}}
        if item_size(plain) <= WRITE_UNIT_BYTES:
            return [plain]
    inline = {**head, **_stored(attrs)}
    if item_size(inline) <= MAX_ITEM_BYTES:
        return [inline]
    data = json.dumps(_share(attrs)).encode()
    chunks = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]
    head["parts"] = {"N": str(len(chunks))}
    head["shared_texts"] = {"N": "1"}
    parts = [
        {"PK": key["PK"], "SK": {"S": keys.part_sk(key["SK"]["S"], n)}, "chunk": {"B": c}}
        | ({"expires_at": extra["expires_at"]} if extra and "expires_at" in extra else {})
        for n, c in enumerate(chunks, 1)
    ]
    return [head, *parts]


def decode(items: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    """(head item, its JSON attributes) for each record among `items`, in query order."""
    index = 0
    while index < len(items):
        head = items[index]
        index += 1
        if keys.is_part(head["SK"]["S"]):
            continue  # a part whose head was filtered out of the query
        if "parts" not in head:
            yield head, inline_attrs(head)
            continue
        count = int(head["parts"]["N"])
        chunks = [bytes(items[index + n]["chunk"]["B"]) for n in range(count)]
        index += count
        data = json.loads(b"".join(chunks))
        yield head, _unshare(data) if "shared_texts" in head else data


def _stored(attrs: dict[str, str]) -> dict[str, Any]:
    """An inline record's JSON attributes as its item holds them: one alone as `_packed` does;
    several compressed together under `packed` (a header line of their names and lengths in
    bytes, then their texts), when that is smaller than their texts."""
    if len(attrs) < 2:
        return {name: _packed(value) for name, value in attrs.items()}
    texts = [value.encode() for value in attrs.values()]
    size = sum(map(len, texts))
    if size >= PACK_CHARS:
        header = json.dumps([[name, len(text)] for name, text in zip(attrs, texts, strict=True)])
        packed = deflate(header.encode() + b"\n" + b"".join(texts))
        if len(packed) < size:
            return {PACKED: {"B": packed}}
    return {name: {"S": value} for name, value in attrs.items()}


def deflate(data: bytes, zdict: bytes = b"") -> bytes:
    """`data` as a zlib stream at level 6, with a window and hash table no larger than it needs.
    zlib's defaults (a 32 KB window, memLevel 8) allocate and clear about 256 KB a call: for an
    item of a few kilobytes, most of the work (a fresh process: about 90 us against 15; a
    function's server, whose heap keeps the memory, 2% of a run's instructions). A window that
    holds the data and the dictionary finds the same matches, and every zlib reader takes a
    smaller window."""
    wbits = max(9, min(15, (len(zdict) + len(data) + _LOOKAHEAD).bit_length()))
    memory = max(1, wbits - 7)  # zlib's default pairing: memLevel 8 with the 15-bit window
    if zdict:
        compressor = zlib.compressobj(6, zlib.DEFLATED, wbits, memory, zdict=zdict)
    else:
        compressor = zlib.compressobj(6, zlib.DEFLATED, wbits, memory)
    return compressor.compress(data) + compressor.flush()


def _unpacked(data: bytes) -> dict[str, str]:
    header, _, texts = data.partition(b"\n")
    attrs, at = {}, 0
    for name, length in json.loads(header):
        attrs[name] = texts[at : at + length].decode()
        at += length
    return attrs


def _packed(text: str) -> dict[str, Any]:
    """An attribute's value: the JSON text, or its compressed bytes when that is smaller."""
    if len(text) >= PACK_CHARS:
        data = text.encode()
        packed = deflate(data)
        if len(packed) < len(data):
            return {"B": packed}
    return {"S": text}


def inline_attrs(head: dict[str, Any]) -> dict[str, str]:
    """The JSON attributes of an item not in parts: its strings, and its binary values (which
    `encode` compressed) decompressed, `packed` into the attributes it holds."""
    attrs = {}
    for name, value in head.items():
        if "S" in value:
            if name not in ("PK", "SK"):
                attrs[name] = value["S"]
        elif "B" in value:
            data = zlib.decompress(value["B"])
            if name == PACKED:
                attrs.update(_unpacked(data))
            else:
                attrs[name] = data.decode()
    return attrs


def _share(attrs: dict[str, str]) -> dict[str, Any]:
    """The attributes (JSON texts) as one JSON value in which each long text appears once:
    `{"texts": [...], "attrs": {name: value with {"$shared": i} in place of texts[i]}}`. A
    content dict that happens to look like a marker is kept as `{"$literal": dict}`."""
    texts: list[str] = []
    index: dict[str, int] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            if len(value) < SHARED_TEXT_CHARS:
                return value
            if value not in index:
                index[value] = len(texts)
                texts.append(value)
            return {_SHARED: index[value]}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            walked = {k: walk(v) for k, v in value.items()}
            return {_LITERAL: walked} if _SHARED in value or _LITERAL in value else walked
        return value

    shared = {name: walk(json.loads(text)) for name, text in attrs.items()}
    return {"texts": texts, "attrs": shared}


def _unshare(data: dict[str, Any]) -> dict[str, str]:
    texts = data["texts"]

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            if _SHARED in value and len(value) == 1:
                return texts[value[_SHARED]]
            if _LITERAL in value and len(value) == 1:
                return {k: walk(v) for k, v in value[_LITERAL].items()}
            return {k: walk(v) for k, v in value.items()}
        return value

    return {name: json.dumps(walk(value)) for name, value in data["attrs"].items()}
