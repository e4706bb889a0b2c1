"""The table as the stores use it: a DynamoDB client and a table name, with paging and batching."""

from __future__ import annotations

import contextvars
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from ..aws import jitter, pause
from .items import decode

BATCH = 25  # BatchWriteItem's limit

#: Tries of a transaction that met another one in flight on its items (Table.transact).
TRANSACTION_ATTEMPTS = 4

_readers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="dynamodb")


def in_parallel(*reads: Callable[[], Any]) -> list[Any]:
    """Independent reads at once: one round trip instead of several. Every read ends before
    the first error (in argument order) is raised.

    On an event loop's thread (`blocking.run`) each read is a greenlet of its own there, their
    requests awaited together by the loop, which goes on serving meanwhile; elsewhere (a worker
    thread, a script) the reads run in threads while the caller blocks."""
    blocking = sys.modules.get("agents_core.blocking")  # never imported by the authorizer
    if blocking is not None and blocking.bridged():
        outcomes = blocking.wait(_together(blocking, reads, contextvars.copy_context()))
    else:
        outcomes = []
        for future in [_readers.submit(read) for read in reads]:
            try:
                outcomes.append(future.result())
            except Exception as err:
                outcomes.append(err)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes


async def _together(
    blocking: Any, reads: tuple[Callable[[], Any], ...], context: contextvars.Context
) -> list[Any]:
    """Each read's result, or the exception it raised; each read in a copy of `context`, the
    caller's (the log's keys)."""
    import asyncio

    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(blocking.run(read), context=context.copy()) for read in reads]
    return await asyncio.gather(*tasks, return_exceptions=True)


def key(pk: str, sk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def expired(item: dict[str, Any]) -> bool:
    """TTL deletion lags by up to days: an item past its time is treated as gone."""
    return "expires_at" in item and int(item["expires_at"]["N"]) <= time.time()


def condition_failed(err: ClientError) -> bool:
    return err.response["Error"]["Code"] == "ConditionalCheckFailedException"


def only_conflicts(err: ClientError) -> bool:
    """A cancelled transaction whose only reasons are TransactionConflicts."""
    if err.response["Error"]["Code"] != "TransactionCanceledException":
        return False
    codes = {r.get("Code", "None") for r in err.response.get("CancellationReasons") or []}
    return "TransactionConflict" in codes and codes <= {"TransactionConflict", "None"}


class Table:
    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name

    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        return self.client.get_item(TableName=self.name, Key=key(pk, sk), ConsistentRead=True).get(
            "Item"
        )

    def update_if(
        self,
        item_key: dict[str, Any],
        update: str,
        condition: str,
        values: dict[str, Any],
        names: dict[str, str] | None = None,
    ) -> bool:
        """A conditional UpdateItem; False, with nothing written, when the condition fails."""
        try:
            self.client.update_item(
                TableName=self.name,
                Key=item_key,
                UpdateExpression=update,
                ConditionExpression=condition,
                **({"ExpressionAttributeValues": values} if values else {}),  # none: not even {}
                **({"ExpressionAttributeNames": names} if names else {}),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            return False
        return True

    def put_if(self, item: dict[str, Any], condition: str) -> bool:
        """A conditional PutItem; False, with nothing written, when the condition fails."""
        try:
            self.client.put_item(TableName=self.name, Item=item, ConditionExpression=condition)
        except ClientError as err:
            if not condition_failed(err):
                raise
            return False
        return True

    def get_many(self, *keys: tuple[str, str]) -> list[dict[str, Any] | None]:
        """Items by (PK, SK) in one BatchGetItem (consistent), in the order asked; None where
        an item does not exist."""
        wanted = [key(pk, sk) for pk, sk in keys]
        found: dict[tuple[str, str], dict[str, Any]] = {}
        pending = {self.name: {"Keys": wanted, "ConsistentRead": True}}
        for attempt in range(8):
            resp = self.client.batch_get_item(RequestItems=pending)
            for item in resp["Responses"].get(self.name, []):
                found[(item["PK"]["S"], item["SK"]["S"])] = item
            pending = resp.get("UnprocessedKeys") or {}
            if not pending.get(self.name):
                return [found.get(k) for k in keys]
            pause(0.05 * 2**attempt)
        raise RuntimeError("DynamoDB left reads unprocessed after retries")

    def record(self, pk: str, sk: str) -> dict[str, str] | None:
        """The JSON attributes of the record at (pk, sk), joined from its parts if it has any
        (they sort right after it, so one query reads both); None if there is none."""
        items = self.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
                "ExpressionAttributeValues": {":pk": {"S": pk}, ":sk": {"S": sk}},
                "ConsistentRead": True,
            }
        )
        return next((attrs for head, attrs in decode(items) if head["SK"]["S"] == sk), None)

    def query_all(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs = {"TableName": self.name, **params}
        while True:
            resp = self.client.query(**kwargs)
            items.extend(resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return items
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def query_up_to(self, params: dict[str, Any], wanted: int) -> list[dict[str, Any]]:
        """At most `wanted` items of a query, in pages of at least 25 (a filter may drop
        some of each page)."""
        items: list[dict[str, Any]] = []
        kwargs = {"TableName": self.name, **params}
        while len(items) < wanted:
            resp = self.client.query(**kwargs, Limit=max(wanted - len(items), 25))
            items.extend(resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        return items[:wanted]

    def page(
        self, params: dict[str, Any], start_index: int, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Offset pages: skip `start_index` items, return `limit` of them and whether more exist."""
        wanted = start_index + limit + 1
        items: list[dict[str, Any]] = []
        kwargs = {"TableName": self.name, **params}
        while len(items) < wanted:
            resp = self.client.query(**kwargs, Limit=min(wanted - len(items), 1000))
            items.extend(resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        return items[start_index : start_index + limit], len(items) > start_index + limit

    def transact(self, actions: list[dict[str, Any]]) -> None:
        """TransactWriteItems, tried again (a few times, jittered) while DynamoDB cancels it
        only for a TransactionConflict: another transaction was in flight on one of its items,
        nothing was written, and its conditions were not judged, so the caller cannot yet say
        whether it won or lost (a ConditionalCheckFailed in the reasons is judged: no retry)."""
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self.client.transact_write_items(TransactItems=actions)
                return
            except ClientError as err:
                if attempt + 1 == TRANSACTION_ATTEMPTS or not only_conflicts(err):
                    raise
                pause(jitter(0.01, 0.05) * 2**attempt)

    def put_all(self, items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), BATCH):
            self.batch_write([{"PutRequest": {"Item": i}} for i in items[start : start + BATCH]])

    def delete_all(self, keys: list[dict[str, Any]]) -> None:
        for start in range(0, len(keys), BATCH):
            self.batch_write([{"DeleteRequest": {"Key": k}} for k in keys[start : start + BATCH]])

    def batch_write(self, requests: list[dict[str, Any]]) -> None:
        """BatchWriteItem until DynamoDB has taken every request (it may hand some back)."""
        pending = {self.name: requests}
        for attempt in range(8):
            if not pending.get(self.name):
                return
            pending = self.client.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})
            if pending:
                pause(0.05 * 2**attempt)
        if pending.get(self.name):
            raise RuntimeError("DynamoDB left writes unprocessed after retries")
