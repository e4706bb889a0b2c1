"""DynamoDB single-table storage. The key schema is in `keys`, documented in docs/storage.md."""

from .agents import AgentStore
from .errors import Conflict, InvalidInput, NotFound, StoreError, TooLarge
from .factory import agent_store_from_settings, dynamodb_client

__all__ = [
    "AgentStore",
    "agent_store_from_settings",
    "dynamodb_client",
    "Conflict",
    "InvalidInput",
    "NotFound",
    "StoreError",
    "TooLarge",
]
