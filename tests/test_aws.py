"""The shared AWS session: its quick data loader still gives botocore what it needs."""

from __future__ import annotations

from collections import OrderedDict

from agents_core import aws
from moto import mock_aws

from .conftest import TABLE


def test_clients_work_with_plain_data_and_known_services():
    loader = aws._session().get_component("data_loader")
    assert loader.list_available_services("service-2") == list(aws.SERVICES)
    endpoints = loader.load_data("endpoints")
    assert type(endpoints) is dict and not isinstance(endpoints, OrderedDict)
    with mock_aws():
        dynamodb = aws.client("dynamodb")
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.put_item(TableName=TABLE, Item={"PK": {"S": "a"}, "n": {"N": "1"}})
        item = dynamodb.get_item(TableName=TABLE, Key={"PK": {"S": "a"}})["Item"]
        assert item == {"PK": {"S": "a"}, "n": {"N": "1"}}
        assert aws.client("events").meta.region_name == "us-east-1"
