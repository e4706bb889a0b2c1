"""Each function of template.yaml run as Lambda runs it, confined to the CPU its memory buys.

Lambda gives a function CPU in proportion to its MemorySize (1,769 MB = one vCPU), so a 216 MB
function has about 0.12 of one. A cpu cgroup holds the function's process to that share (v1 at
/sys/fs/cgroup/cpu: cfs_quota_us = share x cfs_period_us; v2: cpu.max). AWS (a moto server) and
the model (tests/peers/openai_server.py, which answers at once) run outside it, in processes of
their own (peers.py), as they would in AWS.

Lambda runs an on-demand function's init with a full vCPU whatever its memory (up to 10 s:
AWS's "Effectively running Java on Serverless" guide, the Web Adapter's docs on its "init CPU
burst"; provisioned concurrency's init gets only the memory's share, off the request path), and
every request at the share. So a new container's cold start is its init at a full core, then
its first request at the share.

Printed, each figure at the function's share beside the same figure at a full core (medians):
- cold init, for every function, in the environment Lambda would give it (primed, as
  deployed). An `app.handler` function: a fresh interpreter importing its app.py (which builds
  its services), as the managed runtime's init does. A `run.sh` function (uvicorn behind the
  Lambda Web Adapter): from starting uvicorn as run.sh does until it answers the adapter's
  readiness check, GET / (looked for every 10 ms, as the adapter does). On demand is the full
  core's figure; the share's is provisioned concurrency's. Functions sharing code and memory
  (resume and its queue consumer) are measured once.
- for the streaming functions (run.sh with AWS_LWA_INVOKE_MODE=response_stream): what a
  streamed turn, a streamed Responses API response and the resume of a turn paused on a client
  tool add to the model's own time (the wall time to the end of the stream minus a direct
  streamed call to the model), and their time to the first byte: runs back to back (each may
  find the period's share spent by the one before: a busy function, whose free containers
  Lambda hands each request as it arrives), then each after idle gaps (20 ms: one caller's
  next request, which comes a network round trip and two passes through API Gateway after the
  last byte; 300 ms: a container that waited on its last model); a run's CPU at the share and
  at a full core, and the periods it was throttled in; and a new container as on-demand
  Lambda starts one: its init unthrottled, then its first run at the share, after each init of
  `INITS` (lazy, primed, and connected as deployed).

How to read it: the figure at the share is what a deployed function of that size would show,
with AWS and the model as fast as here; share over full core is what the memory choice costs in
latency. Without a writable cgroup it says so in one line and prints the full-core figures
only.

    .venv/bin/python bench/lambda_share.py [--runs 15] [--inits 2] [--gap-ms 20 300] [--first 3]
        [--paced] [--tls] [--period-ms 20] [--compare DIR | --memory MB [MB ...]]

`--compare DIR`: only the streamed runs at the share, DIR's checkout (its layer built as this
one's) and this one served at once over the same AWS and model, each kind's runs timed in
alternating rounds: rounds of one checkout minutes apart differ by more than most changes do.
`--memory MB ...`: the same with this checkout's streaming functions at each size's share (the
memory choice, bench/cost.py); both print each side's slowest round beside its median.

`--tls`: AWS and the model behind TLS fronts (bench/tls_front.py), so each new connection's
handshake and the CA bundle's load are in the figures, as in AWS.
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
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import NamedTuple

from cpu_profile import cpu_seconds, function_server, layer_path, prepare_aws
from peers import (
    built_function,
    built_layer,
    compile_bytecode,
    moto_and_model,
    use_in_process,
)

ROOT = Path(__file__).resolve().parent.parent
#: CFS period of the cgroups (`--period-ms`): a run whose CPU outlasts its period's quota waits
#: out the rest of the period. Lambda does not publish its own; measured on Lambda it is 20 ms
#: (pwrdrvr/lambda-throttling: "AWS Lambda throttles CPU in 20ms intervals"; lambda-dispatch
#: issue 246: spending more than the share in the first 20 ms pauses the function until the end
#: of those 20 ms). So a run finds at most 20 ms' share unspent however long its container idled.
PERIOD_US = 20_000
#: The inits a new container's first run is measured after (`first_runs`): lazy leaves all to the
#: first request; primed builds at init what it would (`Services.prime`); connected also opens
#: its connections (`Services.connect`), as Lambda's on-demand init does.
INITS = {
    "lazy": {"PRIME_AT_INIT": "false", "CONNECT_AT_INIT": "false"},
    "primed": {"PRIME_AT_INIT": "true", "CONNECT_AT_INIT": "false"},
    "connected": {"PRIME_AT_INIT": "true", "CONNECT_AT_INIT": "true"},
}

FULL_VCPU_MB = 1769  # Lambda gives a function one vCPU's worth at 1769 MB, in proportion below
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")
#: The client tool a resumed turn pauses on (the scripted model is told to call it).
CLIENT_TOOL = {"name": "get_weather", "description": "Current weather", "parameters": []}


@dataclass(frozen=True)
class Pace:
    """A model that streams as hosted ones do: its first token after `first` seconds, then
    `deltas` deltas `gap` seconds apart. The function's CPU is then spread over the model's
    time, as in production, rather than spent at once as with the instant model."""

    first: float = 0.3
    deltas: int = 40
    gap: float = 0.025

    def reply(self) -> dict:
        """The scripted model's next reply (its `/_replies`), about 5 words a delta."""
        text = " ".join(f"word{i}" for i in range(self.deltas * 5))
        return {"text": text, "chunks": self.deltas, "delay": self.first, "pace": self.gap}

    def __str__(self) -> str:
        return (
            f"first token after {self.first * 1000:.0f} ms, then {self.deltas} deltas"
            f" {self.gap * 1000:.0f} ms apart"
        )


