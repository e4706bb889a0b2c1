"""Store errors: what a caller can act on, independent of DynamoDB's own exceptions."""


class StoreError(Exception):
    """Base of the store's errors."""


class NotFound(StoreError):
    """The item is missing, expired, being deleted, or belongs to another tenant."""


class Conflict(StoreError):
    """The item's state does not allow the change (for example a busy session)."""


class TooLarge(StoreError):
    """The item would not fit DynamoDB's 400 KB limit."""


class InvalidInput(StoreError):
    """The value passed validation but cannot be stored (for example invalid Unicode)."""
