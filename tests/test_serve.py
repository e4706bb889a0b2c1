"""The server run.sh and `make run` start (agents_core.web.serve): uvicorn whose main loop wakes
once a second, and at once on a signal to stop."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import uvicorn
from agents_core.web.serve import Server

LAYER = Path(__file__).resolve().parents[1] / "layers" / "agents_core"


async def hello(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


def counting(kind: type[uvicorn.Server]) -> uvicorn.Server:
    """A server of `kind` on a free port that counts its main loop's checks (`ticks`)."""

    class Counting(kind):
        ticks = 0
        counters: list[int] = []

        async def on_tick(self, counter: int) -> bool:
            type(self).ticks += 1
            type(self).counters.append(counter)
            return await super().on_tick(counter)

    return Counting(uvicorn.Config(hello, port=0, log_level="warning", lifespan="off"))


def serving(server: uvicorn.Server) -> threading.Thread:
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(100):
        if server.started:
            return thread
        time.sleep(0.05)
    raise AssertionError("the server did not start")


def test_the_server_checks_for_a_stop_ten_times_less_often_than_uvicorn():
    ours, theirs = counting(Server), counting(uvicorn.Server)
    threads = [serving(ours), serving(theirs)]
    type(ours).ticks = type(theirs).ticks = 0  # counted from both running
    time.sleep(2)  # both idle through the same window
    ticks = type(ours).ticks, type(theirs).ticks
    for server in (ours, theirs):
        server.should_exit = True  # seen at its next check
    for thread in threads:
        thread.join(timeout=10)
    assert ticks[0] * 5 <= ticks[1], ticks
    assert ticks[0] <= 2 / Server.tick + 2, ticks
    # uvicorn refreshes its Date header at the checks whose counter is a multiple of ten: each
    # of ours is one.
    assert type(ours).counters and all(c % 10 == 0 for c in type(ours).counters)


def test_a_signal_to_stop_wakes_the_server_however_long_its_tick(monkeypatch):
    sse = sys.modules.get("sse_starlette.sse")
    if sse is not None:  # its patch of uvicorn's handler ends every SSE stream of the process
        monkeypatch.setattr(sse.AppStatus, "should_exit", False)  # as it was, after the test
    server = counting(Server)
    server.tick = 3600  # only the signal's wake-up can end the wait
    thread = serving(server)
    server.handle_exit(signal.SIGTERM, None)  # as signal.signal calls it
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert type(server).ticks <= 2  # the first check, and the one the signal woke (if any)


def test_run_sh_s_command_serves_the_app_with_a_date_header_and_shuts_down_on_sigterm(tmp_path):
    (tmp_path / "app.py").write_text(
        "async def app(scope, receive, send):\n"
        "    await send({'type': 'http.response.start', 'status': 200, 'headers': []})\n"
        "    await send({'type': 'http.response.body', 'body': b'served'})\n"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Its tick an hour long: only the signal's wake-up can end it within the test.
    serve = "import agents_core.web.serve as s; s.Server.tick = 3600; s.main()"
    command = [sys.executable, "-c", serve, "app:app", "--port", str(port)]
    command += ["--http", "httptools", "--no-access-log", "--timeout-keep-alive", "300"]
    proc = subprocess.Popen(
        command, cwd=tmp_path, env={"PYTHONPATH": str(LAYER)}, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        else:
            raise AssertionError("nothing answered")
        assert answer.text == "served"
        assert parsedate_to_datetime(answer.headers["date"]).year >= 2025
        proc.send_signal(signal.SIGTERM)
        # Shut down cleanly, then ended by the signal again, as uvicorn does for its caller.
        assert proc.wait(timeout=30) == -signal.SIGTERM
        assert "Finished server process" in proc.stderr.read()
    finally:
        proc.kill()
