"""Responses (OpenAI Responses API) in the single table.

A response is two records under its own partition: `RESPONSE` (the response object with its
input, indexed by creation in GSI1 and by model in GSI2) and `CONTEXT` (the whole conversation
through this response as chat messages, so chaining with `previous_response_id` reads one record
however long the chain). Both are written in parts when large; response ids are time-ordered,
so index order is creation order.

A response is stored when it starts (`in_progress`, or `queued` in the background) and again
when it ends. The head's `status` attribute is authoritative over the body's: a cancel sets it
alone, and a running response whose `lease_until` has passed (its process ended without
writing its end) reads `failed`. A background response also has a `RUN` record while it runs:
the token its queue messages must carry, the invocation that owns it (`owner`, until
`lease_until`) and its last state, inline or in parts of its own (`RUNSTATE#...`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from .. import json_text
from ..api.responses import OpenAIResponseError, OpenAIResponseObjectWithInput
from ..errors import InvalidRequest, NotFound
from . import keys
from .items import decode, encode, inline_attrs, json_body
from .schema import TTL_ATTRIBUTE as TTL
from .table import Table, condition_failed, expired, key, only_conflicts

if TYPE_CHECKING:  # a background function's init loads no stream log
    from .stream_events import StreamEnd

RUNNING = ("queued", "in_progress")
#: What a response whose process ended before its end was written reads as.
LOST_ERROR = OpenAIResponseError(
    code="server_error", message="The response stopped before it finished (its process ended)"
)


@dataclass
class RunRecord:
    """A background response's run as its worker reads it."""

    token: str
    status: str  # the head's
    owner: str | None
    lease_until: float
    state: dict[str, Any] | None
    state_sk: str | None


@dataclass
class ResponseStart:
    """The write of a starting response, its items made already."""

    table: Table
    head: dict[str, Any]
    parts: list[dict[str, Any]]

    def __call__(self) -> None:
        if self.parts:
            self.table.put_all(self.parts)
        self.table.put_if(self.head, "attribute_not_exists(PK)")


class RunBusy(Exception):
    """Another invocation holds the run's lease: try again later."""


class RunGone(Exception):
    """This invocation no longer owns the run."""


class CancelledMeanwhile(Exception):
    """A cancel landed after the run last looked: its end is stored as cancelled instead."""


