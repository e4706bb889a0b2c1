"""blocking.run: blocking code on the event loop's thread, its awaits made by the loop."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from agents_core import blocking

TENANT = contextvars.ContextVar("tenant", default="none")


async def slept(value):
    await asyncio.sleep(0.01)
    return value


def test_a_function_waits_for_awaitables_and_returns_its_result():
    def add(a, b):
        return blocking.wait(slept(a)) + blocking.wait(slept(b))

    assert asyncio.run(blocking.run(add, 2, b=3)) == 5


def test_an_awaitables_error_is_raised_inside_the_function_where_it_can_be_handled():
    async def fails():
        raise KeyError("gone")

    def handled():
        try:
            blocking.wait(fails())
        except KeyError as err:
            return f"handled {err}"

    assert asyncio.run(blocking.run(handled)) == "handled 'gone'"


def test_the_functions_own_error_reaches_the_caller():
    def fails():
        blocking.wait(slept(1))
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        asyncio.run(blocking.run(fails))


def test_the_function_sees_its_callers_context():
    async def main():
        TENANT.set("acme")
        return await blocking.run(lambda: (blocking.bridged(), TENANT.get()))

    assert asyncio.run(main()) == (True, "acme")


def test_runs_one_after_another_share_a_greenlet_and_not_their_context():
    from greenlet import getcurrent

    def seen():
        blocking.wait(slept(None))
        before = TENANT.get()
        TENANT.set("set inside")
        return getcurrent(), before

    def fails():
        raise ValueError("refused")

    async def main():
        TENANT.set("caller's")
        first, before_first = await blocking.run(seen)
        with pytest.raises(ValueError, match="refused"):
            await blocking.run(fails)
        second, before_second = await blocking.run(seen)
        return first, second, before_first, before_second, TENANT.get()

    first, second, *contexts = asyncio.run(main())
    assert first is second  # kept after its function returned, and after one raised
    assert contexts == ["caller's", "caller's", "caller's"]  # each run a copy of the caller's


def test_a_run_cancelled_while_it_waits_raises_in_the_function_and_the_caller():
    seen = []

    def waits():
        try:
            blocking.wait(asyncio.sleep(10))
        except asyncio.CancelledError:
            seen.append("cancelled inside")
            raise

    async def main():
        task = asyncio.create_task(blocking.run(waits))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await blocking.run(lambda: blocking.wait(slept("runs after")))

    assert asyncio.run(main()) == "runs after"
    assert seen == ["cancelled inside"]


def test_wait_outside_run_is_refused_and_not_bridged():
    assert not blocking.bridged()
    waited = slept(1)
    with pytest.raises(RuntimeError, match="outside"):
        blocking.wait(waited)
    waited.close()


def test_runs_of_concurrent_tasks_interleave_on_one_thread():
    order: list[str] = []

    def step(name):
        order.append(f"{name} asks")
        blocking.wait(asyncio.sleep(0.05))
        order.append(f"{name} answered")
        return name

    async def main():
        return await asyncio.gather(blocking.run(step, "a"), blocking.run(step, "b"))

    assert asyncio.run(main()) == ["a", "b"]
    assert order[:2] == ["a asks", "b asks"]  # b started while a waited


def test_reads_in_parallel_on_the_loop_run_together_and_leave_the_loop_free():
    from agents_core.store.table import in_parallel

    async def main():
        asked, ticked = asyncio.Event(), asyncio.Event()

        async def ticker():  # another task of the loop: runs only if the loop is not held
            await asked.wait()
            ticked.set()

        def first():  # waits for the second read to have run, then for the other task
            blocking.wait(asked.wait())
            blocking.wait(ticked.wait())
            return "first"

        def second():
            asked.set()
            return "second"

        task = asyncio.create_task(ticker())
        both = await asyncio.wait_for(blocking.run(in_parallel, first, second), timeout=10)
        await task
        return both

    assert asyncio.run(main()) == ["first", "second"]


def test_reads_in_parallel_on_the_loop_all_end_before_the_first_error_is_raised():
    from agents_core.store.table import in_parallel

    ended = []

    def fails(message, waits):
        def read():
            for _ in range(waits):
                blocking.wait(slept(None))
            ended.append(message)
            raise ValueError(message)

        return read

    def succeeds():
        blocking.wait(slept(None))
        ended.append("ok")
        return "ok"

    # The first in argument order is raised, though it fails last.
    with pytest.raises(ValueError, match="one"):
        asyncio.run(blocking.run(in_parallel, fails("one", 3), succeeds, fails("two", 0)))
    assert ended == ["two", "ok", "one"]


def test_reads_in_parallel_on_the_loop_see_the_callers_context():
    from agents_core.store.table import in_parallel

    def caller():
        TENANT.set("set by the caller")
        return in_parallel(TENANT.get, lambda: blocking.wait(slept(TENANT.get())))

    assert asyncio.run(blocking.run(caller)) == ["set by the caller"] * 2
