"""AWS clients for every function: one botocore session, bounded timeouts, a quick data loader,
and for the calls on every turn's path (DynamoDB's item operations, EventBridge's PutEvents)
and a container's first (Secrets Manager's GetSecretValue) a thin JSON-protocol client
(`JsonClient`).

The clients are botocore's, made without boto3, whose import (s3transfer's with it) is about 60
ms of every function's init and adds nothing a client here uses. botocore honours
AWS_ENDPOINT_URL, so local runs against moto need no special case here. A `JsonClient` makes its
botocore client only when something asks for more than its operations: where the environment
says where and as whom to call (`_direct`), as in an on-demand Lambda, an init imports no more
of botocore than its exceptions (about 0.2 s of CPU saved).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import random
import re
import sys
import threading
import time
from functools import cache, partial
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit

from . import json_text

#: The services this application calls.
SERVICES = ("dynamodb", "sqs", "events", "bedrock-runtime", "secretsmanager", "s3vectors", "s3")


@cache
def _session():
    import os

    import botocore.session
    from botocore.loaders import JSONFileLoader, Loader

    class KnownServicesLoader(Loader):
        """botocore checks a service name by reading the data directory of every AWS service
        (about 900 directory listings, some 40 ms of a cold start); ours are known."""

        def list_available_services(self, type_name: str) -> list[str]:
            return list(SERVICES)

    class PlainJSONFileLoader(JSONFileLoader):
        """botocore parses its data files into OrderedDicts, a habit from Python 2 that makes
        parsing 2.5x slower (some 10 ms of a cold start, for endpoints.json and a service
        model); plain dicts keep their order."""

        def _load_file(self, full_path, open_method):
            if not os.path.isfile(full_path):
                return None
            with open_method(full_path, "rb") as fp:
                return json.loads(fp.read())

    session = botocore.session.get_session()
    session.register_component(
        "data_loader", KnownServicesLoader(file_loader=PlainJSONFileLoader())
    )
    return session


#: Operations `JsonClient` makes itself, by service; the rest go through botocore.
FAST_OPERATIONS = {
    "dynamodb": (
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "TransactGetItems",
    ),
    "events": ("PutEvents",),
    # Read once per container, at its first run: the lean path, and the TLS context every
    # client shares, rather than botocore's, which loads the CA bundle per connection (its
    # timestamps, as CreatedDate, stay the wire's numbers: only SecretString is read).
    "secretsmanager": ("GetSecretValue",),
}

CONNECT_TIMEOUT = 2


def client(service: str, *, read_timeout: float = 5, attempts: int = 4) -> Any:
    """A client whose calls fail fast (bounded connect/read timeouts) instead of eating a Lambda.
    For DynamoDB, EventBridge and Secrets Manager, a `JsonClient`, which makes the botocore
    client only when it needs it."""
    fast = FAST_OPERATIONS.get(service)
    make = partial(_botocore_client, service, read_timeout, attempts, validate=not fast)
    if fast:
        return JsonClient(service, fast, make, read_timeout=read_timeout, attempts=attempts)
    return make()


def _botocore_client(service: str, read_timeout: float, attempts: int, *, validate: bool) -> Any:
    from botocore.config import Config

    config = Config(
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": attempts},
        tcp_keepalive=True,
        # The request shapes of JsonClient's services are built by this code, from validated
        # models.
        parameter_validation=validate,
    )
    return _session().create_client(service, config=config)


class _Protocol(NamedTuple):
    """What a JsonClient sends a service, as botocore's model of the service has it
    (tests/test_aws_json.py checks each against botocore's)."""

    target: str  # X-Amz-Target's prefix
    json_version: str
    signing_name: str  # also the first label of its regional endpoint's host
    service_id: str  # hyphenized: botocore's event names, AWS_ENDPOINT_URL_<SERVICE_ID>
    idempotent: dict[str, str]  # an operation's idempotency token, filled in when not given


PROTOCOLS = {
    "dynamodb": _Protocol(
        "DynamoDB_20120810",
        "1.0",
        "dynamodb",
        "dynamodb",
        {"TransactWriteItems": "ClientRequestToken"},
    ),
    "events": _Protocol("AWSEvents", "1.1", "events", "eventbridge", {}),
    "secretsmanager": _Protocol("secretsmanager", "1.1", "secretsmanager", "secrets-manager", {}),
}

#: The regions of AWS's commercial partition, whose endpoints are <service>.<region>.amazonaws.com
#: (botocore's partitions.json, "aws").
_AWS_REGION = re.compile(r"^(us|eu|ap|sa|ca|me|af|il|mx)\-\w+\-\d+$")

#: Settings that change where or as whom botocore calls: where one is set, it resolves both.
_BOTOCORE_SETTINGS = (
    "AWS_CREDENTIAL_EXPIRATION",  # refreshable keys
    "AWS_ACCOUNT_ID",  # DynamoDB's account-based endpoints
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_DEFAULTS_MODE",
)


class _Keys(NamedTuple):
    """Keys from the environment, as botocore's credentials give them frozen; a Lambda's stay
    its container's for its life."""

    access_key: str
    secret_key: str
    token: str | None

    def get_frozen_credentials(self) -> _Keys:
        return self


class _Direct(NamedTuple):
    url: str
    region: str
    credentials: _Keys


def _plain_environment() -> bool:
    """No config file and none of the settings that only botocore resolves: the environment
    alone says what botocore would read."""
    env = os.environ
    config = os.path.expanduser(env.get("AWS_CONFIG_FILE") or "~/.aws/config")
    return not os.path.exists(config) and not any(name in env for name in _BOTOCORE_SETTINGS)


def _direct(service: str) -> _Direct | None:
    """The endpoint, region and keys botocore would call `service` with, read from the
    environment as botocore reads it where that is all it reads (keys and region in the
    environment, botocore's first source of each; no config file; an endpoint in the
    environment, or the service's regional one in AWS's commercial partition); else None."""
    env = os.environ
    key, secret, region = (
        env.get("AWS_ACCESS_KEY_ID"),
        env.get("AWS_SECRET_ACCESS_KEY"),
        env.get("AWS_DEFAULT_REGION"),
    )
    if not (key and secret and region) or not _plain_environment():
        return None
    protocol = PROTOCOLS[service]
    variable = "AWS_ENDPOINT_URL_" + protocol.service_id.replace("-", "_").upper()
    url = env.get(variable) or env.get("AWS_ENDPOINT_URL")
    if not url:
        if not _AWS_REGION.match(region):
            return None
        url = f"https://{protocol.signing_name}.{region}.amazonaws.com"
    token = env.get("AWS_SECURITY_TOKEN") or env.get("AWS_SESSION_TOKEN")
    return _Direct(url, region, _Keys(key, secret, token))


#: Error classes of answers met before a service's botocore client was made, by (service,
#: code); a client made later takes them as its own (`_adopt_errors`), so `exceptions.X` of
#: any client of the service is the class its calls raise.
_ERRORS: dict[tuple[str, str], type] = {}
#: A service's botocore exceptions, once one of its clients was made.
_MADE_ERRORS: dict[str, Any] = {}


def _error_class(service: str, code: str) -> type:
    """The class of an error answer: its service's botocore client's, once one was made."""
    made = _MADE_ERRORS.get(service)
    if made is not None:
        return made.from_code(code)
    from botocore.exceptions import ClientError

    return _ERRORS.setdefault((service, code), type(code, (ClientError,), {}))


def _adopt_errors(service: str, made: Any) -> None:
    """A newly made botocore client of `service` raises, and names in its `exceptions`, the
    classes JsonClient raised before it was made."""
    exceptions = made.exceptions
    for (name, code), cls in _ERRORS.items():
        if name == service:
            exceptions._code_to_exception[code] = cls
            setattr(type(exceptions), code, cls)
    _MADE_ERRORS[service] = exceptions


def _trace_header(headers: dict[str, str]) -> None:
    """In Lambda, the invocation's trace id as X-Amzn-Trace-Id (botocore's recursion
    detection)."""
    trace = os.environ.get("_X_AMZN_TRACE_ID")
    if trace and "X-Amzn-Trace-Id" not in headers:
        headers["X-Amzn-Trace-Id"] = quote(trace, safe="-=;:+&[]{}\"',")


#: botocore's standard retry mode, for JsonClient: what is tried again, and how long it waits.
_THROTTLED = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
_TRANSIENT = frozenset({"RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete"})
_TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
_MAX_BACKOFF = 20


class JsonClient:
    """A botocore client's JSON-protocol operations (`operations`) made without botocore's
    per-request machinery, which costs about 1.5 ms of CPU a call (a Lambda at 192 MB has 0.11
    of a vCPU): the parameters as JSON, signed (SigV4), sent over a kept-alive connection (a
    socket of its own; under `blocking.run`, `http1`'s, awaited by the event loop), the answer
    as JSON. Everything else (other operations, `meta`, paginators, waiters) is the botocore
    client's, made at the first use of any of it; until then, where the environment says where
    and as whom to call (`_direct`), no botocore client is made at all, and an error answer's
    class is one `exceptions` names once the client is made (`_adopt_errors`).

    It behaves as the botocore client does: the same parameter and answer shapes (bytes for
    DynamoDB's B and BS values, base64 on the wire), errors as botocore's `ClientError`
    subclasses with the same `response` (modeled fields such as `CancellationReasons` and
    `Item` at its top), botocore's exceptions for connection failures and timeouts, and its
    standard retry mode (throttling, transient errors and 5xx; jittered backoff; `attempts`
    in all).

    Once a handler is registered on its `meta.events` (tests counting or failing calls, a
    bench's recorder), or where moto's in-process mock is installed, it emits the events
    botocore emits around a call (`before-parameter-build`, `before-call`, `before-send`,
    `after-call`), so those handlers see every call. Until then it does what botocore's own
    handlers of those events do for these services (an idempotency token where the operation
    has one, as TransactWriteItems' ClientRequestToken; the recursion-detection header in
    Lambda) without the events: about a twentieth of a turn's instructions.
    """

    def __init__(
        self,
        service: str,
        operations: tuple[str, ...],
        make: Any,
        *,
        read_timeout: float,
        attempts: int,
    ) -> None:
        self._made: Any = None  # the botocore client, once made (`_botocore`)
        self._make = make
        self._making = threading.Lock()
        self._service = service
        self._events: Any = _NOT_LISTENING  # the botocore client's events, once it is made
        protocol = PROTOCOLS[service]
        self._protocol = protocol
        self._target = protocol.target
        self._content_type = f"application/x-amz-json-{protocol.json_version}"
        direct = None if _mocked() else _direct(service)
        if direct is None:  # botocore resolves them (and a mock answers through its events)
            meta = self._botocore().meta
            direct = _Direct(meta.endpoint_url, meta.region_name, _session().get_credentials())
        self._region = direct.region
        self._url = direct.url.rstrip("/") + "/"  # the operations' path, as botocore's
        self._attempts = attempts
        self._connections = _Connections(self._url, read_timeout)
        self._signer = _Signer(
            direct.credentials, self._connections.host, self._region, protocol.signing_name
        )
        self._operations = operations
        self._in_lambda = "AWS_LAMBDA_FUNCTION_NAME" in os.environ
        for operation in operations:
            setattr(self, _snake_case(operation), partial(self._call, operation))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and the like look for these on the class
            raise AttributeError(name)
        return getattr(self._botocore(), name)

    def _botocore(self) -> Any:
        """The botocore client, made at the first call (its events passed through `_Observed`,
        its error classes those this client raised before)."""
        with self._making:
            if self._made is None:
                made = self._make()
                _adopt_errors(self._service, made)
                self._events = _Observed(made.meta.events)
                made.meta.events = self._events
                self._made = made
        return self._made

    def prepare(self) -> None:
        """Build what its first calls would (a primed init): the TLS context its connections
        verify with (none is opened), and, where its botocore client was made, its operations'
        models as botocore resolves them from the service's data at their first call."""
        self._connections.prepare()
        if self._made is not None:
            service = self._made.meta.service_model
            for operation in self._operations:
                service.operation_model(operation).idempotent_members  # noqa: B018

    async def open(self, count: int = 1) -> None:
        """Open the connections its first `count` calls at once on this event loop would."""
        await self._connections.open(count)

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        events = self._events if self._events.listening else None
        event = f"{self._protocol.service_id}.{operation}"
        context: dict[str, Any] = {}
        if events is not None:
            model = self._made.meta.service_model.operation_model(operation)
            events.emit(
                f"before-parameter-build.{event}", params=params, model=model, context=context
            )
        else:
            token = self._protocol.idempotent.get(operation)
            if token is not None and token not in params:
                params[token] = os.urandom(16).hex()  # botocore: a uuid4, in 3x the CPU
        body = json_text.dumps(params, default=_blob_out)
        request = {
            "url_path": "/",
            "query_string": "",
            "method": "POST",
            "headers": {},  # botocore's handlers add some (X-Amzn-Trace-Id in Lambda)
            "body": body,
            "url": self._url,
            "context": context,
        }
        answered = None
        if events is not None:
            _, answered = events.emit_until_response(
                f"before-call.{event}",
                model=model,
                params=request,
                request_signer=None,
                context=context,
            )
        elif self._in_lambda:  # what it looks for first, read once
            _trace_header(request["headers"])
        if answered is not None:
            http, parsed = answered
        else:
            http, parsed = self._send(operation, event, body, request["headers"])
        if events is not None:
            events.emit(
                f"after-call.{event}",
                http_response=http,
                parsed=parsed,
                model=model,
                context=context,
            )
        if http.status_code >= 300:
            code = parsed["Error"]["Code"]
            raise _error_class(self._service, code)(parsed, operation)
        return parsed

    def _send(
        self, operation: str, event: str, body: bytes, headers: dict[str, str]
    ) -> tuple[Any, dict[str, Any]]:
        """The request, tried up to `attempts` times; (the last answer, its parsed body)."""
        from botocore.exceptions import ConnectionError, HTTPClientError

        for attempt in range(self._attempts):
            last = attempt + 1 == self._attempts
            try:
                http = self._exchange(operation, event, body, headers)
            except (ConnectionError, HTTPClientError):
                if last:
                    raise
                pause(_backoff(attempt, throttled=False))
                continue
            parsed = _parse(http.status_code, http.headers, http.content, attempt)
            if http.status_code < 300 or last:
                return http, parsed
            code = parsed["Error"]["Code"]
            throttled = code in _THROTTLED
            if not (throttled or code in _TRANSIENT or http.status_code in _TRANSIENT_STATUS):
                return http, parsed
            pause(_backoff(attempt, throttled=throttled))
        raise AssertionError("unreachable")

    def _exchange(self, operation: str, event: str, body: bytes, headers: dict[str, str]) -> Any:
        """One signed request and its answer (moto's in-process mock may answer instead).
        botocore's request and answer types are made only for its events' handlers: their module
        imports urllib3 (about 70 ms at a full core, most of a second at 192 MB's share)."""
        headers = {
            **headers,
            **self._signer.headers(
                {"x-amz-target": f"{self._target}.{operation}", "content-type": self._content_type},
                body,
            ),
        }
        if self._events.listening:
            from botocore.awsrequest import AWSPreparedRequest, HTTPHeaders

            prepared = AWSPreparedRequest(
                "POST", self._url, HTTPHeaders.from_dict(headers), body, False
            )
            _, mocked = self._events.emit_until_response(f"before-send.{event}", request=prepared)
            if mocked is not None:
                return mocked
        if _bridged():  # on the event loop's thread: the loop awaits the exchange
            status, answer_headers, data = _blocking().wait(self._connections.apost(body, headers))
        else:
            status, answer_headers, data = self._connections.post(body, headers)
        if self._events.listening:  # handlers of after-call are given botocore's answer
            from botocore.awsrequest import AWSResponse

            return AWSResponse(self._url, status, answer_headers, _Read(data))
        return _Answer(status, answer_headers, data)


class _Observed:
    """A botocore client's event system, passed through; `listening` once a handler is
    registered on it, or from the start where another library added handlers to botocore's
    built-in ones (moto's in-process mock: its stubber answers requests in `before-send`)."""

    def __init__(self, events: Any) -> None:
        self._events = events
        self.listening = _mocked()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._events, name)
        if name.startswith("register"):
            self.listening = True
        return attr


