"""What a TLS client context costs, at a full core and at the streaming functions' 216 MB share.

Each HTTPS client that builds its own context loads its CA bundle (certifi's: some 140 roots)
into it. A new container's first run made three such clients in AWS (DynamoDB, EventBridge, an
HTTPS model), and every tool call (MCP, web search, a document fetch) one more, each an
httpx client with its own context; they now share one (`http1.tls_context`), which a primed
init (SnapStart) builds before the snapshot. Printed, medians of fresh processes (each figure
is a first load, as in a new container), ms:

- loading certifi's bundle into a new context (`ssl.create_default_context`);
- creating an httpx.AsyncClient as httpx does by default, and with the shared context.

    .venv/bin/python bench/tls_context.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from lambda_share import cgroup, cgroups_writable, cpu_share, joining

_PROBE = """
import time, ssl, certifi, httpx
t = time.perf_counter(); shared = ssl.create_default_context(cafile=certifi.where())
load = time.perf_counter() - t
t = time.perf_counter(); httpx.AsyncClient()
own = time.perf_counter() - t
t = time.perf_counter(); httpx.AsyncClient(verify=shared)
reused = time.perf_counter() - t
print(load * 1000, own * 1000, reused * 1000)
"""


def figures(share: float | None, runs: int) -> list[float]:
    """Medians of (bundle load, httpx client with its own context, with the shared one)."""
    taken = []
    with cgroup("tls", share) as group:
        for _ in range(runs):
            done = subprocess.run(
                [sys.executable, "-c", _PROBE],
                capture_output=True,
                text=True,
                check=True,
                preexec_fn=joining(group),
            )
            taken.append([float(v) for v in done.stdout.split()])
    return [statistics.median(column) for column in zip(*taken, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    args = parser.parse_args()
    shares = {"full core": None}
    if cgroups_writable():
        shares["216 MB (0.122)"] = cpu_share(216)
    else:
        print("no writable cpu cgroup: figures at a full core only")
    print(f"ms, medians of {args.runs} fresh processes")
    print(f"  {'':<16}{'CA bundle load':>16}{'httpx client, own':>20}{'shared context':>16}")
    for label, share in shares.items():
        load, own, reused = figures(share, args.runs)
        print(f"  {label:<16}{load:>16.1f}{own:>20.1f}{reused:>16.2f}")


if __name__ == "__main__":
    main()
