"""The local AWS keeps DynamoDB's semantics under concurrent requests.

moto 5.2.5 runs a TransactWriteItems on the live table and, when a condition fails, puts back a
copy of the table taken before it began: a write another request made in between is lost. These
tests pin the interleaving down (the transaction waits, right after its copy, until the test lets
it go on), show the loss on moto's own server, and show that functions/local/serial_moto.py,
which every local run uses, keeps the write (it runs transactions one at a time, judging every
condition before it writes, so it needs no copy).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import boto3
import moto.dynamodb.models as dynamodb_models
import pytest
from agents_core.store.schema import create_table_if_missing
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from .local_server import free_port, local_module

serial_moto = local_module("serial_moto")
TABLE = "faithfulness"


@contextmanager
def paused_after_copy():
    """Each transaction, once it has copied its tables, waits for `go` (bounded)."""
    copied, go = threading.Event(), threading.Event()
    real_deepcopy = dynamodb_models.copy.deepcopy

    class CopyThenWait:
        @staticmethod
        def deepcopy(value, *args):
            snapshot = real_deepcopy(value, *args)
            copied.set()
            go.wait(timeout=10)
            return snapshot

    dynamodb_models.copy = CopyThenWait
    try:
        yield copied, go
    finally:
        go.set()
        dynamodb_models.copy = __import__("copy")


@contextmanager
def paused_in_transaction():
    """serial_moto judges a transaction's conditions before writing, with no table copy: the
    first item it reads waits for `go` (bounded)."""
    started, go = threading.Event(), threading.Event()
    real_get_item = dynamodb_models.DynamoDBBackend.get_item

    def get_item(backend, *args, **kwargs):
        if not started.is_set():
            started.set()
            go.wait(timeout=10)
        return real_get_item(backend, *args, **kwargs)

    dynamodb_models.DynamoDBBackend.get_item = get_item
    try:
        yield started, go
    finally:
        go.set()
        dynamodb_models.DynamoDBBackend.get_item = real_get_item


def _client(endpoint: str):
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")


def _failing_transaction(client) -> None:
    """A put whose condition fails (one action: moto copies the table once): DynamoDB changes
    nothing."""
    with pytest.raises(ClientError, match="TransactionCanceled"):
        client.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": {"PK": {"S": "t"}, "SK": {"S": "a"}},
                        "ConditionExpression": "attribute_exists(PK)",
                    }
                }
            ]
        )


def _other_write(client) -> None:
    client.put_item(TableName=TABLE, Item={"PK": {"S": "other"}, "SK": {"S": "kept"}})


def _stored(client, pk: str, sk: str) -> bool:
    return "Item" in client.get_item(TableName=TABLE, Key={"PK": {"S": pk}, "SK": {"S": sk}})


@pytest.fixture
def moto_server():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def serial_server():
    server = serial_moto.SerialMotoServer()
    yield server.start()
    server.stop()


def test_moto_alone_loses_a_write_made_while_a_failing_transaction_runs(moto_server):
    """The fault, on moto's own server: why local runs use serial_moto."""
    client = _client(moto_server)
    create_table_if_missing(client, TABLE)
    with paused_after_copy() as (copied, go), ThreadPoolExecutor() as background:
        transaction = background.submit(_failing_transaction, client)
        assert copied.wait(timeout=10)
        _other_write(client)  # moto answers it at once, while the transaction is under way
        assert _stored(client, "other", "kept")
        go.set()
        transaction.result(timeout=10)
    assert not _stored(client, "other", "kept")  # put back to the copy: the write is gone


def test_serial_moto_applies_a_write_after_a_failing_transaction_not_inside_it(serial_server):
    client = _client(serial_server)
    create_table_if_missing(client, TABLE)
    with paused_in_transaction() as (copied, go), ThreadPoolExecutor() as background:
        transaction = background.submit(_failing_transaction, client)
        assert copied.wait(timeout=10)
        writer = background.submit(_other_write, _client(serial_server))
        with pytest.raises(TimeoutError):  # it waits for the transaction: requests are ordered
            writer.result(timeout=0.5)
        go.set()
        transaction.result(timeout=10)
        writer.result(timeout=10)
    assert _stored(client, "other", "kept")
    assert not _stored(client, "t", "a")  # and the transaction changed nothing


def test_serial_moto_serves_other_services_while_dynamodb_is_busy(serial_server):
    """Only DynamoDB is taken one request at a time: a queue's long poll blocks nothing."""
    client = _client(serial_server)
    create_table_if_missing(client, TABLE)
    sqs = boto3.client("sqs", endpoint_url=serial_server, region_name="us-east-1")
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    with paused_in_transaction() as (copied, go), ThreadPoolExecutor() as background:
        transaction = background.submit(_failing_transaction, client)
        assert copied.wait(timeout=10)
        sqs.send_message(QueueUrl=url, MessageBody="m")  # answered while the lock is held
        assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "m"
        go.set()
        transaction.result(timeout=10)


