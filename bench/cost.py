"""Cost model: what 1M agent turns and 1M Responses API calls cost on AWS, from what the functions
measurably do, next to Amazon Bedrock AgentCore Runtime's compute price for the same work.

Measured here: each function runs as Lambda runs it (its `app` under uvicorn, in a process of
its own) over a moto server in another process and a local OpenAI-compatible model in a third,
so the function's process CPU time (/proc/<pid>/stat) is the engine's own work: HTTP serving,
JSON and pydantic, reading the model's stream, botocore building and parsing DynamoDB and
EventBridge requests, logging; moto's and the model's work are not in it. CPU time is taken
with long model replies (--chunks deltas) and with 3-delta ones, which splits it into a fixed
part per run and a part per streamed delta. The function process records its AWS requests and
their answers, from which the item sizes and DynamoDB request units come. Also measured: its
peak RSS, the log bytes it prints, the bytes it streams to the caller.

Priced: Lambda duration at each function's MemorySize in template.yaml (Lambda bills the time a
function waits on the model: duration = model time + the fixed CPU work at that memory's CPU
share + AWS round trips; the per-delta work runs while the model streams, and counts only where
it outlasts the model), Lambda and API Gateway requests, DynamoDB request units, EventBridge
events, CloudWatch Logs ingestion, X-Ray traces, data transfer out. Prices are constants below
with their date and region; CPU times are this machine's (Lambda's arm64 cores may differ).

    .venv/bin/python bench/cost.py [--turns 200] [--chunks 250]
    .venv/bin/python bench/cost.py --rag-only   # the file search and ingestion model alone
    .venv/bin/python bench/cost.py --by-memory 10 [--paced]   # by MemorySize, at each share
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from lambda_share import cpu_share, template_memory
from peers import built_layer, compile_bytecode, free_port, moto_and_model, wait_for_port

ROOT = Path(__file__).resolve().parent.parent

# ---- Prices: us-east-1, arm64, on-demand, first tier, in USD per unit. Lambda, API Gateway and
# ---- DynamoDB checked against their AWS pricing pages on 2026-11-22; the others are AWS's
# ---- long-standing list prices. AgentCore Runtime's as issue 16 quotes them.
PRICES_DATE = "2026-11-22, us-east-1"
LAMBDA_GB_SECOND = 0.0000133334  # arm64, first 7.5 billion GB-s a month
LAMBDA_REQUEST = 0.20 / 1e6
APIGW_REST_REQUEST = 3.50 / 1e6  # first 333M a month; a streamed response: 1 per 10 MB
DDB_WRITE_UNIT = 0.625 / 1e6  # on-demand write request unit (1 KB; 2 in a transaction)
DDB_READ_UNIT = 0.125 / 1e6  # on-demand read request unit (4 KB consistent; half eventual)
DDB_STORAGE_GB_MONTH = 0.25 + 0.20  # standard table class, plus point-in-time recovery
EVENTBRIDGE_EVENT = 1.00 / 1e6  # custom event (64 KB)
SQS_REQUEST = 0.40 / 1e6  # standard queue (64 KB)
LOGS_INGEST_GB = 0.50  # CloudWatch Logs, standard class
XRAY_TRACE = 5.00 / 1e6  # traces recorded
DATA_OUT_GB = 0.09  # to the internet, first 10 TB a month
ALARM_MONTH = 0.10
METRIC_MONTH = 0.30  # a custom metric (EMF) for a month
SECRET_MONTH = 0.40
# Amazon Bedrock AgentCore Runtime: CPU only while it computes (not while waiting on I/O),
# memory for the whole time.
AGENTCORE_VCPU_HOUR = 0.0895
AGENTCORE_GB_HOUR = 0.00945

# ---- Lambda facts and assumptions
AWS_WAIT_MS = 40  # assumed: 3 DynamoDB round trips and a PutEvents at in-region latencies
XRAY_SAMPLED = 0.05  # X-Ray's default rule at volume: 1 request a second, then 5%
COLD_START_SHARE = 0.01  # assumed share of invocations that start a new container (init billed)
PLATFORM_LOG_BYTES = 350  # Lambda's START/END/REPORT lines per invocation
ACCESS_LOG_BYTES = 650  # one access log line of template.yaml's format, as rendered
WEB_ADAPTER_MB = 15  # the Lambda Web Adapter extension's memory, beside the app
# The goal (issue 16): 1M turns of 10 s model time no dearer than AgentCore at 1 GB, 0.1 s CPU.
AGENTCORE_REFERENCE = {"memory_gb": 1.0, "cpu_seconds": 0.1}
MEMORY_SIZES = (128, 160, 192, 208, 216, 224, 256, 384, 512, 1024)
#: `--by-memory`: the sizes measured at their CPU share (bench/lambda_share.py), and the goals.
MEASURED_SIZES = (128, 192, 216, 256, 384, 512, 768, 1024, 1769)
GOAL_ADDED_MS, GOAL_INIT_S, GOAL_LAMBDA_USD = 50, 1.0, 29.0
MODEL_SECONDS = (2.0, 10.0)

# The function process: its app served as run.sh serves it, plus a recorder of DynamoDB and
# EventBridge calls, dumped (pickled) to the file named in argv when it receives SIGUSR1.
LAUNCHER = """
import pickle, signal, sys
import uvicorn
import app
from agents_core import aws

