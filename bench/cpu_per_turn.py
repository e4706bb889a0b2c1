"""CPU per streamed turn, per streamed response and per resume of the `make run` server
(functions/local/server.py), with what its in-process queue pollers spend taken apart.

The server runs in a process of its own, AWS_ENDPOINT_URL naming a moto server and
OPENAI_BASE_URL the scripted model (it answers at once), both in processes of their own
(peers.py). Each figure is the server process's CPU over N runs driven over one kept-alive
connection, divided by N: utime + stime from /proc/<pid>/stat, and, finer, the sum of its
threads' on-CPU time from schedstat. The runs: N streamed turns of one session (its history
grows), N streamed responses (each on its own), N resumes of turns paused on a client tool (the
pausing turn is not counted).

Under `make run` three SQS pollers (the resume, background and ingestion queues, a one-second
long poll each) spend CPU in the same process, busy or not; in Lambda there are none. Their rate
is measured with the server idle, before and after the runs; "pollers" is that rate times the
wall time each kind of run was measured over, and "own" what is left: the run's own CPU,
comparable with bench/cpu_profile.py's figures for the functions as run.sh serves them (no
pollers there).

    .venv/bin/python bench/cpu_per_turn.py [--runs 40] [--idle 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cpu_profile import Meter, cpu_seconds
from lambda_share import CLIENT_TOOL, Runs
from peers import free_port, moto_and_model, use_in_process, wait_for_port

ROOT = Path(__file__).resolve().parent.parent


class WallMeter(Meter):
    """A Meter that also sums the wall time it measured over: the pollers ran all along."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.wall = 0.0

    @contextmanager
    def measure(self):
        with super().measure():
            start = time.perf_counter()
            yield
            self.wall += time.perf_counter() - start


@contextmanager
def local_server(env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """`make run`'s server in a process of its own: (its base URL, its pid)."""
    port = free_port()
    server = [sys.executable, str(ROOT / "functions" / "local" / "server.py")]
    env = {**env, "PORT": str(port)}
    with subprocess.Popen(server, env=env, stdout=subprocess.DEVNULL) as proc:  # waits on exit
        try:
            wait_for_port(port, proc)
            yield f"http://127.0.0.1:{port}", proc.pid
        finally:
            proc.terminate()


def idle_rate(pid: int, seconds: float) -> tuple[float, float]:
    """CPU seconds per second (utime+stime, schedstat) of the idle server: its pollers'."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    after = cpu_seconds(pid)
    return (after[0] - before[0]) / seconds, (after[1] - before[1]) / seconds


def main() -> None:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs of each kind")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds idle, before and after")
    args = parser.parse_args()
    n = args.runs
    with moto_and_model() as (aws_endpoint, model_url):
        use_in_process(aws_endpoint, model_url)
        with local_server(dict(os.environ)) as (url, pid):
            http = httpx.Client(timeout=60)
            run = Runs(
                http, model_url, dict.fromkeys(("agents", "turns", "responses", "resume"), url)
            )
            warm, tooled = run.session(), run.session(client_tools=[CLIENT_TOOL])
            for i in range(5):  # the first requests build clients, caches, connections
                run.turn(warm, f"warm {i}")
                run.response(f"warm {i}")
                run.resume(tooled, run.paused(tooled))
            idle = [idle_rate(pid, args.idle)]
            meters = {kind: WallMeter(pid) for kind in ("streamed turn", "streamed response")}
            session = run.session()
            for i in range(n):
                with meters["streamed turn"].measure():
                    run.turn(session, f"question {i}")
            for i in range(n):
                with meters["streamed response"].measure():
                    run.response(f"question {i}")
            meters["resume"] = WallMeter(pid)
            tooled = run.session(client_tools=[CLIENT_TOOL])
            for _ in range(n):
                waiting = run.paused(tooled)
                with meters["resume"].measure():
                    run.resume(tooled, waiting)
            idle.append(idle_rate(pid, args.idle))

    rate = [sum(r[k] for r in idle) / len(idle) for k in (0, 1)]
    print(
        f"CPU of the `make run` server per run, ms over {n} runs each (utime+stime / threads'"
        " schedstat)"
    )
    print(
        f"  the pollers, idle: {rate[0] * 1000:.1f} / {rate[1] * 1000:.1f} ms of CPU a second"
        f" (before {idle[0][1] * 1000:.1f}, after {idle[1][1] * 1000:.1f} by schedstat)"
    )
    print(f"  {'':<18}{'server':>16}{'pollers':>16}{'own':>16}{'wall':>9}")
    for kind, m in meters.items():
        total = (m.ticks / n * 1000, m.sched / n * 1000)
        pollers = tuple(r * m.wall / n * 1000 for r in rate)
        own = tuple(t - p for t, p in zip(total, pollers, strict=True))
        cells = "".join(f"{a:>7.2f} / {b:<6.2f}" for a, b in (total, pollers, own))
        print(f"  {kind:<18}{cells}{m.wall / n * 1000:>7.1f} ms")


if __name__ == "__main__":
    main()
