"""The Llama Stack reference server's session read, to compare with `bench/session_read.py` on
the same machine: the same session (110 turns, every tenth paused on a client tool and resumed)
built over HTTP, then `GET /v1/agents/{a}/session/{s}` timed.

The reference is not a dependency of this project; set it up once in its own virtualenv
(llama-stack 0.2.12 is the newest 0.2 release on PyPI here, the version llama-stack-client is
pinned to in the tests):

    python3.12 -m venv /tmp/lsref && /tmp/lsref/bin/pip install llama-stack==0.2.12 \\
        opentelemetry-exporter-otlp-proto-http opentelemetry-sdk faiss-cpu aiosqlite greenlet \\
        "mcp>=1.10,<2" openai
    .venv/bin/python bench/reference_session_read.py [--python /tmp/lsref/bin/python]

It starts the scripted model (tests/peers/openai_server.py) and the reference server with
`bench/reference_run.yaml` (remote::vllm inference pointed at the scripted model, the
meta-reference agents provider on SQLite), both in processes of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from peers import free_port, wait_for_port
from session_read import WEATHER, cpu_seconds, figures

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="/tmp/lsref/bin/python")
    parser.add_argument("--turns", type=int, default=110)
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--tools-every", type=int, default=10)
    args = parser.parse_args()
    model = subprocess.Popen(
        [sys.executable, "-m", "tests.peers.openai_server"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    port = free_port()
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryFile("w+") as log:
        env = {**os.environ, "VLLM_URL": model.stdout.readline().strip(), "SQLITE_STORE_DIR": data}
        server = subprocess.Popen(
            [
                args.python,
                "-m",
                "llama_stack.distribution.server.server",
                "--config",
                str(ROOT / "bench/reference_run.yaml"),
                "--port",
                str(port),
            ],
            cwd=data,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, server)
            run(args, f"http://127.0.0.1:{port}", env["VLLM_URL"], server.pid)
        except Exception:
            log.seek(0)
            print(log.read()[-4000:], file=sys.stderr)  # the reference's own account
            raise
        finally:
            server.terminate()
            model.terminate()


def last_turn(http: httpx.Client, url: str, body: dict) -> dict:
    """Run a turn streamed (the reference's way) and return the turn its last event carries."""
    turn = None
    with http.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if line.startswith("data: "):
                payload = json.loads(line[6:])["event"]["payload"]
                turn = payload.get("turn", turn)
    if turn is None:
        raise RuntimeError(f"no turn in the stream of {url}")
    return turn


def run(args: argparse.Namespace, base_url: str, model_url: str, pid: int) -> None:
    http = httpx.Client(base_url=base_url, timeout=120)
    model = httpx.Client(base_url=model_url)
    for _ in range(100):  # the port opens before the providers are ready
        if http.get("/v1/health").status_code == 200:
            break
        time.sleep(0.2)
    config = {
        "model": "bench",
        "instructions": "Be brief.",
        "client_tools": [WEATHER],
        "enable_session_persistence": True,
    }
    agent = http.post("/v1/agents", json={"agent_config": config}).json()["agent_id"]
    session_id = http.post(f"/v1/agents/{agent}/session", json={"session_name": "long"}).json()[
        "session_id"
    ]
    turn_url = f"/v1/agents/{agent}/session/{session_id}/turn"
    for n in range(args.turns):
        text = f"Question {n}: what is the weather like, and why does it matter today?"
        message = {"messages": [{"role": "user", "content": text}], "stream": True}
        if args.tools_every and n % args.tools_every == args.tools_every - 1:
            model.post("/_replies", json={"tool_calls": [["get_weather", '{"city": "Paris"}']]})
            turn = last_turn(http, turn_url, message)
            call = turn["output_message"]["tool_calls"][0]
            answer = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "18C"}
            model.post("/_replies", json={"text": f"It is 18C in Paris ({n})."})
            resume = {"tool_responses": [answer], "stream": True}
            last_turn(http, f"{turn_url}/{turn['turn_id']}/resume", resume)
        else:
            model.post("/_replies", json={"text": f"Answer {n}: mild and dry, which is good."})
            last_turn(http, turn_url, message)
    session_url = f"/v1/agents/{agent}/session/{session_id}"
    for _ in range(5):
        http.get(session_url).raise_for_status()
    timings = []
    cpu_before = cpu_seconds(pid)[1]
    for _ in range(args.reads):
        t0 = time.perf_counter()
        resp = http.get(session_url)
        timings.append(time.perf_counter() - t0)
        resp.raise_for_status()
    cpu = (cpu_seconds(pid)[1] - cpu_before) / args.reads
    print(
        f"reference GET session: {len(resp.json()['turns'])} turns, {len(resp.content):,} bytes,"
        f" {cpu * 1000:.1f} ms CPU of the server a read"
    )
    print(figures(f"  over HTTP ({args.reads} reads)", timings))


if __name__ == "__main__":
    main()
