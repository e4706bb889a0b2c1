"""Shields: the per-tenant registry, and running shields for turns, responses, run-shield and
moderations.

Every tenant has the built-in `offline` shield (regexes, no network); tenants register their own
on the `llama-guard`, `bedrock` and `offline` providers. The engine asks `check` at the start of
a run (input) and on each model answer (output):

    violation = await svc.safety.check(tenant, ["guard"], [{"role": "user", "content": "hi"}],
                                       source="input")

A shield provider that fails (down, throttled, an answer it cannot read) fails the run with a
502 naming the shield, unless SHIELD_FAIL_OPEN is set: then the failure is logged and the check
passes. `run_shield` and `moderate` always report a failure: a caller asking a shield directly
must not read "no violation" when the shield never answered.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

from ..api.common import SafetyViolation, ViolationLevel
from ..api.safety import (
    SHIELD_ID_PATTERN,
    ModerationObject,
    ModerationResult,
    RegisterShieldRequest,
    Shield,
)
from ..errors import InvalidRequest, ServiceError, UpstreamFailed, UpstreamTimeout
from ..ids import new_id
from ..log import logger
from ..safety import validate
from ..safety.offline import DEFAULT_PATTERNS, OfflineShield
from ..safety.types import OPENAI_CATEGORIES, ShieldProvider, Source, Verdict
from ..store.shields import MAX_SHIELDS_PER_READ, ShieldStore

#: The shield every tenant has: the offline provider with its default patterns.
BUILTIN_SHIELD = Shield(
    identifier="offline",
    provider_id="offline",
    provider_resource_id="offline",
    params={"patterns": DEFAULT_PATTERNS},
)
#: How long a container keeps a shield it read (a replaced or deleted shield reaches warm
#: containers of other functions within this time; the one that changed it at once).
SHIELD_CACHE_SECONDS = 60
SHIELD_CACHE_SIZE = 256

_ID = re.compile(SHIELD_ID_PATTERN)


class SafetyService:
    def __init__(
        self,
        store: ShieldStore,
        *,
        models: Any = None,
        bedrock_client: Any = None,
        fail_open: bool = False,
        timeout_seconds: float = 30.0,
    ) -> None:
        """`models`: the model router Llama Guard shields ask; `bedrock_client`: a bedrock-runtime
        client (None: one is made at the first Bedrock shield)."""
        self._store = store
        self._models = models
        self._bedrock_client = bedrock_client
        self.fail_open = fail_open
        self._timeout = timeout_seconds
        self._providers: dict[str, ShieldProvider] = {}
        self._cache: dict[tuple[str, str], tuple[Shield, float]] = {}

    # --- the registry ----------------------------------------------------------------------

    def register(self, tenant: str, body: RegisterShieldRequest) -> Shield:
        """Register a shield, or replace the tenant's shield of that id."""
        if body.shield_id == BUILTIN_SHIELD.identifier:
            raise InvalidRequest(
                f"Shield {body.shield_id} is built in; register yours under another shield_id"
            )
        provider_shield_id = body.provider_shield_id or body.shield_id
        params = validate(body.provider_id, provider_shield_id, body.params or {})
        shield = Shield(
            identifier=body.shield_id,
            provider_id=body.provider_id,
            provider_resource_id=provider_shield_id,
            params=params,
        )
        self._store.put(tenant, shield)
        self._cache.pop((tenant, shield.identifier), None)
        return shield

    def get(self, tenant: str, identifier: str) -> Shield:
        if identifier == BUILTIN_SHIELD.identifier:
            return BUILTIN_SHIELD
        return self._store.get(tenant, identifier)

    def list(self, tenant: str) -> list[Shield]:
        return [BUILTIN_SHIELD, *self._store.list(tenant)]

    def delete(self, tenant: str, identifier: str) -> None:
        if identifier == BUILTIN_SHIELD.identifier:
            raise InvalidRequest(f"Shield {identifier} is built in and cannot be deleted")
        self._store.delete(tenant, identifier)
        self._cache.pop((tenant, identifier), None)

    # --- running shields -------------------------------------------------------------------

    async def check(
        self,
        tenant: str,
        shield_ids: list[str],
        messages: list[dict[str, Any]],
        *,
        source: Literal["input", "output"],
    ) -> SafetyViolation | None:
        """Run the shields on `messages` (`{"role", "content"}`, content text) in parallel; the
        first blocking violation in `shield_ids` order, or None. InvalidRequest (400) for an
        unknown shield id, before any shield runs; UpstreamFailed (502) when a shield fails,
        unless fail-open."""
        if not shield_ids:
            return None
        shields = await self._resolve(tenant, shield_ids)
        texts = [_text_message(m) for m in messages]
        verdicts = await asyncio.gather(
            *(
                self._run(shield, shield.params or {}, texts, source, self.fail_open)
                for shield in shields
            )
        )
        for verdict in verdicts:
            violation = verdict.violation
            if violation is not None and violation.violation_level == ViolationLevel.error:
                return violation
        return None

    async def known(self, tenant: str, shield_ids: list[str]) -> None:
        """InvalidRequest (400) unless every id names a shield of the tenant: a turn or response
        checks its shields this way before anything is stored."""
        if shield_ids:
            await self._resolve(tenant, shield_ids)

    async def run_shield(
        self,
        tenant: str,
        shield_id: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any] | None = None,
    ) -> SafetyViolation | None:
        """One shield, as `/v1/safety/run-shield` asks it: `params` override the shield's own
        for this run. The messages are an answer (source output, for Bedrock) when the last is
        the assistant's. Any violation is returned, whatever its level."""
        (shield,) = await self._resolve(tenant, [shield_id])
        merged = {**(shield.params or {}), **(params or {})}
        if params:
            merged = validate(shield.provider_id, shield.provider_resource_id or "", merged)
        texts = [_text_message(m) for m in messages]
        source: Source = "output" if texts and texts[-1]["role"] == "assistant" else "input"
        return (await self._run(shield, merged, texts, source, fail_open=False)).violation

    async def moderate(self, tenant: str, model: str, inputs: list[str]) -> ModerationObject:
        """OpenAI moderations: the shield `model` on each input (in parallel), one result each."""
        (shield,) = await self._resolve(tenant, [model])
        verdicts = await asyncio.gather(
            *(
                self._run(
                    shield, shield.params or {}, [{"role": "user", "content": text}], "input", False
                )
                for text in inputs
            )
        )
        return ModerationObject(
            id=f"modr-{new_id()}", model=model, results=[_moderation(v) for v in verdicts]
        )

    async def _resolve(self, tenant: str, shield_ids: Sequence[str]) -> list[Shield]:
        """The shields, in order; InvalidRequest naming every unknown id."""
        ids = list(dict.fromkeys(shield_ids))
        if len(ids) > MAX_SHIELDS_PER_READ:
            raise InvalidRequest(f"At most {MAX_SHIELDS_PER_READ} shields may run at once")
        bad = [i for i in ids if not isinstance(i, str) or not _ID.fullmatch(i)]
        if bad:
            raise InvalidRequest(f"Shield ids {bad[:5]} are not valid shield ids")
        found: dict[str, Shield] = {}
        now = time.monotonic()
        missing = []
        for shield_id in ids:
            cached = self._cache.get((tenant, shield_id))
            if shield_id == BUILTIN_SHIELD.identifier:
                found[shield_id] = BUILTIN_SHIELD
            elif cached is not None and now - cached[1] < SHIELD_CACHE_SECONDS:
                found[shield_id] = cached[0]
            else:
                missing.append(shield_id)
        if missing:
            read = await asyncio.to_thread(self._store.get_many, tenant, missing)
            for shield_id, shield in read.items():
                found[shield_id] = shield
                self._cache[(tenant, shield_id)] = (shield, now)
            while len(self._cache) > SHIELD_CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))
        unknown = [i for i in ids if i not in found]
        if unknown:
            raise InvalidRequest(
                f"Shield {', '.join(unknown)} not found: register it with POST /v1/shields"
                " (GET /v1/shields lists the shields you have)"
            )
        return [found[i] for i in ids]

    async def _run(
        self,
        shield: Shield,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
        source: Source,
        fail_open: bool,
    ) -> Verdict:
        provider = self._provider(shield.provider_id)
        what = f"Shield {shield.identifier} ({shield.provider_id})"
        try:
            return await asyncio.wait_for(
                provider.run(shield.provider_resource_id or "", params, messages, source),
                self._timeout,
            )
        except Exception as err:
            if isinstance(err, TimeoutError | UpstreamTimeout):
                failure: ServiceError = UpstreamTimeout(f"{what} did not answer in time")
            elif isinstance(err, ServiceError):
                failure = UpstreamFailed(f"{what} failed: {err}")
            else:
                logger.exception("shield provider error", extra={"shield": shield.identifier})
                failure = UpstreamFailed(f"{what} failed: {type(err).__name__}")
            if not fail_open:
                raise failure from err
            logger.warning(
                "shield failed; passing (SHIELD_FAIL_OPEN)",
                extra={"shield": shield.identifier, "error": str(failure)},
            )
            return Verdict()

    def _provider(self, provider_id: str) -> ShieldProvider:
        if provider_id not in self._providers:
            self._providers[provider_id] = self._create(provider_id)
        return self._providers[provider_id]

    def _create(self, provider_id: str) -> ShieldProvider:
        if provider_id == "bedrock":
            from ..safety.bedrock import BedrockGuardrail

            client = self._bedrock_client
            if client is None:
                from .. import aws

                client = aws.client("bedrock-runtime", read_timeout=self._timeout, attempts=2)
            return BedrockGuardrail(client)
        if provider_id == "llama-guard":
            from ..safety.llama_guard import LlamaGuardShield

            return LlamaGuardShield(self._ask)
        return OfflineShield()

    async def _ask(self, model: str, prompt: str) -> str:
        """The model's whole answer to one user message (Llama Guard's verdict)."""
        from ..inference.types import ChatMessage, ChatRequest, ModelOptions, TextDelta

        if self._models is None:
            raise UpstreamFailed("No inference providers are configured for Llama Guard")
        provider, model_id = self._models.resolve(model)
        request = ChatRequest(
            model=model_id,
            messages=[ChatMessage(role="user", content=prompt)],
            options=ModelOptions(temperature=0.0),
        )
        provider.check(request)
        events = await provider.complete(request)
        return "".join(e.text for e in events if isinstance(e, TextDelta))


def text_of(content: Any) -> str:
    """The text of message content: a string, a content item, or a list of them (images are
    not checked by these shields)."""
    if isinstance(content, str):
        return content
    if isinstance(content, BaseModel):
        content = content.model_dump()
    if isinstance(content, dict):
        return content.get("text") or "" if content.get("type", "text") == "text" else ""
    if isinstance(content, list):
        return "\n".join(t for t in (text_of(item) for item in content) if t)
    return ""


def _text_message(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message.get("role") or "user", "content": text_of(message.get("content"))}


def _moderation(verdict: Verdict) -> ModerationResult:
    violation = verdict.violation
    flagged = violation is not None and violation.violation_level == ViolationLevel.error
    hit = set(verdict.categories) if flagged else set()
    return ModerationResult(
        flagged=flagged,
        categories={c: c in hit for c in OPENAI_CATEGORIES},
        category_scores={c: 1.0 if c in hit else 0.0 for c in OPENAI_CATEGORIES},
        category_applied_input_types={c: ["text"] if c in hit else [] for c in OPENAI_CATEGORIES},
        user_message=violation.user_message if violation else None,
        metadata=violation.metadata if violation else {},
    )
