"""A lean HTTP/1.1 client for the model's streamed answers: a POST written whole, its answer's
body read as it arrives, the connection kept for the next call of the same event loop.

httpx, httpcore and h11 spent about a quarter of a streamed turn's CPU here, on a handful of
events; a model endpoint answers a POST with a status line, headers and a chunked (or sized, or
closed-at-the-end) body, which asyncio's streams read with little more than the bytes' own
handling. Every wait is bounded (connect, each write, each read), as are the answer's head and
a chunk. `OpenAICompatProvider` uses httpx instead when a proxy applies to the endpoint
(HTTP(S)_PROXY, ALL_PROXY), which this client does not speak.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote, urlsplit

#: Bounds on an answer's head: a line of it, and how many header lines.
_MAX_LINE = 65_536
_MAX_HEADERS = 100
#: The most one body read asks for, and the largest chunk of a chunked body accepted.
_READ_SIZE = 65_536
_MAX_CHUNK = 16 * 1024 * 1024


class ConnectFailed(Exception):
    """No connection to the endpoint; `reason` in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Broken(Exception):
    """The answer is not HTTP/1.x, ends before its end, or passes a bound."""


class _Stale(Exception):
    """A kept connection the server closed before it answered: the request was not taken."""


class Answer:
    """An answer's status and headers; its body from `body()`. `close()` (always called) keeps
    the connection for the next request when the body was read to its end, else closes it."""

    def __init__(
        self, client: ModelHTTP, conn: _Conn, status: int, reason: str, headers: dict[str, str]
    ) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self._client = client
        self._conn: _Conn | None = conn
        self._ended = False
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._keep = (
            headers.get("connection", "").lower() != "close"
            and conn.http11
            and (chunked or length is not None)
        )
        if chunked:
            self._framing = "chunked"
        elif length is not None:
            if not length.isdigit():
                raise Broken(f"a Content-Length of {length[:40]!r}")
            self._framing, self._left = "sized", int(length)
        else:
            self._framing = "close"

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    async def body(self) -> AsyncIterator[bytes]:
        """The body's bytes, as they arrive (not empty); ends where the body ends."""
        conn = self._conn
        assert conn is not None
        reader, timeout = conn.reader, self._client.timeout
        if self._framing == "chunked":
            while True:
                async with asyncio.timeout(timeout):
                    line = await _line(reader)
                    try:
                        size = int(line.split(b";", 1)[0], 16)
                    except ValueError:
                        raise Broken(f"not a chunk's size: {line[:40]!r}") from None
                    if not 0 <= size <= _MAX_CHUNK:
                        raise Broken(f"a chunk of {size} bytes")
                    if size == 0:
                        while await _line(reader):  # trailers, then the blank line
                            pass
                        self._ended = True
                        return
                    data = await reader.readexactly(size + 2)
                if data[-2:] != b"\r\n":
                    raise Broken("a chunk does not end where its size says")
                yield data[:-2]
        elif self._framing == "sized":
            while self._left:
                async with asyncio.timeout(timeout):
                    data = await reader.read(min(self._left, _READ_SIZE))
                if not data:
                    raise Broken("the answer ended before its Content-Length")
                self._left -= len(data)
                yield data
            self._ended = True
        else:
            while True:
                async with asyncio.timeout(timeout):
                    data = await reader.read(_READ_SIZE)
                if not data:
                    self._ended = True
                    return
                yield data

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._ended and self._keep:
            self._client.keep(conn)
        else:
            conn.close()


class _Conn:
    __slots__ = ("reader", "writer", "http11")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.http11 = reader, writer, True

    def usable(self) -> bool:
        """Not closed by either side while it was kept."""
        return not (self.writer.is_closing() or self.reader.at_eof())

    def close(self) -> None:
        self.writer.close()


