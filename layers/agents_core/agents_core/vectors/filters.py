"""OpenAI's vector store attribute filters, translated to S3 Vectors metadata filters.

OpenAI (openai SDK `types/shared/comparison_filter.py`, `compound_filter.py`):
    {"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key": k, "value": v}
    {"type": "and"|"or", "filters": [...]}
S3 Vectors (Amazon S3 user guide, "Metadata filtering"):
    {k: {"$eq": v}}, {"$and": [...]}, {"$or": [...]}; $gt/$gte/$lt/$lte take numbers,
    $in/$nin non-empty arrays of primitives.
A file's attributes are stored as filterable metadata under `attribute_key(k)`, so a filter
can never name the adapter's own keys.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..errors import InvalidRequest

ATTRIBUTE_PREFIX = "attr_"
#: Bounds on one filter: nesting and comparisons (OpenAI's own are similar in spirit).
MAX_DEPTH = 8
MAX_COMPARISONS = 64
_COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
_NUMERIC = ("gt", "gte", "lt", "lte")


def attribute_key(name: str) -> str:
    """The metadata key a file attribute is stored (and filtered) under: S3 Vectors keys are
    at most 63 characters, so a longer attribute name is stored under its hash."""
    key = ATTRIBUTE_PREFIX + name
    if len(key) <= 63:
        return key
    return ATTRIBUTE_PREFIX + "h_" + hashlib.sha256(name.encode()).hexdigest()[:40]


def to_s3_filter(filters: dict[str, Any]) -> dict[str, Any]:
    """The S3 Vectors filter for an OpenAI filter; InvalidRequest (400) for a malformed one."""
    count = [0]
    return _translate(filters, 0, count)


def _translate(node: Any, depth: int, count: list[int]) -> dict[str, Any]:
    if depth >= MAX_DEPTH:
        raise InvalidRequest(f"filters are nested more than {MAX_DEPTH} deep")
    if not isinstance(node, dict):
        raise InvalidRequest("a filter is an object with a `type`")
    kind = node.get("type")
    if kind in ("and", "or"):
        _only(node, {"type", "filters"})
        parts = node.get("filters")
        if not isinstance(parts, list) or not parts:
            raise InvalidRequest(f"an `{kind}` filter needs a non-empty `filters` list")
        return {f"${kind}": [_translate(part, depth + 1, count) for part in parts]}
    if kind not in _COMPARISONS:
        raise InvalidRequest(
            f"filter type {kind!r} is not one of {', '.join(_COMPARISONS)}, and, or"
        )
    _only(node, {"type", "key", "value"})
    count[0] += 1
    if count[0] > MAX_COMPARISONS:
        raise InvalidRequest(f"a filter may hold at most {MAX_COMPARISONS} comparisons")
    key, value = node.get("key"), node.get("value")
    if not isinstance(key, str) or not key:
        raise InvalidRequest("a comparison filter needs a non-empty string `key`")
    if kind in ("in", "nin"):
        if not isinstance(value, list) or not value or not all(map(_primitive, value)):
            raise InvalidRequest(f"`{kind}` takes a non-empty list of strings, numbers or booleans")
    elif kind in _NUMERIC:
        if not _number(value):
            raise InvalidRequest(f"`{kind}` compares numbers: {key!r} was given {value!r}")
    elif not _primitive(value):
        raise InvalidRequest(f"`{kind}` takes a string, number or boolean")
    return {attribute_key(key): {f"${kind}": value}}


def _only(node: dict[str, Any], allowed: set[str]) -> None:
    extra = set(node) - allowed
    if extra:
        raise InvalidRequest(f"unknown filter field(s): {', '.join(sorted(extra))}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _primitive(value: Any) -> bool:
    return isinstance(value, str | bool) or _number(value)