def template_memory() -> dict[str, int]:
    """MemorySize of each function in template.yaml (the Globals' for those without one)."""
    text = (ROOT / "template.yaml").read_text()
    default = int(re.search(r"Globals:.*?MemorySize: (\d+)", text, re.S).group(1))
    sizes = {}
    for block in re.split(r"\n  (?=\w+:\n    Type: )", text):
        name = block.split(":", 1)[0].strip()
        if "Type: AWS::Serverless::Function" in block:
            found = re.search(r"\n      MemorySize: (\d+)", block)
            sizes[name] = int(found.group(1)) if found else default
    return sizes


def cpu_share(memory_mb: int) -> float:
    return min(1.0, memory_mb / FULL_VCPU_MB)


def _unified_cpu() -> bool:
    """True where the cpu controller lives in the unified (v2) hierarchy, not in v1's."""
    controllers = CGROUP_V2 / "cgroup.controllers"
    return (
        not CGROUP_V1.is_dir() and controllers.exists() and "cpu" in controllers.read_text().split()
    )


CGROUPS = CGROUP_V2 if _unified_cpu() else CGROUP_V1


@dataclass(frozen=True)
class Function:
    """One AWS::Serverless::Function of template.yaml, as Lambda runs it."""

    name: str
    code: Path  # its CodeUri
    memory_mb: int
    web_adapter: bool  # Handler run.sh: uvicorn behind the Web Adapter (else app.handler)
    streaming: bool  # ... with AWS_LWA_INVOKE_MODE response_stream
    layered: bool = True  # with the AgentsCoreLayer (else its own build: the authorizer)

    @property
    def share(self) -> float:
        return cpu_share(self.memory_mb)


def template_functions() -> list[Function]:
    """The functions of template.yaml, by name: code, memory, and how Lambda starts them."""
    memory = template_memory()
    found = []
    for block in re.split(r"\n  (?=\w+:\n    Type: )", (ROOT / "template.yaml").read_text()):
        name = block.split(":", 1)[0].strip()
        if name not in memory:
            continue
        code = re.search(r"\n      CodeUri: (\S+)", block).group(1)
        adapter = re.search(r"\n      Handler: (\S+)", block).group(1) == "run.sh"
        mode = re.search(r"\n\s+AWS_LWA_INVOKE_MODE: (\S+)", block)
        streaming = adapter and mode is not None and mode.group(1) == "response_stream"
        layered = "!Ref AgentsCoreLayer" in block
        found.append(Function(name, ROOT / code, memory[name], adapter, streaming, layered))
    return sorted(found, key=lambda f: f.name)


@contextmanager
def cgroup(name: str, share: float | None) -> Iterator[Path | None]:
    """A cpu cgroup with this share of one CPU (None: no confinement); removed on exit."""
    if share is None:
        yield None
        return
    if CGROUPS == CGROUP_V2:  # v2 gives children the cpu controller only once enabled
        (CGROUPS / "cgroup.subtree_control").write_text("+cpu")
    path = CGROUPS / f"serverless-agents-{name}-{os.getpid()}"
    path.mkdir()
    try:
        quota = int(PERIOD_US * share)
        if quota < 1000:  # the kernel's least quota: a larger one would give more than the share
            raise ValueError(
                f"a {PERIOD_US / 1000:g} ms period is too short for a {share:.3f} share"
            )
        if CGROUPS == CGROUP_V2:
            (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(quota))
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


