"""Cold start: import-and-init time of each function's handler module, next to its libraries alone.

Each figure is the median over fresh Python processes (a new process is what a Lambda cold
start pays for). The baseline imports fastapi, boto3, mangum and aws_lambda_powertools and
nothing else; the goal is each handler at most 1.3x that baseline.

    .venv/bin/python bench/cold_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.3

BASELINE = "import fastapi, boto3, mangum, aws_lambda_powertools"

# Import the module from its file as Lambda does (the handler's module-level code is its init).
# Streaming functions have no handler: the Web Adapter starts uvicorn, which imports `app`.
HANDLER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
if not hasattr(module, "handler"):
    import uvicorn
assert callable(getattr(module, "handler", None) or module.app)
"""

TIMED = """
import time
t0 = time.perf_counter()
exec(compile({code!r}, "<bench>", "exec"))
print(time.perf_counter() - t0)
"""


def measure(code: str, args: list[str], runs: int, env: dict[str, str]) -> float:
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", TIMED.format(code=code), *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs

    # What Lambda sets; no AWS call happens at init, so fake credentials suffice.
    env = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "TABLE_NAME": "bench",
        "PYTHONDONTWRITEBYTECODE": "0",
    }
    handlers = sorted((ROOT / "functions").glob("*/app.py"))
    measure(BASELINE, [], 1, env)  # warm the filesystem cache and bytecode once
    for path in handlers:
        measure(HANDLER, [str(path)], 1, env)

    baseline = measure(BASELINE, [], runs, env)
    print(f"cold start, median of {runs} fresh processes (goal: handler <= {GOAL}x baseline)")
    print(f"  {'baseline (fastapi, boto3, mangum, powertools)':<48} {baseline * 1000:7.1f} ms")
    for path in handlers:
        took = measure(HANDLER, [str(path)], runs, env)
        ratio = took / baseline
        verdict = "ok" if ratio <= GOAL else "OVER GOAL"
        name = f"functions/{path.parent.name}/app.py"
        print(f"  {name:<48} {took * 1000:7.1f} ms  {ratio:4.2f}x  {verdict}")


if __name__ == "__main__":
    main()
