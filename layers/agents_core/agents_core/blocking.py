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
import threading
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, TypeVar

from greenlet import GreenletExit, getcurrent, greenlet

T = TypeVar("T")


class _Bridged(greenlet):
    """A greenlet that runs `run`'s functions one after another (`_serve`), its parent the loop's
    own greenlet. One whose function has returned is kept for the next `run`: a new greenlet
    costs a frame stack of its own, mapped and unmapped each time (28 us of CPU a call against
    10 for a kept one, caches cold as a run finds them; four calls a turn)."""


class _Returned(NamedTuple):
    value: Any


class _Raised(NamedTuple):
    error: BaseException


#: Idle greenlets kept per thread (a thread's greenlets cannot switch to another's).
_KEPT = 8
_idle = threading.local()


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
    """`function(*args, **kwargs)` on the loop's thread, in a copy of the caller's context
    (contextvars: the log's keys), its `wait`s awaited here."""
    kept = _kept()
    child = kept.pop() if kept else _Bridged(_serve)
    child.parent = getcurrent()
    pending: Any = child.switch(function, args, kwargs, contextvars.copy_context())
    while True:
        kind = type(pending)
        if kind is _Returned or kind is _Raised:
            if len(kept) < _KEPT:
                kept.append(child)
            if kind is _Returned:
                return pending.value
            try:
                raise pending.error
            finally:
                pending = None
        try:
            value = await pending
        except BaseException:  # noqa: BLE001 - handed to the function, which raises it on
            pending = child.throw(*sys.exc_info())
        else:
            pending = child.switch(value)


def _serve(function: Callable[..., Any], args: tuple, kwargs: dict, context: Any) -> None:
    """A `_Bridged` greenlet's life: each function it is handed, run in its context, its
    outcome switched back to `run`, which hands it the next."""
    while True:
        try:
            outcome: Any = _Returned(context.run(function, *args, **kwargs))
        except GreenletExit:  # the greenlet is being collected while its function waited
            raise
        except BaseException as err:  # noqa: BLE001 - raised again by `run`, in its caller
            outcome = _Raised(err)
        function = args = kwargs = context = None  # nothing kept alive while idle
        function, args, kwargs, context = getcurrent().parent.switch(outcome)


def _kept() -> list[_Bridged]:
    kept = getattr(_idle, "greenlets", None)
    if kept is None:
        kept = _idle.greenlets = []
    return kept
