"""aws.JsonClient against a real moto server over HTTP, beside a plain botocore client on the
same table: the same answers, the same errors, bounded retries, botocore's events. Each holds
both where the client is called from blocking code (a worker thread, a script) and where it is
called under `blocking.run` on an event loop, which then awaits the exchange."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from agents_core import aws, blocking
from agents_core.errors import aws_unavailable
from agents_core.store.schema import create_table_if_missing
from botocore.exceptions import ClientError, EndpointConnectionError
from moto.server import ThreadedMotoServer

from .conftest import TABLE
from .local_server import free_port

KEY = {"PK": {"S": "p"}, "SK": {"S": "s"}}
ITEM = {
    **KEY,
    "blob": {"B": b"\x00\xffbytes"},
    "blobs": {"BS": [b"a", b"\x01"]},
    "nested": {"M": {"B": {"S": "an attribute named B"}, "list": {"L": [{"B": b"\x02"}]}}},
    "n": {"N": "1"},
}


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadedMotoServer(port=free_port())
    server.start()
    yield f"http://127.0.0.1:{server._port}"
    server.stop()


class OnALoop:
    """A JsonClient each of whose operations runs under `blocking.run`, on an event loop of
    its own; everything else is the client's."""

    def __init__(self, client: aws.JsonClient) -> None:
        self._client = client
        self.meta, self.exceptions = client.meta, client.exceptions

    def __getattr__(self, name):
        operation = getattr(self._client, name)
        return lambda **params: asyncio.run(blocking.run(lambda: operation(**params)))


@pytest.fixture(params=["blocking", "on the loop"])
def calls(request, monkeypatch):
    """How the client is called; "on the loop": each test must have awaited its exchanges
    there (counted), none blocking."""
    if request.param == "blocking":
        yield lambda client: client
        return
    awaited, real = [], aws._Connections.apost

    async def counted(self, body, headers):
        awaited.append(blocking.bridged())
        return await real(self, body, headers)

    def blocked(*_):
        raise AssertionError("a blocking exchange under blocking.run")

    monkeypatch.setattr(aws._Connections, "apost", counted)
    monkeypatch.setattr(aws._Connections, "post", blocked)
    yield OnALoop
    assert awaited and not any(awaited)  # awaited by the loop, outside the greenlet


