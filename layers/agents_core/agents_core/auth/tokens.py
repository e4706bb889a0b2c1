"""JWTs from an OpenID Connect issuer (a Cognito user pool): the other Bearer credential.

A caller who already has a token from the operator's identity provider sends it as it would a
key (`Authorization: Bearer <jwt>`). It is accepted when the stack names an issuer (JwtIssuer),
and only if: signed RS256 or ES256 (never `none` or a shared-secret HS*) by a key of the
issuer's JWKS (`<issuer>/.well-known/jwks.json`); within `exp`/`nbf` (30 s leeway); `iss` is the
issuer; `token_use` is `id` (then `aud`) or `access` (then Cognito's `client_id`), naming one of
the configured client ids; and the configured claim names the tenant. Anything else is
InvalidKey, as for keys: the same 401, the reason in the logs.

PyJWT (with cryptography) is imported when the first JWT arrives, so a function that
only sees keys never loads them. The issuer is the operator's configuration, not a caller's
input: it must be https (loopback http is allowed for tests), and no outbound guard applies.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from ..errors import InvalidRequest
from ..log import logger
from .keys import KEY_PATTERN, InvalidKey, Principal
from .store import check_tenant

ALGORITHMS = ("RS256", "ES256")
TOKEN_USES = ("id", "access")
LEEWAY_SECONDS = 30
JWT_PATTERN = r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"
_BEARER = re.compile(rf"[Bb][Ee][Aa][Rr][Ee][Rr] +({JWT_PATTERN})")
#: The `Authorization` headers API Gateway lets through to the authorizer (the template's
#: ValidationExpression): a key of this service or a JWT.
HEADER_PATTERN = rf"^Bearer ({KEY_PATTERN}|{JWT_PATTERN})$"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def jwt_from_header(header: str | None) -> str | None:
    """The token in `Authorization: Bearer <jwt>` (three base64url parts), else None."""
    match = _BEARER.fullmatch((header or "").strip())
    return match.group(1) if match else None


@dataclass(frozen=True)
class JwtConfig:
    issuer: str
    audiences: tuple[str, ...]
    tenant_claim: str = "custom:tenant"

    @classmethod
    def from_settings(cls, settings: Any) -> JwtConfig | None:
        """The settings' JWT configuration (None: no issuer, JWTs off); ValueError if unusable."""
        if not settings.jwt_issuer:
            return None
        url = urlsplit(settings.jwt_issuer)
        secure = url.scheme == "https" or (url.scheme == "http" and url.hostname in _LOOPBACK)
        if not secure or not url.hostname:
            raise ValueError(f"JWT_ISSUER {settings.jwt_issuer!r} must be an https URL")
        if not settings.jwt_audience:
            raise ValueError("JWT_ISSUER needs JWT_AUDIENCE: the client ids a token may be for")
        issuer = settings.jwt_issuer.rstrip("/")
        return cls(issuer, settings.jwt_audience, settings.jwt_tenant_claim)

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/.well-known/jwks.json"


