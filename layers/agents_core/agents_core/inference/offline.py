"""The built-in offline model: deterministic, instant, no network. The local default.

It answers "You said: <last user text>". Asked for a tool by name (the user text mentions an
offered tool), it calls it with the `name=value` pairs found in the text; given tool results,
it reports them; a `max_tokens` option cuts the answer at that many words. Enough to exercise
streaming, client tools, resume and token limits end to end.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

from ..errors import InvalidRequest
from .types import ChatEvent, ChatRequest, Finish, TextDelta, ToolCallDelta, Usage

_PAIR = re.compile(r"(\w+)=(\"[^\"]*\"|\S+)")


class OfflineProvider:
    name = "offline"

    def check(self, request: ChatRequest) -> None:
        """Every request but one with documents is acceptable (response formats are
        ignored)."""
        if any(m.documents for m in request.messages):
            raise InvalidRequest(
                "The offline model reads no documents (PDFs and the like); text files are read"
                " as text. Configure a model that takes documents."
            )

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        for event in self._answer(request):
            yield event

    async def complete(self, request: ChatRequest) -> list[ChatEvent]:
        return self._answer(request)

    def _answer(self, request: ChatRequest) -> list[ChatEvent]:
        messages = request.messages
        prompt_words = sum(len(m.content.split()) for m in messages)
        last = messages[-1] if messages else None
        if last is not None and last.role == "tool":
            results = []
            for message in reversed(messages):
                if message.role != "tool":
                    break
                results.insert(0, message.content)
            text = "Tool result: " + "; ".join(results)
        else:
            text_in = last.content if last is not None else ""
            call = self._tool_call(request, text_in)
            if call is not None:
                name, args = call
                return [
                    ToolCallDelta(index=0, id=f"call_{abs(hash(text_in)) % 10**8}", name=name),
                    ToolCallDelta(index=0, arguments=json.dumps(args)),
                    Finish("tool_calls", Usage(prompt_words, 1)),
                ]
            text = f"You said: {text_in}"
        words = text.split(" ")
        limit = request.options.max_tokens  # a word is a token here
        finish = "length" if limit is not None and len(words) > limit else "stop"
        words = words[:limit] if limit is not None else words
        deltas: list[ChatEvent] = [
            TextDelta(word if i == 0 else " " + word) for i, word in enumerate(words)
        ]
        return [*deltas, Finish(finish, Usage(prompt_words, len(words)))]

    @staticmethod
    def _tool_call(request: ChatRequest, text: str) -> tuple[str, dict] | None:
        if request.tool_choice == "none":
            return None
        for tool in request.tools:
            forced = request.tool_choice in ("required", tool.name)
            if forced or tool.name in text:
                args = {k: v.strip('"') for k, v in _PAIR.findall(text)}
                return tool.name, args
        return None
