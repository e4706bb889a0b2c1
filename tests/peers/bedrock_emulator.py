"""A Bedrock Runtime emulator for Converse and ConverseStream: real HTTP on 127.0.0.1, the stream in
AWS event-stream framing, so boto3 (given `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`) talks to it as to AWS.

Replies are scripted like ScriptedOpenAI's; with none queued, it echoes the last user text.
"""

from __future__ import annotations

import binascii
import json
import struct
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from .http import LocalPeer


@dataclass
class BedrockReply:
    text: str = ""
    tool_uses: list[tuple[str, dict]] = field(default_factory=list)  # (name, input)
    error: str | None = None  # "throttling": a ThrottlingException answer


def event_message(event_type: str, payload: dict[str, Any]) -> bytes:
    """One message of the AWS event-stream encoding (prelude, headers, payload, CRCs)."""
    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


class BedrockEmulator(LocalPeer):
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._replies: list[BedrockReply] = []
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                _, _, model, action = self.path.split("/", 3)
                body["modelId"] = unquote(model)
                emulator.requests.append(body)
                if action == "count-tokens":  # a word a token: a stand-in for a tokenizer
                    words = len(json.dumps(body["input"]).split())
                    data = json.dumps({"inputTokens": words}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                reply = emulator._replies.pop(0) if emulator._replies else emulator._echo(body)
                if reply.error == "throttling":
                    data = json.dumps({"message": "Too many requests"}).encode()
                    self.send_response(429)
                    self.send_header("x-amzn-ErrorType", "ThrottlingException")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                elif action == "converse-stream":
                    emulator._stream(self, reply)
                else:
                    emulator._converse(self, reply)

        super().__init__(Handler)

    def reply(self, **kwargs: Any) -> None:
        self._replies.append(BedrockReply(**kwargs))

    @staticmethod
    def _echo(body: dict[str, Any]) -> BedrockReply:
        texts = [
            b["text"]
            for m in body["messages"]
            if m["role"] == "user"
            for b in m["content"]
            if "text" in b
        ]
        return BedrockReply(text=f"echo: {texts[-1] if texts else ''}")

    @staticmethod
    def _usage() -> dict[str, int]:
        return {"inputTokens": 9, "outputTokens": 4, "totalTokens": 13}

    def _converse(self, handler: BaseHTTPRequestHandler, reply: BedrockReply) -> None:
        content: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
        for n, (name, args) in enumerate(reply.tool_uses):
            content.append({"toolUse": {"toolUseId": f"tooluse_{n}", "name": name, "input": args}})
        data = json.dumps(
            {
                "output": {"message": {"role": "assistant", "content": content}},
                "stopReason": "tool_use" if reply.tool_uses else "end_turn",
                "usage": self._usage(),
                "metrics": {"latencyMs": 1},
            }
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _stream(self, handler: BaseHTTPRequestHandler, reply: BedrockReply) -> None:
        events = [event_message("messageStart", {"role": "assistant"})]
        index = 0
        if reply.text:
            for word in reply.text.split(" "):
                events.append(
                    event_message(
                        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": word + " "}}
                    )
                )
            events.append(event_message("contentBlockStop", {"contentBlockIndex": 0}))
            index = 1
        for n, (name, args) in enumerate(reply.tool_uses):
            block = index + n
            start = {"toolUse": {"toolUseId": f"tooluse_{n}", "name": name}}
            events.append(
                event_message("contentBlockStart", {"contentBlockIndex": block, "start": start})
            )
            events.append(
                event_message(
                    "contentBlockDelta",
                    {"contentBlockIndex": block, "delta": {"toolUse": {"input": json.dumps(args)}}},
                )
            )
            events.append(event_message("contentBlockStop", {"contentBlockIndex": block}))
        stop = "tool_use" if reply.tool_uses else "end_turn"
        events.append(event_message("messageStop", {"stopReason": stop}))
        events.append(
            event_message("metadata", {"usage": self._usage(), "metrics": {"latencyMs": 1}})
        )
        data = b"".join(events)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/vnd.amazon.eventstream")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
