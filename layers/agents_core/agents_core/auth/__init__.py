"""Bearer keys: how callers authenticate (docs/architecture.md, "Authentication").

A key is issued to one tenant, stored only as its SHA-256, and revocable. The API's Lambda
authorizer (functions/authorizer) and the local server under `LOCAL_AUTH=keys` check a request's
`Authorization: Bearer <key>` with the same `authenticate`:

    store = KeyStore(dynamodb_client, table_name)
    issued = store.create("acme", name="ci")      # issued.key is shown once, never stored
    authenticate(f"Bearer {issued.key}", store)   # -> Principal(tenant="acme", key_id=...)
"""

from .keys import BEARER_PATTERN, KEY_PATTERN, InvalidKey, Principal, hash_key
from .store import IssuedKey, KeyRecord, KeyStore, authenticate

__all__ = [
    "BEARER_PATTERN",
    "KEY_PATTERN",
    "InvalidKey",
    "IssuedKey",
    "KeyRecord",
    "KeyStore",
    "Principal",
    "authenticate",
    "hash_key",
]
