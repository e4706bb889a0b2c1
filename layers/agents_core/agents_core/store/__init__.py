"""DynamoDB single-table storage. The key schema is in `keys`, documented in docs/storage.md."""

from .agents import AgentStore
from .errors import Conflict, InvalidInput, NotFound, StoreError, TooLarge

__all__ = [
    "AgentStore",
    "Conflict",
    "InvalidInput",
    "NotFound",
    "StoreError",
    "TooLarge",
]
