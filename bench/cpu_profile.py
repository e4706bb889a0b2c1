"""CPU per streamed turn, per streamed response and per resume of the server process, each
function run as its run.sh runs it (the command it execs, in functions/<name>), over a moto
server and the scripted model in processes of their own (peers.py), with the environment Lambda
gives them (the metrics on: a run's count written to stdout, here discarded); and each server's
CPU while it idles (its main loop's wake-ups), which a Lambda spends through every wait on the
model.

Each figure is the server's utime + stime (and, finer, the on-CPU time of its threads from
/proc/<pid>/task/*/schedstat) over N runs driven over one kept-alive HTTP connection, divided
by N: back to back, and each after the server idled 50 ms (`--pause-ms`), in alternating
batches. The same work costs more after a pause: the caches are cold (this machine is a
Firecracker microVM, as a Lambda is), and a Lambda that is not kept busy runs each request so. `--profile DIR` then records each server with py-spy (raw collapsed stacks, one file per
function, samples taken while a thread holds the GIL) over another N runs, not measured: py-spy
stops the process for each sample, which doubles the CPU it uses. `--compare DIR`
measures another checkout (its functions/ and layers/; e.g. `git archive HEAD~1 | tar -x -C
DIR`) in the same run, over the same peers, in alternating batches of runs (`measure`).

    .venv/bin/python bench/cpu_profile.py [--runs 40] [--profile /tmp/prof] [--compare /tmp/old]
        [--pause-ms 0 50]
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

from peers import free_port, moto_and_model, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime + stime, sum of the threads' on-CPU time) of process `pid`, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = (int(fields[11]) + int(fields[12])) / TICK
    ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with suppress(FileNotFoundError, ProcessLookupError):
            ns += int((task / "schedstat").read_text().split()[0])
    return ticks, ns / 1e9


@contextmanager
def function_server(
    root: Path, name: str, env: dict[str, str], preexec_fn=None, prefix: list[str] | None = None
):
    """The function's app served as its run.sh serves it; yields (base URL, pid). `preexec_fn`
    runs in the child before the server (lambda_share.py: joining a cgroup); `prefix` comes
    before the command (instructions.py: valgrind's). The layer is `root`'s package, or the
    folder `env` names in LAYER_PYTHON_DIR, as run.sh takes it (lambda_share.py: the built
    layer)."""
    port = free_port()
    env = {**env, "PYTHONPATH": layer_path(root, env)}
    proc = subprocess.Popen(
        (prefix or []) + run_sh_command(root, name, port) + ["--log-level", "warning"],
        cwd=root / "functions" / name,
        env=env,
        preexec_fn=preexec_fn,
        stdout=subprocess.DEVNULL,  # its metrics (and logs), which Lambda would ship
    )
    try:
        wait_for_port(port, proc, 30 if prefix is None else 300)  # valgrind starts slowly
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def layer_path(root: Path, env: dict[str, str]) -> str:
    """Where a function finds the layer: LAYER_PYTHON_DIR when `env` sets it, else `root`'s
    package (with the checkout's virtualenv for its dependencies)."""
    return env.get("LAYER_PYTHON_DIR") or str(root / "layers" / "agents_core")


def run_sh_command(root: Path, name: str, port: int) -> list[str]:
    """The command the function's run.sh execs (this interpreter for its `python`, `port` for
    its port), so another checkout is served as it would be. Before run.sh named an HTTP
    parser, uvicorn took h11 (whatever this virtualenv has). A function Lambda runs without
    run.sh (the agents function, here only setting up) is served by plain uvicorn."""
    run_sh = root / "functions" / name / "run.sh"
    line = "exec python -m uvicorn app:app --host 127.0.0.1 --port ${PORT:-8080}"
    if run_sh.exists():
        line = next(x for x in run_sh.read_text().splitlines() if x.startswith("exec python "))
    words = [_port(word, port) for word in shlex.split(line)[2:]]
    if "--http" not in words:
        words += ["--http", "h11"]
    return [sys.executable, *words]


def _port(word: str, port: int) -> str:
    """`port` for run.sh's port (`${AWS_LWA_PORT:-${PORT:-8080}}`, or `${PORT:-8080}` in a
    checkout from before the Web Adapter's own name for it)."""
    return str(port) if word.startswith("${") and "PORT" in word else word


@contextmanager
def profiled(pid: int, out: Path | None):
    """py-spy records process `pid` (raw collapsed stacks into `out`) while this runs."""
    if out is None:
        yield
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-r", "1000"]
        + ["-f", "raw", "--gil", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)


def streamed(http, url: str, body: dict, marker: str) -> None:
    """POST `body`, read the stream to its end; it must hold `marker`."""
    seen = False
    with http.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            seen = seen or marker in line
    if not seen:
        raise RuntimeError(f"{url}: no {marker} in the stream")


#: What a server does after a run's stream ends (its lifecycle event) is done within this.
TAIL = 0.05


class Meter:
    """CPU of one process over what runs inside `measure()`, summed; `counting=False` (a
    profiled pass) runs it without counting. `pause`: seconds the process is left idle after
    each run, measured with the run (what it does after its stream ended); 0: runs back to
    back, each batch's last run then settled by `settle()`."""

    def __init__(self, pid: int, pause: float = TAIL) -> None:
        self.pid, self.pause, self.ticks, self.sched, self.counting = pid, pause, 0.0, 0.0, True

    @contextmanager
    def measure(self):
        if not self.counting:
            yield
            return
        before = cpu_seconds(self.pid)
        yield
        time.sleep(self.pause)
        self._add(before)

    def settle(self) -> None:
        """After runs back to back: what the last of them did once its stream had ended."""
        if self.counting and not self.pause:
            before = cpu_seconds(self.pid)
            time.sleep(TAIL)
            self._add(before)

    def _add(self, before: tuple[float, float]) -> None:
        after = cpu_seconds(self.pid)
        self.ticks += after[0] - before[0]
        self.sched += after[1] - before[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="turns of one session, etc.")
    parser.add_argument("--repeat", type=int, default=1, help="sessions of --runs turns each")
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument(
        "--compare", type=Path, default=None, help="another checkout, measured alongside"
    )
    parser.add_argument("--idle", type=float, default=5.0, help="seconds idle, measured")
    parser.add_argument(
        "--pause-ms",
        type=float,
        nargs="+",
        default=[0, TAIL * 1000],
        help="idle after each run, ms (0: back to back); each measured, in alternating batches",
    )
    args = parser.parse_args()
    roots = [root for root in (args.compare, ROOT) if root is not None]
    with moto_and_model() as (aws_endpoint, model_url), ExitStack() as stack:
        benches = [Bench(args, root, aws_endpoint, model_url, stack) for root in roots]
        idle = idle_rates(benches, args.idle)
        meters = measure(args, benches)
        n = args.runs * args.repeat
        for bench, by_pause, rates in zip(benches, meters, idle, strict=True):
            print(f"{bench.root}:")
            each = ", ".join(f"{name} {rate * 1000:.2f}" for name, rate in rates.items())
            print(f"CPU of each server while idle (ms per second; {args.idle:g} s): {each}")
            for pause, (turns, responses, resumes) in by_pause.items():
                after = f"{pause * 1000:g} ms idle after each" if pause else "back to back"
                print(f"CPU of the server process per run (ms; {n} runs each, {after};")
                print("  utime+stime / schedstat)")
                for label, meter in (
                    ("streamed turn (one session)", turns),
                    ("streamed response", responses),
                    ("resume (one session)", resumes),
                ):
                    ticks, sched = meter.ticks / n * 1000, meter.sched / n * 1000
                    print(f"  {label:<30} {ticks:6.2f}  {sched:6.2f}")
        if args.profile:
            for bench in benches:
                bench.profile(args.profile / bench.root.name)


def idle_rates(benches: list[Bench], seconds: float) -> list[dict[str, float]]:
    """Each bench's servers' CPU seconds per second over `seconds` of idling, all at once."""
    time.sleep(0.5)  # the last run's lifecycle event
    before = [{name: cpu_seconds(pid)[1] for name, pid in b.pids.items()} for b in benches]
    time.sleep(seconds)
    return [
        {name: (cpu_seconds(pid)[1] - was[name]) / seconds for name, pid in b.pids.items()}
        for b, was in zip(benches, before, strict=True)
    ]


#: Runs each checkout makes before the other's turn, when two are compared.
BATCH = 10


def measure(
    args: argparse.Namespace, benches: list[Bench]
) -> list[dict[float, tuple[Meter, Meter, Meter]]]:
    """Each kind of run, measured on each checkout and after each pause (`--pause-ms`) in
    alternating batches of BATCH runs: a drift in the machine's speed (other tenants) meets
    them all alike. Measured one after the other, the same code has differed by half a
    millisecond a turn. For each checkout, {pause in seconds: its meters, by kind}."""
    pauses = [ms / 1000 for ms in args.pause_ms]
    meters = [
        {
            pause: tuple(
                Meter(bench.pids[name], pause) for name in ("turns", "responses", "resume")
            )
            for pause in pauses
        }
        for bench in benches
    ]
    for kind in range(3):
        runs = [
            (bench.runs(kind, by_pause[pause][kind]), by_pause[pause][kind])
            for bench, by_pause in zip(benches, meters, strict=True)
            for pause in pauses
        ]
        left = args.runs * args.repeat
        while left:
            step = min(BATCH, left)
            for each, meter in runs:
                for _ in range(step):
                    next(each)
                meter.settle()
            left -= step
    return meters


def prepare_aws(env: dict[str, str]) -> None:
    """The table, queues and bus the stack's template declares, created in moto."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT / "layers" / "agents_core"))
    from agents_core import aws
    from agents_core.lifecycle import ensure_event_bus
    from agents_core.services.resume_queue import ensure_resume_queue
    from agents_core.settings import Settings
    from agents_core.store.schema import create_table_if_missing

    settings = Settings.from_env()
    create_table_if_missing(aws.client("dynamodb"), settings.table_name)
    ensure_resume_queue(aws.client("sqs"), settings.resume_queue_name)
    ensure_event_bus(aws.client("events"), settings.event_bus_name)


class Bench:
    """One checkout's functions, served, warmed and driven: `runs(kind, meter)` yields after
    each measured run of a kind (0 turns, 1 responses, 2 resumes)."""

    def __init__(
        self,
        args: argparse.Namespace,
        root: Path,
        aws_endpoint: str,
        model_url: str,
        stack: ExitStack,
        prefixes: dict[str, list[str]] | None = None,
    ) -> None:
        """`prefixes`: a command put before some functions' (by name)."""
        import httpx

        env = {
            **os.environ,
            "OPENAI_BASE_URL": model_url,
            "AWS_ENDPOINT_URL": aws_endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "TURN_LEASE_SECONDS": "60",
        }
        prepare_aws(env)
        self.args, self.root, self.model_url = args, root, model_url
        self.http = httpx.Client(timeout=30)
        prefixes = prefixes or {}
        servers = {
            name: stack.enter_context(function_server(root, name, env, None, prefixes.get(name)))
            for name in ("agents", "turns", "resume", "responses")
        }
        self.urls = {name: url for name, (url, _) in servers.items()}
        self.pids = {name: pid for name, (_, pid) in servers.items()}
        warm = self.session()
        for i in range(5):
            self.turn(*warm, f"warm {i}")
            self.response(f"warm {i}")
        tools = self.session(client_tools=[WEATHER])
        for _ in range(5):
            self.resume(*tools, *self.paused(*tools))

    def session(self, **extra) -> tuple[str, str]:
        agents_url = self.urls["agents"] + "/v1/agents"
        config = {"model": "bench", "instructions": "Be brief.", **extra}
        agent = self.http.post(agents_url, json={"agent_config": config}).json()["agent_id"]
        made = self.http.post(f"{agents_url}/{agent}/session", json={"session_name": "b"})
        return agent, made.json()["session_id"]

    def turn(self, agent: str, session_id: str, text: str) -> None:
        body = {"messages": [{"role": "user", "content": text}], "stream": True}
        url = f"{self.urls['turns']}/v1/agents/{agent}/session/{session_id}/turn"
        streamed(self.http, url, body, '"turn_complete"')

    def response(self, text: str) -> None:
        body = {"model": "bench", "input": text, "stream": True}
        url = f"{self.urls['responses']}/v1/openai/v1/responses"
        streamed(self.http, url, body, "response.completed")

    def paused(self, agent: str, session_id: str) -> tuple[str, dict]:
        """A turn paused on a client tool call, and the call's result to resume it with."""
        self.http.post(
            f"{self.model_url}/_replies", json={"tool_calls": [["get_weather", '{"city": "P"}']]}
        ).raise_for_status()
        body = {"messages": [{"role": "user", "content": "weather?"}]}
        url = f"{self.urls['turns']}/v1/agents/{agent}/session/{session_id}/turn"
        made = self.http.post(url, json=body).json()
        call = made["output_message"]["tool_calls"][0]
        return made["turn_id"], {
            "call_id": call["call_id"],
            "tool_name": "get_weather",
            "content": "sunny",
        }

    def resume(self, agent: str, session_id: str, turn_id: str, result: dict) -> None:
        url = f"{self.urls['resume']}/v1/agents/{agent}/session/{session_id}/turn/{turn_id}"
        body = {"tool_responses": [result], "stream": True}
        streamed(self.http, f"{url}/resume", body, '"turn_complete"')

    def runs(self, kind: int, meter: Meter) -> Iterator[None]:
        """Runs of `kind`, each measured by `meter`: turns and resumes in sessions of --runs
        (a session's history grows with them), --repeat sessions."""
        n, repeat = self.args.runs, self.args.repeat
        if kind == 1:
            for i in range(n * repeat):
                with meter.measure():
                    self.response(f"question {i}")
                yield
            return
        for _ in range(repeat):
            session = self.session(client_tools=[WEATHER]) if kind == 2 else self.session()
            for i in range(n):
                if kind == 0:
                    with meter.measure():
                        self.turn(*session, f"question {i}")
                else:
                    waiting = self.paused(*session)
                    with meter.measure():
                        self.resume(*session, *waiting)
                yield

    def profile(self, out: Path) -> None:
        """Each function recorded by py-spy over --runs runs of its kind, not measured."""
        for kind, name in enumerate(("turns", "responses", "resume")):
            meter = Meter(self.pids[name])
            meter.counting = False
            with profiled(self.pids[name], out / f"{name}.txt"):
                for _ in self.runs(kind, meter):
                    pass


WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": [
        {"name": "city", "parameter_type": "string", "description": "City", "required": True}
    ],
}


if __name__ == "__main__":
    main()