@pytest.fixture
def clients(endpoint, monkeypatch, calls):
    """(the JsonClient as `calls` calls it, a plain botocore client) on a fresh table of the
    moto server."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    plain = boto3.client("dynamodb", region_name="us-east-1")
    plain.delete_table(TableName=TABLE) if TABLE in plain.list_tables()["TableNames"] else None
    create_table_if_missing(plain, TABLE)
    fast = aws.client("dynamodb")
    assert isinstance(fast, aws.JsonClient)
    return calls(fast), plain


def answer(resp: dict) -> dict:
    return {k: v for k, v in resp.items() if k != "ResponseMetadata"}


def test_items_round_trip_as_botocore_reads_and_writes_them(clients):
    fast, plain = clients
    fast.put_item(TableName=TABLE, Item=ITEM)
    got = fast.get_item(TableName=TABLE, Key=KEY, ConsistentRead=True)
    assert answer(got) == answer(plain.get_item(TableName=TABLE, Key=KEY)) == {"Item": ITEM}
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 200
    updated = fast.update_item(
        TableName=TABLE,
        Key=KEY,
        UpdateExpression="SET n = n + :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
    )
    assert (
        updated["Attributes"]["n"] == {"N": "2"} and updated["Attributes"]["blob"] == ITEM["blob"]
    )
    fast.batch_write_item(
        RequestItems={
            TABLE: [
                {"PutRequest": {"Item": {"PK": {"S": "p"}, "SK": {"S": f"q{i}"}}}} for i in range(3)
            ]
        }
    )
    query = {
        "TableName": TABLE,
        "KeyConditionExpression": "PK = :p",
        "ExpressionAttributeValues": {":p": {"S": "p"}},
        "Limit": 2,
    }
    assert answer(fast.query(**query)) == answer(plain.query(**query))
    keys = [KEY, {"PK": {"S": "p"}, "SK": {"S": "q1"}}]
    batch = fast.batch_get_item(RequestItems={TABLE: {"Keys": keys}})
    assert sorted(i["SK"]["S"] for i in batch["Responses"][TABLE]) == ["q1", "s"]
    fast.delete_item(TableName=TABLE, Key=KEY)
    assert "Item" not in fast.get_item(TableName=TABLE, Key=KEY)


def test_a_failed_condition_is_botocores_error_with_the_old_item(clients):
    fast, plain = clients
    plain.put_item(TableName=TABLE, Item=ITEM)
    failing = {
        "TableName": TABLE,
        "Item": ITEM,
        "ConditionExpression": "attribute_not_exists(PK)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    errors = []
    for client in (fast, plain):
        with pytest.raises(client.exceptions.ConditionalCheckFailedException) as caught:
            client.put_item(**failing)
        errors.append(caught.value.response)
    assert answer(errors[0]) == answer(errors[1])
    assert errors[0]["Item"] == ITEM and errors[0]["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_a_cancelled_transaction_carries_its_reasons(clients):
    fast, plain = clients
    plain.put_item(TableName=TABLE, Item=ITEM)
    actions = [
        {"Put": {"TableName": TABLE, "Item": {"PK": {"S": "p"}, "SK": {"S": "other"}}}},
        {
            "Update": {
                "TableName": TABLE,
                "Key": KEY,
                "UpdateExpression": "SET n = :two",
                "ConditionExpression": "n = :two",
                "ExpressionAttributeValues": {":two": {"N": "2"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
    ]
    reasons = []
    for client in (fast, plain):
        with pytest.raises(ClientError) as caught:
            client.transact_write_items(TransactItems=actions)
        assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
        reasons.append(caught.value.response["CancellationReasons"])
    assert reasons[0] == reasons[1]
    assert reasons[0][1]["Code"] == "ConditionalCheckFailed" and reasons[0][1]["Item"] == ITEM
    assert "Item" not in plain.get_item(
        TableName=TABLE, Key={"PK": {"S": "p"}, "SK": {"S": "other"}}
    )


def test_handlers_on_botocores_events_see_every_call(clients):
    fast, _ = clients
    seen = []
    events = fast.meta.events
    events.register("before-parameter-build.dynamodb", lambda model, **_: seen.append(model.name))
    events.register("after-call.dynamodb", lambda parsed, **_: seen.append(sorted(parsed)))

    def refuse(**_):
        raise ClientError({"Error": {"Code": "ThrottlingException"}}, "PutItem")

    events.register("before-call.dynamodb.PutItem", refuse)
    fast.get_item(TableName=TABLE, Key=KEY)
    with pytest.raises(ClientError, match="ThrottlingException"):
        fast.put_item(TableName=TABLE, Item=ITEM)
    assert seen == ["GetItem", ["ResponseMetadata"], "PutItem"]


class Refusing(BaseHTTPRequestHandler):
    """Answers every request with `status` and `body`, counting them."""

    status, body, requests = 500, b"{}", []

    def do_POST(self):
        self.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_):
        pass


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (500, b"{}", "500"),
        (
            400,
            b'{"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "x"}',
            "ThrottlingException",
        ),
    ],
)
def test_retries_are_botocores_and_bounded(monkeypatch, calls, status, body, code):
    Refusing.status, Refusing.body, Refusing.requests = status, body, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setattr(aws, "_backoff", lambda attempt, throttled: 0)
    try:
        with pytest.raises(ClientError) as caught:
            calls(aws.client("dynamodb", attempts=3)).transact_write_items(TransactItems=[])
    finally:
        server.shutdown()
    assert caught.value.response["Error"]["Code"] == code
    assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 2
    assert aws_unavailable(caught.value)
    # One idempotency token (botocore's, filled in before the first attempt) for all three.
    assert (
        len(Refusing.requests) == 3
        and len({r["ClientRequestToken"] for r in Refusing.requests}) == 1
    )


def test_an_unreachable_endpoint_is_botocores_connection_error(monkeypatch, calls):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setattr(aws, "_backoff", lambda attempt, throttled: 0)
    with pytest.raises(EndpointConnectionError) as caught:
        calls(aws.client("dynamodb", attempts=2)).get_item(TableName=TABLE, Key=KEY)
    assert aws_unavailable(caught.value)


def test_eventbridge_events_are_put_through_it(endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    events = aws.client("events")
    assert isinstance(events, aws.JsonClient)
    entry = {"Source": "test", "DetailType": "t", "Detail": '{"a": 1}', "EventBusName": "default"}
    assert events.put_events(Entries=[entry])["FailedEntryCount"] == 0
    with pytest.raises(events.exceptions.ResourceNotFoundException):
        events.describe_event_bus(Name="missing")  # botocore's own, through the wrapper


@pytest.mark.parametrize("token", [None, "a-session-token"])
def test_requests_are_signed_as_botocore_signs_them(monkeypatch, token):
    """moto does not check signatures: the signer is checked against botocore's SigV4Auth."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    credentials = Credentials("AKIDEXAMPLE", "secret/key", token)
    body = b'{"TableName": "t"}'
    target = {
        "x-amz-target": "DynamoDB_20120810.GetItem",
        "content-type": "application/x-amz-json-1.0",
    }
    for url, host in (
        ("https://dynamodb.eu-west-1.amazonaws.com/", "dynamodb.eu-west-1.amazonaws.com"),
        ("http://127.0.0.1:5000/", "127.0.0.1:5000"),
    ):
        signer = aws._Signer(credentials, host, "eu-west-1", "dynamodb")
        for sent in (body, b'{"TableName": "other"}'):  # the second with the day's key kept
            theirs = AWSRequest("POST", url, data=sent, headers=dict(target))
            SigV4Auth(credentials, "dynamodb", "eu-west-1").add_auth(theirs)
            ours = signer.headers(target, sent, stamp=theirs.headers["X-Amz-Date"])
            assert ours["authorization"] == theirs.headers["Authorization"]
            assert ours.get("x-amz-security-token") == token


