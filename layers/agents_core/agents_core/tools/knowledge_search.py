"""`knowledge_search`, the tool of the `builtin::rag` group (as Llama Stack names them): a search
of the tenant's vector stores, which the group's `args` name (`vector_db_ids`, Llama Stack's
word, or `vector_store_ids`), answered as numbered chunks the model reads.

The search itself is handed in (the vector stores live above this package): an async
`search(tenant, vector_store_ids, query, max_results)` returning hits with `file_id`,
`filename`, `score` and `text`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .base import ToolDefinition, ToolFailed, parse_arguments

KNOWLEDGE_SEARCH = ToolDefinition(
    name="knowledge_search",
    description="Search the user's documents (their vector stores) for passages about a query",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for"}},
        "required": ["query"],
    },
)

Search = Callable[[str, Sequence[str], str, int], Awaitable[Sequence[Any]]]


@dataclass
class KnowledgeSearchTool:
    search: Search
    tenant: str
    max_results: int = 5
    max_bytes: int = 64 * 1024

    async def call(self, arguments: str) -> str:
        args = parse_arguments(arguments)
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolFailed('knowledge_search needs a "query" string argument')
        stores = args.get("vector_db_ids") or args.get("vector_store_ids")
        if isinstance(stores, str):
            stores = [stores]
        if (
            not isinstance(stores, list)
            or not stores
            or not all(isinstance(s, str) for s in stores)
        ):
            raise ToolFailed(
                "knowledge_search needs the vector stores to search: give the builtin::rag"
                ' group args {"vector_db_ids": ["vs_..."]}'
            )
        try:
            hits = await self.search(self.tenant, stores, query, self.max_results)
        except Exception as err:  # a store that is not there, the embedder down
            raise ToolFailed(f"knowledge_search failed: {err}") from err
        if not hits:
            return f"knowledge_search found nothing for {query!r}."
        lines = [f"knowledge_search found {len(hits)} chunks for {query!r}:"]
        for n, hit in enumerate(hits, 1):
            lines.append(
                f"[{n}] {hit.filename} (document_id: {hit.file_id}, score {hit.score:.2f})\n"
                f"{hit.text}"
            )
        lines.append("Answer from these chunks where they help, naming the documents used.")
        text = "\n\n".join(lines)
        encoded = text.encode()
        if len(encoded) > self.max_bytes:
            text = encoded[: self.max_bytes].decode(errors="ignore") + "\n[cut: too long]"
        return text
