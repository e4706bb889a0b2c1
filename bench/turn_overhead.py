"""Turn overhead: the latency a streaming turn (and a streaming Responses API response) adds over
the model's own time, and the DynamoDB requests a turn makes.

The local server (the same app `make run` serves) runs in this process with uvicorn, over a
moto server in a process of its own; the model is a local OpenAI-compatible server that answers at once. The model's own time
is a direct streaming call to it over HTTP; a turn's time runs from the request to its
`turn_complete` event, over HTTP. Turn 1 is measured on fresh sessions of one agent (and, apart,
on the first session of new agents), turn 100 as the last turns of one 100-turn session.

    .venv/bin/python bench/turn_overhead.py [--sessions 30] [--turns 100]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


GOAL_ADDED_MS = 25
GOAL_RATIO = 1.3
GOAL_ROUND_TRIPS = 3


class DynamoCalls:
    """Every DynamoDB call the server's client makes, with its start and end."""

    def __init__(self, client) -> None:
        self.calls: list[tuple[str, float, float]] = []
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _before(self, context, **_):
        context["bench_started"] = time.perf_counter()

    def _after(self, context, model, **_):
        self.calls.append((model.name, context["bench_started"], time.perf_counter()))

    def between(self, start: float, end: float) -> list[tuple[str, float, float]]:
        return sorted(c for c in self.calls if start <= c[1] <= end)


