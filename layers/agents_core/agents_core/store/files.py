"""Files, vector stores and their files in the table (docs/storage.md: keys and access patterns).

A vector store's head item keeps its file counts as atomic counters (`n_in_progress`,
`n_completed`, `n_failed`, `n_cancelled`, `usage_bytes`), moved by its files' transactions
(`StoreFiles`, store_files.py).
"""

from __future__ import annotations

import json
import time
from typing import Any

from botocore.exceptions import ClientError

from ..api.files import FileCounts, FileObject, VectorStoreObject
from ..errors import Conflict, NotFound
from . import keys
from .store_files import STATUSES, StoreFiles, cancellations, counter
from .table import Table, key


class FileStore(StoreFiles):
    """Files (and their presigned uploads), vector stores, and a store's files (StoreFiles)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table = Table(client, table_name)
        self.name = table_name

    # --- files --------------------------------------------------------------------------

    def put_file(self, tenant: str, file: FileObject) -> None:
        self.client.put_item(
            TableName=self.name,
            Item={
                **key(keys.file_pk(tenant, file.id), keys.FILE),
                "GSI1PK": {"S": keys.files_gsi1pk(tenant)},
                "GSI1SK": {"S": file.id},
                "purpose": {"S": file.purpose},
                "body": {"S": file.model_dump_json()},
            },
        )

    def put_upload(self, tenant: str, file: FileObject, expires_at: int) -> None:
        """A presigned upload's file, until it is completed (TTL: expires with its URL)."""
        self.client.put_item(
            TableName=self.name,
            Item={
                **key(keys.file_pk(tenant, file.id), keys.UPLOAD),
                "body": {"S": file.model_dump_json()},
                "expires_at": {"N": str(expires_at)},
            },
        )

    def get_upload(self, tenant: str, file_id: str) -> FileObject | None:
        item = self.table.get(keys.file_pk(tenant, file_id), keys.UPLOAD)
        if item is None:
            return None
        return FileObject.model_validate_json(item["body"]["S"])

    def complete_upload(self, tenant: str, file: FileObject) -> bool:
        """The upload becomes the file, once (False: completed already, or gone)."""
        pk = keys.file_pk(tenant, file.id)
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.name,
                            "Key": key(pk, keys.UPLOAD),
                            "ConditionExpression": "attribute_exists(PK)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.name,
                            "Item": {
                                **key(pk, keys.FILE),
                                "GSI1PK": {"S": keys.files_gsi1pk(tenant)},
                                "GSI1SK": {"S": file.id},
                                "purpose": {"S": file.purpose},
                                "body": {"S": file.model_dump_json()},
                            },
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    },
                ]
            )
        except ClientError as err:
            cancellations(err)
            return False
        return True

    def get_file(self, tenant: str, file_id: str) -> FileObject | None:
        item = self.table.get(keys.file_pk(tenant, file_id), keys.FILE)
        if item is None or "deleting" in item:
            return None
        return FileObject.model_validate_json(item["body"]["S"])

    def list_files(
        self, tenant: str, after: str | None, limit: int, order: str, purpose: str | None
    ) -> tuple[list[FileObject], bool]:
        extra: dict[str, Any] = {}
        if purpose:
            extra = {
                "FilterExpression": "purpose = :purpose",
                "values": {":purpose": {"S": purpose}},
            }
        items, more = self._page(keys.files_gsi1pk(tenant), after, limit, order, **extra)
        return [FileObject.model_validate_json(i["body"]["S"]) for i in items], more

    def mark_file_deleting(self, tenant: str, file_id: str) -> bool:
        """Hide the file from reads and attaches while it is taken out of its stores."""
        return self.table.update_if(
            key(keys.file_pk(tenant, file_id), keys.FILE),
            "SET deleting = :t",
            "attribute_exists(PK)",
            {":t": {"BOOL": True}},
        )

    def file_store_ids(self, tenant: str, file_id: str) -> list[str]:
        """The vector stores holding a file (its membership items)."""
        items = self.table.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.file_pk(tenant, file_id)},
                    ":sk": {"S": keys.FILE_STORE_PREFIX},
                },
                "ProjectionExpression": "SK",
                "ConsistentRead": True,
            }
        )
        return [i["SK"]["S"].removeprefix(keys.FILE_STORE_PREFIX) for i in items]

    def delete_file(self, tenant: str, file_id: str) -> None:
        self.client.delete_item(
            TableName=self.name, Key=key(keys.file_pk(tenant, file_id), keys.FILE)
        )

    # --- vector stores ------------------------------------------------------------------

    def create_store(self, tenant: str, store: VectorStoreObject) -> None:
        body = store.model_dump(
            mode="json", include={"id", "created_at", "name", "metadata", "expires_after"}
        )
        self.client.put_item(
            TableName=self.name,
            Item={
                **key(keys.vector_store_pk(tenant, store.id), keys.VECTOR_STORE),
                "GSI1PK": {"S": keys.vector_stores_gsi1pk(tenant)},
                "GSI1SK": {"S": store.id},
                "body": {"S": json.dumps(body)},
                "usage_bytes": {"N": "0"},
                "last_active_at": {"N": str(store.created_at)},
                **{counter(s): {"N": "0"} for s in STATUSES},
            },
            ConditionExpression="attribute_not_exists(PK)",
        )

    def get_store(self, tenant: str, store_id: str) -> VectorStoreObject | None:
        item = self.table.get(keys.vector_store_pk(tenant, store_id), keys.VECTOR_STORE)
        if item is None or "deleting" in item:
            return None
        return _store(item)

    def list_stores(
        self, tenant: str, after: str | None, limit: int, order: str
    ) -> tuple[list[VectorStoreObject], bool]:
        items, more = self._page(keys.vector_stores_gsi1pk(tenant), after, limit, order)
        return [_store(i) for i in items if "deleting" not in i], more

    def update_store(
        self, tenant: str, store_id: str, changes: dict[str, Any]
    ) -> VectorStoreObject:
        """Set `name`, `metadata`, `expires_after` (those given) in the store's body."""
        pk = keys.vector_store_pk(tenant, store_id)
        for _ in range(5):  # the body is read, changed and written back if unchanged meanwhile
            item = self.table.get(pk, keys.VECTOR_STORE)
            if item is None or "deleting" in item:
                raise NotFound(f"No vector store found with id {store_id}")
            body = json.loads(item["body"]["S"]) | changes
            if self.table.update_if(
                key(pk, keys.VECTOR_STORE),
                "SET body = :new",
                "body = :old AND attribute_not_exists(deleting)",
                {":new": {"S": json.dumps(body)}, ":old": item["body"]},
            ):
                found = self.get_store(tenant, store_id)
                if found is None:
                    raise NotFound(f"No vector store found with id {store_id}")
                return found
        raise Conflict(f"Vector store {store_id} is being changed; try again")

    def mark_store_deleting(self, tenant: str, store_id: str) -> bool:
        return self.table.update_if(
            key(keys.vector_store_pk(tenant, store_id), keys.VECTOR_STORE),
            "SET deleting = :t",
            "attribute_exists(PK)",
            {":t": {"BOOL": True}},
        )

    def delete_store(self, tenant: str, store_id: str) -> None:
        self.client.delete_item(
            TableName=self.name, Key=key(keys.vector_store_pk(tenant, store_id), keys.VECTOR_STORE)
        )

    # --- paging -------------------------------------------------------------------------

    def _page(
        self,
        gsi1pk: str,
        after: str | None,
        limit: int,
        order: str,
        FilterExpression: str | None = None,  # noqa: N803 (DynamoDB's parameter name)
        values: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        forward = order == "asc"
        all_values: dict[str, Any] = {":pk": {"S": gsi1pk}, **(values or {})}
        cond = "GSI1PK = :pk"
        if after:
            cond += " AND GSI1SK > :after" if forward else " AND GSI1SK < :after"
            all_values[":after"] = {"S": after}
        params: dict[str, Any] = {
            "IndexName": "GSI1",
            "KeyConditionExpression": cond,
            "ExpressionAttributeValues": all_values,
            "ScanIndexForward": forward,
        }
        if FilterExpression:
            params["FilterExpression"] = FilterExpression
        items = self.table.query_up_to(params, limit + 1)
        return items[:limit], len(items) > limit


def _store(item: dict[str, Any]) -> VectorStoreObject:
    body = json.loads(item["body"]["S"])
    counts = {s: max(0, int(item.get(counter(s), {"N": "0"})["N"])) for s in STATUSES}
    counts["total"] = sum(counts.values())
    expires_at = None
    if body.get("expires_after"):
        last = int(item.get("last_active_at", {"N": str(body["created_at"])})["N"])
        expires_at = last + int(body["expires_after"]["days"]) * 86400
    status = "in_progress" if counts["in_progress"] else "completed"
    if expires_at is not None and expires_at <= time.time():
        status = "expired"
    return VectorStoreObject(
        id=body["id"],
        created_at=body["created_at"],
        name=body.get("name") or "",
        metadata=body.get("metadata") or {},
        expires_after=body.get("expires_after"),
        expires_at=expires_at,
        last_active_at=int(item.get("last_active_at", {"N": str(body["created_at"])})["N"]),
        usage_bytes=max(0, int(item.get("usage_bytes", {"N": "0"})["N"])),
        file_counts=FileCounts(**counts),
        status=status,
    )