class ResponseStore:
    def __init__(self, client: Any, table_name: str, unstored_seconds: int = 3600) -> None:
        self._t = Table(client, table_name)
        #: How long a background response with `store: false` stays readable for polling.
        self.unstored_seconds = unstored_seconds

    def save(
        self,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        context: list[dict[str, Any]],
        owner: str | None = None,
        *,
        trace: list[dict[str, Any]] | None = None,
        stream_end: StreamEnd | None = None,
    ) -> None:
        """The response's end in one transaction (its parts written first); with `stream_end`,
        its stream's last write too."""
        parts, heads = self.writes(
            tenant, response, context, owner, trace=trace, stream_end=stream_end
        )
        if parts:
            self._t.put_all(parts)
        try:
            self._t.transact(heads)
        except ClientError as err:
            if owner is not None and _cancelled_transaction(err) and not only_conflicts(err):
                reasons = err.response.get("CancellationReasons") or [{}]
                if reasons[0].get("Code") == "ConditionalCheckFailed":
                    raise CancelledMeanwhile(response.id) from err
                raise RunGone(response.id) from err
            raise
        if stream_end is not None:
            stream_end.landed = True

    def writes(
        self,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        context: list[dict[str, Any]],
        owner: str | None = None,
        *,
        trace: list[dict[str, Any]] | None = None,
        stream_end: StreamEnd | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(parts to write first, the transaction's actions): a response's records, for `save`
        or for a transaction that also appends to its conversation. With `owner` (a background
        run's end): only while that invocation owns the run, whose RUN record goes. A response
        not stored (`store: false`, kept for polling) has no CONTEXT and is in no index. A run's
        end other than cancelled is stored only if no cancel landed since the run last looked
        (the head's condition), so a cancel answered `cancelled` stays so. `stream_end`: its
        stream's last write, put in the same transaction (its actions last)."""
        pk = keys.response_pk(tenant, response.id)
        extra = self._head_attributes(tenant, response)
        attrs = {"body": json_body(response)}
        if trace:
            attrs["trace"] = json_text.dumps_str(trace)
        head, *parts = encode(key(pk, keys.RESPONSE), attrs, extra)
        items = [head]
        if response.store:
            context_head, *context_parts = encode(
                key(pk, keys.CONTEXT), {"context": json_text.dumps_str(context)}
            )
            items.append(context_head)
            parts += context_parts
        actions = [{"Put": {"TableName": self._t.name, "Item": item}} for item in items]
        if owner is not None and response.status != "cancelled":
            actions[0]["Put"] |= {
                "ConditionExpression": "#status <> :cancelled",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {":cancelled": {"S": "cancelled"}},
            }
        if owner is not None:
            actions.append(
                {
                    "Delete": {
                        "TableName": self._t.name,
                        "Key": key(pk, keys.RUN),
                        "ConditionExpression": "#owner = :owner",
                        "ExpressionAttributeNames": {"#owner": "owner"},
                        "ExpressionAttributeValues": {":owner": {"S": owner}},
                    }
                }
            )
        if stream_end is not None:
            actions += stream_end.actions(self._t.name)
        return parts, actions

    def _head_attributes(
        self,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        lease_until: float = 0,
        *,
        listed: bool = True,
    ) -> dict[str, Any]:
        """The head's attributes besides its body; `listed`: with its keys in the indexes that
        list a tenant's responses (each costs a write unit more on every write of the head)."""
        attrs: dict[str, Any] = {"status": {"S": response.status}}
        if lease_until:
            attrs["lease_until"] = {"N": str(int(lease_until))}
        if response.background:
            attrs["background"] = {"BOOL": True}
        if not response.store:  # a background response kept only for polling, then gone
            attrs[TTL] = {"N": str(int(time.time()) + self.unstored_seconds)}
            return attrs
        if not listed:
            return attrs
        return attrs | {
            "GSI1PK": {"S": keys.responses_gsi1pk(tenant)},
            "GSI1SK": {"S": response.id},
            "GSI2PK": {"S": keys.responses_by_model_gsi2pk(tenant, response.model)},
            "GSI2SK": {"S": response.id},
        }

    def begin(
        self, tenant: str, response: OpenAIResponseObjectWithInput, lease_until: float
    ) -> None:
        """The response, readable while it runs (`in_progress` until `lease_until`)."""
        self.begin_writes(tenant, response, lease_until)()

    def begin_writes(
        self, tenant: str, response: OpenAIResponseObjectWithInput, lease_until: float
    ) -> ResponseStart:
        """`begin`'s items, made now, written when called (the head only if the response has
        none yet). A running response is listed once it ends, as it is then written whole:
        listed from its start, its head would cost 3 write units instead of 1."""
        pk = keys.response_pk(tenant, response.id)
        attrs = self._head_attributes(tenant, response, lease_until, listed=False)
        head, *parts = encode(key(pk, keys.RESPONSE), {"body": json_body(response)}, attrs)
        return ResponseStart(self._t, head, parts)

    def abandon(self, tenant: str, response_id: str, error: OpenAIResponseError) -> None:
        """A running response whose end could not be written: failed, saying why."""
        self._t.update_if(
            key(keys.response_pk(tenant, response_id), keys.RESPONSE),
            "SET #status = :failed, #error = :error",
            "#status = :running",
            {
                ":failed": {"S": "failed"},
                ":running": {"S": "in_progress"},
                ":error": {"S": error.model_dump_json()},
            },
            names={"#status": "status", "#error": "error"},
        )

    # --- background runs ---------------------------------------------------------------------

    def queue(
        self,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        state: dict[str, Any],
        token: str,
    ) -> None:
        """A background response, `queued`, and its run: its first state and its token."""
        pk = keys.response_pk(tenant, response.id)
        attrs = self._head_attributes(tenant, response)
        head, *parts = encode(key(pk, keys.RESPONSE), {"body": json_body(response)}, attrs)
        state_items = self._state_items(pk, "queue", 0, state)
        self._t.put_all(parts + state_items)
        run = {**key(pk, keys.RUN), "token": {"S": token}, "state_sk": state_items[0]["SK"]}
        if response.store is False:
            run[TTL] = head[TTL]
        self._t.client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": self._t.name, "Item": head}},
                {"Put": {"TableName": self._t.name, "Item": run}},
            ]
        )

    def run(self, tenant: str, response_id: str) -> RunRecord | None:
        """The run of a background response (None once it ended), with its head's status."""
        pk = keys.response_pk(tenant, response_id)
        run, head = self._t.get_many((pk, keys.RUN), (pk, keys.RESPONSE))
        if run is None or head is None:
            return None
        state_sk = run["state_sk"]["S"] if "state_sk" in run else None
        attrs = self._t.record(pk, state_sk) if state_sk else None
        return RunRecord(
            token=run["token"]["S"],
            status=head["status"]["S"] if "status" in head else "completed",
            owner=run["owner"]["S"] if "owner" in run else None,
            lease_until=float(run["lease_until"]["N"]) if "lease_until" in run else 0.0,
            state=json.loads(attrs["state"]) if attrs else None,
            state_sk=state_sk,
        )

    def take(
        self,
        tenant: str,
        response_id: str,
        token: str,
        owner: str,
        lease_until: float,
        status: str = "queued",
    ) -> None:
        """Make `owner` the run's invocation until `lease_until`: the run must be free (never
        taken, its lease ran out, or released) and the response still `status` as read
        (queued or in progress: it becomes in progress; cancelled: it stays so, to be ended).
        RunBusy when another invocation holds it or the status moved."""
        pk = keys.response_pk(tenant, response_id)
        now = str(int(time.time()))
        becomes = "cancelled" if status == "cancelled" else "in_progress"
        try:
            self._t.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._t.name,
                            "Key": key(pk, keys.RUN),
                            "UpdateExpression": "SET #owner = :owner, lease_until = :until",
                            "ConditionExpression": "#token = :token AND (attribute_not_exists"
                            "(#owner) OR lease_until < :now OR #owner = :owner)",
                            "ExpressionAttributeNames": {"#owner": "owner", "#token": "token"},
                            "ExpressionAttributeValues": {
                                ":owner": {"S": owner},
                                ":token": {"S": token},
                                ":until": {"N": str(int(lease_until))},
                                ":now": {"N": now},
                            },
                        }
                    },
                    {
                        "Update": {
                            "TableName": self._t.name,
                            "Key": key(pk, keys.RESPONSE),
                            "UpdateExpression": "SET #status = :becomes, lease_until = :until",
                            "ConditionExpression": "#status = :was",
                            "ExpressionAttributeNames": {"#status": "status"},
                            "ExpressionAttributeValues": {
                                ":was": {"S": status},
                                ":becomes": {"S": becomes},
                                ":until": {"N": str(int(lease_until))},
                            },
                        }
                    },
                ]
            )
        except ClientError as err:
            if _cancelled_transaction(err):
                raise RunBusy(response_id) from err
            raise

    def checkpoint(
        self, tenant: str, response_id: str, owner: str, version: int, state: dict[str, Any]
    ) -> None:
        """Store the run's state while `owner` owns it (RunGone otherwise, and nothing is
        kept); the previous state's items go."""
        pk = keys.response_pk(tenant, response_id)
        items = self._state_items(pk, owner, version, state)
        self._t.put_all(items)
        new_sk = items[0]["SK"]["S"]
        try:
            old = self._t.client.update_item(
                TableName=self._t.name,
                Key=key(pk, keys.RUN),
                UpdateExpression="SET state_sk = :sk",
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":sk": {"S": new_sk}, ":owner": {"S": owner}},
                ReturnValues="UPDATED_OLD",
            )
        except ClientError as err:
            self._t.delete_all([key(pk, item["SK"]["S"]) for item in items])
            if condition_failed(err):
                raise RunGone(response_id) from err
            raise
        previous = old.get("Attributes", {}).get("state_sk", {}).get("S")
        if previous and previous != new_sk:
            self._t.delete_all(self._record_keys(pk, previous))

    def release(self, tenant: str, response_id: str, owner: str) -> None:
        """Free the run for its next invocation (a continuation takes it at once)."""
        self._t.update_if(
            key(keys.response_pk(tenant, response_id), keys.RUN),
            "SET lease_until = :zero",
            "#owner = :owner",
            {":zero": {"N": "0"}, ":owner": {"S": owner}},
            names={"#owner": "owner"},
        )

    def cancel_unsent(self, tenant: str, response_id: str) -> None:
        """A background response whose message could not be sent: failed, its run gone."""
        pk = keys.response_pk(tenant, response_id)
        self._t.delete_all([key(pk, keys.RUN)])
        self._t.update_if(
            key(pk, keys.RESPONSE),
            "SET #status = :failed",
            "#status = :queued",
            {":failed": {"S": "failed"}, ":queued": {"S": "queued"}},
            names={"#status": "status"},
        )

    def status(self, tenant: str, response_id: str) -> str | None:
        """The head's status alone (a cheap read for a running worker); None when gone."""
        item = self._t.client.get_item(
            TableName=self._t.name,
            Key=key(keys.response_pk(tenant, response_id), keys.RESPONSE),
            ProjectionExpression="#status",
            ExpressionAttributeNames={"#status": "status"},
            ConsistentRead=True,
        ).get("Item")
        return item["status"]["S"] if item and "status" in item else None

    def cancel(self, tenant: str, response_id: str) -> OpenAIResponseObjectWithInput:
        """Cancel a background response: a queued one never starts, a running one stops at its
        next event boundary (its worker writes what it produced). Cancelling a cancelled or
        finished response changes nothing; a response not created in the background is 400."""
        pk = keys.response_pk(tenant, response_id)
        for _ in range(3):  # a queued response may start meanwhile: read again
            current = self.get(tenant, response_id)
            if not current.background:
                raise InvalidRequest("Only responses created with background=true can be cancelled")
            if current.status not in RUNNING:
                return current
            actions: list[dict[str, Any]] = [
                {
                    "Update": {
                        "TableName": self._t.name,
                        "Key": key(pk, keys.RESPONSE),
                        "UpdateExpression": "SET #status = :cancelled",
                        "ConditionExpression": "#status = :was",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": {
                            ":cancelled": {"S": "cancelled"},
                            ":was": {"S": current.status},
                        },
                    }
                }
            ]
            if current.status == "queued":  # it never runs: its run goes with it
                actions.append({"Delete": {"TableName": self._t.name, "Key": key(pk, keys.RUN)}})
            try:
                self._t.client.transact_write_items(TransactItems=actions)
            except ClientError as err:
                if _cancelled_transaction(err):
                    continue
                raise
            return self.get(tenant, response_id)
        return self.get(tenant, response_id)

    def _state_items(
        self, pk: str, owner: str, version: int, state: dict[str, Any]
    ) -> list[dict[str, Any]]:
        sk = f"{keys.RUN_STATE_PREFIX}{owner}#{version:06d}"
        return encode(key(pk, sk), {"state": json_text.dumps_str(state)})

    def _record_keys(self, pk: str, sk: str) -> list[dict[str, Any]]:
        found = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
                "ExpressionAttributeValues": {":pk": {"S": pk}, ":sk": {"S": sk}},
                "ProjectionExpression": "PK, SK",
            }
        )
        return [key(pk, item["SK"]["S"]) for item in found]

    def get(self, tenant: str, response_id: str) -> OpenAIResponseObjectWithInput:
        for head, attrs in decode(self._head_items(tenant, response_id)):
            if head["SK"]["S"] == keys.RESPONSE and not expired(head):
                return _present(head, attrs["body"])
        raise NotFound(f"Response {response_id} not found")

    def trace(self, tenant: str, response_id: str) -> tuple[str, list[dict[str, Any]]]:
        """A response's status and the spans stored with its end (none while it runs)."""
        for head, attrs in decode(self._head_items(tenant, response_id)):
            if head["SK"]["S"] == keys.RESPONSE and not expired(head):
                return head["status"]["S"], json.loads(attrs.get("trace", "[]"))
        raise NotFound(f"Response {response_id} not found")

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
                body = inline_attrs(head)["body"]
            out.append(_present(head, body))
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

    def _head_items(self, tenant: str, response_id: str) -> list[dict[str, Any]]:
        """The response's head item and its parts, if it is in parts."""
        return self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.response_pk(tenant, response_id)},
                    ":sk": {"S": keys.RESPONSE},
                },
                "ConsistentRead": True,
            }
        )

    def _records(self, tenant: str, response_id: str, sk: str) -> dict[str, str]:
        return self._records_at(keys.response_pk(tenant, response_id), sk, response_id)

    def _records_at(self, pk: str, sk: str, response_id: str = "") -> dict[str, str]:
        attrs = self._t.record(pk, sk)
        if attrs is None:
            raise NotFound(f"Response {response_id or pk} not found")
        return attrs


def _present(head: dict[str, Any], body: str) -> OpenAIResponseObjectWithInput:
    """The response as readers see it: the head's status wins over the body's, and a response
    run in a caller's request whose lease passed (its process ended) is failed. A background
    response's fate is its queue's: a redelivered message carries it on."""
    response = OpenAIResponseObjectWithInput.model_validate_json(body)
    if "status" in head:
        response.status = head["status"]["S"]
    if "error" in head:
        response.error = OpenAIResponseError.model_validate_json(head["error"]["S"])
    lease = int(head["lease_until"]["N"]) if "lease_until" in head else 0
    if response.status == "in_progress" and not response.background and 0 < lease < time.time():
        response.status, response.error = "failed", LOST_ERROR
    return response


def _cancelled_transaction(err: ClientError) -> bool:
    return err.response["Error"]["Code"] in (
        "TransactionCanceledException",
        "ConditionalCheckFailedException",
    )
