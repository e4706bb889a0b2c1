"""The models this stack can serve, for `GET /v1/models`: the offline model, every model the
OpenAI-compatible endpoint lists at `{base}/models`, the Bedrock ids the deployment names, and
the embedding model `/v1/embeddings` serves (`model_type` "embedding", with its dimension).

The endpoint's list is fetched with a short timeout and kept for a minute; when the endpoint
cannot be reached (or answers nonsense) its models are left out, with a log line, and the
failure is kept for 10 seconds, so a down endpoint does not slow every listing.

    catalog = ModelCatalog(inference_settings, bedrock_model_ids=("anthropic.claude-3-haiku",))
    for entry in await catalog.models(): ...
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..http1 import default_tls_context
from ..log import logger
from .router import BEDROCK_PREFIX, OFFLINE_MODEL, InferenceSettings

LIST_TIMEOUT_SECONDS = 3.0
KEEP_SECONDS = 60.0
KEEP_FAILURE_SECONDS = 10.0
#: The most of the endpoint's list kept (and the bytes read of it).
MAX_LISTED = 1000
MAX_LIST_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ModelEntry:
    id: str  # what a request names as `model`
    provider_id: str  # offline | openai | bedrock
    provider_resource_id: str  # the id the provider is sent
    created: int = 0
    owned_by: str = "serverless-agents"
    model_type: str = "llm"  # or "embedding"
    metadata: dict[str, Any] = field(default_factory=dict)


class ModelCatalog:
    def __init__(
        self,
        settings: InferenceSettings,
        bedrock_model_ids: tuple[str, ...] = (),
        embedding: tuple[str, str, int] | None = None,
    ) -> None:
        """`embedding`: (provider, model, dimension) of the model `/v1/embeddings` serves."""
        self.settings = settings
        self.bedrock_model_ids = bedrock_model_ids
        self.embedding = embedding
        self._endpoint: tuple[float, list[ModelEntry]] | None = None  # (until, models)

    async def models(self) -> list[ModelEntry]:
        out = [ModelEntry(OFFLINE_MODEL, "offline", OFFLINE_MODEL)]
        if self.settings.openai_base_url:
            out += await self._endpoint_models()
        # An id prefix (`anthropic.*`, as the template's policy takes them) names no model.
        out += [
            ModelEntry(f"{BEDROCK_PREFIX}{model}", "bedrock", model)
            for model in self.bedrock_model_ids
            if model and not model.endswith("*")
        ]
        if self.embedding is not None:
            provider, model, dimension = self.embedding
            metadata = {"embedding_dimension": dimension}
            out.append(
                ModelEntry(model, provider, model, model_type="embedding", metadata=metadata)
            )
        return out

    async def _endpoint_models(self) -> list[ModelEntry]:
        now = time.monotonic()
        if self._endpoint is not None and self._endpoint[0] > now:
            return self._endpoint[1]
        try:
            models = await self._fetch()
            self._endpoint = (now + KEEP_SECONDS, models)
        except Exception as err:  # any failure: the listing goes on without them
            logger.warning(
                "model endpoint list unavailable", extra={"error": f"{type(err).__name__}: {err}"}
            )
            models = []
            self._endpoint = (now + KEEP_FAILURE_SECONDS, models)
        return models

    async def _fetch(self) -> list[ModelEntry]:
        import httpx

        key = self.settings.openai_api_key
        if key is None and self.settings.openai_api_key_secret_id:
            from ..secrets import model_api_key

            key = await asyncio.to_thread(model_api_key, self.settings.openai_api_key_secret_id)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        url = f"{self.settings.openai_base_url.rstrip('/')}/models"
        async with (
            httpx.AsyncClient(timeout=LIST_TIMEOUT_SECONDS, verify=default_tls_context()) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            response.raise_for_status()
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_LIST_BYTES:
                    raise ValueError(f"the list is larger than {MAX_LIST_BYTES} bytes")
        data = json.loads(body)["data"]
        return [
            ModelEntry(
                str(m["id"]),
                "openai",
                str(m["id"]),
                int(m.get("created") or 0),
                str(m.get("owned_by") or "openai"),
            )
            for m in data[:MAX_LISTED]
        ]