def cold_init(function: Function, env: dict[str, str], group: Path | None) -> float:
    """Seconds from a fresh process to the function ready to serve, as Lambda's init."""
    import httpx

    path = layer_path(ROOT, env) if function.layered else str(own_build(function))
    start = time.perf_counter()
    if function.web_adapter:
        with function_server(ROOT, function.code.name, env, joining(group)) as (url, _):
            httpx.get(f"{url}/", timeout=60)  # the Web Adapter's readiness check
            return time.perf_counter() - start
    subprocess.run(
        [sys.executable, "-c", "import app"],
        cwd=function.code,
        env={**env, "PYTHONPATH": path},
        check=True,
        preexec_fn=joining(group),
    )
    return time.perf_counter() - start


@cache
def own_build(function: Function) -> Path:
    """The build of a function without the layer, as Lambda runs it (built once a run)."""
    return built_function(function.code.name)


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


def model_time(http, model_url: str, runs: int, pace: Pace | None = None) -> float:
    """The model's own time for a streamed answer, over HTTP (median seconds)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    times = []
    for _ in range(runs):
        if pace is not None:
            http.post(f"{model_url}/_replies", json=pace.reply()).raise_for_status()
        times.append(timed_stream(http, f"{model_url}/chat/completions", body, "[DONE]")[1])
    return statistics.median(times)


class Runs:
    """The runs the benches time over HTTP; each returns (seconds to the first byte, seconds to
    the end of the stream). `urls` maps each function's code folder (agents, turns, responses,
    resume) to the base URL serving it: one server (`make run`'s) may stand for all four.
    `pace`: the model answers each timed run so (else at once)."""

    def __init__(self, http, model_url: str, urls: dict[str, str], pace: Pace | None = None):
        self.http, self.model_url, self.urls, self.pace = http, model_url, urls, pace

    def _paced(self) -> None:
        """The timed run's model answer queued (untimed), when paced."""
        if self.pace is not None:
            self.http.post(f"{self.model_url}/_replies", json=self.pace.reply()).raise_for_status()

    def session(self, **agent_config) -> tuple[str, str]:
        """(agent id, session id) of a new agent's first session."""
        agents = f"{self.urls['agents']}/v1/agents"
        config = {"model": "bench", "instructions": "Be brief.", **agent_config}
        agent = self.http.post(agents, json={"agent_config": config}).json()["agent_id"]
        made = self.http.post(f"{agents}/{agent}/session", json={"session_name": "b"})
        return agent, made.json()["session_id"]

    def _turns(self, function: str, session: tuple[str, str]) -> str:
        agent, session_id = session
        return f"{self.urls[function]}/v1/agents/{agent}/session/{session_id}/turn"

    def turn(self, session: tuple[str, str], text: str) -> tuple[float, float]:
        body = {"messages": [{"role": "user", "content": text}], "stream": True}
        self._paced()
        return timed_stream(self.http, self._turns("turns", session), body, '"turn_complete"')

    def response(self, text: str) -> tuple[float, float]:
        body = {"model": "bench", "input": text, "stream": True}
        self._paced()
        url = f"{self.urls['responses']}/v1/responses"
        return timed_stream(self.http, url, body, "response.completed")

    def paused(self, session: tuple[str, str]) -> tuple[str, dict]:
        """A turn (not streamed, untimed) paused on CLIENT_TOOL, which the session's agent must
        offer: (its id, the tool's result to resume it with)."""
        reply = {"tool_calls": [[CLIENT_TOOL["name"], "{}"]]}
        self.http.post(f"{self.model_url}/_replies", json=reply).raise_for_status()
        body = {"messages": [{"role": "user", "content": "weather?"}]}
        made = self.http.post(self._turns("turns", session), json=body).json()
        call = made["output_message"]["tool_calls"][0]
        result = {"call_id": call["call_id"], "tool_name": CLIENT_TOOL["name"], "content": "sun"}
        return made["turn_id"], result

    def resume(self, session: tuple[str, str], paused: tuple[str, dict]) -> tuple[float, float]:
        turn_id, result = paused
        url = f"{self._turns('resume', session)}/{turn_id}/resume"
        body = {"tool_responses": [result], "stream": True}
        self._paced()
        return timed_stream(self.http, url, body, '"turn_complete"')


class Streamed(NamedTuple):
    """A kind of streamed run, as measured (medians of its runs)."""

    added: float  # ms added to the model's own time
    first: float  # ms to the first byte
    cpu: float  # ms of the function's CPU a run (its threads' schedstat)
    throttled: float  # periods its cgroup was throttled in a run (mean; 0 at a full core)


def streaming_figures(
    env: dict[str, str],
    model_url: str,
    shares: dict[str, float | None],
    runs: int,
    pace: Pace | None = None,
    gap: float = 0.0,
) -> dict[str, Streamed]:
    """{run: Streamed}: each streaming function (by code folder) in a cgroup of its share in
    `shares` (None: a full core); the agents function, which only sets up, at a full core.
    `pace`: the model streams so in the timed runs (the warm-up runs are answered at once).
    `gap`: seconds each timed run waits first, the function idle (0: back to back, so a run may
    find its share of the period spent by the one before)."""
    import httpx

    http = httpx.Client(timeout=60)
    model = model_time(http, model_url, runs, pace)
    with ExitStack() as stack:
        agents = stack.enter_context(function_server(ROOT, "agents", env))[0]
        side = _Side(stack, http, model_url, agents, ROOT, env, shares)
        return {
            kind: side.streamed(side.timed(kind, runs, pace, gap), model) for kind in RUN_FUNCTIONS
        }


class Served(NamedTuple):
    """One side of a comparison: a checkout's streaming functions at their shares."""

    label: str
    root: Path
    env: dict[str, str]
    shares: dict[str, float | None]  # code folder: share (None: a full core)


def compared_streaming(
    sides: list[Served],
    model_url: str,
    runs: int,
    gap: float = 0.0,
    rounds: int = 4,
    pace: Pace | None = None,
) -> dict[str, list[tuple[Streamed, float]]]:
    """{run: [each side's (Streamed, ms added in its slowest round)]}: every side's streaming
    functions served at once, each in a cgroup of its share, over the same AWS and model; each
    kind's `runs` taken in `rounds` batches of each side, in turn. Rounds of one side minutes
    apart differ by more than most changes do; alternating, all sides meet the same sitting.
    `pace`: the model streams so in the timed runs."""
    import httpx

    http = httpx.Client(timeout=60)
    model = model_time(http, model_url, runs, pace)
    rounds = min(rounds, runs)
    batches = [runs // rounds + (r < runs % rounds) for r in range(rounds)]
    with ExitStack() as stack:
        agents = stack.enter_context(function_server(ROOT, "agents", sides[0].env))[0]
        served = [
            _Side(stack, http, model_url, agents, side.root, side.env, side.shares, tag)
            for tag, side in enumerate(sides)
        ]
        out = {}
        for kind in RUN_FUNCTIONS:
            taken: list[list] = [[] for _ in served]
            slowest = [0.0 for _ in served]
            for batch_runs in batches:
                for i, side in enumerate(served):
                    batch = side.timed(kind, batch_runs, pace, gap)
                    taken[i].extend(batch)
                    slowest[i] = max(slowest[i], _Side.streamed(batch, model).added)
            out[kind] = [
                (_Side.streamed(t, model), ms) for t, ms in zip(taken, slowest, strict=True)
            ]
    return out


class _Side:
    """One checkout's streaming functions, each in its cgroup, with their own sessions."""

    def __init__(
        self,
        stack: ExitStack,
        http,
        model_url: str,
        agents: str,
        root: Path,
        env: dict[str, str],
        shares: dict[str, float | None],
        tag: int = 0,
    ) -> None:
        urls = {"agents": agents}
        self.served: dict[str, tuple[int, Path | None]] = {}  # code folder: (pid, cgroup)
        for name, share in shares.items():
            group = stack.enter_context(cgroup(f"{name}-{tag}", share))
            urls[name], pid = stack.enter_context(function_server(root, name, env, joining(group)))
            self.served[name] = (pid, group)
        self.run = run = Runs(http, model_url, urls)
        plain, tooled = run.session(), run.session(client_tools=[CLIENT_TOOL])
        self.kinds = {
            "streamed turn": lambda i: run.turn(plain, f"q{i}"),
            "streamed response": lambda i: run.response(f"q{i}"),
            "resume": lambda i: run.resume(tooled, run.paused(tooled)),
        }
        self.warm: set[str] = set()

    def timed(
        self, kind: str, runs: int, pace: Pace | None, gap: float
    ) -> list[tuple[float, float, float, int]]:
        """(seconds to the first byte, to the end, of the function's CPU; periods throttled)
        of each of `runs` runs of `kind`, after three untimed ones the first time."""
        pid, group = self.served[RUN_FUNCTIONS[kind]]
        one = self.kinds[kind]
        if kind not in self.warm:
            self.run.pace = None
            for i in range(3):
                one(i)  # warm: each container's first requests build what they need
            self.warm.add(kind)
        self.run.pace = pace
        taken = []
        for i in range(runs):
            time.sleep(gap)
            cpu, throttled = cpu_seconds(pid)[1], throttled_periods(group)
            first, end = one(i)
            cpu = cpu_seconds(pid)[1] - cpu
            taken.append((first, end, cpu, throttled_periods(group) - throttled))
        return taken

    @staticmethod
    def streamed(taken: list[tuple[float, float, float, int]], model: float) -> Streamed:
        return Streamed(
            added=(statistics.median(t[1] for t in taken) - model) * 1000,
            first=statistics.median(t[0] for t in taken) * 1000,
            cpu=statistics.median(t[2] for t in taken) * 1000,
            throttled=statistics.mean(t[3] for t in taken),
        )


def throttled_periods(group: Path | None) -> int:
    """The periods in which `group` spent its quota and waited (cpu.stat; 0 for none)."""
    if group is None:
        return 0
    for line in (group / "cpu.stat").read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == "nr_throttled":
            return int(value)
    return 0


#: The streamed runs by the function that serves them (its code folder).
RUN_FUNCTIONS = {"streamed turn": "turns", "streamed response": "responses", "resume": "resume"}


def first_runs(
    env: dict[str, str],
    model_url: str,
    shares: dict[str, float | None],
    starts: int,
    kinds: tuple[str, ...] = tuple(RUN_FUNCTIONS),
    variants: tuple[str, ...] = tuple(INITS),
) -> dict[str, dict[str, tuple[float, float]]]:
    """{run: {variant: (init in seconds, ms its first run adds to the model's time)}}: a new
    container as on-demand Lambda starts one, `starts` fresh processes of the function each
    (medians). Its init runs unthrottled, as Lambda's on-demand init does (up to 10 s with a
    full vCPU whatever the memory; provisioned concurrency's init gets only its share), until
    it answers the Web Adapter's readiness check; then, moved to its share in `shares` (by code
    folder), it serves its first run. Each of `variants` is an init of `INITS`. The agents and
    turns functions that set runs up serve at a full core throughout."""
    import httpx

    http = httpx.Client(timeout=120)
    model = model_time(http, model_url, 5)
    out: dict[str, dict[str, tuple[float, float]]] = {kind: {} for kind in kinds}
    with ExitStack() as stack:
        urls = {
            name: stack.enter_context(function_server(ROOT, name, env))[0]
            for name in ("agents", "turns")
        }
        setup = Runs(http, model_url, urls)
        plain, tooled = setup.session(), setup.session(client_tools=[CLIENT_TOOL])
        for kind in kinds:
            name = RUN_FUNCTIONS[kind]
            for variant in variants:
                inits, taken = [], []
                for i in range(starts):
                    paused = setup.paused(tooled) if name == "resume" else None
                    fresh = {**env, **INITS[variant]}
                    with cgroup(f"first-{name}", shares[name]) as group:
                        start = time.perf_counter()
                        with function_server(ROOT, name, fresh) as (url, pid):
                            http.get(f"{url}/")  # the Web Adapter's readiness check ends init
                            inits.append(time.perf_counter() - start)
                            if group is not None:
                                (group / "cgroup.procs").write_text(str(pid))
                            run = Runs(http, model_url, {**urls, name: url})
                            if name == "turns":
                                taken.append(run.turn(plain, f"first {i}")[1])
                            elif name == "responses":
                                taken.append(run.response(f"first {i}")[1])
                            else:
                                taken.append(run.resume(tooled, paused)[1])
                added = (statistics.median(taken) - model) * 1000
                out[kind][variant] = (statistics.median(inits), added)
    return out


#: Where a machine names its own certificates (this one names the system's); Lambda sets none.
CERTIFICATE_VARIABLES = ("AWS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


def function_env(
    aws_endpoint: str, model_url: str, layer: Path, bundle: Path | None = None
) -> dict[str, str]:
    """The environment the functions run with here, their AWS made ready; their init is an
    on-demand one's (primed, as in Lambda), their layer `layer` (built, as deployed), and their
    certificates the layer's directory of certifi's bundle, as in Lambda (`bundle`: the TLS
    fronts' CA with it, added to that directory)."""
    use_in_process(aws_endpoint, model_url)
    env = {k: v for k, v in os.environ.items() if k not in CERTIFICATE_VARIABLES}
    env.pop("POWERTOOLS_METRICS_DISABLED", None)  # on in Lambda: each run writes its count
    env["AWS_LAMBDA_INITIALIZATION_TYPE"] = "on-demand"
    env["LAYER_PYTHON_DIR"] = str(layer)
    if bundle is not None:
        import certificate_directory  # beside build_layer, which built_layer loaded

        certificate_directory.write(bundle, layer / "agents_core" / "certificates")
    prepare_aws(env)
    return env


@contextmanager
def tls_fronts(aws_endpoint: str, model_url: str) -> Iterator[tuple[str, str, Path]]:
    """(the moto server's HTTPS endpoint, the model's HTTPS URL, the CA bundle that trusts
    them: certifi's with the fronts' CA): a `tls_front.py` process before each."""
    import tempfile
    from urllib.parse import urlsplit, urlunsplit

    from tls_front import write_certificates

    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        chain, key = write_certificates(Path(folder))
        urls = []
        for url in (aws_endpoint, model_url):
            parts = urlsplit(url)
            front = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "tls_front.py"), str(parts.port)]
                + [str(chain), str(key)],
                stdout=subprocess.PIPE,
                text=True,
            )
            stack.callback(front.terminate)
            port = int(front.stdout.readline())
            urls.append(urlunsplit(("https", f"localhost:{port}", parts.path, "", "")))
        yield urls[0], urls[1], Path(folder) / "bundle.pem"


