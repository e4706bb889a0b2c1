"""Secrets read at run time from AWS Secrets Manager, once per container.

A deployed stack hands a function only the secret's id (`OPENAI_API_KEY_SECRET_ID`): the value
never sits in the environment, the template, CloudFormation's parameters or a log line. The
first use reads it (one GetSecretValue, bounded by the client's timeouts) and later uses get
the cached value, so a rotated secret reaches the containers started after the rotation.
"""

from __future__ import annotations

import json
import threading
from typing import Any

_values: dict[str, str] = {}
_lock = threading.Lock()
_client: Any = None  # the application's Secrets Manager client, made once


class SecretUnavailable(Exception):
    """The secret could not be read: missing, access denied, Secrets Manager unreachable."""


def read_secret(secret_id: str, client: Any = None) -> str:
    """The secret's string value: read from Secrets Manager at the first call, then cached.

    `client` is a Secrets Manager client (tests hand in one bound to moto); by default the
    application's bounded client."""
    with _lock:  # concurrent first users wait for one read instead of each making their own
        if secret_id not in _values:
            _values[secret_id] = _fetch(secret_id, client)
        return _values[secret_id]


def model_api_key(secret_id: str, client: Any = None) -> str:
    """A model API key kept in a secret: its plain string value, or a JSON object's `api_key`
    field (or its only field: the console stores secrets as key/value JSON)."""
    text = read_secret(secret_id, client)
    if not text.lstrip().startswith("{"):
        return text.strip()
    try:
        fields = json.loads(text)
    except ValueError:
        raise SecretUnavailable(f"secret {secret_id!r} is neither a key nor JSON") from None
    values = [fields["api_key"]] if "api_key" in fields else list(fields.values())
    if len(values) != 1 or not isinstance(values[0], str):
        raise SecretUnavailable(
            f"secret {secret_id!r} is JSON without an `api_key` field (or one field only)"
        )
    return values[0]


def prepare() -> None:
    """Make the application's Secrets Manager client now (a primed init), not at the first read;
    the value itself is still read at its first use, so a rotated secret reaches the containers
    started after the rotation."""
    global _client
    if _client is None:
        from . import aws

        _client = aws.client("secretsmanager", attempts=3)


def forget() -> None:
    """Drop the cached values and the client (tests)."""
    global _client
    with _lock:
        _values.clear()
        _client = None


def _fetch(secret_id: str, client: Any) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    if client is None:
        prepare()
        client = _client
    try:
        text = client.get_secret_value(SecretId=secret_id).get("SecretString")
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "error")
        raise SecretUnavailable(f"secret {secret_id!r} could not be read: {code}") from err
    except BotoCoreError as err:
        raise SecretUnavailable(f"secret {secret_id!r} could not be read: {err}") from err
    if not text:
        raise SecretUnavailable(f"secret {secret_id!r} has no string value")
    return text
