"""OpenAI-compatible chat completions (vLLM, Ollama, Llama Stack, OpenAI...) over a lean HTTP/1.1
client (`http1`; httpx when a proxy applies).

One POST to `{base_url}/chat/completions` with `stream: true`, read as Server-Sent Events. The
openai SDK did the same, but weighed 10 of the layer's 25 MB (README, "Build"); the body is
built in wire form here and each chunk is read for the few fields the engine uses.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from pydantic_core import from_json

from .. import json_text
from ..api.common import GrammarResponseFormat, TopKSamplingStrategy, TopPSamplingStrategy
from ..errors import InvalidRequest, UpstreamFailed, UpstreamTimeout
from ..http1 import Broken, ConnectFailed, PostClient, default_tls_context
from .types import (
    ChatEvent,
    ChatMessage,
    ChatRequest,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}

#: How much of an error answer's body is read (its message is all that is kept).
_ERROR_BODY_LIMIT = 16_384


class OpenAICompatProvider:
    name = "openai"

    def __init__(self, base_url: str, api_key: str | None, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",
        }
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        url = f"{self.base_url}/chat/completions"
        # No retries: a retry would repeat tokens already streamed to the client. The read
        # timeout bounds each wait for the next chunk, not the whole answer.
        connect = min(timeout, 5.0)
        self._http: PostClient | _ProxiedHTTP = (
            _ProxiedHTTP(url, headers, timeout, connect)
            if _proxied(url)
            else PostClient(url, headers, timeout=timeout, connect_timeout=connect)
        )

    def check(self, request: ChatRequest) -> None:
        """What `_fields` would refuse, without building the body (every message of the
        history) a second time."""
        _refuse_grammar(request)

    async def open(self) -> None:
        """Open the connection the next call on this event loop takes (not through a proxy:
        httpx's pool is left to its first call)."""
        if isinstance(self._http, PostClient):
            await self._http.open()

    async def complete(self, request: ChatRequest) -> list[ChatEvent]:
        return [event async for event in self.stream(request)]

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        body = _body(request)
        model = request.model
        finish: Finish | None = None
        usage: Usage | None = None
        try:
            answer = await self._http.post(body)
            try:
                if not answer.is_success:
                    message = await _error_message(answer)
                    raise UpstreamFailed(f"model {model} answered {answer.status}: {message}")
                events = _sse_data(answer.body())
                async for data in events:
                    if data == b"[DONE]":
                        await _rest_of(events)  # so the connection serves the next call
                        break
                    chunk = from_json(data)  # a third of json.loads' CPU, once a delta
                    if chunk.get("error"):
                        raise UpstreamFailed(
                            f"model {model} reported an error: {_message_of(chunk['error'])}"
                        )
                    if chunk.get("usage"):
                        counts = chunk["usage"]
                        usage = Usage(counts["prompt_tokens"], counts["completion_tokens"])
                    for choice in (chunk.get("choices") or [])[:1]:
                        delta = choice.get("delta") or {}
                        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                        if isinstance(reasoning, str) and reasoning:
                            yield ReasoningDelta(reasoning)
                        if delta.get("content"):
                            yield TextDelta(delta["content"])
                        for position, call in enumerate(delta.get("tool_calls") or []):
                            function = call.get("function") or {}
                            yield ToolCallDelta(
                                index=call.get("index", position),
                                id=call.get("id"),
                                name=function.get("name"),
                                arguments=function.get("arguments") or "",
                            )
                        if choice.get("finish_reason"):
                            finish = Finish(_FINISH.get(choice["finish_reason"], "stop"))
            finally:
                await answer.aclose()
        except TimeoutError as err:
            raise UpstreamTimeout(f"model {model} timed out") from err
        except ConnectFailed as err:
            from ..log import logger

            logger.warning(
                "could not reach the model",
                extra={"url": self.base_url, "model": model, "reason": err.reason},
            )
            raise UpstreamFailed(
                f"could not reach the model at {self.base_url}: {err.reason}"
            ) from err
        except (Broken, OSError, asyncio.IncompleteReadError) as err:
            raise UpstreamFailed(f"model {model} failed mid-reply: {err!r}") from err
        except (ValueError, TypeError, KeyError, AttributeError) as err:  # JSON, or its shape
            raise UpstreamFailed(f"model {model} sent a malformed reply: {err}") from err
        if finish is None:
            raise UpstreamFailed(f"model {model} ended its stream without finishing")
        finish.usage = usage
        yield finish


def _fields(request: ChatRequest) -> dict[str, Any]:
    """The body's fields but its messages (`_body`)."""
    params: dict[str, Any] = {
        "model": request.model,
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
    params.update(_options(request))
    _refuse_grammar(request)
    fmt = request.response_format
    if fmt is not None:
        if fmt.json_schema:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": fmt.json_schema},
            }
        else:
            params["response_format"] = {"type": "json_object"}
    return {k: v for k, v in params.items() if v is not None}


def _body(request: ChatRequest) -> bytes:
    """The request's JSON: its messages (each finished turn's encoded once: a session's history
    is sent again at every turn), then the other fields."""
    rest = json_text.dumps_str(_fields(request))
    return f'{{"messages":[{_messages_json(request.messages)}],{rest[1:]}'.encode()


#: Memo key of a finished message's (first message of its run, length, the run's JSON joined).
_RUN = "openai run"


def _messages_json(messages: list[ChatMessage]) -> str:
    """The messages' JSON, comma-separated. A run of finished messages (a session's history)
    comes again at the next turn as the same objects with more after them: its JSON joined is
    kept on its last message, and the next turn joins only what it adds (each message of a
    long history cost a few microseconds a turn, with cold caches)."""
    parts: list[str] = []
    start, count = 0, len(messages)
    while start < count:
        if messages[start].memo is None:  # being built: encoded at every use
            parts.append(_message_json(messages[start]))
            start += 1
            continue
        end = start + 1
        while end < count and messages[end].memo is not None:
            end += 1
        parts.append(_run_json(messages, start, end))
        start = end
    return ",".join(parts)


def _run_json(messages: list[ChatMessage], start: int, end: int) -> str:
    """The finished messages[start:end]'s JSON joined: the longest join kept on one of them for
    the same run from the same first message, extended, and kept on the last in its place."""
    first = messages[start]
    kept, joined = start, ""
    for last in range(end - 1, start - 1, -1):
        run = messages[last].memo.get(_RUN)
        if run is not None and run[0] is first and run[1] == last + 1 - start:
            kept, joined = last + 1, run[2]
            break
    if kept < end:
        added = ",".join([_message_json(m) for m in messages[kept:end]])
        joined = f"{joined},{added}" if joined else added
        if kept > start:
            del messages[kept - 1].memo[_RUN]
        messages[end - 1].memo[_RUN] = (first, end - start, joined)
    return joined


def _message_json(message: ChatMessage) -> str:
    return json_text.dumps_str(_message(message))


def _refuse_grammar(request: ChatRequest) -> None:
    if isinstance(request.response_format, GrammarResponseFormat):
        raise InvalidRequest("grammar response_format is not supported by OpenAI-compatible models")


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
    if message.images or message.documents:
        parts: list[dict[str, Any]] = (
            [{"type": "text", "text": message.content}] if message.content else []
        )
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in message.images]
        parts += [
            {
                "type": "file",
                "file": {"filename": d.name, "file_data": f"data:{d.media_type};base64,{d.data}"},
            }
            for d in message.documents
        ]
        data["content"] = parts
    return data


