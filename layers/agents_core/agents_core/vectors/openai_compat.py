"""An OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, Ollama, Llama Stack...) over
plain httpx: batches of at most `batch_size` texts, each request bounded by `timeout`, and a
429 or 5xx answer (or a dropped connection) retried at most `attempts - 1` times with backoff.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..errors import UpstreamFailed, UpstreamTimeout
from ..http1 import default_tls_context

_RETRIED = {408, 409, 429, 500, 502, 503, 504}
#: The longest wait a Retry-After may ask for before the next attempt.
_MAX_WAIT = 10.0


class OpenAICompatEmbedder:
    def __init__(
        self,
        base_url: str,
        model: str,
        dimension: int,
        *,
        api_key: str | None = None,
        read_key: Callable[[], str] | None = None,
        send_dimensions: bool = False,
        timeout: float = 30.0,
        batch_size: int = 256,
        attempts: int = 3,
        backoff: float = 0.5,
    ) -> None:
        self.model = model
        self.dimension = dimension
        self.base_url = base_url.rstrip("/")
        self._key, self._read_key = api_key, read_key
        self._send_dimensions = send_dimensions
        self._timeout = timeout
        self._batch_size = batch_size
        self._attempts = max(1, attempts)
        self._backoff = backoff
        self._client: Any = None

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors += self._batch(texts[start : start + self._batch_size])
        return vectors

    def _http(self) -> Any:
        """The client, keyed at the first call (a key in a secret is read then, not at start)."""
        if self._client is None:
            import httpx

            key = self._key
            if key is None and self._read_key is not None:
                from ..secrets import SecretUnavailable

                try:
                    key = self._read_key()
                except SecretUnavailable as err:
                    raise UpstreamFailed(f"the embedding API key is unavailable: {err}") from err
            headers = {"Content-Type": "application/json"}
            if key:
                headers["Authorization"] = f"Bearer {key}"
            self._client = httpx.Client(
                headers=headers,
                timeout=httpx.Timeout(self._timeout, connect=min(self._timeout, 5.0)),
                verify=default_tls_context(),
            )
        return self._client

    def _batch(self, texts: list[str]) -> list[list[float]]:
        import httpx

        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self._send_dimensions:
            body["dimensions"] = self.dimension
        content = json.dumps(body).encode()
        url = f"{self.base_url}/embeddings"
        for attempt in range(self._attempts):
            last = attempt == self._attempts - 1
            wait = self._backoff * 2**attempt
            try:
                response = self._http().post(url, content=content)
            except httpx.TimeoutException as err:
                if last:
                    raise UpstreamTimeout(f"embedding model {self.model} timed out") from err
                time.sleep(wait)
                continue
            except httpx.TransportError as err:
                if last:
                    raise UpstreamFailed(
                        f"could not reach the embedding endpoint at {self.base_url}: {err!r}"
                    ) from err
                time.sleep(wait)
                continue
            if response.status_code in _RETRIED and not last:
                time.sleep(_retry_after(response, wait))
                continue
            if not response.is_success:
                raise UpstreamFailed(
                    f"embedding model {self.model} answered {response.status_code}:"
                    f" {_message(response)}"
                )
            return self._vectors(response, len(texts))
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _vectors(self, response: Any, count: int) -> list[list[float]]:
        try:
            data = sorted(response.json()["data"], key=lambda d: d["index"])
            vectors = [[float(v) for v in d["embedding"]] for d in data]
        except (ValueError, KeyError, TypeError) as err:
            raise UpstreamFailed(f"embedding model {self.model} sent a malformed reply") from err
        if len(vectors) != count:
            raise UpstreamFailed(
                f"embedding model {self.model} answered {len(vectors)} vectors for {count} texts"
            )
        for vector in vectors:
            if len(vector) != self.dimension:
                raise UpstreamFailed(
                    f"embedding model {self.model} answered {len(vector)} dimensions, not"
                    f" {self.dimension}: set EMBEDDING_DIMENSION={len(vector)}"
                )
        return vectors


def _retry_after(response: Any, default: float) -> float:
    try:
        return min(_MAX_WAIT, max(0.0, float(response.headers.get("retry-after", default))))
    except ValueError:
        return default


def _message(response: Any) -> str:
    text = response.text[:2000]
    try:
        error = json.loads(text).get("error") or text
    except (ValueError, AttributeError):
        return text[:500] or response.reason_phrase
    return str(error.get("message") or error) if isinstance(error, dict) else str(error)[:500]
