"""Each function as Lambda runs it, confined to the CPU its memory buys: Lambda gives a function
CPU in proportion to its MemorySize (1,769 MB = one vCPU), so a 192 MB function has about 0.11 of
one. A cpu cgroup (v1, /sys/fs/cgroup/cpu: cfs_quota_us = share x cfs_period_us) holds the
function's process; AWS (serial_moto.py) and the model (tests/peers/openai_server.py) run outside
it, in processes of their own (peers.py), as they would in AWS.

Printed for each function of template.yaml, at its share and at a full core (medians):
- cold init: a fresh interpreter importing the function's `app.py` (which builds its services),
  as Lambda's init does; for the streaming functions, until uvicorn answers (run.sh);
- for the streaming functions: what a streamed turn, a streamed response and a resume add to
  the model's own time, and their time to first byte.

Without a writable cgroup it says so in one line and prints the full-core figures only.

    .venv/bin/python bench/lambda_share.py [--runs 15] [--inits 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from cost import FULL_VCPU_MB, template_memory
from cpu_profile import function_server, prepare_aws
from peers import moto_and_model

ROOT = Path(__file__).resolve().parent.parent
CGROUPS = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
#: The functions served by uvicorn under the Web Adapter (run.sh), and what each is timed on.
STREAMING = {"TurnsFunction": "turns", "ResponsesFunction": "responses", "ResumeFunction": "resume"}


def code_dirs() -> dict[str, Path]:
    """Each function's CodeUri folder (template.yaml)."""
    text = (ROOT / "template.yaml").read_text()
    found = {}
    for block in re.split(r"\n  (?=\w+:\n    Type: )", text):
        uri = re.search(r"\n      CodeUri: (\S+)", block)
        if "Type: AWS::Serverless::Function" in block and uri:
            found[block.split(":", 1)[0].strip()] = ROOT / uri.group(1)
    return found


def share(memory_mb: int) -> float:
    return min(1.0, memory_mb / FULL_VCPU_MB)


@contextmanager
def cgroup(name: str, cpu_share: float | None) -> Iterator[Path | None]:
    """A cpu cgroup with this share of one CPU (None: no confinement); removed on exit."""
    if cpu_share is None:
        yield None
        return
    path = CGROUPS / f"serverless-agents-{name}-{os.getpid()}"
    path.mkdir()
    try:
        (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (path / "cpu.cfs_quota_us").write_text(str(max(1000, int(PERIOD_US * cpu_share))))
        yield path
    finally:
        with contextlib.suppress(OSError):
            for _ in range(50):  # its processes must be gone first
                if not (path / "cgroup.procs").read_text().strip():
                    break
                time.sleep(0.1)
            path.rmdir()


def joining(group: Path | None) -> Callable[[], None] | None:
    """A preexec_fn moving the new process into `group` before it runs anything."""
    if group is None:
        return None
    return lambda: (group / "cgroup.procs").write_text(str(os.getpid()))


def cgroups_writable() -> bool:
    try:
        with cgroup("probe", 0.5):
            return True
    except OSError:
        return False


def cold_init(code: Path, env: dict[str, str], group: Path | None) -> float:
    """Seconds for a fresh interpreter to import the function's app.py."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import app"],
        cwd=code,
        env={**env, "PYTHONPATH": str(ROOT / "layers" / "agents_core")},
        check=True,
        preexec_fn=joining(group),
    )
    return time.perf_counter() - start


def timed_stream(http, url: str, body: dict, marker: str) -> tuple[float, float]:
    """(seconds to the first byte, seconds to the end) of a streamed POST holding `marker`."""
    start = time.perf_counter()
    first, seen = None, False
    with http.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            first = first or time.perf_counter()
            seen = seen or marker in line
    if not seen:
        raise RuntimeError(f"{url}: no {marker} in the stream")
    return first - start, time.perf_counter() - start


def model_time(http, model_url: str, runs: int) -> float:
    """The model's own time for a streamed answer, over HTTP (median seconds)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    times = [
        timed_stream(http, f"{model_url}/chat/completions", body, "[DONE]")[1] for _ in range(runs)
    ]
    return statistics.median(times)


