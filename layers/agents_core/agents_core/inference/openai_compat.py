"""OpenAI-compatible chat completions (vLLM, Ollama, Llama Stack, OpenAI...) via the openai SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from ..api.common import GrammarResponseFormat, TopKSamplingStrategy, TopPSamplingStrategy
from .types import (
    ChatEvent,
    ChatMessage,
    ChatRequest,
    Finish,
    ProviderError,
    ProviderTimeout,
    TextDelta,
    ToolCallDelta,
    UnsupportedRequest,
    Usage,
)

_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}


class OpenAICompatProvider:
    name = "openai"

    def __init__(self, base_url: str, api_key: str | None, timeout: float) -> None:
        import httpx
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "none",
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            max_retries=0,  # a retry would repeat tokens already streamed to the client
        )

    def check(self, request: ChatRequest) -> None:
        self._params(request)

    async def complete(self, request: ChatRequest) -> list[ChatEvent]:
        return [event async for event in self.stream(request)]

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        import openai
        from openai import AsyncStream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        params = self._params(request)
        finish: Finish | None = None
        usage: Usage | None = None
        try:
            # The body is already in wire form: posted as is, it skips the SDK's request
            # transform, which walks every message against the params types (milliseconds per
            # hundred messages, paid again on every turn of a long session).
            stream = await self._client.post(
                "/chat/completions",
                body=params,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=AsyncStream[ChatCompletionChunk],
            )
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        yield TextDelta(delta.content)
                    for call in (delta.tool_calls if delta is not None else None) or []:
                        function = call.function
                        yield ToolCallDelta(
                            index=call.index,
                            id=call.id,
                            name=function.name if function else None,
                            arguments=(function.arguments or "") if function else "",
                        )
                    if choice.finish_reason:
                        finish = Finish(_FINISH.get(choice.finish_reason, "stop"))
        except openai.APITimeoutError as err:
            raise ProviderTimeout(f"model {request.model} timed out") from err
        except openai.APIStatusError as err:
            raise ProviderError(
                f"model {request.model} answered {err.status_code}: {err.message}"
            ) from err
        except (openai.APIError, json.JSONDecodeError, ValueError) as err:
            raise ProviderError(f"model {request.model} sent a malformed reply: {err}") from err
        if finish is None:
            raise ProviderError(f"model {request.model} ended its stream without finishing")
        finish.usage = usage
        yield finish

    @staticmethod
    def _params(request: ChatRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "messages": [_message(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            choice = request.tool_choice
            params["tool_choice"] = (
                choice
                if choice in ("auto", "required", "none")
                else {"type": "function", "function": {"name": choice}}
            )
        sampling = request.sampling
        if sampling is not None:
            strategy = sampling.strategy
            if isinstance(strategy, TopPSamplingStrategy):
                params["temperature"] = strategy.temperature
                params["top_p"] = strategy.top_p
            elif isinstance(strategy, TopKSamplingStrategy):
                params["top_k"] = strategy.top_k  # not OpenAI's; vLLM and others take it
            else:
                params["temperature"] = 0.0
            if sampling.max_tokens:
                params["max_tokens"] = sampling.max_tokens
            if sampling.repetition_penalty not in (None, 1.0):
                params["repetition_penalty"] = sampling.repetition_penalty
            if sampling.stop:
                params["stop"] = sampling.stop
        if request.temperature is not None:
            params["temperature"] = request.temperature
        fmt = request.response_format
        if isinstance(fmt, GrammarResponseFormat):
            raise UnsupportedRequest(
                "grammar response_format is not supported by OpenAI-compatible models"
            )
        if fmt is not None:
            if fmt.json_schema:
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "response", "schema": fmt.json_schema},
                }
            else:
                params["response_format"] = {"type": "json_object"}
        return {k: v for k, v in params.items() if v is not None}


def _message(message: ChatMessage) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        data["content"] = message.content or None
    if message.tool_call_id:
        data["tool_call_id"] = message.tool_call_id
    if message.images:
        parts: list[dict[str, Any]] = (
            [{"type": "text", "text": message.content}] if message.content else []
        )
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in message.images]
        data["content"] = parts
    return data
