"""The key format, its hash, and how a request carries it (`authenticate`, in store.py, checks
it against the table).

A key is `sak_<key id>_<secret>`: the key id (12 hex digits) names the key in listings and
revocations and may be shown anywhere; the secret is 32 random bytes (base64url, 43 characters).
Only SHA-256 of the whole key is stored. A slow password hash (bcrypt, scrypt, argon2) guards
guessable passwords against offline guessing; a key with 256 random bits cannot be guessed from
its hash at any speed, and a fast, unsalted hash lets the authorizer find the key by its hash in
one GetItem, with no extra CPU per call.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

PREFIX = "sak_"
KEY_PATTERN = r"sak_[0-9a-f]{12}_[A-Za-z0-9_-]{43}"
#: What an `Authorization` header with a key looks like; the template gives API Gateway the same
#: pattern (a TOKEN authorizer's ValidationExpression), so a malformed header is refused there.
BEARER_PATTERN = rf"^Bearer {KEY_PATTERN}$"
_BEARER = re.compile(rf"[Bb][Ee][Aa][Rr][Ee][Rr] +({KEY_PATTERN})")


class InvalidKey(Exception):
    """No usable key: missing, malformed, unknown or revoked (the reason is for logs only;
    every caller sees the same 401)."""


@dataclass(frozen=True)
class Principal:
    """The caller a valid key vouches for."""

    tenant: str
    key_id: str
    #: The tenant's API key in the API's usage plan (throttling and quota), when it has one.
    usage_key: str | None = None


def new_key() -> tuple[str, str]:
    """(key id, key): a fresh key from the operating system's CSPRNG."""
    key_id = secrets.token_hex(6)
    return key_id, f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_from_header(header: str | None) -> str:
    """The key in an `Authorization` header (`Bearer <key>`; the scheme in any case)."""
    if not header:
        raise InvalidKey("no Authorization header")
    match = _BEARER.fullmatch(header.strip())
    if not match:
        raise InvalidKey("Authorization is not 'Bearer <key>' with a key of this service")
    return match.group(1)
