"""Build stores from settings."""

from __future__ import annotations

from .. import aws
from ..settings import Settings
from .agents import AgentStore


def dynamodb_client():
    return aws.client("dynamodb")


def agent_store_from_settings(settings: Settings, client=None) -> AgentStore:
    return AgentStore(
        client or dynamodb_client(),
        settings.table_name,
        ephemeral_session_ttl_seconds=settings.ephemeral_session_ttl_seconds,
    )
