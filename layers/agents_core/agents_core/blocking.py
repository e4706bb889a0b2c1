"""Blocking store code run on the event loop's own thread, its AWS calls awaited there.

The stores are written as plain blocking code over botocore-shaped clients. Run in a worker thread
(`asyncio.to_thread`), each call pays for the hop twice: the thread's wake-up, the GIL passed
back and forth, the loop woken through its self-pipe; about 0.3 ms of CPU a DynamoDB call here,
some 3 ms at 192 MB's share of a vCPU, four times a turn. `run` instead calls the function in a
greenlet on the loop's thread; when its code reaches a DynamoDB or EventBridge call
(`aws.JsonClient`), the client hands the request's coroutine to `wait`, which switches back to
the loop, lets it await the exchange among the run's other tasks, and resumes the function with
the answer. The function's code stays as it is, and each await happens where the loop can
serve the model's stream meanwhile. SQLAlchemy's asyncio extension works the same way.

    lock = await blocking.run(turns.lock_session, tenant, agent_id, turn)

Only functions whose I/O is `JsonClient`'s belong here: anything else they did would block the
loop (botocore's other operations, a file read). Outside `run`, `wait` is not called: a
`JsonClient` in a worker thread or a plain script blocks as before (`bridged()` is False).
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from greenlet import getcurrent, greenlet

T = TypeVar("T")


class _Bridged(greenlet):
    """A blocking function's greenlet, whose parent is the loop's task that runs it."""


def bridged() -> bool:
    """Whether the caller runs under `run`, on the loop's thread (`wait` may be called)."""
    return isinstance(getcurrent(), _Bridged)


def wait(awaitable: Awaitable[T]) -> T:
    """The awaitable's result, awaited by the loop while this greenlet is suspended."""
    current = getcurrent()
    if not isinstance(current, _Bridged):
        raise RuntimeError("blocking.wait() outside blocking.run()")
    return current.parent.switch(awaitable)


async def run(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)` on the loop's thread, in the caller's context (contextvars:
    the log's keys), its `wait`s awaited here."""
    child = _Bridged(function, parent=getcurrent())
    child.gr_context = contextvars.copy_context()
    pending: Any = child.switch(*args, **kwargs)
    while not child.dead:
        try:
            value = await pending
        except BaseException:  # noqa: BLE001 - handed to the function, which raises it on
            pending = child.throw(*sys.exc_info())
        else:
            pending = child.switch(value)
    return pending
