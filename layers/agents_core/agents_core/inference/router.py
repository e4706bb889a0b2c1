"""Which provider serves a model id: configuration, not code.

- `offline` always, and every model when no OpenAI-compatible endpoint is configured: the
  built-in offline model.
- `bedrock/<model id>`: Amazon Bedrock (Converse), with `<model id>` as Bedrock's model id.
- anything else: the OpenAI-compatible endpoint at OPENAI_BASE_URL, model id unchanged; its
  API key is OPENAI_API_KEY (local runs), else the Secrets Manager secret
  OPENAI_API_KEY_SECRET_ID names (deployed stacks), read at the first model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from .types import Provider

BEDROCK_PREFIX = "bedrock/"
OFFLINE_MODEL = "offline"


@dataclass(frozen=True)
class InferenceSettings:
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    openai_api_key_secret_id: str | None = None
    timeout_seconds: float = 60.0


class ModelRouter:
    def __init__(self, settings: InferenceSettings) -> None:
        self.settings = settings
        self._providers: dict[str, Provider] = {}

    def describe(self) -> str:
        """Where model ids go (bedrock/ ids aside: their endpoint is the AWS one)."""
        if self.settings.openai_base_url:
            return f"models: OpenAI-compatible at {self.settings.openai_base_url}"
        return "models: built-in offline model (set OPENAI_BASE_URL for a real one)"

    def prepare(self) -> None:
        """Create the provider most models go to now, so that its imports and HTTP client are
        made during a function's init, which Lambda runs at full CPU, rather than in the first
        turn, which runs at the memory's share of it (a second or more at 192 MB)."""
        self._provider("openai" if self.settings.openai_base_url else "offline")

    async def open(self) -> None:
        """With an OpenAI-compatible endpoint, read its key (from its secret, where it is
        one) and open a connection to it now, for the first call (`Services.connect`)."""
        if self.settings.openai_base_url:
            await self._provider("openai").open()

    def resolve(self, model: str) -> tuple[Provider, str]:
        """The provider for `model` and the model id to send it."""
        if model.startswith(BEDROCK_PREFIX):
            return self._provider("bedrock"), model.removeprefix(BEDROCK_PREFIX)
        if model == OFFLINE_MODEL or not self.settings.openai_base_url:
            return self._provider("offline"), model
        return self._provider("openai"), model

    def _provider(self, kind: str) -> Provider:
        if kind not in self._providers:
            self._providers[kind] = self._create(kind)
        return self._providers[kind]

    def _create(self, kind: str) -> Provider:
        timeout = self.settings.timeout_seconds
        if kind == "bedrock":
            from .bedrock import BedrockProvider

            return BedrockProvider(timeout)
        if kind == "openai":
            from .openai_compat import OpenAICompatProvider

            url, secret = self.settings.openai_base_url, self.settings.openai_api_key_secret_id
            if self.settings.openai_api_key is None and secret:
                from ..secrets import model_api_key
                from .secret_key import KeyFromSecret

                return KeyFromSecret(
                    lambda key: OpenAICompatProvider(url, key, timeout),
                    partial(model_api_key, secret),
                )
            return OpenAICompatProvider(url, self.settings.openai_api_key, timeout)
        from .offline import OfflineProvider

        return OfflineProvider()
