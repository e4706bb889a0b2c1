"""Session reads: how long `GET /v1/agents/{a}/session/{s}` takes for a long session, how large
its answer is, and how many DynamoDB requests it makes; and the size of a big turn read back.

The local server (the same app `make run` serves) runs in this process with uvicorn, over a
moto server in a process of its own; the model is the local OpenAI-compatible server. A session
of `--turns` turns is built over HTTP (every `--tools-every`th turn pauses on a client tool and
is resumed, so such turns have step items of their own), then read `--reads` times over HTTP.
Reads are timed cold (a container that has not read the session: every turn is read from the
table) and warm (the store remembers the session's finished turns and asks only for later ones).
The cold read is also timed in process (the store's read alone, then the answer's
serialization), to show where the time goes: waiting for the table, botocore's parsing, and this
process's CPU. The CPU moto spends is printed apart: it is moto's own work (py-spy shows it
serializing and projecting items), which DynamoDB does on its own machines in a few ms.

    .venv/bin/python bench/session_read.py [--turns 110] [--reads 50] [--big-mb 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import threading
import time
from pathlib import Path

from peers import free_port, moto_and_model, use_in_process

ROOT = Path(__file__).resolve().parent.parent
WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": [
        {"name": "city", "parameter_type": "string", "description": "City", "required": True}
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=110)
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--tools-every", type=int, default=10)
    parser.add_argument("--big-mb", type=float, default=5.0, help="0: skip the big turn")
    parser.add_argument("--profile", action="store_true", help="profile the in-process reads")
    args = parser.parse_args()
    with moto_and_model() as (aws_endpoint, model_url):
        use_in_process(aws_endpoint, model_url)
        run(args, model_url, moto_pid(aws_endpoint))


def moto_pid(endpoint: str) -> int | None:
    """The moto server's process (it listens on the endpoint's port), to read its CPU time."""
    port = endpoint.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"serial_moto" in part for part in cmdline) and port.encode() in cmdline:
            return int(entry.name)
    return None


def cpu_seconds(pid: int | None) -> tuple[float, float]:
    """CPU time (user + system) of this process (the server and its client) and of `pid` (moto,
    standing in for DynamoDB): unlike wall time, what a read costs does not change with what
    else the machine runs, and moto's share is what DynamoDB would do on its own machines."""
    own = os.times()
    other = 0.0
    if pid is not None:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        other = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own.user + own.system, other