def _put(pk: str, sk: str, **extra) -> dict:
    return {"Put": {"TableName": TABLE, "Item": {"PK": {"S": pk}, "SK": {"S": sk}}, **extra}}


def test_serial_moto_judges_every_condition_before_writing_and_names_the_failed_one(
    serial_server,
):
    client = _client(serial_server)
    create_table_if_missing(client, TABLE)
    client.put_item(TableName=TABLE, Item={"PK": {"S": "c"}, "SK": {"S": "taken"}, "n": {"N": "1"}})
    with pytest.raises(ClientError) as caught:
        client.transact_write_items(
            TransactItems=[
                _put("c", "new"),
                _put(
                    "c",
                    "taken",
                    ConditionExpression="attribute_not_exists(PK)",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
            ]
        )
    reasons = caught.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "ConditionalCheckFailed"]
    assert reasons[1]["Item"]["n"] == {"N": "1"}
    assert not _stored(client, "c", "new")  # the first action, whose condition held, waited
    client.transact_write_items(TransactItems=[_put("c", "new"), _put("c", "other")])
    assert _stored(client, "c", "new") and _stored(client, "c", "other")


def test_serial_moto_puts_back_what_a_transaction_wrote_before_a_write_failed(serial_server):
    client = _client(serial_server)
    create_table_if_missing(client, TABLE)
    client.put_item(TableName=TABLE, Item={"PK": {"S": "d"}, "SK": {"S": "kept"}, "n": {"N": "1"}})
    with pytest.raises(ClientError):
        client.transact_write_items(
            TransactItems=[
                _put("d", "written"),
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"PK": {"S": "d"}, "SK": {"S": "kept"}},
                        "UpdateExpression": "SET n = n + :one",  # a string plus a number
                        "ExpressionAttributeValues": {":one": {"S": "x"}},
                    }
                },
            ]
        )
    assert not _stored(client, "d", "written")
    kept = client.get_item(TableName=TABLE, Key={"PK": {"S": "d"}, "SK": {"S": "kept"}})
    assert kept["Item"]["n"] == {"N": "1"}


def test_serial_moto_keeps_a_json_clients_connection_open_between_requests(serial_server):
    """As AWS does: a DynamoDB call pays no new connection locally either (werkzeug alone
    closes each one, and its drain would swallow the next request on a kept one)."""
    import http.client
    from urllib.parse import urlsplit

    endpoint = urlsplit(serial_server)
    conn = http.client.HTTPConnection(endpoint.hostname, endpoint.port, timeout=10)
    headers = {
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Content-Type": "application/x-amz-json-1.0",
        "Authorization": "AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/dynamodb/aws4_request,"
        " SignedHeaders=host, Signature=0",
    }
    sockets = []
    try:
        for _ in range(3):
            conn.request("POST", "/", body=b"{}", headers=headers)
            answer = conn.getresponse()
            assert answer.status == 200 and "TableNames" in answer.read().decode()
            assert answer.getheader("Connection") is None
            sockets.append(conn.sock)
    finally:
        conn.close()
    assert sockets[0] is not None and sockets.count(sockets[0]) == 3  # one connection for all
    other = http.client.HTTPConnection(endpoint.hostname, endpoint.port, timeout=10)
    try:
        other.request("GET", "/moto-api/data.json")  # not a JSON-protocol request: closed
        answer = other.getresponse()
        answer.read()
        assert answer.getheader("Connection") == "close"
    finally:
        other.close()


def test_serial_moto_finds_each_json_services_app_once(monkeypatch):
    """moto's dispatcher lists its package's folders to find a request's service; serial_moto
    asks it once per service, and each service's requests still reach their own app."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    asked: list[str] = []
    real = DomainDispatcherApplication.get_application

    def get_application(dispatcher, environ):
        asked.append(environ.get("HTTP_X_AMZ_TARGET", ""))
        return real(dispatcher, environ)

    monkeypatch.setattr(DomainDispatcherApplication, "get_application", get_application)
    server = serial_moto.SerialMotoServer()
    endpoint = server.start()
    try:
        client = _client(endpoint)
        create_table_if_missing(client, TABLE)
        _other_write(client)
        assert _stored(client, "other", "kept")
        sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
        url = sqs.create_queue(QueueName="once")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="m")
        assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "m"
    finally:
        server.stop()
    services = [target.partition(".")[0] for target in asked]
    assert sorted(services) == ["AmazonSQS", "DynamoDB_20120810"]
