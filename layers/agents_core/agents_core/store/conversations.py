"""Conversations (OpenAI Conversations API) in the single table.

A conversation is one partition: its head (`CONVERSATION`: created_at, metadata, `version`,
indexed by creation in GSI1) and its items in order (`ITEM#{seq}`, indexed by item id in GSI2).
Every change to the items is one transaction with a conditional update of the head's `version`:
n items appended at version v take the places v..v+n-1 and make it v+n; a delete makes it v+1
(a place left unused). So an append made from a context read at version v lands only if
nothing changed since (else Conflict), and needs no read first. A large
item (over 16 KB of JSON) keeps its JSON in parts (`PART#{seq}#{token}#{n}`) written before the
transaction; the token is the writer's, so a writer that loses a race never overwrites the
winner's parts. docs/storage.md lists the access patterns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError
from pydantic import TypeAdapter

from ..api.conversations import Conversation
from ..api.responses import OpenAIResponseInput
from ..domain import ConversationAppend
from ..errors import Conflict, NotFound, TooLarge
from ..ids import new_id
from ..log import logger
from . import keys
from .items import json_body
from .table import Table, in_parallel, key

_ITEM: TypeAdapter[Any] = TypeAdapter(OpenAIResponseInput)

#: Items whose JSON is larger go to parts, so that a transaction of the most items stays
#: under DynamoDB's 4 MB per transaction (with a response's own records beside them).
INLINE_ITEM_BYTES = 16 * 1024
PART_BYTES = 350 * 1024
#: TransactWriteItems takes 100 actions: the head's update, a response's two records, items.
MAX_ITEMS_PER_APPEND = 96
#: An append that lost only to another append (not to a stale context) is retried this often.
_RETRIES = 5


class ConversationStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._t = Table(client, table_name)

    # --- conversations ------------------------------------------------------------------

    def create(self, tenant: str, conversation: Conversation, items: list[Any]) -> None:
        """The conversation with its first items, at once."""
        pk = keys.conversation_pk(tenant, conversation.id)
        parts, puts = self._item_writes(tenant, conversation.id, 0, items)
        head = {
            **key(pk, keys.CONVERSATION),
            "created_at": {"N": str(conversation.created_at)},
            "metadata": {"S": json.dumps(conversation.metadata)},
            "version": {"N": str(len(items))},
            "GSI1PK": {"S": keys.conversations_gsi1pk(tenant)},
            "GSI1SK": {"S": conversation.id},
        }
        if parts:
            self._t.put_all(parts)
        put_head = {"Put": {"TableName": self._t.name, "Item": head}}
        self._t.client.transact_write_items(TransactItems=[put_head, *puts])

    def get(self, tenant: str, conversation_id: str) -> Conversation:
        head = self._t.get(keys.conversation_pk(tenant, conversation_id), keys.CONVERSATION)
        return _conversation(_live(head, conversation_id), conversation_id)

    def update_metadata(
        self, tenant: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation:
        pk = keys.conversation_pk(tenant, conversation_id)
        try:
            resp = self._t.client.update_item(
                TableName=self._t.name,
                Key=key(pk, keys.CONVERSATION),
                UpdateExpression="SET metadata = :m",
                ConditionExpression="attribute_exists(PK) AND attribute_not_exists(deleting)",
                ExpressionAttributeValues={":m": {"S": json.dumps(metadata)}},
                ReturnValues="ALL_NEW",
            )
        except ClientError as err:
            if err.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            raise NotFound(f"Conversation {conversation_id} not found") from None
        return _conversation(resp["Attributes"], conversation_id)

    def list(
        self, tenant: str, *, after: str | None, limit: int
    ) -> tuple[list[Conversation], bool]:
        """Newest first (ids are time-ordered); `after` is the last id of the previous page."""
        condition = "GSI1PK = :pk"
        values: dict[str, Any] = {":pk": {"S": keys.conversations_gsi1pk(tenant)}}
        if after:
            condition += " AND GSI1SK < :after"
            values[":after"] = {"S": after}
        heads, has_more = self._t.page(
            {
                "IndexName": "GSI1",
                "KeyConditionExpression": condition,
                "ExpressionAttributeValues": values,
                "ScanIndexForward": False,
            },
            0,
            limit,
        )
        live = [h for h in heads if "deleting" not in h]
        return [_conversation(h, h["GSI1SK"]["S"]) for h in live], has_more

    def delete(self, tenant: str, conversation_id: str) -> None:
        """Marked first (gone for readers and writers), then its items, then the head: a
        delete cut short is finished by repeating it."""
        pk = keys.conversation_pk(tenant, conversation_id)
        marked = self._t.update_if(
            key(pk, keys.CONVERSATION), "SET deleting = :t", "attribute_exists(PK)", {":t": _TRUE}
        )
        if not marked:
            raise NotFound(f"Conversation {conversation_id} not found")
        found = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk",
                "ExpressionAttributeValues": {":pk": {"S": pk}},
                "ProjectionExpression": "SK",
                "ConsistentRead": True,
            }
        )
        rest = [key(pk, i["SK"]["S"]) for i in found if i["SK"]["S"] != keys.CONVERSATION]
        self._t.delete_all(rest)
        self._t.delete_all([key(pk, keys.CONVERSATION)])

    # --- items ----------------------------------------------------------------------------

    def add_items(self, tenant: str, conversation_id: str, items: list[Any]) -> None:
        """Append items (each with an id) after the conversation's last."""
        for _ in range(_RETRIES):
            head = _live(
                self._t.get(keys.conversation_pk(tenant, conversation_id), keys.CONVERSATION),
                conversation_id,
            )
            version = int(head["version"]["N"])
            try:
                self.append(tenant, ConversationAppend(conversation_id, version, items))
                return
            except Conflict:
                continue  # another writer went first: append after its items
        raise Conflict(f"Conversation {conversation_id} is changing too fast; retry")

    def append(
        self,
        tenant: str,
        append: ConversationAppend,
        also: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], []),
    ) -> None:
        """The items after the conversation's last, if it is still at `append.version`, in one
        transaction with `also` (parts written first, then the transaction's other actions).
        Conflict when the conversation changed; NotFound when it is gone. Nothing is written
        then (parts aside, which nothing names)."""
        cid, count = append.conversation_id, len(append.items)
        if count > MAX_ITEMS_PER_APPEND:
            raise TooLarge(
                f"{count} items cannot be added to a conversation at once (at most"
                f" {MAX_ITEMS_PER_APPEND}); nothing was added"
            )
        pk = keys.conversation_pk(tenant, cid)
        parts, puts = self._item_writes(tenant, cid, append.version, append.items)
        update = {
            "Update": {
                "TableName": self._t.name,
                "Key": key(pk, keys.CONVERSATION),
                "UpdateExpression": "SET version = :end",
                "ConditionExpression": "attribute_not_exists(deleting) AND version = :v",
                "ExpressionAttributeValues": {
                    ":v": {"N": str(append.version)},
                    ":end": {"N": str(append.version + count)},
                },
            }
        }
        also_parts, also_actions = also
        if parts or also_parts:
            self._t.put_all(also_parts + parts)
        self._transact([update, *also_actions, *puts], cid, cleanup=parts)

    def context(self, tenant: str, conversation_id: str) -> tuple[list[Any], int]:
        """Every item in order, and the version they were read at (one consistent query)."""
        pk = keys.conversation_pk(tenant, conversation_id)
        found = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk",
                "ExpressionAttributeValues": {":pk": {"S": pk}},
                "ConsistentRead": True,
            }
        )
        first = found[0] if found and found[0]["SK"]["S"] == keys.CONVERSATION else None
        version = int(_live(first, conversation_id)["version"]["N"])
        parts = _parts(found)
        heads = [i for i in found if i["SK"]["S"].startswith(keys.ITEM_PREFIX)]
        # A later page of the query may hold items appended after the head was read: not yet.
        items = [_item(i, parts) for i in heads if keys.seq_of_item(i["SK"]["S"]) < version]
        return items, version

    def list_items(
        self,
        tenant: str,
        conversation_id: str,
        *,
        after: str | None,
        limit: int,
        descending: bool,
    ) -> tuple[list[Any], bool]:
        pk = keys.conversation_pk(tenant, conversation_id)
        reads: list[Callable[[], Any]] = [lambda: self._t.get(pk, keys.CONVERSATION)]
        if after:
            reads.append(lambda: self._by_id(tenant, conversation_id, after))
        head, *marks = in_parallel(*reads)
        _live(head, conversation_id)
        lo, hi = keys.ITEM_PREFIX, keys.ITEM_PREFIX + "~"  # items only, never parts
        if after:
            if not marks[0]:
                raise NotFound(f"Item {after} not found in conversation {conversation_id}")
            seq = keys.seq_of_item(marks[0][-1]["SK"]["S"])
            if descending:
                if seq == 0:
                    return [], False
                hi = keys.item_sk(seq - 1)
            else:
                lo = keys.item_sk(seq + 1)
        heads, has_more = self._t.page(
            {
                "KeyConditionExpression": "PK = :pk AND SK BETWEEN :lo AND :hi",
                "ExpressionAttributeValues": {
                    ":pk": {"S": pk},
                    ":lo": {"S": lo},
                    ":hi": {"S": hi},
                },
                "ScanIndexForward": not descending,
                "ConsistentRead": True,
            },
            0,
            limit,
        )
        return [self._full_item(pk, h) for h in heads], has_more

    def get_item(self, tenant: str, conversation_id: str, item_id: str) -> Any:
        pk = keys.conversation_pk(tenant, conversation_id)
        _, found = self._head_and_items(tenant, conversation_id, item_id)
        return self._full_item(pk, found[-1])  # an id given twice: the latest

    def _head_and_items(self, tenant: str, conversation_id: str, item_id: str) -> Any:
        """The live conversation's head and the items with this id (NotFound for neither)."""
        pk = keys.conversation_pk(tenant, conversation_id)
        head, found = in_parallel(
            lambda: self._t.get(pk, keys.CONVERSATION),
            lambda: self._by_id(tenant, conversation_id, item_id),
        )
        _live(head, conversation_id)
        if not found:
            raise NotFound(f"Item {item_id} not found in conversation {conversation_id}")
        return head, found

    def delete_item(self, tenant: str, conversation_id: str, item_id: str) -> None:
        """Every item with this id goes, in one transaction that counts as a change."""
        pk = keys.conversation_pk(tenant, conversation_id)
        head, found = self._head_and_items(tenant, conversation_id, item_id)
        update = {
            "Update": {
                "TableName": self._t.name,
                "Key": key(pk, keys.CONVERSATION),
                "UpdateExpression": "ADD version :one",
                "ConditionExpression": "attribute_exists(PK) AND attribute_not_exists(deleting)",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }
        deletes = [
            {"Delete": {"TableName": self._t.name, "Key": key(pk, i["SK"]["S"])}} for i in found
        ]
        self._transact([update, *deletes], conversation_id)
        parts = [i for i in found if "parts" in i]
        for item in parts:
            seq, token = keys.seq_of_item(item["SK"]["S"]), item["token"]["S"]
            prefix = keys.item_parts_prefix(seq, token)
            count = int(item["parts"]["N"])
            self._t.delete_all([key(pk, f"{prefix}{n:04d}") for n in range(1, count + 1)])

    # --- inside -----------------------------------------------------------------------------

    def _item_writes(
        self, tenant: str, conversation_id: str, start: int, items: list[Any]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(parts to write first, the transaction's Puts) for items placed from `start`."""
        pk = keys.conversation_pk(tenant, conversation_id)
        token = new_id().replace("-", "")[-12:]
        parts: list[dict[str, Any]] = []
        puts = []
        for offset, item in enumerate(items):
            seq = start + offset
            body = json_body(item)
            record = {
                **key(pk, keys.item_sk(seq)),
                "item_id": {"S": item.id},
                "GSI2PK": {"S": keys.conversation_items_gsi2pk(tenant, conversation_id)},
                "GSI2SK": {"S": item.id},
            }
            data = body.encode()
            if len(data) <= INLINE_ITEM_BYTES:
                record["body"] = {"S": body}
            else:
                chunks = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]
                prefix = keys.item_parts_prefix(seq, token)
                record["parts"] = {"N": str(len(chunks))}
                record["token"] = {"S": token}
                parts += [
                    {**key(pk, f"{prefix}{n:04d}"), "chunk": {"B": chunk}}
                    for n, chunk in enumerate(chunks, 1)
                ]
            puts.append({"Put": {"TableName": self._t.name, "Item": record}})
        return parts, puts

    def _transact(
        self, actions: list[dict[str, Any]], conversation_id: str, cleanup: list[Any] = ()
    ) -> None:
        try:
            self._t.transact(actions)
        except ClientError as err:
            if err.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            reasons = err.response.get("CancellationReasons") or []
            if not any(r.get("Code") == "ConditionalCheckFailed" for r in reasons):
                raise
            if cleanup:  # parts nothing names: best effort
                try:
                    self._t.delete_all([key(p["PK"]["S"], p["SK"]["S"]) for p in cleanup])
                except Exception:
                    logger.warning(
                        "orphan item parts left", extra={"conversation": conversation_id}
                    )
            head = self._t.get(actions[0]["Update"]["Key"]["PK"]["S"], keys.CONVERSATION)
            _live(head, conversation_id)  # gone: NotFound; else it changed
            raise _stale(conversation_id) from None

    def _by_id(self, tenant: str, conversation_id: str, item_id: str) -> list[dict[str, Any]]:
        """The item records with this id, oldest first (GSI2: eventually consistent)."""
        resp = self._t.client.query(
            TableName=self._t.name,
            IndexName="GSI2",
            KeyConditionExpression="GSI2PK = :pk AND GSI2SK = :id",
            ExpressionAttributeValues={
                ":pk": {"S": keys.conversation_items_gsi2pk(tenant, conversation_id)},
                ":id": {"S": item_id},
            },
        )
        return sorted(resp.get("Items", []), key=lambda i: i["SK"]["S"])

    def _full_item(self, pk: str, record: dict[str, Any]) -> Any:
        if "parts" not in record:
            return _ITEM.validate_json(record["body"]["S"])
        seq, token = keys.seq_of_item(record["SK"]["S"]), record["token"]["S"]
        found = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :p)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": pk},
                    ":p": {"S": keys.item_parts_prefix(seq, token)},
                },
                "ConsistentRead": True,
            }
        )
        return _item(record, _parts(found))


