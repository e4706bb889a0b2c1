"""A provider whose API key lives in a secret: read at the first model call, or at init where
a Lambda init opens the model's connection (`Services.connect`: on demand, not under SnapStart,
whose snapshot would keep a key its rotation left behind).

The key is read where a model failure is handled (inside `stream`/`complete`), so a missing or
unreadable secret fails the turn like any model failure (502, the session freed), never a
request before it started.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from ..errors import UpstreamFailed
from .types import ChatEvent, ChatRequest, Provider


class KeyFromSecret:
    """Wraps `create(api_key) -> Provider`; `read_key()` is called once, in a thread (it makes a
    blocking AWS call), and the provider it keys serves every later call."""

    def __init__(self, create: Callable[[str | None], Provider], read_key: Callable[[], str]):
        self._create, self._read_key = create, read_key
        self._unkeyed = create(None)  # answers `check`, which must not wait on AWS
        self.name = self._unkeyed.name
        self._keyed: Provider | None = None

    def check(self, request: ChatRequest) -> None:
        self._unkeyed.check(request)

    async def _provider(self) -> Provider:
        if self._keyed is None:
            from ..secrets import SecretUnavailable

            try:
                key = await asyncio.to_thread(self._read_key)
            except SecretUnavailable as err:
                raise UpstreamFailed(f"the model's API key is unavailable: {err}") from err
            self._keyed = self._create(key)
        return self._keyed

    async def open(self) -> None:
        """Read the key and open the keyed provider's connection now (`ModelRouter.open`)."""
        await (await self._provider()).open()

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        provider = await self._provider()
        async for event in provider.stream(request):
            yield event

    async def complete(self, request: ChatRequest) -> list[ChatEvent]:
        return await (await self._provider()).complete(request)
