"""Build stores from settings. boto3 honours AWS_ENDPOINT_URL, so local runs need no special case."""

from __future__ import annotations

from ..settings import Settings
from .agents import AgentStore


def dynamodb_client():
    """A DynamoDB client with bounded timeouts: a stuck call fails fast instead of eating the Lambda."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=2,
        read_timeout=5,
        retries={"mode": "standard", "max_attempts": 4},
        tcp_keepalive=True,
    )
    return boto3.client("dynamodb", config=config)


def agent_store_from_settings(settings: Settings, client=None) -> AgentStore:
    return AgentStore(
        client or dynamodb_client(),
        settings.table_name,
        ephemeral_session_ttl_seconds=settings.ephemeral_session_ttl_seconds,
    )