class AtMemory(NamedTuple):
    """One memory size as bench/cost.py's table by MemorySize shows it."""

    init: float  # s: a new turns container's init, unthrottled as on demand (primed, connected)
    first_turn: float  # ms its first turn adds at the size's share
    instant: dict[str, tuple[Streamed, float]]  # run: (figures, ms added in its slowest round)
    paced: dict[str, tuple[Streamed, float]] | None  # the same against the paced model


def at_memories(
    sizes: list[int], env: dict[str, str], model_url: str, runs: int, pace: Pace | None = None
) -> dict[int, AtMemory]:
    """{MB: AtMemory}: every streaming function at each size's share. The streamed runs of all
    sizes are served at once and timed in alternating rounds (`compared_streaming`), since
    sizes timed one after another minutes apart differ by the sitting as much as by the share;
    each size's new containers are started after."""
    names = [f.code.name for f in template_functions() if f.streaming]
    shares = {mb: {name: cpu_share(mb) for name in names} for mb in sizes}
    sides = [Served(f"{mb} MB", ROOT, env, shares[mb]) for mb in sizes]
    instant = compared_streaming(sides, model_url, runs)
    paced = compared_streaming(sides, model_url, runs, pace=pace) if pace else None
    out = {}
    for i, mb in enumerate(sizes):
        first = first_runs(env, model_url, shares[mb], 3, ("streamed turn",), ("connected",))
        init, first_turn = first["streamed turn"]["connected"]
        out[mb] = AtMemory(
            init,
            first_turn,
            {kind: figures[i] for kind, figures in instant.items()},
            {kind: figures[i] for kind, figures in paced.items()} if paced else None,
        )
    return out


