"""Amazon Bedrock through the Converse and ConverseStream APIs (botocore, off the event loop)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from ..api.common import TopKSamplingStrategy, TopPSamplingStrategy
from ..errors import InvalidRequest, UpstreamFailed, UpstreamTimeout
from .types import (
    ChatDocument,
    ChatEvent,
    ChatMessage,
    ChatRequest,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

_STOP = {"tool_use": "tool_calls", "max_tokens": "length"}
_DONE = object()


class BedrockProvider:
    name = "bedrock"

    def __init__(self, timeout: float, client: Any = None) -> None:
        if client is None:
            from .. import aws

            client = aws.client("bedrock-runtime", read_timeout=timeout, attempts=1)
        self._client = client

    def check(self, request: ChatRequest) -> None:
        self._params(request)
        for message in request.messages:
            for url in message.images:
                _image_block(url)
            for document in message.documents:
                _document_block(document)

    async def complete(self, request: ChatRequest) -> list[ChatEvent]:
        params = self._params(request)
        resp = await asyncio.to_thread(self._call, self._client.converse, params, request.model)
        events: list[ChatEvent] = []
        for index, block in enumerate(resp["output"]["message"]["content"]):
            if "text" in block:
                events.append(TextDelta(block["text"]))
            elif "toolUse" in block:
                use = block["toolUse"]
                args = json.dumps(use.get("input", {}))
                events.append(ToolCallDelta(index, use["toolUseId"], use["name"], args))
        events.append(Finish(_STOP.get(resp.get("stopReason"), "stop"), _usage(resp.get("usage"))))
        return events

    async def count_tokens(self, request: ChatRequest) -> int:
        """The model's own count of the request's input (Bedrock's CountTokens)."""
        params = self._params(request)
        converse = {
            k: params[k]
            for k in ("messages", "system", "toolConfig", "additionalModelRequestFields")
            if k in params
        }
        call = {"modelId": request.model, "input": {"converse": converse}}
        resp = await asyncio.to_thread(self._call, self._client.count_tokens, call, request.model)
        return int(resp["inputTokens"])

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        params = self._params(request)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def drain() -> None:
            resp = self._client.converse_stream(**params)
            for event in resp["stream"]:
                put(event)

        def produce() -> None:
            try:
                self._call(drain, None, request.model)
            except BaseException as err:  # handed to the consumer
                put(err)
            put(_DONE)

        threading.Thread(target=produce, daemon=True).start()
        tool_blocks: dict[int, int] = {}
        finish: Finish | None = None
        while (event := await queue.get()) is not _DONE:
            if isinstance(event, BaseException):
                raise event
            if "contentBlockStart" in event:
                start = event["contentBlockStart"]
                use = start.get("start", {}).get("toolUse")
                if use:
                    index = tool_blocks.setdefault(start["contentBlockIndex"], len(tool_blocks))
                    yield ToolCallDelta(index, use["toolUseId"], use["name"])
            elif "contentBlockDelta" in event:
                body = event["contentBlockDelta"]
                delta = body["delta"]
                if "text" in delta:
                    yield TextDelta(delta["text"])
                elif (delta.get("reasoningContent") or {}).get("text"):
                    yield ReasoningDelta(delta["reasoningContent"]["text"])
                elif "toolUse" in delta:
                    index = tool_blocks.setdefault(body["contentBlockIndex"], len(tool_blocks))
                    yield ToolCallDelta(index, arguments=delta["toolUse"].get("input", ""))
            elif "messageStop" in event:
                finish = Finish(_STOP.get(event["messageStop"].get("stopReason"), "stop"))
            elif "metadata" in event and finish is not None:
                finish.usage = _usage(event["metadata"].get("usage"))
            else:
                error = next((k for k in event if k.endswith("Exception")), None)
                if error:
                    raise UpstreamFailed(f"Bedrock {error}: {event[error].get('message', '')}")
        if finish is None:
            raise UpstreamFailed(f"model {request.model} ended its stream without finishing")
        yield finish

    @staticmethod
    def _call(fn, params: dict[str, Any] | None, model: str):
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            ReadTimeoutError,
        )

        try:
            return fn(**params) if params is not None else fn()
        except (ReadTimeoutError, ConnectTimeoutError) as err:
            raise UpstreamTimeout(f"Bedrock model {model} timed out") from err
        except ClientError as err:
            raise UpstreamFailed(_client_error(model, err)) from err
        except (BotoCoreError, ValueError, KeyError) as err:
            raise UpstreamFailed(f"Bedrock model {model} sent a malformed reply: {err}") from err

    @staticmethod
    def _params(request: ChatRequest) -> dict[str, Any]:
        if request.response_format is not None:
            raise InvalidRequest("response_format is not supported by Bedrock models")
        system = [{"text": m.content} for m in request.messages if m.role == "system" and m.content]
        params: dict[str, Any] = {"modelId": request.model, "messages": _messages(request.messages)}
        if system:
            params["system"] = system
        config: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        sampling = request.sampling
        if sampling is not None:
            strategy = sampling.strategy
            if isinstance(strategy, TopPSamplingStrategy):
                if strategy.temperature is not None:
                    config["temperature"] = strategy.temperature
                if strategy.top_p is not None:
                    config["topP"] = strategy.top_p
            elif isinstance(strategy, TopKSamplingStrategy):
                extra["top_k"] = strategy.top_k
            else:
                config["temperature"] = 0.0
            if sampling.max_tokens:
                config["maxTokens"] = sampling.max_tokens
            if sampling.stop:
                config["stopSequences"] = sampling.stop
        options = request.options  # Converse has no penalties, log probabilities or users
        for name, value in (
            ("temperature", options.temperature),
            ("topP", options.top_p),
            ("maxTokens", options.max_tokens),
        ):
            if value is not None:
                config[name] = value
        if config:
            params["inferenceConfig"] = config
        if extra:
            params["additionalModelRequestFields"] = extra
        if request.tools:
            choice = request.tool_choice
            tool_choice = (
                {"auto": {}}
                if choice in ("auto", "none")
                else {"any": {}}
                if choice == "required"
                else {"tool": {"name": choice}}
            )
            params["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": t.name,
                            "description": t.description or t.name,
                            "inputSchema": {"json": t.parameters},
                        }
                    }
                    for t in request.tools
                ],
                "toolChoice": tool_choice,
            }
        return params


