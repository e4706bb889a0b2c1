"""A stand-in for Tavily's search API on 127.0.0.1: POST /search with a bearer key answers
`{"query", "results": [{"title", "url", "content", "score"}]}` as Tavily does.

Tests set `mode` to make it fail: "status" (HTTP 500 with an error body), "garbage" (200, not
JSON), "huge" (an endless body), "hang" (no answer for 30 s). Each request's body and
Authorization header are kept.

    with SearchApiStub() as search:
        search.url            # the base URL (WEB_SEARCH_BASE_URL)
        search.requests       # [(authorization, body), ...]
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from .http import LocalPeer


class SearchApiStub(LocalPeer):
    def __init__(self) -> None:
        self.requests: list[tuple[str | None, dict[str, Any]]] = []
        self.mode = "ok"
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.headers.get("Authorization"), body))
                if self.path != "/search":
                    return self._answer(404, {"detail": {"error": "not found"}})
                if stub.mode == "status":
                    return self._answer(500, {"detail": {"error": "search backend down"}})
                if stub.mode == "garbage":
                    return self._answer(200, "<html>maintenance</html>")
                if stub.mode == "hang":
                    time.sleep(30)
                    return None
                if stub.mode == "huge":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.close_connection = True
                    try:
                        for _ in range(4096):  # 4 MB, no Content-Length
                            self.wfile.write(b" " * 1024)
                    except OSError:  # the client stopped reading: as it should
                        pass
                    return None
                query = body["query"]
                results = [
                    {
                        "title": f"Result {rank} about {query}",
                        "url": f"https://example.com/{rank}",
                        "content": f"What the web says about {query}, number {rank}.",
                        "score": 1.0 / rank,
                    }
                    for rank in range(1, body.get("max_results", 5) + 1)
                ]
                return self._answer(200, {"query": query, "results": results})

            def _answer(self, status: int, payload: Any) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(Handler)
