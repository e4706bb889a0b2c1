"""Files, vector stores and their files in the table (docs/storage.md: keys and access patterns).

A vector store's head item keeps its file counts as atomic counters (`n_in_progress`,
`n_completed`, `n_failed`, `n_cancelled`, `usage_bytes`). Every move of a store file's status
is one transaction: the file record's conditional update (its status as read, and for the
ingestion worker its token) and the counters' update, so a duplicate or a lost race changes
nothing and counts are never counted twice.
"""

from __future__ import annotations

import json
import time
from typing import Any

from botocore.exceptions import ClientError

from ..api.files import (
    FileCounts,
    FileObject,
    LastError,
    StaticChunkingStrategyObject,
    VectorStoreFileObject,
    VectorStoreObject,
)
from ..errors import Conflict, NotFound
from . import keys
from .table import Table, key

STATUSES = ("in_progress", "completed", "failed", "cancelled")


def _counter(status: str) -> str:
    return f"n_{status}"


class FileStore:
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
            _cancellations(err)
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
                **{_counter(s): {"N": "0"} for s in STATUSES},
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

    # --- a store's files ----------------------------------------------------------------

    def attach(
        self,
        tenant: str,
        store_id: str,
        file: FileObject,
        attributes: dict[str, Any] | None,
        chunking: StaticChunkingStrategyObject,
        token: str,
    ) -> tuple[VectorStoreFileObject, bool]:
        """The store's record of the file, `in_progress`, and whether it is new (an attached
        file answers as it is). NotFound when the store or the file is gone."""
        store_pk = keys.vector_store_pk(tenant, store_id)
        now = int(time.time())
        body = {
            "created_at": now,
            "attributes": attributes,
            "chunking_strategy": chunking.model_dump(mode="json"),
            "filename": file.filename,
        }
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.name,
                            "Key": key(keys.file_pk(tenant, file.id), keys.FILE),
                            "ConditionExpression": "attribute_exists(PK) AND "
                            "attribute_not_exists(deleting)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.name,
                            "Item": {
                                **key(store_pk, keys.store_file_sk(file.id)),
                                "status": {"S": "in_progress"},
                                "token": {"S": token},
                                "body": {"S": json.dumps(body)},
                                "usage_bytes": {"N": "0"},
                                "chunks": {"N": "0"},
                            },
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.name,
                            "Item": key(
                                keys.file_pk(tenant, file.id), keys.file_store_sk(store_id)
                            ),
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.name,
                            "Key": key(store_pk, keys.VECTOR_STORE),
                            "UpdateExpression": "ADD n_in_progress :one SET last_active_at = :now",
                            "ConditionExpression": "attribute_exists(PK) AND "
                            "attribute_not_exists(deleting)",
                            "ExpressionAttributeValues": {
                                ":one": {"N": "1"},
                                ":now": {"N": str(now)},
                            },
                        }
                    },
                ]
            )
        except ClientError as err:
            reasons = _cancellations(err)
            if reasons[0] == "ConditionalCheckFailed":
                raise NotFound(f"No file found with id {file.id}") from None
            if reasons[3] == "ConditionalCheckFailed":
                raise NotFound(f"No vector store found with id {store_id}") from None
            if reasons[1] == "ConditionalCheckFailed":
                existing = self.store_file(tenant, store_id, file.id)
                if existing is not None:
                    return existing, False
            raise
        record = self.store_file(tenant, store_id, file.id)
        assert record is not None
        return record, True

    def store_file_item(self, tenant: str, store_id: str, file_id: str) -> dict[str, Any] | None:
        return self.table.get(keys.vector_store_pk(tenant, store_id), keys.store_file_sk(file_id))

    def store_file(self, tenant: str, store_id: str, file_id: str) -> VectorStoreFileObject | None:
        item = self.store_file_item(tenant, store_id, file_id)
        return None if item is None else _store_file(store_id, item)

    def list_store_files(
        self,
        tenant: str,
        store_id: str,
        after: str | None,
        limit: int,
        order: str,
        status: str | None,
    ) -> tuple[list[VectorStoreFileObject], bool]:
        pk = keys.vector_store_pk(tenant, store_id)
        forward = order == "asc"
        values: dict[str, Any] = {":pk": {"S": pk}}
        if after:
            values[":after"] = {"S": keys.store_file_sk(after)}
            if forward:
                cond = "PK = :pk AND SK BETWEEN :after AND :end"
                values[":end"] = {"S": keys.STORE_FILE_PREFIX + "~"}
            else:
                cond = "PK = :pk AND SK BETWEEN :start AND :after"
                values[":start"] = {"S": keys.STORE_FILE_PREFIX}
        else:
            cond = "PK = :pk AND begins_with(SK, :prefix)"
            values[":prefix"] = {"S": keys.STORE_FILE_PREFIX}
        params: dict[str, Any] = {
            "KeyConditionExpression": cond,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": forward,
            "ConsistentRead": True,
        }
        if status:
            params["FilterExpression"] = "#s = :status"
            params["ExpressionAttributeNames"] = {"#s": "status"}
            values[":status"] = {"S": status}
        items = [
            i
            for i in self._collect(params, limit + 2)
            if not (after and i["SK"]["S"] == keys.store_file_sk(after))
        ]
        return [_store_file(store_id, i) for i in items[:limit]], len(items) > limit

    def finish(
        self,
        tenant: str,
        store_id: str,
        file_id: str,
        token: str,
        status: str,
        usage_bytes: int = 0,
        chunks: int = 0,
        last_error: LastError | None = None,
    ) -> bool:
        """Move an `in_progress` record holding `token` to `status`, with the counters; False
        (nothing written) when it is not that record any more (done, detached, re-attached)."""
        store_pk = keys.vector_store_pk(tenant, store_id)
        values: dict[str, Any] = {
            ":status": {"S": status},
            ":was": {"S": "in_progress"},
            ":token": {"S": token},
            ":usage": {"N": str(usage_bytes)},
            ":chunks": {"N": str(chunks)},
        }
        update = "SET #s = :status, usage_bytes = :usage, chunks = :chunks"
        if last_error is not None:
            update += ", last_error = :error"
            values[":error"] = {"S": last_error.model_dump_json()}
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.name,
                            "Key": key(store_pk, keys.store_file_sk(file_id)),
                            "UpdateExpression": update,
                            "ConditionExpression": "#s = :was AND #t = :token",
                            "ExpressionAttributeNames": {"#s": "status", "#t": "token"},
                            "ExpressionAttributeValues": values,
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.name,
                            "Key": key(store_pk, keys.VECTOR_STORE),
                            "UpdateExpression": f"ADD n_in_progress :minus, {_counter(status)}"
                            " :one, usage_bytes :usage",
                            "ConditionExpression": "attribute_exists(PK)",
                            "ExpressionAttributeValues": {
                                ":minus": {"N": "-1"},
                                ":one": {"N": "1"},
                                ":usage": {"N": str(usage_bytes)},
                            },
                        }
                    },
                ]
            )
        except ClientError as err:
            if _cancellations(err) != ["None", "None"]:
                return False
            raise
        return True

    def detach(self, tenant: str, store_id: str, file_id: str) -> dict[str, Any] | None:
        """Delete the store's record of the file (and the file's membership item) with its
        counters; the deleted item, or None when there was none."""
        store_pk = keys.vector_store_pk(tenant, store_id)
        for _ in range(5):
            item = self.store_file_item(tenant, store_id, file_id)
            if item is None:
                return None
            status = item["status"]["S"]
            usage = item.get("usage_bytes", {"N": "0"})["N"]
            try:
                self.client.transact_write_items(
                    TransactItems=[
                        {
                            "Delete": {
                                "TableName": self.name,
                                "Key": key(store_pk, keys.store_file_sk(file_id)),
                                "ConditionExpression": "#s = :status",
                                "ExpressionAttributeNames": {"#s": "status"},
                                "ExpressionAttributeValues": {":status": {"S": status}},
                            }
                        },
                        {
                            "Delete": {
                                "TableName": self.name,
                                "Key": key(
                                    keys.file_pk(tenant, file_id), keys.file_store_sk(store_id)
                                ),
                            }
                        },
                        {
                            "Update": {
                                "TableName": self.name,
                                "Key": key(store_pk, keys.VECTOR_STORE),
                                "UpdateExpression": f"ADD {_counter(status)} :minus,"
                                " usage_bytes :usage",
                                "ConditionExpression": "attribute_exists(PK)",
                                "ExpressionAttributeValues": {
                                    ":minus": {"N": "-1"},
                                    ":usage": {"N": str(-int(usage))},
                                },
                            }
                        },
                    ]
                )
            except ClientError as err:
                reasons = _cancellations(err)
                if reasons[0] == "ConditionalCheckFailed":
                    continue  # its status moved meanwhile: read it again
                if reasons[2] == "ConditionalCheckFailed":  # the store's head is gone
                    self._delete_pair(tenant, store_id, file_id)
                    return item
                raise
            return item
        raise Conflict(f"File {file_id} of vector store {store_id} is changing; try again")

    def _delete_pair(self, tenant: str, store_id: str, file_id: str) -> None:
        for pk, sk in (
            (keys.vector_store_pk(tenant, store_id), keys.store_file_sk(file_id)),
            (keys.file_pk(tenant, file_id), keys.file_store_sk(store_id)),
        ):
            self.client.delete_item(TableName=self.name, Key=key(pk, sk))

    def store_file_items(self, tenant: str, store_id: str) -> list[dict[str, Any]]:
        return self.table.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :prefix)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.vector_store_pk(tenant, store_id)},
                    ":prefix": {"S": keys.STORE_FILE_PREFIX},
                },
                "ConsistentRead": True,
            }
        )

    def remove_store_files(self, tenant: str, store_id: str) -> list[str]:
        """Delete every record of a store's files and their membership items (the store is
        being deleted: no counters to keep); the file ids."""
        file_ids = [
            i["SK"]["S"].removeprefix(keys.STORE_FILE_PREFIX)
            for i in self.store_file_items(tenant, store_id)
        ]
        for file_id in file_ids:
            self._delete_pair(tenant, store_id, file_id)
        return file_ids

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
        items = self._collect(params, limit + 1)
        return items[:limit], len(items) > limit

    def _collect(self, params: dict[str, Any], wanted: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs = {"TableName": self.name, **params}
        while len(items) < wanted:
            resp = self.client.query(**kwargs, Limit=max(wanted - len(items), 25))
            items.extend(resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        return items[:wanted]


def _cancellations(err: ClientError) -> list[str]:
    if err.response["Error"]["Code"] != "TransactionCanceledException":
        raise err
    reasons = err.response.get("CancellationReasons") or []
    if not reasons:  # moto and DynamoDB both give them; parse the message otherwise
        message = err.response["Error"].get("Message", "")
        inside = message.rsplit("[", 1)[-1].rstrip("]")
        return [r.strip() for r in inside.split(",")]
    return [r.get("Code", "None") for r in reasons]


def _store(item: dict[str, Any]) -> VectorStoreObject:
    body = json.loads(item["body"]["S"])
    counts = {s: max(0, int(item.get(_counter(s), {"N": "0"})["N"])) for s in STATUSES}
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


def _store_file(store_id: str, item: dict[str, Any]) -> VectorStoreFileObject:
    body = json.loads(item["body"]["S"])
    last_error = item.get("last_error")
    return VectorStoreFileObject(
        id=item["SK"]["S"].removeprefix(keys.STORE_FILE_PREFIX),
        created_at=body["created_at"],
        vector_store_id=store_id,
        status=item["status"]["S"],
        usage_bytes=int(item.get("usage_bytes", {"N": "0"})["N"]),
        last_error=LastError.model_validate_json(last_error["S"]) if last_error else None,
        attributes=body.get("attributes"),
        chunking_strategy=body.get("chunking_strategy"),
    )