def main() -> None:
    global PERIOD_US
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each streamed kind")
    parser.add_argument("--inits", type=int, default=2, help="cold inits per function")
    parser.add_argument(
        "--paced", action="store_true", help="also with a model that streams as hosted ones do"
    )
    parser.add_argument(
        "--period-ms", type=float, default=PERIOD_US / 1000, help="the cgroups' CFS period"
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="AWS and the model behind TLS fronts, as in AWS (bench/tls_front.py)",
    )
    parser.add_argument(
        "--gap-ms",
        type=float,
        nargs="*",
        default=[20, 300],
        help="also runs after each of these idle times (none: not)",
    )
    parser.add_argument(
        "--first", type=int, default=3, help="fresh processes for each first-run figure (0: none)"
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="only the streamed runs at the share: this checkout's beside DIR's, served at once"
        " and timed in alternating rounds",
    )
    parser.add_argument(
        "--memory",
        type=int,
        nargs="+",
        metavar="MB",
        help="only the streamed runs: this checkout's streaming functions at each of these"
        " sizes' shares, served at once and timed in alternating rounds",
    )
    args = parser.parse_args()
    if args.compare and args.memory:
        parser.error("--compare and --memory: one comparison at a time")
    PERIOD_US = int(args.period_ms * 1000)
    functions = template_functions()
    compile_bytecode(ROOT)
    layer = built_layer(ROOT)
    confine = cgroups_writable()
    if not confine:
        print(f"no writable cpu cgroup at {CGROUPS}: figures at a full core only")
    with moto_and_model() as (aws_endpoint, model_url), ExitStack() as stack:
        if args.tls:
            aws_https, model_https, bundle = stack.enter_context(
                tls_fronts(aws_endpoint, model_url)
            )
            os.environ.update(AWS_CA_BUNDLE=str(bundle), SSL_CERT_FILE=str(bundle))
            env = function_env(aws_https, model_https, layer, bundle)
            print(f"AWS and the model over TLS (fronts at {aws_https} and {model_https})")
        else:
            env = function_env(aws_endpoint, model_url, layer)
        streaming = [f for f in functions if f.streaming]
        shares = {f.code.name: f.share for f in streaming}
        if args.memory and not confine:
            print("--memory compares CPU shares: it needs a writable cpu cgroup")
            return
        if args.compare or args.memory:
            if not confine:  # no cgroup: both checkouts at a full core
                shares = dict.fromkeys(shares)
            if args.compare:
                compile_bytecode(args.compare)
                other_env = {**env, "LAYER_PYTHON_DIR": str(built_layer(args.compare))}
                sides = [
                    Served(str(args.compare), args.compare, other_env, shares),
                    Served("this checkout", ROOT, env, shares),
                ]
            else:
                sides = [
                    Served(f"{mb} MB", ROOT, env, {name: cpu_share(mb) for name in shares})
                    for mb in args.memory
                ]
            print_compared(sides, model_url, args.runs, args.gap_ms)
            return
        if args.inits:
            print_cold_inits(functions, env, args.inits, confine)
        sizes = ", ".join(f"{f.code.name} {f.memory_mb} MB = {f.share:.3f}" for f in streaming)
        print(
            f"streaming functions ({sizes} of a CPU; CFS period {PERIOD_US / 1000:g} ms),"
            f" medians of {args.runs} runs: ms added to the model's own time, ms to the first"
            " byte; a model that answers at once, so each run's CPU is spent in one go"
        )
        side_by_side = partial(print_side_by_side, env, model_url, shares, args.runs, confine)
        side_by_side()
        for gap_ms in args.gap_ms:
            print(
                f"the same, each run after the function idled {gap_ms:g} ms (as a run finds a"
                " container whose last run ended before: its share of a period unspent)"
            )
            side_by_side(gap=gap_ms / 1000)
        if args.first:
            print_first_runs(env, model_url, shares, args.first, confine)
        if args.paced:
            pace = Pace()
            print(f"the same with a model that streams as hosted ones do ({pace}):")
            side_by_side(pace=pace)