calls = []

def before(params, model, context, **_):
    context["bench_params"] = params

def after(parsed, model, context, **_):
    calls.append((model.service_model.service_name, model.name, context.get("bench_params"), parsed))

def recorded(client, service):
    client.meta.events.register(f"before-parameter-build.{service}", before)
    client.meta.events.register(f"after-call.{service}", after)
    return client

made = aws.client
aws.client = lambda service, **kwargs: recorded(made(service, **kwargs), service)  # made later
recorded(app.services.dynamodb, "dynamodb")

def dump(signum, frame):
    with open(sys.argv[2] + ".tmp", "wb") as out:
        pickle.dump(calls, out)
    calls.clear()
    import os
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])

signal.signal(signal.SIGUSR1, dump)
uvicorn.run(app.app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            access_log=False, timeout_keep_alive=300)
"""


class FunctionProcess:
    """One function's app in a process of its own, its output in a file (the CloudWatch log),
    importing this checkout's agents_core (the virtualenv's editable install may name
    another's)."""

    def __init__(self, name: str, env: dict[str, str], workdir: Path) -> None:
        self.name = name
        self.port = free_port()
        self.calls_file = workdir / f"{name}.calls"
        self.log = workdir / f"{name}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(self.port), str(self.calls_file)],
            cwd=ROOT / "functions" / name,
            env={**env, "PYTHONPATH": str(ROOT / "layers" / "agents_core")},
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, self.proc)
        self.url = f"http://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024

    def log_bytes(self) -> int:
        return self.log.stat().st_size

    def take_calls(self) -> list[tuple]:
        """The AWS calls the process made since the last take."""
        self.calls_file.unlink(missing_ok=True)
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(100):
            if self.calls_file.exists():
                return pickle.loads(self.calls_file.read_bytes())
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not dump its calls")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


# ---- DynamoDB item sizes and request units (DynamoDB developer guide: item sizes, capacity)


def value_size(value: dict) -> int:
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode())
    if kind == "N":
        digits = data.lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in data)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in data.items())
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: v}) for v in data)
    raise ValueError(kind)


def item_size(item: dict | None) -> int:
    return sum(len(name.encode()) + value_size(v) for name, v in (item or {}).items())


INDEXES = (("GSI1PK", "GSI1SK"), ("GSI2PK", "GSI2SK"))


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def index_units(item: dict | None, size: int) -> int:
    """Writes to the global secondary indexes (projection ALL) an item with their keys costs."""
    return sum(write_units(size) for keys in INDEXES if all(k in (item or {}) for k in keys))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return units if consistent else units / 2


@dataclass
class Units:
    requests: dict[str, int] = field(default_factory=dict)
    write: float = 0.0
    read: float = 0.0
    events: int = 0
    written_sizes: dict[str, list[int]] = field(default_factory=dict)  # item kind: sizes
    write_by: dict[str, float] = field(default_factory=dict)  # "operation item-kind": units


def item_kind(item: dict) -> str:
    """The kind of an item, from its sort key's prefix (docs/storage.md)."""
    sk = (item.get("SK") or {}).get("S", "?")
    return re.split(r"[#:]", sk, maxsplit=1)[0] or sk


