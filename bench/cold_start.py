"""Cold start: import-and-init time of each function's handler module, next to its libraries alone.

Each figure is the median over fresh Python processes (a new process is what a Lambda cold
start pays for). The baseline imports fastapi, botocore's session (the functions make their
clients without boto3), mangum and aws_lambda_powertools and nothing else; the goal is each
handler at most 1.3x that baseline. Init here is not primed (Services.prime, which Lambda's
init adds: bench/lambda_share.py measures that). Last, what the tool runtime
adds when it is imported, what the MCP client adds at a container's first MCP operation, and what
the authorizer adds at its first JWT.

    .venv/bin/python bench/cold_start.py [--runs 9]
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

BASELINE = "import fastapi, botocore.session, mangum, aws_lambda_powertools"

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

# What the tool runtime adds to a function that already has the base modules every handler
# imports: importing `agents_core.tools` (what the agent loop imports), and the MCP client, which
# is imported at a container's first MCP operation.
BASE_MODULES = f"{BASELINE}; import agents_core.log, agents_core.errors, agents_core.settings"
EXTRAS = [
    ("+ agents_core.tools", f"{BASE_MODULES}; import agents_core.tools"),
    (
        "+ the MCP client (at the first MCP operation)",
        f"{BASE_MODULES}; import agents_core.tools._http, mcp.client.session,"
        " mcp.client.streamable_http",
    ),
    # The authorizer loads PyJWT (with cryptography) and httpx only when a JWT arrives: its
    # cold start with keys only is the handler's figure above; with a JWT, this much more.
    (
        "+ a JWT's first check (PyJWT, cryptography, httpx)",
        f"{BASE_MODULES}; import agents_core.auth.tokens, jwt, jwt.algorithms, httpx",
    ),
]

TIMED = """
import time
t0 = time.perf_counter()
exec(compile({code!r}, "<bench>", "exec"))
print(time.perf_counter() - t0)
"""


def measure(code: str, args: list[str], env: dict[str, str]) -> float:
    """Seconds one fresh process takes to run `code` (imports and init)."""
    out = subprocess.run(
        [sys.executable, "-c", TIMED.format(code=code), *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs

    # What Lambda sets; no AWS call happens at init, so fake credentials suffice. Bytecode is
    # written (any value of PYTHONDONTWRITEBYTECODE stops it), as the layer ships it.
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "TABLE_NAME": "bench",
    }
    handlers = sorted((ROOT / "functions").glob("*/app.py"))
    candidates = (
        [("baseline", BASELINE, [])]
        + [(f"functions/{path.parent.name}/app.py", HANDLER, [str(path)]) for path in handlers]
        + [("base modules", BASE_MODULES, [])]
        + [(name, code, []) for name, code in EXTRAS]
    )
    for _, code, args in candidates:  # warm the filesystem cache and bytecode once
        measure(code, args, env)
    # Round after round, each candidate once: a machine busier at one moment than another
    # weighs on the baseline and the handlers alike.
    samples: dict[str, list[float]] = {name: [] for name, _, _ in candidates}
    for _ in range(runs):
        for name, code, args in candidates:
            samples[name].append(measure(code, args, env))
    baseline = statistics.median(samples["baseline"])
    print(f"cold start, median of {runs} fresh processes each (goal: handler <= {GOAL}x baseline)")
    print(f"  {'baseline (fastapi, botocore, mangum, powertools)':<48} {baseline * 1000:7.1f} ms")
    for name, _, _ in candidates[1 : len(handlers) + 1]:
        took = statistics.median(samples[name])
        ratio = took / baseline
        verdict = "ok" if ratio <= GOAL else "OVER GOAL"
        print(f"  {name:<48} {took * 1000:7.1f} ms  {ratio:4.2f}x  {verdict}")
    print("the tool runtime, over the baseline and agents_core's base modules (not at init)")
    for name, _ in EXTRAS:
        added = statistics.median(samples[name]) - statistics.median(samples["base modules"])
        print(f"  {name:<48} {added * 1000:+7.1f} ms")


if __name__ == "__main__":
    main()
