"""Compressed request bodies: `Content-Encoding: gzip` or `zstd` (Codex CLI may send zstd) are
decompressed before the app reads the body, up to `MAX_DECOMPRESSED_BYTES`. A body that would
grow past it (a decompression bomb) is a 413 and nothing runs; one that is not what its
encoding says is a 400; another encoding is a 415."""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from starlette.requests import Request

from .errors import error_response

#: The most a compressed body may grow to (API Gateway takes 10 MB bodies; JSON compresses
#: well, a bomb far better).
MAX_DECOMPRESSED_BYTES = 16 * 1024 * 1024

#: Each call of a decompressor gives at most this much, so the bound is checked as it grows.
_STEP = 1024 * 1024


class DecompressBodies:
    """ASGI middleware: the request body decompressed, as if it had been sent plain."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        encoding = next((v for k, v in scope["headers"] if k == b"content-encoding"), b"")
        encoding = encoding.decode("latin-1").strip().lower()
        if encoding in ("", "identity"):  # nearly every request: nothing copied
            return await self.app(scope, receive, send)
        if encoding not in _DECODERS:
            message = f"Content-Encoding {encoding} is not accepted; send gzip, zstd or none"
            return await error_response(Request(scope), 415, message)(scope, receive, send)
        try:
            compressed = await _read(receive)
            body = _decompress(_DECODERS[encoding], compressed)
        except _TooLarge:
            message = f"The body decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes"
            return await error_response(Request(scope), 413, message)(scope, receive, send)
        except Exception:
            message = f"The body is not valid {encoding} data"
            return await error_response(Request(scope), 400, message)(scope, receive, send)
        plain = (b"content-encoding", b"content-length")
        headers = [(k, v) for k, v in scope["headers"] if k not in plain]
        headers.append((b"content-length", str(len(body)).encode()))
        await self.app({**scope, "headers": headers}, replayed(body, receive), send)


def replayed(body: bytes, receive: Callable) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI receive that gives `body` whole first, then what `receive` gives (the client's
    disconnect, while a stream runs): a body read before the app reads it again."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class _TooLarge(Exception):
    pass


async def _read(receive: Callable) -> bytes:
    """The whole (compressed) body, itself within the bound (API Gateway's is lower)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        part = message.get("body", b"")
        size += len(part)
        if size > MAX_DECOMPRESSED_BYTES:
            raise _TooLarge
        parts.append(part)
        if not message.get("more_body"):
            return b"".join(parts)


def _gzip() -> Any:
    return zlib.decompressobj(wbits=31)


def _zstd() -> Any:
    from backports import zstd  # Python 3.14's compression.zstd, for the runtime's 3.12

    return zstd.ZstdDecompressor()


_DECODERS: dict[str, Callable[[], Any]] = {"gzip": _gzip, "x-gzip": _gzip, "zstd": _zstd}


def _decompress(new: Callable[[], Any], data: bytes) -> bytes:
    """Every frame (gzip member) of `data`, decompressed a step at a time; _TooLarge as soon
    as the output passes the bound, ValueError for data cut short."""
    return b"".join(_frames(new, data))


def _frames(new: Callable[[], Any], data: bytes) -> Iterator[bytes]:
    total = 0
    while data:
        decompressor, pending, idle = new(), data, 0
        while not decompressor.eof:
            out = decompressor.decompress(pending, _STEP)
            pending = getattr(decompressor, "unconsumed_tail", b"")  # zlib hands input back
            idle = 0 if out or pending else idle + 1
            if idle > 1:  # no output twice, and no input left to give
                raise ValueError("the data ends before its frame does")
            total += len(out)
            if total > MAX_DECOMPRESSED_BYTES:
                raise _TooLarge
            yield out
        data = decompressor.unused_data