def request_units(calls: list[tuple], final: dict[tuple, dict]) -> Units:
    """Request units of the recorded calls. An update is priced at the larger of the item before
    (when returned) and after (`final`: the table as it ended)."""
    out = Units()

    def key(k: dict) -> tuple:
        return (k["PK"]["S"], k["SK"]["S"])

    def written(item: dict | None, size: int, factor: int) -> None:
        units = factor * write_units(size) + index_units(item, size)
        out.write += units
        where = f"{op} {item_kind(item) if item else '?'}"
        out.write_by[where] = out.write_by.get(where, 0) + units
        if item:
            out.written_sizes.setdefault(item_kind(item), []).append(size)

    def updated(k: dict, returned: dict | None, factor: int) -> None:
        item = final.get(key(k), returned)
        written(item, max(item_size(returned), item_size(item)), factor)

    for service, op, params, parsed in calls:
        out.requests[op] = out.requests.get(op, 0) + 1
        if service == "events":
            out.events += len(params["Entries"])
            continue
        consistent = bool(params.get("ConsistentRead"))
        if op == "GetItem":
            out.read += read_units(item_size(parsed.get("Item")), consistent)
        elif op == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                asked = params["RequestItems"][table]
                out.read += sum(
                    read_units(item_size(i), asked.get("ConsistentRead")) for i in items
                )
                out.read += read_units(0, True) * (len(asked["Keys"]) - len(items))
        elif op == "Query":
            total = sum(item_size(i) for i in parsed.get("Items", []))
            out.read += read_units(total, consistent)
        elif op == "PutItem":
            written(params["Item"], item_size(params["Item"]), 1)
        elif op == "UpdateItem":
            # The item after the update, as large as before plus what it sets at most (the
            # table's final state may have lost it since: a lock's running turn, say).
            before = parsed.get("Attributes")
            values = params.get("ExpressionAttributeValues", {}).values()
            after = item_size(before) + sum(value_size(v) for v in values)
            item = final.get(key(params["Key"]), before)
            written(item, max(after, item_size(item)), 1)
        elif op == "DeleteItem":
            updated(params["Key"], parsed.get("Attributes"), 1)
        elif op == "BatchWriteItem":
            for requests in params["RequestItems"].values():
                for request in requests:
                    if "PutRequest" in request:
                        item = request["PutRequest"]["Item"]
                        written(item, item_size(item), 1)
                    else:
                        updated(request["DeleteRequest"]["Key"], None, 1)
        elif op == "TransactWriteItems":
            for action in params["TransactItems"]:
                ((kind, body),) = action.items()
                if kind == "Put":
                    written(body["Item"], item_size(body["Item"]), 2)
                else:  # Update, Delete, ConditionCheck: priced as a transactional write
                    updated(body["Key"], None, 2)
        elif op == "TransactGetItems":
            for response in parsed.get("Responses", []):
                out.read += 2 * read_units(item_size(response.get("Item")), True)
        else:
            raise ValueError(f"no pricing for DynamoDB {op}")
    return out


# ---- The measured run


@dataclass
class Measured:
    label: str
    runs: int
    cpu_ms: float  # per run, at one full vCPU of this machine
    cpu_ms_short: float  # per run, with a 3-chunk model reply (the fixed part)
    first_cpu_ms: float  # the first run after start (lazy imports and connections)
    init_cpu_ms: float  # from process start to serving (a cold start's init)
    peak_rss_mb: float
    log_bytes: float  # per run
    streamed_bytes: float  # per run, to the caller
    units: Units  # per run (divide by runs)
    stored_bytes: float  # per run, table and indexes, with DynamoDB's 100 bytes per item


def scan(dynamodb, table: str) -> dict[tuple, dict]:
    items = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            items[(item["PK"]["S"], item["SK"]["S"])] = item
    return items


def stored_bytes(items: dict[tuple, dict]) -> int:
    total = 0
    for item in items.values():
        size = item_size(item) + 100
        total += size * (1 + sum(all(k in item for k in keys) for keys in INDEXES))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns (and responses) measured")
    parser.add_argument("--per-session", type=int, default=10, help="turns per session")
    parser.add_argument("--chunks", type=int, default=250, help="deltas in each model reply")
    parser.add_argument("--rag-only", action="store_true", help="only the RAG cost model")
    parser.add_argument(
        "--by-memory",
        type=int,
        default=0,
        metavar="RUNS",
        help="only the table by MemorySize, RUNS turns measured at each size's CPU share",
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=list(MEASURED_SIZES),
        metavar="MB",
        help="--by-memory: the sizes measured",
    )
    parser.add_argument(
        "--paced",
        action="store_true",
        help="--by-memory also against a model that streams as hosted ones do",
    )
    args = parser.parse_args()
    if args.rag_only:
        rag_report()
        return
    if args.by_memory:
        by_memory(args.by_memory, args.paced, tuple(args.sizes))
        return

    import boto3

    work = Path(tempfile.mkdtemp(prefix="cost-bench-"))
    functions: dict[str, FunctionProcess] = {}
    with moto_and_model() as (endpoint, model_url):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OPENAI_"))},
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "TABLE_NAME": "cost-bench",
            "EVENT_BUS_NAME": "cost-bench",
            "OPENAI_BASE_URL": model_url,
            "POWERTOOLS_SERVICE_NAME": "serverless-agents",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
        try:
            session = boto3.Session(
                aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
            )
            dynamodb = session.client("dynamodb", endpoint_url=endpoint)
            from agents_core.lifecycle import ensure_event_bus
            from agents_core.store.schema import create_table_if_missing

            create_table_if_missing(dynamodb, env["TABLE_NAME"])
            ensure_event_bus(session.client("events", endpoint_url=endpoint), env["EVENT_BUS_NAME"])
            for name in ("agents", "turns", "responses"):
                functions[name] = FunctionProcess(name, env, work)
            tables = measure(args, functions, model_url, dynamodb, env["TABLE_NAME"])
            report(args, *tables)
        finally:
            for function in functions.values():
                function.stop()
            shutil.rmtree(work, ignore_errors=True)