def print_compared(sides: list[Served], model_url: str, runs: int, gaps_ms: list[float]) -> None:
    """`compared_streaming` back to back and after each gap, printed."""
    print(
        f"streamed runs at their shares, {', '.join(side.label for side in sides)}, served at"
        f" once and timed in alternating rounds (medians of {runs}): ms added to the model's own"
        " time, and in the slowest round; ms of CPU a run, periods throttled a run"
    )
    width = 31
    for gap_ms in [0.0, *gaps_ms]:
        print(f"  {'back to back' if not gap_ms else f'{gap_ms:g} ms apart'}")
        print(f"    {'':<18}" + "   ".join(f"{side.label:>{width}}" for side in sides))
        print(
            f"    {'':<18}"
            + "   ".join(f"{'added':>7}{'slowest':>8}{'CPU':>6}{'throttled':>10}" for _ in sides)
        )
        compared = compared_streaming(sides, model_url, runs, gap=gap_ms / 1000)
        for kind, figures in compared.items():
            cells = "   ".join(
                f"{f.added:>7.1f}{slowest:>8.1f}{f.cpu:>6.2f}{f.throttled:>10.1f}"
                for f, slowest in figures
            )
            print(f"    {kind:<18}{cells}")


def print_side_by_side(
    env: dict[str, str],
    model_url: str,
    shares: dict[str, float],
    runs: int,
    confine: bool,
    pace: Pace | None = None,
    gap: float = 0.0,
) -> None:
    """The streaming figures at a full core and, where a cgroup can be written, at each
    function's share, printed side by side."""
    full = streaming_figures(env, model_url, dict.fromkeys(shares), runs, pace, gap)
    confined = streaming_figures(env, model_url, shares, runs, pace, gap) if confine else None
    print_streaming(full, confined)