def _messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Converse wants user/assistant turns alternating; tool results travel as user content."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if message.role == "tool":
            blocks = [
                {
                    "toolResult": {
                        "toolUseId": message.tool_call_id,
                        "content": [{"text": message.content or "(empty)"}],
                    }
                }
            ]
        else:
            blocks = [{"text": message.content}] if message.content else []
            blocks += [_image_block(url) for url in message.images]
            blocks += [_document_block(d) for d in message.documents]
            for call in message.tool_calls:
                try:
                    args = json.loads(call.arguments or "{}")
                except json.JSONDecodeError:
                    args = {"input": call.arguments}
                blocks.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": args}})
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks or [{"text": " "}]})
    return out


def _image_block(url: str) -> dict[str, Any]:
    """Converse takes image bytes, not URLs: a data: URL (png, jpeg, gif, webp) is decoded."""
    import base64
    import re

    found = re.match(r"data:image/(png|jpeg|jpg|gif|webp);base64,(.*)", url, re.DOTALL)
    if not found:
        raise InvalidRequest("Bedrock models take images as data: URLs (base64), not links")
    kind, data = found.groups()
    return {
        "image": {
            "format": "jpeg" if kind == "jpg" else kind,
            "source": {"bytes": base64.b64decode(data)},
        }
    }


_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}


def _document_block(document: ChatDocument) -> dict[str, Any]:
    """A Converse document block. Its name may hold only letters, digits, single spaces,
    hyphens, parentheses and brackets."""
    import base64
    import re

    kind = _DOCUMENT_FORMATS.get(document.media_type)
    if kind is None:
        raise InvalidRequest(
            f"Bedrock models take no {document.media_type} documents"
            f" (they take {', '.join(sorted(set(_DOCUMENT_FORMATS.values())))})"
        )
    stem = document.name.rsplit(".", 1)[0]
    name = re.sub(r"\s+", " ", re.sub(r"[^A-Za-z0-9\s\-()\[\]]", "-", stem)).strip()
    source = {"bytes": base64.b64decode(document.data)}
    return {"document": {"format": kind, "name": name[:200] or "document", "source": source}}


def _usage(usage: dict[str, Any] | None) -> Usage | None:
    if not usage:
        return None
    return Usage(usage.get("inputTokens", 0), usage.get("outputTokens", 0))


def _client_error(model: str, err: Any) -> str:
    """Bedrock's own errors say what went wrong; an endpoint that does not serve Bedrock at all
    (moto under `make run`, an emulator) answers an HTML page botocore cannot read as one."""
    code = err.response.get("Error", {}).get("Code", "")
    if code.isdigit():
        return (
            f"Bedrock model {model}: the AWS endpoint answered HTTP {code} with no Bedrock reply;"
            " it does not serve Bedrock (the embedded moto server of `make run` has none):"
            " bedrock/ models need real AWS (AWS_ENDPOINT_URL_BEDROCK_RUNTIME)"
        )
    return f"Bedrock model {model}: {err}"