#: After `[DONE]`, how long and how many events the end of a stream may take: a body read to
#: its end leaves its connection for the next call (a TLS handshake saved); a server that goes
#: on past this has its connection closed instead.
_END_SECONDS = 1.0
_END_EVENTS = 16


async def _rest_of(events: AsyncIterator[bytes]) -> None:
    """Read on to the end of the body; the answer is whole already, so a stream that breaks
    here costs only its connection."""
    try:
        async with asyncio.timeout(_END_SECONDS):
            for _ in range(_END_EVENTS):
                await anext(events)
    except (StopAsyncIteration, TimeoutError, Broken, OSError, asyncio.IncompleteReadError):
        pass


#: The most one event's text may take (its lines and the blank line that ends it).
MAX_EVENT_BYTES = 8 * 1024 * 1024


async def _sse_data(body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The `data` of each Server-Sent Event (its lines joined by newlines), as the events
    arrive. Lines end with LF, CRLF or CR, as the format allows; the bytes stay bytes
    (the JSON parser reads UTF-8 itself)."""
    pending = b""
    async for part in body:
        text = pending + part
        held = False
        if b"\r" in text:  # CRLF or CR as LF; a CR at the end may be half a CRLF: it waits
            held = text.endswith(b"\r")
            text = text[:-1] if held else text
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *events, pending = text.split(b"\n\n")
        if held:
            pending += b"\r"
        if len(pending) > MAX_EVENT_BYTES:
            raise Broken(f"an event of more than {MAX_EVENT_BYTES} bytes")
        for event in events:
            data = _data_of(event)
            if data is not None:
                yield data
    if pending:
        data = _data_of(pending.rstrip(b"\r\n"))
        if data is not None:
            yield data


def _data_of(event: bytes) -> bytes | None:
    """An event's `data` lines, joined; None when it has none (a comment, a keep-alive)."""
    if event.startswith(b"data: ") and b"\n" not in event:  # nearly every event
        return event[6:]
    lines = [
        line[5:].removeprefix(b" ") if line.startswith(b"data:") else b""
        for line in event.split(b"\n")
        if line.startswith(b"data:") or line == b"data"
    ]
    return b"\n".join(lines) if lines else None


async def _error_message(answer: Any) -> str:
    """The message of an error answer: its JSON `error.message` when it has one."""
    body = b""
    async for part in answer.body():
        body += part
        if len(body) >= _ERROR_BODY_LIMIT:
            break
    text = body[:_ERROR_BODY_LIMIT].decode(errors="replace").strip()
    try:
        return _message_of(json.loads(text).get("error") or text)
    except (ValueError, AttributeError):
        return text[:500] or answer.reason


def _message_of(error: Any) -> str:
    return str(error.get("message") or error) if isinstance(error, dict) else str(error)


def _proxied(url: str) -> bool:
    """Whether a proxy from the environment applies to `url`, as httpx reads them."""
    from urllib.request import getproxies, proxy_bypass_environment

    proxies = getproxies()
    scheme, host = url.split("://", 1)[0], urlsplit(url).hostname or ""
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not proxy_bypass_environment(host, proxies)


class _ProxiedHTTP:
    """The model over httpx, which speaks to proxies; its failures as PostClient's."""

    def __init__(
        self, url: str, headers: dict[str, str], timeout: float, connect_timeout: float
    ) -> None:
        self._url = url
        self._headers = headers
        self._timeout = (timeout, connect_timeout)
        self._client: Any = None
        self._loop: Any = None

    async def post(self, body: bytes) -> _ProxiedAnswer:
        import httpx

        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # kept-alive connections belong to their loop
            timeout = httpx.Timeout(self._timeout[0], connect=self._timeout[1])
            self._client = httpx.AsyncClient(
                headers=self._headers, timeout=timeout, verify=default_tls_context()
            )
            self._loop = loop
        request = self._client.build_request("POST", self._url, content=body)
        with _as_model_http_errors():
            return _ProxiedAnswer(await self._client.send(request, stream=True))


class _ProxiedAnswer:
    def __init__(self, response: Any) -> None:
        self._response = response
        self.status = response.status_code
        self.reason = response.reason_phrase
        self.is_success = response.is_success

    async def body(self) -> AsyncIterator[bytes]:
        with _as_model_http_errors():
            async for part in self._response.aiter_raw():
                yield part

    async def aclose(self) -> None:
        await self._response.aclose()


@contextmanager
def _as_model_http_errors() -> Iterator[None]:
    import httpx

    try:
        yield
    except httpx.TimeoutException as err:
        raise TimeoutError(str(err)) from err
    except httpx.ConnectError as err:
        raise ConnectFailed(_unreachable_reason(err)) from err
    except httpx.HTTPError as err:
        raise Broken(repr(err)) from err


def _unreachable_reason(err: BaseException) -> str:
    """Why a connection failed, in a few words: the OS error under httpx's wrappers."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        cause = cause.__cause__ or cause.__context__
    return str(err) or type(err).__name__


def _options(request: ChatRequest) -> dict[str, Any]:
    """The Responses API's settings, under the chat completions names, where set."""
    options = request.options
    params: dict[str, Any] = {
        name: value
        for name, value in (
            ("temperature", options.temperature),
            ("top_p", options.top_p),
            ("max_tokens", options.max_tokens),
            ("presence_penalty", options.presence_penalty),
            ("frequency_penalty", options.frequency_penalty),
            ("reasoning_effort", options.reasoning_effort),
            ("user", options.user),
            ("prompt_cache_key", options.prompt_cache_key),
        )
        if value is not None
    }
    if options.top_logprobs:
        params["logprobs"], params["top_logprobs"] = True, options.top_logprobs
    if request.tools and options.parallel_tool_calls is not None:
        params["parallel_tool_calls"] = options.parallel_tool_calls
    return params
