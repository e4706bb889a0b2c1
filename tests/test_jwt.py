"""JWTs from an OpenID Connect issuer: the authorizer checks tokens signed with generated RSA and
EC keys against a JWKS served by a local HTTP peer, in API Gateway's TOKEN and REQUEST event
shapes; and the local server under LOCAL_AUTH=keys with JWT_ISSUER takes a JWT as `api_key=`
from llama-stack-client and the openai SDK."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import jwt
import openai
import pytest
from agents_core.auth import KeyStore
from agents_core.auth.authorizer import Unauthorized, authorize
from agents_core.auth.keys import InvalidKey
from agents_core.auth.tokens import (
    HEADER_PATTERN,
    Jwks,
    JwtConfig,
    JwtVerifier,
    jwt_from_header,
    verifier,
)
from agents_core.settings import Settings
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from llama_stack_client import LlamaStackClient, NotFoundError

from .conftest import TABLE
from .local_server import free_port, running_server
from .peers.http import LocalPeer
from .test_authorizer import both_clients_answer, request_event, token_event

CLIENT_ID = "4tq9client0example"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def public_jwk(private_key, kid: str) -> dict:
    if isinstance(private_key, rsa.RSAPrivateKey):
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        alg = "RS256"
    else:
        jwk = jwt.algorithms.ECAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        alg = "ES256"
    return jwk | {"kid": kid, "alg": alg, "use": "sig"}


@dataclass
class Issuer:
    """An issuer: its JWKS served over HTTP (fetches counted) and tokens signed with its keys."""

    url: str
    jwks: dict = field(default_factory=lambda: {"keys": []})
    fetches: int = 0

    def claims(self, **overrides) -> dict:
        now = int(time.time())
        claims = {
            "iss": self.url,
            "sub": "5f8a-user",
            "aud": CLIENT_ID,
            "token_use": "id",
            "iat": now,
            "exp": now + 3600,
            "custom:tenant": "acme",
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, key=RSA_KEY, kid: str = "rsa-1", alg: str = "RS256", **claims) -> str:
        return jwt.encode(self.claims(**claims), key, algorithm=alg, headers={"kid": kid})


@contextmanager
def jwks_issuer():
    """An Issuer whose JWKS a local HTTP peer serves (RSA key `rsa-1`, EC key `ec-1`)."""
    state = Issuer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != "/pool/.well-known/jwks.json":
                self.send_error(404)
                return
            state.fetches += 1
            body = json.dumps(state.jwks).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with LocalPeer(Handler, "/pool") as peer:
        state.url = peer.url
        state.jwks["keys"] = [public_jwk(RSA_KEY, "rsa-1"), public_jwk(EC_KEY, "ec-1")]
        yield state


@pytest.fixture
def issuer():
    with jwks_issuer() as state:
        yield state


@pytest.fixture
def jwts(issuer) -> JwtVerifier:
    return JwtVerifier(JwtConfig(issuer.url, (CLIENT_ID,)))


@pytest.fixture
def keys(dynamodb) -> KeyStore:
    return KeyStore(dynamodb, TABLE)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_good_id_token_in_a_token_event_allows_its_tenant_with_its_usage_plan_key(
    issuer, jwts, keys
):
    keys.save_usage_key("acme", "key-id-1", "usage-value-of-acme-0123456789", "plan-1")
    answer = authorize(token_event(f"Bearer {issuer.token()}"), keys, jwts)
    assert answer["principalId"] == "acme"
    assert answer["context"] == {"tenant": "acme", "key_id": "jwt:5f8a-user"}
    assert answer["usageIdentifierKey"] == "usage-value-of-acme-0123456789"
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == "arn:aws:execute-api:us-east-1:123456789012:abcdef123/v0/*"


def test_a_cognito_access_token_signed_es256_in_a_request_event_is_allowed(issuer, jwts, keys):
    """Access tokens name the app client in `client_id` (they have no `aud`)."""
    token = issuer.token(EC_KEY, "ec-1", "ES256", token_use="access", aud=None, client_id=CLIENT_ID)
    answer = authorize(request_event({"authorization": f"bearer {token}"}), keys, jwts)
    assert answer["principalId"] == "acme"
    assert "usageIdentifierKey" not in answer  # no plan key saved for acme: none to send


def _hs256(issuer: Issuer) -> str:
    """HS256 keyed with the issuer's public key: the classic algorithm-confusion forgery."""
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode())
    payload = b64(json.dumps(issuer.claims()).encode())
    secret = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


