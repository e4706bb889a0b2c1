"""Load function entry points the way Lambda does, and the context object Lambda passes."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class LambdaContext:
    """The attributes of the Lambda runtime's context object that handlers read."""

    function_name: str = "AgentsFunction"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:AgentsFunction"
    aws_request_id: str = "00000000-0000-4000-8000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 15_000


def load_function(name: str):
    """Import functions/<name>/app.py as a fresh module (each function has its own app.py)."""
    path = ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"function_{name}_app", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_event(relative: str, replace: dict[str, str] | None = None) -> dict:
    text = (ROOT / "events" / relative).read_text()
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    return json.loads(text)


def record_dynamodb_actions(function) -> set[str]:
    """The IAM actions of the DynamoDB calls a function module's client makes from now on."""
    actions: set[str] = set()

    def record(params, model, **_):
        if model.name == "TransactWriteItems":  # authorized item by item
            for item in params["TransactItems"]:
                (kind,) = item
                actions.add(
                    "dynamodb:" + {"ConditionCheck": "ConditionCheckItem"}.get(kind, kind + "Item")
                )
        else:
            actions.add(f"dynamodb:{model.name}")

    function.services.dynamodb.meta.events.register("before-parameter-build.dynamodb", record)
    return actions