class _NotListening:
    """The events of a JsonClient whose botocore client is not made yet: nobody listens."""

    listening = False


_NOT_LISTENING = _NotListening()


def _mocked() -> bool:
    """Whether another library added handlers to botocore's built-in ones (moto's in-process
    mock answers requests in `before-send`): then every call goes through botocore's events.
    A process that never imported botocore's handlers has none."""
    handlers = sys.modules.get("botocore.handlers")
    return handlers is not None and any(
        not getattr(entry[1], "__module__", type(entry[1]).__module__).startswith("botocore")
        for entry in handlers.BUILTIN_HANDLERS
    )


def _snake_case(operation: str) -> str:
    """botocore's method name of an operation (`xform_name`): PutItem -> put_item."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()


class _Answer(NamedTuple):
    """An answer as `_parse` reads it (what of botocore's AWSResponse it uses), headers with
    lower-case names."""

    status_code: int
    headers: dict[str, str]
    content: bytes


class _Read:
    """The raw stream AWSResponse reads its content from, over bytes already read."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


class _Signer:
    """AWS Signature Version 4 of a POST to `/` (JSON protocols), as botocore's SigV4Auth signs
    it, its day's signing key kept. Credentials are read at each request (they rotate)."""

    def __init__(self, credentials: Any, host: str, region: str, service: str) -> None:
        self._credentials = credentials
        self._host = host
        self._region = region
        self._service = service
        self._key: tuple[tuple[str, str], tuple[Any, Any]] | None = None
        self._stamp: tuple[int, str] = (0, "")

    def headers(self, headers: dict[str, str], body: bytes, stamp: str = "") -> dict[str, str]:
        """`headers` (lower-case names) with Host, X-Amz-Date, the token and Authorization;
        `stamp`, the request's time (now unless given)."""
        creds = self._credentials.get_frozen_credentials()
        stamp = stamp or self._now()
        signed = {**headers, "host": self._host, "x-amz-date": stamp}
        if creds.token:
            signed["x-amz-security-token"] = creds.token
        names = sorted(signed)
        canonical = "\n".join(
            [
                "POST",
                "/",
                "",
                "".join([f"{name}:{signed[name].strip()}\n" for name in names]),
                ";".join(names),
                hashlib.sha256(body).hexdigest(),
            ]
        )
        scope = f"{stamp[:8]}/{self._region}/{self._service}/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        inner, outer = self._signing_key(creds.secret_key, stamp[:8])
        inner, outer = inner.copy(), outer.copy()
        inner.update(to_sign.encode())
        outer.update(inner.digest())
        signature = outer.hexdigest()
        signed["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope},"
            f" SignedHeaders={';'.join(names)}, Signature={signature}"
        )
        return signed

    def _now(self) -> str:
        """X-Amz-Date of now, formatted once a second."""
        second = int(time.time())
        if self._stamp[0] != second:
            self._stamp = (second, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second)))
        return self._stamp[1]

    def _signing_key(self, secret: str, day: str) -> tuple[Any, Any]:
        """The day's signing key as HMAC-SHA256's two hashes, each fed its padded key (RFC
        2104): a signature then copies them, where `hmac.digest` looks up its algorithm and
        pads the key again each call (20 us against 7 with cold caches, once a request)."""
        if self._key is None or self._key[0] != (secret, day):
            key = f"AWS4{secret}".encode()
            for part in (day, self._region, self._service, "aws4_request"):
                key = hmac.digest(key, part.encode(), "sha256")
            key = key.ljust(64, b"\0")  # SHA-256's block; the key is 32 bytes
            inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
            outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))
            self._key = ((secret, day), (inner, outer))
        return self._key[1]


