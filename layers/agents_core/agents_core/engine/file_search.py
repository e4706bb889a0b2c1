"""File search as a tool the model calls, for both faces: the Responses API's `file_search`
tool (a `file_search_call` item) and the Agents API's `builtin::rag` `knowledge_search`.

The model reads each result after a marker naming its file, `<|file-...|>`, and is asked to
cite a result by writing its marker. `Citations` takes the markers of files the search returned
out of the answer as it streams and turns each into a `file_citation` annotation at that place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .server_tools import FileHit, ToolRuntime

QUERY_PARAMETERS = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What to look for"}},
    "required": ["query"],
}
#: The longest marker looked for; a `<|` not closed within it is text.
_MAX_MARKER = 96


def marker(file_id: str) -> str:
    return f"<|{file_id}|>"


def format_hits(query: str, hits: Sequence[FileHit]) -> str:
    """The results as the model reads them."""
    if not hits:
        return f"No file matched the search for {query!r}."
    parts = [f"File search results for {query!r}:"]
    for hit in hits:
        parts.append(f"{marker(hit.file_id)} {hit.filename} (score {hit.score:.2f}):\n{hit.text}")
    parts.append("Cite a result by writing its marker, such as " + marker(hits[0].file_id) + ".")
    return "\n\n".join(parts)


def query_of(arguments: str, fallback: str) -> str:
    """The call's `query`, or (a model that called the tool without one) the user's text."""
    try:
        query = json.loads(arguments or "{}").get("query")
    except (ValueError, AttributeError):
        query = None
    return query if isinstance(query, str) and query.strip() else fallback


@dataclass
class FileSearchTool:
    """A ServerTool searching the tenant's vector stores; keeps what each call found."""

    runtime: ToolRuntime
    tenant: str
    vector_store_ids: list[str]
    max_results: int = 10
    filters: Mapping[str, Any] | None = None
    score_threshold: float | None = None
    fallback_query: str = ""
    found: dict[str, list[FileHit]] = field(default_factory=dict)  # arguments -> hits
    files: dict[str, str] = field(default_factory=dict)  # every file found: id -> name

    async def call(self, arguments: str) -> str:
        query = query_of(arguments, self.fallback_query)
        hits = await self.runtime.file_search(
            self.tenant,
            self.vector_store_ids,
            query,
            self.max_results,
            self.filters,
            self.score_threshold,
        )
        self.found[arguments] = hits
        self.files.update((hit.file_id, hit.filename) for hit in hits)
        return format_hits(query, hits)


class Citations:
    """Markers out of streamed text: `feed` each delta, `flush` at the end; each returns the
    text to send on and the (file id, filename, index) of each marker it took out. `index` is
    the place in the text sent on."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = files
        self.sent = 0
        self._held = ""

    def feed(self, delta: str) -> tuple[str, list[tuple[str, str, int]]]:
        text, found, self._held = "", [], self._held + delta
        while True:
            start = self._held.find("<|")
            if start < 0:
                keep = 1 if self._held.endswith("<") else 0
                text += self._held[: len(self._held) - keep]
                self._held = self._held[len(self._held) - keep :]
                break
            text += self._held[:start]
            rest = self._held[start:]
            end = rest.find("|>")
            if end < 0:
                if len(rest) > _MAX_MARKER:
                    text, self._held = text + "<|", rest[2:]
                    continue
                self._held = rest
                break
            file_id = rest[2:end]
            if file_id in self.files:
                found.append((file_id, self.files[file_id], self.sent + len(text)))
            else:
                text += rest[: end + 2]
            self._held = rest[end + 2 :]
        self.sent += len(text)
        return text, found

    def flush(self) -> str:
        text, self._held = self._held, ""
        self.sent += len(text)
        return text
