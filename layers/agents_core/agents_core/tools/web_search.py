"""Web search, the built-in tool `web_search` (Llama Stack's `builtin::websearch` group; the
Responses API's `web_search` tool), through a search API chosen by configuration:

- `offline`: deterministic results made from the query, no network (`make run`, tests);
- `tavily`: Tavily's search API (POST {WEB_SEARCH_BASE_URL}/search), its API key read from the
  Secrets Manager secret WEB_SEARCH_API_KEY_SECRET_ID at the first search, then cached.

The tool's result is what Llama Stack's search providers answer, `{"query": ..., "top_k":
[{"title", "url", "content"}, ...]}` as JSON, kept within the tool result bound by shortening
the longest contents first, then dropping the last results.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, ClassVar, Protocol

from ..http1 import default_tls_context
from ..settings import Settings
from .base import ToolDefinition, ToolFailed, parse_arguments

#: The built-in tool, named and described as Llama Stack v0.2.14's search providers list it.
WEB_SEARCH = ToolDefinition(
    name="web_search",
    description="Search the web for information",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "The query to search for"}},
        "required": ["query"],
    },
)
#: Bounds on what one search asks for and reads.
MAX_RESULTS = 20
MAX_QUERY_CHARS = 1000
MAX_RESPONSE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    content: str


class WebSearch(Protocol):
    name: str

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """Up to `max_results` results; ToolFailed when the search cannot be made."""
        ...


def web_search_provider(settings: Settings, *, secrets_client: Any = None) -> WebSearch:
    """The provider the settings choose. `secrets_client`: a Secrets Manager client (tests hand
    in one bound to moto); by default the application's. ValueError for an unknown name."""
    if settings.web_search_provider == "offline":
        return OfflineWebSearch()
    if settings.web_search_provider == "tavily":
        read_key = None
        if settings.web_search_api_key_secret_id:
            from ..secrets import model_api_key

            read_key = partial(model_api_key, settings.web_search_api_key_secret_id, secrets_client)
        return TavilyWebSearch(
            settings.web_search_base_url, read_key, settings.web_search_timeout_seconds
        )
    raise ValueError(
        f"WEB_SEARCH_PROVIDER={settings.web_search_provider!r} is not a web search provider:"
        " use offline or tavily"
    )


class OfflineWebSearch:
    """Results made from the query alone: the same query always gets the same results."""

    name = "offline"

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        digest = hashlib.sha256(query.encode()).hexdigest()[:12]
        return [
            SearchResult(
                title=f"Offline result {rank} for {query}",
                url=f"https://offline-search.invalid/{digest}/{rank}",
                content=(
                    f"A deterministic offline search result for {query!r} (rank {rank}). The"
                    " offline provider makes no network call: set WEB_SEARCH_PROVIDER=tavily"
                    " for real results."
                ),
            )
            for rank in range(1, min(3, max_results) + 1)
        ]


class TavilyWebSearch:
    """Tavily's search API: POST /search with a bearer key; each answer's `results` carry
    `title`, `url` and `content`."""

    name = "tavily"

    def __init__(
        self,
        base_url: str,
        read_key: Callable[[], str] | None,
        timeout: float,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self._url = base_url.rstrip("/") + "/search"
        self._read_key = read_key
        self._timeout = timeout
        self._max = max_response_bytes
        self._key: str | None = None

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        import httpx

        key = await self._api_key()
        body = {"query": query, "max_results": max_results}
        try:
            async with (
                httpx.AsyncClient(
                    timeout=httpx.Timeout(self._timeout), verify=default_tls_context()
                ) as client,
                client.stream(
                    "POST", self._url, json=body, headers={"Authorization": f"Bearer {key}"}
                ) as response,
            ):
                data = await _read_bounded(response, self._max)
        except httpx.TimeoutException:
            raise ToolFailed(f"web search timed out after {self._timeout:g} s") from None
        except httpx.HTTPError as err:
            raise ToolFailed(f"web search failed: {err or type(err).__name__}") from None
        if response.status_code != 200:
            detail = data[:300].decode(errors="replace")
            raise ToolFailed(
                f"web search failed: the search API answered HTTP {response.status_code}: {detail}"
            )
        try:
            results = json.loads(data)["results"]
            return [
                SearchResult(
                    str(r.get("title", "")), str(r.get("url", "")), str(r.get("content", ""))
                )
                for r in results[:max_results]
            ]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ToolFailed(
                "web search failed: the search API's answer was not understood"
            ) from None

    async def _api_key(self) -> str:
        if self._key is None:
            if self._read_key is None:
                raise ToolFailed(
                    "web search has no API key: the deployment sets no WEB_SEARCH_API_KEY_SECRET_ID"
                )
            from ..secrets import SecretUnavailable

            try:
                self._key = await asyncio.to_thread(self._read_key)
            except SecretUnavailable as err:
                raise ToolFailed(f"web search is unavailable: its API key: {err}") from None
        return self._key


@dataclass(frozen=True)
class WebSearchTool:
    """The `web_search` built-in as the agent loop runs it (engine/loop.py's ServerTool):
    arguments `{"query": ...}`; the result JSON within `max_bytes`."""

    provider: WebSearch
    max_results: int = 5
    max_bytes: int = 64 * 1024
    definition: ClassVar[ToolDefinition] = WEB_SEARCH

    async def call(self, arguments: str) -> str:
        query = parse_arguments(arguments).get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolFailed('web_search needs a "query" string argument')
        query = query.strip()[:MAX_QUERY_CHARS]
        count = max(1, min(self.max_results, MAX_RESULTS))
        results = await self.provider.search(query, count)
        return render_results(query, results, self.max_bytes)


def render_results(query: str, results: list[SearchResult], max_bytes: int) -> str:
    """The results as Llama Stack's search tools answer them, within `max_bytes`."""
    items = [asdict(result) for result in results]

    def text() -> str:
        return json.dumps({"query": query, "top_k": items}, ensure_ascii=False)

    rendered = text()
    while len(rendered.encode()) > max_bytes and items:
        longest = max(items, key=lambda item: len(item["content"]))
        if len(longest["content"]) > 100:
            longest["content"] = longest["content"][: len(longest["content"]) // 2] + " [cut]"
        else:
            items.pop()
        rendered = text()
    return rendered


async def _read_bounded(response: Any, limit: int) -> bytes:
    """The response body, or ToolFailed once it passes `limit` bytes."""
    chunks, total = [], 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if total > limit:
            raise ToolFailed(f"web search failed: the answer passed the {limit} byte bound")
        chunks.append(chunk)
    return b"".join(chunks)