def streaming_figures(
    env: dict[str, str], model_url: str, shares: dict[str, float | None], runs: int
) -> dict[str, tuple[float, float]]:
    """(added ms, time to first byte ms) of a streamed turn, response and resume, each function
    in its cgroup (the agents function, which only sets up, at a full core)."""
    import httpx

    http = httpx.Client(timeout=60)
    model = model_time(http, model_url, runs)
    out: dict[str, tuple[float, float]] = {}
    with ExitStack() as stack:
        servers = {"agents": stack.enter_context(function_server(ROOT, "agents", env))}
        for function, name in STREAMING.items():
            group = stack.enter_context(cgroup(name, shares[function]))
            servers[name] = stack.enter_context(
                function_server(ROOT, name, env, preexec_fn=joining(group))
            )
        agents = servers["agents"][0] + "/v1/agents"

        def session(**extra) -> tuple[str, str]:
            config = {"model": "bench", "instructions": "Be brief.", **extra}
            agent = http.post(agents, json={"agent_config": config}).json()["agent_id"]
            made = http.post(f"{agents}/{agent}/session", json={"session_name": "b"})
            return agent, made.json()["session_id"]

        def measure(kind: str, one: Callable[[int], tuple[float, float]]) -> None:
            for i in range(3):
                one(i)  # warm: each container's first requests build what they need
            taken = [one(i) for i in range(runs)]
            ttfb = statistics.median(t[0] for t in taken)
            out[kind] = ((statistics.median(t[1] for t in taken) - model) * 1000, ttfb * 1000)

        agent, session_id = session()
        turn_url = f"{servers['turns'][0]}/v1/agents/{agent}/session/{session_id}/turn"
        measure(
            "streamed turn",
            lambda i: timed_stream(
                http,
                turn_url,
                {"messages": [{"role": "user", "content": f"q{i}"}], "stream": True},
                '"turn_complete"',
            ),
        )
        responses_url = f"{servers['responses'][0]}/v1/responses"
        measure(
            "streamed response",
            lambda i: timed_stream(
                http,
                responses_url,
                {"model": "bench", "input": f"q{i}", "stream": True},
                "response.completed",
            ),
        )
        tool = {"name": "get_weather", "description": "Weather", "parameters": []}
        agent, session_id = session(client_tools=[tool])
        base = f"/v1/agents/{agent}/session/{session_id}/turn"

        def resume(i: int) -> tuple[float, float]:
            http.post(
                f"{model_url}/_replies", json={"tool_calls": [["get_weather", "{}"]]}
            ).raise_for_status()
            paused = http.post(
                f"{servers['turns'][0]}{base}",
                json={"messages": [{"role": "user", "content": f"w{i}"}]},
            ).json()
            call = paused["output_message"]["tool_calls"][0]
            result = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "sun"}
            return timed_stream(
                http,
                f"{servers['resume'][0]}{base}/{paused['turn_id']}/resume",
                {"tool_responses": [result], "stream": True},
                '"turn_complete"',
            )

        measure("resume", resume)
    return out


def function_env(aws_endpoint: str, model_url: str) -> dict[str, str]:
    """The environment the functions run with here, their AWS made ready."""
    env = {
        **os.environ,
        "OPENAI_BASE_URL": model_url,
        "POWERTOOLS_METRICS_DISABLED": "true",
        "AWS_ENDPOINT_URL": aws_endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    prepare_aws(env)
    return env


def at_memory(
    memory_mb: int, env: dict[str, str], model_url: str, runs: int
) -> tuple[float, dict[str, tuple[float, float]]]:
    """(the turns function's cold init in seconds, the streaming figures) with every streaming
    function at this memory's share (bench/cost.py's table by MemorySize)."""
    with cgroup("init", share(memory_mb)) as group:
        init = cold_init(code_dirs()["TurnsFunction"], env, group)
    return init, streaming_figures(env, model_url, dict.fromkeys(STREAMING, share(memory_mb)), runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--inits", type=int, default=2, help="cold inits per function")
    args = parser.parse_args()
    memory = template_memory()
    dirs = code_dirs()
    confine = cgroups_writable()
    if not confine:
        print(f"no writable cpu cgroup at {CGROUPS}: figures at a full core only")
    with moto_and_model() as (aws_endpoint, model_url):
        env = function_env(aws_endpoint, model_url)
        print("cold init (a fresh interpreter importing app.py), median seconds")
        print(f"  {'function':<22}{'memory':>8}{'share':>8}{'at share':>10}{'full core':>11}")
        for function, code in sorted(dirs.items()):
            full = statistics.median(cold_init(code, env, None) for _ in range(args.inits))
            at_share = "-"
            if confine:
                with cgroup("init", share(memory[function])) as group:
                    inits = [cold_init(code, env, group) for _ in range(args.inits)]
                at_share = f"{statistics.median(inits):.2f}"
            print(
                f"  {function:<22}{memory[function]:>6} MB{share(memory[function]):>8.3f}"
                f"{at_share:>10}{full:>11.2f}"
            )
        full = streaming_figures(env, model_url, dict.fromkeys(STREAMING), args.runs)
        confined = None
        if confine:
            shares = {f: share(memory[f]) for f in STREAMING}
            confined = streaming_figures(env, model_url, shares, args.runs)
        sizes = ", ".join(f"{STREAMING[f]} {memory[f]} MB" for f in STREAMING)
        print(f"streaming functions ({sizes}): added to the model's time / time to first byte")
        print(f"  {'':<20}{'at share':>22}{'full core':>22}")
        for kind, (added, ttfb) in full.items():
            there = f"{confined[kind][0]:.1f} / {confined[kind][1]:.1f} ms" if confined else "-"
            print(f"  {kind:<20}{there:>22}{f'{added:.1f} / {ttfb:.1f} ms':>22}")


if __name__ == "__main__":
    main()
