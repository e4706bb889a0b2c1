"""Prompts in the single table: one partition per tenant (`T#{t}#PROMPTS`). A prompt's head
(`PROMPT#{id}`) holds its latest and default version numbers and a copy of the default
version, so a list is one query and a read by id one request; each version is an item of its
own (`PVER#{id}#{version}`), written once.

A new version is one transaction: the head moves from the version the caller read to the next
only if that is still the latest (else 409), and the version's item is put only if it is new.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ..api.prompts import Prompt
from ..errors import Conflict, NotFound, TooLarge
from . import keys
from .items import MAX_ITEM_BYTES, item_size, json_body, parse_body
from .table import Table, key


class PromptStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._t = Table(client, table_name)

    def create(self, tenant: str, prompt: Prompt) -> None:
        """A new prompt at version 1, its default."""
        head = self._head(tenant, prompt, latest=1)
        self._t.transact(
            [
                {
                    "Put": {
                        "TableName": self._t.name,
                        "Item": head,
                        "ConditionExpression": "attribute_not_exists(PK)",
                    }
                },
                {"Put": {"TableName": self._t.name, "Item": self._version(tenant, prompt)}},
            ]
        )

    def get(self, tenant: str, prompt_id: str, version: int | None = None) -> Prompt:
        """A version of the prompt, or its default; 404 for a prompt or version not there."""
        pk = keys.prompts_pk(tenant)
        if version is None:
            head = self._t.get(pk, keys.prompt_sk(prompt_id))
            if head is None:
                raise NotFound(f"Prompt {prompt_id} not found")
            return parse_body(Prompt, head)
        head, item = self._t.get_many(
            (pk, keys.prompt_sk(prompt_id)), (pk, keys.prompt_version_sk(prompt_id, version))
        )
        if head is None:
            raise NotFound(f"Prompt {prompt_id} not found")
        if item is None:
            raise NotFound(f"Prompt {prompt_id} has no version {version}")
        found = parse_body(Prompt, item)
        found.is_default = version == int(head["default_version"]["N"])
        return found

    def list(self, tenant: str) -> list[Prompt]:
        """Every prompt of the tenant at its default version: one query (a page per MB)."""
        heads = self._t.query_all(self._prefixed(tenant, keys.PROMPT_PREFIX))
        return [parse_body(Prompt, head) for head in heads]

    def versions(self, tenant: str, prompt_id: str) -> list[Prompt]:
        """Every version of the prompt, oldest first."""
        head = self._t.get(keys.prompts_pk(tenant), keys.prompt_sk(prompt_id))
        if head is None:
            raise NotFound(f"Prompt {prompt_id} not found")
        default = int(head["default_version"]["N"])
        prefix = keys.prompt_version_sk(prompt_id, 0)[:-9]
        found = [parse_body(Prompt, i) for i in self._t.query_all(self._prefixed(tenant, prefix))]
        for prompt in found:
            prompt.is_default = prompt.version == default
        return found

    def add_version(self, tenant: str, prompt: Prompt, after: int, make_default: bool) -> None:
        """`prompt` (at version `after` + 1) as the prompt's new latest version, and its
        default if `make_default`; 409 if `after` is not the latest any more, 404 if the
        prompt is gone."""
        update = "SET latest = :new"
        values: dict[str, Any] = {":new": {"N": str(prompt.version)}, ":after": {"N": str(after)}}
        if make_default:
            update += ", default_version = :new, body = :body"
            values[":body"] = {"S": json_body(prompt.model_copy(update={"is_default": True}))}
        version = self._version(tenant, prompt)
        try:
            self._t.transact(
                [
                    {
                        "Update": {
                            "TableName": self._t.name,
                            "Key": key(keys.prompts_pk(tenant), keys.prompt_sk(prompt.prompt_id)),
                            "UpdateExpression": update,
                            "ConditionExpression": "latest = :after",
                            "ExpressionAttributeValues": values,
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._t.name,
                            "Item": version,
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    },
                ]
            )
        except ClientError as err:
            if err.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            head = (err.response.get("CancellationReasons") or [{}])[0]
            if head.get("Code") != "ConditionalCheckFailed":
                raise Conflict(f"Prompt {prompt.prompt_id} is being changed; retry") from err
            if not head.get("Item"):
                raise NotFound(f"Prompt {prompt.prompt_id} not found") from err
            latest = head["Item"]["latest"]["N"]
            raise Conflict(
                f"Prompt {prompt.prompt_id} is at version {latest}, not {after}: read it again"
            ) from err

    def set_default(self, tenant: str, prompt_id: str, version: int) -> Prompt:
        """Make an existing version the default; the prompt at it."""
        chosen = self.get(tenant, prompt_id, version)
        chosen.is_default = True
        done = self._t.update_if(
            key(keys.prompts_pk(tenant), keys.prompt_sk(prompt_id)),
            "SET default_version = :v, body = :body",
            "attribute_exists(PK) AND latest >= :v",
            {":v": {"N": str(version)}, ":body": {"S": json_body(chosen)}},
        )
        if not done:
            raise NotFound(f"Prompt {prompt_id} not found")
        return chosen

    def delete(self, tenant: str, prompt_id: str) -> None:
        """The head first (the prompt is gone at once), then its versions."""
        pk = keys.prompts_pk(tenant)
        old = self._t.client.delete_item(
            TableName=self._t.name, Key=key(pk, keys.prompt_sk(prompt_id)), ReturnValues="ALL_OLD"
        )
        if "Attributes" not in old:
            raise NotFound(f"Prompt {prompt_id} not found")
        prefix = keys.prompt_version_sk(prompt_id, 0)[:-9]
        found = {**self._prefixed(tenant, prefix), "ProjectionExpression": "SK"}
        versions = self._t.query_all(found)
        self._t.delete_all([key(pk, item["SK"]["S"]) for item in versions])

    def _head(self, tenant: str, prompt: Prompt, latest: int) -> dict[str, Any]:
        item = {
            **key(keys.prompts_pk(tenant), keys.prompt_sk(prompt.prompt_id)),
            "latest": {"N": str(latest)},
            "default_version": {"N": str(prompt.version)},
            "body": {"S": json_body(prompt.model_copy(update={"is_default": True}))},
        }
        return _bounded(item, prompt.prompt_id)

    def _version(self, tenant: str, prompt: Prompt) -> dict[str, Any]:
        sk = keys.prompt_version_sk(prompt.prompt_id, prompt.version)
        body = json_body(prompt.model_copy(update={"is_default": False}))
        return _bounded({**key(keys.prompts_pk(tenant), sk), "body": {"S": body}}, prompt.prompt_id)

    @staticmethod
    def _prefixed(tenant: str, prefix: str) -> dict[str, Any]:
        return {
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
            "ExpressionAttributeValues": {
                ":pk": {"S": keys.prompts_pk(tenant)},
                ":s": {"S": prefix},
            },
            "ConsistentRead": True,
        }


def _bounded(item: dict[str, Any], prompt_id: str) -> dict[str, Any]:
    if item_size(item) > MAX_ITEM_BYTES:
        raise TooLarge(f"Prompt {prompt_id} is too large to store")
    return item
