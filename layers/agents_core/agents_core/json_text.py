"""JSON text of plain values (dicts, lists, strings, numbers), as the AWS clients and the store
write it: orjson's, compact and in UTF-8, about fifteen times faster than the standard library's
`json.dumps` with options (a DynamoDB request's body: 1 us against 16 us here; a run writes a
dozen such texts). What orjson refuses (a lone surrogate, which a JSON escape in a request can
make; an integer past 64 bits) is written by the standard library instead, as before."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

#: JSON text (bytes or str) to values; raises ValueError (orjson.JSONDecodeError) when invalid.
loads = orjson.loads


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """`value` as JSON text in UTF-8; `default` makes a JSON value of what JSON has no type for."""
    try:
        return orjson.dumps(value, default=default)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), default=default).encode()


def dumps_str(value: Any) -> str:
    """`dumps` as a str, for a DynamoDB string attribute."""
    return dumps(value).decode()