class Jwks:
    """The issuer's signing keys, fetched (bounded in time and size) and kept per container for
    `ttl` seconds; an unknown `kid` refetches once (a rotated key), at most one such refetch
    every `cooldown` seconds, so a stream of made-up kids cannot make every check a fetch."""

    def __init__(
        self,
        url: str,
        ttl: float = 3600.0,
        cooldown: float = 30.0,
        timeout: float = 2.0,
        max_bytes: int = 64 * 1024,
    ) -> None:
        self.url, self.ttl, self.cooldown = url, ttl, cooldown
        self.timeout, self.max_bytes = timeout, max_bytes
        self._keys: dict[str, dict[str, Any]] = {}
        self._fetched_at = self._refetched_at = float("-inf")
        self._lock = threading.Lock()

    def key(self, kid: str) -> dict[str, Any]:
        """The JWK with this `kid`, or InvalidKey (unknown, or the JWKS unreachable)."""
        with self._lock:
            now = time.monotonic()
            if now - self._fetched_at > self.ttl:
                self._refresh(now)
            elif kid not in self._keys and now - self._refetched_at > self.cooldown:
                self._refetched_at = now
                self._refresh(now)
            jwk = self._keys.get(kid)
        if jwk is None:
            raise InvalidKey(f"no key {kid!r} in the issuer's JWKS")
        return jwk

    def _refresh(self, now: float) -> None:
        try:
            keys = self._fetch()
        except Exception as err:  # unreachable, too large, not JSON: every JWT is refused
            logger.warning("JWKS unavailable", url=self.url, error=repr(err))
            raise InvalidKey("the issuer's JWKS cannot be fetched") from None
        self._keys, self._fetched_at = keys, now

    def _fetch(self) -> dict[str, dict[str, Any]]:
        """The JWKS by the standard library's HTTP client: the authorizer's build carries no
        HTTP library (a redirect is refused, the body bounded)."""
        import urllib.request

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None  # the 3xx is then an error

        https = urllib.request.HTTPSHandler(context=_tls_context())
        opener = urllib.request.build_opener(NoRedirect, https)
        with opener.open(self.url, timeout=self.timeout) as resp:
            body = resp.read(self.max_bytes + 1)
        if len(body) > self.max_bytes:
            raise ValueError(f"JWKS larger than {self.max_bytes} bytes")
        keys = json.loads(body)["keys"]
        return {k["kid"]: k for k in keys if isinstance(k, dict) and isinstance(k.get("kid"), str)}


@cache
def _tls_context() -> Any:
    """The TLS context every HTTPS client of the process shares (`http1.default_tls_context`:
    certifi's bundle, in the authorizer's build as a hashed directory whose roots a handshake
    reads as it needs them; SSL_CERT_FILE or SSL_CERT_DIR where set), made at init when it is
    primed (`prepare`). Loading a bundle file costs about 40 ms of CPU at a full core, a few
    hundred at the authorizer's share."""
    from .. import http1

    return http1.default_tls_context()


def prepare() -> None:
    """What the first JWKS fetch would build (a primed init, SnapStart): its TLS context."""
    _tls_context()


class JwtVerifier:
    """Checks a JWT against one issuer's configuration and keys."""

    def __init__(self, config: JwtConfig, jwks: Jwks | None = None) -> None:
        self.config = config
        self.jwks = jwks or Jwks(config.jwks_url)

    def authenticate(self, token: str) -> Principal:
        """The tenant the token's configured claim names, or InvalidKey."""
        import jwt

        try:
            header = jwt.get_unverified_header(token)
            alg, kid = header.get("alg"), header.get("kid")
            if alg not in ALGORITHMS:
                raise InvalidKey(f"JWT algorithm {alg!r} is not one of {ALGORITHMS}")
            if not isinstance(kid, str):
                raise InvalidKey("JWT without a kid")
            key = jwt.PyJWK(self.jwks.key(kid), algorithm=alg)
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                issuer=self.config.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except jwt.PyJWTError as err:
            raise InvalidKey(f"JWT refused: {err}") from None
        use = claims.get("token_use")
        if use not in TOKEN_USES:
            raise InvalidKey(f"JWT token_use {use!r} is not one of {TOKEN_USES}")
        # Cognito ID tokens name the app client in `aud`, access tokens in `client_id`.
        named = claims.get("aud") if use == "id" else claims.get("client_id")
        named = [named] if isinstance(named, str) else named if isinstance(named, list) else []
        if not set(named) & set(self.config.audiences):
            raise InvalidKey(f"JWT is for {named}, not one of the configured client ids")
        tenant = claims.get(self.config.tenant_claim)
        try:
            check_tenant(tenant if isinstance(tenant, str) else "")
        except InvalidRequest:
            raise InvalidKey(f"JWT claim {self.config.tenant_claim!r} names no tenant") from None
        return Principal(tenant, f"jwt:{str(claims.get('sub', ''))[:64]}")


_verifiers: dict[JwtConfig, JwtVerifier] = {}


def verifier(settings: Any) -> JwtVerifier | None:
    """The container's verifier for the settings' issuer (one JWKS cache per process), or None
    when JWTs are off; ValueError when the configuration is unusable."""
    config = JwtConfig.from_settings(settings)
    if config is None:
        return None
    if config not in _verifiers:
        _verifiers[config] = JwtVerifier(config)
    return _verifiers[config]