def _alg_none(issuer: Issuer, signature: str) -> str:
    header = b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "rsa-1"}).encode())
    return f"{header}.{b64(json.dumps(issuer.claims()).encode())}.{signature}"


BAD_TOKENS = {
    "expired": lambda i: i.token(exp=int(time.time()) - 120),
    "not yet valid": lambda i: i.token(nbf=int(time.time()) + 120),
    "without exp": lambda i: i.token(exp=None),
    "wrong issuer": lambda i: i.token(iss=i.url + "-other"),
    "wrong audience": lambda i: i.token(aud="another-client"),
    "access token for another client": lambda i: i.token(
        token_use="access", aud=None, client_id="another-client"
    ),
    "access token naming the client only in aud": lambda i: i.token(token_use="access"),
    "no token_use": lambda i: i.token(token_use=None),
    "refresh token_use": lambda i: i.token(token_use="refresh"),
    "bad signature": lambda i: i.token(
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ),
    "ec key under the rsa kid": lambda i: i.token(EC_KEY, "rsa-1", "ES256"),
    "missing tenant claim": lambda i: i.token(**{"custom:tenant": None}),
    "tenant claim not a tenant name": lambda i: i.token(**{"custom:tenant": "a#b"}),
    "tenant claim not a string": lambda i: i.token(**{"custom:tenant": ["acme"]}),
    "alg none, empty signature": lambda i: _alg_none(i, ""),
    "alg none, any signature": lambda i: _alg_none(i, "c2lnbmF0dXJl"),
    "hs256 with the public key": _hs256,
    "no kid": lambda i: jwt.encode(i.claims(), RSA_KEY, algorithm="RS256"),
    "not a jwt": lambda i: "abc.def.ghi",
}


@pytest.mark.parametrize("case", BAD_TOKENS)
@pytest.mark.parametrize("shape", ["TOKEN", "REQUEST"])
def test_a_bad_token_is_unauthorized_in_both_shapes(issuer, jwts, keys, case, shape):
    token = BAD_TOKENS[case](issuer)
    header = f"Bearer {token}"
    event = token_event(header) if shape == "TOKEN" else request_event({"Authorization": header})
    with pytest.raises(Unauthorized):
        authorize(event, keys, jwts)
    if jwt_from_header(header):  # else API Gateway refused it already (HEADER_PATTERN)
        with pytest.raises(InvalidKey):
            jwts.authenticate(token)
    else:
        assert not re.fullmatch(HEADER_PATTERN, header)
    # ...while the same issuer's good token passes.
    assert authorize(token_event(f"Bearer {issuer.token()}"), keys, jwts)["principalId"] == "acme"


def test_an_unknown_kid_refetches_the_jwks_once_then_is_refused(issuer, jwts, keys):
    assert authorize(token_event(f"Bearer {issuer.token()}"), keys, jwts)
    assert issuer.fetches == 1
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(Unauthorized):
        authorize(token_event(f"Bearer {issuer.token(stranger, 'rsa-9')}"), keys, jwts)
    assert issuer.fetches == 2
    # Made-up kids right after: no fetch each time (the refetch waits out a cooldown).
    for n in range(3):
        with pytest.raises(Unauthorized):
            authorize(token_event(f"Bearer {issuer.token(stranger, f'x{n}')}"), keys, jwts)
    assert issuer.fetches == 2


def test_a_rotated_key_is_found_by_the_refetch(issuer, keys):
    jwts = JwtVerifier(
        JwtConfig(issuer.url, (CLIENT_ID,)), Jwks(f"{issuer.url}/.well-known/jwks.json", cooldown=0)
    )
    assert authorize(token_event(f"Bearer {issuer.token()}"), keys, jwts)
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    issuer.jwks["keys"].append(public_jwk(rotated, "rsa-2"))
    answer = authorize(token_event(f"Bearer {issuer.token(rotated, 'rsa-2')}"), keys, jwts)
    assert answer["principalId"] == "acme" and issuer.fetches == 2


def test_a_jwks_that_cannot_be_fetched_refuses_every_token_and_is_logged(issuer, keys, caplog):
    down = f"http://127.0.0.1:{free_port()}/pool"
    jwts = JwtVerifier(JwtConfig(down, (CLIENT_ID,)))
    with pytest.raises(Unauthorized):
        authorize(token_event(f"Bearer {issuer.token(iss=down)}"), keys, jwts)
    assert [e.split("(")[0] for e in logged_errors(caplog)] == ["URLError"]  # refused


