"""A lean HTTP/1.1 client for POSTs to one endpoint: the request written whole, its answer's
body read as it arrives, the connection kept for the next request of the same event loop. The
model's streamed answers (inference/openai_compat.py) and the spans' exports
(telemetry/otlp.py) go through it.

httpx, httpcore and h11 spent about a quarter of a streamed turn's CPU here, on a handful of
events; an endpoint answers a POST with a status line, headers and a chunked (or sized, or
closed-at-the-end) body, which an asyncio Protocol reads with little more than the bytes' own
handling. Every wait is bounded (connect, each write, each read), as are the answer's head and
a chunk. It speaks to no proxy: `OpenAICompatProvider` uses httpx instead when one applies to
the model's endpoint (HTTP(S)_PROXY, ALL_PROXY).
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator
from functools import cache
from typing import Any
from urllib.parse import unquote, urlsplit

#: The layer's hashed directory of certifi's bundle (`build_layer.CERTIFICATES`).
CERTIFICATES = "certificates"
#: Bounds on an answer's head: a line of it, how many header lines, and the whole head.
_MAX_LINE = 65_536
_MAX_HEADERS = 100
_MAX_HEAD = 256 * 1024
#: The largest chunk of a chunked body accepted.
_MAX_CHUNK = 16 * 1024 * 1024
#: Where `whole_chunk` looks for a chunk's size line's end (longer lines take the slow path).
_SIZE_LINE = 64
#: Bytes buffered unread past which the socket is not read until they are.
_HIGH_WATER = 1024 * 1024


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
        self, client: PostClient, conn: _Conn, status: int, reason: str, headers: dict[str, str]
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
        timeout = self._client.timeout
        if self._framing == "chunked":
            while True:
                data = conn.whole_chunk()
                if data is not None:  # a model's stream: most chunks arrived whole
                    yield data
                    continue
                line = await conn.line(timeout)
                try:
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise Broken(f"not a chunk's size: {line[:40]!r}") from None
                if not 0 <= size <= _MAX_CHUNK:
                    raise Broken(f"a chunk of {size} bytes")
                if size == 0:
                    while await conn.line(timeout):  # trailers, then the blank line
                        pass
                    self._ended = True
                    return
                data = await conn.exactly(size + 2, timeout)
                if data[-2:] != b"\r\n":
                    raise Broken("a chunk does not end where its size says")
                yield data[:-2]
        elif self._framing == "sized":
            while self._left:
                data = await conn.some(timeout, self._left)
                if not data:
                    raise Broken("the answer ended before its Content-Length")
                self._left -= len(data)
                yield data
            self._ended = True
        else:
            while data := await conn.some(timeout):
                yield data
            self._ended = True

    async def read(self, most: int) -> bytes:
        """The whole body, at most `most` bytes (else Broken). A sized one is read in one
        wait, without `body()`'s generator: an AWS call's answer."""
        conn = self._conn
        assert conn is not None
        if self._framing == "sized" and self._left <= most:
            data = await conn.exactly(self._left, self._client.timeout)
            self._left, self._ended = 0, True
            return data
        parts, size = [], 0
        async for part in self.body():
            size += len(part)
            if size > most:
                raise Broken(f"an answer of more than {most} bytes")
            parts.append(part)
        return b"".join(parts)

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._ended and self._keep and conn.usable():
            self._client.keep(conn)
        else:
            conn.close()


class _Conn(asyncio.Protocol):
    """One connection: what arrives is buffered; reads take from the buffer and wait (within
    their timeout) only when it lacks what they need."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.http11 = True
        self._loop = loop
        self._transport: Any = None
        self._buffer = bytearray()
        self._eof = False
        self._lost: BaseException | None = None  # why the connection went, if it did
        self._waiter: asyncio.Future | None = None
        self._writable: asyncio.Future | None = None
        self._reading = True
        # The wait under way (its future and deadline) and the connection's one timer (`_wait`).
        self._timed: asyncio.Future | None = None
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) > _HIGH_WATER and self._reading:
            self._transport.pause_reading()
            self._reading = False
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: BaseException | None) -> None:
        self._eof = True
        self._lost = exc
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- reads and writes ---------------------------------------------------------------------

    def usable(self) -> bool:
        """Open, and nothing arrived unasked for while it was kept."""
        return not (self._eof or self._buffer or self._transport.is_closing())

    def close(self) -> None:
        self._transport.close()

    async def write(self, data: bytes, timeout: float) -> None:
        if self._eof:
            raise ConnectionResetError("the server closed the connection")
        self._transport.write(data)
        if self._writable is not None:
            await self._wait(self._writable, timeout)
            if self._eof:
                raise ConnectionResetError("the server closed the connection")

    async def line(self, timeout: float) -> bytes:
        """One line, without its CRLF; b"" at the end of the stream (and for a blank line)."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                if end >= _MAX_LINE:
                    raise Broken("a line of the answer is too long")
                return line.rstrip(b"\r\n")
            if len(self._buffer) >= _MAX_LINE:
                raise Broken("a line of the answer is too long")
            if self._eof:
                if self._buffer:
                    self._raise_lost()
                    raise Broken("the answer ended within a line")
                self._raise_lost()
                return b""
            await self._more(timeout)

    async def head(self, timeout: float) -> list[str]:
        """An answer's status line and header lines, without their line ends, read at once when
        its blank line has arrived (a line at a time cost an await each) and decoded at once
        (Latin-1, as HTTP's header bytes); [] where the stream ends before any of it."""
        while True:
            buffer = self._buffer
            crlf, lf = buffer.find(b"\n\r\n"), buffer.find(b"\n\n")
            if crlf >= 0 and (lf < 0 or crlf < lf):
                end, size = crlf, crlf + 3
            elif lf >= 0:
                end, size = lf, lf + 2
            else:
                end = size = -1
            if end >= 0:
                lines = buffer[:end].decode("latin-1").split("\n")
                del buffer[:size]
                if len(lines) > _MAX_HEADERS + 1 or max(map(len, lines)) > _MAX_LINE:
                    raise Broken("the answer's head passes its bounds")
                return [line.rstrip("\r") for line in lines]
            if len(buffer) >= _MAX_HEAD:
                raise Broken("the answer's head passes its bounds")
            if self._eof:
                self._raise_lost()
                if buffer:
                    raise Broken("the answer ended within its head")
                return []
            await self._more(timeout)

    def whole_chunk(self) -> bytes | None:
        """The next chunk of a chunked body, taken from the buffer without a wait, when all of
        it is there (its size line, its data, its CRLF) and it is not the last; else None,
        nothing taken: `line` and `exactly` read it as it comes, and tell what is wrong."""
        buffer = self._buffer
        end = buffer.find(b"\n", 0, _SIZE_LINE)
        if end < 0:
            return None
        try:
            size = int(bytes(buffer[:end]).split(b";", 1)[0], 16)
        except ValueError:
            return None
        start = end + 1
        stop = start + size
        if not 0 < size <= _MAX_CHUNK or buffer[stop : stop + 2] != b"\r\n":
            return None
        data = bytes(buffer[start:stop])
        del buffer[: stop + 2]
        return data

    async def exactly(self, size: int, timeout: float) -> bytes:
        while len(self._buffer) < size:
            if self._eof:
                self._raise_lost()
                raise Broken("the answer ended early")
            await self._more(timeout)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def some(self, timeout: float, most: int = _HIGH_WATER) -> bytes:
        """What has arrived (at most `most` bytes), once something has; b"" at the end."""
        while not self._buffer:
            if self._eof:
                self._raise_lost()
                return b""
            await self._more(timeout)
        data = bytes(self._buffer[:most])
        del self._buffer[:most]
        return data

    async def _more(self, timeout: float) -> None:
        if not self._reading:
            self._transport.resume_reading()
            self._reading = True
        self._waiter = self._loop.create_future()
        try:
            await self._wait(self._waiter, timeout)
        finally:
            self._waiter = None

    async def _wait(self, future: asyncio.Future, timeout: float) -> None:
        """`future`, awaited no longer than `timeout`. A connection's waits share one timer,
        moved only to an earlier deadline: when it fires before the wait under way is due, it
        is set again for that wait's deadline. A wait a time (a timer made and cancelled for
        each read) cost about 1.5% of a run's instructions."""
        deadline = self._loop.time() + timeout
        self._timed, self._deadline = future, deadline
        if self._timer is None or self._timer.when() > deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._loop.call_at(deadline, self._on_timer)
        try:
            await future
        finally:
            self._timed = None

    def _on_timer(self) -> None:
        self._timer = None
        future = self._timed
        if future is None or future.done():
            return  # no wait under way: the timer goes until the next one
        if self._loop.time() >= self._deadline:
            future.set_exception(TimeoutError())
        else:
            self._timer = self._loop.call_at(self._deadline, self._on_timer)

    def _raise_lost(self) -> None:
        """At the end of the stream: the connection's own failure (a reset), if it had one."""
        if isinstance(self._lost, OSError):
            raise self._lost


class PostClient:
    """POSTs to one endpoint (`url`: its scheme, host, port and path) with fixed `headers`.
    Connections belong to the event loop that opened them: a new loop starts afresh."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        *,
        timeout: float,
        connect_timeout: float,
        certificates: tuple[str | None, str | None] | None = None,
    ) -> None:
        """`certificates`: (CA file, CA directory) to verify the server with; by default
        `default_certificates`, read at the first connection."""
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
        self._head = f"POST {parts.path or '/'} HTTP/1.1\r\n{head}"
        self._idle: list[_Conn] = []
        self._loop: Any = None
        self._ssl: Any = None
        self._certificates = certificates

    async def post(self, body: bytes, headers: dict[str, str] | None = None) -> Answer:
        """Send the request, with `headers` besides the fixed ones; the answer once its head
        is read. Raises ConnectFailed, Broken, TimeoutError or OSError."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the kept connections belong to a loop that is gone
            self._idle, self._loop = [], loop
        more = "".join([f"{k}: {v}\r\n" for k, v in headers.items()]) if headers else ""
        request = f"{self._head}{more}Content-Length: {len(body)}\r\n\r\n".encode() + body
        while self._idle:
            conn = self._idle.pop()
            if not conn.usable():
                conn.close()
                continue
            try:
                return await self._exchange(conn, request, kept=True)
            except _Stale:
                break
        return await self._exchange(await self._connect(loop), request, kept=False)

    def keep(self, conn: _Conn) -> None:
        self._idle.append(conn)

    async def open(self, count: int = 1) -> None:
        """Open connections (their TLS handshakes included), at once, until `count` are kept
        for this event loop's next requests. Raises as `post` does."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._idle, self._loop = [], loop
        opening = [self._connect(loop) for _ in range(count - len(self._idle))]
        opened = await asyncio.gather(*opening, return_exceptions=True)
        self._idle += [conn for conn in opened if isinstance(conn, _Conn)]
        for failure in opened:
            if isinstance(failure, BaseException):
                raise failure

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Conn:
        import socket

        try:
            async with asyncio.timeout(self._connect_timeout):
                transport, conn = await loop.create_connection(
                    lambda: _Conn(loop),
                    self._host,
                    self._port,
                    ssl=self._tls_context() if self._tls else None,
                )
        except TimeoutError:
            raise
        except ConnectionRefusedError as err:
            raise ConnectFailed("connection refused") from err
        except socket.gaierror as err:
            raise ConnectFailed("unknown host") from err
        except OSError as err:  # TLS failures (ssl.SSLError) among them
            raise ConnectFailed(str(err) or type(err).__name__) from err
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    async def _exchange(self, conn: _Conn, request: bytes, *, kept: bool) -> Answer:
        try:
            await conn.write(request, self.timeout)
            head = await conn.head(self.timeout)
            if not head and kept:
                raise _Stale
            while True:
                status, reason = _status(head[0] if head else "", conn)
                headers = _headers(head[1:])
                if status >= 200:
                    return Answer(self, conn, status, reason, headers)
                # An interim answer (100 Continue, 103 Early Hints): the real one follows.
                head = await conn.head(self.timeout)
        except (ConnectionResetError, BrokenPipeError) as err:
            conn.close()
            if kept:
                raise _Stale from err
            raise
        except BaseException:
            conn.close()
            raise

    def _tls_context(self) -> Any:
        if self._ssl is None:
            self._ssl = tls_context(*(self._certificates or default_certificates()))
        return self._ssl


def default_certificates() -> tuple[str | None, str | None]:
    """(CA file, CA directory) as httpx checks certificates: SSL_CERT_FILE or SSL_CERT_DIR when
    set, else certifi's bundle (`bundled_certificates`)."""
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if not (cafile or capath):
        return bundled_certificates()
    return cafile, capath


@cache
def bundled_certificates() -> tuple[str | None, str | None]:
    """certifi's bundle: in the layer, as the hashed directory its build writes beside this
    module (`certificate_directory.py`), which a TLS context reads a root from when a handshake
    needs it; else the bundle's file, whose certificates a context parses all at once (about
    40 ms of CPU at a full core)."""
    folder = os.path.join(os.path.dirname(__file__), CERTIFICATES)
    if os.path.isdir(folder):
        return None, folder
    import certifi

    return certifi.where(), None


def default_tls_context() -> Any:
    """The shared context of `default_certificates`: what this client and the httpx clients
    (tools, the model behind a proxy, the model catalog) verify servers with."""
    return tls_context(*default_certificates())


@cache
def tls_context(cafile: str | None, capath: str | None = None) -> Any:
    """The client TLS context of a set of trusted certificates, one per process, shared by every
    connection that checks them: loading a bundle file such as certifi's takes about 40 ms of
    CPU at a full core, 0.3 s at 192 MB's share, and a new container's first run would
    otherwise load it once per client (DynamoDB, EventBridge, the model). It offers HTTP/1.1
    alone (ALPN), as httpx sets it at each connection unless a client asks for HTTP/2: such a
    client needs a context of its own, or it would offer h2 on this module's connections too."""
    import ssl

    context = ssl.create_default_context(cafile=cafile, capath=capath)
    context.set_alpn_protocols(["http/1.1"])
    return context


def _status(line: str, conn: _Conn) -> tuple[int, str]:
    """(status, reason) of an answer's status line."""
    if not line:
        raise Broken("the server closed the connection without answering")
    version, _, rest = line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not (code.isascii() and code.isdigit()):
        raise Broken(f"not an HTTP/1.x status line: {line[:80]!r}")
    conn.http11 = version != "HTTP/1.0"
    return int(code), rest[4:]


def _headers(lines: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise Broken(f"not a header line: {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return headers