def print_cold_inits(
    functions: list[Function], env: dict[str, str], inits: int, confine: bool
) -> None:
    print(
        f"cold init, median seconds of {inits} fresh processes (import: importing"
        " app.py; uvicorn: run.sh's uvicorn until it answers GET /); on demand Lambda runs"
        " init at a full core, provisioned concurrency at the share"
    )
    print(
        f"  {'function':<21}{'memory':>8}{'share':>7}  {'init':<8}"
        f"{'at share':>10}{'full core':>11}{'ratio':>8}"
    )
    measured: dict[tuple, tuple[float | None, float, str]] = {}
    for f in functions:
        key = (f.code, f.web_adapter, f.memory_mb)
        if key not in measured:
            full = statistics.median(cold_init(f, env, None) for _ in range(inits))
            at_share = None
            if confine:
                with cgroup("init", f.share) as group:
                    taken = [cold_init(f, env, group) for _ in range(inits)]
                at_share = statistics.median(taken)
            measured[key] = (at_share, full, f.name)
        at_share, full, first = measured[key]
        there = "-" if at_share is None else f"{at_share:.2f}"
        ratio = "-" if at_share is None else f"{at_share / full:.1f}x"
        same = "" if first == f.name else f"  (as {first}: same code and memory)"
        print(
            f"  {f.name:<21}{f.memory_mb:>5} MB{f.share:>7.3f}  "
            f"{'uvicorn' if f.web_adapter else 'import':<8}"
            f"{there:>10}{full:>11.2f}{ratio:>8}{same}"
        )