def figures(label: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return f"{label:<44} median {statistics.median(ms):7.2f} ms   p90 {p90:7.2f} ms"


def run(args: argparse.Namespace, model_url: str, moto: int | None) -> None:
    import httpx
    import uvicorn

    spec = importlib.util.spec_from_file_location(
        "local_server", ROOT / "functions/local/server.py"
    )
    local = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(local)
    app, services, _ = local.build_local_app()
    calls: list[str] = []
    client = services.agents._t.client
    client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}/v1/agents"
    http = httpx.Client(timeout=120)
    model = httpx.Client(base_url=model_url)

    config = {
        "model": "bench",
        "instructions": "Be brief.",
        "client_tools": [WEATHER],
        "enable_session_persistence": True,
    }
    agent = http.post(base, json={"agent_config": config}).json()["agent_id"]
    session = http.post(f"{base}/{agent}/session", json={"session_name": "long"}).json()
    session_id = session["session_id"]
    turn_url = f"{base}/{agent}/session/{session_id}/turn"
    started = time.perf_counter()
    for n in range(args.turns):
        text = f"Question {n}: what is the weather like, and why does it matter today?"
        if args.tools_every and n % args.tools_every == args.tools_every - 1:
            model.post("/_replies", json={"tool_calls": [["get_weather", '{"city": "Paris"}']]})
            paused = http.post(turn_url, json={"messages": [{"role": "user", "content": text}]})
            turn = paused.json()
            call = turn["output_message"]["tool_calls"][0]
            answer = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "18C"}
            model.post("/_replies", json={"text": f"It is 18C in Paris ({n})."})
            resumed = http.post(
                f"{turn_url}/{turn['turn_id']}/resume", json={"tool_responses": [answer]}
            )
            resumed.raise_for_status()
        else:
            model.post("/_replies", json={"text": f"Answer {n}: mild and dry, which is good."})
            http.post(
                turn_url, json={"messages": [{"role": "user", "content": text}]}
            ).raise_for_status()
    print(f"built a session of {args.turns} turns in {time.perf_counter() - started:.1f} s")

    session_url = f"{base}/{agent}/session/{session_id}"
    for _ in range(5):  # warm up
        http.get(session_url).raise_for_status()

    def forget() -> None:
        """A container that has not read the session yet (where the store remembers it)."""
        if hasattr(services.agents, "_finished_turns"):
            services.agents._finished_turns.forget(f"T#default#SESSION#{session_id}")

    results = {}
    for label, cold in (("cold", True), ("warm", False)):
        timings, sizes = [], set()
        calls.clear()
        cpu_before = cpu_seconds(moto)
        for _ in range(args.reads):
            if cold:
                forget()
            t0 = time.perf_counter()
            resp = http.get(session_url)
            timings.append(time.perf_counter() - t0)
            resp.raise_for_status()
            sizes.add(len(resp.content))
        cpu_after = cpu_seconds(moto)
        cpu = tuple((a - b) / args.reads for a, b in zip(cpu_after, cpu_before, strict=True))
        turns = len(resp.json()["turns"])
        results[label] = (timings, len(calls) / args.reads, max(sizes), turns, cpu)

    from agents_core.web.common import json_response

    store_only, serialize = [], []
    waited, parsed = [], []
    phases = threading.local()

    def mark(name: str):
        def record(**_) -> None:
            now = time.perf_counter()
            if name == "parse":
                waited.append(now - phases.sent)
            elif name == "done" and hasattr(phases, "parsing"):
                parsed.append(now - phases.parsing)
            setattr(phases, {"send": "sent", "parse": "parsing", "done": "done"}[name], now)

        return record

    for event, name in (("before-send", "send"), ("before-parse", "parse"), ("after-call", "done")):
        client.meta.events.register(f"{event}.dynamodb", mark(name))
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu_in_process = time.process_time()
    for _ in range(args.reads):
        forget()
        t0 = time.perf_counter()
        result = services.agents.get_session("default", agent, session_id)
        t1 = time.perf_counter()
        json_response(result)
        t2 = time.perf_counter()
        store_only.append(t1 - t0)
        serialize.append(t2 - t1)
    cpu_in_process = (time.process_time() - cpu_in_process) / args.reads
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)

    for label, (timings, requests, size, turns, cpu) in results.items():
        print(
            f"GET session, {label}: {turns} turns, {size:,} bytes,"
            f" {requests:.1f} DynamoDB requests; CPU a read: {cpu[0] * 1000:.1f} ms server and"
            f" client, {cpu[1] * 1000:.1f} ms moto"
        )
        print(figures(f"  over HTTP ({args.reads} reads)", timings))
    print(figures("in process, cold: the store's read", store_only))
    per_read = len(waited) / args.reads
    print(
        f"  of which, summed over its {per_read:.1f} requests (some run side by side): waiting"
        f" for the table (moto here) {sum(waited) / args.reads * 1000:.2f} ms, botocore parsing"
        f" the answers {sum(parsed) / args.reads * 1000:.2f} ms a read; CPU of this process"
        f" (the store's read and the serialization, no HTTP) {cpu_in_process * 1000:.2f} ms a read"
    )
    print(figures("in process: the answer's serialization", serialize))

    if args.big_mb:
        from agents_core.store.items import item_size

        text = "x" * int(args.big_mb * 1024 * 1024)
        for label, answer in (("a short answer", "Noted."), ("the model echoing it", text)):
            created = http.post(f"{base}/{agent}/session", json={"session_name": "big"}).json()
            big_id = created["session_id"]
            big_url = f"{base}/{agent}/session/{big_id}"
            model.post("/_replies", json={"text": answer, "chunks": 1})
            turn = http.post(
                f"{big_url}/turn", json={"messages": [{"role": "user", "content": text}]}
            )
            turn.raise_for_status()
            got_turn = http.get(f"{big_url}/turn/{turn.json()['turn_id']}")
            got_session = http.get(big_url)
            pages = client.get_paginator("query").paginate(
                TableName=services.agents._t.name,
                KeyConditionExpression="PK = :pk",
                ExpressionAttributeValues={":pk": {"S": f"T#default#SESSION#{big_id}"}},
            )
            items = [i for page in pages for i in page["Items"]]
            print(
                f"a {args.big_mb:g} MB user message, {label}: GET turn {got_turn.status_code}"
                f" {len(got_turn.content):,} bytes; GET session {got_session.status_code}"
                f" {len(got_session.content):,} bytes; stored {len(items)} items,"
                f" {sum(item_size(i) for i in items):,} bytes,"
                f" largest {max(item_size(i) for i in items):,}"
            )
    server.should_exit = True


if __name__ == "__main__":
    main()