@dataclass
class Crud:
    """The agents function (buffered CRUD): CPU per request after the first few, peak RSS."""

    cpu_ms: float
    peak_rss_mb: float


def measure(args, functions, model_url, dynamodb, table) -> tuple[Measured, Measured, Crud]:
    import json

    import httpx

    http = httpx.Client(timeout=60)
    agents, turns_fn, responses_fn = functions["agents"], functions["turns"], functions["responses"]
    init = {name: f.cpu_seconds() * 1000 for name, f in functions.items()}
    text = "lorem ipsum dolor sit amet, " * (args.chunks // 6 + 1)

    def reply(chunks: int) -> None:
        body = {"text": text[: 4 * chunks], "chunks": chunks}
        http.post(f"{model_url}/_replies", json=body).raise_for_status()

    crud_cpu: list[float] = []  # CPU seconds of each request

    def crud(method: str, path: str, **kwargs) -> dict:
        before = agents.cpu_seconds()
        resp = http.request(method, f"{agents.url}{path}", **kwargs)
        resp.raise_for_status()
        crud_cpu.append(agents.cpu_seconds() - before)
        return resp.json()

    config = {"model": "bench", "instructions": "Be brief.", "enable_session_persistence": True}
    agent = crud("POST", "/v1/agents", json={"agent_config": config})["agent_id"]

    def streamed(url: str, body: dict) -> tuple[int, str]:
        """Bytes of a streamed POST, and its first data line."""
        size, first = 0, ""
        with http.stream("POST", url, json=body) as resp:
            resp.raise_for_status()
            for line in resp.iter_lines():
                size += len(line) + 1
                if not first and line.startswith("data: "):
                    first = line
        return size, first

    def run_turns(count: int, chunks: int) -> int:
        sent, session = 0, None
        for n in range(count):
            if n % args.per_session == 0:
                if session:  # read back the finished session, turns and all
                    crud("GET", f"/v1/agents/{agent}/session/{session}")
                path = f"/v1/agents/{agent}/session"
                session = crud("POST", path, json={"session_name": "s"})["session_id"]
            reply(chunks)
            url = f"{turns_fn.url}/v1/agents/{agent}/session/{session}/turn"
            body = {"messages": [{"role": "user", "content": f"question {n}: " + text[:80]}]}
            sent += streamed(url, {**body, "stream": True})[0]
        return sent

    def run_responses(count: int, chunks: int) -> int:
        sent, previous = 0, None
        for n in range(count):
            reply(chunks)
            body = {"model": "bench", "input": f"question {n}: " + text[:80], "stream": True}
            if n % args.per_session:
                body["previous_response_id"] = previous
            url = f"{responses_fn.url}/v1/openai/v1/responses"
            size, first = streamed(url, body)
            previous = json.loads(first[6:])["response"]["id"]
            sent += size
        return sent

    results = []
    for label, fn, run in (
        ("turn", turns_fn, run_turns),
        ("response", responses_fn, run_responses),
    ):
        before = fn.cpu_seconds()
        run(1, args.chunks)
        first = (fn.cpu_seconds() - before) * 1000
        run(9, args.chunks)  # warm: connections, caches
        short = fn.cpu_seconds()
        run(args.turns // 2, 3)
        short = (fn.cpu_seconds() - short) * 1000 / (args.turns // 2)
        fn.take_calls()
        stored_before = stored_bytes(scan(dynamodb, table))
        logs, cpu = fn.log_bytes(), fn.cpu_seconds()
        sent = run(args.turns, args.chunks)
        cpu = (fn.cpu_seconds() - cpu) * 1000 / args.turns
        logs = (fn.log_bytes() - logs) / args.turns
        final = scan(dynamodb, table)
        units = request_units(fn.take_calls(), final)
        results.append(
            Measured(
                label=label,
                runs=args.turns,
                cpu_ms=cpu,
                cpu_ms_short=short,
                first_cpu_ms=first,
                init_cpu_ms=init[fn.name],
                peak_rss_mb=fn.peak_rss_mb(),
                log_bytes=logs,
                streamed_bytes=sent / args.turns,
                units=units,
                stored_bytes=(stored_bytes(final) - stored_before) / args.turns,
            )
        )
    warm = crud_cpu[3:]  # the first requests import and connect
    crud = Crud(sum(warm) * 1000 / len(warm), agents.peak_rss_mb())
    return results[0], results[1], crud


# ---- Pricing


def added_seconds(m: Measured, model_seconds: float, memory_mb: int) -> float:
    """What a run adds to the model's time at this memory. The fixed work (the request, the
    DynamoDB writes, the event) runs before and after the model at this memory's CPU share;
    the per-delta work runs while the model streams and adds only what it does not hide."""
    share = cpu_share(memory_mb)
    fixed = m.cpu_ms_short / 1000 / share
    streaming = (m.cpu_ms - m.cpu_ms_short) / 1000 / share
    return fixed + max(0.0, streaming - model_seconds) + AWS_WAIT_MS / 1000


def lambda_compute(m: Measured, model_seconds: float, memory_mb: int) -> float:
    """Lambda duration and requests for 1M runs; the share of cold starts adds its init (run at
    full speed: Lambda does not throttle an on-demand init) and the slower first run."""
    gb = memory_mb / 1024
    warm = (model_seconds + added_seconds(m, model_seconds, memory_mb)) * gb
    first = max(0.0, m.first_cpu_ms - m.cpu_ms) / 1000 / cpu_share(memory_mb)
    cold = COLD_START_SHARE * (m.init_cpu_ms / 1000 + first) * gb
    return 1e6 * ((warm + cold) * LAMBDA_GB_SECOND + LAMBDA_REQUEST)


def agentcore(memory_gb: float, cpu_seconds: float, model_seconds: float) -> float:
    """AgentCore Runtime compute for 1M runs: CPU while computing, memory the whole time."""
    hours = (model_seconds + cpu_seconds) / 3600
    return 1e6 * (cpu_seconds / 3600 * AGENTCORE_VCPU_HOUR + hours * memory_gb * AGENTCORE_GB_HOUR)


def price_lines(m: Measured, model_seconds: float, memory_mb: int) -> list[tuple[str, float]]:
    """(what, USD for 1M runs)."""
    u, per = m.units, 1e6 / m.runs
    logs = m.log_bytes + PLATFORM_LOG_BYTES + ACCESS_LOG_BYTES
    return [
        (
            f"Lambda duration + requests ({memory_mb} MB)",
            lambda_compute(m, model_seconds, memory_mb),
        ),
        ("API Gateway REST requests", 1e6 * APIGW_REST_REQUEST),
        ("DynamoDB write request units", per * u.write * DDB_WRITE_UNIT),
        ("DynamoDB read request units", per * u.read * DDB_READ_UNIT),
        ("EventBridge events", per * u.events * EVENTBRIDGE_EVENT),
        ("CloudWatch Logs ingestion", 1e6 * logs / 1e9 * LOGS_INGEST_GB),
        (f"X-Ray traces ({XRAY_SAMPLED:.0%} sampled)", 1e6 * XRAY_SAMPLED * XRAY_TRACE),
        ("Data transfer out (the stream)", 1e6 * m.streamed_bytes / 1e9 * DATA_OUT_GB),
    ]


def by_memory(runs: int, paced: bool = False, sizes: tuple[int, ...] = MEASURED_SIZES) -> None:
    """For each size: Lambda's compute for 1M streamed turns at 2 s and 10 s of model time,
    from a turn's added latency measured at that size's CPU share (every size served at once,
    runs taken in alternating rounds: lambda_share.at_memories), and a new turns container
    as on-demand Lambda starts one: its init unthrottled (whatever the size) and its first turn
    at the share (bench/lambda_share.py's cgroups). `paced`: also what a turn adds against a
    model that streams as hosted ones do (lambda_share.Pace), where the instant model is the
    worst case. Beside them, what a streamed response and a resume add at the same share (their
    functions' sizes follow the same measure; their Lambda costs as a turn's at equal time)."""
    import lambda_share

    if not lambda_share.cgroups_writable():
        print(f"no writable cpu cgroup at {lambda_share.CGROUPS}: --by-memory needs one")
        return
    pace = lambda_share.Pace() if paced else None
    compile_bytecode()
    print(
        "streamed turns by MemorySize, measured at each size's CPU share (medians; every size"
        " served at once, runs taken in alternating rounds; slowest: the slowest round's)"
    )
    if pace:
        print(f"  paced: added against a model that streams as hosted ones do ({pace})")
    print(
        f"  {'memory':>7}{'share':>7}{'added':>10}{'slowest':>9}{'paced' if pace else '':>10}"
        f"{'first byte':>12}{'init':>8}{'first turn':>12}{'USD/1M, 2 s':>13}{'USD/1M, 10 s':>14}"
        f"{'response':>10}{'resume':>9}  goals"
    )
    with moto_and_model() as (aws_endpoint, model_url):
        env = lambda_share.function_env(aws_endpoint, model_url, built_layer())
        measured = lambda_share.at_memories(list(sizes), env, model_url, runs, pace)
    for mb, at in measured.items():
        turn, slowest = at.instant["streamed turn"]
        paced_ms = f"{at.paced['streamed turn'][0].added:>7.0f} ms" if at.paced else ""
        usd = [
            1e6 * ((s + turn.added / 1000) * mb / 1024 * LAMBDA_GB_SECOND + LAMBDA_REQUEST)
            for s in MODEL_SECONDS
        ]
        met = [
            ("latency", turn.added <= GOAL_ADDED_MS),
            ("init", at.init <= GOAL_INIT_S),
            ("cost", usd[-1] <= GOAL_LAMBDA_USD),
        ]
        if at.paced:
            met.insert(1, ("paced", at.paced["streamed turn"][0].added <= GOAL_ADDED_MS))
        goals = " ".join(f"{what} {'ok' if ok else 'no'}" for what, ok in met)
        print(
            f"  {mb:>4} MB{cpu_share(mb):>7.3f}{turn.added:>8.0f} ms{slowest:>6.0f} ms{paced_ms:>10}"
            f"{turn.first:>9.0f} ms{at.init:>6.2f} s{at.first_turn:>9.0f} ms"
            f"{usd[0]:>13.2f}{usd[1]:>14.2f}"
            f"{at.instant['streamed response'][0].added:>7.0f} ms"
            f"{at.instant['resume'][0].added:>6.0f} ms  {goals}"
        )


def report(args, turns: Measured, responses: Measured, crud: Crud) -> None:
    memory = template_memory()
    print(f"cost model: 1M runs, prices of {PRICES_DATE}, arm64 Lambda")
    print(
        f"measured over {args.turns} runs each (sessions or chains of {args.per_session}), model"
        f" replies of {args.chunks} deltas, each function in its own process over moto"
    )
    for m, function in ((turns, "TurnsFunction"), (responses, "ResponsesFunction")):
        u = m.units
        requests = ", ".join(f"{op} {n / m.runs:.2f}" for op, n in sorted(u.requests.items()))
        sizes = ", ".join(
            f"{kind} {statistics.median(found) / 1024:.1f} KB"
            for kind, found in sorted(u.written_sizes.items())
        )
        print(f"\n{m.label}s ({function}, MemorySize {memory[function]} MB in template.yaml)")
        print(
            f"  CPU per {m.label}: {m.cpu_ms:.1f} ms, of which {m.cpu_ms_short:.1f} ms fixed (the"
            f" same with a 3-delta reply); first after start +{m.first_cpu_ms - m.cpu_ms:.0f} ms;"
            f" init {m.init_cpu_ms:.0f} ms; peak RSS {m.peak_rss_mb:.0f} MB"
        )
        print(f"  AWS requests per {m.label}: {requests}")
        print(
            f"  DynamoDB per {m.label}: {u.write / m.runs:.1f} WRU, {u.read / m.runs:.1f} RRU;"
            f" items written (median): {sizes}; stored +{m.stored_bytes / 1024:.1f} KB"
        )
        by = ", ".join(f"{w} {n / m.runs:.1f}" for w, n in sorted(u.write_by.items()))
        print(f"  write units by request and item: {by}")
        print(
            f"  logs {m.log_bytes + PLATFORM_LOG_BYTES + ACCESS_LOG_BYTES:.0f} B (the app's"
            f" {m.log_bytes:.0f}), streamed to the caller {m.streamed_bytes / 1024:.1f} KB"
        )
        heading = "".join(f"{f'model {s:g} s':>13}" for s in MODEL_SECONDS)
        print(f"  {'USD per 1M ' + m.label + 's':<44}{heading}")
        table = [price_lines(m, s, memory[function]) for s in MODEL_SECONDS]
        for row in range(len(table[0])):
            print(f"  {table[0][row][0]:<44}" + "".join(f"{t[row][1]:13.2f}" for t in table))
        print(f"  {'total':<44}" + "".join(f"{sum(v for _, v in t):13.2f}" for t in table))
        storage = 1e6 * m.stored_bytes / 1e9 * DDB_STORAGE_GB_MONTH
        print(f"  and DynamoDB storage (with backups): {storage:.2f} USD a month per 1M kept")
        print(
            f"  by MemorySize: Lambda USD per 1M at model 10 s; latency added to a {m.label}"
            f" (fixed CPU + AWS); first {m.label} of a container"
        )
        for mb in MEMORY_SIZES:
            first = m.first_cpu_ms / 1000 / cpu_share(mb)
            fits = "" if m.peak_rss_mb + WEB_ADAPTER_MB < 0.8 * mb else "  (memory tight)"
            print(
                f"    {mb:5d} MB {lambda_compute(m, 10.0, mb):8.2f}"
                f" {added_seconds(m, 10.0, mb) * 1000:8.0f} ms {first:8.2f} s{fits}"
            )

    print("\ncompute for 1M turns of 10 s model time: Lambda vs Amazon Bedrock AgentCore Runtime")
    ours = lambda_compute(turns, 10.0, memory["TurnsFunction"])
    ref = agentcore(AGENTCORE_REFERENCE["memory_gb"], AGENTCORE_REFERENCE["cpu_seconds"], 10.0)
    same = agentcore(max(0.128, turns.peak_rss_mb / 1024), turns.cpu_ms / 1000, 10.0)
    print(f"  Lambda at {memory['TurnsFunction']} MB (template.yaml): {ours:.2f} USD")
    print(f"  AgentCore at 1 GB and 0.1 s CPU a turn (the goal's reference): {ref:.2f} USD")
    print(
        f"  AgentCore at this engine's footprint ({turns.peak_rss_mb:.0f} MB,"
        f" {turns.cpu_ms:.0f} ms CPU a turn): {same:.2f} USD"
    )
    print(f"  goal, Lambda <= the reference: {'ok' if ours <= ref else 'OVER GOAL'}")
    alarms = (ROOT / "template.yaml").read_text().count("Type: AWS::CloudWatch::Alarm")
    fixed = alarms * ALARM_MONTH + 8 * METRIC_MONTH + SECRET_MONTH
    print(
        f"\nfixed, monthly: {alarms} alarms, about 8 custom metrics, a secret: {fixed:.2f} USD."
        f" A resume through the queue adds 3 SQS requests ({3e6 * SQS_REQUEST:.2f} USD per 1M)."
    )
    at = memory["AgentsFunction"]
    print(
        f"agents function (CRUD): {crud.cpu_ms:.1f} ms CPU a request, peak RSS"
        f" {crud.peak_rss_mb:.0f} MB; at {at} MB that is"
        f" {crud.cpu_ms / cpu_share(at):.0f} ms of its latency"
    )
    print()
    rag_report()


# ---- Files, vector stores and file search (issue 15): priced from the sizes they move, not
# ---- measured on AWS. S3 Vectors' and Titan's prices as stated below; the rest as above.
S3V_PRICES_SOURCE = (
    "S3 Vectors: PUT $0.20/GB and storage $0.06/GB-month as third-party pages quote AWS's"
    " S3 pricing page (Caylent's article as news.najib.digital copies it; exploreagentic.ai,"
    " 2025-2026); $2.50 per million queries and"
    " $0.004 per TB processed (indexes under 100,000 vectors) recalled from that page, not found"
    " in a stored copy: check https://aws.amazon.com/s3/pricing/ (Vectors tab). Titan Text"
    " Embeddings V2 $0.00002 per 1,000 input tokens (Bedrock pricing page, recalled). S3 Standard"
    " PUT $0.005 per 1,000 and $0.023/GB-month, SQS and Lambda as above. As of 2026-11-22,"
    " us-east-1."
)
S3V_PUT_GB = 0.20
S3V_STORAGE_GB_MONTH = 0.06
S3V_QUERY = 2.50 / 1e6
S3V_QUERY_TB = 0.004
TITAN_V2_1K_TOKENS = 0.00002
S3_PUT = 0.005 / 1000
S3_STORAGE_GB_MONTH = 0.023
# Assumptions of the model (stated in what it prints).
RAG_CHARS_PER_TOKEN = 4
RAG_CHUNK_TOKENS, RAG_OVERLAP_TOKENS = 800, 400  # OpenAI's default static chunking
RAG_DIMENSION = 1024  # Titan V2's default
RAG_FILE_MB = 1.0  # 100 MB arrives as 100 files
RAG_TITAN_SECONDS = 0.06  # one InvokeModel, in region (assumed)
RAG_EMBED_CONCURRENCY = 8  # EMBEDDING_CONCURRENCY's default
RAG_WORKER_MB = 512
RAG_SEARCH_FUNCTION_MB = 512
RAG_QUERY_SECONDS = 0.10  # S3 Vectors' warm query ("as low as 100 ms", its user guide)
RAG_QUERY_TOKENS = 20
RAG_INDEX_VECTORS = 10_000  # the store a search runs over


def rag_report() -> None:
    """What ingesting 100 MB of text and 1,000 searches cost, line by line."""
    text_bytes = 100 * 1e6
    tokens = text_bytes / RAG_CHARS_PER_TOKEN
    chunks = math.ceil(tokens / (RAG_CHUNK_TOKENS - RAG_OVERLAP_TOKENS))
    embedded_tokens = chunks * RAG_CHUNK_TOKENS
    files = math.ceil(100 / RAG_FILE_MB)
    chunk_text = RAG_CHUNK_TOKENS * RAG_CHARS_PER_TOKEN
    # A vector's logical size: its float32s, its key, its metadata (the chunk text and the
    # payload's other fields, the filterable keys).
    vector_bytes = 4 * RAG_DIMENSION + 40 + chunk_text + 400
    vectors_gb = chunks * vector_bytes / 1e9
    worker_seconds = chunks * RAG_TITAN_SECONDS / RAG_EMBED_CONCURRENCY
    ingest = [
        (
            f"Titan V2 embeddings ({embedded_tokens / 1e6:.0f}M tokens)",
            embedded_tokens / 1000 * TITAN_V2_1K_TOKENS,
        ),
        (f"S3 Vectors PUT ({vectors_gb * 1000:.0f} MB logical)", vectors_gb * S3V_PUT_GB),
        (f"S3 PUT of {files} files", files * S3_PUT),
        ("SQS (send, receive, delete a file)", files * 3 * SQS_REQUEST),
        (
            f"Lambda worker ({worker_seconds:.0f} s at {RAG_WORKER_MB} MB)",
            worker_seconds * RAG_WORKER_MB / 1024 * LAMBDA_GB_SECOND + files * LAMBDA_REQUEST,
        ),
        ("API Gateway (upload + attach a file)", files * 2 * APIGW_REST_REQUEST),
    ]
    monthly = vectors_gb * S3V_STORAGE_GB_MONTH + 0.1 * S3_STORAGE_GB_MONTH
    processed_tb = RAG_INDEX_VECTORS * (4 * RAG_DIMENSION + 40 + 200) / 1e12
    searches = [
        (
            f"Titan V2 query embeddings ({RAG_QUERY_TOKENS} tokens each)",
            1000 * RAG_QUERY_TOKENS / 1000 * TITAN_V2_1K_TOKENS,
        ),
        ("S3 Vectors QueryVectors requests", 1000 * S3V_QUERY),
        (
            f"S3 Vectors data processed ({RAG_INDEX_VECTORS:,} vectors an index)",
            1000 * processed_tb * S3V_QUERY_TB,
        ),
        (
            f"Lambda ({RAG_TITAN_SECONDS + RAG_QUERY_SECONDS:.2f} s a search at {RAG_SEARCH_FUNCTION_MB} MB)",
            1000
            * (RAG_TITAN_SECONDS + RAG_QUERY_SECONDS)
            * RAG_SEARCH_FUNCTION_MB
            / 1024
            * LAMBDA_GB_SECOND,
        ),
        ("API Gateway (a search request each)", 1000 * APIGW_REST_REQUEST),
    ]
    print("files and file search (issue 15): USD, priced from sizes and stated assumptions")
    print(f"  prices: {S3V_PRICES_SOURCE}")
    print(
        f"  ingesting 100 MB of text: {tokens / 1e6:.0f}M tokens at {RAG_CHARS_PER_TOKEN} characters"
        f" a token, {chunks:,} chunks of {RAG_CHUNK_TOKENS} tokens ({RAG_OVERLAP_TOKENS} overlap),"
        f" {RAG_DIMENSION}-dimension vectors of {vector_bytes / 1024:.1f} KB with their metadata"
    )
    for what, usd in ingest:
        print(f"    {what:<58}{usd:10.4f}")
    print(f"    {'total':<58}{sum(u for _, u in ingest):10.4f}")
    print(f"    {'and storage, a month (vectors + the files in S3)':<58}{monthly:10.4f}")
    print(f"  1,000 searches (top 10 over a {RAG_INDEX_VECTORS:,}-chunk store):")
    for what, usd in searches:
        print(f"    {what:<58}{usd:10.4f}")
    print(f"    {'total':<58}{sum(u for _, u in searches):10.4f}")


if __name__ == "__main__":
    main()