def test_in_lambda_the_trace_header_goes_along(clients, monkeypatch):
    """botocore's handlers add X-Amzn-Trace-Id to a Lambda's requests (recursion detection)."""
    fast, _ = clients
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "TurnsFunction")
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793")
    sent = []
    fast.meta.events.register("before-send.dynamodb", lambda request, **_: sent.append(request))
    fast.get_item(TableName=TABLE, Key=KEY)
    assert sent[0].headers["X-Amzn-Trace-Id"].startswith("Root=1-5759e988")


@pytest.fixture
def unwatched(monkeypatch):
    """Clients made as in a Lambda, where only botocore has handlers on their events (moto's
    mock, imported by these tests, adds one that makes every client emit them)."""
    from botocore import handlers

    own = [h for h in handlers.BUILTIN_HANDLERS if h[1].__module__.startswith("botocore")]
    monkeypatch.setattr(handlers, "BUILTIN_HANDLERS", own)


class Recording(BaseHTTPRequestHandler):
    """Answers each request with the next of `statuses` (then 200), an empty JSON object as
    its body; keeps each request's headers and JSON body."""

    statuses: list[int] = []
    bodies: list[bytes] = []
    requests: list[tuple[dict, dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((dict(self.headers), body))
        answer = self.bodies.pop(0) if self.bodies else b"{}"
        self.send_response(self.statuses.pop(0) if self.statuses else 200)
        self.send_header("Content-Length", str(len(answer)))
        self.send_header("x-amzn-RequestId", "R1")
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_):
        pass


@pytest.fixture
def recording(monkeypatch):
    Recording.statuses, Recording.bodies, Recording.requests = [], [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setattr(aws, "_backoff", lambda attempt, throttled: 0)
    yield Recording
    server.shutdown()


def test_unwatched_a_client_does_what_botocores_handlers_would(
    unwatched, recording, calls, monkeypatch
):
    """Without the events: one idempotency token across a transaction's retries, and in a
    Lambda the trace header (recursion detection) on every request."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "TurnsFunction")
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793")
    recording.statuses = [500]
    client = aws.client("dynamodb", attempts=3)
    calls(client).transact_write_items(TransactItems=[])
    assert not client._events.listening  # nobody registered: no events were emitted
    assert len(recording.requests) == 2  # the 500, then the same request again
    assert len({body["ClientRequestToken"] for _, body in recording.requests}) == 1
    for headers, _ in recording.requests:
        assert headers["X-Amzn-Trace-Id"].startswith("Root=1-5759e988")
    failed = b'{"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}'
    recording.statuses, recording.bodies = [400], [failed]
    with pytest.raises(client.exceptions.ConditionalCheckFailedException) as caught:
        calls(client).put_item(TableName=TABLE, Item=ITEM)
    meta = caught.value.response["ResponseMetadata"]
    assert meta["HTTPStatusCode"] == 400 and meta["RequestId"] == "R1"
    assert caught.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_unwatched_a_client_makes_no_botocore_client_until_something_asks_for_one(
    unwatched, recording, monkeypatch
):
    """Keys, region and endpoint in the environment, as in an on-demand Lambda: calls and their
    errors need no botocore client. An error met before one is made is the class the client's
    `exceptions` names once it is, for this client and any later one of the service."""
    monkeypatch.setattr(aws, "_ERRORS", {})
    monkeypatch.setattr(aws, "_MADE_ERRORS", {})
    client = aws.client("dynamodb", attempts=1)
    client.prepare()
    assert client.put_item(TableName=TABLE, Item=ITEM)["ResponseMetadata"]["RequestId"] == "R1"
    failed = b'{"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}'
    recording.statuses, recording.bodies = [400], [failed]
    with pytest.raises(ClientError) as caught:
        client.put_item(TableName=TABLE, Item=ITEM)
    assert client._made is None  # nothing so far needed botocore's client
    assert caught.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert type(caught.value) is client.exceptions.ConditionalCheckFailedException
    assert client._made is not None  # `exceptions` is the botocore client's
    recording.statuses, recording.bodies = [400], [failed]
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(TableName=TABLE, Item=ITEM)
    later = aws.client("dynamodb")
    assert later.exceptions.ConditionalCheckFailedException is type(caught.value)
    assert later.exceptions.TransactionCanceledException.__module__ == "botocore.errorfactory"


_CALLS_IN_A_FRESH_PROCESS = """
import asyncio, json, sys
from agents_core import aws, blocking
client = aws.client("dynamodb", attempts=1)
client.put_item(TableName="t", Item={"PK": {"S": "p"}, "SK": {"S": "s"}})
asyncio.run(blocking.run(lambda: client.transact_write_items(TransactItems=[])))
try:
    client.put_item(TableName="t", Item={"PK": {"S": "p"}, "SK": {"S": "s"}})
except Exception as err:
    print(json.dumps([type(err).__name__, sorted(m for m in sys.modules if m.startswith("botocore.")
        and not m.startswith(("botocore.exceptions", "botocore.vendored")))]))
"""


def test_a_client_from_the_environment_imports_no_more_of_botocore_than_its_exceptions(
    recording, tmp_path
):
    """Its calls, blocking and on the loop, and an error answer, in a fresh process: botocore's
    session, client and request types (which import urllib3) are left to whatever asks for
    them; a first run in a new 192 MB container paid most of a second for them."""
    failed = b'{"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}'
    recording.statuses, recording.bodies = [200, 200, 400], [b"{}", b"{}", failed]
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(Path(aws.__file__).parent.parent),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"],
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
    }
    done = subprocess.run(
        [sys.executable, "-c", _CALLS_IN_A_FRESH_PROCESS],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == ["ConditionalCheckFailedException", []]
    assert len(recording.requests) == 3


def _fresh_environment(monkeypatch, tmp_path, **variables):
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


KEYS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret/key"}


@pytest.mark.parametrize(
    "variables",
    [
        {"AWS_DEFAULT_REGION": "us-east-1"},
        {"AWS_DEFAULT_REGION": "eu-central-2", "AWS_SESSION_TOKEN": "a-token"},
        {"AWS_DEFAULT_REGION": "ap-southeast-4", "AWS_SECURITY_TOKEN": "an-old-token"},
        {"AWS_DEFAULT_REGION": "il-central-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000"},
        {
            "AWS_DEFAULT_REGION": "us-west-2",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
            "AWS_ENDPOINT_URL_DYNAMODB": "http://localhost:8000/",
            "AWS_ENDPOINT_URL_EVENTBRIDGE": "http://localhost:4010",
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": "https://secrets.example:8443",
        },
    ],
)
def test_the_endpoint_region_and_keys_read_from_the_environment_are_botocores(
    monkeypatch, tmp_path, variables
):
    import botocore.session

    _fresh_environment(monkeypatch, tmp_path, **{**KEYS, **variables})
    for service in aws.PROTOCOLS:
        direct = aws._direct(service)
        session = botocore.session.get_session()
        made = session.create_client(service)
        assert direct is not None, service
        assert (direct.url, direct.region) == (made.meta.endpoint_url, made.meta.region_name)
        frozen = session.get_credentials().get_frozen_credentials()
        assert tuple(direct.credentials) == (frozen.access_key, frozen.secret_key, frozen.token)


@pytest.mark.parametrize(
    "variables",
    [
        {"AWS_DEFAULT_REGION": "cn-north-1"},
        {"AWS_DEFAULT_REGION": "us-gov-west-1"},
        {"AWS_DEFAULT_REGION": "us-east-1", "AWS_USE_FIPS_ENDPOINT": "true"},
        {"AWS_DEFAULT_REGION": "us-east-1", "AWS_USE_DUALSTACK_ENDPOINT": "true"},
        {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCOUNT_ID": "123456789012"},
        {"AWS_DEFAULT_REGION": "us-east-1", "AWS_CREDENTIAL_EXPIRATION": "2030-01-01T00:00:00Z"},
        {"AWS_REGION": "us-east-1"},  # botocore reads AWS_DEFAULT_REGION
        {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": ""},
    ],
)
def test_what_only_botocore_resolves_is_left_to_it(monkeypatch, tmp_path, variables):
    _fresh_environment(monkeypatch, tmp_path, **{**KEYS, **variables})
    assert all(aws._direct(service) is None for service in aws.PROTOCOLS)


def test_a_config_file_is_left_to_botocore(monkeypatch, tmp_path):
    _fresh_environment(monkeypatch, tmp_path, **KEYS, AWS_DEFAULT_REGION="us-east-1")
    (tmp_path / "config").write_text("[default]\nendpoint_url = http://127.0.0.1:9\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert aws._direct("dynamodb") is None
    monkeypatch.setattr(aws, "_session", functools.cache(aws._session.__wrapped__))  # reads it
    client = aws.client("dynamodb")
    assert client._url == "http://127.0.0.1:9/"  # botocore's reading of it


def test_each_services_protocol_is_what_botocores_model_of_it_says():
    """What JsonClient sends without botocore's client (target, JSON version, signing name,
    idempotency tokens, method names) against botocore's service models."""
    import botocore.session
    from botocore import xform_name

    session = botocore.session.get_session()
    for service, protocol in aws.PROTOCOLS.items():
        model = session.get_service_model(service)
        assert protocol.target == model.metadata["targetPrefix"]
        assert protocol.json_version == model.metadata["jsonVersion"]
        assert protocol.signing_name == model.signing_name
        assert protocol.service_id == model.service_id.hyphenize()
        for operation in aws.FAST_OPERATIONS[service]:
            token = protocol.idempotent.get(operation)
            assert model.operation_model(operation).idempotent_members == ([token] if token else [])
            assert aws._snake_case(operation) == xform_name(operation)


@pytest.mark.parametrize(
    "trace", ["Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f", "a b/ü"]
)
def test_the_trace_header_is_botocores_recursion_detection(monkeypatch, trace):
    from botocore import handlers

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "TurnsFunction")
    monkeypatch.setenv("_X_AMZN_TRACE_ID", trace)
    ours, theirs = {}, {"headers": {}}
    aws._trace_header(ours)
    handlers.add_recursion_detection_header(theirs)
    assert ours == theirs["headers"]