def round_trips(calls: list[tuple[str, float, float]]) -> int:
    """Calls that overlap in time (made in parallel) count as one round trip."""
    trips, busy_until = 0, -1.0
    for _, started, ended in sorted(calls, key=lambda c: c[1]):
        if started >= busy_until:
            trips += 1
        busy_until = max(busy_until, ended)
    return trips


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()

    # DynamoDB (a moto server) and the model run in processes of their own, as AWS and a model
    # server would: they do not share this process's interpreter lock with the API server.
    moto_port = free_port()
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-p", str(moto_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    model = subprocess.Popen(
        [sys.executable, "-m", "tests.peers.openai_server"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    os.environ.update(
        OPENAI_BASE_URL=model.stdout.readline().strip(),
        POWERTOOLS_METRICS_DISABLED="true",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{moto_port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", moto_port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    try:
        run(args, ModelJournal(os.environ["OPENAI_BASE_URL"]))
    finally:
        moto.terminate()
        model.terminate()


class ModelJournal:
    """What the model process recorded: when requests arrived, and the last one."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _read(self) -> dict:
        import httpx

        return httpx.get(f"{self.url}/_journal").json()

    @property
    def arrivals(self) -> list[float]:
        return self._read()["arrivals"]

    @property
    def last_request(self) -> dict:
        return self._read()["requests"][-1]


def run(args: argparse.Namespace, model: ModelJournal) -> None:
    import httpx
    import uvicorn

    spec = importlib.util.spec_from_file_location(
        "local_server", ROOT / "functions/local/server.py"
    )
    local = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(local)
    app, services, _ = local.build_local_app()
    dynamo = DynamoCalls(services.agents._t.client)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}/v1/agents"
    http = httpx.Client(timeout=30)

    def model_time(messages: list[dict]) -> float:
        """The model's own time: one streamed chat completion over plain HTTP, from the
        request to the end of the stream (no SDK work on either side of it)."""
        body = {"model": "bench", "messages": messages, "stream": True}
        started = time.perf_counter()
        with http.stream("POST", f"{model.url}/chat/completions", json=body) as resp:
            for line in resp.iter_lines():
                if line == "data: [DONE]":
                    break
        return time.perf_counter() - started

    def new_agent() -> str:
        config = {
            "model": "bench",
            "instructions": "Be brief.",
            "enable_session_persistence": True,
        }
        return http.post(base, json={"agent_config": config}).json()["agent_id"]

    def new_session(agent: str | None = None) -> tuple[str, str]:
        agent = agent or new_agent()
        session = http.post(f"{base}/{agent}/session", json={"session_name": "b"}).json()
        return agent, session["session_id"]

    def turn(agent: str, session: str, text: str) -> tuple[float, float, float]:
        """(seconds, start, end) of one streamed turn."""
        body = {"messages": [{"role": "user", "content": text}], "stream": True}
        started = time.perf_counter()
        with http.stream("POST", f"{base}/{agent}/session/{session}/turn", json=body) as resp:
            for line in resp.iter_lines():
                if '"turn_complete"' in line:
                    break
            else:
                raise RuntimeError("turn did not complete")
        ended = time.perf_counter()
        return ended - started, started, ended

    def dynamo_profile(started: float, ended: float) -> tuple[Counter, int, dict[str, float]]:
        calls = dynamo.between(started, ended)
        first_model_call = min(a for a in model.arrivals if a >= started)
        before = [c for c in calls if c[2] <= first_model_call]
        took = {c[0]: (c[2] - c[1]) * 1000 for c in calls}
        return Counter(c[0] for c in calls), round_trips(before), took

    for _ in range(5):  # warm up connections, imports, moto
        turn(*new_session(), "warm up")
    model_ms = (
        statistics.median(
            model_time([{"role": "user", "content": "hello"}]) for _ in range(args.sessions)
        )
        * 1000
    )

    first = []
    agent = new_agent()
    for n in range(args.sessions):
        seconds, started, ended = turn(*new_session(agent), f"question {n}")
        first.append(seconds)
    kinds_1, trips_1, took_1 = dynamo_profile(started, ended)

    agent, session = new_session()
    late = []
    for n in range(1, args.turns + 1):
        seconds, started, ended = turn(agent, session, f"question {n}")
        if n > args.turns - 10:
            late.append(seconds)
    kinds_n, trips_n, took_n = dynamo_profile(started, ended)
    history = model.last_request["messages"]
    model_late_ms = statistics.median(model_time(history) for _ in range(10)) * 1000
    first_of_agent = [turn(*new_session(), f"question {n}")[0] for n in range(args.sessions)]

    def response(text: str) -> float:
        """Seconds of one streamed response, from the request to `response.completed`."""
        body = {"model": "bench", "input": text, "stream": True}
        started = time.perf_counter()
        url = f"http://127.0.0.1:{port}/v1/openai/v1/responses"
        with http.stream("POST", url, json=body) as resp:
            for line in resp.iter_lines():
                if line == "event: response.completed":
                    break
            else:
                raise RuntimeError("response did not complete")
        return time.perf_counter() - started

    responses = statistics.median(response(f"question {n}") for n in range(args.sessions))
    started = time.perf_counter()
    response("profiled")
    response_kinds = Counter(c[0] for c in dynamo.between(started, time.perf_counter()))
    server.should_exit = True

    turn1 = statistics.median(first) * 1000 - model_ms
    turn1_new_agent = statistics.median(first_of_agent) * 1000 - model_ms
    turn_n = statistics.median(late) * 1000 - model_late_ms
    ok = lambda good: "ok" if good else "OVER GOAL"  # noqa: E731
    print("turn overhead: streaming turn latency minus the model's own time (medians)")
    print(
        "  DynamoDB is moto: each call below shows what it took there (moto answers parallel calls"
    )
    print(
        "  one at a time, and its Query and TransactWriteItems slow down as partition and table grow)"
    )
    print(f"  model's own time, 1 message           {model_ms:7.1f} ms")
    print(f"  model's own time, {len(history)} messages       {model_late_ms:7.1f} ms")
    print(
        f"  added at turn 1 ({args.sessions} sessions)          {turn1:7.1f} ms   goal <= {GOAL_ADDED_MS} ms: {ok(turn1 <= GOAL_ADDED_MS)}"
    )
    print(
        f"  added at turn 1 of a new agent's session {turn1_new_agent:5.1f} ms   (its config is not cached yet: one more read)"
    )
    print(
        f"  added at turn {args.turns} (last 10 turns)       {turn_n:7.1f} ms   {turn_n / turn1:4.2f}x turn 1, goal <= {GOAL_RATIO}x: {ok(turn_n <= GOAL_RATIO * turn1)}"
    )
    added_response = responses * 1000 - model_ms
    print(
        f"  added by a streaming response           {added_response:7.1f} ms   goal <= {GOAL_ADDED_MS} ms:"
        f" {ok(added_response <= GOAL_ADDED_MS)}"
    )
    detail = ", ".join(f"{k} {v}" for k, v in sorted(response_kinds.items()))
    print(f"  DynamoDB requests, response  {sum(response_kinds.values()):3d} ({detail})")
    runs = (("turn 1", kinds_1, trips_1, took_1), (f"turn {args.turns}", kinds_n, trips_n, took_n))
    for label, kinds, trips, took in runs:
        detail = ", ".join(f"{k} {v} ({took[k]:.1f} ms)" for k, v in sorted(kinds.items()))
        print(f"  DynamoDB requests, {label:<9} {sum(kinds.values()):3d} ({detail})")
        print(
            f"    round trips completed before the first model call: {trips}   goal <= {GOAL_ROUND_TRIPS}: {ok(trips <= GOAL_ROUND_TRIPS)}"
        )


if __name__ == "__main__":
    main()