def print_first_runs(
    env: dict[str, str], model_url: str, shares: dict[str, float], starts: int, confine: bool
) -> None:
    full = first_runs(env, model_url, dict.fromkeys(shares), starts)
    confined = first_runs(env, model_url, shares, starts) if confine else None
    print(
        f"a new container as on-demand Lambda starts one (medians of {starts} fresh processes):"
        " its init unthrottled (Lambda's init burst), then its first run at its share, ms added"
        " to the model's own time; lazy leaves to the first run what primed builds at init, and"
        " primed the connections that connected opens at init (as deployed without SnapStart)"
    )
    print(
        f"  {'':<18}{'init (s)':<16}{'first run':>11}{'cold start':>12}"
        f"{'first run at full core':>24}"
    )
    for kind, figures in full.items():
        for i, variant in enumerate(INITS):
            init, first = (confined or full)[kind][variant]
            at_share = "-" if confined is None else f"{first:,.0f}"
            total = "-" if confined is None else f"{init * 1000 + first:,.0f}"
            print(
                f"  {kind if i == 0 else '':<18}{variant:<10}"
                f"{init:>6.2f}{at_share:>11}{total:>12}{figures[variant][1]:>24.0f}"
            )


def print_streaming(full: dict[str, Streamed], confined: dict[str, Streamed] | None) -> None:
    """Each figure at the share beside a full core's; a run's CPU and its throttled periods
    tell its latency at the share apart from AWS's and the model's time (back to back, a run
    adds about its CPU at the share divided by the share)."""
    print(
        f"  {'':<18}{'added at share':>15}{'full core':>11}{'first byte at share':>21}"
        f"{'full core':>11}{'CPU a run at share':>20}{'full core':>11}{'throttled a run':>17}"
    )
    for kind, f in full.items():
        at = confined[kind] if confined is not None else None
        shown = (
            ("-",) * 4
            if at is None
            else (f"{at.added:.1f}", f"{at.first:.1f}", f"{at.cpu:.2f}", f"{at.throttled:.1f}")
        )
        print(
            f"  {kind:<18}{shown[0]:>15}{f.added:>11.1f}{shown[1]:>21}{f.first:>11.1f}"
            f"{shown[2]:>20}{f.cpu:>11.2f}{shown[3]:>17}"
        )


if __name__ == "__main__":
    main()
