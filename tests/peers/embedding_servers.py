"""Embedding providers over real HTTP on 127.0.0.1: Bedrock's InvokeModel for Titan Text
Embeddings V2 (boto3 given `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` talks to it as to AWS), and an
OpenAI-compatible `/v1/embeddings`. Each answers deterministic vectors (the offline embedder's),
keeps every request, and fails on demand (`fail(status, times)`) to exercise retries.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from agents_core.vectors.offline import OfflineEmbedder

from .http import LocalPeer


class _Scripted(LocalPeer):
    def __init__(self, handler: type[BaseHTTPRequestHandler], path: str = "") -> None:
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.in_flight = self.most_in_flight = 0
        self._failures: list[int] = []
        self._lock = threading.Lock()
        super().__init__(handler, path)

    def fail(self, status: int, times: int = 1) -> None:
        """Answer the next `times` requests with `status`."""
        self._failures += [status] * times

    def _next_failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _send(handler: BaseHTTPRequestHandler, status: int, body: Any, headers=()) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in headers:
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


class TitanEmulator(_Scripted):
    """POST /model/{modelId}/invoke with Titan V2's body; answers its response shape."""

    def __init__(self, delay: float = 0.0) -> None:
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                _, _, model, action = self.path.split("/", 3)
                peer.requests.append({"modelId": unquote(model), "action": action, **body})
                peer._enter()
                try:
                    if delay:
                        threading.Event().wait(delay)
                    failure = peer._next_failure()
                    if failure == 429:
                        message = {"message": "Too many requests, please wait."}
                        _send(self, 429, message, [("x-amzn-ErrorType", "ThrottlingException")])
                        return
                    if failure:
                        message = {"message": "Malformed input request"}
                        _send(self, failure, message, [("x-amzn-ErrorType", "ValidationException")])
                        return
                    vector = OfflineEmbedder(body.get("dimensions", 1024)).embed(
                        [body["inputText"]]
                    )[0]
                    _send(
                        self,
                        200,
                        {
                            "embedding": vector,
                            "inputTextTokenCount": len(body["inputText"].split()),
                            "embeddingsByType": {"float": vector},
                        },
                    )
                finally:
                    peer._leave()

        super().__init__(Handler)


class EmbeddingsServer(_Scripted):
    """An OpenAI-compatible POST /v1/embeddings (url ends in /v1, as OPENAI_BASE_URL does)."""

    def __init__(self, dimension: int = 64) -> None:
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                peer.requests.append(body)
                peer.authorizations.append(self.headers.get("Authorization"))
                failure = peer._next_failure()
                if failure:
                    error = {"error": {"message": f"scripted failure {failure}"}}
                    _send(self, failure, error, [("Retry-After", "0")])
                    return
                texts = body["input"]
                vectors = OfflineEmbedder(body.get("dimensions", dimension)).embed(texts)
                data = [
                    {"object": "embedding", "index": i, "embedding": v}
                    for i, v in reversed(list(enumerate(vectors)))  # any order: index says
                ]
                tokens = sum(len(t.split()) for t in texts)
                _send(
                    self,
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body["model"],
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                    },
                )

        super().__init__(Handler, "/v1")
