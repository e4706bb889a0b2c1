"""Start `functions/local/server.py` in a subprocess, as `make run` does, for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import httpx

from .lambda_support import ROOT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_server(extra_env: dict[str, str] | None = None):
    """Yield (base_url, first stdout line); AWS is embedded moto unless told otherwise."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"PORT": str(port), "PYTHONUNBUFFERED": "1"}, **(extra_env or {}))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "functions" / "local" / "server.py")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        banner = proc.stdout.readline()
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {banner}{proc.stdout.read()}")
            try:
                httpx.get(f"{base}/v1/agents", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield base, banner
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
