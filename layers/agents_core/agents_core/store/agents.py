"""Agents, sessions, turns and steps in the single DynamoDB table.

Each item keeps its API object as a JSON string in `body`; keys and a few attributes
(`deleting`, `expires_at`) carry what queries and conditions need. Deletes remove children
first and the parent last, so a delete cut short by a dying Lambda is finished by retrying it.

    store = AgentStore(boto3.client("dynamodb"), "serverless-agents")
    agent = store.create_agent("default", AgentConfig(model="m", instructions="be brief"))
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import TypeAdapter

from ..api.agents import Agent, AgentConfig, Session, Step, Turn
from ..ids import new_id
from . import keys
from .errors import NotFound, TooLarge
from .items import MAX_ITEM_BYTES, item_size, json_body, parse_body

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_BATCH = 25  # BatchWriteItem's limit
_STEP: TypeAdapter[Step] = TypeAdapter(Step)


class AgentStore:
    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        ephemeral_session_ttl_seconds: int = 24 * 3600,
    ) -> None:
        self._db = client
        self._table = table_name
        self._ephemeral_ttl = ephemeral_session_ttl_seconds

    # --- agents ----------------------------------------------------------------------------

    def create_agent(self, tenant: str, config: AgentConfig) -> Agent:
        agent = Agent(agent_id=new_id(), agent_config=config, created_at=datetime.now(UTC))
        item = {
            "PK": {"S": keys.agent_pk(tenant, agent.agent_id)},
            "SK": {"S": keys.AGENT},
            "GSI1PK": {"S": keys.agents_gsi1pk(tenant)},
            "GSI1SK": {"S": agent.agent_id},
            "body": {"S": json_body(agent)},
        }
        _check_size(item, "agent_config")
        self._db.put_item(TableName=self._table, Item=item)
        return agent

    def get_agent(self, tenant: str, agent_id: str) -> Agent:
        resp = self._db.get_item(
            TableName=self._table,
            Key=_key(keys.agent_pk(tenant, agent_id), keys.AGENT),
            ConsistentRead=True,
        )
        item = resp.get("Item")
        if item is None or "deleting" in item:
            raise NotFound(f"Agent {agent_id} not found")
        return parse_body(Agent, item)

    def list_agents(self, tenant: str, start_index: int, limit: int) -> tuple[list[Agent], bool]:
        items, has_more = self._page(
            {
                "IndexName": "GSI1",
                "KeyConditionExpression": "GSI1PK = :pk",
                "FilterExpression": "attribute_not_exists(deleting)",
                "ExpressionAttributeValues": {":pk": {"S": keys.agents_gsi1pk(tenant)}},
            },
            start_index,
            limit,
        )
        return [parse_body(Agent, item) for item in items], has_more

    def delete_agent(self, tenant: str, agent_id: str) -> None:
        """Mark the agent deleting (no new sessions), delete its sessions, then the agent."""
        pk = keys.agent_pk(tenant, agent_id)
        try:
            self._db.update_item(
                TableName=self._table,
                Key=_key(pk, keys.AGENT),
                UpdateExpression="SET deleting = :t",
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeValues={":t": {"BOOL": True}},
            )
        except ClientError as err:
            raise _not_found_if_condition(err, f"Agent {agent_id} not found") from err
        for ref in self._query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
                "ExpressionAttributeValues": {":pk": {"S": pk}, ":s": {"S": "SESSION#"}},
                "ProjectionExpression": "SK",
            }
        ):
            session_id = ref["SK"]["S"].removeprefix("SESSION#")
            self._delete_session_items(tenant, agent_id, session_id)
        self._db.delete_item(TableName=self._table, Key=_key(pk, keys.AGENT))

    # --- sessions --------------------------------------------------------------------------

    def create_session(self, tenant: str, agent_id: str, session_name: str) -> Session:
        """Write the session and its entry under the agent, only while the agent exists."""
        agent = self.get_agent(tenant, agent_id)
        session = Session(
            session_id=new_id(), session_name=session_name, turns=[], started_at=datetime.now(UTC)
        )
        body = {"S": json_body(session)}
        extra: dict[str, Any] = {}
        if not agent.agent_config.enable_session_persistence:
            extra["expires_at"] = {"N": str(int(time.time()) + self._ephemeral_ttl)}
        session_item = {
            "PK": {"S": keys.session_pk(tenant, session.session_id)},
            "SK": {"S": keys.SESSION},
            "agent_id": {"S": agent_id},
            "body": body,
            **extra,
        }
        ref_item = {
            "PK": {"S": keys.agent_pk(tenant, agent_id)},
            "SK": {"S": keys.session_ref_sk(session.session_id)},
            "body": body,
            **extra,
        }
        _check_size(session_item, "session_name")
        try:
            self._db.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self._table,
                            "Key": _key(keys.agent_pk(tenant, agent_id), keys.AGENT),
                            "ConditionExpression": (
                                "attribute_exists(PK) AND attribute_not_exists(deleting)"
                            ),
                        }
                    },
                    {"Put": {"TableName": self._table, "Item": session_item}},
                    {"Put": {"TableName": self._table, "Item": ref_item}},
                ]
            )
        except ClientError as err:
            if err.response["Error"]["Code"] == "TransactionCanceledException":
                raise NotFound(f"Agent {agent_id} not found") from err
            raise
        return session

    def get_session(
        self, tenant: str, agent_id: str, session_id: str, turn_ids: list[str] | None = None
    ) -> Session:
        """One query reads the session item and all its turns and steps, in creation order."""
        items = self._query_all(
            {
                "KeyConditionExpression": "PK = :pk",
                "ExpressionAttributeValues": {":pk": {"S": keys.session_pk(tenant, session_id)}},
                "ConsistentRead": True,
            }
        )
        head = items[0] if items and items[0]["SK"]["S"] == keys.SESSION else None
        if head is None or head["agent_id"]["S"] != agent_id or _expired(head):
            raise NotFound(f"Session {session_id} not found")
        session = parse_body(Session, head)
        turns = _assemble_turns(items[1:])
        if turn_ids:
            wanted = set(turn_ids)
            turns = [turn for turn in turns if turn.turn_id in wanted]
        session.turns = turns
        return session

    def list_sessions(
        self, tenant: str, agent_id: str, start_index: int, limit: int
    ) -> tuple[list[Session], bool]:
        """Sessions of an agent, oldest first; `turns` is left empty (read a session for those)."""
        self.get_agent(tenant, agent_id)
        items, has_more = self._page(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
                "FilterExpression": "attribute_not_exists(expires_at) OR expires_at > :now",
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.agent_pk(tenant, agent_id)},
                    ":s": {"S": "SESSION#"},
                    ":now": {"N": str(int(time.time()))},
                },
                "ConsistentRead": True,
            },
            start_index,
            limit,
        )
        return [parse_body(Session, item) for item in items], has_more

    def delete_session(self, tenant: str, agent_id: str, session_id: str) -> None:
        self.get_agent(tenant, agent_id)
        head = self._db.get_item(
            TableName=self._table,
            Key=_key(keys.session_pk(tenant, session_id), keys.SESSION),
            ConsistentRead=True,
        ).get("Item")
        if head is None or head["agent_id"]["S"] != agent_id:
            raise NotFound(f"Session {session_id} not found")
        self._delete_session_items(tenant, agent_id, session_id)

    def _delete_session_items(self, tenant: str, agent_id: str, session_id: str) -> None:
        """Turns and steps first, then the session and its entry under the agent."""
        pk = keys.session_pk(tenant, session_id)
        children = self._query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :t)",
                "ExpressionAttributeValues": {":pk": {"S": pk}, ":t": {"S": "TURN#"}},
                "ProjectionExpression": "PK, SK",
            }
        )
        self._batch_delete([_key(pk, item["SK"]["S"]) for item in children])
        self._batch_delete(
            [
                _key(pk, keys.SESSION),
                _key(keys.agent_pk(tenant, agent_id), keys.session_ref_sk(session_id)),
            ]
        )

    # --- turns and steps -------------------------------------------------------------------

    def save_turn(self, tenant: str, agent_id: str, turn: Turn) -> None:
        """Write a turn and its steps (one item each) under its session."""
        session = self._session_head(tenant, agent_id, turn.session_id)
        pk = keys.session_pk(tenant, turn.session_id)
        extra = {"expires_at": session["expires_at"]} if "expires_at" in session else {}
        header = turn.model_copy(update={"steps": []})
        items = [
            {
                "PK": {"S": pk},
                "SK": {"S": keys.turn_sk(turn.turn_id)},
                "body": {"S": json_body(header)},
                **extra,
            }
        ]
        for step in turn.steps:
            items.append(
                {
                    "PK": {"S": pk},
                    "SK": {"S": keys.step_sk(turn.turn_id, step.step_id)},
                    "body": {"S": json_body(step)},
                    **extra,
                }
            )
        for item in items:
            _check_size(item, "turn")
        for start in range(0, len(items), _BATCH):
            self._batch_write([{"PutRequest": {"Item": i}} for i in items[start : start + _BATCH]])

    def get_turn(self, tenant: str, agent_id: str, session_id: str, turn_id: str) -> Turn:
        self._session_head(tenant, agent_id, session_id)
        items = self._query_all(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :t)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.session_pk(tenant, session_id)},
                    ":t": {"S": keys.turn_sk(turn_id)},
                },
                "ConsistentRead": True,
            }
        )
        own = keys.turn_sk(turn_id)
        items = [i for i in items if i["SK"]["S"] == own or i["SK"]["S"].startswith(own + "#")]
        turns = _assemble_turns(items)
        if not turns:
            raise NotFound(f"Turn {turn_id} not found")
        return turns[0]

    def get_step(
        self, tenant: str, agent_id: str, session_id: str, turn_id: str, step_id: str
    ) -> Step:
        self._session_head(tenant, agent_id, session_id)
        item = self._db.get_item(
            TableName=self._table,
            Key=_key(keys.session_pk(tenant, session_id), keys.step_sk(turn_id, step_id)),
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            raise NotFound(f"Step {step_id} not found in turn {turn_id}")
        return _parse_step(item)

    def _session_head(self, tenant: str, agent_id: str, session_id: str) -> dict[str, Any]:
        item = self._db.get_item(
            TableName=self._table,
            Key=_key(keys.session_pk(tenant, session_id), keys.SESSION),
            ConsistentRead=True,
        ).get("Item")
        if item is None or item["agent_id"]["S"] != agent_id or _expired(item):
            raise NotFound(f"Session {session_id} not found")
        return item

    # --- plumbing --------------------------------------------------------------------------

    def _query_all(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs = {"TableName": self._table, **params}
        while True:
            resp = self._db.query(**kwargs)
            items.extend(resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return items
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def _page(
        self, params: dict[str, Any], start_index: int, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Offset pages: skip `start_index` items, return `limit` of them and whether more exist."""
        wanted = start_index + limit + 1
        items: list[dict[str, Any]] = []
        kwargs = {"TableName": self._table, **params}
        while len(items) < wanted:
            resp = self._db.query(**kwargs, Limit=min(wanted - len(items), 1000))
            items.extend(resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        page = items[start_index : start_index + limit]
        return page, len(items) > start_index + limit

    def _batch_delete(self, keys_: list[dict[str, Any]]) -> None:
        for start in range(0, len(keys_), _BATCH):
            self._batch_write(
                [{"DeleteRequest": {"Key": k}} for k in keys_[start : start + _BATCH]]
            )

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        """BatchWriteItem until DynamoDB has taken every request (it may hand some back)."""
        pending = {self._table: requests}
        for attempt in range(8):
            if not pending.get(self._table):
                return
            resp = self._db.batch_write_item(RequestItems=pending)
            pending = resp.get("UnprocessedItems", {})
            if pending:
                time.sleep(0.05 * 2**attempt)
        if pending.get(self._table):
            raise RuntimeError("DynamoDB left writes unprocessed after retries")


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def _expired(item: dict[str, Any]) -> bool:
    """TTL deletion lags by up to days: an item past its time is treated as gone."""
    return "expires_at" in item and int(item["expires_at"]["N"]) <= time.time()


def _check_size(item: dict[str, Any], what: str) -> None:
    if item_size(item) > MAX_ITEM_BYTES:
        raise TooLarge(f"{what} is too large to store (limit {MAX_ITEM_BYTES} bytes)")


def _not_found_if_condition(err: ClientError, message: str) -> Exception:
    if err.response["Error"]["Code"] == "ConditionalCheckFailedException":
        return NotFound(message)
    return err


def _parse_step(item: dict[str, Any]) -> Step:
    return _STEP.validate_json(item["body"]["S"])


def _assemble_turns(items: list[dict[str, Any]]) -> list[Turn]:
    """Turn items followed by their step items, as one query returns them, into Turns."""
    turns: list[Turn] = []
    for item in items:
        sk = item["SK"]["S"]
        if "#STEP#" in sk:
            if turns:
                turns[-1].steps.append(_parse_step(item))
        elif sk.startswith("TURN#"):
            turns.append(parse_body(Turn, item))
    return turns
