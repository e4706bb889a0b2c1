"""Creating what is missing tolerates a creator racing this one: two local servers started at
once against one AWS endpoint both serve, sharing the table, queues, bus and buckets the first
made. The unit tests put the other creator exactly between the check and the create."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import boto3
import httpx
import pytest
from agents_core.lifecycle import ensure_event_bus
from agents_core.services.resume_queue import ensure_resume_queue
from agents_core.store.schema import create_table_if_missing
from moto import mock_aws

from .local_server import aws_in_a_process, started_server


class CreatedMeanwhile:
    """A client whose `check` call finds nothing, after another creator made the resource with
    `create` (the same call this client will make next)."""

    def __init__(self, client, check: str, create, missing: str) -> None:
        self.client, self.check, self.create, self.missing = client, check, create, missing

    def __getattr__(self, name: str):
        if name != self.check:
            return getattr(self.client, name)

        def missing_now(**kwargs):
            self.create(self.client)  # the other creator, just now
            error = getattr(self.client.exceptions, self.missing)
            raise error({"Error": {"Code": self.missing, "Message": "gone"}}, self.check)

        return missing_now


@pytest.fixture
def aws(aws_env):
    with mock_aws():
        yield


def test_a_table_another_creator_made_meanwhile_is_used(aws):
    real = boto3.client("dynamodb", region_name="us-east-1")
    racing = CreatedMeanwhile(
        real,
        "describe_table",
        lambda c: create_table_if_missing(c, "t"),
        "ResourceNotFoundException",
    )
    assert create_table_if_missing(racing, "t") is False
    assert real.describe_table(TableName="t")["Table"]["TableStatus"] == "ACTIVE"


def test_a_bus_another_creator_made_meanwhile_is_used(aws):
    real = boto3.client("events", region_name="us-east-1")
    racing = CreatedMeanwhile(
        real,
        "describe_event_bus",
        lambda c: c.create_event_bus(Name="b"),
        "ResourceNotFoundException",
    )
    ensure_event_bus(racing, "b")
    assert real.describe_event_bus(Name="b")["Name"] == "b"


def test_queues_made_twice_at_once_are_one_pair(aws):
    sqs = boto3.client("sqs", region_name="us-east-1")
    with ThreadPoolExecutor(4) as pool:
        urls = list(pool.map(lambda _: ensure_resume_queue(sqs, "q"), range(4)))
    assert len(set(urls)) == 1
    assert len(sqs.list_queues()["QueueUrls"]) == 2  # the queue and its DLQ


def test_two_servers_started_at_once_on_one_endpoint_both_serve_one_table():
    with aws_in_a_process() as endpoint:
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "both",
            "AWS_SECRET_ACCESS_KEY": "both",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        with ExitStack() as servers, ThreadPoolExecutor(2) as pool:
            # Both start together: neither waits for what the other creates.
            started = [pool.submit(servers.enter_context, started_server(env)) for _ in "ab"]
            first, second = (s.result() for s in started)
            agent = httpx.post(
                f"{first.base}/v1/agents",
                json={"agent_config": {"model": "m", "instructions": "x"}},
            ).json()
            again = httpx.get(f"{second.base}/v1/agents/{agent['agent_id']}")
            assert again.status_code == 200
