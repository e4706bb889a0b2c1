"""Opaque blobs a client holds and sends back (a reasoning item's `encrypted_content`, a
compaction item): the payload compressed and signed (HMAC-SHA256) with the deployment's key,
bound to one tenant and one kind. Only this deployment can make one that reads back, and a blob
another tenant made, or one changed by a single bit, is refused. The payload is signed, not
hidden: what it holds (a summary, reasoning) is the caller's own text.

    sealer = Sealer(key)
    blob = sealer.seal("acme", "compaction", {"summary": "..."})
    sealer.open("acme", "compaction", blob)   # the payload, or Unsealable
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import zlib
from collections.abc import Callable
from typing import Any

_VERSION = "sa1"
#: The largest payload a blob opens to (a bomb in a forged blob never gets past the signature,
#: but the bound holds anyway).
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024


class Unsealable(ValueError):
    """Not a blob of this deployment for this tenant and kind."""


class Sealer:
    """Seals and opens blobs with one key; `key` is called once, at the first use (it may read
    a secret)."""

    def __init__(self, key: Callable[[], bytes]) -> None:
        self._read_key = key
        self._key: bytes | None = None

    @classmethod
    def generated(cls) -> Sealer:
        """A sealer with a key of its own (a local process's)."""
        key = secrets.token_bytes(32)
        return cls(lambda: key)

    @property
    def loaded(self) -> bool:
        return self._key is not None

    def load(self) -> None:
        """Read the key now (it may be a blocking read of a secret: call it in a thread)."""
        if self._key is None:
            self._key = self._read_key()

    def seal(self, tenant: str, kind: str, payload: dict[str, Any]) -> str:
        body = _b64(zlib.compress(json.dumps(payload, separators=(",", ":")).encode()))
        return f"{_VERSION}.{body}.{self._signature(tenant, kind, body)}"

    def open(self, tenant: str, kind: str, blob: str) -> dict[str, Any]:
        version, _, rest = blob.partition(".")
        body, _, signature = rest.partition(".")
        if version != _VERSION or not body or not signature:
            raise Unsealable("not a blob this deployment made")
        if not hmac.compare_digest(signature, self._signature(tenant, kind, body)):
            raise Unsealable("not a blob this deployment made for this caller")
        try:
            inflate = zlib.decompressobj()
            data = inflate.decompress(_unb64(body), MAX_PAYLOAD_BYTES)
            payload = json.loads(data)
        except (ValueError, zlib.error) as err:
            raise Unsealable("a blob that does not read back") from err
        if not isinstance(payload, dict) or inflate.unconsumed_tail:
            raise Unsealable("a blob that does not read back")
        return payload

    def _signature(self, tenant: str, kind: str, body: str) -> str:
        self.load()
        message = "\n".join([_VERSION, kind, tenant, body]).encode()
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