class _Connections:
    """Kept-alive HTTP/1.1 connections to one endpoint, one per request at a time; a kept
    connection the server closed meanwhile is replaced, once, without a retry's wait. Failures
    are raised as botocore's exceptions, which the retries and callers know.

    The exchange is written here over a socket rather than with http.client, whose answer
    parsing (headers through the email package) cost more CPU than the rest of a call: these
    endpoints answer a POST with a status line, headers and a Content-Length or chunked body."""

    def __init__(self, url: str, read_timeout: float) -> None:
        parts = urlsplit(url)
        self._url = url
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._tls else 80)
        self._read_timeout = read_timeout
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._context: Any = None
        self._client: Any = None  # http1.PostClient, for `apost`
        self._http1: Any = None  # the module, imported at the first `apost`

    def prepare(self) -> None:
        """The TLS context both exchanges verify with, for an HTTPS endpoint."""
        if self._tls:
            self._tls_context()

    @property
    def host(self) -> str:
        """The Host header: the name, and the port unless it is the scheme's own."""
        default = 443 if self._tls else 80
        return self._host if self._port == default else f"{self._host}:{self._port}"

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        import botocore.exceptions as b  # a package's fromlist is Python's slow path

        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            try:
                return self._exchange(conn, body, headers)
            except (_Unreadable, ConnectionError):
                conn.close()  # closed while it was kept: a new connection, below
            except TimeoutError as err:
                conn.close()
                raise b.ReadTimeoutError(endpoint_url=self._url, error=err) from err
            except OSError as err:
                conn.close()
                raise b.ConnectionClosedError(endpoint_url=self._url, error=err) from err
        conn = self._connect()
        try:
            return self._exchange(conn, body, headers)
        except TimeoutError as err:
            conn.close()
            raise b.ReadTimeoutError(endpoint_url=self._url, error=err) from err
        except (_Unreadable, OSError) as err:
            conn.close()
            raise b.ConnectionClosedError(endpoint_url=self._url, error=err) from err

    async def apost(
        self, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """`post` on the event loop (`blocking.run`): the same exchange over `http1`'s
        connections, kept for the loop's next call, failures raised as botocore's."""
        import botocore.exceptions as b  # a package's fromlist is Python's slow path

        client = self._client or self._post_client()
        http1 = self._http1
        headers = {name: value for name, value in headers.items() if name != "host"}
        try:
            answer = await client.post(body, headers)
            try:
                data = await answer.read(_MAX_BODY)
            finally:
                answer.close()
        except http1.ConnectFailed as err:
            raise b.EndpointConnectionError(endpoint_url=self._url, error=err) from err
        except TimeoutError as err:
            raise b.ReadTimeoutError(endpoint_url=self._url, error=err) from err
        except (http1.Broken, OSError) as err:
            raise b.ConnectionClosedError(endpoint_url=self._url, error=err) from err
        return answer.status, answer.headers, data

    async def open(self, count: int) -> None:
        """Open `apost`'s connections now, `count` of them, for the event loop's first calls.
        Raises http1's failures (ConnectFailed, TimeoutError, OSError)."""
        await (self._client or self._post_client()).open(count)

    def _post_client(self) -> Any:
        from . import http1

        self._http1 = http1
        self._client = http1.PostClient(
            self._url,
            {},
            timeout=self._read_timeout,
            connect_timeout=CONNECT_TIMEOUT,
            certificates=_certificates(),
        )
        return self._client

    def _exchange(
        self, conn: _Connection, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        status, answer_headers, data, keep = conn.post(body, headers)
        if keep:
            with self._lock:
                self._idle.append(conn)
        else:
            conn.close()
        return status, answer_headers, data

    def _connect(self) -> _Connection:
        import socket

        import botocore.exceptions as b  # a package's fromlist is Python's slow path

        try:
            sock = socket.create_connection((self._host, self._port), timeout=CONNECT_TIMEOUT)
        except TimeoutError as err:
            raise b.ConnectTimeoutError(endpoint_url=self._url, error=err) from err
        except OSError as err:
            raise b.EndpointConnectionError(endpoint_url=self._url, error=err) from err
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if self._tls:
                sock = self._tls_context().wrap_socket(sock, server_hostname=self._host)
        except OSError as err:
            sock.close()
            raise b.EndpointConnectionError(endpoint_url=self._url, error=err) from err
        sock.settimeout(self._read_timeout)
        return _Connection(sock)

    def _tls_context(self) -> Any:
        """The context every client checking these certificates shares (`http1.tls_context`)."""
        if self._context is None:
            from . import http1

            self._context = http1.tls_context(*_certificates())
        return self._context


def _certificates() -> tuple[str | None, str | None]:
    """Certificates as botocore verifies them, for both of JsonClient's exchanges: the
    configured CA bundle (AWS_CA_BUNDLE, or `ca_bundle` in the config file), else certifi's
    where installed (as a directory in the layer), else botocore's own."""
    if _plain_environment():
        bundle = os.environ.get("AWS_CA_BUNDLE")
    else:
        bundle = _session().get_config_variable("ca_bundle")
    if bundle:
        return bundle, None
    from . import http1

    try:
        return http1.bundled_certificates()  # in the layer, its hashed directory
    except ImportError:  # no certifi
        from botocore.httpsession import where

        return where(), None


class _Unreadable(Exception):
    """An answer that is not HTTP/1.x, or ends early."""


#: Bounds on an answer: its head, a line of it, and its body (DynamoDB's largest answers,
#: BatchGetItem and Query pages, are 16 MB and 1 MB of items).
_MAX_LINE = 65_536
_MAX_HEADERS = 100
_MAX_BODY = 32 * 1024 * 1024


class _Connection:
    """One socket and its buffered reader: a POST written whole, its answer read."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")

    def close(self) -> None:
        self._reader.close()
        self._sock.close()

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes, bool]:
        """(status, headers with lower-case names, body, whether the connection stays open)."""
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._sock.sendall(
            f"POST / HTTP/1.1\r\n{head}content-length: {len(body)}\r\n\r\n".encode() + body
        )
        status_line = self._line()
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        version, _, rest = status_line.partition(b" ")
        if not version.startswith(b"HTTP/1.") or not rest[:3].isdigit():
            raise _Unreadable(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        status = int(rest[:3])
        answer: dict[str, str] = {}
        for _ in range(_MAX_HEADERS):
            line = self._line()
            if not line:
                break
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise _Unreadable(f"not a header line: {line[:80]!r}")
            answer[name.strip().lower()] = value.strip()
        else:
            raise _Unreadable("too many header lines")
        if answer.get("transfer-encoding", "").lower() == "chunked":
            data = self._chunked()
        else:
            data = self._exactly(int(answer.get("content-length", "0")))
        keep = version != b"HTTP/1.0" and answer.get("connection", "").lower() != "close"
        return status, answer, data, keep

    def _line(self) -> bytes:
        line = self._reader.readline(_MAX_LINE)
        if line and not line.endswith(b"\n"):
            raise _Unreadable("a line of the answer is too long or cut short")
        return line.rstrip(b"\r\n")

    def _exactly(self, size: int) -> bytes:
        if not 0 <= size <= _MAX_BODY:
            raise _Unreadable(f"an answer of {size} bytes")
        data = self._reader.read(size)
        if len(data) != size:
            raise _Unreadable("the answer ended early")
        return data

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            try:
                size = int(self._line().split(b";", 1)[0], 16)
            except ValueError:
                raise _Unreadable("not a chunk's size") from None
            if size == 0:
                while self._line():  # trailers
                    pass
                return b"".join(parts)
            total += size
            parts.append(self._exactly(size if total <= _MAX_BODY else -1))
            self._line()


def _blocking() -> Any:
    return sys.modules["agents_core.blocking"]


def _bridged() -> bool:
    """Whether this call runs under `blocking.run` (on an event loop's thread). A process that
    never imported `blocking` (the authorizer, a script) cannot be, and needs no greenlet."""
    blocking = sys.modules.get("agents_core.blocking")
    return blocking is not None and blocking.bridged()


def pause(seconds: float) -> None:
    """A retry's wait (this client's, a store's backoff): on the event loop's thread
    (`blocking.run`) the loop waits instead, serving its other tasks."""
    if _bridged():
        import asyncio

        _blocking().wait(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


#: Retries' jitter, from os.urandom: `random`'s own state is part of a SnapStart snapshot, the
#: same in every container restored from it, which would then retry in step.
_RANDOM = random.SystemRandom()


def jitter(low: float, high: float) -> float:
    """A random wait between `low` and `high` seconds, drawn apart from any other container's."""
    return _RANDOM.uniform(low, high)


def _backoff(attempt: int, *, throttled: bool) -> float:
    """botocore's standard mode: rand(0, 1) * min(scale * 2**attempt, 20 s)."""
    scale = 1 if throttled else 0.025
    return _RANDOM.random() * min(scale * 2**attempt, _MAX_BACKOFF)


def _parse(status: int, headers: Any, body: bytes, attempt: int) -> dict[str, Any]:
    """The answer as botocore parses the JSON protocol: the body (blobs decoded) and
    `ResponseMetadata`; for an error, `Error` (Code, Message) and the error's own fields."""
    try:
        data = json_text.loads(body) if body else {}
    except ValueError:
        data = {}
    if b'"B' in body:
        _decode_blobs(data)
    lowered = {k.lower(): v for k, v in headers.items()}
    meta = {
        "RequestId": lowered.get("x-amzn-requestid", ""),
        "HTTPStatusCode": status,
        "HTTPHeaders": lowered,
        "RetryAttempts": attempt,
    }
    if status < 300:
        data["ResponseMetadata"] = meta
        return data
    kind = data.pop("__type", None) or lowered.get("x-amzn-errortype") or str(status)
    message = data.get("message") or data.get("Message") or ""
    error = {"Code": kind.split("#")[-1].split(":")[0], "Message": message}
    return {**data, "Error": error, "ResponseMetadata": meta}


def _blob_out(value: Any) -> str:
    """json.dumps' hook for what JSON has no type for: bytes (B and BS values) as base64."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _decode_blobs(value: dict[str, Any] | list[Any]) -> None:
    """In the parsed answer, in place: each attribute value {"B": base64} or {"BS": [base64]}
    as bytes (an item's attribute named B or BS holds a value object, never a string)."""
    for key, inner in value.items() if type(value) is dict else enumerate(value):
        if type(inner) is dict:
            if len(inner) == 1 and type(inner.get("B")) is str:
                value[key] = {"B": base64.b64decode(inner["B"])}
            elif len(inner) == 1 and type(blobs := inner.get("BS")) is list:
                if all(type(b) is str for b in blobs):
                    value[key] = {"BS": [base64.b64decode(b) for b in blobs]}
            else:
                _decode_blobs(inner)
        elif type(inner) is list:
            _decode_blobs(inner)
