"""Stream events: what recording a streamed response's events (so a client can rejoin it) adds to
the response, the DynamoDB writes it makes per second of streaming, and how far behind the live
run a follower (`GET /v1/openai/v1/responses/{id}?stream=true`) is.

The local server (the app `make run` serves) runs in this process with uvicorn, over a moto
server in a process of its own; the model is the scripted OpenAI-compatible server, pacing its
deltas as a model does. Runs with and without the recorder alternate on the same server.

    .venv/bin/python bench/stream_events.py [--runs 10] [--deltas 200] [--pace 0.01]
        [--first-token 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import threading
import time

from peers import free_port, moto_and_model, use_in_process
from turn_overhead import ROOT, DynamoCalls, ModelJournal

GOAL_ADDED_MS = 5
GOAL_WRITES_PER_SECOND = 5
GOAL_LAG_MS = 300


class NotRecorded:
    """`services.streams` for the runs without a recorder: the route then records nothing."""

    def __init__(self, real) -> None:
        self.real = real

    def recorder(self, tenant, stream):
        return None

    def __getattr__(self, name):
        return getattr(self.real, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--pace", type=float, default=0.01, help="seconds between deltas")
    parser.add_argument(
        "--first-token",
        type=float,
        default=0.2,
        help="seconds the model takes to its first delta, in the runs timed with and without",
    )
    args = parser.parse_args()
    with moto_and_model() as (aws_endpoint, model_url):
        use_in_process(aws_endpoint, model_url)
        run(args, ModelJournal(model_url))


def run(args: argparse.Namespace, model: ModelJournal) -> None:
    import httpx
    import uvicorn

    spec = importlib.util.spec_from_file_location(
        "local_server", ROOT / "functions/local/server.py"
    )
    local = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(local)
    app, services, _ = local.build_local_app()
    dynamo = DynamoCalls(services.dynamodb)
    recorded, unrecorded = services.streams, NotRecorded(services.streams)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}/v1/openai/v1/responses"
    http = httpx.Client(timeout=60)
    text = "abcd" * args.deltas  # `deltas` pieces of 4 characters

    completed_at: list[float] = []

    def streamed(
        received: dict[int, float] | None = None, on_first=None, pace: float | None = None
    ) -> tuple[float, float]:
        """(start, end) of one streamed response read to its last byte; `received`: when each
        event (by sequence number) arrived."""
        delay = args.first_token if pace == 0 else 0.0
        model.reply(
            text=text, chunks=args.deltas, pace=args.pace if pace is None else pace, delay=delay
        )
        started = time.perf_counter()
        body = {"model": "bench", "input": "count", "stream": True}
        with http.stream("POST", url, json=body) as resp:
            for line in resp.iter_lines():
                if received is not None and line.startswith("id: "):
                    received[int(line[4:])] = time.perf_counter()
                if line == "event: response.completed":
                    completed_at.append(time.perf_counter() - started)
                if on_first is not None and line.startswith("data: "):
                    on_first(json.loads(line[6:])["response"]["id"])
                    on_first = None
        return started, time.perf_counter()

    # (a) with and without the recorder, alternating; the model takes `first_token` to its first
    # delta, then streams the rest at once (a paced model's jitter would hide the difference);
    # then paced, for the writes per second
    streamed(pace=0)  # warm-up
    ends: dict[bool, list[float]] = {True: [], False: []}
    completed: dict[bool, list[float]] = {True: [], False: []}
    for n in range(args.runs * 20):
        for on in (n % 2 == 0, n % 2 == 1):
            services.__dict__["streams"] = recorded if on else unrecorded
            started, ended = streamed(pace=0)
            ends[on].append((ended - started) * 1000)
            completed[on].append(completed_at[-1] * 1000)
    services.__dict__["streams"] = recorded
    rates, writes, put_ms, paced_s = [], [], [], []
    for _ in range(args.runs):
        started, ended = streamed()
        puts = [c for c in dynamo.between(started, ended) if c[0] == "PutItem"]
        writes.append(len(puts))
        rates.append(len(puts) / (ended - started))
        put_ms += [(c[2] - c[1]) * 1000 for c in puts]
        paced_s.append(ended - started)
    add_us = _add_cost(services, args.deltas)

    # (b) a follower beside the live run
    lags: list[float] = []
    for _ in range(args.runs):
        produced: dict[int, float] = {}
        followed: dict[int, float] = {}
        follower: list[threading.Thread] = []

        def follow(response_id: str, followed=followed) -> None:
            with (
                httpx.Client(timeout=60) as other,
                other.stream("GET", f"{url}/{response_id}?stream=true") as resp,
            ):
                for line in resp.iter_lines():
                    if line.startswith("id: "):
                        followed[int(line[4:])] = time.perf_counter()

        def start_follower(response_id: str, follower=follower) -> None:
            thread = threading.Thread(target=follow, args=(response_id,))
            thread.start()
            follower.append(thread)

        streamed(produced, start_follower)
        follower[0].join(timeout=60)
        first = min(followed.values())
        lags += [
            (followed[seq] - at) * 1000
            for seq, at in produced.items()
            if at > first and seq in followed  # produced once the follower was following
        ]
    server.should_exit = True

    def added(times: dict[bool, list[float]]) -> float:
        """The median of the differences between each recorded run and the unrecorded run
        beside it (paired, so a machine busy with other work shifts both alike)."""
        return statistics.median(a - b for a, b in zip(times[True], times[False], strict=True))

    lag_median, lag_p90 = statistics.median(lags), statistics.quantiles(lags, n=10)[-1]
    print("stream events: recording a streamed response's events, and following it live")
    print(
        f"  a response of {args.deltas} deltas over HTTP to the local server; DynamoDB is a moto"
        " server (medians)"
    )
    print(
        f"  added by recording ({len(ends[True])} pairs of runs; the model's first delta after"
        f" {args.first_token * 1000:.0f} ms, the rest at once;"
        f" {statistics.median(ends[False]):.0f} ms a response unrecorded):"
        f" {added(completed):+.1f} ms to the response.completed event,"
        f" {added(ends):+.1f} ms to the stream's last byte (goal <= {GOAL_ADDED_MS} ms)"
    )
    print(
        "    the stream's end waits for the last write (the end mark), one PutItem:"
        f" median {statistics.median(put_ms):.1f} ms in moto"
    )
    print(f"  recorder.add(): {add_us:.1f} us per frame on the stream's path")
    print(
        f"  DynamoDB writes, deltas {args.pace * 1000:.0f} ms apart"
        f" ({statistics.median(paced_s):.2f} s streaming): {statistics.median(writes):.0f} per"
        f" response, {statistics.median(rates):.1f} per second of streaming (max"
        f" {max(rates):.1f}; goal <= {GOAL_WRITES_PER_SECOND})"
    )
    print(
        f"  a follower's lag behind the live run (deltas {args.pace * 1000:.0f} ms apart):"
        f" median {lag_median:.0f} ms, p90 {lag_p90:.0f} ms"
        f" over {len(lags)} frames (goal median <= {GOAL_LAG_MS} ms)"
    )


def _add_cost(services, deltas: int) -> float:
    """Microseconds `StreamRecorder.add` takes per frame (its writes run apart)."""
    from agents_core.services.streams import Frame, StreamKey

    async def measure() -> float:
        recorder = services.streams.recorder("bench", StreamKey.response("resp_bench"))
        frames = [Frame(n, "response.output_text.delta", '{"delta":"abcd"}') for n in range(deltas)]
        started = time.perf_counter()
        for frame in frames:
            recorder.add(frame)
        took = time.perf_counter() - started
        await recorder.close()
        return took / deltas * 1e6

    return asyncio.run(measure())


if __name__ == "__main__":
    main()
