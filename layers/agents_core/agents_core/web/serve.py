"""uvicorn for the functions' run.sh and `make run`, with a main loop that wakes once a second.

uvicorn's own main loop wakes ten times a second to look for a request to stop. Each wake-up
costs about a quarter of a millisecond of CPU here (bench/cpu_profile.py prints a server's idle
CPU), so during a 10-s model call a Lambda spends some 25 ms of CPU on them, three times the
turn's own work, out of the small share 216 MB buys. This server wakes once a second (the
resolution of the Date header it keeps fresh) and at once on SIGTERM or SIGINT.

run.sh and `make run` serve on uvloop (`--loop uvloop`, in the layer): 5-9% fewer instructions
a streamed run than asyncio's own loop (docs/benchmarks.md). uvicorn's proxy headers are off: its
middleware would take the client's address from X-Forwarded-For, which nothing here reads, and
every request, and every resumption of its task, would pass through it.

    python -m agents_core.web.serve app:app --host 127.0.0.1 --port 8080 [uvicorn options]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from types import FrameType

import uvicorn

#: uvicorn's `on_tick` refreshes the Date header when its counter is a multiple of this.
_TICKS_PER_SECOND = 10


class Server(uvicorn.Server):
    """A uvicorn server whose main loop sleeps `tick` seconds between its checks, or until a
    signal to stop (`handle_exit`) wakes it. Setting `should_exit` from another thread is seen
    at the next tick."""

    tick = 1.0

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        try:
            counter = 0
            should_exit = await self.on_tick(counter)
            while not should_exit:
                counter = (counter + _TICKS_PER_SECOND) % 864000  # each tick refreshes the date
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.tick):
                        await self._wake.wait()
                should_exit = await self.on_tick(counter)
        finally:
            self._loop = None  # a later signal has no loop to wake

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's handler (signal.signal's, between two bytecodes of whatever runs): the
        loop is woken through its thread-safe door, not touched from here."""
        super().handle_exit(sig, frame)
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)


def main(argv: list[str] | None = None) -> None:
    """The options run.sh gives uvicorn's command line, to the same effect."""
    parser = argparse.ArgumentParser(prog="python -m agents_core.web.serve")
    parser.add_argument("app", help="module:attribute of the ASGI app, from the working folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--http", default="auto", choices=["auto", "h11", "httptools"])
    parser.add_argument("--loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    parser.add_argument("--no-access-log", dest="access_log", action="store_false")
    parser.add_argument("--timeout-keep-alive", type=int, default=5)
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, ".")  # as uvicorn's --app-dir default
    config = uvicorn.Config(
        args.app,
        host=args.host,
        port=args.port,
        http=args.http,
        loop=args.loop,
        access_log=args.access_log,
        timeout_keep_alive=args.timeout_keep_alive,
        log_level=args.log_level,
        proxy_headers=False,
    )
    config.load()  # as uvicorn's command line: the app imported before the loop starts
    server = Server(config)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: shut down, then a plain exit
        server.run()
    if not server.started:
        sys.exit(3)  # uvicorn's exit status for a server that failed to start


if __name__ == "__main__":
    main()