_TRUE = {"BOOL": True}


def _live(head: dict[str, Any] | None, conversation_id: str) -> dict[str, Any]:
    if head is None or "deleting" in head:
        raise NotFound(f"Conversation {conversation_id} not found")
    return head


def _stale(conversation_id: str) -> Conflict:
    return Conflict(
        f"Conversation {conversation_id} changed while this was prepared (another response or"
        " item was added, or an item deleted); nothing was added: retry"
    )


def _conversation(head: dict[str, Any], conversation_id: str) -> Conversation:
    return Conversation(
        id=conversation_id,
        created_at=int(head["created_at"]["N"]),
        metadata=json.loads(head["metadata"]["S"]),
    )


def _parts(found: list[dict[str, Any]]) -> dict[str, list[bytes]]:
    """Part chunks by their prefix (`PART#{seq}#{token}#`), in order."""
    out: dict[str, list[bytes]] = {}
    for item in found:
        sk = item["SK"]["S"]
        if sk.startswith(keys.ITEM_PART_PREFIX):
            out.setdefault(sk[: sk.rindex("#") + 1], []).append(bytes(item["chunk"]["B"]))
    return out


def _item(record: dict[str, Any], parts: dict[str, list[bytes]]) -> Any:
    if "parts" not in record:
        return _ITEM.validate_json(record["body"]["S"])
    prefix = keys.item_parts_prefix(keys.seq_of_item(record["SK"]["S"]), record["token"]["S"])
    chunks = parts.get(prefix, [])
    if len(chunks) != int(record["parts"]["N"]):
        raise RuntimeError(f"item {record['SK']['S']} is missing parts")
    return _ITEM.validate_json(b"".join(chunks))
