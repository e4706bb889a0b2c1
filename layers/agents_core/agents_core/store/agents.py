"""Agents and sessions in the single DynamoDB table (turns and steps: `turns.py`).

Each item keeps its API object as a JSON string in `body`; keys and a few attributes
(`deleting`, `expires_at`) carry what queries and conditions need. Deletes remove children
first and the parent last, so a delete cut short by a dying Lambda is finished by retrying it.

    store = AgentStore(aws.client("dynamodb"), "serverless-agents")
    agent = store.create_agent("default", AgentConfig(model="m", instructions="be brief"))
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ..api.agents import Agent, AgentConfig, Session
from ..domain import RUNNING
from ..errors import Conflict, NotFound, TooLarge
from ..ids import new_id
from . import keys
from .history_cache import HistoryCache
from .items import MAX_ITEM_BYTES, item_size, json_body, parse_body
from .sessions import SessionPage, read_session
from .table import Table, condition_failed, key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

AGENT_CACHE_SECONDS = 60
AGENT_CACHE_SIZE = 256


class AgentStore:
    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        ephemeral_session_ttl_seconds: int = 24 * 3600,
    ) -> None:
        self._t = Table(client, table_name)
        self._ephemeral_ttl = ephemeral_session_ttl_seconds
        self._agent_cache: dict[tuple[str, str], tuple[Agent, float]] = {}
        #: Finished turns of sessions read here (they never change): later reads ask for less.
        self._finished_turns = HistoryCache()

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
        self._t.client.put_item(TableName=self._t.name, Item=item)
        return agent

    def get_agent(self, tenant: str, agent_id: str) -> Agent:
        item = self._t.get(keys.agent_pk(tenant, agent_id), keys.AGENT)
        if item is None or "deleting" in item:
            raise NotFound(f"Agent {agent_id} not found")
        return parse_body(Agent, item)

    def agent_for_turn(self, tenant: str, agent_id: str) -> Agent:
        """The agent, from this container's memory when read in the last minute. Agents never
        change once created, and a turn on a deleted agent's session is refused by the session
        lock (the delete removes the sessions), so a turn needs no fresh read."""
        remembered = self.remembered_agent(tenant, agent_id)
        if remembered is not None:
            return remembered
        agent = self.get_agent(tenant, agent_id)
        self._agent_cache[(tenant, agent_id)] = (agent, time.monotonic())
        while len(self._agent_cache) > AGENT_CACHE_SIZE:
            self._agent_cache.pop(next(iter(self._agent_cache)))
        return agent

    def remembered_agent(self, tenant: str, agent_id: str) -> Agent | None:
        """The agent as this container read it in the last minute, or None (no I/O)."""
        cached = self._agent_cache.get((tenant, agent_id))
        if cached is not None and time.monotonic() - cached[1] < AGENT_CACHE_SECONDS:
            return cached[0]
        return None

    def list_agents(self, tenant: str, start_index: int, limit: int) -> tuple[list[Agent], bool]:
        items, has_more = self._t.page(
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
        """All or nothing: mark the agent deleting (no new sessions) and each of its sessions
        (no turn may start); a session with a running turn refuses (409) and every mark made
        here is taken back. Then the sessions' items go, and the agent last, so a delete cut
        short is finished by retrying it."""
        pk = key(keys.agent_pk(tenant, agent_id), keys.AGENT)
        try:
            old = self._t.client.update_item(
                TableName=self._t.name,
                Key=pk,
                UpdateExpression="SET deleting = :t",
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeValues={":t": {"BOOL": True}},
                ReturnValues="UPDATED_OLD",
            ).get("Attributes", {})
        except ClientError as err:
            if condition_failed(err):
                raise NotFound(f"Agent {agent_id} not found") from err
            raise
        session_ids = [
            keys.session_id_of_ref(ref["SK"]["S"])
            for ref in self._t.query_all(
                {
                    "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
                    "ExpressionAttributeValues": {
                        ":pk": pk["PK"],
                        ":s": {"S": keys.SESSION_REF_PREFIX},
                    },
                    "ProjectionExpression": "SK",
                }
            )
        ]
        newly_marked: list[str] = []
        try:
            for session_id in session_ids:
                if self._mark_session_deleting(tenant, session_id):
                    newly_marked.append(session_id)
        except Conflict:
            for session_id in newly_marked:
                self._unmark(key(keys.session_pk(tenant, session_id), keys.SESSION))
            if "deleting" not in old:
                self._unmark(pk)
            raise
        for session_id in session_ids:
            self._remove_session_items(tenant, agent_id, session_id)
        self._t.client.delete_item(TableName=self._t.name, Key=pk)

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
            self._t.client.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self._t.name,
                            "Key": key(keys.agent_pk(tenant, agent_id), keys.AGENT),
                            "ConditionExpression": (
                                "attribute_exists(PK) AND attribute_not_exists(deleting)"
                            ),
                        }
                    },
                    {"Put": {"TableName": self._t.name, "Item": session_item}},
                    {"Put": {"TableName": self._t.name, "Item": ref_item}},
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
        """The session with all its turns (or those of `turn_ids`), oldest first."""
        return read_session(self._t, tenant, agent_id, session_id, turn_ids=turn_ids).session

    def session_page(self, tenant: str, agent_id: str, session_id: str, **page: Any) -> SessionPage:
        """The session with a page of its turns (`sessions.read_session`)."""
        return read_session(
            self._t, tenant, agent_id, session_id, memory=self._finished_turns, **page
        )

    def list_sessions(
        self, tenant: str, agent_id: str, start_index: int, limit: int
    ) -> tuple[list[Session], bool]:
        """Sessions of an agent, oldest first; `turns` is left empty (read a session for those)."""
        self.get_agent(tenant, agent_id)
        items, has_more = self._t.page(
            {
                "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
                # A session being deleted is not listed: its read answers 404 already.
                "FilterExpression": (
                    "(attribute_not_exists(expires_at) OR expires_at > :now)"
                    " AND attribute_not_exists(deleting)"
                ),
                "ExpressionAttributeValues": {
                    ":pk": {"S": keys.agent_pk(tenant, agent_id)},
                    ":s": {"S": keys.SESSION_REF_PREFIX},
                    ":now": {"N": str(int(time.time()))},
                },
                "ConsistentRead": True,
            },
            start_index,
            limit,
        )
        return [parse_body(Session, item) for item in items], has_more

    def delete_session(self, tenant: str, agent_id: str, session_id: str) -> None:
        """Also finishes a delete that was cut short. The session and its entry under the agent
        are marked deleting at once (neither read nor listed from then on), and removed at once
        last: a delete cut short anywhere leaves the session listed and usable, or gone."""
        self.get_agent(tenant, agent_id)
        head = self._t.get(keys.session_pk(tenant, session_id), keys.SESSION)
        if head is None or head["agent_id"]["S"] != agent_id:
            raise NotFound(f"Session {session_id} not found")
        self._mark_session_deleting(tenant, session_id, agent_id)
        self._remove_session_items(tenant, agent_id, session_id)

    def _mark_session_deleting(
        self, tenant: str, session_id: str, agent_id: str | None = None
    ) -> bool:
        """Mark the session deleting: no turn may start or resume; with `agent_id`, its entry
        under the agent too, in the same transaction (it leaves the listing). Refused (Conflict)
        while a turn is running, which would write after the delete. True when this call marked
        it; False when it was marked already or is gone (a delete cut short)."""
        session_key = key(keys.session_pk(tenant, session_id), keys.SESSION)
        was = self._t.get(session_key["PK"]["S"], keys.SESSION)
        actions: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._t.name,
                    "Key": session_key,
                    "UpdateExpression": "SET deleting = :t",
                    "ConditionExpression": (
                        "attribute_exists(PK) AND NOT (active_state = :run AND lease_until > :now)"
                    ),
                    "ExpressionAttributeValues": {
                        ":t": {"BOOL": True},
                        ":run": {"S": RUNNING},
                        ":now": {"N": str(int(time.time()))},
                    },
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        ]
        if agent_id is not None:
            actions.append(
                {
                    "Update": {
                        "TableName": self._t.name,
                        "Key": self._session_ref(tenant, agent_id, session_id),
                        "UpdateExpression": "SET deleting = :t",
                        "ExpressionAttributeValues": {":t": {"BOOL": True}},
                    }
                }
            )
        try:
            self._t.transact(actions)
        except ClientError as err:
            reasons = err.response.get("CancellationReasons") or [{}]
            if reasons[0].get("Code") != "ConditionalCheckFailed":
                raise
            if "Item" in reasons[0]:  # it exists, so a turn is running
                raise Conflict(
                    f"Session {session_id} has a turn running; delete it when the turn ends"
                ) from err
            return False
        return was is not None and "deleting" not in was

    def _session_ref(self, tenant: str, agent_id: str, session_id: str) -> dict[str, Any]:
        return key(keys.agent_pk(tenant, agent_id), keys.session_ref_sk(session_id))

    def _unmark(self, item_key: dict[str, Any]) -> None:
        self._t.update_if(item_key, "REMOVE deleting", "attribute_exists(PK)", {})

    def _remove_session_items(self, tenant: str, agent_id: str, session_id: str) -> None:
        """The turns and steps of a session marked deleting, then the session and its entry
        under the agent."""
        pk = keys.session_pk(tenant, session_id)
        children = self._t.query_all(
            {
                "KeyConditionExpression": "PK = :pk",
                "ExpressionAttributeValues": {":pk": {"S": pk}},
                "ProjectionExpression": "SK",
            }
        )
        self._t.delete_all(
            [key(pk, i["SK"]["S"]) for i in children if i["SK"]["S"] != keys.SESSION]
        )
        self._t.transact(  # both or neither: never an entry listed for a session gone
            [
                {"Delete": {"TableName": self._t.name, "Key": key(pk, keys.SESSION)}},
                {
                    "Delete": {
                        "TableName": self._t.name,
                        "Key": self._session_ref(tenant, agent_id, session_id),
                    }
                },
            ]
        )


def _check_size(item: dict[str, Any], what: str) -> None:
    if item_size(item) > MAX_ITEM_BYTES:
        raise TooLarge(f"{what} is too large to store (limit {MAX_ITEM_BYTES} bytes)")
