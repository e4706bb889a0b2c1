"""The httpx client every caller-named URL is called with: each request is checked by the outbound
guard and sent to the address the guard checked (not to a second DNS answer), with a timeout and
a bound on the bytes each response may carry.

Imported only by the code that makes such calls (httpx is not needed to start a function).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping

import httpx

from ..http1 import default_tls_context
from .guard import OutboundGuard


class ResponseTooLarge(httpx.ReadError):
    """A response longer than the client's bound: its reading stops there."""


def guarded_client(
    guard: OutboundGuard,
    *,
    timeout: float,
    max_response_bytes: int,
    headers: Mapping[str, str] | None = None,
    on_too_large: Callable[[ResponseTooLarge], None] | None = None,
) -> httpx.AsyncClient:
    """An AsyncClient whose every request (redirects included: each is a new request) passes the
    guard, goes to a checked address, and reads at most `max_response_bytes` per response.

    `on_too_large` is told when a response passes the bound, for readers (the MCP transport)
    that would otherwise swallow the error and leave their caller waiting."""
    return httpx.AsyncClient(
        transport=_GuardedTransport(guard, max_response_bytes, on_too_large or _ignore),
        timeout=httpx.Timeout(timeout),
        headers=dict(headers or {}),
        follow_redirects=False,
    )


class _GuardedTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        guard: OutboundGuard,
        max_response_bytes: int,
        on_too_large: Callable[[ResponseTooLarge], None],
    ) -> None:
        self._guard = guard
        self._max = max_response_bytes
        self._on_too_large = on_too_large
        self._inner = httpx.AsyncHTTPTransport(verify=default_tls_context())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        addresses = await self._guard.resolve(str(request.url))
        host = request.url.host
        # Connect to the checked address; the Host header (set when the request was built) and
        # TLS (server name and certificate check) still name the host.
        extensions = dict(request.extensions)
        if request.url.scheme == "https":
            extensions["sni_hostname"] = host
        for index, address in enumerate(addresses):  # the next checked one if one is unreachable
            pinned = httpx.Request(
                request.method,
                request.url.copy_with(host=address),
                headers=request.headers,
                stream=request.stream,
                extensions=extensions,
            )
            try:
                response = await self._inner.handle_async_request(pinned)
                break
            except httpx.ConnectError:
                if index == len(addresses) - 1:
                    raise
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max:
            await response.aclose()
            err = ResponseTooLarge(
                f"the response from {host} is {declared} bytes, over the {self._max} byte bound"
            )
            self._on_too_large(err)
            raise err
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Bounded(response.stream, self._max, host, self._on_too_large),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Bounded(httpx.AsyncByteStream):
    """A response body that stops with ResponseTooLarge once it passed `limit` bytes."""

    def __init__(
        self,
        stream: httpx.AsyncByteStream,
        limit: int,
        host: str,
        on_too_large: Callable[[ResponseTooLarge], None],
    ) -> None:
        self._stream, self._limit, self._host = stream, limit, host
        self._on_too_large = on_too_large

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._stream:
            total += len(chunk)
            if total > self._limit:
                err = ResponseTooLarge(
                    f"the response from {self._host} passed the {self._limit} byte bound"
                )
                self._on_too_large(err)
                raise err
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def _ignore(err: ResponseTooLarge) -> None:
    pass