class ModelHTTP:
    """POSTs to one endpoint (`url`: its scheme, host, port and path) with fixed `headers`.
    Connections belong to the event loop that opened them: a new loop starts afresh."""

    def __init__(
        self, url: str, headers: dict[str, str], *, timeout: float, connect_timeout: float
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url}")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        self.timeout = timeout
        self._connect_timeout = connect_timeout
        fixed = {"Host": parts.netloc.rpartition("@")[2], **headers}
        if parts.username and not any(k.lower() == "authorization" for k in fixed):
            user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            fixed["Authorization"] = f"Basic {base64.b64encode(user.encode()).decode()}"
        head = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._head = f"POST {parts.path or '/'} HTTP/1.1\r\n{head}Content-Length: "
        self._idle: list[_Conn] = []
        self._loop: Any = None
        self._ssl: Any = None

    async def post(self, body: bytes) -> Answer:
        """Send the request; the answer once its head is read. Raises ConnectFailed, Broken,
        TimeoutError or OSError."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the kept connections belong to a loop that is gone
            self._idle, self._loop = [], loop
        request = f"{self._head}{len(body)}\r\n\r\n".encode() + body
        while self._idle:
            conn = self._idle.pop()
            if not conn.usable():
                conn.close()
                continue
            try:
                return await self._exchange(conn, request, kept=True)
            except _Stale:
                conn.close()
                break
        return await self._exchange(await self._connect(), request, kept=False)

    def keep(self, conn: _Conn) -> None:
        self._idle.append(conn)

    async def _connect(self) -> _Conn:
        import socket

        try:
            async with asyncio.timeout(self._connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self._host,
                    self._port,
                    ssl=self._tls_context() if self._tls else None,
                    limit=_MAX_LINE,
                )
        except TimeoutError:
            raise
        except ConnectionRefusedError as err:
            raise ConnectFailed("connection refused") from err
        except socket.gaierror as err:
            raise ConnectFailed("unknown host") from err
        except OSError as err:  # TLS failures (ssl.SSLError) among them
            raise ConnectFailed(str(err) or type(err).__name__) from err
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(reader, writer)

    async def _exchange(self, conn: _Conn, request: bytes, *, kept: bool) -> Answer:
        try:
            conn.writer.write(request)
            async with asyncio.timeout(self.timeout):
                await conn.writer.drain()
                status_line = await _line(conn.reader)
        except (ConnectionResetError, BrokenPipeError) as err:
            conn.close()
            if kept:
                raise _Stale from err
            raise
        except BaseException:
            conn.close()
            raise
        try:
            if not status_line and kept:
                raise _Stale
            while True:
                status, reason = _status(status_line, conn)
                async with asyncio.timeout(self.timeout):
                    headers = await _headers(conn.reader)
                    if status >= 200:
                        return Answer(self, conn, status, reason, headers)
                    # An interim answer (100 Continue, 103 Early Hints): the real one follows.
                    status_line = await _line(conn.reader)
        except BaseException:
            conn.close()
            raise

    def _tls_context(self) -> Any:
        """Certificates as httpx checks them: SSL_CERT_FILE or SSL_CERT_DIR when set, else
        certifi's bundle."""
        if self._ssl is None:
            import ssl

            cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
            if not (cafile or capath):
                import certifi

                cafile = certifi.where()
            context = ssl.create_default_context(cafile=cafile, capath=capath)
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl


async def _line(reader: asyncio.StreamReader) -> bytes:
    """One line of the head or of chunked framing, without its CRLF; b"" at the end of the
    stream (and for a blank line)."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as err:
        if err.partial:
            raise Broken("the answer ended within a line") from None
        return b""
    except asyncio.LimitOverrunError:
        raise Broken("a line of the answer is too long") from None
    return line.rstrip(b"\r\n")


def _status(line: bytes, conn: _Conn) -> tuple[int, str]:
    """(status, reason) of an answer's status line."""
    if not line:
        raise Broken("the server closed the connection without answering")
    version, _, rest = line.partition(b" ")
    if not version.startswith(b"HTTP/1.") or not rest[:3].isdigit():
        raise Broken(f"not an HTTP/1.x status line: {line[:80]!r}")
    conn.http11 = version != b"HTTP/1.0"
    return int(rest[:3]), rest[4:].decode("latin-1")


async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS):
        line = await _line(reader)
        if not line:
            return headers
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise Broken(f"not a header line: {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    raise Broken("too many header lines")
