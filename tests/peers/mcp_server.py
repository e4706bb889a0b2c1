"""An MCP server over streamable HTTP, built with the `mcp` package (FastMCP), on 127.0.0.1.

Its tools answer, raise, hang, return large output and echo a request header, so tests see each
way a real server behaves. Every HTTP request it receives is counted and its headers kept.

    with McpPeer() as peer:
        peer.url            # http://127.0.0.1:<port>/mcp
        peer.requests       # [(method, path, headers), ...]
        peer.tool_calls     # Counter: tool name -> calls it answered or began

Tools: `add(a, b)`, `echo(text)`, `fail(message)` (raises), `hang(seconds)` (sleeps),
`big(size)` (returns `size` bytes of text), `header(name)` (the named request header).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter
from typing import Any

import anyio
import uvicorn
from mcp.server.fastmcp import Context, FastMCP


def build_server(tool_calls: Counter | None = None) -> FastMCP:
    calls = tool_calls if tool_calls is not None else Counter()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    mcp = FastMCP("peer", host="127.0.0.1", log_level="WARNING")
    root.handlers[:], root.level = handlers, level  # FastMCP configures the root logger: undo
    # Sessions the client ends (or cuts at a timeout) make the server log tracebacks: not news.
    logging.getLogger("mcp.server").setLevel(logging.CRITICAL)

    @mcp.tool(description="Add two integers.")
    def add(a: int, b: int) -> str:
        calls["add"] += 1
        return str(a + b)

    @mcp.tool(description="Answer the text it is given.")
    def echo(text: str) -> str:
        calls["echo"] += 1
        return text

    @mcp.tool(description="Fail with the given message.")
    def fail(message: str) -> str:
        raise ValueError(message)

    @mcp.tool(description="Answer after the given number of seconds.")
    async def hang(seconds: float = 30.0) -> str:
        calls["hang"] += 1
        await anyio.sleep(seconds)
        return "woke up"

    @mcp.tool(description="Return `size` bytes of text.")
    def big(size: int = 1024 * 1024) -> str:
        return ("0123456789abcdef" * (size // 16 + 1))[:size]

    @mcp.tool(description="The value of a request header, or (none).")
    def header(name: str, ctx: Context) -> str:
        request = ctx.request_context.request
        return request.headers.get(name, "(none)") if request is not None else "(no request)"

    return mcp


class McpPeer:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.tool_calls: Counter = Counter()
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        app = build_server(self.tool_calls).streamable_http_app()
        config = uvicorn.Config(
            self._counting(app), log_level="critical", lifespan="on", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def _counting(self, app: Any) -> Any:
        async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
                with self._lock:
                    self.requests.append((scope["method"], scope["path"], headers))
            await app(scope, receive, send)

        return counted

    def count(self, method: str = "POST") -> int:
        with self._lock:
            return sum(1 for m, _, _ in self.requests if m == method)

    def __enter__(self) -> McpPeer:
        self._thread.start()
        for _ in range(200):
            if self._server.started:
                return self
            time.sleep(0.02)
        raise RuntimeError("the MCP peer did not start")

    def __exit__(self, *exc: Any) -> None:
        self._server.should_exit = True  # hanging tool calls are cut after a second
        self._thread.join(timeout=5)
        self._sock.close()


def main() -> None:
    """Serve until stopped, in a process of its own: prints the URL, then serves."""
    with McpPeer() as peer:
        print(peer.url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
