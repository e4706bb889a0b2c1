"""Keys on the one table (docs/storage.md, "Keys"): found by hash, listed per tenant.

The key item's partition key is the key's hash, not the tenant: the authorizer knows only the
key when it looks, and a hash of 256 random bits leads nowhere else. Everything per tenant is
tenant first: the key list (GSI1 `T#{t}#APIKEYS`) and the tenant's usage-plan key
(`T#{t}#USAGE`). The authorizer's role may read `APIKEY#` partitions only (template.yaml).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequest, NotFound
from .keys import PREFIX, InvalidKey, Principal, hash_key, key_from_header, new_key

KEY_PK_PREFIX = "APIKEY#"
KEY_SK = "APIKEY"
USAGE_SK = "USAGE"
TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}")
MAX_NAME = 100


def _tenant(tenant: str) -> str:
    # As agents_core.store.keys escapes a tenant (a test keeps the two equal).
    return "T#" + tenant.replace("%", "%25").replace("#", "%23")


def key_pk(key_hash: str) -> str:
    return f"{KEY_PK_PREFIX}{key_hash}"


def keys_gsi1pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#APIKEYS"


def usage_pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#USAGE"


@dataclass(frozen=True)
class KeyRecord:
    """A stored key: everything but the key itself."""

    tenant: str
    key_id: str
    name: str
    created_at: int
    revoked_at: int | None = None
    usage_key: str | None = None

    @property
    def display(self) -> str:
        """How listings show the key: its id and the start of the key, never the secret."""
        return f"{PREFIX}{self.key_id}_..."


@dataclass(frozen=True)
class IssuedKey:
    """A key just created: `key` is shown to the caller once and stored nowhere."""

    key: str
    record: KeyRecord


def _record(item: dict[str, Any]) -> KeyRecord:
    return KeyRecord(
        tenant=item["tenant"]["S"],
        key_id=item["key_id"]["S"],
        name=item.get("name", {}).get("S", ""),
        created_at=int(item["created_at"]["N"]),
        revoked_at=int(item["revoked_at"]["N"]) if "revoked_at" in item else None,
        usage_key=item["usage_key"]["S"] if "usage_key" in item else None,
    )


def check_tenant(tenant: str) -> str:
    if not TENANT_PATTERN.fullmatch(tenant):
        raise InvalidRequest(
            f"tenant {tenant!r} must match {TENANT_PATTERN.pattern} (letters, digits, _.@:-)"
        )
    return tenant


class KeyStore:
    """Issue, find, list and revoke keys in the table (a DynamoDB client is handed in)."""

    def __init__(self, client: Any, table: str) -> None:
        self.client, self.table = client, table

    def create(self, tenant: str, name: str = "", usage_key: str | None = None) -> IssuedKey:
        check_tenant(tenant)
        if len(name) > MAX_NAME:
            raise InvalidRequest(f"a key's name has at most {MAX_NAME} characters")
        key_id, key = new_key()
        now_ns = time.time_ns()
        record = KeyRecord(tenant, key_id, name, now_ns // 10**9, None, usage_key)
        item = {
            "PK": {"S": key_pk(hash_key(key))},
            "SK": {"S": KEY_SK},
            "GSI1PK": {"S": keys_gsi1pk(tenant)},
            "GSI1SK": {"S": f"{now_ns:020d}#{key_id}"},  # the list in creation order
            "tenant": {"S": tenant},
            "key_id": {"S": key_id},
            "name": {"S": name},
            "created_at": {"N": str(record.created_at)},
        }
        if usage_key:
            item["usage_key"] = {"S": usage_key}
        self.client.put_item(
            TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(PK)"
        )
        return IssuedKey(key, record)

    def lookup(self, key: str) -> KeyRecord | None:
        """The record of this key, or None. Consistent, so a revocation holds at once (API
        Gateway's authorizer cache aside)."""
        item = self.client.get_item(
            TableName=self.table,
            Key={"PK": {"S": key_pk(hash_key(key))}, "SK": {"S": KEY_SK}},
            ConsistentRead=True,
        ).get("Item")
        return _record(item) if item else None

    def list(self, tenant: str) -> list[KeyRecord]:
        """The tenant's keys, revoked ones included, oldest first."""
        check_tenant(tenant)
        return [_record(item) for item in self._tenant_items(tenant)]

    def revoke(self, tenant: str, key_id: str) -> KeyRecord:
        """Mark the key revoked (kept for the record); revoking twice keeps the first time."""
        check_tenant(tenant)
        for item in self._tenant_items(tenant):
            if item["key_id"]["S"] == key_id:
                updated = self.client.update_item(
                    TableName=self.table,
                    Key={"PK": item["PK"], "SK": item["SK"]},
                    UpdateExpression="SET revoked_at = if_not_exists(revoked_at, :now)",
                    ConditionExpression="attribute_exists(PK)",
                    ExpressionAttributeValues={":now": {"N": str(int(time.time()))}},
                    ReturnValues="ALL_NEW",
                )
                return _record(updated["Attributes"])
        raise NotFound(f"tenant {tenant} has no key {key_id}")

    def usage_key(self, tenant: str) -> dict[str, str] | None:
        """The tenant's API key in the usage plan (`api_key_id`, `usage_key`), if it has one."""
        item = self.client.get_item(
            TableName=self.table,
            Key={"PK": {"S": usage_pk(tenant)}, "SK": {"S": USAGE_SK}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        return {name: item[name]["S"] for name in ("api_key_id", "usage_key", "usage_plan_id")}

    def save_usage_key(
        self, tenant: str, api_key_id: str, usage_key: str, usage_plan_id: str
    ) -> None:
        self.client.put_item(
            TableName=self.table,
            Item={
                "PK": {"S": usage_pk(tenant)},
                "SK": {"S": USAGE_SK},
                "api_key_id": {"S": api_key_id},
                "usage_key": {"S": usage_key},
                "usage_plan_id": {"S": usage_plan_id},
            },
        )

    def set_usage_key(self, tenant: str, usage_key: str) -> int:
        """Point every key of the tenant at this usage plan key (a new plan, e.g. after the
        stack was deleted and deployed again over the kept table); how many keys changed."""
        items = self._tenant_items(tenant)
        for item in items:
            self.client.update_item(
                TableName=self.table,
                Key={"PK": item["PK"], "SK": item["SK"]},
                UpdateExpression="SET usage_key = :usage",
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeValues={":usage": {"S": usage_key}},
            )
        return len(items)

    def _tenant_items(self, tenant: str) -> list[dict[str, Any]]:
        items, start = [], None
        while True:
            page = self.client.query(
                TableName=self.table,
                IndexName="GSI1",
                KeyConditionExpression="GSI1PK = :pk",
                ExpressionAttributeValues={":pk": {"S": keys_gsi1pk(tenant)}},
                **({"ExclusiveStartKey": start} if start else {}),
            )
            items += page["Items"]
            start = page.get("LastEvaluatedKey")
            if not start:
                return items


def authenticate(header: str | None, store: KeyStore) -> Principal:
    """The caller of a request with this `Authorization` header, or InvalidKey."""
    key = key_from_header(header)
    record = store.lookup(key)
    if record is None:
        raise InvalidKey("unknown key")
    if record.revoked_at is not None:
        raise InvalidKey(f"key {record.key_id} of {record.tenant} is revoked")
    return Principal(record.tenant, record.key_id, record.usage_key)
