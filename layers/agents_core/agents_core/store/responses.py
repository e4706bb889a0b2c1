"""Responses (OpenAI Responses API) in the single table.

A response is two records under its own partition: `RESPONSE` (the response object with its
input, indexed by creation in GSI1 and by model in GSI2) and `CONTEXT` (the whole conversation
through this response as chat messages, so chaining with `previous_response_id` reads one record
however long the chain). Both are written in parts when large; response ids are time-ordered,
so index order is creation order.
"""

from __future__ import annotations

import json
from typing import Any

from ..api.responses import OpenAIResponseObjectWithInput
from ..errors import NotFound
from . import keys
from .items import encode, json_body
from .table import Table, key


class ResponseStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._t = Table(client, table_name)

    def save(
        self, tenant: str, response: OpenAIResponseObjectWithInput, context: list[dict[str, Any]]
    ) -> None:
        parts, heads = self.writes(tenant, response, context)
        if parts:
            self._t.put_all(parts)
        self._t.client.transact_write_items(TransactItems=heads)

    def writes(
        self, tenant: str, response: OpenAIResponseObjectWithInput, context: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(parts to write first, the transaction's Puts): a response's records, for `save`
        or for a transaction that also appends to its conversation."""
        pk = keys.response_pk(tenant, response.id)
        indexes = {
            "GSI1PK": {"S": keys.responses_gsi1pk(tenant)},
            "GSI1SK": {"S": response.id},
            "GSI2PK": {"S": keys.responses_by_model_gsi2pk(tenant, response.model)},
            "GSI2SK": {"S": response.id},
        }
        head, *parts = encode(key(pk, keys.RESPONSE), {"body": json_body(response)}, indexes)
        context_head, *context_parts = encode(
            key(pk, keys.CONTEXT), {"context": json.dumps(context)}
        )
        puts = [{"Put": {"TableName": self._t.name, "Item": item}} for item in (head, context_head)]
        return parts + context_parts, puts

    def get(self, tenant: str, response_id: str) -> OpenAIResponseObjectWithInput:
        items = self._records(tenant, response_id, keys.RESPONSE)
        return OpenAIResponseObjectWithInput.model_validate_json(items["body"])

    def context(self, tenant: str, response_id: str) -> list[dict[str, Any]]:
        return json.loads(self._records(tenant, response_id, keys.CONTEXT)["context"])

    def list(
        self, tenant: str, *, after: str | None, limit: int, model: str | None, descending: bool
    ) -> tuple[list[OpenAIResponseObjectWithInput], bool]:
        index, pk = (
            ("GSI2", keys.responses_by_model_gsi2pk(tenant, model))
            if model
            else ("GSI1", keys.responses_gsi1pk(tenant))
        )
        condition = f"{index}PK = :pk"
        values: dict[str, Any] = {":pk": {"S": pk}}
        if after:
            condition += f" AND {index}SK {'<' if descending else '>'} :after"
            values[":after"] = {"S": after}
        resp = self._t.client.query(
            TableName=self._t.name,
            IndexName=index,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=values,
            ScanIndexForward=not descending,
            Limit=limit + 1,
        )
        heads = resp.get("Items", [])
        out = []
        for head in heads[:limit]:
            if "parts" in head:  # parts carry no index keys: read them from the table
                body = self._records_at(head["PK"]["S"], keys.RESPONSE)["body"]
            else:
                body = head["body"]["S"]
            out.append(OpenAIResponseObjectWithInput.model_validate_json(body))
        return out, len(heads) > limit

    def delete(self, tenant: str, response_id: str) -> None:
        pk = keys.response_pk(tenant, response_id)
        items = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk",
                "ExpressionAttributeValues": {":pk": {"S": pk}},
                "ProjectionExpression": "SK",
                "ConsistentRead": True,
            }
        )
        if not any(i["SK"]["S"] == keys.RESPONSE for i in items):
            raise NotFound(f"Response {response_id} not found")
        # The head goes last: until then the response is whole and a retry finishes the delete.
        rest = [key(pk, i["SK"]["S"]) for i in items if i["SK"]["S"] != keys.RESPONSE]
        self._t.delete_all(rest)
        self._t.delete_all([key(pk, keys.RESPONSE)])

    def _records(self, tenant: str, response_id: str, sk: str) -> dict[str, str]:
        return self._records_at(keys.response_pk(tenant, response_id), sk, response_id)

    def _records_at(self, pk: str, sk: str, response_id: str = "") -> dict[str, str]:
        attrs = self._t.record(pk, sk)
        if attrs is None:
            raise NotFound(f"Response {response_id or pk} not found")
        return attrs
