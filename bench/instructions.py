"""Instructions per streamed turn, per streamed response and per resume, each function served as
its run.sh serves it (bench/cpu_profile.py's `Bench`) under valgrind's callgrind, counted only
while the runs are measured; AWS (moto) and the model run outside it.

CPU time on a shared virtual machine moves by half a millisecond a run between sittings, as
much as a small change saves; the user-space instructions a run executes are the same from run
to run (within about 0.3% here), so a change of 1% shows. They leave out what the kernel does
(system calls, about a tenth of a run's CPU here) and what cache misses cost: read them beside
`bench/cpu_profile.py`'s CPU, not instead. `--compare DIR` counts another checkout (its
functions/ and layers/) in the same run, over the same peers.

Also each function's init, as Lambda runs one on demand: run.sh's server, from the layer as
built (`peers.built_layer`, as `lambda_share.py` runs it: what the build prunes or adds, such
as the directory of certificates, is as deployed), importing app.py (which builds its services
and primes them), connecting, until it answers the readiness check, counted whole; on this machine's CPU a billion instructions
of an init take about 0.35 s of CPU (the turns function's 2.5 billion, 0.9 s). `--no-init` leaves it out (each takes about 40 s under valgrind).

    .venv/bin/python bench/instructions.py [--runs 20] [--compare /tmp/old] [--no-init]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
from cpu_profile import ROOT, Bench, Meter, function_server
from lambda_share import function_env
from peers import built_layer, compile_bytecode, moto_and_model

FUNCTIONS = ("turns", "responses", "resume")
LABELS = ("streamed turn (one session)", "streamed response", "resume (one session)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each kind counted")
    parser.add_argument(
        "--compare", type=Path, default=None, help="another checkout, counted alongside"
    )
    parser.add_argument(
        "--init", action=argparse.BooleanOptionalAction, default=True, help="count inits too"
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("instructions: valgrind is not installed (apt-get install valgrind); skipped")
        return
    roots = [root for root in (args.compare, ROOT) if root is not None]
    with (
        tempfile.TemporaryDirectory() as out,
        moto_and_model() as (aws_endpoint, model_url),
        ExitStack() as stack,
    ):
        for n, root in enumerate(roots):
            counts = count(args, root, Path(out) / str(n), aws_endpoint, model_url, stack)
            print(f"{root}: millions of instructions per run ({args.runs} runs each)")
            for label, value in zip(LABELS, counts, strict=True):
                print(f"  {label:<30} {value / 1e6:8.2f}")
        if args.init:
            for root in roots:
                compile_bytecode(root)  # as the layer ships it
            layers = {root: built_layer(root) for root in roots}
            print("millions of instructions of an init (run.sh's server from the built layer,")
            print("primed as in Lambda, until it answers the readiness check)")
            inits = {
                root: init_counts(root, layers[root], Path(out), aws_endpoint, model_url)
                for root in roots
            }
            for name in FUNCTIONS:
                each = "  ".join(f"{inits[root][name] / 1e6:8.0f}" for root in roots)
                print(f"  {name:<30} {each}   ({', '.join(map(str, roots))})")


def count(
    args: argparse.Namespace, root: Path, out: Path, aws_endpoint: str, model_url: str, stack
) -> list[float]:
    """Instructions per run of each kind on `root`'s functions."""
    out.mkdir()
    prefixes = {
        name: [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}/{name}.%p",
            f"--log-file={out}/{name}.log",
        ]
        for name in FUNCTIONS
    }
    # One session of a warm-up run and the counted ones.
    runs_of_one_session = argparse.Namespace(runs=args.runs + 1, repeat=1)
    bench = Bench(runs_of_one_session, root, aws_endpoint, model_url, stack, prefixes)
    counts = []
    for kind, name in enumerate(FUNCTIONS):
        pid = str(bench.pids[name])
        meter = Meter(bench.pids[name])
        meter.counting = False
        runs = bench.runs(kind, meter)
        next(runs)  # a session made and warm before counting starts
        control("--zero", pid)
        control("--instr=on", pid)
        left = args.runs
        while left:
            next(runs)
            left -= 1
        time.sleep(0.3)  # what the server does after the stream ends (lifecycle events)
        control("--instr=off", pid)
        counts.append(dumped(out, name, pid) / args.runs)
    return counts


def init_counts(
    root: Path, layer: Path, out: Path, aws_endpoint: str, model_url: str
) -> dict[str, int]:
    """Instructions of each function's init on `root`, as Lambda runs one on demand: run.sh's
    server started from the built `layer` (importing app.py primes the services; the lifespan
    connects to AWS and the model) until it answers the Web Adapter's readiness check, GET /.
    Certificates are the layer's (Lambda sets no variable naming others)."""
    env = function_env(aws_endpoint, model_url, layer)
    counted = {}
    for name in FUNCTIONS:
        prefix = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}/init-{root.name}-{name}.%p",
            f"--log-file={out}/init-{root.name}-{name}.log",
        ]
        with function_server(root, name, env, prefix=prefix) as (url, pid):
            httpx.get(f"{url}/", timeout=60)
            counted[name] = dumped(out, f"init-{root.name}-{name}", str(pid))
    return counted


def control(option: str, pid: str) -> None:
    subprocess.run(
        ["callgrind_control", option, pid],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # "sending command ..."
    )


def dumped(out: Path, name: str, pid: str) -> int:
    """The instructions counted since the counters were zeroed, from a dump asked for now
    (callgrind writes it as `<name>.<pid>.<n>`, once the process next runs)."""
    before = set(out.glob(f"{name}.{pid}.*"))
    control("--dump", pid)
    for _ in range(600):
        new = set(out.glob(f"{name}.{pid}.*")) - before
        if new:
            text = new.pop().read_text()
            for line in text.splitlines():
                if line.startswith("totals:"):
                    return int(line.split()[1])
        time.sleep(0.1)
    raise RuntimeError(f"callgrind wrote no dump of {name} (pid {pid}) in {out}")


if __name__ == "__main__":
    sys.exit(main())