def logged_errors(caplog) -> list[str]:
    """The `error` fields of the JWKS warnings logged."""
    return [r.error for r in caplog.records if r.getMessage() == "JWKS unavailable"]


def test_a_jwks_larger_than_the_bound_is_refused(issuer, keys, caplog):
    issuer.jwks["padding"] = "x" * 70_000
    with pytest.raises(Unauthorized):
        authorize(
            token_event(f"Bearer {issuer.token()}"),
            keys,
            JwtVerifier(JwtConfig(issuer.url, (CLIENT_ID,))),
        )
    assert logged_errors(caplog) == ["ValueError('JWKS larger than 65536 bytes')"]


def test_without_an_issuer_a_jwt_is_refused_and_keys_still_work(issuer, keys):
    assert verifier(Settings()) is None
    with pytest.raises(Unauthorized):
        authorize(token_event(f"Bearer {issuer.token()}"), keys, None)
    key = keys.create("acme").key
    assert authorize(token_event(f"Bearer {key}"), keys, None)["principalId"] == "acme"


def test_an_issuer_must_be_https_and_name_its_client_ids():
    with pytest.raises(ValueError, match="https"):
        verifier(Settings(jwt_issuer="http://cognito.example.com/pool", jwt_audience=("c",)))
    with pytest.raises(ValueError, match="JWT_AUDIENCE"):
        verifier(Settings(jwt_issuer="https://cognito.example.com/pool"))
    config = JwtConfig.from_settings(
        Settings(
            jwt_issuer="https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab",
            jwt_audience=("c",),
        )
    )
    assert (
        config.jwks_url
        == "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab/.well-known/jwks.json"
    )


def test_the_template_passes_the_three_parameters_to_the_authorizer():
    from .test_template import template

    tpl = template()
    env = tpl["Resources"]["AuthorizerFunction"]["Properties"]["Environment"]["Variables"]
    assert env == {
        "JWT_ISSUER": "!Ref JwtIssuer",
        "JWT_AUDIENCE": "!Ref JwtAudience",
        "JWT_TENANT_CLAIM": "!Ref JwtTenantClaim",
    }
    params = tpl["Parameters"]
    assert (
        params["JwtIssuer"]["Default"] == ""
        and params["JwtTenantClaim"]["Default"] == "custom:tenant"
    )
    pattern = params["JwtIssuer"]["AllowedPattern"]
    assert re.fullmatch(pattern, "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_X")
    assert not re.fullmatch(pattern, "http://cognito-idp.us-east-1.amazonaws.com/us-east-1_X")


# ---- the local server: LOCAL_AUTH=keys with JWT_ISSUER, both clients with api_key=<jwt> ----


def test_both_clients_pass_a_jwt_as_api_key_to_the_local_server(issuer, model):
    env = {
        "LOCAL_AUTH": "keys",
        "JWT_ISSUER": issuer.url,
        "JWT_AUDIENCE": CLIENT_ID,
        "OPENAI_BASE_URL": model.url,
    }
    with running_server(env) as (base, banner):
        assert f"or a JWT from {issuer.url}" in banner
        agent, session, _, _ = both_clients_answer(base, issuer.token(), model)

        # Another tenant's token sees none of it; a bad token gets 401.
        globex = issuer.token(**{"custom:tenant": "globex"})
        other = LlamaStackClient(base_url=base, api_key=globex, timeout=30, max_retries=0)
        with pytest.raises(NotFoundError):
            other.agents.session.retrieve(session.session_id, agent_id=agent.agent_id)
        expired = issuer.token(exp=int(time.time()) - 120)
        refused = httpx.get(f"{base}/v1/agents", headers={"Authorization": f"Bearer {expired}"})
        assert refused.status_code == 401
        bad = openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key=expired, max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.responses.create(model="llama3.2:3b", input="hi")


def test_a_jwks_that_redirects_is_refused_not_followed(issuer, keys, caplog):
    class Redirecting(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(302)
            self.send_header("Location", f"{issuer.url}/.well-known/jwks.json")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    moved = f"http://127.0.0.1:{server.server_address[1]}/pool"
    try:
        with pytest.raises(Unauthorized):
            authorize(
                token_event(f"Bearer {issuer.token(iss=moved)}"),
                keys,
                JwtVerifier(JwtConfig(moved, (CLIENT_ID,))),
            )
    finally:
        server.shutdown()
    assert logged_errors(caplog) == ["<HTTPError 302: 'Found'>"]  # not followed
