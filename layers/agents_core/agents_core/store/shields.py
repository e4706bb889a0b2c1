"""Registered shields in the single table: one partition per tenant (`T#{t}#SHIELDS`), one item
per shield (`SHIELD#{identifier}`), its Shield object as JSON in `body`.

    store = ShieldStore(aws.client("dynamodb"), "serverless-agents")
    store.put("default", Shield(identifier="guard", provider_id="offline"))
"""

from __future__ import annotations

from typing import Any

from ..api.safety import Shield
from ..errors import NotFound, TooLarge
from . import keys
from .items import MAX_ITEM_BYTES, item_size, json_body, parse_body
from .table import Table, key

#: BatchGetItem's limit: the shields one check may name.
MAX_SHIELDS_PER_READ = 100


class ShieldStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._t = Table(client, table_name)

    def put(self, tenant: str, shield: Shield) -> None:
        """Register (or replace) a shield: one PutItem."""
        item = {
            **key(keys.shields_pk(tenant), keys.shield_sk(shield.identifier)),
            "body": {"S": json_body(shield)},
        }
        if item_size(item) > MAX_ITEM_BYTES:
            raise TooLarge(f"Shield {shield.identifier} is too large to store")
        self._t.client.put_item(TableName=self._t.name, Item=item)

    def get(self, tenant: str, identifier: str) -> Shield:
        item = self._t.get(keys.shields_pk(tenant), keys.shield_sk(identifier))
        if item is None:
            raise NotFound(f"Shield {identifier} not found")
        return parse_body(Shield, item)

    def get_many(self, tenant: str, identifiers: list[str]) -> dict[str, Shield]:
        """The shields among `identifiers` that exist, in one BatchGetItem."""
        wanted = list(dict.fromkeys(identifiers))[:MAX_SHIELDS_PER_READ]
        if not wanted:
            return {}
        pk = keys.shields_pk(tenant)
        items = self._t.get_many(*[(pk, keys.shield_sk(i)) for i in wanted])
        shields = [parse_body(Shield, item) for item in items if item is not None]
        return {shield.identifier: shield for shield in shields}

    def list(self, tenant: str) -> list[Shield]:
        """Every shield of the tenant, by identifier: one Query (a page per MB)."""
        items = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.shields_pk(tenant)},
                    ":s": {"S": keys.SHIELD_PREFIX},
                },
                "ConsistentRead": True,
            }
        )
        return [parse_body(Shield, item) for item in items]

    def delete(self, tenant: str, identifier: str) -> None:
        old = self._t.client.delete_item(
            TableName=self._t.name,
            Key=key(keys.shields_pk(tenant), keys.shield_sk(identifier)),
            ReturnValues="ALL_OLD",
        )
        if "Attributes" not in old:
            raise NotFound(f"Shield {identifier} not found")
