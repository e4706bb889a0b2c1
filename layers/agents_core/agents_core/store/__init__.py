"""DynamoDB single-table storage. The key schema is in `keys`, documented in docs/storage.md."""

from .errors import Conflict, InvalidInput, NotFound, StoreError, TooLarge

__all__ = [
    "Conflict",
    "InvalidInput",
    "NotFound",
    "StoreError",
    "TooLarge",
]
