"""A vector store's files: attached, moved through their statuses by the ingestion worker,
detached. Every move of a store file's status is one transaction: the file record's conditional
update (its status as read, and for the ingestion worker its token) and the counters' update
on the store's head item, so a duplicate or a lost race changes nothing and counts are never
counted twice."""

from __future__ import annotations

import json
import time
from typing import Any

from botocore.exceptions import ClientError

from ..api.files import (
    FileObject,
    LastError,
    StaticChunkingStrategyObject,
    VectorStoreFileObject,
)
from ..errors import Conflict, NotFound
from . import keys
from .table import Table, key

STATUSES = ("in_progress", "completed", "failed", "cancelled")


def counter(status: str) -> str:
    """The store's head attribute counting its files in `status`."""
    return f"n_{status}"


class StoreFiles:
    """A store's files (part of FileStore)."""

    client: Any
    table: Table
    name: str

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
            reasons = cancellations(err)
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
            for i in self.table.query_up_to(params, limit + 2)
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
                            "UpdateExpression": f"ADD n_in_progress :minus, {counter(status)}"
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
            if cancellations(err) != ["None", "None"]:
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
                                "UpdateExpression": f"ADD {counter(status)} :minus,"
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
                reasons = cancellations(err)
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


def cancellations(err: ClientError) -> list[str]:
    if err.response["Error"]["Code"] != "TransactionCanceledException":
        raise err
    reasons = err.response.get("CancellationReasons") or []
    if not reasons:  # moto and DynamoDB both give them; parse the message otherwise
        message = err.response["Error"].get("Message", "")
        inside = message.rsplit("[", 1)[-1].rstrip("]")
        return [r.strip() for r in inside.split(",")]
    return [r.get("Code", "None") for r in reasons]


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
