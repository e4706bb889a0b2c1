"""AWS clients for every function: one botocore session, bounded timeouts, a quick data loader,
and for the calls on every turn's path (DynamoDB's item operations, EventBridge's PutEvents) a
thin JSON-protocol client (`JsonClient`).

boto3 honours AWS_ENDPOINT_URL, so local runs against moto need no special case here.
"""

from __future__ import annotations

import base64
import json
import random
import time
from functools import cache, partial
from typing import Any

#: The services this application calls.
SERVICES = ("dynamodb", "sqs", "events", "bedrock-runtime", "secretsmanager", "s3vectors", "s3")


@cache
def _session():
    import json
    import os

    import boto3
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

    core = botocore.session.get_session()
    core.register_component("data_loader", KnownServicesLoader(file_loader=PlainJSONFileLoader()))
    return boto3.Session(botocore_session=core)


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
}

CONNECT_TIMEOUT = 2


def client(service: str, *, read_timeout: float = 5, attempts: int = 4) -> Any:
    """A client whose calls fail fast (bounded connect/read timeouts) instead of eating a Lambda.
    For DynamoDB and EventBridge, a `JsonClient` over the botocore client."""
    from botocore.config import Config

    fast = FAST_OPERATIONS.get(service)
    config = Config(
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": attempts},
        tcp_keepalive=True,
        # The request shapes of these services are built by this code, from validated models.
        parameter_validation=not fast,
    )
    made = _session().client(service, config=config)
    if fast:
        return JsonClient(made, fast, read_timeout=read_timeout, attempts=attempts)
    return made


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
    of a vCPU): the parameters as JSON, botocore's SigV4 signer, a urllib3 connection pool,
    the answer as JSON. Everything else (other operations, `meta`, `exceptions`, paginators,
    waiters) is the botocore client's.

    It behaves as the botocore client does: the same parameter and answer shapes (bytes for
    DynamoDB's B and BS values, base64 on the wire), errors as botocore's `ClientError`
    subclasses with the same `response` (modeled fields such as `CancellationReasons` and
    `Item` at its top), botocore's exceptions for connection failures and timeouts, and its
    standard retry mode (throttling, transient errors and 5xx; jittered backoff; `attempts`
    in all). It emits the events botocore emits around a call (`before-parameter-build`,
    `before-call`, `before-send`, `after-call`), so handlers on `meta.events` (moto's mock,
    tests counting or failing calls) see every call.
    """

    def __init__(
        self,
        botocore_client: Any,
        operations: tuple[str, ...],
        *,
        read_timeout: float,
        attempts: int,
    ) -> None:
        import urllib3
        from botocore import xform_name

        self._client = botocore_client
        meta = botocore_client.meta
        service = meta.service_model
        self._service_id = service.service_id.hyphenize()
        self._signing_name = service.signing_name
        self._target = service.metadata["targetPrefix"]
        self._content_type = f"application/x-amz-json-{service.metadata['jsonVersion']}"
        self._region = meta.region_name
        self._url = meta.endpoint_url.rstrip("/") + "/"  # the operations' path, as botocore's
        self._attempts = attempts
        self._credentials = _session().get_credentials()
        self._pool = urllib3.connection_from_url(
            self._url,
            maxsize=10,
            block=False,
            retries=False,
            timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT, read=read_timeout),
            **_tls(self._url),
        )
        for operation in operations:
            setattr(self, xform_name(operation), partial(self._call, operation))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        model = self._client.meta.service_model.operation_model(operation)
        events = self._client.meta.events
        event = f"{self._service_id}.{operation}"
        context: dict[str, Any] = {}
        events.emit(f"before-parameter-build.{event}", params=params, model=model, context=context)
        body = json.dumps(params, separators=(",", ":"), default=_blob_out).encode()
        request = {"url": self._url, "method": "POST", "body": body, "context": context}
        _, answered = events.emit_until_response(
            f"before-call.{event}",
            model=model,
            params=request,
            request_signer=None,
            context=context,
        )
        if answered is not None:
            http, parsed = answered
        else:
            http, parsed = self._send(operation, event, body)
        events.emit(
            f"after-call.{event}", http_response=http, parsed=parsed, model=model, context=context
        )
        if http.status_code >= 300:
            code = parsed["Error"]["Code"]
            raise self._client.exceptions.from_code(code)(parsed, operation)
        return parsed

    def _send(self, operation: str, event: str, body: bytes) -> tuple[Any, dict[str, Any]]:
        """The request, tried up to `attempts` times; (the last answer, its parsed body)."""
        from botocore.exceptions import ConnectionError, HTTPClientError

        for attempt in range(self._attempts):
            last = attempt + 1 == self._attempts
            try:
                http = self._exchange(operation, event, body)
            except (ConnectionError, HTTPClientError):
                if last:
                    raise
                time.sleep(_backoff(attempt, throttled=False))
                continue
            parsed = _parse(http.status_code, http.headers, http.content, attempt)
            if http.status_code < 300 or last:
                return http, parsed
            code = parsed["Error"]["Code"]
            throttled = code in _THROTTLED
            if not (throttled or code in _TRANSIENT or http.status_code in _TRANSIENT_STATUS):
                return http, parsed
            time.sleep(_backoff(attempt, throttled=throttled))
        raise AssertionError("unreachable")

    def _exchange(self, operation: str, event: str, body: bytes) -> Any:
        """One signed request and its answer (moto's in-process mock may answer instead)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest, AWSResponse

        request = AWSRequest(
            "POST",
            self._url,
            data=body,
            headers={
                "X-Amz-Target": f"{self._target}.{operation}",
                "Content-Type": self._content_type,
            },
        )
        SigV4Auth(
            self._credentials.get_frozen_credentials(), self._signing_name, self._region
        ).add_auth(request)
        prepared = request.prepare()
        _, mocked = self._client.meta.events.emit_until_response(
            f"before-send.{event}", request=prepared
        )
        if mocked is not None:
            return mocked
        raw = _urlopen(self._pool, self._url, body, dict(prepared.headers.items()))
        return AWSResponse(self._url, raw.status, dict(raw.headers.items()), _Read(raw.data))


class _Read:
    """The raw stream AWSResponse reads its content from, over bytes already read."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


def _urlopen(pool: Any, url: str, body: bytes, headers: dict[str, str]) -> Any:
    """urllib3's answer, its failures raised as botocore's (which the retries and callers know)."""
    import urllib3.exceptions as u
    from botocore import exceptions as b

    try:
        return pool.urlopen("POST", "/", body=body, headers=headers, preload_content=True)
    except u.NewConnectionError as err:  # before its base class, ConnectTimeoutError
        raise b.EndpointConnectionError(endpoint_url=url, error=err) from err
    except u.ConnectTimeoutError as err:
        raise b.ConnectTimeoutError(endpoint_url=url, error=err) from err
    except u.ReadTimeoutError as err:
        raise b.ReadTimeoutError(endpoint_url=url, error=err) from err
    except (u.ProtocolError, u.SSLError) as err:
        raise b.ConnectionClosedError(endpoint_url=url, error=err) from err
    except u.HTTPError as err:
        raise b.HTTPClientError(error=err) from err


def _tls(url: str) -> dict[str, Any]:
    """Certificates as botocore verifies them (its bundle, or certifi's)."""
    if not url.startswith("https:"):
        return {}
    from botocore.httpsession import get_cert_path

    return {"cert_reqs": "CERT_REQUIRED", "ca_certs": get_cert_path(True)}


def _backoff(attempt: int, *, throttled: bool) -> float:
    """botocore's standard mode: rand(0, 1) * min(scale * 2**attempt, 20 s)."""
    scale = 1 if throttled else 0.025
    return random.random() * min(scale * 2**attempt, _MAX_BACKOFF)


def _parse(status: int, headers: Any, body: bytes, attempt: int) -> dict[str, Any]:
    """The answer as botocore parses the JSON protocol: the body (blobs decoded) and
    `ResponseMetadata`; for an error, `Error` (Code, Message) and the error's own fields."""
    hook = _blob_in if b'"B' in body else None
    try:
        data = json.loads(body, object_hook=hook) if body else {}
    except ValueError:
        data = {}
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


def _blob_in(obj: dict[str, Any]) -> dict[str, Any]:
    """json.loads' hook: an attribute value {"B": base64} or {"BS": [base64]} as bytes (an
    item's attribute named B or BS holds a value object, never a string)."""
    if len(obj) == 1:
        if isinstance(obj.get("B"), str):
            return {"B": base64.b64decode(obj["B"])}
        blobs = obj.get("BS")
        if isinstance(blobs, list) and all(isinstance(b, str) for b in blobs):
            return {"BS": [base64.b64decode(b) for b in blobs]}
    return obj
