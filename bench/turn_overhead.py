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
import statistics
import threading
import time
from collections import Counter
from pathlib import Path

from peers import free_port, moto_and_model, use_in_process

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()

    with moto_and_model() as (aws_endpoint, model_url):
        use_in_process(aws_endpoint, model_url)
        run(args, ModelJournal(model_url))


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

    def reply(self, **reply: object) -> None:
        """Queue the model's next reply (see tests/peers/openai_server.py)."""
        import httpx

        httpx.post(f"{self.url}/_replies", json=reply).raise_for_status()


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
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
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

    def new_agent(**extra: object) -> str:
        config = {
            "model": "bench",
            "instructions": "Be brief.",
            "enable_session_persistence": True,
            **extra,
        }
        return http.post(base, json={"agent_config": config}).json()["agent_id"]

    def new_session(agent: str | None = None) -> tuple[str, str]:
        agent = agent or new_agent()
        session = http.post(f"{base}/{agent}/session", json={"session_name": "b"}).json()
        return agent, session["session_id"]

    def timed_stream(url: str, body: dict, marker: str) -> tuple[float, float, float]:
        """(seconds, start, end) of a streamed POST, from the request to the first line holding
        `marker`. The rest is read untimed: the server finishes its work (a lifecycle event)
        before the next request, as a Lambda invocation would."""
        started = ended = time.perf_counter()
        with http.stream("POST", url, json=body) as resp:
            for line in resp.iter_lines():
                if ended == started and marker in line:
                    ended = time.perf_counter()
        if ended == started:
            raise RuntimeError(f"{url}: the stream had no {marker}")
        return ended - started, started, ended

    def turn(agent: str, session: str, text: str) -> tuple[float, float, float]:
        body = {"messages": [{"role": "user", "content": text}], "stream": True}
        return timed_stream(f"{base}/{agent}/session/{session}/turn", body, '"turn_complete"')

    table = services.agents._t

    def empty_table() -> None:
        """Each kind of run starts on an empty table: moto's transactions and queries slow down
        as the whole table grows (DynamoDB's do not), so a run must not pay for earlier ones."""
        keys = [
            {"PK": item["PK"], "SK": item["SK"]}
            for page in table.client.get_paginator("scan").paginate(
                TableName=table.name, ProjectionExpression="PK, SK"
            )
            for item in page["Items"]
        ]
        table.delete_all(keys)

    for _ in range(5):  # warm up connections, imports, moto
        turn(*new_session(), "warm up")
    model_ms = (
        statistics.median(
            model_time([{"role": "user", "content": "hello"}]) for _ in range(args.sessions)
        )
        * 1000
    )

    empty_table()
    agent = new_agent()
    first = [turn(*new_session(agent), f"question {n}") for n in range(args.sessions)]
    empty_table()
    agent, session = new_session()
    late = [turn(agent, session, f"question {n}") for n in range(1, args.turns + 1)][-10:]
    history = model.last_request["messages"]
    model_late_ms = statistics.median(model_time(history) for _ in range(10)) * 1000
    empty_table()
    first_of_agent = [turn(*new_session(), f"question {n}") for n in range(args.sessions)]

    def response(text: str) -> tuple[float, float, float]:
        body = {"model": "bench", "input": text, "stream": True}
        url = f"http://127.0.0.1:{port}/v1/openai/v1/responses"
        return timed_stream(url, body, "event: response.completed")

    empty_table()
    responses = [response(f"question {n}") for n in range(args.sessions)]

    def resume(agent: str, session: str) -> tuple[float, float, float]:
        """(seconds, start, end) of a streamed resume: a turn pauses on a client tool, untimed,
        then its resume with the tool's result runs to `turn_complete`."""
        model.reply(tool_calls=[["get_weather", '{"city": "Paris"}']])
        body = {"messages": [{"role": "user", "content": "weather?"}]}
        paused = http.post(f"{base}/{agent}/session/{session}/turn", json=body).json()
        call = paused["output_message"]["tool_calls"][0]
        result = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "sunny"}
        url = f"{base}/{agent}/session/{session}/turn/{paused['turn_id']}/resume"
        body = {"tool_responses": [result], "stream": True}
        return timed_stream(url, body, '"turn_complete"')

    weather = {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": [
            {"name": "city", "parameter_type": "string", "description": "City", "required": True}
        ],
    }
    empty_table()
    tool_agent = new_agent(client_tools=[weather])
    resumes = [resume(*new_session(tool_agent)) for _ in range(args.sessions)]
    model_resume_ms = (
        statistics.median(model_time(model.last_request["messages"]) for _ in range(10)) * 1000
    )
    server.should_exit = True
    serving.join(timeout=15)  # its queue pollers stop before the moto server does
    arrivals = model.arrivals

    def row(label: str, runs: list[tuple[float, float, float]], model_ms: float) -> float:
        """Print one line of figures for `runs`; return the median added milliseconds."""
        nonlocal most_trips
        added = statistics.median(r[0] for r in runs) * 1000 - model_ms
        per_run = [dynamo.between(started, ended) for _, started, ended in runs]
        kinds = Counter(c[0] for c in per_run[-1])
        took = {
            kind: statistics.median(
                sum(c[2] - c[1] for c in calls if c[0] == kind) * 1000
                for calls in per_run
                if any(c[0] == kind for c in calls)
            )
            for kind in kinds
        }
        trips = max(
            round_trips([c for c in calls if c[2] <= min(a for a in arrivals if a >= started)])
            for calls, (_, started, _) in zip(per_run, runs, strict=True)
        )
        detail = ", ".join(f"{k} {n} ({took[k]:.1f})" for k, n in sorted(kinds.items()))
        print(f"  {label:<38} {added:5.1f} ms   {trips:11d}   {sum(kinds.values())}: {detail}")
        most_trips = max(most_trips, trips)
        return added

    print("turn overhead: what a streaming turn adds to the model's own time, over HTTP against")
    print("the local server (medians); DynamoDB is a moto server, the model answers at once, and")
    print("each kind of run starts on an empty table")
    print(
        f"  model's own time: {model_ms:.1f} ms for 1 message, {model_late_ms:.1f} ms for {len(history)}"
    )
    print(
        "  (round trips: DynamoDB round trips before the first model call, the most of any run;\n"
        "   requests: DynamoDB requests per run, with the median ms each took in moto)"
    )
    print(f"  {'':<38} {'added':>8}   round trips   requests")
    most_trips = 0
    turn1 = row(f"turn 1 ({args.sessions} sessions of one agent)", first, model_ms)
    turn_n = row(f"turn {args.turns} (last 10 turns of one)", late, model_late_ms)
    row("turn 1 of a new agent's session", first_of_agent, model_ms)
    added_response = row("a streaming Responses API call", responses, model_ms)
    row("a resume with a client tool's result", resumes, model_resume_ms)

    ok = lambda good: "ok" if good else "OVER GOAL"  # noqa: E731
    print("goals")
    print(f"  added at turn 1 <= {GOAL_ADDED_MS} ms: {turn1:.1f} ms, {ok(turn1 <= GOAL_ADDED_MS)}")
    print(
        f"  turn {args.turns} <= {GOAL_RATIO}x turn 1: {turn_n / turn1:.2f}x, {ok(turn_n <= GOAL_RATIO * turn1)}"
    )
    print(
        f"  DynamoDB round trips before the first model call <= {GOAL_ROUND_TRIPS}: {most_trips},"
        f" {ok(most_trips <= GOAL_ROUND_TRIPS)}"
    )
    print(
        f"  a streaming response adds <= {GOAL_ADDED_MS} ms: {added_response:.1f} ms,"
        f" {ok(added_response <= GOAL_ADDED_MS)}"
    )


if __name__ == "__main__":
    main()