def test_unwatched_a_client_emits_botocores_events_once_a_handler_is_registered(
    unwatched, recording, calls
):
    client = aws.client("dynamodb")
    calls(client).get_item(TableName=TABLE, Key=KEY)
    seen = []
    client.meta.events.register("before-send.dynamodb", lambda request, **_: seen.append(request))
    client.meta.events.register("after-call.dynamodb", lambda parsed, **_: seen.append(parsed))
    calls(client).get_item(TableName=TABLE, Key=KEY)
    assert len(recording.requests) == 2
    assert json.loads(seen[0].body) == {"TableName": TABLE, "Key": KEY}
    assert seen[1]["ResponseMetadata"]["HTTPStatusCode"] == 200 and len(seen) == 2


class KeptThenClosed(BaseHTTPRequestHandler):
    """HTTP/1.1: answers in chunks, keeps the connection, and closes it without a word after
    `serve` answers on it (a server dropping an idle connection)."""

    protocol_version = "HTTP/1.1"
    serve = 2
    connections: list[int] = []

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        served = getattr(self, "served", 0) + 1
        self.served = served
        if served == 1:
            KeptThenClosed.connections.append(1)
        body = json.dumps({"Item": ITEM_JSON, "served": served}).encode()
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for part in (body[:10], body[10:]):
            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        if served >= self.serve:
            self.close_connection = True

    def log_message(self, *_):
        pass


