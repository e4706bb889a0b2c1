"""A scripted OpenAI-compatible chat completions server: real HTTP, real SSE, on 127.0.0.1.

Tests queue replies; each request takes the next one (or, with none queued, an echo of the last
user message). Every request body is kept, so tests can check what reached the model.

    with ScriptedOpenAI() as model:
        model.reply(text="Hello", chunks=2)
        model.reply(tool_calls=[("get_weather", '{"city": "Paris"}')])
        model.reply(error="status", status=500)
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from .http import LocalPeer


@dataclass
class Reply:
    text: str = ""
    chunks: int = 3  # the text is streamed in this many deltas
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, JSON arguments)
    error: str | None = None  # "status" | "hang" | "malformed" | "truncated"
    status: int = 500
    delay: float = 0.0  # seconds before the first byte
    finish_reason: str | None = None
    reasoning: str = ""  # streamed first, as vLLM's `reasoning_content`
    pace: float = 0.0  # seconds between the text's deltas


class ScriptedOpenAI(LocalPeer):
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []  # time.perf_counter() of each request
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self.connections = 0  # TCP connections accepted
        self._replies: list[Reply] = []
        #: What `GET /v1/models` lists.
        self.models = [
            {"id": "llama3.2:3b", "object": "model", "created": 1700000000, "owned_by": "ollama"}
        ]
        self._lock = threading.Lock()
        script = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Each event goes out as it is written (TCP_NODELAY), as a model server's do: with
            # Nagle's algorithm the last chunk would wait for the client's delayed ACK.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                with script._lock:
                    script.connections += 1

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/v1/_replies":  # a reply queued from another process
                    script.reply(**body)
                    self.send_response(204)
                    self.end_headers()
                    return
                with script._lock:
                    script.arrivals.append(time.perf_counter())
                    script.requests.append(body)
                    script.authorizations.append(self.headers.get("Authorization"))
                    reply = script._replies.pop(0) if script._replies else script._echo(body)
                script._serve(self, body, reply)

            def do_GET(self) -> None:
                """`/v1/_journal`: what the peer recorded, for a client in another process;
                `/v1/models`: the models it lists, as OpenAI's API does."""
                with script._lock:
                    journal = {"arrivals": script.arrivals, "requests": script.requests[-1:]}
                if self.path == "/v1/models":
                    journal = {"object": "list", "data": script.models}
                payload = json.dumps(journal).encode()
                self.send_response(200 if self.path in ("/v1/_journal", "/v1/models") else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        super().__init__(Handler, "/v1")

    def reply(self, **kwargs: Any) -> None:
        with self._lock:
            self._replies.append(Reply(**kwargs))

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self.requests.clear()
            self.arrivals.clear()
            self.authorizations.clear()
            self.connections = 0

    @staticmethod
    def _echo(body: dict[str, Any]) -> Reply:
        users = [m for m in body["messages"] if m["role"] == "user"]
        return Reply(text=f"echo: {users[-1]['content'] if users else ''}")

    def _serve(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        if reply.error == "status":
            payload = json.dumps({"error": {"message": "model exploded", "type": "server_error"}})
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload.encode())
            return
        # As OpenAI's API and vLLM answer: chunked, the connection kept for the next request.
        # A reply scripted to break ends by closing the connection, as a broken server would.
        kept = reply.error not in ("hang", "malformed", "truncated")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        if kept:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()

        def send(data: str) -> None:
            event = f"data: {data}\n\n".encode()
            if kept:
                event = f"{len(event):x}\r\n".encode() + event + b"\r\n"
            handler.wfile.write(event)
            handler.wfile.flush()

        model = body.get("model", "m")
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return json.dumps({**base, "choices": [choice]})

        send(chunk({"role": "assistant", "content": ""}))
        if reply.error == "hang":
            time.sleep(30)
            return
        if reply.error == "malformed":
            send('{"id": "chatcmpl-1", "choices": [')
            return
        for piece in _split(reply.reasoning, 2) if reply.reasoning else []:
            send(chunk({"reasoning_content": piece}))
        pieces = _split(reply.text, reply.chunks)
        for piece in pieces:
            if reply.pace:
                time.sleep(reply.pace)
            send(chunk({"content": piece}))
        for index, (name, arguments) in enumerate(reply.tool_calls):
            call_id = f"call_{len(self.requests)}_{index}"
            first = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            send(chunk({"tool_calls": [first]}))
            for part in _split(arguments, 2):
                send(chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
        if reply.error == "truncated":
            return  # the connection closes with no finish_reason and no [DONE]
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        send(chunk({}, finish))
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        send(json.dumps({**base, "choices": [], "usage": usage}))
        send("[DONE]")
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()


def main() -> None:
    """Echo replies until stopped, in a process of its own (as the benchmark runs its model):
    prints the URL, then serves. Arrival times are `time.perf_counter()`, the system-wide
    monotonic clock on Linux, so another process can compare them with its own."""
    with ScriptedOpenAI() as model:
        print(model.url, flush=True)
        threading.Event().wait()


def _split(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


if __name__ == "__main__":
    main()
