"""Item encoding shared by the stores: API objects as JSON bodies, and DynamoDB's size rule."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from .errors import InvalidInput

#: DynamoDB's item limit is 400 KB; keep a margin for the attributes added on update.
MAX_ITEM_BYTES = 400 * 1024 - 2048

M = TypeVar("M", bound=BaseModel)


def json_body(model: BaseModel) -> str:
    """The item body; runs before any write, so text that cannot be stored changes nothing."""
    try:
        return model.model_dump_json(exclude_none=True)
    except PydanticSerializationError as err:  # e.g. an unpaired surrogate from a JSON escape
        raise InvalidInput(f"Request contains text that cannot be stored: {err}") from err


def parse_body(model: type[M], item: dict[str, Any]) -> M:
    return model.model_validate_json(item["body"]["S"])


def item_size(item: dict[str, Any]) -> int:
    """Bytes an item counts against the limit: attribute names plus values (strings in UTF-8)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


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
