"""Registered tool groups (MCP servers) in the single table, one partition per tenant.

The built-in groups are not stored: every tenant has them (`services/tools.py`). A group's tools
are not stored either; they are listed from its server when asked (the runtime caches the list).

    store = ToolGroupStore(aws.client("dynamodb"), "serverless-agents")
    store.register("default", ToolGroup(identifier="mcp::docs", provider_id=..., mcp_endpoint=...))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ..api.tools import ToolGroup
from ..errors import Conflict, NotFound, TooLarge
from . import keys
from .items import MAX_ITEM_BYTES, item_size, json_body, parse_body
from .table import Table, condition_failed, key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class ToolGroupStore:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._t = Table(client, table_name)

    def register(self, tenant: str, group: ToolGroup) -> ToolGroup:
        """Store a new group. Registering the same definition again is a no-op that answers
        the stored group; a different definition under a taken id is a Conflict."""
        item = {
            **key(keys.toolgroups_pk(tenant), keys.toolgroup_sk(group.identifier)),
            "body": {"S": json_body(group)},
        }
        if item_size(item) > MAX_ITEM_BYTES:
            raise TooLarge(f"Tool group is too large to store (limit {MAX_ITEM_BYTES} bytes)")
        try:
            self._t.client.put_item(
                TableName=self._t.name,
                Item=item,
                ConditionExpression="attribute_not_exists(PK)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            existing = parse_body(ToolGroup, err.response["Item"])
            if existing.model_dump() == group.model_dump():
                return existing
            raise Conflict(
                f"Tool group {group.identifier} is already registered with another definition;"
                " unregister it first"
            ) from err
        return group

    def get(self, tenant: str, toolgroup_id: str) -> ToolGroup:
        item = self._t.get(keys.toolgroups_pk(tenant), keys.toolgroup_sk(toolgroup_id))
        if item is None:
            raise NotFound(f"Tool group {toolgroup_id} not found")
        return parse_body(ToolGroup, item)

    def list(self, tenant: str) -> list[ToolGroup]:
        """Every registered group of the tenant, by id."""
        items = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.toolgroups_pk(tenant)},
                    ":sk": {"S": keys.TOOLGROUP_PREFIX},
                },
                "ConsistentRead": True,
            }
        )
        return [parse_body(ToolGroup, item) for item in items]

    def unregister(self, tenant: str, toolgroup_id: str) -> None:
        item_key: dict[str, Any] = key(keys.toolgroups_pk(tenant), keys.toolgroup_sk(toolgroup_id))
        try:
            self._t.client.delete_item(
                TableName=self._t.name, Key=item_key, ConditionExpression="attribute_exists(PK)"
            )
        except ClientError as err:
            if condition_failed(err):
                raise NotFound(f"Tool group {toolgroup_id} not found") from err
            raise
