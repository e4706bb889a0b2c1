"""Amazon Bedrock Guardrails through `ApplyGuardrail` (bedrock-runtime; botocore, run off the
event loop). The shield's `provider_shield_id` is the guardrail id (or ARN); its params hold
`guardrailVersion` (a number, or `DRAFT`).

The guardrail blocks when it answers `GUARDRAIL_INTERVENED`: the violation's user message is
the guardrail's own output text (its configured blocked message), its assessments go in the
metadata. One request per check, whatever the number of messages.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from ..api.common import SafetyViolation, ViolationLevel
from ..errors import InvalidRequest, UpstreamFailed, UpstreamTimeout
from .types import DEFAULT_USER_MESSAGE, Source, Verdict, known_keys

# bedrock-runtime's own patterns for ApplyGuardrail's path parameters.
GUARDRAIL_ID = re.compile(
    r"^(?:[a-z0-9]+|arn:aws(?:-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail/[a-z0-9]+)$"
)
GUARDRAIL_VERSION = re.compile(r"^(?:[1-9][0-9]{0,7}|DRAFT)$")

#: Content filter types as OpenAI moderation categories (PROMPT_ATTACK has none).
_CATEGORIES = {
    "HATE": ["hate"],
    "INSULTS": ["harassment"],
    "SEXUAL": ["sexual"],
    "VIOLENCE": ["violence"],
    "MISCONDUCT": ["illicit"],
}


def validate(provider_shield_id: str, params: dict[str, Any]) -> dict[str, Any]:
    if len(provider_shield_id) > 2048 or not GUARDRAIL_ID.match(provider_shield_id):
        raise InvalidRequest(
            f"provider_shield_id {provider_shield_id[:100]!r} is not a Bedrock guardrail id or ARN"
        )
    known_keys(params, {"guardrailVersion"}, "bedrock")
    version = str(params.get("guardrailVersion", ""))
    if not GUARDRAIL_VERSION.match(version):
        raise InvalidRequest(
            'params.guardrailVersion is required for a bedrock shield: a version number or "DRAFT"'
        )
    return {"guardrailVersion": version}


class BedrockGuardrail:
    name = "bedrock"

    def __init__(self, client: Any) -> None:
        self._client = client

    async def run(
        self,
        provider_shield_id: str,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
        source: Source,
    ) -> Verdict:
        content = [{"text": {"text": m["content"]}} for m in messages if m.get("content")]
        if not content:
            return Verdict()
        version = str(params["guardrailVersion"])
        resp = await asyncio.to_thread(
            self._apply, provider_shield_id, version, source.upper(), content
        )
        if resp.get("action") != "GUARDRAIL_INTERVENED":
            return Verdict()
        texts = [o["text"] for o in resp.get("outputs", []) if o.get("text")]
        assessments = resp.get("assessments", [])
        metadata = {
            "guardrail_id": provider_shield_id,
            "guardrail_version": version,
            "action": resp["action"],
            "assessments": assessments,
        }
        if resp.get("actionReason"):
            metadata["action_reason"] = resp["actionReason"]
        violation = SafetyViolation(
            violation_level=ViolationLevel.error,
            user_message="\n".join(texts) or DEFAULT_USER_MESSAGE,
            metadata=metadata,
        )
        return Verdict(violation, _categories(assessments))

    def _apply(
        self, guardrail: str, version: str, source: str, content: list[dict[str, Any]]
    ) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

        where = f"Bedrock guardrail {guardrail} version {version}"
        try:
            resp = self._client.apply_guardrail(
                guardrailIdentifier=guardrail,
                guardrailVersion=version,
                source=source,
                content=content,
            )
        except ClientError as err:
            error = err.response.get("Error", {})
            code, message = error.get("Code", "error"), error.get("Message", "")
            raise UpstreamFailed(f"{where} failed: {code}: {message}".rstrip(": ")) from err
        except ReadTimeoutError as err:
            raise UpstreamTimeout(f"{where} did not answer in time") from err
        except BotoCoreError as err:
            raise UpstreamFailed(f"{where} could not be reached: {err}") from err
        resp.pop("ResponseMetadata", None)
        return resp


def _categories(assessments: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for assessment in assessments:
        for flt in (assessment.get("contentPolicy") or {}).get("filters", []):
            if flt.get("action") == "BLOCKED" or flt.get("detected"):
                out += [c for c in _CATEGORIES.get(flt.get("type", ""), []) if c not in out]
    return out