ITEM_JSON = {"PK": {"S": "p"}, "blob": {"B": "AP8="}}


@pytest.mark.parametrize("on_loop", [False, True])
def test_chunked_answers_kept_connections_and_a_dropped_one_are_read_as_botocore_would(
    monkeypatch, on_loop
):
    KeptThenClosed.connections = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), KeptThenClosed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setattr(aws, "_backoff", lambda attempt, throttled: 0)
    client = aws.client("dynamodb", attempts=1)  # no retries: a replaced connection is not one

    def five() -> list[dict]:
        return [client.get_item(TableName=TABLE, Key=KEY) for _ in range(5)]

    try:
        answers = asyncio.run(blocking.run(five)) if on_loop else five()
    finally:
        server.shutdown()
    assert all(a["Item"] == {"PK": {"S": "p"}, "blob": {"B": b"\x00\xff"}} for a in answers)
    assert [a["served"] for a in answers] == [1, 2, 1, 2, 1]  # two answers per connection
    assert len(KeptThenClosed.connections) == 3


class Slow(BaseHTTPRequestHandler):
    """Answers a GetItem after `delay` seconds."""

    delay = 0.3

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.delay)
        body = json.dumps({"Item": ITEM_JSON}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


def test_on_the_loop_other_tasks_run_while_a_call_waits_for_its_answer(monkeypatch):
    """A store's blocking code under `blocking.run` runs on the loop's thread, and while its
    DynamoDB request is out the loop serves the run's other tasks (the model's stream)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    client = aws.client("dynamodb")
    seen: list[str] = []

    def read() -> dict:
        seen.append("asked")
        assert threading.current_thread() is threading.main_thread()
        answer = client.get_item(TableName=TABLE, Key=KEY)
        seen.append("answered")
        return answer

    async def ticks() -> None:
        while True:
            await asyncio.sleep(0.02)
            seen.append("tick")

    async def main() -> dict:
        ticking = asyncio.create_task(ticks())
        try:
            return await blocking.run(read)
        finally:
            ticking.cancel()

    try:
        answer = asyncio.run(main())
    finally:
        server.shutdown()
    assert answer["Item"] == {"PK": {"S": "p"}, "blob": {"B": b"\x00\xff"}}
    assert seen[0] == "asked" and seen[-1] == "answered"
    assert seen.count("tick") >= 5  # 0.3 s of waiting, a tick each 0.02 s


def test_retry_waits_are_drawn_apart_from_random_s_state():
    """Containers restored from one SnapStart snapshot share `random`'s state: waits drawn
    from it would send their retries in step. Reseeded alike, the waits still differ."""
    waits = []
    for _ in range(2):
        random.seed(7)
        waits.append((aws._backoff(3, throttled=True), aws.jitter(0.01, 0.05)))
    assert waits[0][0] != waits[1][0] and waits[0][1] != waits[1][1]
    assert all(0 <= wait <= 8 and 0.01 <= spread <= 0.05 for wait, spread in waits)


def test_a_secret_is_read_through_it_as_botocore_reads_it(endpoint, monkeypatch):
    """GetSecretValue (JSON 1.1) through the lean path: the same answer as botocore's, and a
    missing secret is botocore's error."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    plain = boto3.client("secretsmanager", region_name="us-east-1")
    name = f"model-key-{time.time_ns()}"
    plain.create_secret(Name=name, SecretString='{"api_key": "sk-test"}')
    secrets = aws.client("secretsmanager")
    assert isinstance(secrets, aws.JsonClient)
    fast = secrets.get_secret_value(SecretId=name)
    slow = plain.get_secret_value(SecretId=name)
    for field in ("ARN", "Name", "SecretString", "VersionId", "VersionStages"):
        assert fast[field] == slow[field]
    with pytest.raises(secrets.exceptions.ResourceNotFoundException):
        secrets.get_secret_value(SecretId=f"{name}-missing")
